"""The recorded calibration search for the paper's central contrast at CPU scale (docs/calibration.md).

The paper's phenomenon: on puzzles that need search, carry-last (TRM) peaks and then loses solved
boards as it runs past its training depth, its state still changing by about 10 % per update after the
solve, while InfiLoop keeps rising and freezes once solved (the paper's Fig. 1). Each candidate
row below is a setting under which that contrast might appear on a CPU: task and difficulty, width,
block, recursion per segment (H, L), supervision segments, training length. For each row both
connections are trained with identical settings (nothing tuned for one), through the run cache, and
evaluated to 60x the training depth (H x max_segments outer updates). A row's results go to
``results/calibration/<row>.json`` (:func:`results_folder`); :func:`render` writes the search table of
``docs/calibration.md`` from those files.

    python -m infiloop contrasts --list                    # the rows, their settings and cost
    python -m infiloop contrasts search6-2500 easy-700     # run rows by name (cached runs are reused)
    python -m infiloop contrasts search6-2500 --seeds 0,1,2 --jobs 2
    python -m infiloop contrasts --render                  # only rewrite the table from the results
    python -m infiloop contrasts --render --results docs/calibration-results --readme docs/results.md
                                                             # the recorded rows: docs and the README's table
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ... import paths, tasks
from ...analysis import paper
from ...analysis import trajectories as analysis
from ...io import atomic_write_text, fill_block
from ...model.layers import swiglu_width
from ..compute.scheduler import job_name
from ..notebooks.manifest import EvalSpec, Job, RunSpec, jobs_for
from ..settings import profiles
from ..settings.recipes import resolve_config
from ..store.runs import resolve

DOC = paths.DOCS / "calibration.md"
RECORDED = paths.DOCS / "calibration-results"  # the rows run so far, kept with the code (docs/calibration.md)
CONNECTIONS = ("carry_last", "infiloop")
MULTIPLES = (0.5, 1, 4, 60)  # depths recorded, as multiples of the training depth
# The paper's TRM, against which the search is judged: its fall from the peak (Fig. 1a, points), the share of
# solved puzzles it loses (%; 19.7 after update 36, "15-20 %" under perturbation) and its state change per
# update after the solve (%).
PAPER_FALL = paper.FIG1A[0].accuracy - paper.FIG1A[1].accuracy
PAPER_LOST = 15.0
PAPER_CHANGE = paper.CARRY_LAST_DIAGNOSTICS["state_change_after_pct"]["TRM"]

# A row's settings, each optional (the base profile's value otherwise):
#   profile    base profile (default "tiny")
#   task       sudoku (default) or maze; a named data set may say it instead
#   data       a name in DATA_SETS, or data overrides (infiloop/tasks/datasets.py): Sudoku side, box, blanks,
#              needs_search, min_rating, n_train, ...; Maze size, min_path, n_train, ...
#   d_model, n_heads, n_layers, mixer ("mlp": TRM's token-mixing MLP, "attention"), H, L   the model
#   max_segments, steps                                  training depth is H x max_segments outer updates
#   overrides  any further dotted overrides (e.g. {"train.lr": 1e-3})
#   limit      test puzzles evaluated (default: the profile's, 256 at tiny); seeds: training seeds (default [0])
ROW_KEYS = {"d_model": "model.d_model", "n_heads": "model.n_heads", "n_layers": "model.n_layers",
            "mixer": "model.mixer", "H": "model.H", "L": "model.L", "max_segments": "train.max_segments",
            "steps": "train.steps"}
SETTINGS = {"profile", "task", "data", "overrides", "limit", "seeds", *ROW_KEYS}
TASKS = ("sudoku", "maze")
BASE_PROFILE = "tiny"  # the profile every row changes unless it names another

# Data sets a row names (or a row gives its own data overrides). Scaled-down analogues of Sudoku-Extreme:
# puzzles that naked and hidden singles do not solve (about 3 % of 6x6 candidates at 22-28 blanks, about
# 30 % of 9x9 ones at 50-60), 600 base puzzles x 5 views for training, 256 test puzzles.
DATA_SETS: dict[str, dict] = {
    "easy6": {},  # the tiny profile's: 6x6, blanks 14-22, every puzzle solved by singles
    "search6": {"blanks": [22, 28], "needs_search": True, "n_train": 600, "n_test": 256},
    "mixed6": {"blanks": [22, 28], "n_train": 600, "n_test": 256},  # the same blanks, no selection (mostly easy)
    "rated6": {"blanks": [22, 28], "min_rating": 1, "n_train": 600, "n_test": 256},  # at least one backtrack
    "search9": {"side": 9, "box": [3, 3], "blanks": [50, 60], "needs_search": True, "n_train": 600, "n_test": 256},
    # Mazes whose unique shortest path is near the longest the grid allows, as Maze-Hard keeps paths > 110 on
    # 30x30 (measured on 200 generated grids: the longest unique path from near one end has median 25 / 38 /
    # 44 moves at 8x8 / 10x10 / 12x12, 10th percentile 21 / 34 / 26); tiny's maze data is maze8 since row maze8-2500
    "maze8": {"task": "maze", "size": 8, "min_path": 20, "n_train": 1000, "n_test": 256},
    "maze10": {"task": "maze", "size": 10, "min_path": 32, "n_train": 1000, "n_test": 256},
    "maze12": {"task": "maze", "size": 12, "min_path": 36, "n_train": 1000, "n_test": 256},
}

# The candidate rows, cheapest first. Base: the tiny model (d = 64, token-mixing MLP, 2 layers, H = 2, L = 3,
# 8 segments: training depth 16, 700 steps). The minutes per model in the comments below (training +
# evaluation of 256 puzzles to 60x the training depth, one thread) predate TRM's 16-position prefix; with it
# a step costs about 2.5 times as much: `python -m infiloop contrasts --list` prints today's estimates
# (`estimated_seconds`), about 36 CPU hours for the whole list, one seed, both connections.
ROWS: dict[str, dict] = {
    # difficulty at the tiny budget: the tiny profile itself (singles solve every puzzle), puzzles that need
    # search, and the same blanks without selection                                             2.3 + 1.6 min each
    "easy-700": {},
    "search6-700": {"data": "search6"},
    "mixed6-700": {"data": "mixed6"},
    # recursion per segment: a single inner update                                                4.2 + 0.8 min
    "search6-L1": {"data": "search6", "steps": 2500, "L": 1},
    # training length and difficulty: the probe (search puzzles, 2,500 steps), its control without
    # selection, and a minimum rating (at least one solver backtrack) instead of the singles criterion
    #                                                                                             8.3 + 1.6 min each
    "search6-2500": {"data": "search6", "steps": 2500},
    "mixed6-2500": {"data": "mixed6", "steps": 2500},
    "rating6-2500": {"data": "rated6", "steps": 2500},
    # supervision segments: training depth 8 and 32 (the cost of a step does not change)     8.3 + 0.8 / 3.2 min
    "search6-seg4": {"data": "search6", "steps": 2500, "max_segments": 4},
    "search6-seg16": {"data": "search6", "steps": 2500, "max_segments": 16},
    # training depth 4: added after search6-seg4 moved carry-last towards the paper's picture (more state change
    # after the solve, more solved puzzles lost than at 8 segments)                                8.3 + 0.4 min
    "search6-seg2": {"data": "search6", "steps": 2500, "max_segments": 2},
    # block: attention (TRM's ARC and Maze block) instead of the token-mixing MLP                 8.4 + 1.6 min
    "search6-attn": {"data": "search6", "steps": 2500, "mixer": "attention"},
    # recursion per segment: three outer updates (depth 24)                                        9.7 + 2.4 min
    "search6-H3": {"data": "search6", "steps": 2500, "H": 3},
    # width 128                                                                                    13.3 + 2.5 min
    "search6-d128": {"data": "search6", "steps": 2500, "d_model": 128},
    # the paper's recursion per segment, H = 3, L = 6 (depth 24)                                 17.0 + 4.2 min
    "search6-H3L6": {"data": "search6", "steps": 2500, "H": 3, "L": 6},
    # over-trained: 6,000 steps                                                                   20.0 + 1.6 min
    "search6-6000": {"data": "search6", "steps": 6000},
    # the `search` profile itself (search6 puzzles, 1,500 steps) with its three seeds: after
    # `./reproduce.sh --profile search` its runs and depth trajectories are in the run cache (--root), so this
    # row computes nothing
    "search-profile": {"profile": "search", "seeds": [0, 1, 2]},
    # 9x9 puzzles that need search (50-60 blanks): attention, the tiny model, width 128, over-trained
    #                                                                        19.5 / 21.1 / 34.5 / 50.6 + 4-7 min
    "search9-attn": {"data": "search9", "steps": 2500, "mixer": "attention"},
    "search9-2500": {"data": "search9", "steps": 2500},
    "search9-d128": {"data": "search9", "steps": 2500, "d_model": 128},
    "search9-6000": {"data": "search9", "steps": 6000},
    # Maze at CPU scale (issue: all four benchmarks): long paths on small grids, attention (TRM's Maze block)
    # and the token-mixing MLP, then longer training and a larger grid
    "maze8-attn": {"data": "maze8", "steps": 2500, "mixer": "attention"},
    "maze8-2500": {"data": "maze8", "steps": 2500},
    # tiny's 700 steps on the same mazes: maze8-2500's training exact accuracy was already 0.90 / 0.65 at step 700
    # (the learning rate is constant after warm-up), so the Maze column may not need 2,500 steps
    "maze8-700": {"data": "maze8", "steps": 700},
    "maze8-attn-6000": {"data": "maze8", "steps": 6000, "mixer": "attention"},
    "maze10-attn": {"data": "maze10", "steps": 2500, "mixer": "attention"},
    "maze12-attn": {"data": "maze12", "steps": 2500, "mixer": "attention"},
}


# ------------------------------------------------------------------------------------------ rows


def check_row(name: str, row: dict) -> None:
    unknown = set(row) - SETTINGS
    if unknown:
        raise ValueError(f"calibration row {name!r}: unknown settings {sorted(unknown)}; known: {sorted(SETTINGS)}")
    row_data(row)
    if row_task(row) not in TASKS:
        raise ValueError(f"calibration row {name!r}: task {row_task(row)!r}; expected one of {', '.join(TASKS)}")


def _named(row: dict) -> dict:
    data = row.get("data", {})
    if isinstance(data, str):
        if data not in DATA_SETS:
            raise ValueError(f"unknown data set {data!r}; known: {', '.join(DATA_SETS)}")
        data = DATA_SETS[data]
    return data


def row_profile(row: dict) -> str:
    """The profile a row's settings change (``BASE_PROFILE`` unless the row names one)."""
    return row.get("profile", BASE_PROFILE)


