"""How many training seeds a claim needs: each recorded claim's effect on every seed alone, their spread, and the
seeds that would bring the interval's half-width to a target (``docs/statistics.md``, "Power").

The half-width of the interval over S seeds is at least t(0.975, S − 1) · s / √S, where s is the standard deviation
of the per-seed effects (the seeds' part of the variance; the test puzzles add to it, so the seeds needed are a lower
bound). Each seed's effect is its claim's builder on that seed alone (``claim_data.subset``): for a fall after a
held-out peak, the peak is then chosen on that seed's curve.
"""

from __future__ import annotations

import math

import numpy as np

from . import claim_data, claims
from .quantiles import t_quantile

TARGET = 5.0  # points: the half-width asked of a headline claim's interval (issue 61)
MOST = 200  # seeds searched for the target


def per_seed_effects(claim: dict) -> list[float]:
    """The claim's effect on each of its recorded seeds alone, in display units (NaN where undefined)."""
    data = claim["data"]
    scale = claim["effect"]["scale"]
    out = []
    for s in data["seeds"]:
        iv, _ = claims.decide_again(claim_data.subset(data, [s]))
        out.append(scale * float(iv.value) if iv.value == iv.value else math.nan)
    return out


def seeds_needed(sd: float, target: float = TARGET) -> int | None:
    """The fewest seeds S (at least 2) with t(0.975, S − 1) · sd / √S ≤ ``target``; None beyond :data:`MOST`."""
    for s in range(2, MOST + 1):
        if t_quantile(0.975, s - 1) * sd / math.sqrt(s) <= target:
            return s
    return None


def power_row(claim: dict, target: float = TARGET) -> dict | None:
    """One claim's row: its seeds, the spread of its per-seed effects and the seeds needed for ``target``; None for
    a claim without data of at least two seeds."""
    data = claim.get("data")
    if not data or not data.get("seeds") or len(data["seeds"]) < 2 or (claim.get("effect") or {}).get("lo") is None:
        return None
    effects = np.array(per_seed_effects(claim))
    ok = effects[np.isfinite(effects)]
    sd = float(np.std(ok, ddof=1)) if len(ok) >= 2 else math.nan
    return {"id": claim["id"], "seeds": len(data["seeds"]), "defined": len(ok), "sd": sd,
            "unit": claim["effect"]["unit"].strip(), "needed": seeds_needed(sd, target) if sd == sd else None,
            "half_width": (claim["effect"]["hi"] - claim["effect"]["lo"]) * claim["effect"]["scale"] / 2}
