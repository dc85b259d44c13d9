"""The paper's own published figure data, as its authors released them (``paper_data/``, with their source).

The authors of the paper (arXiv 2610.11570) published the numbers behind its figures in their repository
pixeli99/InfiLoop (``tools/animations/``; commits in ``paper_data/README.md``); the package ships them as CSV. This
module reads them (:func:`curve`) and states what they show, beside what the paper's text and Table 1 say:

- Figure 3 (left): exact accuracy on 32,768 Sudoku-Extreme puzzles every 6 outer updates to 960 (24,960 layers) for
  TRM, InfiLoop and FPRM (FPRM's line the pointwise minimum over three seeds). Its TRM rises from 54.6 % at 156 layers
  to 83.65 % at 24,960 and never falls more than 0.32 points below its running maximum.
- Figure 1(a): TRM (the animation script's "TRM self-attention checkpoint", another run) and InfiLoop at every update
  1–72; its TRM peaks at 62.23 % at update 18 (468 layers) and ends at 58.10 % at update 72 (1,872 layers).
  At 468 layers the two figures' TRM read 73.41 % and 62.23 %: two runs.
- No curve reaches Table 1's Sudoku numbers (97.9 / 94.2 / 74.7 % for InfiLoop / FPRM / TRM): their maxima are
  92.74 / 91.57 / 83.66 %.

One outer update is 26 executed layers in the paper's evaluation configuration (``paper.PAPER_LAYERS_PER_UPDATE``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "paper_data"
FIGURES = {"fig3": "fig3_depth_scaling.csv", "fig1a": "fig1_teaching.csv"}  # figure -> file
MODELS = {"fig3": ("TRM", "InfiLoop", "FPRM"), "fig1a": ("TRM", "InfiLoop")}
NAMES = {"fig3": "Figure 3", "fig1a": "Figure 1(a)"}


@dataclass(frozen=True)
class Curve:
    """One model's published accuracy curve: outer updates, layers and exact accuracy (%), in update order."""

    figure: str
    model: str
    updates: np.ndarray
    layers: np.ndarray
    accuracy: np.ndarray

    def at(self, update: int) -> float:
        """The accuracy (%) at ``update`` (one of the published updates)."""
        hit = np.flatnonzero(self.updates == update)
        if not hit.size:
            raise KeyError(f"{NAMES[self.figure]}'s {self.model} has no point at update {update}")
        return float(self.accuracy[hit[0]])

    def peak(self) -> tuple[int, float]:
        """(update, accuracy) of the curve's maximum (the first, on ties)."""
        i = int(np.argmax(self.accuracy))
        return int(self.updates[i]), float(self.accuracy[i])

    def largest_drop(self) -> float:
        """The most the curve ever lies below its running maximum (points)."""
        return float(np.max(np.maximum.accumulate(self.accuracy) - self.accuracy))


@cache
def _rows(figure: str) -> tuple[dict, ...]:
    with open(DATA / FIGURES[figure], newline="", encoding="utf-8") as f:
        return tuple(csv.DictReader(f))


def curve(figure: str, model: str) -> Curve:
    """``model``'s curve (TRM, InfiLoop or FPRM) of ``figure`` (``fig3``: Figure 3's depth scaling; ``fig1a``:
    Figure 1(a)), read from the shipped CSV, in float64."""
    if figure not in FIGURES:
        raise KeyError(f"no published figure {figure!r}: one of {', '.join(FIGURES)}")
    rows = [r for r in _rows(figure) if r["model"] == model]
    if not rows:
        raise KeyError(f"{NAMES[figure]} has no {model!r} curve: one of {', '.join(MODELS[figure])}")
    rows.sort(key=lambda r: int(r["outer_update"]))
    return Curve(figure, model, np.array([int(r["outer_update"]) for r in rows]),
                 np.array([int(r["layers"]) for r in rows]), np.array([float(r["accuracy_pct"]) for r in rows]))
