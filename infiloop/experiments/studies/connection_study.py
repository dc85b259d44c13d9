"""Does InfiLoop's connection learn? The study of what is supervised and what carries gradient
(docs/connection-study.md).

The paper's learned connection rests on its content score s_t = q^T RMSNorm(z_t) rising for right
boards and falling for wrong ones (median 7.25 at 0 wrong cells, -0.58 at 33) and on training with its
own block (attention). Each *variant* below changes one thing about how the connection is trained;
each is trained on the ``search`` profile's puzzles (6x6 Sudoku that needs search) with two blocks,
TRM's token-mixing MLP for 1,500 steps (the ``search`` profile itself) and attention for 800 steps,
for InfiLoop and, where the variant changes a setting carry-last shares, for carry-last too (settings
that only InfiLoop has leave carry-last's run the same: the variant is compared with the baseline's
carry-last). Every run goes through the run cache; each model is evaluated at its training depth. The study is
declared as data (:data:`STUDY`: a row per variant and block, ``<variant>-<block>.json``) and run by the studies'
one mechanism (``study.py``); the variants and blocks are in ``connection_design.py``, the score verdict of
``--verdict`` in ``score_verdict.py``.

    python -m infiloop connection-study --list                     # variants and their settings
    python -m infiloop connection-study baseline history_grad --seeds 0,1 --jobs 2
    python -m infiloop connection-study --render                   # the table of docs/connection-study.md
    python -m infiloop connection-study --render --results docs/connection-study-results   # the recorded one
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from ... import paths
from ...analysis import trajectories as analysis
from ...io import atomic_write_text
from ..notebooks.manifest import Job
from . import connection_design as design
from . import study
from .connection_design import check_variant, models, overrides
from .score_verdict import score_verdict
from .study import Model, Study

DOC = paths.DOCS / "connection-study.md"
RECORDED = paths.DOCS / "connection-study-results"

# The outer connection's statistics kept per logged step in a record (for the figure of --figure).
LOGGED = ("q_norm", "beta", "score_mean", "score_sd_cells", "at_clip", "gamma", "score_wrong_corr")


# ------------------------------------------------------------------------------------------ one model


def score_wrong_correlation(traj: dict) -> float:
    """Rank correlation, over every (update, puzzle) of a trajectory, between the outer candidate's mean
    content score and its wrong cells (negative: the score tells right boards from wrong ones)."""
    s, w = traj["score_outer"].astype(np.float64), traj["wrong_cells_candidate"].astype(np.float64)
    return analysis.rank_correlation(s.ravel(), w.ravel())


def model_record(model: Model, job: Job) -> dict:
    """One model of the study, trained and evaluated at its training depth (its jobs done: read from the caches),
    as its record: the training cell accuracy at the block's read steps, the training log, exact accuracy at the
    training depth and what the connection learned."""
    t0 = time.time()
    variant, block = split_row(model.row)
    run, recipe = job.spec.run, model.recipe
    depth = run.training_depth
    traj, _ = run.evaluate(updates=depth, every=1, progress=False)
    log = run.metrics()
    by_step = {r["step"]: r for r in log}
    final = log[-1] if log else {}
    conn = {k: v for k, v in final.items() if k.startswith(("inner_", "outer_"))}
    corr = score_wrong_correlation(traj) if recipe == "infiloop" else float("nan")
    return {"variant": variant, "block": block, "recipe": recipe, "seed": model.seed, "run": run.dir.name,
            "cell_acc": {str(s): by_step[s]["cell_acc"] for s in design.BLOCKS[block]["read_at"] if s in by_step},
            "log": [{k: r[k] for k in ("step", "cell_acc", *(f"outer_{c}" for c in LOGGED)) if r.get(k) is not None}
                    for r in log],
            "exact_at_depth": analysis.accuracy_at(traj, depth), "training_depth": depth,
            "eval_score_wrong_corr": None if np.isnan(corr) else corr, "connection": conn,
            "train_seconds": run.summary().get("train_seconds"), "seconds": round(time.time() - t0, 1)}


# ------------------------------------------------------------------------------------------ results


def row_name(variant: str, block: str) -> str:
    """A row of the study, its results file's name: ``"<variant>-<block>"`` (variants and blocks have no dash)."""
    return f"{variant}-{block}"


def split_row(row: str) -> tuple[str, str]:
    """``"no_z0-attention"`` -> ``("no_z0", "attention")``."""
    variant, _, block = row.rpartition("-")
    return variant, block


def check_rows(names: list[str], progress: bool = False) -> None:
    """Refuse a row whose variant or block is unknown (ValueError naming it)."""
    for name in names:
        variant, block = split_row(name)
        check_variant(variant)
        if block not in design.BLOCKS:
            raise ValueError(f"unknown block {block!r}; known: {', '.join(design.BLOCKS)}")


