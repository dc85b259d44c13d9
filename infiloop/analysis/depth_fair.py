"""Depth-fair tables: each connection's exact accuracy at three depths, so that no comparison rests on a depth
chosen to suit one model (notebook 01 shows them, notebook 02 marks them on its curves).

A looped reasoner can be scored after any number of outer updates, and the paper reports each model where its
curve stands (Table 1 at the evaluation depth, the depth-scaling figure at 72 to 960 updates). A sceptical reader
asks three questions, one column each (:data:`COLUMNS`):

- **training depth**: the outer updates a puzzle sees in training, H x the supervision segments (``Run.
  training_depth``; the paper's Sudoku 36 = 3 x 12, docs/model.md). Table 1's measured cells and every claim of
  notebook 01 use it.
- **matched compute**: the same number of block applications for every connection. One outer update applies the
  shared block L + 1 times (L inner updates ``z <- f(z + y + x)`` and one outer update ``y <- f(y + z)``, the
  paper's §2; ``flops.flops_per_update`` prices an evaluation update by it), so a budget of B block applications
  is ``B // (L + 1)`` outer updates of a connection (:func:`matched_depths`). The budget is the largest training
  budget among the connections compared (training depth x (L + 1)) unless one is given. The loop connections
  themselves (γ, the content score, FPRM's damping) cost O(d) per token next to the block's O(d²) and are not
  counted, as the paper counts depth in layers. Where every connection has the same H, L and segments (every
  profile here), matched compute is the training depth; the column says so rather than hiding it.
- **best on validation**: the depth, among every recorded update up to the deepest evaluated, at which the
  connection's mean exact accuracy over seeds is highest on the *validation split* (held-out puzzles of the
  training distribution, ``tasks/validation.py``), ties to the shallowest; the test accuracy is then read at that
  depth and the depth is named (:func:`best_on_validation`). Chosen on the test puzzles themselves, the best depth
  would be biased upwards by the noise of the test set. A task without a validation split (ARC) says why.

Each cell is a mean over seeds with its 95 % interval (``main_table.mean_score``); the paired difference between two
connections at each column is :func:`column_effects`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import claims
from .intervals import Interval
from .main_table import item_scores, mean_score
from .trajectories import solved_at

COLUMNS = ("training depth", "matched compute", "best on validation")


def block_applications(L: int) -> int:
    """Applications of the shared block per outer update: L inner updates and one outer update (§2)."""
    return int(L) + 1


def matched_depths(configs: dict[str, tuple[int, int]], budget: int | None = None) -> tuple[int, dict[str, int]]:
    """The budget in block applications and each connection's outer updates at it: ``configs[name]`` =
    (training depth, L). Default budget: the largest training budget, max over connections of depth x (L + 1)."""
    if not configs:
        raise ValueError("matched_depths: no connection given")
    if budget is None:
        budget = max(d * block_applications(L) for d, L in configs.values())
    if budget < 1:
        raise ValueError(f"matched_depths: a budget of block applications >= 1, not {budget}")
    depths = {name: budget // block_applications(L) for name, (_, L) in configs.items()}
    short = [name for name, d in depths.items() if d < 1]
    if short:
        raise ValueError(f"matched_depths: a budget of {budget} block applications is less than one outer update "
                         f"of {', '.join(short)}")
    return budget, depths


def accuracy_curve(trajs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(updates, mean over seeds of the exact accuracy at each recorded update); the seeds' trajectories must
    record the same updates."""
    ups = trajs[0]["updates"]
    if any(not np.array_equal(t["updates"], ups) for t in trajs):
        raise ValueError("accuracy_curve: the seeds' trajectories record different updates")
    return ups, np.mean([t["correct"].mean(1) for t in trajs], axis=0)


def best_on_validation(valid: list[dict], max_depth: int | None = None) -> tuple[int, float]:
    """The recorded update (at most ``max_depth``) with the highest mean validation accuracy over seeds, the
    shallowest on ties, and that accuracy."""
    ups, acc = accuracy_curve(valid)
    keep = ups <= (max_depth if max_depth is not None else ups[-1])
    if not keep.any():
        raise ValueError(f"best_on_validation: no recorded update at or below {max_depth}")
    ups, acc = ups[keep], acc[keep]
    i = int(np.flatnonzero(acc == acc.max())[0])
    return int(ups[i]), float(acc[i])


