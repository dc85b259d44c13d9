"""Notebook 09, overthinking: tasks that extrapolate in size, where recurrent networks without recall are reported to
lose their answers as they iterate. It runs at smoke and at its own profile ``overthink``, whose data (test sets at
several sizes) the other profiles do not build."""

from __future__ import annotations

from ....errors import UsageError
from ....tasks import extrapolation, registry
from ...settings import profiles
from ...settings.recipes import OVERTHINK_ARMS, OVERTHINK_RECIPES
from ..needs import Needs
from . import Experiment


def declare(n: Needs, p: dict) -> None:
    """The six models of the overthinking setting (carry-last, FPRM, InfiLoop, with and without recall;
    ``recipes.OVERTHINK_RECIPES``) and, with ``arms``, the two more of ``recipes.OVERTHINK_ARMS``, trained on
    ``task`` at its training size and evaluated to ``max_updates`` at every update on each of the data set's named
    test sets (``tasks/extrapolation.py``)."""
    def sizes_at(profile: str) -> list[int]:
        key = registry.REGISTRY[p["task"]].size_setting if p["task"] in registry.REGISTRY else None
        return extrapolation.named_sizes(p["task"], profiles.data_of(profile).tasks.get(p["task"], {}), key)

    sizes = sizes_at(n.profile)
    if not sizes:
        have = [name for name in profiles.names() if sizes_at(name)]
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


EXPERIMENT = Experiment("Overthinking", ("smoke", "overthink"), declare)
