"""Each recorded claim's per-seed effects split by the CPU its seeds were recorded on.

The same seed trains to another model on another kind of CPU (docs/results.md, "The same seed on another CPU"), and a
record can hold seeds from several machines (``records.parts``). This splits a claim's effects by seed
(``power.per_seed_effects``) by each seed's CPU (``results.recorded_machines``) and compares two CPUs by Welch's t
over the seeds, so that a reader sees whether the machine moves a claim as much as the seed does. The table is filled
by ``python -m infiloop results`` between ``<!-- by-cpu PROFILE: start -->`` and ``<!-- by-cpu PROFILE: end -->``.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ...analysis import claim_data, claims, intervals, paper, power
from ...analysis.quantiles import t_quantile

# The seeds trained after the by-CPU comparison was first made, on the CPU that raised it (docs/results.md, "The same
# seed on another CPU": at `search` the AMD seeds 12-14 came in low; 15-20 were trained after that was noticed). They
# alone make the confirmatory comparison; a comparison over every seed was formed after seeing some of them (post hoc).
CONFIRMATORY = {"search": (15, 16, 17, 18, 19, 20)}
EXACT = 2_000_000  # the most splits a permutation test enumerates; beyond, 200,000 random ones


def split(values: dict[int, float], cpu: dict[int, str]) -> list[tuple[str, np.ndarray]]:
    """Defined per-seed ``values`` grouped by each seed's CPU: most seeds first, ties by name."""
    by: dict[str, list[float]] = {}
    for s, v in values.items():
        if v == v:
            by.setdefault(cpu.get(s, "unknown"), []).append(v)
    return sorted(((n, np.array(x)) for n, x in by.items()), key=lambda g: (-g[1].size, g[0]))


def groups(claim: dict, cpu: dict[int, str]) -> list[tuple[str, np.ndarray]]:
    """The claim's defined per-seed effects (display units) by CPU (:func:`split`)."""
    return split(dict(zip(claim["data"]["seeds"], power.per_seed_effects(claim))), cpu)


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> tuple[float, float, float] | None:
    """mean(a) − mean(b) with its Welch t interval (Welch–Satterthwaite degrees of freedom); None with fewer than two
    values on a side or no spread at all."""
    if min(a.size, b.size) < 2:
        return None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return None
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    d, h = float(a.mean() - b.mean()), t_quantile(0.5 + level / 2, df) * math.sqrt(va + vb)
    return d, d - h, d + h


def difference(claim: dict, cpu: dict[int, str]) -> tuple[float, float, float] | None:
    """The claim's mean effect on the CPU with the most seeds − on the other (:func:`welch`); None unless its seeds
    were recorded on exactly two CPUs."""
    g = groups(claim, cpu)
    return welch(g[0][1], g[1][1]) if len(g) == 2 else None


def _row(label: str, g: dict[str, np.ndarray], names: list[str], unit: str) -> str:
    cells = [f"{g[n].size}, {g[n].mean():+.2f}" if n in g else "–" for n in names]
    d = welch(g[names[0]], g[names[1]]) if len(names) == 2 and all(n in g for n in names) else None
    diff = "–" if d is None else f"{d[0]:+.2f} [{d[1]:+.2f}, {d[2]:+.2f}] {unit}".strip()
    return f"| {label} | " + " | ".join(cells) + f" | {diff} |"


def render_table(claims: list[dict], cpu: dict[int, str], profile: str,
                 measures: dict[str, tuple[dict[int, float], str]] | None = None) -> str:
    """Markdown: for each claim kept with per-seed data, its mean effect on each CPU and the difference between two;
    then each of ``measures`` (a label: per-seed values and their unit, e.g. one model's accuracy, which no claim
    decides alone) the same way."""
    rows = [c for c in claims if (c.get("data") or {}).get("seeds") and (c.get("effect") or {}).get("lo") is not None]
    seeds = {s for c in rows for s in c["data"]["seeds"]}
    count = {n: sum(cpu.get(s, "unknown") == n for s in seeds) for n in {cpu.get(s, "unknown") for s in seeds}}
    names = sorted(count, key=lambda n: (-count[n], n))  # most seeds first, as in :func:`groups`
    if len(names) < 2:
        return f"(`{profile}`'s seeds were all recorded on one kind of CPU: {', '.join(names) or 'none'})"
    head = [f"{n}: seeds, mean" for n in names]
    lines = ["| claim | " + " | ".join(head) + " | difference, the first − the second [95 % Welch interval] |",
             "|---|" + "---|" * (len(names) + 1)]
    lines += [_row(c["id"], dict(groups(c, cpu)), names, c["effect"]["unit"].strip()) for c in rows]
    lines += [_row(label, dict(split(values, cpu)), names, unit) for label, (values, unit) in (measures or {}).items()]
    return "\n".join(lines)


