"""Notebook 02, depth scaling: the three main models far past their training depth, every update, with the
snapshots of the carry-last diagnosis and the depth-fair marks."""

from __future__ import annotations

from ....tasks.validation import VALID
from ...settings import profiles
from ...settings.recipes import MAIN_RECIPES
from ..needs import Needs
from . import Experiment
from .nb01_main_table import matched_depths


def _depth_snapshots(n: Needs, p: dict) -> tuple[int, int]:
    a = p["change_from"] or n.runs["infiloop"].run.standard_snapshots()[0]
    return a, p["change_to"] or 2 * a


def declare(n: Needs, p: dict) -> None:
    """The three main models to ``max_updates``, every update, with prediction snapshots at the two depths of
    "predictions changed"."""
    for r in MAIN_RECIPES:
        n.add_run(r, p["task"], r)
    a, b = _depth_snapshots(n, p)
    for r in MAIN_RECIPES:
        n.add_eval(f"depth/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                   limit=p["limit"] or None, snapshots=(a, b))
    # the depth-fair marks (analysis/depth_fair.py): matched compute, and the best depth on the validation split
    n.derived["matched"] = matched_depths({r: n.runs[r] for r in MAIN_RECIPES}, p)
    n.derived["no_validation"] = n.runs["infiloop"].run.validation_unavailable()
    if not n.derived["no_validation"]:
        for r in MAIN_RECIPES:
            n.add_eval(f"valid/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                       limit=p["limit"] or None, test_set=VALID)
    n.derived.update(change_from=a, change_to=b)


EXPERIMENT = Experiment("Depth scaling", (*profiles.PAPER_PROFILES, "search"), declare)
