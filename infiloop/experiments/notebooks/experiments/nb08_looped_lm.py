"""Notebook 08, the looped language model: the looped-LM study's own decoder past its training horizon, with
InfiLoop (``infiloop/experiments/looplm.py``, docs/looplm.md)."""

from __future__ import annotations

from ... import looplm
from ...settings import profiles
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """One looped decoder per cell of the profile's grid (allocation, connection, seed), trained and evaluated in
    one job."""
    g = looplm.grid(n.profile, p["seeds"], p["connections"], p["allocations"])
    n.derived["grid"] = g
    for cell in g.cells:
        n.add_model(looplm.cell_id(cell), g.probe(cell))


EXPERIMENT = Experiment("The looped language model past its training horizon, with InfiLoop",
                        profiles.PAPER_PROFILES, declare)
