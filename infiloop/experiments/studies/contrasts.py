"""The recorded calibration search for the paper's central contrast at CPU scale (docs/calibration.md).

The paper's phenomenon: on puzzles that need search, carry-last (TRM) peaks and then loses solved
boards as it runs past its training depth, its state still changing by about 10 % per update after the
solve, while InfiLoop keeps rising and freezes once solved (the paper's Fig. 1). Each candidate
row below is a setting under which that contrast might appear on a CPU: task and difficulty, width,
block, recursion per segment (H, L), supervision segments, training length. For each row both
connections are trained with identical settings (nothing tuned for one), through the run cache, and
evaluated to 60x the training depth (H x max_segments outer updates). The search is a study declared as
data (:func:`contrast_study`) and run by the studies' one mechanism (``study.py``). A row's results go to
``results/calibration/<row>.json`` (:func:`results_folder`); :func:`render` writes the search table of
``docs/calibration.md`` from those files. The rows are declared in ``contrast_rows.py``; the evidence over the
recorded rows, and docs/results.md's block of it, in ``contrast_drift.py``.

    python -m infiloop contrasts --list                    # the rows, their settings and cost
    python -m infiloop contrasts search6-2500 easy-700     # run rows by name (cached runs are reused)
    python -m infiloop contrasts search6-2500 --seeds 0,1,2 --jobs 2
    python -m infiloop contrasts --render                  # only rewrite the table from the results
    python -m infiloop contrasts --render --results docs/calibration-results --readme docs/results.md
                                                             # the recorded rows: docs and the README's table
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import numpy as np

from ... import paths, tasks
from ...analysis import trajectories as analysis
from ..compute.scheduler import job_name
from ..notebooks.manifest import Job
from ..settings import profiles
from . import study
from .contrast_drift import cell, render_readme
from .contrast_rows import (
    BASE_PROFILE,
    CONNECTIONS,
    DATA_SETS,
    RECORDED,
    ROWS,
    as_built,
    check_row,
    depths,
    estimated_seconds,
    row_config,
    row_data,
    row_overrides,
    row_profile,
    row_task,
)
from .study import Model, Study

DOC = paths.DOCS / "calibration.md"


# ------------------------------------------------------------------------------------------ one model


def _number(x: float) -> float | None:
    """NaN (nothing to average: no puzzle solved) as None, which JSON can hold."""
    return None if np.isnan(x) else x


def connection_metrics(traj: dict, training_depth: int) -> dict:
    """The search table's numbers for one trained model, from a trajectory recorded at every update to
    at least 60x the training depth: exact accuracy at the recorded depths, the peak and where, the mean
    relative state change per update after the first solve, and the fraction solved then lost."""
    at = {k: analysis.accuracy_at(traj, u) for k, u in depths(training_depth).items()}
    peak_update, peak = analysis.best_depth(traj)
    return {"training_depth": training_depth, "depths": depths(training_depth), "exact": at,
            "peak": peak, "peak_update": peak_update,
            "state_change_after_solve": _number(analysis.state_change_after_solve(traj)),
            "lost_after_solve": _number(analysis.lost_after_solve(traj)),
            "solved_ever": float((traj["first_solve"] > 0).mean()), "puzzles": int(traj["correct"].shape[1])}


def eval_args(run, row: dict) -> dict:
    """A row's evaluation of a trained run: every update to 60x the training depth, on ``limit`` test puzzles
    (default: the profile's), with notebook 02's prediction snapshots, so that a profile's depth trajectory
    (960 = 60 x 16 updates, every update) is the same cache file and is read, not computed again."""
    updates = 60 * run.training_depth
    return {"updates": updates, "every": 1, "limit": row.get("limit"),
            "snapshots": tuple(u for u in run.standard_snapshots() if u <= updates)}


def model_record(model: Model, job: Job) -> dict:
    """One trained and evaluated model of a row (its scheduler jobs done): its metrics and wall times."""
    run = job.spec.run
    traj, path = run.evaluate(**job.eval.args, progress=False)  # the cache file the eval job wrote
    eval_s = _logged_seconds(run.dir / "logs" / f"{job_name(job)}.log")
    summary = run.summary()
    final = summary.get("final") or {}
    return {"row": model.row, "recipe": model.recipe, "seed": model.seed, "run": str(run.dir), "trajectory": path.name,
            **connection_metrics(traj, run.training_depth),
            "layers_per_update": run.model_config().layers_per_outer_update,
            "train_exact": final.get("exact_acc"), "train_seconds": summary.get("train_seconds"),
            "eval_seconds": eval_s, "eval_cached": job.done}


def _logged_seconds(log: Path) -> float | None:
    """The wall time a scheduler job wrote as the end of its log (``... in 736.6 s``), if there is one."""
    try:
        last = log.read_text(errors="replace").strip().splitlines()[-1]
    except (OSError, IndexError):
        return None
    m = re.search(r" in ([0-9.]+) s$", last)
    return float(m.group(1)) if m else None


# ------------------------------------------------------------------------------------------ rows and files


def results_folder() -> Path:
    """Where the rows' results go by default: ``results/calibration/`` (under ``paths.RESULTS``)."""
    return study.folder(STUDY)


def merge_record(rows: dict[str, dict], name: str, old: dict, rec: dict) -> dict:
    """A row's results file with one more model's record (kept: its other models, unless the row's settings
    changed; an evaluation time measured before, where this evaluation came from the cache)."""
    row = rows[name]
    by = old.get("results", {}) if old.get("settings") == row else {}
    seeds = by.setdefault(rec["recipe"], {})
    prev = seeds.get(str(rec["seed"]))
    if rec["eval_cached"] and prev and prev.get("trajectory") == rec["trajectory"]:
        rec = {**rec, "eval_seconds": prev["eval_seconds"]}
    seeds[str(rec["seed"])] = rec
    cfg = row_config(row)
    return {"row": name, "settings": row, "task": row_task(row), "profile": row_profile(row),
            "data": cfg["data"], "model": {k: cfg["model"][k] for k in ("d_model", "n_layers", "mixer", "H", "L")},
            "train": {k: cfg["train"][k] for k in ("steps", "max_segments", "batch_size", "lr")},
            "results": by, "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def row_models(rows: dict[str, dict], names: list[str], seeds: list[int] | None) -> list[Model]:
    """The models of the named rows: for each row, seed (``seeds``, else the row's own, [0]) and connection, the
    row's run with identical settings."""
    return [Model(n, row_task(rows[n]), recipe, row_profile(rows[n]), row_overrides(rows[n], seed), seed)
            for n in names for seed in (seeds if seeds is not None else rows[n].get("seeds", [0]))
            for recipe in CONNECTIONS]


def prepare_rows(rows: dict[str, dict], names: list[str], progress: bool) -> None:
    """Check the named rows (ValueError naming an unknown row or setting), then build every row's data before any
    job runs (generation uses every CPU by itself)."""
    for n in names:
        if n not in rows:
            raise ValueError(f"unknown calibration row {n!r}; rows: {', '.join(rows)}")
        check_row(n, rows[n])
    for n in names:
        tasks.build(row_task(rows[n]), profiles.data_of(row_profile(rows[n])), overrides=row_data(rows[n]) or None,
                    verbose=progress)


def run_rows(names: list[str], rows: dict[str, dict] | None = None, seeds: list[int] | None = None,
             jobs: int = 1, root: Path | None = None, results: Path | None = None,
             progress: bool = True) -> dict[str, dict]:
    """Run the named rows (both connections, each seed; ``seeds`` replaces each row's own list) through the study
    mechanism (``study.run``: the scheduler of ``./reproduce.sh``, ``jobs`` at a time, one torch thread each).
    Writes each row's results file and returns {row: results}; a model that fails is reported and the others go on
    (RuntimeError at the end, naming the failures). ``root``: the run cache (default ``paths.RUNS``);
    ``results``: the results folder (default :func:`results_folder`)."""
    return study.run(contrast_study(rows), names, seeds, jobs, root, results, progress)[1]


def _difficulty(data: dict, task: str = "sudoku") -> str:
    """The puzzles of a row's data settings, in words (``registry.Task.settings_text``)."""
    return tasks.registry.task(task).settings_text(data)


def render_table(results: Path | None = None, rows: dict[str, dict] | None = None) -> str:
    """The search table from the results files: a line per candidate and connection, in the order of
    ``ROWS`` (then any other results files by name)."""
    rows = ROWS if rows is None else rows
    results = results_folder() if results is None else Path(results)
    files = {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}
    order = [n for n in rows if n in files] + sorted(n for n in files if n not in rows)
    head = ("| candidate | task and difficulty | d | block x layers | H | L | segments (depth) | steps | connection "
            "| seeds | @0.5x | @1x | @4x | @60x | peak @ update | state change after solve | solved, then lost "
            "| train / eval min |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for n in order:
        r = files[n]
        m, t = r["model"], r["train"]
        for recipe in CONNECTIONS:
            recs = list(r["results"].get(recipe, {}).values())
            if not recs:
                continue
            depth = recs[0]["training_depth"]
            acc = [cell([x["exact"][k] for x in recs]) for k in ("0.5", "1", "4", "60")]
            peak = cell([x["peak"] for x in recs]) + f" @ {'/'.join(str(x['peak_update']) for x in recs)}"
            change = cell([x["state_change_after_solve"] for x in recs], 100, "{:.2g}")
            minutes = (f"{np.mean([x['train_seconds'] for x in recs]) / 60:.1f} / "
                       f"{np.mean([x['eval_seconds'] for x in recs]) / 60:.1f}")
            task = _difficulty(r["data"], r.get("task", "sudoku"))
            lines.append(
                f"| {n} | {task} | {m['d_model']} | {m['mixer']} x {m['n_layers']} | {m['H']} "
                f"| {m['L']} | {t['max_segments']} ({depth}) | {t['steps']:,} | "
                f"{recipe}{' (as built)' if recipe == 'infiloop' and as_built(r) else ''} | {len(recs)} "
                f"| {' | '.join(acc)} | {peak} | {change} "
                f"| {cell([x['lost_after_solve'] for x in recs])} | {minutes} |")
    if len(lines) == 2:
        lines.append("| (no results yet: `python -m infiloop contrasts ROW`) |" + " |" * (head.count("|") - 2))
    return "\n".join(lines)


def render_candidates(rows: dict[str, dict] | None = None) -> str:
    """The candidate rows as a table: settings and estimated cost (minutes per model, one thread), then
    the named data sets and the estimated total."""
    rows = ROWS if rows is None else rows
    lines = ["| candidate | settings (over `tiny`) | est. train + eval min per model |", "|---|---|---|"]
    total = 0.0
    for n, row in rows.items():
        train, ev = estimated_seconds(row)
        total += 2 * (train + ev)
        settings = ", ".join(f"{k}={json.dumps(v)}" for k, v in row.items()) or "the `tiny` profile"
        lines.append(f"| {n} | {settings} | {train / 60:.1f} + {ev / 60:.1f} |")
    lines += ["", f"Estimated total for one seed, both connections: {total / 3600:.1f} CPU hours "
              f"({total / 7200:.1f} hours with `--jobs 2`). Data sets:", "",
              "| data set | puzzles | training (base x views) / test |", "|---|---|---|"]
    for n in DATA_SETS:
        task = row_task({"data": n})
        cfg = {**profiles.data_of(BASE_PROFILE).tasks[task], **row_data({"data": n})}
        views = 1 + cfg.get("augment", 0)
        lines.append(f"| {n} | {_difficulty(cfg, task)} | {cfg['n_train']:,} x {views} / {cfg['n_test']:,} |")
    return "\n".join(lines)


START, END = "<!-- calibration-search: start -->", "<!-- calibration-search: end -->"
SECTION = """## The search for the paper's contrast (`python -m infiloop contrasts --list`)

Generated by `python -m infiloop contrasts --render` from `results/calibration/*.json`; re-run a row with
`python -m infiloop contrasts ROW`. Base: the `tiny` profile; every row trains carry-last and InfiLoop
with identical settings. All numbers are percentages. "@kx": exact accuracy on the test puzzles after k
times the training depth (H x segments outer updates); peak: the best recorded accuracy and the update
where it occurs (per seed); state change: mean relative change of the answer state per update after a
puzzle's first solve; solved, then lost: puzzles solved at some update but wrong at 60x; train / eval: wall
minutes per model (one thread). Several seeds: mean (range).
"""


def search_block(rows: dict[str, dict], results: Path) -> str:
    """The text of docs/calibration.md's block: the search table from a results folder, then the candidates."""
    return (f"{render_table(results, rows)}\n\nThe candidates (`python -m infiloop contrasts --list`):\n\n"
            f"{render_candidates(rows)}\n")


def contrast_study(rows: dict[str, dict] | None = None) -> Study:
    """The search as a study: its candidate rows (default :data:`ROWS`), each trained for both connections with
    identical settings and evaluated to 60x the training depth (:func:`eval_args`), a results file per row
    (:func:`merge_record`), and docs/calibration.md's block."""
    rows = ROWS if rows is None else rows
    return Study(name="contrasts", models=partial(row_models, rows),
                 evaluation=lambda model, run: eval_args(run, rows[model.row]), record=model_record,
                 merge=partial(merge_record, rows), results="calibration", recorded=RECORDED, doc=DOC,
                 markers=(START, END), block=partial(search_block, rows), section=SECTION,
                 prepare=partial(prepare_rows, rows))


STUDY = contrast_study()


def render(results: Path | None = None, doc: Path = DOC, rows: dict[str, dict] | None = None) -> Path:
    """Write the search table into ``doc`` between its markers (appended with a heading the first time);
    the text above it is kept as it is."""
    return study.render(contrast_study(rows), results, doc)


# ------------------------------------------------------------------------------------------ command line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m infiloop contrasts", description=__doc__.split("\n\n")[0])
    p.add_argument("rows", nargs="*", metavar="ROW", help="candidate rows to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the rows with their settings and estimated cost")
    p.add_argument("--all", action="store_true", help="run every row")
    p.add_argument("--jobs", type=int, default=1, help="models trained at a time, one process and thread each")
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="training seeds, e.g. 0,1,2 (default: each row's own, [0])")
    p.add_argument("--render", action="store_true", help="only rewrite docs/calibration.md's table")
    p.add_argument("--root", type=Path, default=None, help=f"run cache (default {paths.RUNS})")
    p.add_argument("--results", type=Path, default=None, help=f"results folder (default {results_folder()})")
    p.add_argument("--doc", type=Path, default=DOC, help=f"document with the search table (default {DOC})")
    p.add_argument("--readme", type=Path, default=None,
                   help="also refill this page's drift block (between its calibration-drift markers), e.g. "
                        "docs/results.md")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        print(render_candidates(ROWS))
        return 0
    names = list(ROWS) if args.all else args.rows
    if not names and not args.render:
        p.error("name the rows to run (see --list), or --all, or --render")
    if names:
        try:
            run_rows(names, seeds=args.seeds, jobs=args.jobs, root=args.root, results=args.results)
        except (ValueError, RuntimeError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    print(f"wrote {render(args.results, args.doc)}")
    if args.readme is not None:
        try:
            print(f"wrote {render_readme(args.readme, args.results)}")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
