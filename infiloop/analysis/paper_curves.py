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
- The curves do not give Table 1's Sudoku numbers (97.9 / 94.2 / 74.7 % for InfiLoop / FPRM / TRM): InfiLoop's and
  FPRM's never reach theirs (maxima 92.74 and 91.57 %), and Figure 3's TRM passes 74.7 % from update 24 (maximum
  83.66 %).

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


PAPER_TRAINING_DEPTH = 36  # the paper's Sudoku training depth in outer updates (H = 3 × 12 segments)
SERIES = (("fig3", "InfiLoop"), ("fig3", "FPRM"), ("fig3", "TRM"), ("fig1a", "TRM"))  # what notebook 02 draws


def relative(c: Curve, training_depth: int = PAPER_TRAINING_DEPTH) -> np.ndarray:
    """The curve's updates relative to the training depth (1 = the training depth), the axis on which notebook 02
    draws the paper's curves beside ours (whose training depth differs)."""
    return c.updates / training_depth


def statement() -> str:
    """What the published curves show, in one paragraph, every number read from the data: Figure 3's TRM, Figure
    1(a)'s, the two at 468 layers, and the curves' maxima against Table 1 (the README, docs/related-work.md, notebook
    02 and the report say it)."""
    f3, f1 = curve("fig3", "TRM"), curve("fig1a", "TRM")
    p1, _ = f1.peak()
    maxima = {m: curve("fig3", m).peak()[1] for m in ("InfiLoop", "FPRM", "TRM")}
    at18 = (f3.at(18), f1.at(18))
    above = int(f3.updates[np.argmax(f3.accuracy >= 74.7)])  # Table 1's TRM
    return (f"The paper's own published curves (its authors' data, infiloop/analysis/paper_data): Figure 3's TRM rises "
            f"from {f3.accuracy[0]:.1f} % at {f3.layers[0]} layers to {f3.at(960):.2f} % at {f3.layers[-1]:,} and "
            f"never falls more than {f3.largest_drop():.2f} points below its running maximum; Figure 1(a)'s TRM, "
            f"another run, peaks at {f1.peak()[1]:.2f} % at update {p1} and ends at {f1.at(72):.2f} % at update 72 "
            f"(at 468 layers the two read {at18[0]:.2f} and {at18[1]:.2f} %). So the paper holds both a TRM that "
            f"falls and one that never does. The curves do not give Table 1's Sudoku numbers: InfiLoop's and FPRM's "
            f"never reach 97.9 and 94.2 % (their maxima {maxima['InfiLoop']:.2f} and {maxima['FPRM']:.2f} %), and "
            f"Figure 3's TRM passes Table 1's 74.7 % from update {above} on (its maximum {maxima['TRM']:.2f} %).")


KEYS = {"TRM": "carry_last", "InfiLoop": "infiloop", "FPRM": "fprm"}  # a model's connection (its colour)
LINES = {"fig3": "--", "fig1a": ":"}


def draw(ax, colors: dict[str, str], training_depth: int = PAPER_TRAINING_DEPTH) -> None:
    """Figure 3's three curves and Figure 1(a)'s TRM on ``ax`` against updates relative to the paper's training depth
    (dashed: Figure 3; dotted: Figure 1(a)), coloured by connection (``colors``: ``plotting.COLORS``)."""
    for figure, model in SERIES:
        c = curve(figure, model)
        ax.plot(relative(c, training_depth), c.accuracy, ls=LINES[figure], lw=1.4, color=colors[KEYS[model]],
                label=f"{model}, the paper's {NAMES[figure]}")
