"""How many training seeds a claim needs, in the claim's own units: each recorded claim's effect on every seed alone,
their spread, and the seeds that would let the rule decide it (``docs/statistics.md``, "Power").

- A claim with a paper number is decided against half the paper's effect (``intervals.RULE``). Its target is a
  half-width of a quarter of the paper's effect (:func:`target`): an interval that narrow, centred on the paper's
  effect, lies wholly above half of it, and centred on zero, wholly below half of it, so either truth is told apart
  from the other. The seeds needed are the fewest S with t(0.975, S − 1) · s / √S at most that target, s the standard
  deviation of the per-seed effects (the seeds' part of the variance; the test puzzles add to it: a lower bound).
- A claim without a paper number is decided by the side of zero only. Its power is the chance that the interval over
  S seeds clears zero on the side of the observed effect, were the true effect the observed mean and the seeds spread
  as observed (:func:`power_to_clear_zero`; a t test's power, simulated); the seeds needed are the fewest with 80 %.

Each seed's effect is its claim's builder on that seed alone (``claim_data.subset``); a fall after a held-out peak
chooses each seed's peak on that seed's curve, as the interval does since 2026-12-07 (``claims.held_out_fall``).
Until then this module asked every claim for a half-width of 5 in its own units (points, cells, an AUROC), which for
an AUROC near ½ read "2 seeds".
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from . import claim_data, claims, paper
from .quantiles import t_quantile

TARGET = 5.0  # points: the half-width the power table plans for (the headline's own HALF_WIDTH is 6)
MOST = 200  # seeds searched for the target
POWER = 0.8  # the power asked to clear zero, for a claim with no paper number
DRAWS = 20_000  # simulated experiments per power


def per_seed_effects(claim: dict) -> list[float]:
    """The claim's effect on each of its recorded seeds alone, in display units (NaN where undefined). Kept for the
    process by the claim's data (the README and docs/results.md render the same records: each interval once)."""
    data = claim["data"]
    key = hashlib.sha256(json.dumps([claim["id"], data], sort_keys=True, default=_plain).encode()).hexdigest()
    if key not in _PER_SEED:
        out = []
        for s in data["seeds"]:
            iv, _ = claims.decide_again(claim_data.subset(data, [s]))
            out.append(float(iv.value) if iv.value == iv.value else math.nan)
        _PER_SEED[key] = out
    return [claim["effect"]["scale"] * v for v in _PER_SEED[key]]


_PER_SEED: dict[str, list[float]] = {}


def _plain(value):
    """A value of claim data as JSON can write it, whole (arrays as lists: their text form abbreviates)."""
    return value.tolist() if hasattr(value, "tolist") else repr(value)


def target(claim_id: str) -> float | None:
    """The half-width (display units) that lets the rule decide claim ``claim_id``: a quarter of the paper's effect
    (module docstring); None where the paper gives no number (then :func:`power_to_clear_zero`)."""
    c = paper.CLAIMS_BY_ID[claim_id]
    return None if c.paper_effect is None else abs(c.paper_effect) / 4


def seeds_needed(sd: float, target: float = TARGET) -> int | None:
    """The fewest seeds S (at least 2) with t(0.975, S − 1) · sd / √S ≤ ``target``; None beyond :data:`MOST`."""
    for s in range(2, MOST + 1):
        if t_quantile(0.975, s - 1) * sd / math.sqrt(s) <= target:
            return s
    return None


def power_to_clear_zero(mean: float, sd: float, seeds: int, draws: int = DRAWS, seed: int = 0) -> float:
    """The chance that a 95 % t interval over ``seeds`` seeds lies wholly on the side of zero of ``mean``, were the
    per-seed effects drawn from N(mean, sd²): simulated (``draws`` experiments, a fixed random stream)."""
    if seeds < 2 or not sd > 0:
        return float(mean != 0) if seeds >= 2 else 0.0
    rng = np.random.default_rng(seed)
    m = rng.normal(abs(mean), sd / math.sqrt(seeds), draws)
    s = sd * np.sqrt(rng.chisquare(seeds - 1, draws) / (seeds - 1))
    return float(np.mean(m - t_quantile(0.975, seeds - 1) * s / math.sqrt(seeds) > 0))


def seeds_to_clear_zero(mean: float, sd: float, power: float = POWER) -> int | None:
    """The fewest seeds (2 to :data:`MOST`) whose :func:`power_to_clear_zero` reaches ``power``; None beyond."""
    if not abs(mean) > 0:
        return None
    lo, hi = 2, MOST
    if power_to_clear_zero(mean, sd, hi) < power:
        return None
    while lo < hi:  # the power grows with the seeds
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if power_to_clear_zero(mean, sd, mid) < power else (lo, mid)
    return lo


def power_row(claim: dict, half_width: float | None = None) -> dict | None:
    """One claim's row: its seeds, the mean and spread of its per-seed effects, what is asked (``asked``: a half-width
    in its units, or the power to clear zero) and the seeds needed for it, and its half-width now; None for a claim
    without data of at least two seeds. ``half_width`` overrides the claim's own target (:func:`target`)."""
    data = claim.get("data")
    if not data or not data.get("seeds") or len(data["seeds"]) < 2 or (claim.get("effect") or {}).get("lo") is None:
        return None
    effects = np.array(per_seed_effects(claim))
    ok = effects[np.isfinite(effects)]
    sd = float(np.std(ok, ddof=1)) if len(ok) >= 2 else math.nan
    mean = float(np.mean(ok)) if len(ok) else math.nan
    want = half_width if half_width is not None else target(claim["id"]) if claim["id"] in paper.CLAIMS_BY_ID else None
    row = {"id": claim["id"], "seeds": len(data["seeds"]), "defined": len(ok), "sd": sd, "mean": mean,
           "unit": claim["effect"]["unit"].strip(),
           "half_width": (claim["effect"]["hi"] - claim["effect"]["lo"]) * claim["effect"]["scale"] / 2}
    if want is not None:
        row.update(asked=f"a half-width of {want:.3g}", target=want,
                   needed=seeds_needed(sd, want) if sd == sd else None)
    else:
        row.update(asked=f"{100 * POWER:.0f} % power to clear zero", target=None,
                   needed=seeds_to_clear_zero(mean, sd) if sd == sd else None,
                   power={s: power_to_clear_zero(mean, sd, s) for s in (len(ok), 40, 60)} if sd == sd else {})
    return row