def row_models(names: list[str], seeds: list[int] | None) -> list[Model]:
    """The models of the rows, block by block in the order named, then seed by seed (default :data:`SEEDS`): each
    variant's two connections, carry-last recorded in the baseline's row where it lacks the variant's setting."""
    rows = [split_row(n) for n in names]
    return [Model(row_name(owner, block), design.TASK, recipe, design.PROFILE, overrides(owner, block, seed), seed)
            for block in dict.fromkeys(b for _, b in rows) for seed in (design.SEEDS if seeds is None else seeds)
            for variant in (v for v, b in rows if b == block) for recipe, owner in models(variant, block, seed)]


def merge_record(row: str, old: dict, record: dict) -> dict:
    """A variant's results file with one model's record added (replacing an older record of the same model)."""
    variant, block = record["variant"], record["block"]
    keep = [r for r in old.get("records", []) if (r["recipe"], r["seed"]) != (record["recipe"], record["seed"])]
    return {"variant": variant, "block": block,
            "settings": {**design.BLOCKS[block]["overrides"], **design.AS_BUILT,
                         **design.VARIANTS[variant]["overrides"]},
            "profile": design.PROFILE, "updated": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "records": sorted(keep + [record], key=lambda r: (r["recipe"], r["seed"]))}


def run_variants(names: list[str], blocks: list[str], seeds: list[int], jobs: int = 1, results: Path | None = None,
                 root: Path | None = None, connections: tuple[str, ...] = design.CONNECTIONS,
                 progress: bool = True) -> list[dict]:
    """Train and evaluate every model of these variants (cached runs are reused), block by block in the
    order given, through the study mechanism (``study.run``); ``connections``: only these recipes' models.
    Returns the models' records."""
    rows = [row_name(v, b) for b in blocks for v in names]
    return study.run(STUDY, rows, seeds, jobs, root, results, progress, recipes=connections)[0]


# ------------------------------------------------------------------------------------------ the table


def _mean(values: list) -> str:
    """Mean over seeds with the seeds' values: ``"0.61 (0.58, 0.64)"`` (two seeds give no useful interval)."""
    vals = [v for v in values if v is not None and np.isfinite(v)]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.3g}"
    return f"{np.mean(vals):.3g} ({', '.join(f'{v:.3g}' for v in vals)})"


def _fmt(values: list, digits: int = 3) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    return " / ".join(f"{v:.{digits}f}" for v in vals)


def load_results(results: Path | None = None) -> dict[tuple[str, str], dict]:
    folder = study.folder(STUDY, results)
    out = {}
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if not p.name.startswith("verdict-"):
            d = json.loads(p.read_text())
            out[(d["variant"], d["block"])] = d
    return out


def verdict_path(variant: str, block: str, results: Path | None = None) -> Path:
    return study.folder(STUDY, results) / f"verdict-{variant}-{block}.json"


def render_verdicts(results: Path | None = None) -> str:
    """The score verdicts (:func:`score_verdict`) recorded in the results folder, one row each."""
    folder = study.folder(STUDY, results)
    files = sorted(folder.glob("verdict-*.json")) if folder.is_dir() else []
    if not files:
        return ""

    def iv(d, scale=1.0, digits=2):
        return f"{scale * d['value']:.{digits}f} [{scale * d['lo']:.{digits}f}, {scale * d['hi']:.{digits}f}]"

    lines = ["**Does the outer score tell right from wrong?** InfiLoop's models evaluated per token at every "
             "update to the depth given: the rank correlation of the mean outer score with the candidate's wrong "
             "cells (notebook 03's claim; negative: the score falls as boards get worse) and the share of cell "
             "scores at the clip on wrong and on right candidates (%), with 95 % intervals over seeds and puzzles.",
             "",
             "| variant | block | seeds | updates | rank correlation | at the clip, wrong boards | at the clip, right "
             "boards |", "|---|---|---|---|---|---|---|"]
    for p in files:
        d = json.loads(p.read_text())
        lines.append(f"| `{d['variant']}` | {d['block']} | {', '.join(map(str, d['seeds']))} | {d['updates']} | "
                     f"{iv(d['rank_correlation'])} | {iv(d['at_clip_wrong'], 100, 1)} | "
                     f"{iv(d['at_clip_right'], 100, 1)} |")
    return "\n".join(lines) + "\n"


def _records(res: dict, variant: str, block: str, recipe: str) -> list[dict]:
    owner = variant if recipe == "infiloop" or design.VARIANTS.get(variant, {}).get("shared") else "baseline"
    d = res.get((owner, block))
    return [r for r in d["records"] if r["recipe"] == recipe] if d else []


