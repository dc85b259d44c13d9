"""Notebook 08's looped decoders read as a grid, and the looped-LM study's claims decided on it.

One record (``training.looplm.run``) per configuration: a language model trained on the mixture of knowledge and
kinship, holding, per test depth and per number of loops r, a string of 0/1 flags (each test item right or wrong
after r loops) and which depths are which kind of task (``kinds``). :class:`DecoderGrid` reads those flags by
(kind, allocation, connection, seed) at an effective depth L(r) = p + r s + c (each allocation's own r), draws
accuracy curves over seeds and items (``intervals.interval``) and pairs them for the claims' effects
(``analysis/claims.py``); :func:`study_verdicts` states each claim of the study the grid can decide, at the
effective depths the study's summary gives (L(K), 2 L(K), 3 L(K), L(K) / 2), with its effect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import claims as effects
from . import intervals
from .intervals import Interval, Ratio

KINDS = ("knowledge", "kinship")
SHORT_CHAINS = (2, 3)  # the study's CLUTRR lengths with large gains (its Key Finding 2); longer ones: 4-10
STUDY_CLAIMS_NEEDING_GRID = {  # claim id -> the connection or the allocation roles it needs (the profile's roles)
    "study.history_lg_beats_baseloop": ("history_lg",), "study.balanced_allocation_extrapolates": ("balanced",
                                                                                                   "extremes"),
    "study.recurrent_beats_nonloop": ("balanced", "nonloop"), "study.coda_protects_knowledge": ("coda", "prelude"),
    "study.prelude_helps_reasoning": ("prelude", "coda")}


def _pct(x: float) -> str:
    return "–" if x != x else f"{100 * x:.1f} %"


@dataclass
class DecoderGrid:
    """The records of one grid, ``records[(allocation, connection, seed)]``, for the training ``seeds``;
    ``loops[allocation]``: ``{L(r): r}``, the loop count at which it reaches each effective depth."""

    records: dict
    seeds: list[int]
    loops: dict[str, dict[int, int]]

    def flags(self, kind: str, alloc: str, conn: str, seed: int, depth: int, lengths=None) -> np.ndarray:
        """The test items of ``kind`` answered right at effective depth ``depth`` (every test depth of the kind, or
        the kinship chain ``lengths`` given), in one array."""
        rec = self.records[(alloc, conn, seed)]
        r = str(self.loops[alloc][depth])
        wanted = [d for d in rec["kinds"][kind] if lengths is None or d in lengths]
        return np.concatenate([np.frombuffer(rec["correct"][str(d)][r].encode(), np.uint8) - 48
                               for d in wanted]).astype(np.float64)

    def overall(self, alloc: str, conn: str, seed: int, depth: int) -> Ratio:
        """Overall accuracy at ``depth`` as a ratio over every test item: each kind weighs one half (the mean of the
        two kinds' accuracies, as the study's overall score averages its tasks)."""
        parts = [self.flags(k, alloc, conn, seed, depth) for k in KINDS]
        w = np.concatenate([np.full(len(f), 1.0 / len(f)) for f in parts])
        return np.concatenate(parts) * w, w

    def curve(self, kind: str, alloc: str, conn: str, depths: list[int]) -> Interval:
        """Accuracy against L(r), the mean over seeds with its 95 % interval (seeds and test items resampled);
        ``kind`` ``overall``: the mean of the two kinds."""
        per_seed = []
        for s in self.seeds:
            if kind == "overall":
                num, den = zip(*(self.overall(alloc, conn, s, d) for d in depths))
                per_seed.append([(np.stack(num), np.stack(den))])
            else:
                f = np.stack([self.flags(kind, alloc, conn, s, d) for d in depths])
                per_seed.append([(f, np.ones_like(f))])
        return intervals.interval(per_seed, items="items", vectorized=True, bounds=intervals.SHARE)

    def pairs(self, kind: str, a1: str, c1: str, l1: int, a2: str, c2: str, l2: int, lengths=None) -> list[tuple]:
        """Per seed, the flags of (a1, c1) at depth l1 and of (a2, c2) at l2, on the same items."""
        return [(self.flags(kind, a1, c1, s, l1, lengths), self.flags(kind, a2, c2, s, l2, lengths))
                for s in self.seeds]

    def gains(self, kind: str, allocs: list[str], to: int, frm: int) -> list[list[np.ndarray]]:
        """Per seed, BaseLoop's flags of each allocation at depth ``to`` then ``frm``: [a₁, a₀, b₁, b₀, ...]."""
        return [[f for a in allocs for f in (self.flags(kind, a, "carry_last", s, to),
                                             self.flags(kind, a, "carry_last", s, frm))] for s in self.seeds]