def permutation_p(a: np.ndarray, b: np.ndarray, seed: int = 0) -> float:
    """Two-sided permutation p of mean(a) − mean(b): the share of the splits of the pooled values into groups of a's
    and b's sizes whose difference is at least as far from zero (every split where there are at most :data:`EXACT`,
    else 200,000 random ones, counted with the observed)."""
    x = np.concatenate([a, b]).astype(np.float64)
    k, n, total = a.size, x.size, x.sum()
    observed = abs(a.mean() - b.mean()) - 1e-9 * max(1.0, float(np.abs(x).max()))
    if math.comb(n, k) <= EXACT:
        sums = x[_splits(n, k)].sum(1)
        return float(np.mean(np.abs(sums / k - (total - sums) / (n - k)) >= observed))
    rng = np.random.default_rng(seed)
    picks = np.argsort(rng.random((200_000, n)), axis=1)[:, :k]
    sums = x[picks].sum(1)
    return float((np.sum(np.abs(sums / k - (total - sums) / (n - k)) >= observed) + 1) / (200_001))


@functools.lru_cache(maxsize=4)
def _splits(n: int, k: int) -> np.ndarray:
    """Every choice of ``k`` of ``n`` indices, one row each (the enumeration of :func:`permutation_p`)."""
    count = math.comb(n, k)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), k)), dtype=np.int16,
                       count=count * k)
    return flat.reshape(count, k)


def holm(ps: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of a family of p values (each at most 1, never below the one before it)."""
    order = sorted(ps, key=ps.get)
    out, running = {}, 0.0
    for j, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - j) * ps[key]))
        out[key] = running
    return out


def _seeds_by_cpu(claim: dict, cpu: dict[int, str]) -> dict[str, list[int]]:
    by: dict[str, list[int]] = {}
    for s in claim["data"]["seeds"]:
        by.setdefault(cpu.get(s, "unknown"), []).append(s)
    return by


def verdict_on(claim: dict, seeds: list[int]) -> tuple[intervals.Interval, str]:
    """The claim decided on ``seeds`` alone (its data's subset, the same builder and rule)."""
    iv, _ = claims.decide_again(claim_data.subset(claim["data"], seeds))
    c = paper.CLAIMS_BY_ID[claim["id"]]
    return iv, intervals.outcome(iv, None if c.paper_effect is None else c.paper_effect / c.scale, absence=c.absence)


def comparison(lead: dict, rows: list[dict], cpu: dict[int, str], profile: str) -> dict | None:
    """The by-CPU comparison of the lead in the order a reader should weigh it: the confirmatory one (the seeds of
    :data:`CONFIRMATORY` against the other CPU's), the all-seed one adjusted by Holm over every claim the by-CPU table
    compares, the all-seed one itself (post hoc), and the lead's verdict on each CPU alone. None unless the seeds were
    recorded on exactly two CPUs."""
    g = groups(lead, cpu)
    if len(g) != 2:
        return None
    effects = dict(zip(lead["data"]["seeds"], power.per_seed_effects(lead)))
    by = _seeds_by_cpu(lead, cpu)
    out = {"names": [n for n, _ in g], "post_hoc": (welch(g[0][1], g[1][1]), permutation_p(g[0][1], g[1][1]))}
    family = {}
    for c in rows:
        cg = groups(c, cpu)
        if len(cg) == 2 and min(x.size for _, x in cg) >= 2:
            family[c["id"]] = permutation_p(cg[0][1], cg[1][1])
    out["holm"] = (holm(family).get(lead["id"]), len(family))
    late = [s for s in CONFIRMATORY.get(profile, ()) if s in effects]
    if late:
        home = next(n for n in by if not set(late) & set(by[n]))
        a, b = np.array([effects[s] for s in by[home]]), np.array([effects[s] for s in late])
        out["confirmatory"] = (home, cpu.get(late[0], "unknown"), late, welch(a, b), permutation_p(a, b))
    out["verdicts"] = {n: (verdict_on(lead, by[n]), len(by[n])) for n, _ in g}
    return out
