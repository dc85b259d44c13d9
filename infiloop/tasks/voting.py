"""ARC pass@K by voting over augmented views (the paper's benchmarks; TRM's format).

Each prediction on a view of a test input is mapped back through the inverse view, predictions are
grouped by the grid they predict, groups are ranked by (vote count, mean halting confidence), and
the K best are the attempts. A test input is solved when one attempt equals its output; a task
scores the fraction of its test inputs solved; the score is the mean over tasks.

Votes belong to one evaluation run. Attempts that carry several ``run`` labels are refused unless
``pool_runs=True`` says on purpose that they should be pooled (TRM users' pitfall).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .arc import decode_grid, invert_view
from .base import DataError, TaskData


@dataclass
class Attempt:
    """One prediction, already in the task's original frame."""

    task: str
    test_index: int
    grid: np.ndarray
    confidence: float = 0.0
    run: int | str = 0


@dataclass
class Candidate:
    grid: np.ndarray
    votes: int
    mean_confidence: float


@dataclass
class PassAtK:
    k: int
    score: float  # mean over tasks of the fraction of test inputs solved
    per_task: dict[str, float]
    ranked: dict[tuple[str, int], list[Candidate]] = field(repr=False, default_factory=dict)
    runs: tuple = ()


def _key(grid: np.ndarray) -> bytes:
    g = np.ascontiguousarray(grid, dtype=np.int8)
    return bytes([g.shape[0], g.shape[1]]) + g.tobytes()


def rank_attempts(attempts: list[Attempt]) -> dict[tuple[str, int], list[Candidate]]:
    """Group by (task, test input) and predicted grid; order by votes, then mean confidence."""
    groups: dict[tuple[str, int], dict[bytes, list]] = defaultdict(dict)
    for a in attempts:
        if a.grid is None:
            continue
        slot = groups[(a.task, a.test_index)].setdefault(_key(a.grid), [np.asarray(a.grid), 0, 0.0])
        slot[1] += 1
        slot[2] += float(a.confidence)
    out = {}
    for k, g in groups.items():
        cands = [Candidate(grid, votes, conf / votes) for grid, votes, conf in g.values()]
        out[k] = sorted(cands, key=lambda c: (-c.votes, -c.mean_confidence))
    return out


def vote_pass_at_k(attempts: list[Attempt], solutions: dict[str, list[np.ndarray]], k: int = 2,
                   pool_runs: bool = False) -> PassAtK:
    """pass@k of one evaluation run. ``solutions[task]`` lists the outputs of the task's test inputs;
    every task in it is scored (a task without attempts scores 0)."""
    runs = tuple(sorted({a.run for a in attempts}, key=str))
    if len(runs) > 1 and not pool_runs:
        raise DataError(f"attempts come from {len(runs)} evaluation runs {list(runs)}: score each run with "
                        "vote_pass_at_k_per_run, or pass pool_runs=True to pool their votes on purpose")
    unknown = {a.task for a in attempts} - set(solutions)
    if unknown:
        raise DataError(f"attempts for tasks without solutions: {sorted(unknown)[:5]}")
    ranked = rank_attempts(attempts)
    per_task = {}
    for task, outs in solutions.items():
        solved = 0
        for i, out in enumerate(outs):
            top = ranked.get((task, i), [])[:k]
            solved += any(c.grid.shape == out.shape and np.array_equal(c.grid, out) for c in top)
        per_task[task] = solved / len(outs)
    score = float(np.mean(list(per_task.values()))) if per_task else 0.0
    return PassAtK(k, score, per_task, ranked, runs)


def vote_pass_at_k_per_run(attempts: list[Attempt], solutions, k: int = 2) -> dict:
    """:func:`vote_pass_at_k` for each run separately: ``{run: PassAtK}``."""
    by_run = defaultdict(list)
    for a in attempts:
        by_run[a.run].append(a)
    return {r: vote_pass_at_k(a, solutions, k) for r, a in by_run.items()}


def attempts_from_predictions(data: TaskData, pred_tokens, confidence=None, run: int | str = 0) -> list[Attempt]:
    """Decode the predictions on the rows of an ARC test set and map them back to the original
    frame. Rows whose prediction is not a well-formed grid give no attempt."""
    pred = np.asarray(pred_tokens.detach().cpu() if hasattr(pred_tokens, "detach") else pred_tokens)
    if len(pred) != len(data):
        raise DataError(f"{len(pred)} predictions for {len(data)} rows of {data.name}")
    conf = np.zeros(len(pred)) if confidence is None else np.asarray(
        confidence.detach().cpu() if hasattr(confidence, "detach") else confidence, dtype=float).reshape(-1)
    canvas, m, names = data.grid[0], data.meta, data.info["tasks"]
    out = []
    for i in range(len(pred)):
        g = decode_grid(pred[i], canvas)
        if g is None:
            continue
        g = invert_view(g, int(m["dihedral"][i]), m["colour_map"][i])
        out.append(Attempt(names[int(m["task"][i])], int(m["example"][i]), g, float(conf[i]), run))
    return out


def solutions_from_data(data: TaskData) -> dict[str, list[np.ndarray]]:
    """Outputs of the test inputs, read from the identity view (view 0) of an ARC test set."""
    canvas, m, names = data.grid[0], data.meta, data.info["tasks"]
    sols: dict[str, dict[int, np.ndarray]] = defaultdict(dict)
    for i in np.flatnonzero(m["view"] == 0):
        g = decode_grid(data.labels[i], canvas)
        if g is None:
            raise DataError(f"{data.name}: row {i} (task {names[int(m['task'][i])]}) has no known test output")
        sols[names[int(m["task"][i])]][int(m["example"][i])] = g
    return {t: [d[j] for j in sorted(d)] for t, d in sols.items()}