def study_verdicts(grid: DecoderGrid, base: str, conns: list[str], roles: dict[str, list[str]],
                   train_depth: int) -> dict[str, tuple[str, Interval]]:
    """Each study claim this grid decides: ``{claim id: (what was measured, the interval of its effect)}``, at the
    effective depths of the study's summary, here multiples of the grid's L(K) = ``train_depth``: its extrapolation
    from L(r) = L(K) to 2 L(K) (20 → 40), the combination's budget D = 3 L(K) (84 for 7×4), under-unrolling L(K)/2.
    ``roles``: the allocations of each role the grid holds (``looplm.Grid.role``)."""
    lk, l2 = train_depth, 2 * train_depth
    out = {}
    for cid, kind in (("study.loops_help_reasoning", "kinship"), ("study.loops_hurt_knowledge", "knowledge")):
        pairs = grid.pairs(kind, base, "carry_last", l2, base, "carry_last", lk)
        acc = [np.mean([np.mean(p[i]) for p in pairs]) for i in (1, 0)]
        out[cid] = (f"BaseLoop {base}, {kind}: {_pct(acc[0])} at L(r) = {lk} (r = K) → {_pct(acc[1])} at {l2}",
                    effects.difference(pairs, "items"))
    short = [np.isin(_lengths(grid, base, s), SHORT_CHAINS) for s in grid.seeds]
    out["study.short_chains_gain_more"] = (
        f"BaseLoop {base}, kinship gain L(r) = {lk} → {l2}: chains of length 2–3 against 4–10",
        effects.gain_by_subset(grid.pairs("kinship", base, "carry_last", l2, base, "carry_last", lk), short))
    if "history_lg" in conns and 3 * lk in grid.loops[base]:
        out["study.history_lg_beats_baseloop"] = (
            f"overall accuracy (mean of knowledge and kinship) at D = L(r) = {3 * lk} (3 L(K)): history + LG vs "
            "BaseLoop", effects.ratio_difference([(grid.overall(base, "history_lg", s, 3 * lk),
                                                   grid.overall(base, "carry_last", s, 3 * lk)) for s in grid.seeds],
                                                  (-1.0, 1.0)))
    out.update(_allocation_verdicts(grid, roles, lk))
    return out


def _lengths(grid: DecoderGrid, alloc: str, seed: int) -> np.ndarray:
    """The chain length of each kinship test item, in the order of ``flags``."""
    rec = grid.records[(alloc, "carry_last", seed)]
    r = next(iter(rec["correct"][str(rec["kinds"]["kinship"][0])]))
    return np.concatenate([np.full(len(rec["correct"][str(d)][r]), d) for d in rec["kinds"]["kinship"]])


def _allocation_verdicts(grid: DecoderGrid, roles: dict[str, list[str]], lk: int) -> dict[str, tuple[str, Interval]]:
    """The allocation claims at matched L(r): the balanced pure split's reasoning gain L(K) → 2 L(K) against the
    better of the extreme splits'; the balanced split at 2 L(K) against the non-looped reference at L(K); the
    coda-only against the prelude-only allocation of one core (knowledge L(K) → L(K)/2, reasoning L(K) → 2 L(K))."""
    out, l2, half = {}, 2 * lk, lk // 2
    (bal, *_), extremes = roles.get("balanced") or [None], roles.get("extremes", [])
    if bal and extremes:
        out["study.balanced_allocation_extrapolates"] = (
            f"kinship gain L(r) = {lk} → {l2}: balanced {bal} vs the better of {', '.join(extremes)}",
            effects.change_over_best(grid.gains("kinship", [bal, *extremes], l2, lk)))
    nonloop = (roles.get("nonloop") or [None])[0]
    if bal and nonloop:
        out["study.recurrent_beats_nonloop"] = (
            f"kinship: balanced {bal} at L(r) = {l2} vs non-looped {nonloop} at its L = {lk}",
            effects.difference(grid.pairs("kinship", bal, "carry_last", l2, nonloop, "carry_last", lk), "items"))
    coda, prelude = (roles.get("coda") or [None])[0], (roles.get("prelude") or [None])[0]
    if coda and prelude:
        out["study.coda_protects_knowledge"] = (
            f"knowledge change L(r) = {lk} → {half}: coda-only {coda} vs prelude-only {prelude}",
            effects.difference_of_changes([tuple(g) for g in grid.gains("knowledge", [coda, prelude], half, lk)]))
        out["study.prelude_helps_reasoning"] = (
            f"kinship gain L(r) = {lk} → {l2}: prelude-only {prelude} vs coda-only {coda}",
            effects.difference_of_changes([tuple(g) for g in grid.gains("kinship", [prelude, coda], l2, lk)]))
    return out


