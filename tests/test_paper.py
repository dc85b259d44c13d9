"""The paper's numbers (infiloop.analysis.paper) checked against the sources they were typed from: the paper's
summaries in ``../shared/seeds/`` (read when present, else skipped), and structure."""

import re
from pathlib import Path

import pytest

from infiloop.analysis import paper

SHARED = Path(__file__).resolve().parents[2] / "shared"
SEEDS = sorted((SHARED / "seeds").glob("*.txt")) if (SHARED / "seeds").is_dir() else []
needs_sources = pytest.mark.skipif(not SEEDS, reason="the paper's summaries (../shared/seeds) are not here")


def _seed_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in SEEDS)


def _numbers(text: str) -> set[float]:
    """Every number written in the text, including LaTeX powers of ten such as $10^{-4}$."""
    plain = {float(m.replace(",", "")) for m in re.findall(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?", text)}
    return plain | {10.0 ** int(e) for e in re.findall(r"10\^\{?(-?\d+)\}?", text)}


@needs_sources
def test_table1_against_the_sources():
    """The paper's own rows of Table 1 (TRM, FPRM, InfiLoop) appear in the summaries; the ARC-AGI-2 4.6 % is
    the public checkpoint's, not the authors' retrained TRM's."""
    seeds = _seed_text()
    seed_numbers = _numbers(seeds)
    for model in ("TRM", "FPRM", "InfiLoop"):
        row = paper.TABLE1_BY_CONNECTION[{"TRM": "carry_last", "FPRM": "fprm", "InfiLoop": "infiloop"}[model]]
        for col in paper.TABLE1_COLUMNS:
            assert getattr(row, col) in seed_numbers, (model, col)
    checkpoint = next(r for r in paper.TABLE1 if "checkpoint" in r.model)
    assert checkpoint.arc2 == 4.6 and checkpoint.sudoku is None
    assert "체크포인트" in seeds and "4.6%" in seeds  # the seed: the public ARC-AGI-2 checkpoint, 4.6 % pass@2
    retrained = next(r for r in paper.TABLE1 if "retrained" in r.model)
    assert retrained.sudoku == 73.6 and retrained.arc2 is None


@needs_sources
def test_reported_numbers_appear_in_the_seeds():
    """Every number of the depth, diagnosis, gamma, difficulty, ablation and perturbation records is one
    the paper's summaries state (a typo here would not be found in the seeds)."""
    seed_numbers = _numbers(_seed_text())

    def leaves(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from leaves(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from leaves(v)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            yield float(x)

    records = {"DEPTH_SCALING": [(p.layers, p.accuracy) for p in paper.DEPTH_SCALING],
               "FIG1A": [(p.layers, p.accuracy) for p in paper.FIG1A],
               "CARRY_LAST_DIAGNOSTICS": paper.CARRY_LAST_DIAGNOSTICS, "GAMMA": paper.GAMMA,
               "DIFFICULTY": paper.DIFFICULTY, "ABLATION_AXES": paper.ABLATION_AXES,
               "ABLATION_DECAY": paper.ABLATION_DECAY, "PERTURBATION": paper.PERTURBATION,
               "STUDY_NUMBERS": paper.STUDY_NUMBERS, "LOOPLM_EXTRAPOLATION": paper.LOOPLM_EXTRAPOLATION,
               "LOOPLM_NONLOOP": paper.LOOPLM_NONLOOP, "LOOPLM_CLUTRR_GAIN": paper.LOOPLM_CLUTRR_GAIN}
    allowed = {0.0, 20.0, 40.0}  # "none lost" is written in words; L(r) = 20 and 40 are the study's depths
    for name, rec in records.items():
        # signs may be in words ("fell by 1.25"), fractions in percent, 1.42 M as "142만" (10^4)
        missing = sorted({v for v in leaves(rec) if v not in allowed
                          and not {abs(v), v * 100, v / 1e6, v / 1e4} & seed_numbers})
        assert not missing, f"{name}: {missing} not found in the seeds"


@needs_sources
def test_the_looped_lm_claims_quote_the_study_word_for_word():
    """Every passage a notebook-08 claim quotes as the study's (between double quotes, "..." joining pieces) is in
    the study's summary, its LaTeX dollars aside."""
    text = _seed_text().replace("$", "")
    for c in paper.claims_for("08_looped_lm"):
        quotes = re.findall(r'"([^"]+)"', c.source)
        assert quotes, c.id
        for piece in (x.strip() for q in quotes for x in q.split("...")):
            assert piece in text, (c.id, piece)


def _row(model, params):
    return next(r for r in paper.TABLE1 if r.model == model and r.params == params)


def test_table1_structure():
    assert len(paper.TABLE1) == 14
    infiloop = _row("InfiLoop", "7M")
    assert (infiloop.sudoku, infiloop.maze, infiloop.arc1, infiloop.arc2) == (97.9, 87.4, 49.1, 13.6)
    assert _row("TRM", "7M").sudoku == 74.7
    assert _row("FPRM", "7M").arc2 == 6.2
    assert _row("Attractor Model", "27M").maze == 93.1
    gemini = _row("Gemini 2.5 Pro (32K)", None)
    assert gemini.sudoku is None and gemini.cell("sudoku") == "–"
    urm = _row("URM", "14M")
    assert urm.note == "pass@1 on ARC" and urm.cell("arc1") == "≥53.8" and urm.cell("sudoku") == "77.6"
    assert paper.TABLE1_BY_CONNECTION["infiloop"] is infiloop
    assert paper.TABLE1_BY_CONNECTION["carry_last"] is _row("TRM", "7M")
    assert all(r.source == "paper" for r in paper.TABLE1)


def test_depth_points_and_unit():
    assert paper.PAPER_LAYERS_PER_UPDATE == 26
    trm = [p for p in paper.DEPTH_SCALING if p.model == "TRM"]
    assert [(p.layers, p.updates, p.accuracy) for p in trm] == [(24_960, 960, 83.65)]
    infiloop = {p.updates: p.accuracy for p in paper.DEPTH_SCALING if p.model == "InfiLoop"}
    assert infiloop == {36: 86.5, 72: 90.9, 144: 92.4, 960: 92.74}
    peak = paper.FIG1A[0]
    assert (peak.model, peak.layers, peak.updates, peak.accuracy) == ("TRM", 468, 18, 62.2)
    with pytest.raises(ValueError):
        paper.updates_from_layers(100)


def test_other_numbers():
    assert paper.GAMMA["content_score_median"] == {0: 7.25, 20: 2.75, 33: -0.58}
    assert (paper.GAMMA["search_mean"], paper.GAMMA["at_solve"], paper.GAMMA["equal_weight_baseline"]) == \
        (0.40, 0.91, 0.56)
    assert paper.CARRY_LAST_DIAGNOSTICS["flipped_at_least_once_pct"] == {"TRM": 20.9, "InfiLoop": 2.4}
    assert paper.DIFFICULTY[-1] == {"blanks": "60", "InfiLoop": 59.5, "FPRM": 56.5, "TRM": 36.0}
    assert paper.ABLATION_AXES["both"] == {"H3L6": 82.1, "H32L6": 89.7}
    reverse = next(r for r in paper.ABLATION_DECAY if r["decay"] == "reverse")
    assert (reverse["beta"], reverse["H3L6"]) == (1.82, 2.0)
    assert paper.PERTURBATION["infiloop_retention_pct"] == 100.0


def test_claims_structure():
    ids = [c.id for c in paper.CLAIMS]
    assert len(ids) == len(set(ids)) == 33
    assert set(paper.CLAIMS_BY_ID) == set(ids)
    assert paper.NOTEBOOKS == ("01_main_table", "02_depth_scaling", "03_gamma_dynamics", "04_perturbation",
                               "05_beta0_ablation", "06_conditioning", "07_watch_the_loop", "08_looped_lm",
                               "09_overthinking")
    for c in paper.CLAIMS:
        assert c.notebook in paper.NOTEBOOKS, c
        assert c.claim and c.paper, c
        assert c.id.split(".")[0] in {"main", "depth", "diagnosis", "gamma", "perturb", "ablation", "study",
                                          "overthink"}, c
        assert (c.id.startswith("study.")) == c.paper.startswith(paper.STUDY), c  # whose number it is
    # every experiment notebook checks something; the animations only show
    assert {c.notebook for c in paper.CLAIMS} == set(paper.NOTEBOOKS) - set(paper.ILLUSTRATIONS)
    assert [c.id for c in paper.claims_for("04_perturbation")] == ["perturb.infiloop_retains",
                                                                    "perturb.carry_last_loses"]


def test_every_claim_names_its_effect_and_the_papers_value_of_it():
    """Each claim's effect is in words, with the paper's number beside it computed from the numbers typed above
    (``basis`` says how); absence claims carry the contrast the paper draws."""
    expected = {"main.infiloop_beats_carry_last_sudoku": 23.2, "depth.infiloop_improves_with_depth": 6.24,
                "depth.carry_last_degrades": 4.1, "gamma.search_below_baseline": 0.16, "gamma.jump_at_solve": 0.35,
                "perturb.infiloop_retains": 15.0,
                "perturb.carry_last_loses": 15.0, "ablation.learned_beats_fixed": 8.1, "ablation.reverse_fails": 80.1,
                "ablation.both_axes_best": 9.7, "ablation.content_score_matters": 6.0,
                "study.loop_gating_helps": 0.32, "study.history_lg_best_pair": 1.16,
                "study.loops_help_reasoning": 2.97, "study.loops_hurt_knowledge": -10.69,
                "study.recurrent_beats_nonloop": 1.24,
                "diagnosis.carry_last_changes_more": 53.0, "diagnosis.carry_last_wrong_cells_grow": 0.21,
                "diagnosis.infiloop_wrong_cells_fall": 1.25, "diagnosis.carry_last_flips_right_cells": 18.5,
                "diagnosis.carry_last_state_moves_after_solve": 2.7, "diagnosis.carry_last_loses_after_solve": 19.7,
                "diagnosis.infiloop_keeps_after_solve": 19.7, "overthink.infiloop_keeps": 19.7}
    per_puzzle = {"diagnosis.carry_last_changes_more": " predictions",
                  "diagnosis.carry_last_wrong_cells_grow": " cells", "diagnosis.infiloop_wrong_cells_fall": " cells"}
    for c in paper.CLAIMS:
        assert c.effect and c.basis, c.id
        assert c.paper_effect == pytest.approx(expected[c.id]) if c.id in expected else c.paper_effect is None, c.id
        units = (1.0, "") if c.id.startswith("gamma.") else (1.0, per_puzzle[c.id]) if c.id in per_puzzle else \
            (100.0, " points")
        assert (c.scale, c.unit) == units, c.id
    assert [c.id for c in paper.CLAIMS if c.absence] == ["diagnosis.infiloop_keeps_after_solve",
                                                          "perturb.infiloop_retains", "overthink.infiloop_keeps"]
    # the contrasts where the paper sets InfiLoop against TRM, their values from its published figure data
    contrasts = {c.id: c.contrast_effect for c in paper.CLAIMS if c.contrast}
    assert contrasts == {"depth.infiloop_improves_with_depth": pytest.approx(4.38),
                         "diagnosis.infiloop_wrong_cells_fall": pytest.approx(1.46),
                         "diagnosis.infiloop_keeps_after_solve": pytest.approx(19.7),
                         "overthink.infiloop_keeps": pytest.approx(19.7)}
    assert "-0.43" in paper.CLAIMS_BY_ID["depth.infiloop_improves_with_depth"].contrast_basis  # Figure 3's, beside
    assert "other half of the test puzzles" in paper.CLAIMS_BY_ID["depth.carry_last_degrades"].effect
    assert "ε = 0" in paper.CLAIMS_BY_ID["perturb.carry_last_loses"].effect  # carry-last's own loss, not a gap
    for cid in ("study.coda_protects_knowledge", "study.prelude_helps_reasoning"):  # a fall or a gain, not levels
        assert "change" in paper.CLAIMS_BY_ID[cid].effect or "gain" in paper.CLAIMS_BY_ID[cid].effect


def test_the_looped_lm_claims_quote_the_study_and_their_numbers_come_from_it():
    """Each claim of notebook 08 carries the study summary's words it was checked against (quantity, direction,
    depths), and a claim with a number takes it as the difference of two numbers its words quote."""
    import re

    for c in paper.claims_for("08_looped_lm"):
        assert c.id.startswith("study.") and "Quantity:" in c.source and "direction:" in c.source, c.id
        assert "depth" in c.source, c.id
        if c.paper_effect is not None:
            quoted = [float(x) for x in re.findall(r"\d+\.\d+", c.source)]
            assert any(abs(a - b - c.paper_effect) < 1e-9 for a in quoted for b in quoted), c.id


def _other_side(builder, side: int = +1):
    """Planted data for ``builder`` whose effect lies on the other side of zero from the paper's (``side``: +1, the
    effect positive; -1, a fall), or, for a share (a loss: never negative), at zero: then the rule must still be able
    to say differs."""
    import numpy as np

    from infiloop.analysis import claims

    rng = np.random.default_rng(0)
    a = [rng.random(300) < 0.5 for _ in range(3)]
    better = [x | (rng.random(300) < 0.4) for x in a]
    if builder is claims.difference:  # a below b (above it, against a paper's fall)
        return claims.difference(list(zip(a, better)) if side > 0 else list(zip(better, a)))
    if builder is claims.lead_over_best:  # the first below the best of the others
        return claims.lead_over_best([[x, y, x] for x, y in zip(a, better)])
    if builder is claims.difference_of_changes:  # a gains nothing, b gains
        return claims.difference_of_changes([(x, x, y, x) for x, y in zip(a, better)])
    if builder is claims.change_over_best:  # a gains nothing, the second of the others gains
        return claims.change_over_best([[x, x, x, x, y, x] for x, y in zip(a, better)])
    if builder is claims.gain_by_subset:  # the gain only on the items outside the subset
        first = np.arange(300) < 150
        return claims.gain_by_subset([(np.where(first, x, y), x) for x, y in zip(a, better)], [first] * 3)
    if builder is claims.held_out_fall:  # half 0 spikes at update 2, then both halves keep gaining
        k, p = 12, 300
        curves = []
        for _ in range(3):
            c = np.zeros((k, p), bool)
            c[:, 1::2] = np.arange(k)[:, None] * 25 > rng.integers(0, k * 25, p)[None, 1::2]  # half 1 rises
            c[:, 0::2] = np.arange(k)[:, None] * 30 > rng.integers(0, k * 25, p)[None, 0::2]
            c[2, 0::2] = True  # half 0's peak: update 2 (every puzzle right there)
            curves.append(c)
        return claims.held_out_fall(curves)
    if builder is claims.ratio_difference:  # a's mean per puzzle below b's (above it, against a paper's fall)
        lo = [(rng.poisson(2.0, 300).astype(float), np.ones(300)) for _ in range(3)]
        hi = [(n + rng.poisson(3.0, 300), d) for n, d in lo]
        return claims.ratio_difference(list(zip(lo, hi)) if side > 0 else list(zip(hi, lo)))
    if builder is claims.proportion:  # nothing lost
        return claims.proportion([np.zeros(300, bool)] * 3, a)
    if builder is claims.share:  # nothing lost, as ratios
        return claims.share([(np.zeros(300), x.astype(float)) for x in a])
    if builder is claims.phase_contrast:  # γ above 1 − β while searching, and no jump at the solve
        ones = np.ones(300)
        q = [[(0.9 * ones, ones), (0.5 * ones, ones), (0.6 * ones, ones), (0.6 * ones, ones), (0.6 * ones, ones)]] * 3
        return claims.phase_contrast(q, "below"), claims.phase_contrast(q, "jump")
    if builder is claims.score_separation:  # right candidates score below wrong ones
        from infiloop.analysis import trajectories

        wrong = rng.integers(0, 3, (20, 300))
        trajs = [{"score_outer": (wrong + rng.normal(0, 0.5, wrong.shape)).astype(np.float32),
                  "wrong_cells_candidate": wrong} for _ in range(3)]
        return claims.score_separation([trajectories.separation_terms(t) for t in trajs])
    raise AssertionError(f"no planted case for {builder.__name__}")


def test_no_claims_effect_takes_one_sign_by_construction():
    """Every claim's effect can land on the other side of zero from the paper's (a difference measured on held-out
    puzzles, not the peak of the same curve) and every claim can read 'differs'; a share (a loss of solved puzzles)
    is never negative by its nature, and its 'differs' lies between zero and half the paper's loss."""
    from infiloop.analysis import claims, intervals

    assert set(claims.BUILDERS) == {c.id for c in paper.CLAIMS}
    for cid, builder in claims.BUILDERS.items():
        c = paper.CLAIMS_BY_ID[cid]
        side = -1 if (c.paper_effect or 1) < 0 else 1
        planted = _other_side(builder, side)
        ivs = planted if isinstance(planted, tuple) else (planted,)
        iv = ivs[1] if cid == "gamma.jump_at_solve" else ivs[0]
        if builder in (claims.proportion, claims.share):
            assert iv.value == 0 and iv.hi < 0.5 * c.paper_effect / c.scale, cid
        else:
            assert side * iv.value < 0 and (iv.hi if side > 0 else -iv.lo) < 0, cid
        if not c.absence:
            assert intervals.verdict(iv, None if c.paper_effect is None else c.paper_effect / c.scale) is False, cid
    # the old effect of depth.carry_last_degrades, peak − last on the same curve, is never negative on the same data
    fall = _other_side(claims.held_out_fall)
    assert fall.value < 0 and all(p[0] == 2 for p in fall.extra["peaks"]) and len(fall.extra["peaks"]) == 3
    assert fall.extra["pooled_peaks"] == [2, 11] and fall.extra["pooled_peak"]["value"] < 0


def test_a_claim_records_its_effect_beside_the_papers_and_the_rule_decides():
    import numpy as np

    from infiloop.analysis import claims

    rng = np.random.default_rng(1)
    a = [rng.random(256) < 0.7 for _ in range(3)]
    lead = claims.difference([(x | (rng.random(256) < 0.3), x) for x in a])
    c = claims.claim_dict("main.infiloop_beats_carry_last_sudoku", "ours", effect=lead)
    e = c["effect"]
    assert c["agrees"] is True and c["rule"] == claims.RULE_VERSION and c["seeds"] == 3
    assert (e["paper_effect"], e["threshold"], e["scale"]) == (23.2, 11.6, 100.0) and e["lo"] > 0
    assert claims.effect_text(e).endswith("points; the paper +23.2 (half: +11.6)")
    assert c["note"].startswith("InfiLoop − carry-last, exact accuracy at the training depth: +")
    assert f"({c['verdict']}; 95 %" in c["note"] and c["verdict"] == ("agrees" if e["hi"] >= 0.116 else "smaller")
    kept = claims.claim_dict("perturb.infiloop_retains", "ours", effect=claims.proportion([a[0] & False], [a[0]]),
                             untestable="nothing moved")
    assert kept["agrees"] is None and kept["untestable"] == "nothing moved"
    assert "Untestable: nothing moved" in kept["note"]
    with pytest.raises(ValueError, match="not both"):
        claims.claim_dict("main.infiloop_beats_carry_last_sudoku", "ours", True, effect=lead)


def test_a_difference_no_resample_moves_is_not_taken_as_certain():
    """Models that agree on every puzzle give a difference of exactly zero in every resample: its interval is
    widened to ± the exact bound on the share of puzzles that could differ (0 of 32: 10.9 points), not [0, 0]."""
    import numpy as np

    from infiloop.analysis import claims, intervals

    same = np.zeros(32, bool)
    for iv in (claims.difference([(same, same)]), claims.lead_over_best([[same, same, same]])):
        assert iv.value == 0 and iv.hi == pytest.approx(0.109, abs=1e-3) and iv.lo == -iv.hi, iv
        assert "exact bound on the share of the 32 puzzle-seed pairs" in iv.method
        assert intervals.verdict(iv, 0.0116) is None  # it cannot rule out the study's +1.16 points
    # a difference of two changes: an item that differs moves it by up to 2 (a gains where b loses)
    changes = claims.difference_of_changes([(same, same, same, same)])
    assert changes.hi == pytest.approx(2 * 0.109, abs=2e-3) and changes.lo == -changes.hi
    assert "times 2, the most one item moves it" in changes.method
    cost = claims.perturbation_cost([same | True], [same | True], [np.arange(32) < 10])  # 10 solved, all kept
    assert cost.hi == pytest.approx(0.3085, abs=1e-3)  # 0 of the 10 solved puzzles: the exact bound 30.8 %


def test_notebook_02s_contrast_sentence_follows_the_falls():
    """The paper's contrast in notebook 02 (analysis/depth.py): appears only where carry-last's fall after its held-out
    peak lies above zero and InfiLoop's does not; both falling is not the paper's contrast."""
    from infiloop.analysis.depth import contrast_sentence
    from infiloop.analysis.intervals import Interval

    def iv(lo, hi):
        return Interval((lo + hi) / 2, lo, hi, 3, 256)

    flat, falls = iv(-0.01, 0.01), iv(0.02, 0.06)
    lost, change = {"carry_last": iv(0.0, 0.007)}, {"carry_last": iv(0.001, 0.002)}
    assert contrast_sentence("sudoku", {"carry_last": falls, "infiloop": flat}, lost, change).startswith(
        "**The paper's contrast appears on sudoku at this profile:** carry-last falls from its peak by "
        "+4.0 [+2.0, +6.0] points")
    assert contrast_sentence("maze", {"carry_last": falls, "infiloop": falls}, lost, change).startswith(
        "**Both connections fall from their peak**")
    said = contrast_sentence("sudoku", {"carry_last": flat, "infiloop": falls}, lost, change)
    assert said.startswith("**The paper's contrast does not appear on sudoku") and "loses 0.4 % [0.0, 0.7]" in said


def test_over_seeds_is_the_interval_of_one_models_terms():
    import numpy as np

    from infiloop.analysis import intervals
    from infiloop.analysis import trajectories as analysis

    rng = np.random.default_rng(0)
    trajs = [{"correct": rng.random((3, 40)) < 0.6} for _ in range(3)]
    a = intervals.over_seeds(trajs, analysis.accuracy_terms, 500, bounds=intervals.SHARE)
    b = intervals.interval([[analysis.accuracy_terms(t)] for t in trajs], replicates=500, vectorized=True)
    assert np.allclose(a.value, b.value) and np.allclose(a.lo, b.lo) and np.allclose(a.hi, b.hi)


def test_over_seeds_keeps_a_share_inside_its_range():
    """Three seeds spread as search's (accuracy 43 %, 72 %, 82 %): t = 4.30 over two degrees of freedom crosses 0 and
    1 unclipped (the recorded 74.2 % [33.6, 114.9] of 2026-12-03); the interval of a share is clipped to [0, 1]."""
    import numpy as np

    from infiloop.analysis import intervals
    from infiloop.analysis import trajectories as analysis

    rng = np.random.default_rng(1)
    trajs = [{"correct": rng.random((1, 256)) < p} for p in (0.05, 0.5, 0.97)]
    raw = intervals.interval([[analysis.accuracy_terms(t)] for t in trajs], replicates=2000, vectorized=True)
    assert raw.lo[0] < 0 and raw.hi[0] > 1  # what the clipping is for
    iv = intervals.over_seeds(trajs, analysis.accuracy_terms, 2000, bounds=intervals.SHARE)
    assert iv.lo[0] == 0.0 and iv.hi[0] == 1.0 and np.isclose(iv.value[0], raw.value[0])
    change = intervals.over_seeds(trajs, lambda t: (t["correct"][0] * 3.0, np.ones(256)), 2000,
                                  bounds=intervals.NONNEGATIVE)
    assert change.lo == 0.0 and change.hi > 3.0


def test_the_identity_ablation_table_pairs_own_and_blank_ids():
    """analysis/main_table.py: a model that solves every task with its own ids and none with blank ids loses 100
    points (paired by task); the table has a row per (task, model) with an ablation, none for the others."""
    import numpy as np

    from infiloop.analysis import main_table

    ones, zeros = np.ones(8), np.zeros(8)
    scores = {("arc1", "infiloop", "own"): [ones, ones], ("arc1", "infiloop", "blank"): [zeros, zeros],
              ("arc1", "infiloop", "random"): [ones * 0.5, ones * 0.5]}
    cols, rows = main_table.identity_rows(scores, {"infiloop": "InfiLoop"})
    assert cols[-1] == "own − blank" and len(rows) == 1
    task, model, own, blank, rand, loss = rows[0]
    assert (task, model) == ("arc1", "InfiLoop") and own.startswith("100.0 %") and blank.startswith("0.0 %")
    assert rand.startswith("50.0 %") and loss.startswith("+100.0")
    traj = {"correct": np.array([[True, False, True]]), "updates": np.array([4])}
    assert main_table.item_scores(traj, None, 4, voted=False).tolist() == [1.0, 0.0, 1.0]
    assert main_table.identity_rows({("sudoku", "infiloop", "own"): [ones]}, {})[1] == []


def test_the_papers_published_curves_are_shipped_and_read():
    """The authors' figure data ship with the package (infiloop/analysis/paper_data, source and commits beside them)
    and one function reads them: three values checked against the published data, and what they show."""
    import numpy as np

    from infiloop.analysis import paper_curves

    assert (paper_curves.DATA / "README.md").read_text(encoding="utf-8").count("pixeli99/InfiLoop") >= 1
    assert "36d1418dce4c541fb9a07761e315c18bb7dd89a3" in (paper_curves.DATA / "README.md").read_text(encoding="utf-8")
    f3, f1 = paper_curves.curve("fig3", "TRM"), paper_curves.curve("fig1a", "TRM")
    assert round(f3.at(960), 2) == 83.65 and f3.layers[-1] == 24_960  # TRM 83.65 % at 24,960 layers (Figure 3)
    assert f1.peak() == (18, pytest.approx(62.23, abs=5e-3)) and round(f1.at(72), 2) == 58.10  # Figure 1(a)
    assert round(f3.at(18), 2) == 73.41 and round(f3.largest_drop(), 2) == 0.32  # the two runs at 468 layers
    assert [len(paper_curves.curve("fig3", m).updates) for m in ("TRM", "InfiLoop", "FPRM")] == [160] * 3
    assert np.all(f3.layers == 26 * f3.updates) and np.all(np.diff(f3.updates) == 6)
    maxima = [paper_curves.curve("fig3", m).peak()[1] for m in ("InfiLoop", "FPRM", "TRM")]
    assert [round(m, 2) for m in maxima] == [92.74, 91.57, 83.66]
    assert maxima[0] < paper.TABLE1_BY_CONNECTION["infiloop"].sudoku and maxima[1] < paper.TABLE1_BY_CONNECTION[
        "fprm"].sudoku  # Table 1's numbers are not reached by its curves
    text = paper_curves.statement()
    assert "83.65 % at 24,960" in text and "62.23 % at update 18" in text and "update 24 on" in text
    assert paper_curves.relative(f1)[f1.updates == 36] == 1.0
    with pytest.raises(KeyError, match="no published figure"):
        paper_curves.curve("fig9", "TRM")
    with pytest.raises(KeyError, match="has no 'FPRM' curve"):
        paper_curves.curve("fig1a", "FPRM")
