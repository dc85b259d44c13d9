"""Notebook 08's grid of looped decoders (analysis/looplm_grid.py) on planted records: the flags read back, the
curves, and each study claim decided the way its planted effect says."""

from __future__ import annotations

import numpy as np

from infiloop.analysis import looplm_grid

LOOPS = [1, 2, 4, 8]  # K = 2 at every allocation below: r = K/2, K, 2K, 4K
N = 60  # test items per depth


def _record(p_right: dict[int, float], rng) -> dict:
    """A record whose items are right after r loops with probability p_right[r], at two test depths."""
    return {"correct": {str(d): {str(r): "".join("1" if x else "0" for x in rng.random(N) < p)
                                 for r, p in p_right.items()} for d in (2, 5)}}


def _grid(reasoning_gain: float, shapes: dict) -> tuple[looplm_grid.DecoderGrid, dict]:
    rng = np.random.default_rng(0)
    records = {}
    for a in shapes:
        for conn in ("carry_last", "infiloop"):
            for seed in (0, 1, 2):
                records[("kinship", a, conn, seed)] = _record(
                    {1: 0.3, 2: 0.5, 4: 0.5 + reasoning_gain, 8: 0.5 + reasoning_gain}, rng)
                records[("knowledge", a, conn, seed)] = _record({1: 0.8, 2: 0.9, 4: 0.6, 8: 0.5}, rng)
    return looplm_grid.DecoderGrid(records, [0, 1, 2]), records


def _claim(cid, ours, effect=None, why=""):
    from infiloop.analysis import intervals

    return {"id": cid, "ours": ours, "agrees": intervals.verdict(effect, None) if effect is not None else None,
            "effect": effect, "note": why}


def test_flags_read_back_and_the_curve_is_the_mean_over_seeds_and_items():
    shapes = {"1+1x2+1": (1, 1, 2, 1)}
    grid, records = _grid(0.3, shapes)
    f = grid.flags("kinship", "1+1x2+1", "carry_last", 0, 4)
    raw = records[("kinship", "1+1x2+1", "carry_last", 0)]["correct"]
    assert f.tolist() == [float(ch) for d in ("2", "5") for ch in raw[d]["4"]] and len(f) == 2 * N
    assert grid.flags("kinship", "1+1x2+1", "carry_last", 0, 4, {5}).tolist() == [float(ch) for ch in raw["5"]["4"]]
    iv = grid.curve("kinship", "1+1x2+1", "carry_last", LOOPS)
    means = [np.mean([grid.flags("kinship", "1+1x2+1", "carry_last", s, r).mean() for s in (0, 1, 2)]) for r in LOOPS]
    assert np.allclose(iv.value, means) and np.all(iv.lo >= 0) and np.all(iv.hi <= 1)


def test_the_study_claims_follow_the_planted_effects():
    """Reasoning planted to rise by 30 points from K to 2K and knowledge to fall by 30: both first-finding claims
    agree; a grid with one allocation decides no allocation claim and marks them not run."""
    shapes = {"1+1x2+1": (1, 1, 2, 1)}
    grid, _ = _grid(0.3, shapes)
    curves = {(t, c): grid.curve(t, "1+1x2+1", c, LOOPS) for t in ("kinship", "knowledge")
              for c in ("carry_last", "infiloop")}
    verdicts = looplm_grid.study_verdicts(grid, curves, LOOPS, "1+1x2+1", ["carry_last", "infiloop"], shapes)
    assert set(verdicts) == {"study.loops_help_reasoning", "study.loops_hurt_knowledge"}
    gain, fall = verdicts["study.loops_help_reasoning"][1], verdicts["study.loops_hurt_knowledge"][1]
    assert 0.2 < gain.value < 0.4 and gain.lo > 0 and -0.4 < fall.value < -0.2 and fall.hi < 0
    claims = looplm_grid.study_claims(verdicts, _claim)
    assert [c["id"] for c in claims[2:]] == list(looplm_grid.STUDY_CLAIMS_NEEDING_GRID)
    assert all(c["ours"] == "not run at this profile" for c in claims[2:])
    assert looplm_grid.first_finding({"agrees": True, "note": ""}, {"agrees": True, "note": ""}).startswith(
        "Past the horizon, reasoning rose")


def test_allocations_of_one_core_decide_the_allocation_claims():
    """Four allocations of matched depth: the balanced and the extreme core are found by s / K, the coda-heavy and
    prelude-heavy pair by their shared core; every allocation claim gets an effect."""
    shapes = {"1+2x2+1": (1, 2, 2, 1), "2+1x2+1": (2, 1, 2, 1), "1+1x2+2": (1, 1, 2, 2), "1+8x2+0": (1, 8, 2, 0)}
    grid, _ = _grid(0.0, shapes)
    curves = {(t, c): grid.curve(t, "1+2x2+1", c, LOOPS) for t in ("kinship", "knowledge")
              for c in ("carry_last", "infiloop")}
    verdicts = looplm_grid.study_verdicts(grid, curves, LOOPS, "1+2x2+1", ["carry_last", "infiloop"], shapes)
    assert {"study.balanced_allocation_extrapolates", "study.coda_protects_knowledge",
            "study.prelude_helps_reasoning"} <= set(verdicts)
    assert "balanced 1+2x2+1 vs extreme 1+8x2+0" in verdicts["study.balanced_allocation_extrapolates"][0]
    assert "coda-heavy 1+1x2+2 vs prelude-heavy 2+1x2+1" in verdicts["study.coda_protects_knowledge"][0]
