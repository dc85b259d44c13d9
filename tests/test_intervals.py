"""Intervals over seeds and puzzles (infiloop/analysis/intervals.py), the rule that turns them into verdicts, the
coverage simulation that chose the method (infiloop/analysis/coverage.py), and the per-puzzle terms they resample."""


import numpy as np
import pytest

from infiloop.analysis import coverage, intervals
from infiloop.analysis import trajectories as analysis
from infiloop.analysis.intervals import Interval, bootstrap, interval, outcome, verdict, verdict_note
from infiloop.analysis.quantiles import binomial_interval, t_quantile


def trajectory(rng, k=40, p=120, solve_rate=0.7, lose_rate=0.2):
    """A trajectory recorded at every update: puzzles solve at a random update, some are lost again."""
    fs = np.where(rng.random(p) < solve_rate, rng.integers(1, k, p), -1).astype(np.int32)
    updates = np.arange(1, k + 1, dtype=np.int32)
    correct = (fs > 0)[None, :] & (updates[:, None] >= fs[None, :])
    lost_at = np.where(rng.random(p) < lose_rate, rng.integers(1, k + 1, p), k + 1)
    correct &= updates[:, None] < np.maximum(lost_at, fs + 1)[None, :]
    return {"updates": updates, "correct": correct, "first_solve": fs,
            "state_change": rng.random((k, p)).astype(np.float32) * 0.1}


def test_terms_reproduce_the_statistics_they_stand_for_in_float64():
    t = trajectory(np.random.default_rng(0))
    one = lambda terms: bootstrap([[terms]], replicates=1).value  # noqa: E731
    assert np.allclose(one(analysis.accuracy_terms(t)), analysis.exact_by_depth(t)[1], rtol=0, atol=1e-15)
    assert one(analysis.lost_terms(t)) == pytest.approx(analysis.lost_after_solve(t), abs=1e-15)
    assert one(analysis.state_change_terms(t)) == pytest.approx(analysis.state_change_after_solve(t), abs=1e-12)
    # by depth: at update k, the solved-by-k puzzles that are wrong at k, counted directly
    num, den = analysis.lost_by_depth_terms(t)
    k = 25
    solved = (t["first_solve"] > 0) & (t["first_solve"] <= k)
    assert num[k - 1].sum() / den[k - 1].sum() == pytest.approx((~t["correct"][k - 1][solved]).mean())
    num, den = analysis.state_change_by_depth_terms(t)
    before = (t["first_solve"] > 0) & (t["first_solve"] < k)
    assert num[k - 1].sum() / den[k - 1].sum() == pytest.approx(t["state_change"][k - 1][before].mean(), rel=1e-6)


def test_one_seed_interval_matches_the_binomial_interval():
    rng = np.random.default_rng(1)
    p, n = 0.7, 2000
    x = rng.random(n) < p
    iv = bootstrap([[(x, np.ones(n))]], replicates=2000)
    half = 1.96 * np.sqrt(x.mean() * (1 - x.mean()) / n)
    assert iv.value == pytest.approx(x.mean())
    assert iv.lo == pytest.approx(x.mean() - half, abs=0.004) and iv.hi == pytest.approx(x.mean() + half, abs=0.004)
    assert "one seed" in iv.method and iv.seeds == 1 and iv.puzzles == n


def test_t_quantiles_and_exact_binomial_bounds_match_their_tables():
    assert t_quantile(0.975, 2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-6)
    assert t_quantile(0.975, 1) == pytest.approx(12.706205, abs=1e-6)
    assert t_quantile(0.975, float("inf")) == pytest.approx(1.959964, abs=1e-6)
    assert t_quantile(0.025, 5) == pytest.approx(-2.570582, abs=1e-6)
    assert binomial_interval(0, 10) == pytest.approx((0.0, 0.308497), abs=1e-6)
    assert binomial_interval(5, 10) == pytest.approx((0.187086, 0.812914), abs=1e-6)
    assert binomial_interval(10, 10)[0] == pytest.approx(0.691503, abs=1e-6)
    # with 3 seeds the interval is a t interval with about 2 degrees of freedom, not a normal one
    rng = np.random.default_rng(0)
    per_seed = [[(rng.random(200) < m, np.ones(200))] for m in (0.4, 0.6, 0.8)]
    iv = interval(per_seed, vectorized=True)
    assert 2 <= iv.df < 3 and (iv.hi - iv.lo) / 2 > 3.5 * np.std([0.4, 0.6, 0.8], ddof=1) / np.sqrt(3)


