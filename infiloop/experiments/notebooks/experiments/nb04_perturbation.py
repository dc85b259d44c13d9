"""Notebook 04, perturbation stability: the main models' states perturbed at one depth, then run on."""

from __future__ import annotations

from ....errors import UsageError
from ...settings import profiles
from ...settings.recipes import MAIN_RECIPES
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """A relative perturbation of the state at ``perturb_at``, each size, every main model."""
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


EXPERIMENT = Experiment("Perturbation stability", (*profiles.PAPER_PROFILES, "search"), declare)
