"""The paper's numbers (infiloop.paper): spot checks against SPEC.md section 5 and structure."""

import pytest

from infiloop import paper


def _row(model, params):
    return next(r for r in paper.TABLE1 if r.model == model and r.params == params)


def test_table1_spot_checks():
    assert len(paper.TABLE1) == 13
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
    assert len(ids) == len(set(ids)) == 16
    assert set(paper.CLAIMS_BY_ID) == set(ids)
    assert paper.NOTEBOOKS == ("01_main_table", "02_depth_scaling", "03_gamma_dynamics", "04_perturbation",
                               "05_beta0_ablation", "06_conditioning", "07_watch_the_loop")
    for c in paper.CLAIMS:
        assert c.notebook in paper.NOTEBOOKS, c
        assert c.claim and c.paper, c
        assert c.id.split(".")[0] in {"main", "depth", "gamma", "perturb", "ablation", "study"}, c
        assert (c.id.startswith("study.")) == c.paper.startswith(paper.STUDY), c  # whose number it is
    # every experiment notebook checks something; the animations only show
    assert {c.notebook for c in paper.CLAIMS} == set(paper.NOTEBOOKS) - set(paper.ILLUSTRATIONS)
    assert [c.id for c in paper.claims_for("04_perturbation")] == ["perturb.infiloop_retains",
                                                                    "perturb.carry_last_loses"]
