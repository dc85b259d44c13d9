"""Notebook 08's grid of looped decoders (analysis/looplm_grid.py, experiments/looplm.py) on planted records: matched
effective depths for every allocation, the flags read back by kind, the overall accuracy, and each study claim
decided the way its planted effect says (the study's direction agrees, the other differs)."""

from __future__ import annotations

import numpy as np
import pytest

from infiloop.analysis import intervals, looplm_grid
from infiloop.errors import UsageError
from infiloop.experiments import looplm

N = 200  # test items per depth
KINDS = {"knowledge": [1], "kinship": [2, 3, 5, 8]}
ALLOCS = ["0+2x4+0", "0+1x8+0", "0+4x2+0", "0+8x1+0", "0+2x3+2", "2+2x3+0"]
DEPTHS = [4, 8, 16, 24, 32]
ROLES = {"balanced": ["0+2x4+0"], "extremes": ["0+1x8+0", "0+4x2+0"], "nonloop": ["0+8x1+0"],
         "coda": ["0+2x3+2"], "prelude": ["2+2x3+0"]}


def _record(p_right, loops: dict[int, int], rng) -> dict:
    """A record whose items of depth d are right at effective depth L with probability p_right(d, L)."""
    def flags(d, L):
        return "".join("1" if x else "0" for x in rng.random(N) < p_right(d, L))

    return {"kinds": KINDS, "correct": {str(d): {str(r): flags(d, L) for L, r in loops.items()}
                                        for ds in KINDS.values() for d in ds}}


def _grid(sign: int) -> looplm_grid.DecoderGrid:
    """Every effect the study reports planted with ``sign`` (+1: the study's direction, -1: the opposite)."""
    rng = np.random.default_rng(0)
    loops = {a: looplm.matched_loops(a, DEPTHS) for a in ALLOCS}
    gain = {"0+2x4+0": 0.3, "0+1x8+0": 0.0, "0+4x2+0": 0.0, "2+2x3+0": 0.3, "0+2x3+2": 0.0}

    def p_right(alloc, conn):
        def p(d, L):
            if d == 1:  # knowledge falls past L(K) = 8; under-unrolled, the coda-only model keeps it
                fall = 0.35 if L > 8 else (0.0 if alloc == "0+2x3+2" else 0.35) if L < 8 else 0.0
                return 0.8 - sign * fall
            up = sign * gain.get(alloc, 0.0) * (L >= 16) * (1.0 if d <= 3 else 0.0)  # short chains gain, long ones not
            return float(np.clip(0.5 + up + sign * 0.2 * (conn == "history_lg") - sign * 0.2 * (L == 8 and alloc ==
                                                                                                 "0+8x1+0"), 0, 1))
        return p

    records = {(a, c, s): _record(p_right(a, c), loops[a], rng) for s in (0, 1, 2)
               for a in ALLOCS for c in (["carry_last", "history_lg"] if a == ALLOCS[0] else ["carry_last"])}
    return looplm_grid.DecoderGrid(records, [0, 1, 2], loops)


def test_every_allocation_runs_at_the_same_effective_depths():
    """At tiny every allocation has one training depth L(K), and at each effective depth of the grid each looped
    allocation runs a whole r with p + r s + c = L exactly; the non-looped reference at L(K) only; the depth labels
    say the real r and r / K."""
    g = looplm.grid("tiny")
    assert g.depths == DEPTHS and g.train_depth == 8 and g.allocations == ALLOCS
    for a in g.allocations:
        p, s_, k, c = looplm.allocation(a)
        assert p + k * s_ + c == g.train_depth, a
        loops = g.loops(a)
        assert list(loops) == ([8] if k == 1 else DEPTHS), a
        assert all(p + r * s_ + c == L for L, r in loops.items()), a
        probe = g.probe((a, "carry_last", 0))
        assert probe.budgets() == sorted(loops.values()) and probe.task.task == "mixture", a
    assert looplm_grid.depth_label(g.loops("0+1x8+0"), 8, 16) == "L = 16: r = 16 (2K)"
    assert looplm_grid.depth_label(g.loops("0+2x3+2"), 3, 16) == "L = 16: r = 7 (2.33K)"
    assert looplm_grid.depth_label(g.loops("0+2x3+2"), 3, 24) == "L = 24: r = 11 (3.67K)"
    with pytest.raises(ValueError, match="not a whole number"):
        looplm.matched_loops("1+2x3+1", [7])
    with pytest.raises(UsageError, match="L\\(K\\)"):
        looplm.grid("tiny", allocations="0+2x4+0,1+2x3+0")


