"""Each notebook's declaration: a function of its parameters that adds the runs, evaluations and looped decoders
it reads to its :class:`~.specs.Needs` (:data:`DECLARATIONS`, by notebook name), and the notebooks' names.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import paths
from ...analysis import depth_fair
from ...analysis.main_table import IDENTITY_MODES
from ...errors import UsageError
from ...tasks import extrapolation, registry
from ...tasks.validation import VALID
from .. import looplm
from ..settings import profiles
from ..settings.recipes import ABLATIONS, CONDITIONING_RECIPES, MAIN_RECIPES, OVERTHINK_ARMS, OVERTHINK_RECIPES
from .specs import Needs, parse_ints


def main_table(n: Needs, p: dict) -> None:
    """Notebook 01: each main connection on each task at its training depth (ARC: every test input, with
    a snapshot of the predictions for pass@2 voting); where the puzzle-embedding prefix names puzzles (ARC), the same
    evaluation with blank and with random ids (the identity ablation); and the depth-fair columns (``analysis/
    depth_fair.py``): the test set and the validation split to ``max_updates`` at every update, so that each
    connection is also read at matched compute and at its best depth on validation."""
    tasks = [t.strip() for t in p["tasks"].split(",") if t.strip()] or profiles.main_tasks(n.profile)
    n.derived["identity"] = []  # the (task, recipe) pairs with the identity ablation
    n.derived["matched"], n.derived["no_validation"] = {}, {}
    for task in tasks:
        runs = {r: n.add_run(f"{task}/{r}", task, r) for r in MAIN_RECIPES}
        budget, matched = _matched(runs, p)
        n.derived["matched"][task] = (budget, matched)
        for r, run in runs.items():
            _main_table_evals(n, p, task, r, run, matched[r])
    n.derived["tasks"] = tasks


def _matched(runs: dict, p: dict) -> tuple[int, dict[str, int]]:
    """The matched-compute budget (block applications) and each connection's outer updates at it."""
    configs = {r: (s.run.training_depth, s.run.model_config().L) for r, s in runs.items()}
    budget, matched = depth_fair.matched_depths(configs, p.get("matched_blocks") or None)
    deep = {r: d for r, d in matched.items() if d > p["max_updates"]}
    if deep:
        raise UsageError(f"parameter matched_blocks={budget}: {', '.join(f'{r} {d}' for r, d in deep.items())} outer "
                         f"updates, past max_updates={p['max_updates']}; give a smaller budget or a larger max_updates")
    return budget, matched


def _main_table_evals(n: Needs, p: dict, task: str, r: str, run, matched: int) -> None:
    depth = run.run.training_depth
    if registry.task(task).voted:  # every test input, its predictions for pass@2 voting (at both depths)
        at = tuple(sorted({depth, matched}))
        args = dict(updates=at[-1], every=depth if len(at) == 1 else 1, limit=len(run.run.test_data()), snapshots=at)
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


def _depth_snapshots(n: Needs, p: dict) -> tuple[int, int]:
    a = p["change_from"] or n.runs["infiloop"].run.standard_snapshots()[0]
    return a, p["change_to"] or 2 * a


