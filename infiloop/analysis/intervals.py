"""95 % intervals over training seeds and test puzzles, and the verdict on a claim that they decide.

Every headline number of the notebooks is a mean over training seeds of a per-seed statistic that is a
ratio of sums over that seed's test puzzles (exact accuracy: solved / puzzles; solved-then-lost: lost /
solved; state change after the solve: summed per-puzzle means / puzzles solved), or a function of such
ratios (a difference between two models on the same puzzles, the fall of a curve after its peak).

**Method** (:func:`interval`; chosen by the coverage simulation of ``benchmarks/interval_coverage.py``, table and
reasoning in ``docs/statistics.md``). Seeds and puzzles are *crossed*: every seed is tested on the same puzzles.
With θ_s the statistic of seed s on all its puzzles and θ̄ their mean over the S seeds, the variance of θ̄ has a
seed part, a puzzle part and their interaction, σ²_seed/S + σ²_puzzle/P + σ²_int/(SP). It is estimated as

    V = A + B − C,   A = s²(θ_s)/S,   B = Var*(θ̄*),   C = (mean_s Var*(θ_s*) − B)/(S − 1),

where * is a resample of the test puzzles, *the same draw for every seed* (the crossed design), so that B holds
the shared puzzle variance; A, the spread of the per-seed statistics, holds the seed variance and C removes the
interaction that A and B both count (V is never below A or B). The interval is θ̄ ± t·√V with Student's t at
Satterthwaite's degrees of freedom, ν = V² / (A²/(S − 1) + (V − A)²/(P − 1)): near S − 1 when the seeds
dominate (t = 4.30 for three seeds), near P − 1 when the puzzles do. With one seed, V = B and the interval covers
the sampling of the test set, not the variation between training runs (:attr:`Interval.method` says so).

The puzzle resamples are added until the Monte-Carlo error of each bound (batch means over 10 groups of
resamples) is below ``MC_TOLERANCE`` (0.0005: 0.05 points of a fraction, so that it is under 0.1 with a margin); it
is reported. A seed whose statistic is undefined (e.g. no solved puzzle to take a share of) is left out and
counted, as is every resample in which a used seed's statistic is undefined: nothing is dropped silently. Where
the statistic is a proportion of pooled counts, a caller may pass their exact (Clopper–Pearson) interval: the
interval then contains it, which keeps it honest when no resample can move the statistic (0 of 500 solved puzzles
lost reads [0.0, 0.7] %, not [0, 0]). An interval that no resample moves and no seed moves (every seed agrees and every
resample of the puzzles gives the same statistic: the data show no variation at all, as when two models agree on every
puzzle, or every solved puzzle is lost by both) would read [x, x] whatever the number of seeds; it is widened to
± ``reach`` × the exact bound on the share of the item-seed pairs behind it that could differ (none of them does), so
that no interval claims a certainty it does not have (:func:`unmoved_bound`).

A claim's **verdict** (:func:`verdict`) applies :data:`RULE` to the interval of its effect and the paper's
effect beside it.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .paper import CLAIMS
from .quantiles import binomial_interval, t_quantile

Ratio = tuple[np.ndarray, np.ndarray]  # (numerator, denominator), the puzzle axis last

MC_TOLERANCE = 5e-4  # Monte-Carlo error allowed on a bound: 0.05 points of a fraction (under 0.1 with margin)
MIN_REPLICATES, MAX_REPLICATES = 2_000, 200_000
MAX_LOOPED = 20_000  # the most resamples for a combine that is not vectorized (called once per resample and seed)
MC_GROUPS = 10  # batch means: the bounds from 10 disjoint groups of resamples give their Monte-Carlo error
FRACTION = 0.5  # differs: the interval lies below this fraction of the paper's effect
SHARE = (0.0, 1.0)  # the range of a share (accuracy, puzzles lost, γ): an interval is clipped to it
NONNEGATIVE = (0.0, math.inf)  # the range of a count or a size (predictions changed, state change)

RULE = ("Each claim's effect is oriented so that the paper's effect is positive. **agrees**: its 95 % interval lies "
        "above zero and reaches half the paper's effect or more (or, where the paper gives no number, lies above "
        "zero); **smaller**: it lies above zero and wholly below half the paper's effect: the paper's direction, "
        "under half its size; **differs**: it holds zero or lies below it, and lies below half the paper's effect "
        "(below zero where the paper gives no number), so the data rule the paper's effect out; **undecided**: none "
        "of these. A claim that something does not happen (InfiLoop keeps its solved puzzles) agrees when the "
        "interval of what would happen (its loss) lies below half the contrast the paper draws (TRM's 15 % loss: "
        "7.5 %), differs when it lies above, and is **untestable** unless some model's loss lies wholly above that "
        "margin (no model here lost as the paper's TRM does). Where the paper's claim sets InfiLoop against TRM, "
        "InfiLoop − carry-last is decided too and its verdict leads. Where the paper gives no number, a true null "
        "reads undecided, never differs: differs then says the opposite direction.")
def multiplicity(shown: int) -> str:
    """The sentence on multiplicity under a table of ``shown`` claims, of the companion's ``len(CLAIMS)``."""
    which = (f"The {shown} claims above" if shown == len(CLAIMS) else
             f"The {shown} claims above (of this companion's {len(CLAIMS)}: those its recorded runs decide)")
    return (f"{which} are decided at once, each by its own 95 % interval with no adjustment for multiplicity: even "
            "with every interval covering as it should, one verdict in twenty may be wrong by chance, so a single "
            "agrees or differs among many is weaker evidence than it reads.")


