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
               "ABLATION_DECAY": paper.ABLATION_DECAY, "PERTURBATION": paper.PERTURBATION}
    allowed = {0.0}  # "none lost" is written in words
    for name, rec in records.items():
        # signs may be in words ("fell by 1.25"), fractions in percent, 1.42 M as "142만" (10^4)
        missing = sorted({v for v in leaves(rec) if v not in allowed
                          and not {abs(v), v * 100, v / 1e6, v / 1e4} & seed_numbers})
        assert not missing, f"{name}: {missing} not found in the seeds"


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
    assert len(ids) == len(set(ids)) == 22
    assert set(paper.CLAIMS_BY_ID) == set(ids)
    assert paper.NOTEBOOKS == ("01_main_table", "02_depth_scaling", "03_gamma_dynamics", "04_perturbation",
                               "05_beta0_ablation", "06_conditioning", "07_watch_the_loop", "08_looped_lm")
    for c in paper.CLAIMS:
        assert c.notebook in paper.NOTEBOOKS, c
        assert c.claim and c.paper, c
        assert c.id.split(".")[0] in {"main", "depth", "gamma", "perturb", "ablation", "study"}, c
        assert (c.id.startswith("study.")) == c.paper.startswith(paper.STUDY), c  # whose number it is
    # every experiment notebook checks something; the animations only show
    assert {c.notebook for c in paper.CLAIMS} == set(paper.NOTEBOOKS) - set(paper.ILLUSTRATIONS)
    assert [c.id for c in paper.claims_for("04_perturbation")] == ["perturb.infiloop_retains",
                                                                    "perturb.carry_last_loses"]
