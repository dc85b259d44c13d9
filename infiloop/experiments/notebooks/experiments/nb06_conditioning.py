"""Notebook 06, conditioning the loop: the conditioners of the looped-LM study on the reasoner, beside InfiLoop."""

from __future__ import annotations

from ....errors import UsageError
from ...settings import profiles
from ...settings.recipes import CONDITIONING_RECIPES
from ..needs import Needs, parse_ints
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """The conditioners of the looped-LM study, exact accuracy after exactly N updates."""
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


EXPERIMENT = Experiment("Conditioning the loop: the looped-LM study beside InfiLoop", profiles.PAPER_PROFILES,
                        declare)
