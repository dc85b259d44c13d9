"""How often an interval method covers the truth: the coverage simulation behind ``intervals.py``'s method.

The simulated experiment is the notebooks' paired comparison: two models, trained with S seeds each, evaluated on
the same P test puzzles; the effect is the mean over seeds of accuracy(B) − accuracy(A). Whether model m (seed s)
solves puzzle p is drawn as Bernoulli(sigmoid(μ_m + a_ms + b_p + c_mp)) with

- b_p ~ N(0, σ_b²): the puzzle's difficulty, shared by both models and every seed (σ_b = 1.5: some puzzles every
  model solves, some none);
- c_mp ~ N(0, σ_c²): what is easy for one model and not the other (σ_c = 0.8);
- a_ms = √ρ u_s + √(1 − ρ) v_ms, u and v ~ N(0, σ_a²): the training seed's luck, partly shared by the two models
  trained with the same seed (ρ), the ``spread`` (:data:`SPREADS`): ``small`` (σ_a = 0.15, ρ = 0.5: a model's
  accuracy moves about 3 points between seeds) or ``search`` (σ_a = 0.9, ρ = 0.8: about 12 points, as the
  ``search`` profile's carry-last, 47.7–78.9 % over three seeds, and InfiLoop, 67.6–83.6 %).

μ_A and μ_B are set (by Gauss–Hermite quadrature) so that the population accuracies, over seeds and puzzles, are
70 % and 70 % + ``effect``: the estimand is exactly ``effect``. :func:`simulate` counts, over ``n`` simulated
experiments, how often the interval covers it and how often it lies wholly above or below zero.
``benchmarks/interval_coverage.py`` runs the full table (``docs/statistics.md``); the tests run one cell.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from . import intervals

SPREADS = {"small": (0.15, 0.5), "search": (0.9, 0.8)}  # (σ_a, ρ)
PUZZLE_SD, MODEL_PUZZLE_SD = 1.5, 0.8
BASE = 0.70


_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(96)


def _population_accuracy(mu: float, sd: float) -> float:
    return float(np.sum(_WEIGHTS / np.sqrt(2 * np.pi) / (1 + np.exp(-(mu + sd * _NODES)))))


@cache
def logit_for(accuracy: float, sd: float) -> float:
    """μ such that E[sigmoid(μ + sd·Z)] = ``accuracy`` (Z standard normal), by bisection."""
    lo, hi = -20.0, 20.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _population_accuracy(mid, sd) < accuracy else (lo, mid)
    return 0.5 * (lo + hi)


def draw(rng: np.random.Generator, seeds: int, puzzles: int, effect: float, spread: str) -> np.ndarray:
    """One simulated experiment: [2, seeds, puzzles] solved flags of models A and B (module docstring)."""
    sa, rho = SPREADS[spread]
    sd = np.sqrt(sa ** 2 + PUZZLE_SD ** 2 + MODEL_PUZZLE_SD ** 2)
    mus = (logit_for(BASE, sd), logit_for(BASE + effect, sd))
    b = rng.normal(0, PUZZLE_SD, puzzles)
    u = rng.normal(0, sa, seeds)
    out = []
    for mu in mus:
        a = np.sqrt(rho) * u + np.sqrt(1 - rho) * rng.normal(0, sa, seeds)
        logit = mu + a[:, None] + b[None, :] + rng.normal(0, MODEL_PUZZLE_SD, puzzles)[None, :]
        out.append(rng.random((seeds, puzzles)) < 1 / (1 + np.exp(-logit)))
    return np.stack(out).astype(np.float64)


def project_interval(flags: np.ndarray, replicates: int, seed: int) -> tuple[float, float]:
    """The project's method (:func:`intervals.interval`) on one experiment: the paired difference B − A."""
    ones = np.ones(flags.shape[-1])
    iv = intervals.interval([[(flags[1, s], ones), (flags[0, s], ones)] for s in range(flags.shape[1])],
                            lambda q: q[0] - q[1], replicates=replicates, seed=seed, vectorized=True)
    return float(iv.lo), float(iv.hi)


@dataclass
class Coverage:
    """Shares of ``n`` simulated experiments: the interval covers the effect, lies above zero, lies below zero."""

    n: int
    covers: float
    above: float
    below: float
    width: float


def simulate(method: Callable[[np.ndarray, int, int], tuple[float, float]], seeds: int, puzzles: int,
             effect: float, spread: str, n: int, replicates: int = 1000, seed: int = 0) -> Coverage:
    """Run ``method`` (flags, replicates, rng seed) -> (lo, hi) on ``n`` simulated experiments."""
    rng = np.random.default_rng(seed)
    covers = above = below = 0
    width = 0.0
    for i in range(n):
        lo, hi = method(draw(rng, seeds, puzzles, effect, spread), replicates, seed * 100_003 + i)
        covers += lo <= effect <= hi
        above += lo > 0
        below += hi < 0
        width += hi - lo
    return Coverage(n, covers / n, above / n, below / n, width / n)