def row_task(row: dict) -> str:
    """A row's task: its own ``task``, else its named data set's, else Sudoku."""
    return row.get("task") or _named(row).get("task", "sudoku")


def row_data(row: dict) -> dict:
    """A row's data overrides (its named data set's, or its own)."""
    return {k: copy.deepcopy(v) for k, v in _named(row).items() if k != "task"}


def row_overrides(row: dict, seed: int = 0) -> dict:
    """The run-cache overrides of a row (dotted keys) for one training seed."""
    out = {f"data.{k}": v for k, v in row_data(row).items()}
    out.update({dotted: row[k] for k, dotted in ROW_KEYS.items() if k in row})
    out.update(row.get("overrides", {}))
    out["train.seed"] = seed
    return out


def row_config(row: dict) -> dict:
    """The resolved configuration of a row's carry-last run (builds the row's data if needed)."""
    return resolve_config(row_task(row), "carry_last", row_profile(row), row_overrides(row))


def depths(training_depth: int) -> dict[str, int]:
    """The recorded depths: {multiple: outer updates} for 0.5x, 1x, 4x and 60x the training depth."""
    return {f"{m:g}": max(1, round(m * training_depth)) for m in MULTIPLES}


# Cost model for the estimates (progress bar, --list). Anchors: the tiny model (d = 64, MLP mixer, 2 layers,
# H = 2, L = 3, batch 64, 6x6 with TRM's 16-position prefix: 52 positions) takes about 0.5 s per training step
# and 0.47 s per outer update of 256 test puzzles with one thread (`python -m infiloop plan --profile tiny
# --calibrate`, 2026-11-30, on a quiet machine: 0.50 and 0.46-0.48 s; the rows' minutes in the comments above
# predate the prefix and are about 2.5x too low). Relative costs measured on the 2-core VM before the prefix
# (6-12 timed steps and 3-6 updates per shape, the least of four passes, under load from other jobs, so
# +-50 %): per step d = 128: 1.3x, attention: 0.8x, H = 3: 1.1x, L = 1: 0.5x, H = 3 and L = 6: 1.6x,
# 9x9: 2.4x, 9x9 at d = 128: 5.1x, 9x9 with attention: 2.7x.
STEP_S, UPDATE_S = 0.5, 0.47
PREFIX = 16  # puzzle-embedding positions of the tiny model (TRM's)


