"""Each recorded claim's per-seed effects split by the CPU its seeds were recorded on.

The same seed trains to another model on another kind of CPU (docs/results.md, "The same seed on another CPU"), and a
record can hold seeds from several machines (``records.parts``). This splits a claim's effects by seed
(``power.per_seed_effects``) by each seed's CPU (``results.recorded_machines``) and compares two CPUs by Welch's t
over the seeds, so that a reader sees whether the machine moves a claim as much as the seed does. The table is filled
by ``python -m infiloop results`` between ``<!-- by-cpu PROFILE: start -->`` and ``<!-- by-cpu PROFILE: end -->``.
"""

from __future__ import annotations

import math

import numpy as np

from ...analysis import power
from ...analysis.quantiles import t_quantile


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
