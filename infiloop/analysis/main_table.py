"""Table 1's measured cells (notebook 01): each test item's score at the training depth, and how much of a score is
recall of the puzzle's identity.

A reasoner with a learned puzzle embedding (ARC: one identifier per task, TRM's and HRM's protocol) reads each
puzzle's identifier in a prefix. A model can then answer a puzzle it has seen by recalling its identifier rather
than by reasoning on the grid (TinyRecursiveModels issue 60: with the task id randomised TRM's ARC accuracy drops
to 0 %). The identity ablation evaluates the same weights with the prefix's ids blank (all 0) or drawn at random
from the other puzzles (``evaluation.PUZZLE_IDS``); the score that survives is the part that does not rest on the
identifier.
"""

from __future__ import annotations

import numpy as np

from . import intervals
from .intervals import Interval
from .trajectories import arc_vote, solved_at

IDENTITY_MODES = ("blank", "random")  # the ablation's ids; "own" is the table's own measurement


def item_scores(traj: dict, test, depth: int, voted: bool) -> np.ndarray:
    """Per test item at update ``depth``: exact (1/0 per puzzle) or, for a task scored by voting over views (ARC),
    pass@2 per task (the fraction of its test inputs solved), in task order."""
    if voted:
        per_task = arc_vote(traj, test, depth, k=2).per_task
        return np.array([per_task[k] for k in sorted(per_task)], dtype=np.float64)
    return solved_at(traj, depth).astype(np.float64)


def mean_score(per_seed: list[np.ndarray]) -> Interval:
    """The mean over seeds of the mean item score, with its 95 % interval over seeds and items (a share)."""
    return intervals.interval([[(s, np.ones_like(s))] for s in per_seed], vectorized=True, bounds=intervals.SHARE)


def identity_rows(scores: dict[tuple[str, str, str], list[np.ndarray]], labels: dict[str, str]
                  ) -> tuple[list[str], list[list[str]]]:
    """The identity ablation's table: per (task, recipe) with ablation scores, the score with each puzzle's own ids,
    with blank ids and with random ids (``scores[task, recipe, mode]``: per seed, per item), each with its interval,
    and the paired loss own − blank (points)."""
    cols = ["task", "model", "own ids", "blank ids", "random ids", "own − blank"]
    rows = []
    for task, recipe in dict.fromkeys((t, r) for t, r, m in scores if m == "blank"):
        own, blank = scores[task, recipe, "own"], scores[task, recipe, "blank"]
        loss = intervals.interval([[(a, np.ones_like(a)), (b, np.ones_like(b))] for a, b in zip(own, blank)],
                                  lambda q: q[0] - q[1], vectorized=True, bounds=(-1.0, 1.0))
        rows.append([task, labels.get(recipe, recipe),
                     *(mean_score(scores[task, recipe, m]).pct() for m in ("own", *IDENTITY_MODES)), loss.points()])
    return cols, rows