def _flops_per_token(d: int, seq: int, mixer: str, multiple: int = 32) -> float:
    """Multiply-adds per token of one layer: SwiGLU over channels plus the token mixer (TRM's SwiGLU
    across the sequence, or attention: projections and scores)."""
    ffn = 3 * d * swiglu_width(d, 4.0, multiple)
    mix = 3 * d * swiglu_width(seq, 4.0, multiple) if mixer == "mlp" else 4 * d * d + 2 * seq * d
    return float(ffn + mix)


def block_cost(d: int, seq: int, mixer: str, n_layers: int) -> float:
    """Cost of one block application relative to the tiny model's: per token a fixed part (element-wise
    work, which dominates at this size) plus a part that grows with the multiply-adds (fitted to the
    measurements above: 0.72 + 0.28 x relative multiply-adds)."""
    f = _flops_per_token(d, seq, mixer) / _flops_per_token(64, 36 + PREFIX, "mlp")
    return n_layers / 2 * seq / (36 + PREFIX) * (0.72 + 0.28 * f)


def estimated_seconds(row: dict) -> tuple[float, float]:
    """(training, evaluation) seconds per connection and seed with one thread: a training step runs one
    segment (H (L + 1) block applications) and back-propagates through its last outer update (counted as
    4 (L + 1)); an evaluation runs 60 H x segments outer updates of L + 1 applications."""
    base = profiles.profile(row_profile(row))
    data = {**profiles.data_of(row_profile(row)).tasks.get(row_task(row), {}), **row_data(row)}
    cells = data.get("size", 12) ** 2 if row_task(row) == "maze" else data.get("side", 6) ** 2
    model = {**base["model"], **{k: row[k] for k in ("d_model", "n_layers", "mixer", "H", "L") if k in row}}
    d, layers, mixer = model.get("d_model", 64), model.get("n_layers", 2), model.get("mixer", "mlp")
    H, L = model.get("H", 2), model.get("L", 3)
    seg = row.get("max_segments", base["train"].get("max_segments", 8))
    block = block_cost(d, cells + row.get("overrides", {}).get("model.puzzle_emb_len", PREFIX), mixer, layers)
    train = row.get("steps", base["train"]["steps"]) * STEP_S * block * (H + 4) * (L + 1) / 24
    evaluate = 60 * H * seg * UPDATE_S * block * (L + 1) / 4 * row.get("limit", 256) / 256
    return train, evaluate


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