def test_crossed_seeds_share_their_puzzle_draw():
    """Three seeds that solve exactly the same puzzles carry no more information about the puzzles than one: with
    the same puzzle draw for every seed (the crossed design) the interval is the one-seed interval; resampled as if
    nested (a draw per seed) it would shrink by about √3."""
    rng = np.random.default_rng(8)
    x = rng.random(300) < 0.6
    one = interval([[(x, np.ones(300))]], vectorized=True)
    three = interval([[(x, np.ones(300))]] * 3, vectorized=True)
    assert three.value == one.value and three.crossed
    assert three.hi - three.lo == pytest.approx(one.hi - one.lo, rel=0.03)
    nested = interval([[(x, np.ones(300))], [(x, np.ones(300))], [(x, np.ones(301)[:300])]], vectorized=True)
    assert nested.hi - nested.lo == pytest.approx(one.hi - one.lo, rel=0.03)  # same sizes: still crossed
    short = interval([[(x, np.ones(300))], [(x[:299], np.ones(299))]], vectorized=True)
    assert not short.crossed and "drawn per seed" in short.method


def test_seeds_are_resampled_so_their_spread_widens_the_interval():
    rng = np.random.default_rng(2)
    n = 4000
    seeds = [[(rng.random(n) < m, np.ones(n))] for m in (0.3, 0.5, 0.7)]
    iv = bootstrap(seeds, replicates=1000)
    one = bootstrap(seeds[1:2], replicates=1000)
    assert iv.value == pytest.approx(0.5, abs=0.02)
    assert iv.hi - iv.lo > 0.2 > 5 * (one.hi - one.lo)  # seed spread dominates puzzle sampling
    assert iv.lo < 0.4 and iv.hi > 0.6
    assert "seeds and test puzzles" in iv.method
    items = bootstrap(seeds, replicates=10, items="items")  # the looped decoder's test items are texts
    assert f"seeds and test items; 3 seed(s), {n} items each" in items.method and "puzzle" not in items.method
    curve = bootstrap([[(np.stack([f, f]), np.ones((2, n)))] for [(f, _)] in seeds], replicates=10, items="items")
    assert "items each" in curve.point(1).method


def test_two_models_on_the_same_puzzles_are_resampled_as_pairs():
    rng = np.random.default_rng(3)
    x = rng.random(300) < 0.6
    same = bootstrap([[(x, np.ones(300)), (x, np.ones(300))]], combine=lambda r: r[0] - r[1], replicates=500)
    # every paired resample gives exactly 0 (unpaired draws would give a wide interval around 0): only the exact bound
    # on the share of the 300 puzzles that could differ widens it
    assert same.value == 0.0 and same.hi == -same.lo == pytest.approx(binomial_interval(0, 300)[1])
    better = x | (rng.random(300) < 0.3)  # B solves everything A solves, and more
    gain = bootstrap([[(better, np.ones(300)), (x, np.ones(300))]], combine=lambda r: r[0] - r[1], replicates=500)
    assert gain.lo > 0 and verdict(gain) is True and verdict(gain, side=-1) is False


def test_curves_get_an_interval_per_update():
    t = trajectory(np.random.default_rng(4), lose_rate=0.5)
    curve = bootstrap([[analysis.accuracy_terms(t)]], replicates=300)
    assert curve.value.shape == curve.lo.shape == (40,) and np.all(curve.lo <= curve.value + 1e-12)
    p = curve.point(10)
    assert (p.value, p.lo, p.hi) == (curve.value[10], curve.lo[10], curve.hi[10]) and p.seeds == 1
    fast = interval([[analysis.accuracy_terms(t)]], replicates=300, vectorized=True)
    assert np.allclose(fast.value, curve.value) and np.allclose(fast.hi - fast.lo, curve.hi - curve.lo, rtol=0.2)


