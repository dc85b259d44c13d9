"""Notebook 08's looped decoders read as a grid, and the looped-LM study's claims decided on it.

A record (``training_looplm.run``) holds, per test depth and per number of loops r, a string of 0/1 flags: whether
each test item was answered right after r loops. :class:`DecoderGrid` reads those flags by (task, allocation,
connection, seed), draws accuracy curves over seeds and items (``intervals.interval``), and pairs them for the
claims' effects (``claims.difference``, ``claims.difference_of_changes``); :func:`study_verdicts` states each claim
of the study the grid can decide, with its effect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import claims as effects
from . import intervals
from .intervals import Interval

STUDY_CLAIMS_NEEDING_GRID = ("study.history_lg_beats_baseloop", "study.balanced_allocation_extrapolates",
                             "study.coda_protects_knowledge", "study.prelude_helps_reasoning")
NOT_HERE = "needs several allocations at matched depth (profile tiny lists four)"


def _pct(x: float) -> str:
    return "–" if x != x else f"{100 * x:.1f} %"


@dataclass
class DecoderGrid:
    """The records of one grid, ``records[(task, allocation, connection, seed)]``, for the training ``seeds``."""

    records: dict
    seeds: list[int]

    def flags(self, task: str, alloc: str, conn: str, seed: int, r: int, depths=None) -> np.ndarray:
        """The test items answered right after r loops (every depth of the task, or those given), in one array."""
        c = self.records[(task, alloc, conn, seed)]["correct"]
        return np.concatenate([np.frombuffer(c[d][str(r)].encode(), np.uint8) - 48
                               for d in c if depths is None or int(d) in depths]).astype(np.float64)

    def curve(self, task: str, alloc: str, conn: str, loops: list[int]) -> Interval:
        """Accuracy against r, the mean over seeds with its 95 % interval (seeds and test items resampled)."""
        per_seed = []
        for s in self.seeds:
            f = np.stack([self.flags(task, alloc, conn, s, r) for r in loops])
            per_seed.append([(f, np.ones_like(f))])
        return intervals.interval(per_seed, items="items", vectorized=True, bounds=intervals.SHARE)

    def pairs(self, task: str, a1: str, c1: str, r1: int, a2: str, c2: str, r2: int) -> list[tuple]:
        """Per seed, the flags of (a1, c1) after r1 loops and of (a2, c2) after r2, on the same items."""
        return [(self.flags(task, a1, c1, s, r1), self.flags(task, a2, c2, s, r2)) for s in self.seeds]

    def changes(self, task: str, a: str, a_to: int, a_from: int, b: str, b_to: int, b_from: int) -> list[tuple]:
        """Per seed, BaseLoop's flags (a at a_to, a at a_from, b at b_to, b at b_from): a's change against b's."""
        return [(*x, *y) for x, y in zip(self.pairs(task, a, "carry_last", a_to, a, "carry_last", a_from),
                                         self.pairs(task, b, "carry_last", b_to, b, "carry_last", b_from))]


def study_verdicts(grid: DecoderGrid, curves: dict, loops: list[int], base: str, conns: list[str],
                   shapes: dict[str, tuple[int, int, int, int]]) -> dict[str, tuple[str, Interval]]:
    """Each study claim this grid decides: ``{claim id: (what was measured, the interval of its effect)}``.
    ``curves[(task, connection)]``: the base allocation's curves over ``loops``; ``shapes[allocation]``: its
    (prelude, shared core, K, coda)."""
    kb, r_far = shapes[base][2], max(loops)
    out = {}
    for cid, task, word in (("study.loops_help_reasoning", "kinship", "kinship"),
                            ("study.loops_hurt_knowledge", "knowledge", "knowledge")):
        cv = curves[(task, "carry_last")].value
        out[cid] = (f"BaseLoop, {word}: {_pct(cv[loops.index(kb)])} @ K → {_pct(cv[loops.index(2 * kb)])} @ 2K",
                    effects.difference(grid.pairs(task, base, "carry_last", 2 * kb, base, "carry_last", kb), "items"))
    if "history_lg" in conns:
        out["study.history_lg_beats_baseloop"] = (
            f"kinship @ 4K: history + LG {_pct(curves[('kinship', 'history_lg')].value[-1])} vs BaseLoop "
            f"{_pct(curves[('kinship', 'carry_last')].value[-1])}",
            effects.difference(grid.pairs("kinship", base, "history_lg", r_far, base, "carry_last", r_far), "items"))
    if len(shapes) > 1:
        out.update(_allocation_verdicts(grid, shapes))
    return out


def _allocation_verdicts(grid: DecoderGrid, shapes: dict) -> dict[str, tuple[str, Interval]]:
    """The allocation claims: the most balanced core against the most extreme one (reasoning gain K → 2K), and a
    coda-heavy against a prelude-heavy allocation of the same core (knowledge K → K/2, reasoning K → 2K)."""
    K = {a: s[2] for a, s in shapes.items()}
    imbalance = {a: abs(np.log(s[1] / s[2])) for a, s in shapes.items()}
    balanced, extreme = min(shapes, key=imbalance.get), max(shapes, key=imbalance.get)
    out = {"study.balanced_allocation_extrapolates": (
        f"reasoning gain K → 2K: balanced {balanced} vs extreme {extreme}",
        effects.difference_of_changes(grid.changes("kinship", balanced, 2 * K[balanced], K[balanced],
                                                   extreme, 2 * K[extreme], K[extreme])))}
    same_core = [(a, b) for a in shapes for b in shapes if shapes[a][1:3] == shapes[b][1:3]
                 and shapes[a][3] > shapes[a][0] and shapes[b][0] > shapes[b][3]]
    if same_core:
        coda, prelude = same_core[0]
        half = {a: max(1, round(K[a] / 2)) for a in (coda, prelude)}
        out["study.coda_protects_knowledge"] = (
            f"knowledge change K → K/2: coda-heavy {coda} vs prelude-heavy {prelude}",
            effects.difference_of_changes(grid.changes("knowledge", coda, half[coda], K[coda],
                                                       prelude, half[prelude], K[prelude])))
        out["study.prelude_helps_reasoning"] = (
            f"reasoning gain K → 2K: prelude-heavy {prelude} vs coda-heavy {coda}",
            effects.difference_of_changes(grid.changes("kinship", prelude, 2 * K[prelude], K[prelude],
                                                       coda, 2 * K[coda], K[coda])))
    return out


def study_claims(verdicts: dict[str, tuple[str, Interval]], claim) -> list[dict]:
    """The claims as the notebook records them (``claim(id, ours, effect)``, the helper's), the study's claims the
    grid cannot decide marked as not run, with why."""
    out = [claim(cid, ours, effect=iv) for cid, (ours, iv) in verdicts.items()]
    for cid in STUDY_CLAIMS_NEEDING_GRID:
        if cid not in verdicts:
            out.append(claim(cid, "not run at this profile", None,
                             NOT_HERE if "history" not in cid else "history_lg is not among the connections"))
    return out


def first_finding(reasoning: dict, knowledge: dict) -> str:
    """The study's first finding (past the horizon reasoning rises and knowledge falls) in words, from the two
    decided claims."""
    if reasoning["agrees"] is True and knowledge["agrees"] is True:
        return "Past the horizon, reasoning rose and knowledge fell (r = 2K against K), the study's first finding. "
    return ("Past the horizon the study's first finding does not appear here: reasoning did not rise with extra loops "
            f"({reasoning['note']}), while knowledge "
            + ("fell" if knowledge["agrees"] is True else "did not fall measurably") + f" ({knowledge['note']}). ")