def depth_scaling(n: Needs, p: dict) -> None:
    """Notebook 02: the three main models to ``max_updates``, every update, with prediction snapshots at
    the two depths of "predictions changed"."""
    for r in MAIN_RECIPES:
        n.add_run(r, p["task"], r)
    a, b = _depth_snapshots(n, p)
    for r in MAIN_RECIPES:
        n.add_eval(f"depth/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                   limit=p["limit"] or None, snapshots=(a, b))
    # the depth-fair marks (analysis/depth_fair.py): matched compute, and the best depth on the validation split
    n.derived["matched"] = _matched({r: n.runs[r] for r in MAIN_RECIPES}, p)
    n.derived["no_validation"] = n.runs["infiloop"].run.validation_unavailable()
    if not n.derived["no_validation"]:
        for r in MAIN_RECIPES:
            n.add_eval(f"valid/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                       limit=p["limit"] or None, test_set=VALID)
    n.derived.update(change_from=a, change_to=b)


def gamma_dynamics(n: Needs, p: dict) -> None:
    """Notebook 03: InfiLoop's trajectory (γ, content score, wrong cells), notebook 02's by default."""
    run = n.add_run("infiloop", profiles.task(n.profile), "infiloop")
    snaps = run.run.standard_snapshots()  # as notebook 02 asks, so that the two share one trajectory
    n.add_eval("depth/infiloop", run, "evaluate", updates=p["max_updates"], every=1, limit=p["limit"] or None,
               snapshots=snaps if snaps[1] <= p["max_updates"] else ())


def perturbation(n: Needs, p: dict) -> None:
    """Notebook 04: a relative perturbation of the state at ``perturb_at``, each size, every main model."""
    for r in MAIN_RECIPES:
        n.add_run(r, profiles.task(n.profile), r)
    try:
        eps = tuple(float(e) for e in p["eps"].split(",") if e.strip())
    except ValueError as e:
        raise UsageError(f"parameter eps={p['eps']!r}: expected numbers separated by commas") from e
    at = p["perturb_at"] or n.runs["infiloop"].run.standard_snapshots()[0]
    after = p["updates_after"] or at
    for r in MAIN_RECIPES:
        n.add_eval(f"perturb/{r}", n.runs[r], "perturb", at=at, eps=eps, updates_after=after, every=1,
                   limit=p["limit"] or None, seed=p["perturbation_seed"])
    n.derived.update(eps=eps, at=at, after=after)


def beta0_ablation(n: Needs, p: dict) -> None:
    """Notebook 05: every ablation variant of InfiLoop (``recipes.ABLATIONS``) to the long budget."""
    for key, abl in ABLATIONS.items():
        n.add_run(f"ablation/{key}", profiles.task(n.profile), "infiloop", abl["overrides"])
    short = p["budget_short"] or n.runs[f"ablation/{next(iter(ABLATIONS))}"].run.training_depth
    long = p["budget_long"] or round(short * 32 / 3)
    if long <= short:
        raise UsageError(f"parameter budget_long={long}: expected more than budget_short={short}")
    for key in ABLATIONS:
        n.add_eval(f"ablation/{key}", n.runs[f"ablation/{key}"], "evaluate", updates=long, every=1,
                   limit=p["limit"] or None)
    n.derived.update(short=short, long=long)


def conditioning(n: Needs, p: dict) -> None:
    """Notebook 06: the conditioners of the looped-LM study, exact accuracy after exactly N updates."""
    for r in CONDITIONING_RECIPES:
        over = {"model.cond.history": p["history_map"]} if r.startswith("history") else {}
        n.add_run(r, profiles.task(n.profile), r, over)
    depth = n.runs["carry_last"].run.training_depth
    if p["budgets"].strip():
        grid = parse_ints(p["budgets"], "budgets")
        if not grid or grid[0] < 1:
            raise UsageError(f"parameter budgets={p['budgets']!r}: expected outer-update counts >= 1")
    else:
        grid = [max(1, depth // 2)] + [depth * 2 ** k for k in range(16) if depth * 2 ** k <= p["max_budget"]]
        grid = sorted(set(grid) | {p["max_budget"]})
    for r in CONDITIONING_RECIPES:
        n.add_eval(f"budgets/{r}", n.runs[r], "budgets", budgets=tuple(grid), limit=p["limit"] or None)
    n.derived.update(depth=depth, grid=grid)


def watch_the_loop(n: Needs, p: dict) -> None:
    """Notebook 07: the main models' trajectories (notebook 02's when the parameters agree). The single
    puzzle recorded for the animation is chosen from these, so it is computed by the notebook itself."""
    for r in MAIN_RECIPES:
        n.add_run(r, p["task"], r)
    snaps = n.runs["infiloop"].run.standard_snapshots()
    for r in MAIN_RECIPES:
        n.add_eval(f"depth/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                   limit=p["limit"] or None, snapshots=snaps if snaps[1] <= p["max_updates"] else ())


def looped_lm(n: Needs, p: dict) -> None:
    g = looplm.grid(n.profile, p["seeds"], p["connections"], p["allocations"])
    n.derived["grid"] = g
    for cell in g.cells:
        n.add_model(looplm.cell_id(cell), g.probe(cell))


def overthinking(n: Needs, p: dict) -> None:
    """Notebook 09: the six models of the overthinking setting (carry-last, FPRM, InfiLoop, with and without recall;
    ``recipes.OVERTHINK_RECIPES``) and, with ``arms``, the two more of ``recipes.OVERTHINK_ARMS``, trained on
    ``task`` at its training size and evaluated to ``max_updates`` at every
    update on each of the data set's named test sets (``tasks/extrapolation.py``)."""
    sizes = extrapolation.named_sizes(p["task"], profiles.data_of(n.profile).tasks.get(p["task"], {})) \
        if p["task"] in extrapolation.SIZE_SETTINGS else []
    if not sizes:
        have = [name for name in profiles.names() if p["task"] in extrapolation.SIZE_SETTINGS and
                extrapolation.named_sizes(p["task"], profiles.data_of(name).tasks.get(p["task"], {}))]
        raise UsageError(f"notebook 09: profile {n.profile!r} has no {p['task']} data with test sets at several "
                         f"sizes; profiles that have: {', '.join(have) or 'none'} (task: prefix_sums or maze)")
    arms = {r: (r, {}) for r in OVERTHINK_RECIPES} | (OVERTHINK_ARMS if p["arms"] else {})
    for r, (recipe, overrides) in arms.items():
        n.add_run(r, p["task"], recipe, overrides)
    for size in sizes:
        for r in arms:
            n.add_eval(f"{size}/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                       limit=p["limit"] or None, test_set=extrapolation.size_set_name(size))
    n.derived["sizes"] = sizes


DECLARATIONS: dict[str, Callable[[Needs, dict], None]] = {
    "01_main_table": main_table,
    "02_depth_scaling": depth_scaling,
    "03_gamma_dynamics": gamma_dynamics,
    "04_perturbation": perturbation,
    "05_beta0_ablation": beta0_ablation,
    "06_conditioning": conditioning,
    "07_watch_the_loop": watch_the_loop,
    "08_looped_lm": looped_lm,
    "09_overthinking": overthinking,
}


# ------------------------------------------------------------------------------------------ reading the plan


def notebook_name(name: str) -> str:
    """``"02"``, ``"depth_scaling"`` or ``"02_depth_scaling"`` -> ``"02_depth_scaling"``."""
    for full in DECLARATIONS:
        if name in (full, full[:2], full[3:]):
            return full
    raise UsageError(f"unknown notebook {name!r}; valid: {', '.join(DECLARATIONS)} (or their number)")


def profile_notebooks(profile: str) -> list[str]:
    """The notebooks a profile runs by default: its ``notebooks`` list (numbers or names), else every one."""
    wanted = profiles.notebooks(profile)
    return [notebook_name(str(x)) for x in wanted] if wanted else sorted(DECLARATIONS)


def undeclared_notebooks() -> list[str]:
    """Notebooks in notebooks/ not declared here: their runs and evaluations are not planned."""
    return [p.stem for p in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.py")) if p.stem not in DECLARATIONS]
