"""A finished run against a profile's record (``python -m infiloop results --compare PROFILE``): claim by claim,
verdict by verdict and table cell by table cell, and the machine and software of each (``records.environment``).

In the reproducible numeric mode (``infiloop/numeric.py``) a run reproduces its record to the digit where MKL and ATen
run the record's branches (any Intel CPU with AVX2; MKL reports AUTO on AMD's, whose bytes are their own) with the
same torch, BLAS and lock; in the native mode only on a like machine (the same CPU kind and thread count give the
same floating-point sums). Elsewhere a seed trains other weights within the same distribution, so the numbers agree
with the record within their intervals, not to the digit (``docs/results.md``, "Across machines"). A difference of
mode is named first: it alone makes every trained weight differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import UsageError
from .verdicts import verdict

ENVIRONMENT_KEYS = ("cpu", "cpu flags", "torch", "torch threads", "blas", "python", "lock")  # what moves the sums
REPRODUCIBLE_KEYS = ("torch", "blas", "python", "lock")  # what still moves them in the reproducible mode
MODE_KEYS = ("aten capability", "mkl branch")  # what the libraries reported in the mode (numeric.state)
NOTHING_DIFFERS = ("nothing that moves the sums differs from the record's environment (numeric mode, torch, BLAS, "
                   "lock; in the native mode also CPU, flags, threads)")


def numeric_mode(environment: dict) -> str:
    """The numeric mode a summary was computed in; a summary made before the mode existed was "native"."""
    state = environment.get("numeric")
    return state.get("mode", "native") if isinstance(state, dict) else "native"


def _claims(summary: dict) -> dict:
    return {c["id"]: c for c in summary.get("claims", [])}


def _effect(c: dict) -> str:
    e = c.get("effect") or {}
    if e.get("value") is None:
        return "–"
    s, d = e.get("scale", 100.0), e.get("digits", 1)
    return f"{s * e['value']:+.{d}f} [{s * e['lo']:+.{d}f}, {s * e['hi']:+.{d}f}]"


def compare_summary(recorded: dict, run: dict, shown: int = 5) -> tuple[list[str], int, int]:
    """What differs between one notebook's recorded summary and a run's, in lines; and how many of the recorded
    claims the run decides alike, of how many."""
    name, out = recorded.get("notebook", "?"), []
    rec, new = _claims(recorded), _claims(run)
    same = 0
    for cid, c in rec.items():
        if cid not in new:
            out.append(f"{name}: claim {cid} not in this run")
            continue
        v0, v1 = verdict(c), verdict(new[cid])
        same += v0 == v1
        if v0 != v1 or _effect(c) != _effect(new[cid]):
            out.append(f"{name}: {cid}: {v0} {_effect(c)} recorded, {v1} {_effect(new[cid])} here")
    tables = {t["title"]: t for t in run.get("tables", [])}
    for t in recorded.get("tables", []):
        other = tables.get(t["title"])
        if other is None:
            out.append(f"{name}: table {t['title']!r} not in this run")
            continue
        cells = [(i, col, a, b) for i, (r0, r1) in enumerate(zip(t["rows"], other["rows"]))
                 for col, a, b in zip(t["columns"], r0, r1) if a != b]
        if len(t["rows"]) != len(other["rows"]):
            out.append(f"{name}: table {t['title']!r}: {len(t['rows'])} rows recorded, {len(other['rows'])} here")
        for i, col, a, b in cells[:shown]:
            out.append(f"{name}: table {t['title']!r} row {i + 1}, {col}: {a!r} recorded, {b!r} here")
        if len(cells) > shown:
            out.append(f"{name}: table {t['title']!r}: {len(cells) - shown} more cells differ")
    return out, same, len(rec)


def compare_environment(recorded: dict, run: dict) -> list[str]:
    """The settings that move floating-point sums and differ between the record's machine and this run's."""
    a, b = recorded.get("environment"), run.get("environment")
    if not a:
        return [f"{recorded.get('notebook')}: the record keeps no environment (recorded before records kept it): "
                "whether this machine is like the record's is unknown"]
    if not b:
        return [f"{recorded.get('notebook')}: this run keeps no environment (made by code older than the record's)"]
    name, ma, mb = recorded.get("notebook"), numeric_mode(a), numeric_mode(b)
    if ma != mb:  # first: another mode trains other weights from the same seed, on any machine
        return [f"{name}: numeric mode: {ma!r} recorded, {mb!r} here (another mode trains other weights from the "
                "same seed: run with INFILOOP_NUMERIC=" + ma + " to reproduce the record; docs/results.md)"] + [
            f"{name}: {k}: {a.get(k)!r} recorded, {b.get(k)!r} here" for k in ENVIRONMENT_KEYS if a.get(k) != b.get(k)]
    if ma == "reproducible":
        sa, sb = a.get("numeric", {}), b.get("numeric", {})
        return ([f"{name}: numeric {k}: {sa.get(k)!r} recorded, {sb.get(k)!r} here" for k in MODE_KEYS
                 if sa.get(k) != sb.get(k)]
                + [f"{name}: {k}: {a.get(k)!r} recorded, {b.get(k)!r} here" for k in REPRODUCIBLE_KEYS
                   if a.get(k) != b.get(k)])
    return [f"{name}: {k}: {a.get(k)!r} recorded, {b.get(k)!r} here" for k in ENVIRONMENT_KEYS if a.get(k) != b.get(k)]


def compare(profile: str, results: Path, recorded: Path) -> tuple[list[str], bool]:
    """Lines saying what differs between the run's summaries of ``profile`` and the record; True when every recorded
    verdict is the run's."""
    src, ref = Path(results) / profile / "summaries", Path(recorded) / profile
    if not any(ref.glob("*.json")):
        raise UsageError(f"{ref}: no record of profile {profile} to compare with")
    if not any(src.glob("*.json")):
        raise UsageError(f"{src}: no finished run to compare (run ./reproduce.sh --profile {profile} first)")
    lines, same, total, env = [], 0, 0, []
    for path in sorted(ref.glob("*.json")):
        mine = src / path.name
        if not mine.is_file():
            lines.append(f"{path.stem}: not run here")
            continue
        a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (path, mine))
        diff, s, n = compare_summary(a, b)
        lines += diff
        same, total = same + s, total + n
        env += [e for e in compare_environment(a, b) if e.split(": ", 1)[1] not in {x.split(": ", 1)[1] for x in env}]
    lines += env or [NOTHING_DIFFERS]
    lines.append(f"verdicts: {same} of {total} recorded claims decided alike")
    return lines, same == total