def render_table(results: Path | None = None) -> str:
    """The study's table: per block and variant, both connections' training cell accuracy at the read steps
    (one value per seed, mean of the last 25 steps), exact accuracy at the training depth, and what
    InfiLoop's outer connection learned by the last step."""
    res = load_results(results)
    lines = []
    for block, spec in design.BLOCKS.items():
        steps = spec["read_at"]
        lines += [f"**{block}** ({design.BLOCKS[block]['overrides']['train.steps']:,} steps). Training cell accuracy "
                  f"at steps {' / '.join(f'{s:,}' for s in steps)} (one group per seed, groups "
                  "separated by `;`), exact accuracy (%) at the training depth, and InfiLoop's outer connection "
                  "at the last step: |q|, β, raw score mean, its spread "
                  "across cells and across boards, share of raw scores at or above the clip, mean γ, and the rank "
                  "correlation of the candidate's score with its wrong cells in training and at evaluation (mean over "
                  "seeds, each seed's value in brackets).", "",
                  "| variant | carry-last cell acc | InfiLoop cell acc | exact @ depth carry-last | exact @ depth "
                  "InfiLoop | \\|q\\| | β | score mean | sd cells | sd boards | at clip | γ | corr train | "
                  "corr eval |", "|" + "---|" * 14]
        for name in design.VARIANTS:
            inf = _records(res, name, block, "infiloop")
            if not inf:
                continue
            cl = _records(res, name, block, "carry_last")

            def acc(recs, steps=steps):
                return "; ".join(_fmt([r["cell_acc"].get(str(s)) for s in steps], 2) for r in recs) or "–"

            def conn(key, inf=inf):
                return _mean([r["connection"].get(f"outer_{key}") for r in inf])

            lines.append("| " + " | ".join([
                f"`{name}`: {design.VARIANTS[name]['label']}", acc(cl), acc(inf),
                _mean([100 * r["exact_at_depth"] for r in cl]), _mean([100 * r["exact_at_depth"] for r in inf]),
                conn("q_norm"), conn("beta"), conn("score_mean"), conn("score_sd_cells"), conn("score_sd_boards"),
                conn("at_clip"), conn("gamma"), conn("score_wrong_corr"),
                _mean([r.get("eval_score_wrong_corr") for r in inf])]) + " |")
        lines.append("")
    verdicts = render_verdicts(results)
    return "\n".join(lines).rstrip() + "\n" + ("\n" + verdicts if verdicts else "")


FIGURE_PANELS = (("cell_acc", "training cell accuracy"), ("outer_q_norm", "|q| (outer)"),
                 ("outer_at_clip", "share of raw scores ≥ clip"), ("outer_score_wrong_corr",
                                                                    "rank corr. score vs wrong cells"))


def plot_dynamics(variants: list[str], results: Path | None = None, path: Path | None = None) -> Path:
    """The recorded training logs of these variants, both blocks, every seed: training cell accuracy (carry-last
    dashed), |q|, the share of raw scores at the clip and the score's correlation with wrong cells, against
    the training step (``docs/connection-study-dynamics.png`` by default)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...analysis.plotting import profile_note, use_style
    from ...io import atomic_write

    use_style()
    res = load_results(results)
    fig, axes = plt.subplots(len(design.BLOCKS), len(FIGURE_PANELS), figsize=(15, 3.6 * len(design.BLOCKS)),
                             squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, block in zip(axes, design.BLOCKS):
        for ax, (key, title) in zip(row, FIGURE_PANELS):
            for i, name in enumerate(variants):
                for j, rec in enumerate(_records(res, name, block, "infiloop")):
                    log = [r for r in rec.get("log", []) if key in r]
                    ax.plot([r["step"] for r in log], [r[key] for r in log], color=colors[i % len(colors)],
                            alpha=1.0 if j == 0 else 0.6, label=f"{name}" if j == 0 else None)
            if key == "cell_acc":
                for j, rec in enumerate(_records(res, "baseline", block, "carry_last")):
                    log = rec.get("log", [])
                    ax.plot([r["step"] for r in log], [r["cell_acc"] for r in log], color="black", ls="--",
                            alpha=1.0 if j == 0 else 0.6, label="carry-last" if j == 0 else None)
            ax.set(title=f"{block}: {title}", xlabel="training step")
        row[0].legend(fontsize=7)
    profile_note(fig, design.PROFILE)
    fig.tight_layout()
    path = Path(paths.DOCS / "connection-study-dynamics.png" if path is None else path)
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
    plt.close(fig)
    return path


# The study as data: rows ``<variant>-<block>``, each model evaluated at its training depth, a results file per row
# (its models' records) and docs/connection-study.md's table.
STUDY = Study(name="connection-study", models=row_models,
              evaluation=lambda model, run: {"updates": run.training_depth, "every": 1}, record=model_record,
              merge=merge_record, results="connection-study", recorded=RECORDED, doc=DOC,
              markers=("<!-- connection-study: start -->", "<!-- connection-study: end -->"),
              block=render_table, prepare=check_rows)


def render(results: Path | None = None, doc: Path = DOC) -> Path:
    """Write the study's table into ``doc`` between its markers (the page must hold them)."""
    return study.render(STUDY, results, doc)