def test_verdict_rule_on_planted_intervals():
    """intervals.RULE, case by case: planted intervals on each side of each boundary (zero and half the paper's effect;
    the effect in its own units; the paper's effect +0.2 unless said, so its half is 0.1)."""
    iv = lambda lo, hi: Interval((lo + hi) / 2, lo, hi, 3, 100)  # noqa: E731
    eps = 1e-9
    # the lower bound against zero, the upper bound against half the paper's effect: four cells and their edges
    assert outcome(iv(0.01, 0.15), 0.2) == "agrees"  # above zero, reaching half the paper's effect
    assert outcome(iv(0.01, 0.1), 0.2) == "agrees"  # exactly at half is not below it
    assert outcome(iv(0.01, 0.1 - eps), 0.2) == "smaller"  # above zero, wholly under half: the paper's direction
    assert outcome(iv(0.01, 0.05), 0.2) == "smaller"
    assert outcome(iv(eps, 0.05), 0.2) == "smaller" and outcome(iv(0.0, 0.05), 0.2) == "differs"  # zero is not above
    assert outcome(iv(-0.05, 0.09), 0.2) == "differs"  # holds zero, below half the paper's 0.2
    assert outcome(iv(0.0, 0.0), 0.2) == "differs"  # at zero, ruling the paper's effect out
    assert outcome(iv(-0.05, -0.01), 0.2) == "differs"  # the other side
    assert outcome(iv(-0.05, 0.15), 0.2) == "undecided"  # holds zero and half the paper's effect
    assert outcome(iv(-0.05, 0.1), 0.2) == "undecided"  # exactly at the threshold is not below it
    assert outcome(iv(-eps, 0.15), 0.2) == "undecided" and outcome(iv(eps, 0.15), 0.2) == "agrees"
    # verdict(): True only for agrees, False only for differs
    assert verdict(iv(0.01, 0.15), 0.2) is True and verdict(iv(0.01, 0.05), 0.2) is None
    assert verdict(iv(-0.05, 0.09), 0.2) is False and verdict(iv(-0.05, 0.15), 0.2) is None
    # no paper number: zero is the only boundary, and nothing reads smaller
    assert outcome(iv(-0.05, -0.01)) == "differs" and outcome(iv(-0.01, 0.05)) == "undecided"
    assert outcome(iv(0.01, 0.05)) == "agrees" and outcome(iv(eps, eps)) == "agrees"
    assert outcome(iv(-0.05, -eps)) == "differs" and outcome(iv(-0.05, 0.0)) == "undecided"
    # a paper effect that is a fall (negative): oriented so that the fall is positive (half of it: 0.05)
    assert outcome(iv(-0.09, -0.01), -0.1) == "agrees"
    assert outcome(iv(-0.04, -0.01), -0.1) == "smaller"  # falls, by at most 0.04 < 0.05
    assert outcome(iv(-0.04, 0.02), -0.1) == "differs"  # the fall is at most 0.04 < 0.05 and may be none
    assert outcome(iv(-0.06, 0.02), -0.1) == "undecided"
    assert outcome(iv(-0.05, -0.01), side=-1) == "agrees" and outcome(iv(0.01, 0.05), side=-1) == "differs"
    # a claim that something does not happen: the loss against half the paper's contrast (0.15 -> 0.075)
    assert outcome(iv(0.0, 0.007), 0.15, absence=True) == "agrees"
    assert outcome(iv(0.0, 0.075 - eps), 0.15, absence=True) == "agrees"
    assert outcome(iv(0.0, 0.075), 0.15, absence=True) == "undecided"
    assert outcome(iv(0.075 + eps, 0.2), 0.15, absence=True) == "differs"
    assert outcome(iv(0.075, 0.2), 0.15, absence=True) == "undecided"
    assert outcome(iv(0.05, 0.1), 0.15, absence=True) == "undecided"
    assert outcome(iv(float("nan"), float("nan")), 0.2) == "undecided"
    assert verdict_note(iv(0.01, 0.05), "gain").startswith("gain: +3.0 points [+1.0, +5.0] (agrees; 95 % t interval "
                                                           "over seeds and test puzzles; 3 seed(s), 100 puzzles each")
    assert "(smaller; " in verdict_note(iv(0.01, 0.05), "gain", paper=20.0)
    assert verdict_note(iv(float("nan"), float("nan")), "gain").endswith("undefined (no puzzle to measure it on, "
                                                                         "e.g. none solved); undecided")
    assert "A claim that something does not happen" in intervals.RULE and "**smaller**" in intervals.RULE
    assert "no adjustment for multiplicity" in intervals.multiplicity(3)


def test_coverage_at_three_seeds_in_a_small_simulation():
    """The method covers the true effect at its nominal level with three seeds spread as `search`'s (carry-last
    47.7–78.9 % over its seeds): the issue's target, at least 93 % and at most 3.5 % false verdicts each way. The
    earlier two-level percentile bootstrap covered 84 % here (docs/statistics.md); a t interval without the
    puzzles' variance, or a normal one, would fall short as well. About 3 s."""
    null = coverage.simulate(coverage.project_interval, 3, 256, 0.0, "search", n=800, replicates=200, seed=1)
    real = coverage.simulate(coverage.project_interval, 3, 256, 0.05, "search", n=800, replicates=200, seed=2)
    assert null.covers >= 0.93 and null.above <= 0.035 and null.below <= 0.035, null
    assert real.covers >= 0.93 and real.below <= 0.035 and real.above > 0.08, real  # and it finds the effect at times


