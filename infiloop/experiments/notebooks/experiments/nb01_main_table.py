"""Notebook 01, the main table: each main connection on each task at its training depth, with the identity ablation
and the depth-fair columns (matched compute, the best depth on validation)."""

from __future__ import annotations

from ....analysis import depth_fair
from ....analysis.main_table import IDENTITY_MODES
from ....errors import UsageError
from ....tasks import registry
from ....tasks.validation import VALID
from ...settings import profiles
from ...settings.recipes import MAIN_RECIPES
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """Each main connection on each task at its training depth (ARC: every test input, with a snapshot of the
    predictions for pass@2 voting); where the puzzle-embedding prefix names puzzles (ARC), the same evaluation with
    blank and with random ids (the identity ablation); and the depth-fair columns (``analysis/depth_fair.py``): the
    test set and the validation split to ``max_updates`` at every update, so that each connection is also read at
    matched compute and at its best depth on validation."""
    tasks = [t.strip() for t in p["tasks"].split(",") if t.strip()] or profiles.main_tasks(n.profile)
    n.derived["identity"] = []  # the (task, recipe) pairs with the identity ablation
    n.derived["matched"], n.derived["no_validation"] = {}, {}
    for task in tasks:
        runs = {r: n.add_run(f"{task}/{r}", task, r) for r in MAIN_RECIPES}
        budget, matched = matched_depths(runs, p)
        n.derived["matched"][task] = (budget, matched)
        for r, run in runs.items():
            _evaluations(n, p, task, r, run, matched[r])
    n.derived["tasks"] = tasks


def matched_depths(runs: dict, p: dict) -> tuple[int, dict[str, int]]:
    """The matched-compute budget (block applications) and each connection's outer updates at it (notebook 02 reads
    the same)."""
    configs = {r: (s.run.training_depth, s.run.model_config().L) for r, s in runs.items()}
    budget, matched = depth_fair.matched_depths(configs, p.get("matched_blocks") or None)
    deep = {r: d for r, d in matched.items() if d > p["max_updates"]}
    if deep:
        raise UsageError(f"parameter matched_blocks={budget}: {', '.join(f'{r} {d}' for r, d in deep.items())} outer "
                         f"updates, past max_updates={p['max_updates']}; give a smaller budget or a larger max_updates")
    return budget, matched


def _evaluations(n: Needs, p: dict, task: str, r: str, run, matched: int) -> None:
    depth = run.run.training_depth
    if registry.task(task).voted:  # every test input, its predictions for pass@2 voting (at both depths)
        at = tuple(sorted({depth, matched}))
        args = dict(updates=at[-1], every=depth if len(at) == 1 else 1, limit=run.run.split_rows("test"), snapshots=at)
    else:
        args = dict(updates=depth, every=depth, limit=p["limit"] or None)
    n.add_eval(f"{task}/{r}", run, "evaluate", **args)
    if run.run.model_config().n_puzzles > 1:  # ids that name puzzles: the identity ablation beside it
        n.derived["identity"].append((task, r))
        for mode in IDENTITY_MODES:
            n.add_eval(f"{task}/{r}/ids-{mode}", run, "evaluate", puzzle_ids=mode, **args)
    if registry.task(task).voted:
        n.derived["no_validation"][task] = run.run.validation_unavailable() or "pass@2 by depth is not recorded"
        return
    # every update to max_updates: notebook 02's depth evaluation of the same run when the parameters agree
    snaps = run.run.standard_snapshots()
    n.add_eval(f"{task}/{r}/depths", run, "evaluate", updates=p["max_updates"], every=1, limit=p["limit"] or None,
               snapshots=snaps if snaps[1] <= p["max_updates"] else ())
    why = run.run.validation_unavailable()
    if why:
        n.derived["no_validation"][task] = why
    else:
        n.add_eval(f"{task}/{r}/valid", run, "evaluate", updates=p["max_updates"], every=1, limit=p["limit"] or None,
                   test_set=VALID)


EXPERIMENT = Experiment("Main table", (*profiles.PAPER_PROFILES, "search"), declare)