def list_variants() -> str:
    lines = ["| variant | what changes | settings | carry-last |", "|---|---|---|---|"]
    for name, v in design.VARIANTS.items():
        sets = ", ".join(f"{k}={v2}" for k, v2 in v["overrides"].items()) or "–"
        lines.append(f"| `{name}` | {v['label']} | {sets} | {'own runs' if v['shared'] else 'the baseline'} |")
    return "\n".join(lines)


def _checked(a: argparse.Namespace) -> tuple[list[str], list[int], tuple[str, ...], list[tuple[str, str]]]:
    """The command's blocks, seeds, connections and (variant, block) verdicts, each name checked (ValueError naming
    the option and the unknown name)."""
    blocks = [b for b in a.blocks.split(",") if b]
    for b in blocks:
        if b not in design.BLOCKS:
            raise ValueError(f"--blocks: unknown block {b!r}; known: {', '.join(design.BLOCKS)}")
    seeds = [int(s) for s in a.seeds.split(",") if s]
    connections = tuple(c for c in a.connections.split(",") if c)
    for c in connections:
        if c not in design.CONNECTIONS:
            raise ValueError(f"--connections: unknown recipe {c!r}; known: {', '.join(design.CONNECTIONS)}")
    for v in [*a.variants, *(v for v in a.figure.split(",") if v)]:
        check_variant(v)
    verdicts = []
    for item in a.verdict:
        name, _, block = item.partition(":")
        check_variant(name)
        if block not in design.BLOCKS:
            raise ValueError(f"--verdict {item!r}: expected VARIANT:BLOCK with a block among "
                             f"{', '.join(design.BLOCKS)}")
        verdicts.append((name, block))
    return blocks, seeds, connections, verdicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infiloop connection-study", description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="*", help=f"variants to run (known: {', '.join(design.VARIANTS)})")
    ap.add_argument("--blocks", default="attention,mlp", help="comma-separated: attention, mlp")
    ap.add_argument("--seeds", default=",".join(map(str, design.SEEDS)), help="comma-separated training seeds")
    ap.add_argument("--connections", default=",".join(design.CONNECTIONS),
                    help="comma-separated recipes to train (default both: carry_last,infiloop)")
    ap.add_argument("--jobs", type=int, default=1, help="models trained at a time (one thread each)")
    ap.add_argument("--results", type=Path, default=None, help="results folder (default results/connection-study)")
    ap.add_argument("--verdict", metavar="VARIANT:BLOCK", action="append", default=[],
                    help="score verdict of a variant's InfiLoop models over --seeds (trains what is missing)")
    ap.add_argument("--updates", type=int, default=None,
                    help="evaluation depth of --verdict (default: the profile's, 960 outer updates)")
    ap.add_argument("--figure", metavar="VARIANTS", default="",
                    help="comma-separated variants: draw their recorded training logs "
                         "(docs/connection-study-dynamics.png)")
    ap.add_argument("--render", action="store_true", help="write the table into docs/connection-study.md")
    ap.add_argument("--list", action="store_true", help="print the variants")
    a = ap.parse_args(argv)
    try:
        blocks, seeds, connections, verdicts = _checked(a)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # one thread per model, as the recorded times were measured
    if a.list:
        print(list_variants())
    if a.variants:
        try:
            run_variants(a.variants, blocks, seeds, a.jobs, a.results, connections=connections)
        except RuntimeError as e:  # models that failed, each named with its log; the others are recorded
            print(f"error: {e}", file=sys.stderr)
            return 1
    for name, block in verdicts:
        path = verdict_path(name, block, a.results)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(score_verdict(name, block, seeds, updates=a.updates), indent=1))
        print(f"wrote {path}")
    if a.render:
        print(f"wrote {render(a.results)}")
    if a.figure:
        print(f"wrote {plot_dynamics([v for v in a.figure.split(',') if v], a.results)}")
    if not (a.list or a.variants or a.render or verdicts or a.figure):
        ap.print_usage()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