def test_monte_carlo_error_of_the_bounds_is_small_and_reported():
    flags = coverage.draw(np.random.default_rng(7), 3, 256, 0.05, "search")
    ones = np.ones(256)
    per_seed = [[(flags[1, s], ones), (flags[0, s], ones)] for s in range(3)]
    runs = [interval(per_seed, lambda q: q[0] - q[1], seed=k, vectorized=True) for k in range(6)]
    assert all(iv.mc_error < intervals.MC_TOLERANCE for iv in runs)
    assert np.std([iv.lo for iv in runs], ddof=1) < 0.001  # under 0.1 points from one resampling seed to another
    assert "Monte-Carlo error of the bounds" in runs[0].method and runs[0].replicates >= intervals.MIN_REPLICATES


def test_undefined_seeds_and_resamples_are_counted_not_dropped():
    rng = np.random.default_rng(9)
    solved = [rng.random(40) < 0.5, np.zeros(40, bool), np.eye(1, 40, 3, dtype=bool)[0]]  # none solved; one solved
    per_seed = [[(s & (rng.random(40) < 0.3), s)] for s in solved]  # lost among solved
    iv = interval(per_seed, replicates=500, vectorized=True)
    assert iv.seeds == 2 and iv.undefined_seeds == 1  # the seed with nothing solved is left out, and counted
    assert 100 < iv.undefined_replicates < 300  # its one solved puzzle is not drawn in about (39/40)^40 = 36 %
    assert "1 of 3 seeds undefined" in iv.method
    assert f"{iv.undefined_replicates} of 500 resamples undefined" in iv.method
    empty = interval([[(np.zeros(5), np.zeros(5))]], replicates=50)
    assert empty.value != empty.value and empty.lo != empty.lo and empty.undefined_seeds == 1


def test_exact_bounds_are_contained_and_the_range_clips():
    x = [np.zeros(200, bool)] * 3  # nothing lost: every resample gives 0
    per_seed = [[(f, np.ones(200))] for f in x]
    bare = interval(per_seed, vectorized=True)
    lo, hi = binomial_interval(0, 600)
    assert bare.value == 0.0 and bare.hi == -bare.lo == pytest.approx(hi)  # widened: none of 600 pairs could differ
    assert "the exact bound on the share of the 600 puzzle-seed pairs that could differ" in bare.method
    widened = interval(per_seed, vectorized=True, exact=(lo, hi, "0 of 600"), bounds=(0.0, 1.0))
    assert (widened.lo, widened.hi) == (0.0, pytest.approx(hi)) and "widened to contain 0 of 600" in widened.method


def test_a_combine_declared_vectorized_must_act_on_each_resample_alone():
    rng = np.random.default_rng(10)
    per_seed = [[(rng.random((4, 30)) < 0.5, np.ones((4, 30)))] for _ in range(2)]
    with pytest.raises(ValueError, match="declared vectorized"):
        interval(per_seed, lambda q: np.nanmax(q[0]) - q[0][-1], vectorized=True)  # max over every resample
    ok = interval(per_seed, lambda q: q[0][1] - q[0][-1], vectorized=True, replicates=100)
    slow = interval(per_seed, lambda q: q[0][1] - q[0][-1], replicates=100)
    assert ok.value == slow.value


def test_quantities_of_one_seed_must_share_their_puzzles():
    with pytest.raises(ValueError, match="seed 0's quantities are not over the same puzzles"):
        bootstrap([[(np.ones(5), np.ones(5)), (np.ones(6), np.ones(6))]])


def test_gamma_phase_terms_match_an_explicit_loop_over_puzzles():
    rng = np.random.default_rng(3)
    t = trajectory(rng, k=50, p=60)
    t["gamma_outer"] = rng.random((50, 60)).astype(np.float32)
    terms = analysis.gamma_phase_terms(t, "outer", search=4, settle=3)
    pooled = {k: [] for k in ("search", "solve", "after", "unsolved")}
    for p, fs in enumerate(t["first_solve"]):
        for row, u in enumerate(t["updates"]):
            g = float(t["gamma_outer"][row, p])
            if fs <= 0:
                pooled["unsolved"].append(g)
            elif fs - 4 <= u < fs:
                pooled["search"].append(g)
            elif u == fs:
                pooled["solve"].append(g)
            elif fs + 3 <= u <= fs + 9:
                pooled["after"].append(g)
    phases = analysis.gamma_phases(t, "outer", 4, 3)
    for k, values in pooled.items():
        num, den = terms[k]
        assert den.sum() == len(values)
        assert phases[k] == pytest.approx(np.mean(values), abs=1e-12)
        assert bootstrap([[terms[k]]], replicates=1).value == pytest.approx(np.mean(values), abs=1e-12)