def study_claims(verdicts: dict[str, tuple[str, Interval]], claim) -> list[dict]:
    """The claims as the notebook records them (``claim(id, ours, effect)``, the helper's), the study's claims the
    grid cannot decide marked as not run, with what they need."""
    out = [claim(cid, ours, effect=iv) for cid, (ours, iv) in verdicts.items()]
    for cid, need in STUDY_CLAIMS_NEEDING_GRID.items():
        if cid not in verdicts:
            out.append(claim(cid, "not run at this profile", None,
                             f"needs {' and '.join(need)} in the grid (profile tiny has them)"))
    return out


def first_finding(reasoning: dict, knowledge: dict) -> str:
    """The study's first finding (past the horizon reasoning rises and knowledge falls) in words, from the two
    decided claims."""
    def moved(c: dict) -> bool:  # the paper's direction, measurably: agrees, or smaller than the study's size
        return c.get("agrees") is True or c.get("verdict") == "smaller"

    if moved(reasoning) and moved(knowledge):
        return "Past the horizon, reasoning rose and knowledge fell (L(r) = 2 L(K) against L(K)), the study's first " \
               "finding. "
    return ("Past the horizon the study's first finding does not appear here: reasoning "
            + ("rose" if moved(reasoning) else "did not rise measurably") + f" ({reasoning['note']}), "
            "while knowledge " + ("fell" if moved(knowledge) else "did not fall measurably")
            + f" ({knowledge['note']}). ")


def loop_axis(records: dict, alloc: str, conn: str, seeds: list[int], kind: str, k: int) -> dict:
    """The loop axis of one configuration (``training.looplm.loop_axis``, mean over seeds) at the answer position of
    ``kind``: γ_l and the relative update ||h_l − h_{l−1}|| / ||h_{l−1}|| per loop, their means in loops 1..K and
    past K, and the learned β and |q| where the connection has them."""
    la = [records[(alloc, conn, s)]["loop_axis"][kind] for s in seeds]
    gamma, update = (np.mean([x[key] for x in la], axis=0) for key in ("gamma", "update"))
    out = {"gamma": gamma, "update": update, "gamma_in": gamma[:k].mean(), "gamma_past": gamma[k:].mean(),
           "update_in": update[:k].mean(), "update_past": update[k:].mean()}
    for key in ("beta", "q_norm"):
        vals = [x[key] for x in la if key in x]
        out[key] = float(np.mean(vals)) if vals else float("nan")
    return out


def depth_label(loops: dict[int, int], k: int, depth: int) -> str:
    """``"L = 16: r = 8 (2K)"``: an effective depth with the allocation's own r and r / K."""
    r = loops[depth]
    return f"L = {depth}: r = {r} ({r / k:.3g}K)"



def depth_ticks(ax, loops: dict[int, int], k: int, depths: list[int]) -> None:
    """Label each effective depth of ``ax``'s x axis in three short lines, "L = 16", "r = 8", "2K" (:func:`depth_label`
    in one line each part): on notebook 08's log axis the deepest points lie close together (12 and 16 at `quick`),
    where the two-line labels overlapped."""
    ax.set_xticks(depths, [f"L = {d}\nr = {loops[d]}\n{loops[d] / k:.3g}K" for d in depths], fontsize="small")
    ax.minorticks_off()

KNOWLEDGE_CHANCE = 1 / 8  # each knowledge question has 8 possible values (tasks/language.py, ATTRIBUTES)


def knowledge_level(iv: Interval, i: int) -> str:
    """Where knowledge stands at point ``i`` of its curve: at chance (its interval reaches 1/8: not learned), near its
    ceiling (the interval reaches 95 %), or between, where both a fall and a rise can show."""
    text = f"Knowledge at L(K) is {100 * iv.value[i]:.1f} % [{100 * iv.lo[i]:.1f}, {100 * iv.hi[i]:.1f}] for BaseLoop: "
    if iv.lo[i] <= KNOWLEDGE_CHANCE:
        return text + f"not above chance ({100 * KNOWLEDGE_CHANCE:.1f} %), the facts are not learned at this profile. "
    if iv.hi[i] >= 0.95:
        return text + "near its ceiling, where a rise cannot show. "
    return text + "above chance and below its ceiling, so a fall can show. "
