"""The contrasts where the paper's claim sets InfiLoop's behaviour against TRM's (``paper.Claim.contrast``): InfiLoop
− carry-last decided beside the claim's own effect, from the data the same summary keeps (``docs/statistics.md``,
"Contrasts"), so that a record is decided again without training.

- the depth gain (``depth.infiloop_improves_with_depth``): InfiLoop's gain from the training depth to the deepest
  update − carry-last's, carry-last's curve read from ``depth.carry_last_degrades``;
- the wrong cells (``diagnosis.infiloop_wrong_cells_fall``): InfiLoop's fall − carry-last's, from
  ``diagnosis.carry_last_wrong_cells_grow``;
- the absence claims (``diagnosis.infiloop_keeps_after_solve``, ``overthink.infiloop_keeps``): carry-last's loss −
  InfiLoop's, from the claim's own guard data.

:func:`with_contrasts` adds them to a summary's claims (``results --redecide``, a merge of records, a notebook's
summary); the verdict that answers the paper's sentence leads.
"""

from __future__ import annotations

import re

import numpy as np

from . import intervals, paper
from .claim_data import decode
from .claims import (
    difference_of_changes,
    effect_text,
    label,
    outcome_of,
    ratio_changes,
    ratio_difference,
    record_effect,
)
from .intervals import Interval


def _args(claim: dict) -> list:
    return decode(claim["data"]["effect"])["args"]


def depth_rows(summary: dict) -> tuple[int, int] | None:
    """(training depth, updates per recorded row) of notebook 02's summary, read from its accuracy table's columns
    ("@ training depth (16)", "@ 960 updates") and the rows of carry-last's recorded curve; None where it has none."""
    for t in summary.get("tables", []):
        cols = " ".join(map(str, t.get("columns", [])))
        m, n = re.search(r"@ training depth \((\d+)\)", cols), re.search(r"@ (\d+) updates", cols)
        if m and n:
            return int(m.group(1)), int(n.group(1))
    return None


def _depth_contrast(found: dict, summary: dict) -> Interval | None:
    """InfiLoop's gain from the training depth to the deepest evaluation − carry-last's, on the same puzzles of each
    seed: InfiLoop's flags from its depth claim, carry-last's from the curves of ``depth.carry_last_degrades``."""
    own, fall, rows = found.get("depth.infiloop_improves_with_depth"), found.get("depth.carry_last_degrades"), \
        depth_rows(summary)
    if not own or not fall or rows is None or own["data"].get("seeds") != fall["data"].get("seeds"):
        return None
    depth, deepest = rows
    curves = _args(fall)[0]
    every = deepest // curves[0].shape[0]
    if every * curves[0].shape[0] != deepest or depth % every:
        return None
    at = depth // every - 1
    return difference_of_changes([(a, b, c[-1], c[at]) for (a, b), c in zip(_args(own)[0], curves)], items="puzzles")


def _wrong_cells_contrast(found: dict, summary: dict) -> Interval | None:
    """InfiLoop's fall of wrong cells per puzzle between the snapshots − carry-last's: InfiLoop's (first, second)
    ratios from its claim, carry-last's (second, first) from ``diagnosis.carry_last_wrong_cells_grow``."""
    own, other = found.get("diagnosis.infiloop_wrong_cells_fall"), found.get("diagnosis.carry_last_wrong_cells_grow")
    if not own or not other or own["data"].get("seeds") != other["data"].get("seeds"):
        return None
    return ratio_changes([(i[0], i[1], c[1], c[0]) for i, c in zip(_args(own)[0], _args(other)[0])])


def _as_ratios(inputs: dict) -> list[intervals.Ratio]:
    """A loss's per-seed (numerator, denominator) from its builder's inputs (``proportion``: events and trials as
    flags; ``share``: the ratios)."""
    if inputs["builder"] == "proportion":
        events, trials = inputs["args"][:2]
        return [(np.asarray(e, np.float64), np.asarray(t, np.float64)) for e, t in zip(events, trials)]
    return [tuple(q) for q in inputs["args"][0]]


def _loss_contrast(found: dict, summary: dict, cid: str) -> Interval | None:
    """The comparison model's (carry-last's) loss − InfiLoop's, paired on the same puzzles of each seed, from the
    absence claim's own guard data (each model's loss)."""
    c = found.get(cid)
    guard = decode(c["data"]["guard"]) if c and c.get("data") and c["data"].get("guard") else None
    if guard is None or set(guard["losses"]) != {"carry-last", "InfiLoop"}:
        return None
    cl, inf = (_as_ratios(guard["losses"][k]) for k in ("carry-last", "InfiLoop"))
    return ratio_difference([(a, b) for a, b in zip(cl, inf)], bounds=(-1.0, 1.0))


CONTRASTS = {  # claim id -> its contrast from the summary's claims (paper.Claim.contrast says what it measures)
    "depth.infiloop_improves_with_depth": _depth_contrast,
    "diagnosis.infiloop_wrong_cells_fall": _wrong_cells_contrast,
    "diagnosis.infiloop_keeps_after_solve": lambda f, s: _loss_contrast(f, s, "diagnosis.infiloop_keeps_after_solve"),
    "overthink.infiloop_keeps": lambda f, s: _loss_contrast(f, s, "overthink.infiloop_keeps"),
}


def contrast_record(cid: str, effect: Interval, digits: int = 1) -> dict:
    """What a claim keeps of its contrast: the effect record (as :func:`record`'s, against ``contrast_effect``) and
    its verdict by the rule."""
    c = paper.CLAIMS_BY_ID[cid]
    e = record_effect(effect, c.contrast, c.contrast_effect, c.contrast_basis, c.unit, c.scale, digits, False, True)
    return {"effect": e, "verdict": outcome_of(effect, c.contrast_effect, c.scale, False)}


def with_contrasts(claims: list[dict], summary: dict) -> list[dict]:
    """``claims`` (one summary's) with each claim that has a contrast (:data:`CONTRASTS`) decided on it as well, its
    record under ``contrast``. The verdict that answers the paper's sentence leads (``verdict``, ``agrees``): the
    contrast's, where the claim is InfiLoop's behaviour set against TRM's (the depth gain, the wrong cells), the claim's
    own verdict kept as ``own_verdict``; an absence claim's own verdict, whose guard already asks that the comparison
    model lose as the paper's TRM does (``untestable_unless_lost``), with the contrast shown beside it. A contrast that
    the summary's data cannot give (a claim missing, seeds that differ) leaves the claim as it is."""
    found = {c["id"]: c for c in claims if c.get("data")}
    out = []
    for c in claims:
        make = CONTRASTS.get(c["id"])
        iv = make(found, summary) if make and c.get("data") else None
        if iv is None:
            out.append(c)
            continue
        p = paper.CLAIMS_BY_ID[c["id"]]
        own = c.get("own_verdict") or label(c)
        own_note = c.get("note", "").split(" InfiLoop alone: ", 1)[-1].split(" Beside it, ", 1)[0]
        rec = contrast_record(c["id"], iv, c["data"]["digits"])
        words = f"{p.contrast}: {effect_text(rec['effect'])} ({rec['verdict']}; {rec['effect']['method']})"
        lead = own if p.absence else rec["verdict"]
        note = f"{own_note} Beside it, {words}" if p.absence else f"{words}. InfiLoop alone: {own_note}"
        out.append({**c, "contrast": rec, "own_verdict": own, "verdict": lead,
                    "agrees": {intervals.AGREES: True, intervals.DIFFERS: False}.get(lead), "note": note})
    return out