def test_score_terms_give_the_mean_score_at_each_count_of_wrong_cells():
    rng = np.random.default_rng(4)
    t = {"score_outer": rng.normal(size=(30, 20)), "wrong_cells_candidate": rng.integers(0, 5, (30, 20)),
         "wrong_cells": np.zeros((30, 20), dtype=np.int64)}
    bins, sums, counts = analysis.score_terms(t)
    assert list(bins) == [0, 1, 2, 3, 4]
    for i, v in enumerate(bins):
        hit = t["wrong_cells_candidate"] == v
        assert counts[i].sum() == hit.sum()
        assert sums[i].sum() / counts[i].sum() == pytest.approx(t["score_outer"][hit].mean(), abs=1e-12)
    # a score that falls with the wrong cells has rank correlation -1 and an interval below zero
    t["score_outer"] = 5.0 - 2.0 * t["wrong_cells_candidate"] + 0.01 * rng.normal(size=(30, 20))
    bins, sums, counts = analysis.score_terms(t)
    iv = bootstrap([[(sums, counts)]], combine=lambda q: analysis.rank_correlation(bins.astype(float), q[0]))
    assert iv.value == pytest.approx(-1.0) and iv.hi < 0 and verdict(iv, side=-1) is True


def test_score_terms_on_a_common_grid_of_wrong_cells_pool_several_seeds():
    rng = np.random.default_rng(5)
    seeds = []
    for top in (3, 6):  # the second seed reaches more wrong cells than the first
        seeds.append({"score_outer": rng.normal(size=(20, 15)), "wrong_cells_candidate": rng.integers(0, top, (20, 15)),
                      "wrong_cells": np.zeros((20, 15), dtype=np.int64)})
    bins = np.unique(np.concatenate([analysis.score_terms(t)[0] for t in seeds]))
    assert list(bins) == [0, 1, 2, 3, 4, 5]
    own, sums, counts = analysis.score_terms(seeds[0], bins=bins)
    assert list(own) == list(bins) and counts[3:].sum() == 0  # counts the first seed never reaches: no samples
    b0, s0, c0 = analysis.score_terms(seeds[0])
    np.testing.assert_array_equal(sums[:3], s0)
    np.testing.assert_array_equal(counts[:3], c0)
    # the mean over seeds of each seed's mean score at a count (NaN where a seed has none is left out)
    iv = bootstrap([[analysis.score_terms(t, bins=bins)[1:]] for t in seeds], replicates=1, combine=lambda q: q[0])
    for i, v in enumerate(bins):
        means = [t["score_outer"][t["wrong_cells_candidate"] == v].mean() for t in seeds
                 if (t["wrong_cells_candidate"] == v).any()]
        assert iv.value[i] == pytest.approx(np.mean(means), abs=1e-12)


def test_a_constant_ratio_carries_a_per_seed_constant_through_the_bootstrap():
    # notebook 03 compares each seed's gamma with its own baseline 1 - beta by passing the baseline as the
    # ratio (c * ones, ones): every resampling of the puzzles leaves it exactly c
    rng = np.random.default_rng(6)
    per_seed = []
    for c in (0.3, 0.5, 0.7):
        g = rng.random(40)
        per_seed.append([(g, np.ones(40)), (c * np.ones(40), np.ones(40))])
    iv = bootstrap(per_seed, combine=lambda q: q[1] - q[0], replicates=200)
    expected = np.mean([c - s[0][0].mean() for c, s in zip((0.3, 0.5, 0.7), per_seed)])
    assert iv.value == pytest.approx(expected, abs=1e-12)
    const = bootstrap(per_seed, combine=lambda q: q[1], replicates=200)
    # no puzzle variance: the t interval over the three seeds, 0.5 ± t(2 df) x 0.2 / √3
    half = t_quantile(0.975, 2) * 0.2 / np.sqrt(3)
    assert const.value == pytest.approx(0.5) and const.seeds == 3
    assert (const.lo, const.hi) == (pytest.approx(0.5 - half), pytest.approx(0.5 + half))


def test_rank_correlation_against_hand_computed_values():
    assert analysis.rank_correlation(np.array([1.0, 2, 3, 4]), np.array([10.0, 20, 30, 40])) == pytest.approx(1.0)
    assert analysis.rank_correlation(np.array([1.0, 2, 3, 4]), np.array([4.0, 3, 2, 1])) == pytest.approx(-1.0)
    # ties share their mean rank: ranks (0, 1.5, 1.5, 3) against (0, 1, 2, 3)
    rx, ry = np.array([0, 1.5, 1.5, 3]), np.arange(4.0)
    expected = np.corrcoef(rx, ry)[0, 1]
    assert analysis.rank_correlation(np.array([1.0, 2, 2, 3]), np.array([1.0, 2, 3, 4])) == pytest.approx(expected)
    # entries that are not finite are left out; fewer than 3 left is undefined
    assert analysis.rank_correlation(np.array([1.0, 2, np.nan, 4]), np.array([1.0, 2, 3, 5])) == pytest.approx(1.0)
    assert np.isnan(analysis.rank_correlation(np.array([1.0, np.nan]), np.array([1.0, 2])))