def model_record(name: str, recipe: str, seed: int, job: Job) -> dict:
    """One trained and evaluated model of a row (its scheduler jobs done): its metrics and wall times."""
    run = job.spec.run
    traj, path = run.evaluate(**job.eval.args, progress=False)  # the cache file the eval job wrote
    eval_s = _logged_seconds(run.dir / "logs" / f"{job_name(job)}.log")
    summary = run.summary()
    final = summary.get("final") or {}
    return {"row": name, "recipe": recipe, "seed": seed, "run": str(run.dir), "trajectory": path.name,
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
    return paths.RESULTS / "calibration"


def result_path(name: str, results: Path | None = None) -> Path:
    return Path(results_folder() if results is None else results) / f"{name}.json"


def _merge(name: str, row: dict, records: list[dict], results: Path) -> dict:
    """Add a row's new per-model records to its results file (kept: other seeds, unless the row's settings
    changed; an evaluation time measured before, where this evaluation came from the cache)."""
    path = result_path(name, results)
    old = json.loads(path.read_text()) if path.is_file() else {}
    by = old.get("results", {}) if old.get("settings") == row else {}
    for rec in records:
        seeds = by.setdefault(rec["recipe"], {})
        prev = seeds.get(str(rec["seed"]))
        if rec["eval_cached"] and prev and prev.get("trajectory") == rec["trajectory"]:
            rec = {**rec, "eval_seconds": prev["eval_seconds"]}
        seeds[str(rec["seed"])] = rec
    cfg = row_config(row)
    out = {"row": name, "settings": row, "task": row_task(row), "profile": row_profile(row),
           "data": cfg["data"], "model": {k: cfg["model"][k] for k in ("d_model", "n_layers", "mixer", "H", "L")},
           "train": {k: cfg["train"][k] for k in ("steps", "max_segments", "batch_size", "lr")},
           "results": by, "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    atomic_write_text(path, json.dumps(out, indent=1, sort_keys=False))
    return out


def row_jobs(names: list[str], rows: dict[str, dict], seeds: list[int] | None, root: Path
             ) -> tuple[list[Job], list[tuple[str, str, int, Job]], list[str]]:
    """The rows as declarations of the plan: for each row, seed and connection, the training of its run and
    the evaluation of its depth trajectory (:func:`eval_args`), each once (``jobs.jobs_for``: a run two rows
    share, or a profile's notebook 02 trajectory, is one job). Returns the jobs, (row, recipe, seed, evaluation
    job) of every model, and the models whose settings do not resolve (``"row recipe seed s: error"``)."""
    declared, failed = [], []
    for n in names:
        row = rows[n]
        for seed in seeds if seeds is not None else row.get("seeds", [0]):
            for recipe in CONNECTIONS:
                over = row_overrides(row, seed)
                try:
                    run = resolve(row_task(row), recipe, row_profile(row), over, root=root)
                except ValueError as e:
                    failed.append(f"{n} {recipe} seed {seed}: {type(e).__name__}: {e}")
                    continue
                spec = RunSpec(f"{n}/{recipe}", row_task(row), recipe, over, run, seed)
                declared.append((n, recipe, seed, EvalSpec(f"{n}/{recipe}", spec, "evaluate", eval_args(run, row))))
    planned = jobs_for([e for *_, e in declared], "contrasts")
    models = [(n, recipe, seed, planned[f"eval {e.run.run.dir.name} {Path(e.key).name}"])
              for n, recipe, seed, e in declared]
    return list(planned.values()), models, failed


def run_rows(names: list[str], rows: dict[str, dict] | None = None, seeds: list[int] | None = None,
             jobs: int = 1, root: Path | None = None, results: Path | None = None,
             progress: bool = True) -> dict[str, dict]:
    """Run the named rows (both connections, each seed; ``seeds`` replaces each row's own list) as jobs of the
    plan: the scheduler of ``./reproduce.sh`` trains and evaluates them, ``jobs`` at a time with one torch
    thread each, ordered and weighed by the plan's cost model (``cost.job_seconds``). Writes each row's
    results file and returns {row: results}; a model that fails is reported and the others go on
    (RuntimeError at the end, naming the failures). ``root``: the run cache (default ``paths.RUNS``);
    ``results``: the results folder (default :func:`results_folder`)."""
    from ..compute.scheduler import log_path, run_planned

    rows = ROWS if rows is None else rows
    root = paths.RUNS if root is None else Path(root)
    results = results_folder() if results is None else Path(results)
    for n in names:
        if n not in rows:
            raise ValueError(f"unknown calibration row {n!r}; rows: {', '.join(rows)}")
        check_row(n, rows[n])
    for n in names:  # build every row's data first (generation uses every CPU by itself)
        tasks.build(row_task(rows[n]), profiles.data_of(row_profile(rows[n])), overrides=row_data(rows[n]) or None,
                    verbose=progress)
    planned, models, failed = row_jobs(names, rows, seeds, root)
    total = len(models) + len(failed)
    report = run_planned(planned, jobs, progress)
    lost = set(report.failed) | set(report.skipped)
    done: dict[str, list[dict]] = {}
    for n, recipe, seed, job in models:
        if job.id in lost or job.after[0] in lost:
            why = job.after[0] if job.after[0] in report.failed else job.id
            failed.append(f"{n} {recipe} seed {seed}: see {log_path(next(j for j in planned if j.id == why))}")
            continue
        done.setdefault(n, []).append(model_record(n, recipe, seed, job))
    out = {n: _merge(n, rows[n], records, results) for n, records in done.items()}
    if failed:
        raise RuntimeError(f"{len(failed)} of {total} models failed:\n" + "\n".join(failed))
    return out


def _difficulty(data: dict, task: str = "sudoku") -> str:
    if task == "maze":
        return f"maze {data['size']}x{data['size']}, shortest path >= {data['min_path']}"
    side = data.get("side", 6)
    blanks = data["blanks"]
    text = f"{side}x{side}, blanks {blanks[0]}-{blanks[1]}" if not isinstance(blanks, dict) else f"{side}x{side}"
    need = data.get("needs_search")
    if need is not None:
        text += ", singles do not solve" if need else ", singles solve"
    if data.get("min_rating"):
        text += f", rating >= {data['min_rating']}"
    return text


def _cell(values: list[float], scale: float = 100.0, fmt: str = "{:.1f}") -> str:
    """Mean over seeds, with the range when there are several."""
    v = [x * scale for x in values if x is not None]
    if not v:
        return "–"
    text = fmt.format(np.mean(v))
    return text + (f" ({fmt.format(min(v))}–{fmt.format(max(v))})" if len(v) > 1 else "")


# The connection study changed InfiLoop (and FPRM) on this day (docs/connection-study.md); carry-last's runs kept
# their names. A row recorded before it holds InfiLoop as built, which the study still trains (variant `baseline`).
CONNECTION_STUDY_DATE = "2026-12-01"


def as_built(record: dict) -> bool:
    """Whether a row's InfiLoop models are the connection as built before the connection study."""
    return str(record.get("updated", "")) < CONNECTION_STUDY_DATE


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
            acc = [_cell([x["exact"][k] for x in recs]) for k in ("0.5", "1", "4", "60")]
            peak = _cell([x["peak"] for x in recs]) + f" @ {'/'.join(str(x['peak_update']) for x in recs)}"
            change = _cell([x["state_change_after_solve"] for x in recs], 100, "{:.2g}")
            minutes = (f"{np.mean([x['train_seconds'] for x in recs]) / 60:.1f} / "
                       f"{np.mean([x['eval_seconds'] for x in recs]) / 60:.1f}")
            task = _difficulty(r["data"], r.get("task", "sudoku"))
            lines.append(
                f"| {n} | {task} | {m['d_model']} | {m['mixer']} x {m['n_layers']} | {m['H']} "
                f"| {m['L']} | {t['max_segments']} ({depth}) | {t['steps']:,} | "
                f"{recipe}{' (as built)' if recipe == 'infiloop' and as_built(r) else ''} | {len(recs)} "
                f"| {' | '.join(acc)} | {peak} | {change} "
                f"| {_cell([x['lost_after_solve'] for x in recs])} | {minutes} |")
    if len(lines) == 2:
        lines.append("| (no results yet: `python -m infiloop contrasts ROW`) |" + " |" * (head.count("|") - 2))
    return "\n".join(lines)


def drift_summary(results: Path | None = None, rows: dict[str, dict] | None = None
                  ) -> tuple[list[str], list[list[str]], dict]:
    """The evidence for or against the paper's contrast over every recorded row: for each row, each
    connection's exact accuracy at the training depth, how far its accuracy at 60x lies below its own peak
    (the drift the paper reports for TRM), the share of solved puzzles lost by 60x and the relative state
    change per update after the first solve (the paper's mechanism of the drift); means over seeds,
    the drop's worst seed in brackets. Returns (columns, table rows, facts): facts has ``rows`` (how many),
    ``seeds`` (models per connection in all) and, per connection, ``max_drop`` (points) with its ``row``,
    ``max_lost`` (% of solved puzzles) with its ``lost_row`` and ``max_change`` (% per update after the
    solve) with its ``change_row``, each the worst single model.
    ``results``: a results folder (default :data:`RECORDED`, the rows kept in ``docs/calibration-results``)."""
    rows = ROWS if rows is None else rows
    results = RECORDED if results is None else Path(results)
    files = {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}
    order = [n for n in rows if n in files] + sorted(n for n in files if n not in rows)
    columns = ["candidate", "what changes (over tiny)", "seeds"]
    for recipe in CONNECTIONS:
        name = {"carry_last": "carry-last", "infiloop": "InfiLoop"}[recipe]
        columns += [f"{name} @1x (%)", f"{name} peak − @60x (points)", f"{name} solved, then lost (%)",
                    f"{name} state change per update after the solve (%)"]
    worst = {"max_drop": 0.0, "row": None, "max_lost": 0.0, "lost_row": None, "max_change": 0.0, "change_row": None}
    table, facts = [], {"rows": 0, "seeds": 0, "as_built": 0, **{r: dict(worst) for r in CONNECTIONS}}
    for n in order:
        r = files[n]
        if not all(r["results"].get(recipe) for recipe in CONNECTIONS):
            continue
        settings = ", ".join(f"{k}={v}" for k, v in r["settings"].items() if k != "seeds") or "none"
        line = [n, settings, str(min(len(r["results"][x]) for x in CONNECTIONS))]
        for recipe in CONNECTIONS:
            recs = list(r["results"][recipe].values())
            drops = [100 * (x["peak"] - x["exact"]["60"]) for x in recs]
            line += [_cell([x["exact"]["1"] for x in recs]),
                     f"{np.mean(drops):.1f}" + (f" ({max(drops):.1f})" if len(drops) > 1 else ""),
                     _cell([x["lost_after_solve"] for x in recs]),
                     _cell([x["state_change_after_solve"] for x in recs], 100, "{:.2g}")]
            f = facts[recipe]
            if max(drops) > f["max_drop"] or f["row"] is None:
                f.update(max_drop=max(drops), row=n)
            for key, row_key, field in (("max_lost", "lost_row", "lost_after_solve"),
                                        ("max_change", "change_row", "state_change_after_solve")):
                values = [100 * x[field] for x in recs if x.get(field) is not None]
                if values and (max(values) > f[key] or f[row_key] is None):
                    f.update({key: max(values), row_key: n})
        facts["rows"] += 1
        facts["as_built"] += as_built(r)
        facts["seeds"] += int(line[2])
        table.append(line)
    return columns, table, facts


def drift_statement(facts: dict) -> str:
    """The search's evidence in one paragraph from :func:`drift_summary`'s facts: carry-last's largest fall
    below its peak, loss of solved puzzles and state change after the solve, each with its row, against the
    paper's TRM; it ends with the verdict in bold when no row reaches the paper's fall nor its loss (one seed
    per row mostly, so the verdict rests on all rows together, not on an interval)."""
    if not facts["rows"]:
        return "No calibration row is recorded yet."
    cl, il = facts["carry_last"], facts["infiloop"]
    text = (f"The calibration search ({facts['rows']} candidate settings, {facts['seeds']} trained models per "
            f"connection on the 2-core CPU; `docs/calibration.md`) found carry-last at most {cl['max_drop']:.1f} "
            f"points below its own peak at 60x the training depth (row `{cl['row']}`; InfiLoop at most "
            f"{il['max_drop']:.1f}, row `{il['row']}`), losing at most {cl['max_lost']:.1f} % of its solved puzzles "
            f"(row `{cl['lost_row']}`; InfiLoop {il['max_lost']:.1f} %), its state changing by at most "
            f"{cl['max_change']:.2f} % per update after the solve (row `{cl['change_row']}`; InfiLoop "
            f"{il['max_change']:.2f} %); the paper's TRM: {PAPER_FALL:.1f} points, {PAPER_LOST:.0f}–20 %, about "
            f"{PAPER_CHANGE:.0f} %.")
    if facts.get("as_built"):
        text += (f" InfiLoop's numbers in {facts['as_built']} of these rows are the connection as built before the "
                 f"connection study ({CONNECTION_STUDY_DATE}; `docs/connection-study.md`, variant `baseline`); "
                 "carry-last's runs are today's.")
    if contrast_absent(facts):
        text += (" **In none of these settings does carry-last reach the paper's fall or its loss of solved "
                 "puzzles: at this scale the paper's contrast did not appear.**")
    return text


def contrast_absent(facts: dict) -> bool:
    """True when rows are recorded and no carry-last model reaches the paper's fall or its loss."""
    cl = facts["carry_last"]
    return bool(facts["rows"]) and cl["max_drop"] < PAPER_FALL and cl["max_lost"] < PAPER_LOST


README_START, README_END = "<!-- calibration-drift: start -->", "<!-- calibration-drift: end -->"
README_COLUMNS = ["candidate", "what changes (over `tiny`)", "seeds", "CL @1x", "CL peak − @60x", "CL lost",
                  "CL state change", "IL @1x", "IL peak − @60x", "IL lost", "IL state change"]


def render_drift(results: Path | None = None, rows: dict[str, dict] | None = None) -> str:
    """The README's block: :func:`drift_summary`'s table with short headings (CL carry-last, IL InfiLoop)
    and :func:`drift_statement`, between :data:`README_START` and :data:`README_END`."""
    columns, table, facts = drift_summary(results, rows)
    assert len(columns) == len(README_COLUMNS)
    lines = ["| " + " | ".join(README_COLUMNS) + " |", "|" + "---|" * len(README_COLUMNS)]
    lines += ["| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |" for r in table]
    return f"{README_START}\n" + "\n".join(lines) + f"\n\n{drift_statement(facts)}\n{README_END}"


def render_readme(readme: Path, results: Path | None = None, rows: dict[str, dict] | None = None) -> Path:
    """Replace the block between the README's drift markers by :func:`render_drift`; the README must
    already hold both markers (it is never appended to)."""
    text = Path(readme).read_text() if Path(readme).is_file() else ""
    filled = fill_block(text, README_START, README_END, render_drift(results, rows))
    if filled is None:
        raise ValueError(f"{readme}: no '{README_START}' ... '{README_END}' block to fill")
    return atomic_write_text(readme, filled)


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


def render(results: Path | None = None, doc: Path = DOC, rows: dict[str, dict] | None = None) -> Path:
    """Write the search table into ``doc`` between its markers (appended with a heading the first time);
    the text above it is kept as it is."""
    text = Path(doc).read_text() if Path(doc).is_file() else ""
    table = (f"{START}\n{render_table(results, rows)}\n\nThe candidates (`python -m infiloop contrasts --list`):\n\n"
             f"{render_candidates(rows)}\n{END}")
    filled = fill_block(text, START, END, table)
    return atomic_write_text(doc, filled if filled is not None else
                             text.rstrip("\n") + "\n\n" + SECTION + "\n" + table + "\n")


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