@dataclass
class Interval:
    """A statistic (mean over seeds) with its 95 % interval; arrays for curves, floats for scalars.

    ``seeds``: the seeds whose statistic is defined (used); ``undefined_seeds``: those left out (where the
    statistic is undefined on all their puzzles); ``undefined_replicates``: puzzle resamples left out because a used
    seed's statistic was undefined in them (the most over a curve's points); ``df``: Satterthwaite's degrees of
    freedom; ``mc_error``: the Monte-Carlo error of the bounds (the largest over bounds and a curve's points)."""

    value: np.ndarray | float
    lo: np.ndarray | float
    hi: np.ndarray | float
    seeds: int
    puzzles: int
    level: float = 0.95
    replicates: int = 0
    items: str = "puzzles"  # what the test items are (the looped decoder's are text items)
    df: np.ndarray | float = float("nan")
    mc_error: float = 0.0
    undefined_seeds: int = 0
    undefined_replicates: int = 0
    crossed: bool = True
    exact: str = ""  # the exact interval the bounds were widened to contain, in words ("" when none)
    extra: dict = field(default_factory=dict)  # what a builder records beside it (e.g. the chosen peaks)

    def describe(self, scale: float = 100.0, unit: str = " points") -> str:
        """How the interval was computed, in words; the Monte-Carlo error in the statistic's display units."""
        if self.seeds == 0:
            return f"undefined: none of the {self.undefined_seeds} seed(s) has anything to measure it on"
        if self.seeds > 1:
            head = (f"{100 * self.level:.0f} % t interval over seeds and test {self.items}; {self.seeds} seed(s), "
                    f"{self.puzzles} {self.items} each (Satterthwaite's {_df_text(self.df)} degrees of freedom")
        else:
            head = (f"{100 * self.level:.0f} % interval over test {self.items} only (one seed: no seed variation); "
                    f"{self.seeds} seed(s), {self.puzzles} {self.items} each (")
        draw = "" if self.seeds <= 1 else ", the same draw for every seed" if self.crossed else \
            ", drawn per seed: their test sets differ"
        out = (f"{head}{'; ' if self.seeds > 1 else ''}the {self.items}' variance from {self.replicates:,} "
               f"resamples{draw}; Monte-Carlo error of the bounds {scale * self.mc_error:.2g}{unit})")
        if self.exact:
            out += f"; widened to contain {self.exact}"
        if self.undefined_seeds:
            out += (f"; {self.undefined_seeds} of {self.seeds + self.undefined_seeds} seeds undefined (nothing to "
                    "measure it on), left out")
        if self.undefined_replicates:
            out += f"; {self.undefined_replicates:,} of {self.replicates:,} resamples undefined, left out"
        return out

    @property
    def method(self) -> str:
        return self.describe()

    def point(self, i: int) -> Interval:
        """Element ``i`` of a curve's interval, as a scalar interval."""
        pick = (lambda a: float(np.asarray(a)[i]) if np.ndim(a) else float(a))
        return Interval(pick(self.value), pick(self.lo), pick(self.hi), self.seeds, self.puzzles, self.level,
                        self.replicates, self.items, pick(self.df), self.mc_error, self.undefined_seeds,
                        self.undefined_replicates, self.crossed, self.exact)

    def pct(self, digits: int = 1) -> str:
        """``"90.6 % [88.1, 92.9]"`` for a scalar fraction."""
        if self.value != self.value:
            return "–"
        return f"{100 * self.value:.{digits}f} % [{100 * self.lo:.{digits}f}, {100 * self.hi:.{digits}f}]"

    def points(self, digits: int = 1) -> str:
        """``"-0.4 [-1.4, +0.6] points"`` for a difference of two fractions (signed, in percentage points)."""
        if self.value != self.value:
            return "–"
        return f"{100 * self.value:+.{digits}f} [{100 * self.lo:+.{digits}f}, {100 * self.hi:+.{digits}f}] points"

    def num(self, fmt: str = ".3g") -> str:
        if self.value != self.value:
            return "–"
        return f"{self.value:{fmt}} [{self.lo:{fmt}}, {self.hi:{fmt}}]"