def test_verdict_note_reads_the_paper_side_and_the_precision_asked_for():
    iv = Interval(-0.15, -0.27, -0.03, seeds=1, puzzles=10, replicates=100)
    assert verdict_note(iv, "rank correlation", 1.0, "", 2, side=-1).startswith(
        "rank correlation: -0.15 [-0.27, -0.03] (agrees;")
    assert "(differs;" in verdict_note(iv, "rank correlation", 1.0, "", 2)


def test_paired_effect_resamples_every_model_with_the_same_puzzles():
    from infiloop.analysis.intervals import paired_effect

    rng = np.random.default_rng(5)
    a = rng.random(200) < 0.8
    b = a.copy()
    b[np.flatnonzero(a)[:30]] = False  # b misses 30 of a's puzzles and solves nothing a does not
    agrees, note = paired_effect({"a": a, "b": b}, ["a", "b"], lambda q: q[0] - q[1], "a − b")
    assert agrees is True and note.startswith("a − b: +15.0 points [")
    # identical models: exactly zero in every replicate, widened to the exact bound on 0 of 200 differing, undecided
    agrees, note = paired_effect({"a": a, "c": a.copy()}, ["a", "c"], lambda q: q[0] - q[1], "a − c")
    assert agrees is None and "+0.0 points [-1.8, +1.8]" in note


def test_perturbation_terms_give_the_retention_of_each_eps():
    rng = np.random.default_rng(7)
    out = {"eps": np.array([0.0, 1e-3, 0.3]), "solved_at": rng.random(50) < 0.6,
           "correct": rng.random((3, 10, 50)) < 0.8}
    terms = analysis.perturbation_terms(out)
    retention = analysis.perturbation_retention(out)
    for i, e in enumerate(out["eps"]):
        kept = [p for p in range(50) if out["solved_at"][p] and out["correct"][i, -1, p]]
        expected = len(kept) / out["solved_at"].sum()
        assert retention[float(e)] == pytest.approx(expected, abs=1e-12)
        assert bootstrap([terms], combine=lambda q, i=i: q[i], replicates=1).value == pytest.approx(expected, abs=1e-12)