@dataclass
class Cell:
    """One column of a connection: the depth (outer updates), the test accuracy there over seeds and puzzles, the
    per-seed solved flags (for paired effects) and a note (the budget, the validation accuracy, or why not)."""

    depth: int | None
    score: Interval | None
    flags: list[np.ndarray]
    note: str

    def text(self) -> str:
        if self.score is None:
            return f"not available: {self.note}"
        return f"{self.score.pct()} @ {self.depth}" + (f" ({self.note})" if self.note else "")


def _at(test: list[dict], depth: int, voted_data=None) -> tuple[Interval, list[np.ndarray]]:
    """Each seed's item scores at ``depth`` (exact per puzzle; pass@2 per task where ``voted_data``, the voted test
    set, is given) and their mean with its interval."""
    flags = [item_scores(t, voted_data, depth, True) if voted_data is not None else
             solved_at(t, depth).astype(np.float64) for t in test]
    return mean_score(flags), flags


def fair_cells(test: list[dict], valid: list[dict] | None, training_depth: int, matched: int, budget: int,
               why_no_valid: str = "", voted_data=None) -> dict[str, Cell]:
    """The three columns of one connection (:data:`COLUMNS`) from its test trajectories (one per seed, recording
    every depth asked for; ARC: snapshots at the training and matched depths, scored by pass@2 over ``voted_data``'s
    views) and its validation trajectories (``None``: no validation split, ``why_no_valid`` says why)."""
    cells = {}
    for col, depth, note in ((COLUMNS[0], training_depth, ""), (COLUMNS[1], matched, f"{budget} block applications")):
        score, flags = _at(test, depth, voted_data)
        cells[col] = Cell(depth, score, flags, note)
    if valid is None:
        cells[COLUMNS[2]] = Cell(None, None, [], why_no_valid or "no validation split")
    else:
        best, acc = best_on_validation(valid, int(test[0]["updates"][-1]))
        score, flags = _at(test, best)
        cells[COLUMNS[2]] = Cell(best, score, flags, f"validation {100 * acc:.1f} %")
    return cells


def column_effects(a: dict[str, Cell], b: dict[str, Cell]) -> dict[str, Interval | None]:
    """The paired difference a − b (points of exact accuracy on the same test puzzles of each seed) at each column,
    each connection at its own depth of that column; ``None`` where a column is not available."""
    out = {}
    for col in COLUMNS:
        if a[col].score is None or b[col].score is None:
            out[col] = None
        else:
            out[col] = claims.difference(list(zip(a[col].flags, b[col].flags)))
    return out


def effects_text(effects: dict[str, Interval | None]) -> str:
    """The effects at the depth-fair columns other than the training depth, in words (a claim's "ours" beside the
    effect it is decided by)."""
    return "; ".join(f"at {col}: {e.points() if e is not None else 'not available'}"
                     for col, e in effects.items() if col != COLUMNS[0])


def fair_table(cells: dict[tuple[str, str], dict[str, Cell]], labels: dict[str, str]
               ) -> tuple[list[str], list[list[str]]]:
    """The depth-fair table: per (task, connection), the three columns as text (accuracy [interval] @ depth)."""
    cols = ["task", "model", *COLUMNS]
    rows = [[task, labels.get(r, r), *(c[col].text() for col in COLUMNS)] for (task, r), c in cells.items()]
    return cols, rows


def mark_depths(ax, cells: dict[str, dict[str, Cell]], curves: dict[str, np.ndarray], ups: np.ndarray,
                colors: dict[str, str], training_depth: int | None = None) -> None:
    """Mark each connection's three depths on its accuracy curve (``curves[r]``: mean exact accuracy at ``ups``):
    a circle at the training depth, a square at matched compute, a star at the best depth on validation; and a grey
    dotted line at ``training_depth`` where given."""
    if training_depth is not None:
        ax.axvline(training_depth, color="grey", ls=":", lw=1)
        ax.text(training_depth, 2, " training depth", color="grey", fontsize=8)
    row = {int(u): i for i, u in enumerate(ups)}
    for r, c in cells.items():
        for col, marker in zip(COLUMNS, ("o", "s", "*")):
            d = c[col].depth
            if d is not None and d in row:
                ax.plot([d], [100 * curves[r][row[d]]], marker=marker, ms=9 if marker == "*" else 6, ls="none",
                        mfc="none" if marker != "*" else colors[r], mec=colors[r],
                        label=col if r == next(iter(cells)) else None)