def _df_text(df) -> str:
    d = float(np.nanmin(df)) if np.ndim(df) else float(df)
    return "–" if d != d else (f"{d:.1f}" if d < 100 else f"{d:,.0f}")


def _ratio(num: np.ndarray, den: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """sum(num) / sum(den) over the puzzle axis, each puzzle counted ``weights`` times (a resample); ``weights``
    may be [P] or [P, R] (R resamples at once: the result gains a last axis R)."""
    n, d = (num.sum(-1), den.sum(-1)) if weights is None else (num @ weights, den @ weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)


def _first(r):
    return r[0]


def _prepare(per_seed) -> list[list[Ratio]]:
    if not per_seed or any(not q for q in per_seed):
        raise ValueError("interval: expected at least one seed with at least one quantity")
    out = [[(np.asarray(n, np.float64), np.asarray(d, np.float64)) for n, d in q] for q in per_seed]
    for i, q in enumerate(out):
        if len({a.shape[-1] for pair in q for a in pair}) != 1:
            raise ValueError(f"interval: seed {i}'s quantities are not over the same puzzles (last axes differ)")
    return out


def _weights(rng: np.random.Generator, p: int, r: int) -> np.ndarray:
    """[P, R]: how often each of ``p`` puzzles is drawn in each of ``r`` resamples (with replacement). The same
    generator state and sizes draw the same counts, so they are kept, in bytes (:data:`_DRAWN`), and ``rng`` is left
    in the state the draws leave it in: the report decides each claim on each seed alone, each time from a generator of
    seed 0, and drew the same counts hundreds of times."""
    key = (json.dumps(rng.bit_generator.state, sort_keys=True), p, r)
    if key in _DRAWN:
        _DRAWN.move_to_end(key)
        counts, after = _DRAWN[key]
        rng.bit_generator.state = after
    else:
        idx = rng.integers(0, p, (r, p)) + p * np.arange(r)[:, None]
        counts = np.bincount(idx.ravel(), minlength=r * p).reshape(r, p)
        counts = counts.astype(np.uint8 if counts.max(initial=0) < 256 else np.uint16 if p < 65536 else np.int64)
        _DRAWN[key] = (counts, rng.bit_generator.state)
        while sum(c.nbytes for c, _ in _DRAWN.values()) > _DRAWN_BYTES and len(_DRAWN) > 1:
            _DRAWN.popitem(last=False)
    return counts.T.astype(np.float64)


_DRAWN: OrderedDict = OrderedDict()  # (generator state, p, r) -> (counts [R, P], the state after), latest used last
_DRAWN_BYTES = 2 ** 27  # what the kept counts may take: 128 MiB (512 blocks of 1,000 resamples of 256 puzzles)


def _resampled(per_seed, combine, weights: list[np.ndarray], vectorized: bool) -> np.ndarray:
    """[S, ..., R]: each seed's statistic in each resample (``weights[s]`` [P, R] for seed s)."""
    out = []
    for q, w in zip(per_seed, weights):
        ratios = [_ratio(n, d, w) for n, d in q]
        if vectorized:
            out.append(np.asarray(combine(ratios), np.float64))
        else:
            out.append(np.stack([np.asarray(combine([x[..., r] for x in ratios]), np.float64)
                                 for r in range(w.shape[1])], axis=-1))
    return np.stack(out)


def _check_vectorized(per_seed, combine, rng) -> None:
    """A combine declared vectorized must give, on a batch of resamples, what it gives on each one alone."""
    w = _weights(rng, per_seed[0][0][0].shape[-1], 5)
    batch = _resampled(per_seed[:1], combine, [w], True)
    alone = _resampled(per_seed[:1], combine, [w], False)
    if batch.shape != alone.shape or not np.allclose(batch, alone, equal_nan=True, rtol=1e-9, atol=1e-12):
        raise ValueError("interval: combine was declared vectorized but does not act on each resample alone "
                         "(it must work element-wise along a last axis of resamples)")


def _components(theta: np.ndarray, reps: np.ndarray) -> tuple:
    """From the per-seed statistics ``theta`` [S, ...] and their resamples ``reps`` [S, ..., R]: (used [S, ...],
    value, A, B, C, number of used seeds, undefined resamples [...]) as in the module docstring."""
    used = np.isfinite(theta)
    n_used = used.sum(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = np.nanmean(np.where(used, theta, np.nan), axis=0)
        a = np.where(n_used > 1, np.nanvar(np.where(used, theta, np.nan), axis=0, ddof=1) / np.maximum(n_used, 1), 0.0)
        r = np.where(used[..., None], reps, 0.0)
        bad = (used[..., None] & ~np.isfinite(reps)).any(0)  # a used seed undefined in this resample
        mean = np.where(bad, np.nan, r.sum(0) / np.maximum(n_used, 1)[..., None])
        b = np.nanvar(mean, axis=-1, ddof=1)
        per_seed = np.nanvar(np.where(bad[None] | ~used[..., None], np.nan, reps), axis=-1, ddof=1)
        v_bar = np.nanmean(np.where(used, per_seed, np.nan), axis=0)
        c = np.where(n_used > 1, np.maximum(0.0, (v_bar - b) / np.maximum(n_used - 1, 1)), 0.0)
    return used, value, a, np.nan_to_num(b), np.nan_to_num(c), n_used, bad.sum(-1)


def _bounds(value, a, b, c, n_used, p: int, level: float):
    """θ̄ ∓ t·√V at Satterthwaite's degrees of freedom (module docstring), element-wise."""
    v = np.maximum(np.maximum(a + b - c, a), b)
    with np.errstate(invalid="ignore", divide="ignore"):
        dfs = np.where(n_used > 1, v ** 2 / (a ** 2 / np.maximum(n_used - 1, 1) + np.maximum(v - a, 0) ** 2
                                            / max(p - 1, 1)), max(p - 1, 1))
    dfs = np.where(np.isfinite(dfs) & (dfs > 0), dfs, np.maximum(n_used - 1, 1))
    t = _t_quantiles((1 + level) / 2, np.atleast_1d(dfs)).reshape(np.shape(dfs))
    half = t * np.sqrt(v)
    return value - half, value + half, dfs


def _t_quantiles(q: float, dfs: np.ndarray) -> np.ndarray:
    """t quantiles for many degrees of freedom: exact (memoized) for up to 64 values; for a curve's hundreds,
    interpolated in log df on 4,000 exact points from 0.5 to 10⁷ (relative error below 1e-5)."""
    flat = np.asarray(dfs, np.float64).ravel()
    if flat.size <= 64:
        return np.array([t_quantile(q, float(f"{d:.6g}")) for d in flat])
    grid, values = _t_grid(q)
    return np.interp(np.log(np.clip(flat, grid[0], grid[-1])), np.log(grid), values)


@lru_cache(maxsize=4)
def _t_grid(q: float) -> tuple[np.ndarray, np.ndarray]:
    grid = np.geomspace(0.5, 1e7, 4000)
    return grid, np.array([t_quantile(q, float(d)) for d in grid])


def _mc_error(value, a, reps, used, n_used, p: int, level: float) -> float:
    """The Monte-Carlo error of the bounds: their spread over ``MC_GROUPS`` disjoint groups of resamples, each
    group's bounds computed as the full estimate's (degrees of freedom included), divided by √groups."""
    m = reps.shape[-1] // MC_GROUPS
    if m < 2:
        return float("nan")
    grouped = reps[..., : m * MC_GROUPS].reshape(*reps.shape[:-1], MC_GROUPS, m)
    mask = np.broadcast_to(used[..., None], grouped.shape[:-1])
    _, _, _, b, c, _, _ = _components(np.where(mask, 0.0, np.nan), grouped)  # [..., groups]
    expand = (lambda x: np.asarray(x)[..., None])
    lo, hi, _ = _bounds(expand(value), expand(a), b, c, expand(n_used), p, level)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        err = np.nanstd(np.stack([lo, hi]), axis=-1, ddof=1) / math.sqrt(MC_GROUPS)
    return float(np.nanmax(err)) if np.isfinite(err).any() else 0.0


def _reach(per_seed: list[list[Ratio]]) -> float:
    """The largest value one item holds in any quantity (|numerator / denominator| where the denominator is not 0), at
    least 1: a share's items hold 0 or 1, a count's its count."""
    top = 1.0
    for q in per_seed:
        for n, d in q:
            held = np.abs(n[d != 0] / d[d != 0])
            if held.size:
                top = max(top, float(np.max(held)))
    return top


def unmoved_bound(per_seed: list[list[Ratio]], used: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(u, n): the exact (Clopper–Pearson) upper bound u on the share of the item-seed pairs that could differ when none
    of the n observed ones does (0 of n), n the pooled number of items with a denominator over the used seeds (the
    fewest over the quantities); element-wise over a curve's points."""
    shape = np.shape(used)[1:]  # the statistic's (a curve's points), which a quantity's leading axes may exceed

    def items(d: np.ndarray) -> np.ndarray:
        has = d != 0
        return np.count_nonzero(has if has.shape[:-1] == shape else has.reshape(-1, has.shape[-1]).any(0), axis=-1)

    pooled = []
    for j in range(len(per_seed[0])):
        pooled.append(np.sum([np.where(used[s], items(q[j][1]), 0) for s, q in enumerate(per_seed)], axis=0))
    n = np.min(pooled, axis=0)
    bound = {int(k): binomial_interval(0, int(k), level)[1] for k in np.unique(n) if k > 0}
    return np.vectorize(lambda k: bound.get(int(k), np.nan), otypes=[np.float64])(n), n


def _widen_unmoved(per_seed, used, value, lo, hi, reach, level, items) -> tuple:
    """``lo``, ``hi`` widened where they coincide (module docstring), and the widening in words ("" if none)."""
    width = np.asarray(hi) - np.asarray(lo)  # rounding can leave a constant's resamples 1e-16 apart
    still = np.isfinite(value) & np.isfinite(width) & (width <= 1e-12 * np.maximum(1.0, np.abs(value)))
    if not np.any(still):
        return lo, hi, ""
    u, n = unmoved_bound(per_seed, used, level)
    r = _reach(per_seed) if reach is None else float(reach)
    half = np.where(still, r * np.nan_to_num(u), 0.0)
    k = int(np.min(np.where(still, n, np.iinfo(np.int64).max)))
    item = items[:-1] if items.endswith("s") else items
    times = "" if r == 1 else f" times {r:g}, the most one {item} moves it"
    words = (f"± {float(np.max(half)):.3g}, the exact bound on the share of the {k:,} {item}-seed pairs that could "
             f"differ ({100 * float(np.nanmax(np.where(still, u, np.nan))):.1f} %){times}: no resample moved it")
    return np.asarray(lo) - half, np.asarray(hi) + half, words


def interval(per_seed: Sequence[Sequence[Ratio]], combine: Callable[[list[np.ndarray]], np.ndarray | float] = _first,
             replicates: int | None = None, level: float = 0.95, seed: int = 0, items: str = "puzzles",
             vectorized: bool = False, exact: tuple[float, float, str] | None = None,
             bounds: tuple[float, float] | None = None, mc_tolerance: float = MC_TOLERANCE,
             reach: float | None = None) -> Interval:
    """The interval of ``mean over seeds of combine([ratio_1, ratio_2, ...])`` (module docstring).

    ``per_seed[i]`` holds seed i's quantities as (numerator, denominator) arrays whose last axis is the test
    puzzles (the same puzzles for every quantity and, for the crossed resampling, every seed); ``ratio_j`` is
    ``numerator_j.sum(-1) / denominator_j.sum(-1)`` (NaN where the denominator is 0), a float or, for a curve
    ([K, P] arrays), an array over K. ``combine`` maps a seed's ratios to its statistic; ``vectorized=True``
    declares that it also works element-wise on ratios with a last axis of resamples (checked), which is much
    faster. ``replicates``: puzzle resamples (None: from 2,000 up until the Monte-Carlo error of the bounds is below
    ``mc_tolerance``, at most 200,000, or 20,000 for a combine that is not vectorized; the error is reported).
    ``exact``: (lo, hi, words) that the interval must contain (an exact interval of pooled counts); ``bounds``: the
    statistic's range, to which the interval is clipped. Without ``exact``, an interval of zero width (no seed and no
    resample moved the statistic) is widened to ± ``reach`` × :func:`unmoved_bound`, ``reach`` the most one item can
    move the statistic (default: the largest value an item holds in any quantity, at least 1)."""
    per_seed = _prepare(per_seed)
    sizes = {q[0][0].shape[-1] for q in per_seed}
    crossed, p = len(sizes) == 1, max(sizes)
    theta = np.stack([np.asarray(combine([_ratio(n, d) for n, d in q]), np.float64) for q in per_seed])
    rng = np.random.default_rng(seed)
    if vectorized:
        _check_vectorized(per_seed, combine, rng)
    reps, wanted = [], replicates or MIN_REPLICATES
    while True:
        for start in range(sum(r.shape[-1] for r in reps), wanted, 1000):
            n = min(1000, wanted - start)
            w = [_weights(rng, p, n)] * len(per_seed) if crossed else \
                [_weights(rng, q[0][0].shape[-1], n) for q in per_seed]
            reps.append(_resampled(per_seed, combine, w, vectorized))
        allr = np.concatenate(reps, axis=-1)
        used, value, a, b, c, n_used, bad = _components(theta, allr)
        lo, hi, dfs = _bounds(value, a, b, c, n_used, p, level)
        mc = _mc_error(value, a, allr, used, n_used, p, level)
        cap = MAX_REPLICATES if vectorized else MAX_LOOPED
        if replicates is not None or not mc > mc_tolerance or wanted >= cap:
            break
        wanted = min(cap, int(wanted * (mc / mc_tolerance) ** 2 * 1.2) + 1000)
    if exact is not None:
        lo, hi, words = np.minimum(lo, exact[0]), np.maximum(hi, exact[1]), exact[2]
    else:
        lo, hi, words = _widen_unmoved(per_seed, used, value, lo, hi, reach, level, items)
    if bounds is not None:
        lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
    out = float if np.ndim(value) == 0 else np.asarray
    lo, hi = np.where(n_used > 0, lo, np.nan), np.where(n_used > 0, hi, np.nan)
    n_max = int(np.max(n_used))
    missing = len(per_seed) - (int(np.min(n_used[n_used > 0])) if n_max else 0)
    return Interval(out(value), out(lo), out(hi), n_max, p, level, allr.shape[-1], items, out(dfs), mc, missing,
                    int(np.max(bad)), crossed, words)


def over_seeds(trajectories, terms: Callable[[dict], Ratio], replicates: int | None = None, *,
               bounds: tuple[float, float]) -> Interval:
    """The mean over seeds of one model's statistic with its interval (:func:`interval`): ``trajectories`` one per
    seed on the same test puzzles, ``terms(traj)`` its (numerator, denominator) per puzzle (``trajectories.py``'s
    ``*_terms``). A curve's band from ``replicates`` puzzle resamples (its Monte-Carlo error is in the method), a
    number's until that error is small. ``bounds``: the statistic's range (:data:`SHARE`, :data:`NONNEGATIVE`),
    required because a t interval over three seeds easily crosses it (74 % ± 41 points is not [33, 115] %)."""
    return interval([[terms(t)] for t in trajectories], replicates=replicates, vectorized=True, bounds=bounds)


bootstrap = interval  # the earlier name (a two-level percentile bootstrap under rule version 1), kept for its callers


AGREES, SMALLER, DIFFERS, UNDECIDED, UNTESTABLE = "agrees", "smaller", "differs", "undecided", "untestable"
OUTCOMES = (AGREES, SMALLER, DIFFERS, UNDECIDED, UNTESTABLE)  # every verdict a measured claim can read


def outcome(effect: Interval, paper: float | None = None, side: int | None = None, absence: bool = False,
            fraction: float = FRACTION) -> str:
    """:data:`RULE`, the one place a verdict is decided: ``agrees``, ``smaller``, ``differs`` or ``undecided``.

    ``paper``: the paper's effect in the effect's own units (signed; None when the paper gives no number);
    ``side``: the paper's direction (+1 or -1; default: the sign of ``paper``, else +1). With the effect oriented so
    that the paper's is positive and m = ``fraction`` × |paper|: agrees when lo > 0 and hi ≥ m; smaller when lo > 0 and
    hi < m (the paper's direction, under half its size); differs when lo ≤ 0 and hi < m (with no paper number, m = 0);
    undecided otherwise. ``absence``: a claim that something does not happen; ``paper`` is then the contrast the paper
    draws (TRM's loss), the effect what would happen (InfiLoop's loss): agrees when hi < m, differs when lo > m."""
    lo, hi = float(np.asarray(effect.lo)), float(np.asarray(effect.hi))
    if not (lo == lo and hi == hi):
        return UNDECIDED
    if absence:
        margin = fraction * abs(paper)
        return AGREES if hi < margin else DIFFERS if lo > margin else UNDECIDED
    s = side if side is not None else (-1 if paper is not None and paper < 0 else +1)
    lo, hi = (lo, hi) if s > 0 else (-hi, -lo)
    margin = fraction * abs(paper) if paper is not None else 0.0
    if lo > 0:
        return SMALLER if paper is not None and hi < margin else AGREES
    return DIFFERS if hi < margin else UNDECIDED


def verdict(effect: Interval, paper: float | None = None, side: int | None = None, absence: bool = False,
            fraction: float = FRACTION) -> bool | None:
    """:func:`outcome` as True (agrees), False (differs) or None (smaller, undecided): for a caller that needs only
    whether the data agree with the paper in full (``smaller`` is neither)."""
    return {AGREES: True, DIFFERS: False}.get(outcome(effect, paper, side, absence, fraction))


def verdict_note(effect: Interval, what: str, scale: float = 100.0, unit: str = " points", digits: int = 1,
                 side: int = +1, paper: float | None = None) -> str:
    """One line for the claims table: the effect, its interval (``digits`` decimals after ``scale``), the
    verdict (:func:`verdict`; ``paper`` in display units) and how the interval was computed."""
    if effect.value != effect.value:
        return f"{what}: undefined (no puzzle to measure it on, e.g. none solved); undecided"
    v = outcome(effect, None if paper is None else paper / scale, side)
    f = f"+.{digits}f"
    return (f"{what}: {scale * effect.value:{f}}{unit} [{scale * effect.lo:{f}}, {scale * effect.hi:{f}}] "
            f"({v}; {effect.describe(scale, unit)})")


def paired_effect(solved: Mapping[str, np.ndarray], keys: Sequence[str],
                  combine: Callable[[list[np.ndarray]], float], what: str) -> tuple[bool | None, str]:
    """A claim decided on one seed's test puzzles: ``solved[k]`` is model k's [P] right-or-wrong flags on the
    same puzzles; the effect ``combine([accuracy of keys[0], ...])`` is resampled with one draw of the puzzles
    for every model (paired). Returns its :func:`verdict` (no paper number: the side of zero) and its note."""
    iv = interval([[(np.asarray(solved[k], np.float64), np.ones(len(solved[k]))) for k in keys]], combine)
    return verdict(iv), verdict_note(iv, what)