def _unmoved(builder, seeds: int, rng):
    """Data on which no seed and no resample of the puzzles moves ``builder``'s statistic (the models agree on every
    puzzle, or lose everything they solved, or a γ is the same constant everywhere): its interval, by the usual
    variance estimate, has zero width."""
    from infiloop.analysis import claims
    from infiloop.analysis import trajectories as traj_terms

    p = 60
    flags = [rng.random(p) < 0.5 for _ in range(seeds)]
    other = [rng.random(p) < 0.5 for _ in range(seeds)]
    if builder is claims.difference:
        return builder([(x, x) for x in flags])
    if builder is claims.lead_over_best:
        return builder([[x, x, x] for x in flags])
    if builder is claims.difference_of_changes:
        return builder([(x, x, y, y) for x, y in zip(flags, other)])
    if builder is claims.change_over_best:
        return builder([[x, x, y, y, x, x] for x, y in zip(flags, other)])
    if builder is claims.gain_by_subset:
        return builder([(x, x) for x in flags], [np.arange(p) < p // 2] * seeds)
    if builder is claims.held_out_fall:  # every puzzle keeps its first answer at every update
        return builder([np.repeat(x[None], 8, 0) for x in flags])
    if builder is claims.ratio_difference:  # both lose every instance they solved (notebook 09's +0.0 [+0.0, +0.0])
        return builder([((x * 1.0, x * 1.0), (y * 1.0, y * 1.0)) for x, y in zip(flags, other)], bounds=(-1.0, 1.0))
    if builder is claims.proportion:  # nothing lost
        return builder([np.zeros(p, bool)] * seeds, flags)
    if builder is claims.share:  # every instance solved is lost, on every seed (notebook 09's InfiLoop)
        return builder([(x * 1.0, x * 1.0) for x in flags])
    if builder is claims.phase_contrast:  # the same γ in every phase, puzzle and seed
        ones = np.ones(p)
        return builder([[(0.7 * ones, ones), (0.7 * ones, ones), (0.7 * ones, ones), (0.7 * ones, ones),
                         (0.3 * ones, ones)]] * seeds, "below")
    if builder is claims.score_separation:  # every right candidate scores above every wrong one
        wrong = [rng.integers(0, 3, (10, p)) for _ in range(seeds)]
        return builder([traj_terms.separation_terms({"score_outer": np.where(w == 0, 5.0, -1.0),
                                                     "wrong_cells_candidate": w}) for w in wrong])
    raise AssertionError(f"no unmoved case for {builder.__name__}: add one")


@pytest.mark.parametrize("seeds", [1, 2, 3])
def test_no_builder_gives_an_interval_of_zero_width(seeds):
    """Every claim builder (claims.BUILDERS) and the analysis modules' other intervals, on data that nothing moves, with
    one, two or three seeds: the interval is widened to the exact bound on the share of the item-seed pairs that could
    differ, never [x, x] (notebook 09 recorded +0.0 [+0.0, +0.0] points on two seeds)."""
    from infiloop.analysis import claims, diagnosis, overthinking

    rng = np.random.default_rng(seeds)
    built = {b.__name__: _unmoved(b, seeds, rng) for b in set(claims.BUILDERS.values())}
    trajs = []
    for _ in range(seeds):  # solved at update 3 and lost at 5, every instance: every read is 100 % lost
        correct = np.zeros((40, 30), bool)
        correct[2:4] = True
        trajs.append({"updates": np.arange(1, 41), "correct": correct, "first_solve": np.full(30, 3, np.int32),
                      "state_change": np.zeros((40, 30), np.float32)})
    built |= {"over_seeds": intervals.over_seeds(trajs, analysis.accuracy_terms, 200, bounds=intervals.SHARE),
              "lost_contrast": overthinking.lost_contrast(trajs, trajs),
              "window_contrast": overthinking.window_contrast(trajs, trajs, 4),
              "fall_contrast": overthinking.fall_contrast(trajs, trajs),
              "perturbation_cost": claims.perturbation_cost(*[[np.ones(30, bool)] * seeds] * 3),
              "diagnosis": diagnosis._interval([[analysis.lost_terms(t)] for t in trajs])}
    for name, iv in built.items():
        lo, hi, value = (np.atleast_1d(np.asarray(x, np.float64)) for x in (iv.lo, iv.hi, iv.value))
        ok = np.isfinite(value)
        assert ok.any() and np.all(hi[ok] > lo[ok]), (name, iv.lo, iv.hi)
        assert np.all((lo[ok] <= value[ok]) & (value[ok] <= hi[ok])), name
        assert "no resample moved it" in iv.method or iv.exact, name  # and it says why
    # the widening is the exact bound of 0 of the pooled pairs: 2 seeds of 30 lost-and-solved instances, 60 pairs
    if seeds == 2:
        assert built["lost_contrast"].hi == pytest.approx(binomial_interval(0, 60)[1])
        assert built["lost_contrast"].lo == -built["lost_contrast"].hi


def _auroc(right: np.ndarray, wrong: np.ndarray) -> float:
    """P(a right candidate scores above a wrong one) + ½ P(tie), by counting every pair."""
    d = right[:, None] - wrong[None, :]
    return float((d > 0).mean() + 0.5 * (d == 0).mean())


def test_separation_terms_give_the_auroc_of_the_score_by_counting_every_pair():
    rng = np.random.default_rng(12)
    wrong = rng.integers(0, 4, (15, 25))
    score = np.round(2.0 - 0.5 * wrong + rng.normal(0, 1.0, wrong.shape), 1)  # rounded: ties occur
    t = {"score_outer": score, "wrong_cells_candidate": wrong, "wrong_cells": np.zeros_like(wrong)}
    (vr, nr), (vw, nw), (auc, ones) = analysis.separation_terms(t)
    expected = _auroc(score[wrong == 0], score[wrong > 0])
    assert 0.6 < expected < 0.95 and (score[wrong == 0][:, None] == score[wrong > 0][None]).any()  # ties present
    assert auc[0] == pytest.approx(expected, abs=1e-12) and np.all(auc == auc[0]) and np.all(ones == 1)
    assert vr.sum() / nr.sum() == pytest.approx(expected, abs=1e-12)  # mean placement of the right candidates
    assert vw.sum() / nw.sum() == pytest.approx(expected, abs=1e-12)  # and of the wrong ones
    assert nr.sum() == (wrong == 0).sum() and nw.sum() == (wrong > 0).sum()
    from infiloop.analysis import claims

    iv = claims.score_separation([analysis.separation_terms(t)])
    assert iv.value == pytest.approx(expected - 0.5, abs=1e-12) and iv.lo < iv.value < iv.hi
    none_right = {**t, "wrong_cells_candidate": wrong + 1}
    assert claims.score_separation([analysis.separation_terms(none_right)]).value != iv.value  # undefined: NaN


def test_the_separation_interval_matches_a_bootstrap_of_the_exact_auroc():
    """The interval resamples the first-order (DeLong) expansion of the AUROC, not the AUROC: on one seed its width
    is that of a direct bootstrap of the puzzles that recomputes the AUROC from every pair in each resample (the
    puzzles' candidates drawn together)."""
    from infiloop.analysis import claims

    rng = np.random.default_rng(13)
    p = 150
    skill = rng.normal(0, 1, p)  # a puzzle effect shared by its candidates: they are not independent
    wrong = (rng.random((12, p)) < 0.5 + 0.3 * np.tanh(skill)).astype(int) * rng.integers(1, 5, (12, p))
    score = 1.0 * (wrong == 0) + 0.8 * skill + rng.normal(0, 1.0, (12, p))
    t = {"score_outer": score, "wrong_cells_candidate": wrong}
    iv = claims.score_separation([analysis.separation_terms(t)])
    direct = []
    for _ in range(1500):
        pick = rng.integers(0, p, p)
        s, w = score[:, pick], wrong[:, pick]
        direct.append(_auroc(s[w == 0], s[w > 0]) - 0.5)
    lo, hi = np.percentile(direct, [2.5, 97.5])
    assert iv.value == pytest.approx(np.mean(direct), abs=0.01)
    assert (iv.hi - iv.lo) == pytest.approx(hi - lo, rel=0.08)


def test_score_medians_stand_where_the_papers_stand_on_its_board():
    """The paper's medians are by wrong cells of 81-cell boards (0, 20, 33); ours are read at the same shares of our
    board (36 cells: 0, 9 and 15), or at the nearest count above 0 that occurs, and never at 0 for a wrong board."""
    from infiloop.analysis import gamma_figures

    rng = np.random.default_rng(14)
    wrong = rng.choice([0, 3, 9, 14, 20], (30, 40))
    by_seed = {s: {"score_outer": 10.0 - wrong + rng.normal(0, 1, wrong.shape), "wrong_cells_candidate": wrong}
               for s in (0, 1)}
    rows = gamma_figures.score_medians(by_seed, 36)
    pooled_s = np.concatenate([t["score_outer"].ravel() for t in by_seed.values()])
    pooled_w = np.concatenate([t["wrong_cells_candidate"].ravel() for t in by_seed.values()])
    assert [r[:2] for r in rows] == [(0, 0), (9, 20), (14, 33)]  # 15 does not occur: 14 is nearest
    for ours, _, median, _ in rows:
        assert median == pytest.approx(np.median(pooled_s[pooled_w == ours]))
    assert [r[3] for r in rows] == [7.25, 2.75, -0.58]
    text = gamma_figures.score_medians_text(rows, 36)
    assert text.endswith("at 0 / 9 / 14 wrong cells of 36 (the paper: 7.25 / 2.75 / -0.58 at 0 / 20 / 33 of 81)")
    none_right = gamma_figures.score_medians({0: {**by_seed[0], "wrong_cells_candidate": wrong + 1}}, 36)
    assert none_right[0][0] == 0 and np.isnan(none_right[0][2])  # no right board: no median at 0


def test_the_verdict_rates_of_the_coverage_benchmark_run_as_documented(capsys):
    """`python benchmarks/interval_coverage.py --verdicts` (docs/statistics.md) runs as written, on a few simulated
    experiments: a row per true effect (zero, a third and all of the paper's +23.2), its verdict shares adding to
    100 %, and the paper's full effect never read as smaller."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "interval_coverage.py"
    spec = importlib.util.spec_from_file_location("interval_coverage", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--verdicts", "--n", "20"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| 21 |")]
    assert [r.split(" | ")[3] for r in rows] == ["+0.00 points", "+7.73 points", "+23.20 points"]
    for r in rows:
        shares = [float(x.rstrip(" %")) for x in r.split(" | ")[4:8]]
        assert sum(shares) == pytest.approx(100.0)
    assert float(rows[2].split(" | ")[5].rstrip(" %")) == 0.0  # the paper's full effect: never smaller


def test_kept_resample_counts_are_the_draws_and_leave_the_generator_where_drawing_would():
    """The resample counts are kept by generator state: a second interval from the same state gets the same counts,
    in the same memory layout (a BLAS product's rounding follows it), and its generator moves on as a draw would."""
    from infiloop.analysis.intervals import _DRAWN, _weights

    _DRAWN.clear()
    plain = np.random.default_rng(3)
    idx = plain.integers(0, 7, (11, 7)) + 7 * np.arange(11)[:, None]
    drawn = np.bincount(idx.ravel(), minlength=77).reshape(11, 7).T.astype(np.float64)
    after = plain.integers(0, 10 ** 9)
    for _ in range(2):  # drawn, then kept
        rng = np.random.default_rng(3)
        w = _weights(rng, 7, 11)
        assert np.array_equal(w, drawn) and w.strides == drawn.strides and rng.integers(0, 10 ** 9) == after
    assert len(_DRAWN) == 1