def test_the_flags_are_read_by_kind_and_overall_weighs_each_kind_half():
    grid = _grid(+1)
    rec = grid.records[("0+2x4+0", "carry_last", 0)]
    r = str(grid.loops["0+2x4+0"][16])
    kin = grid.flags("kinship", "0+2x4+0", "carry_last", 0, 16)
    assert kin.tolist() == [float(ch) for d in ("2", "3", "5", "8") for ch in rec["correct"][d][r]]
    assert grid.flags("knowledge", "0+2x4+0", "carry_last", 0, 16).tolist() == [float(ch) for ch in
                                                                                rec["correct"]["1"][r]]
    assert grid.flags("kinship", "0+2x4+0", "carry_last", 0, 16, {5}).tolist() == [float(ch) for ch in
                                                                                  rec["correct"]["5"][r]]
    num, den = grid.overall("0+2x4+0", "carry_last", 0, 16)
    know = grid.flags("knowledge", "0+2x4+0", "carry_last", 0, 16)
    assert num.sum() / den.sum() == pytest.approx((know.mean() + kin.mean()) / 2)
    iv = grid.curve("overall", "0+2x4+0", "carry_last", DEPTHS)
    assert iv.value[2] == pytest.approx(np.mean([np.divide(*[x.sum() for x in grid.overall("0+2x4+0", "carry_last",
                                                                                          s, 16)]) for s in (0, 1, 2)]))


@pytest.mark.parametrize("sign", [+1, -1], ids=["the study's direction", "the opposite"])
def test_each_study_claim_follows_its_planted_direction(sign):
    """Planted in the study's direction every claim the grid decides agrees; planted the other way, each differs
    (its interval on the wrong side of zero: the rule's differs where the study gives no number, and below half its
    effect where it gives one)."""
    from infiloop.analysis import paper

    grid = _grid(sign)
    verdicts = looplm_grid.study_verdicts(grid, "0+2x4+0", ["carry_last", "history_lg"], ROLES, 8)
    assert set(verdicts) == {c.id for c in paper.claims_for("08_looped_lm")}
    for cid, (ours, iv) in verdicts.items():
        c = paper.CLAIMS_BY_ID[cid]
        got = intervals.verdict(iv, None if c.paper_effect is None else c.paper_effect / c.scale)
        assert got is (sign > 0), (cid, ours, iv.value, iv.lo, iv.hi)
    assert "0+2x4+0 vs the better of 0+1x8+0, 0+4x2+0" in verdicts["study.balanced_allocation_extrapolates"][0]
    assert "coda-only 0+2x3+2 vs prelude-only 2+2x3+0" in verdicts["study.coda_protects_knowledge"][0]
    assert "L(r) = 24" in verdicts["study.history_lg_beats_baseloop"][0]


def test_a_grid_without_the_roles_marks_their_claims_not_run():
    grid = _grid(+1)
    verdicts = looplm_grid.study_verdicts(grid, "0+2x4+0", ["carry_last"], {}, 8)
    assert set(verdicts) == {"study.loops_help_reasoning", "study.loops_hurt_knowledge", "study.short_chains_gain_more"}

    def claim(cid, ours, effect=None, why=""):
        return {"id": cid, "ours": ours, "note": why}

    claims = looplm_grid.study_claims(verdicts, claim)
    assert [c["id"] for c in claims[3:]] == list(looplm_grid.STUDY_CLAIMS_NEEDING_GRID)
    assert all(c["ours"] == "not run at this profile" and "needs" in c["note"] for c in claims[3:])
    assert looplm_grid.first_finding({"agrees": True, "note": ""}, {"agrees": True, "note": ""}).startswith(
        "Past the horizon, reasoning rose")
    smaller = {"agrees": None, "verdict": "smaller", "note": ""}  # the study's direction, under half its size: it moved
    assert looplm_grid.first_finding(smaller, {"agrees": True, "note": ""}).startswith(
        "Past the horizon, reasoning rose")
    assert "reasoning did not rise measurably" in looplm_grid.first_finding({"agrees": None, "verdict": "undecided",
                                                                             "note": ""}, smaller)


def test_the_knowledge_level_is_read_from_its_interval():
    """Knowledge whose interval reaches chance (1/8) is not learned; reaching 95 % it sits at its ceiling; between,
    a fall can show (what issue 48 asks of the sizes: knowledge below its ceiling at L(K))."""
    def iv(v, lo, hi):
        return intervals.Interval(np.array([v]), np.array([lo]), np.array([hi]), 3, 300, 0.95, 2000, "items")

    assert "not above chance" in looplm_grid.knowledge_level(iv(0.118, 0.095, 0.141), 0)
    assert "near its ceiling" in looplm_grid.knowledge_level(iv(0.97, 0.93, 1.0), 0)
    assert "so a fall can show" in looplm_grid.knowledge_level(iv(0.43, 0.38, 0.48), 0)
