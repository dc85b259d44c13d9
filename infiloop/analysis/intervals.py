"""95 % intervals over training seeds and test puzzles, and the verdict on a claim that they decide.

Every headline number of the notebooks is a mean over training seeds of a per-seed statistic that is a
ratio of sums over that seed's test puzzles (exact accuracy: solved / puzzles; solved-then-lost: lost /
solved; state change after the solve: summed per-puzzle means / puzzles solved), or a function of such
ratios (a difference between two models on the same puzzles, a peak minus the last value of a curve).

**Method**: a two-level percentile bootstrap. Each replicate draws the seeds with replacement, then,
within each drawn seed, its test puzzles with replacement (one draw per seed, shared by every quantity
of that seed, so that two models evaluated on the same puzzles stay paired); the statistic of the
replicate is the mean over the drawn seeds. The interval is the 2.5th and 97.5th percentile of the
replicates. With one seed only the puzzles are resampled: the interval then covers the sampling of the
test set, not the variation between training runs, and :attr:`Interval.method` says so.

A claim's **verdict** (:func:`verdict`) is decided by the interval of the effect the paper reports:
``True`` (agrees) when the interval lies on the paper's side of zero, ``False`` (disagrees) when it lies
on the other side, ``None`` (undecided) when it contains zero.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Ratio = tuple[np.ndarray, np.ndarray]  # (numerator, denominator), the puzzle axis last


@dataclass
class Interval:
    """A statistic (mean over seeds) with its bootstrap interval; arrays for curves, floats for scalars."""

    value: np.ndarray | float
    lo: np.ndarray | float
    hi: np.ndarray | float
    seeds: int
    puzzles: int
    level: float = 0.95
    replicates: int = 0
    items: str = "puzzles"  # what the test items are (the looped decoder's are text items)

    @property
    def method(self) -> str:
        over = f"seeds and test {self.items}" if self.seeds > 1 else \
            f"test {self.items} only (one seed: no seed variation)"
        return (f"{100 * self.level:.0f} % percentile bootstrap over {over}; {self.seeds} seed(s), "
                f"{self.puzzles} {self.items} each, {self.replicates} replicates")

    def point(self, i: int) -> Interval:
        """Element ``i`` of a curve's interval, as a scalar interval."""
        return Interval(float(self.value[i]), float(self.lo[i]), float(self.hi[i]), self.seeds, self.puzzles,
                        self.level, self.replicates, self.items)

    def pct(self, digits: int = 1) -> str:
        """``"90.6 % [88.1, 92.9]"`` for a scalar fraction."""
        if self.value != self.value:
            return "–"
        return f"{100 * self.value:.{digits}f} % [{100 * self.lo:.{digits}f}, {100 * self.hi:.{digits}f}]"

    def num(self, fmt: str = ".3g") -> str:
        if self.value != self.value:
            return "–"
        return f"{self.value:{fmt}} [{self.lo:{fmt}}, {self.hi:{fmt}}]"


def _ratio(num: np.ndarray, den: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """sum(num) / sum(den) over the puzzle axis, each puzzle counted ``weights`` times (a bootstrap draw)."""
    n, d = (num.sum(-1), den.sum(-1)) if weights is None else (num @ weights, den @ weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)


def bootstrap(per_seed: Sequence[Sequence[Ratio]], combine: Callable[[list[np.ndarray]], np.ndarray | float]
              = lambda r: r[0], replicates: int = 1000, level: float = 0.95, seed: int = 0,
              items: str = "puzzles") -> Interval:
    """The interval of ``mean over seeds of combine([ratio_1, ratio_2, ...])``.

    ``per_seed[i]`` holds seed i's quantities as (numerator, denominator) arrays whose last axis is that
    seed's test puzzles (the same puzzles for every quantity of the seed); ``ratio_j`` is
    ``numerator_j.sum(-1) / denominator_j.sum(-1)`` (NaN where the denominator is 0), a float or, for a
    curve ([K, P] arrays), an array over K. ``combine`` maps the seed's ratios to its statistic; ``items`` names
    the test items in the interval's description."""
    if not per_seed or any(not q for q in per_seed):
        raise ValueError("bootstrap: expected at least one seed with at least one quantity")
    per_seed = [[(np.asarray(n, np.float64), np.asarray(d, np.float64)) for n, d in q] for q in per_seed]
    for i, q in enumerate(per_seed):
        if len({a.shape[-1] for pair in q for a in pair}) != 1:
            raise ValueError(f"bootstrap: seed {i}'s quantities are not over the same puzzles (last axes differ)")
    n_seeds = len(per_seed)

    def stat(seeds: Sequence[int], weights: Sequence[np.ndarray | None]) -> np.ndarray:
        vals = np.stack([np.asarray(combine([_ratio(n, d, w) for n, d in per_seed[s]]), np.float64)
                         for s, w in zip(seeds, weights)])
        with warnings.catch_warnings():  # a replicate whose every seed is undefined (no solved puzzle) is NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(vals, axis=0)

    value = stat(range(n_seeds), [None] * n_seeds)
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(replicates):
        seeds = rng.integers(0, n_seeds, n_seeds) if n_seeds > 1 else [0]
        weights = []
        for s in seeds:
            p = per_seed[s][0][0].shape[-1]
            weights.append(np.bincount(rng.integers(0, p, p), minlength=p).astype(np.float64))
        reps.append(stat(seeds, weights))
    tail = 100 * (1 - level) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(np.stack(reps), [tail, 100 - tail], axis=0)
    out = float if np.ndim(value) == 0 else np.asarray
    return Interval(out(value), out(lo), out(hi), n_seeds, int(per_seed[0][0][0].shape[-1]), level, replicates,
                    items)


def verdict(effect: Interval, side: int = +1) -> bool | None:
    """The paper's effect on ``side`` of zero (+1: positive, -1: negative): True when the interval lies
    entirely on that side, False when entirely on the other, None (undecided) when it contains zero."""
    lo, hi = (effect.lo, effect.hi) if side > 0 else (-effect.hi, -effect.lo)
    if not (lo == lo and hi == hi):
        return None
    if lo > 0:
        return True
    if hi < 0:
        return False
    return None


def verdict_note(effect: Interval, what: str, scale: float = 100.0, unit: str = " points", digits: int = 1,
                 side: int = +1) -> str:
    """One line for the claims table: the effect, its interval (``digits`` decimals after ``scale``), the
    verdict for the paper's ``side`` (:func:`verdict`) and how the interval was computed."""
    if effect.value != effect.value:
        return f"{what}: undefined (no puzzle to measure it on, e.g. none solved); undecided"
    v = {True: "agrees", False: "disagrees", None: "undecided"}[verdict(effect, side)]
    f = f"+.{digits}f"
    return (f"{what}: {scale * effect.value:{f}}{unit} [{scale * effect.lo:{f}}, {scale * effect.hi:{f}}] "
            f"({v}; {effect.method})")


def paired_effect(solved: Mapping[str, np.ndarray], keys: Sequence[str],
                  combine: Callable[[list[np.ndarray]], float], what: str) -> tuple[bool | None, str]:
    """A claim decided on one seed's test puzzles: ``solved[k]`` is model k's [P] right-or-wrong flags on the
    same puzzles; the effect ``combine([accuracy of keys[0], ...])`` is resampled with one draw of the puzzles
    for every model (paired). Returns its :func:`verdict` and :func:`verdict_note`."""
    iv = bootstrap([[(np.asarray(solved[k], np.float64), np.ones(len(solved[k]))) for k in keys]], combine)
    return verdict(iv), verdict_note(iv, what)
