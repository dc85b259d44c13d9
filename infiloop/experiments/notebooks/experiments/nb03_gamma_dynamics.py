"""Notebook 03, γ dynamics: InfiLoop's trajectory (γ, content score, wrong cells)."""

from __future__ import annotations

from ...settings import profiles
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """InfiLoop's trajectory (γ, content score, wrong cells), notebook 02's by default."""
    run = n.add_run("infiloop", profiles.task(n.profile), "infiloop")
    snaps = run.run.standard_snapshots()  # as notebook 02 asks, so that the two share one trajectory
    n.add_eval("depth/infiloop", run, "evaluate", updates=p["max_updates"], every=1, limit=p["limit"] or None,
               snapshots=snaps if snaps[1] <= p["max_updates"] else ())


EXPERIMENT = Experiment("γ dynamics", (*profiles.PAPER_PROFILES, "search"), declare)
