"""Notebook 07, watch the loop: animations of the main models' measured trajectories (it shows and checks no claim:
``paper.ILLUSTRATIONS``)."""

from __future__ import annotations

from ...settings import profiles
from ...settings.recipes import MAIN_RECIPES
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """The main models' trajectories (notebook 02's when the parameters agree). The single puzzle recorded for the
    animation is chosen from these, so it is computed by the notebook itself."""
    for r in MAIN_RECIPES:
        n.add_run(r, p["task"], r)
    snaps = n.runs["infiloop"].run.standard_snapshots()
    for r in MAIN_RECIPES:
        n.add_eval(f"depth/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                   limit=p["limit"] or None, snapshots=snaps if snaps[1] <= p["max_updates"] else ())


EXPERIMENT = Experiment("Watch the loop", (*profiles.PAPER_PROFILES, "search"), declare)
