"""Notebook 05, the ablations: β₀, the decay, the axes and the content score of InfiLoop."""

from __future__ import annotations

from ....errors import UsageError
from ...settings import profiles
from ...settings.recipes import ABLATIONS
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """Every ablation variant of InfiLoop (``recipes.ABLATIONS``) to the long budget."""
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


EXPERIMENT = Experiment("Ablations: β₀, decay, axes, content score", profiles.PAPER_PROFILES, declare)
