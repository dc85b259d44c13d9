"""The paper's reported numbers (its tables and figures), typed in for side-by-side tables and overlays.

Every number here is the paper's ("Scaling to Tens of Thousands of Test-Time Iterations with
Loop-Native Attention Residuals", arXiv 2610.11570); cite them with ``SOURCE``. The contrasts of three claims
(``Claim.contrast_effect``) are read from the authors' published figure data (``paper_curves.py``). Nothing is derived
except those and outer-update counts, which use the paper's own depth unit ``PAPER_LAYERS_PER_UPDATE`` (26
executed layers per outer update in its evaluation configuration: 72 updates = 1,872 layers). The 26 does
not follow from the configuration the paper states (H = 3, L = 6, 2 layers gives TRM's 14), so the
companion compares depths with the paper in outer updates only, never in layers.

``CLAIMS`` lists the paper's qualitative claims that the companion's notebooks check; each notebook
reports, per claim id, what it measured and whether it agrees. The claims with ids ``study.*`` are the
findings of the related looped-language-model study (test-time recurrence), which notebook 06 checks
in this harness; their "paper" column quotes that study, marked ``STUDY``.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import paper_curves
from .paper_claim import Claim  # noqa: F401  (a claim of the paper, and what decides it)

SOURCE = "paper"
PAPER_LAYERS_PER_UPDATE = 26

# The notebooks that show measured trajectories and check no claim (the animations); the others check CLAIMS.
ILLUSTRATIONS = ("07_watch_the_loop",)
STUDY = "looped-LM study"  # conditioning of looped language models (test-time recurrence in looped LMs)


def updates_from_layers(layers: int) -> int:
    """Outer updates of the paper's evaluation configuration for a depth quoted in layers."""
    if layers % PAPER_LAYERS_PER_UPDATE:
        raise ValueError(f"{layers} layers is not a whole number of outer updates of {PAPER_LAYERS_PER_UPDATE}")
    return layers // PAPER_LAYERS_PER_UPDATE


# --- Table 1 -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Table1Row:
    """One row of Table 1: exact accuracy (%) on Sudoku-Extreme / Maze-Hard, pass@2 (%) on ARC.

    ``None`` is the paper's "–" (not reported). ``at_least`` names the columns the paper gives as
    lower bounds ("≥"); ``note`` carries the row's caveat (e.g. URM reports pass@1 on ARC).
    """

    model: str
    params: str | None
    sudoku: float | None
    maze: float | None
    arc1: float | None
    arc2: float | None
    note: str = ""
    at_least: tuple[str, ...] = ()
    source: str = SOURCE

    def cell(self, column: str) -> str:
        """The column as the paper prints it: "–" for missing, "≥" for lower bounds."""
        value = getattr(self, column)
        if value is None:
            return "–"
        return ("≥" if column in self.at_least else "") + f"{value:.1f}"


TABLE1_COLUMNS = ("sudoku", "maze", "arc1", "arc2")

TABLE1: list[Table1Row] = [
    Table1Row("DeepSeek R1", "671B", 0.0, 0.0, 15.8, 1.3),
    Table1Row("Claude 3.7 Sonnet", None, 0.0, 0.0, 28.6, 0.7),
    Table1Row("o3-mini-high", None, 0.0, 0.0, 34.5, 3.0),
    Table1Row("Gemini 2.5 Pro (32K)", None, None, None, 37.0, 4.9),
    Table1Row("TRM, retrained by the authors", "7M", 73.6, None, None, None),
    Table1Row("TRM, public ARC-AGI-2 checkpoint re-evaluated by the authors", "7M", None, None, None, 4.6),
    Table1Row("HRM", "27M", 55.0, 74.5, 40.3, 5.0),
    Table1Row("Attractor Model", "27M", 91.4, 93.1, None, None),
    Table1Row("URM", "14M", 77.6, None, 53.8, 16.0, note="pass@1 on ARC", at_least=("arc1", "arc2")),
    Table1Row("TRM", "7M", 74.7, 85.3, 44.6, 7.8),
    Table1Row("EqR", "7M", 93.0, None, None, None),
    Table1Row("Attractor Model", "7M", 54.3, 46.7, None, None),
    Table1Row("FPRM", "7M", 94.2, 87.0, 47.5, 6.2),
    Table1Row("InfiLoop", "7M", 97.9, 87.4, 49.1, 13.6),
]

# The paper's rows that correspond to this project's connection recipes.
TABLE1_BY_CONNECTION = {"carry_last": TABLE1[9], "fprm": TABLE1[12], "infiloop": TABLE1[13]}


# --- Depth scaling (Sudoku-Extreme, 32,768 test puzzles, every 6 outer updates up to 960) ---------

@dataclass(frozen=True)
class DepthPoint:
    """Exact accuracy (%) of a model at a depth; ``updates`` = ``layers`` / 26 (the paper's unit)."""

    model: str
    layers: int
    accuracy: float
    note: str = ""
    source: str = SOURCE

    @property
    def updates(self) -> int:
        return updates_from_layers(self.layers)


DEPTH_TEST_PUZZLES = 32_768
DEPTH_EVAL_EVERY = 6
DEPTH_MAX_UPDATES = 960
_FPRM_NOTE = "pointwise minimum over 3 initialisation seeds"

DEPTH_SCALING: list[DepthPoint] = [
    DepthPoint("InfiLoop", 936, 86.5),
    DepthPoint("InfiLoop", 1_872, 90.9),
    DepthPoint("InfiLoop", 3_744, 92.4),
    DepthPoint("InfiLoop", 24_960, 92.74),
    DepthPoint("FPRM", 3_744, 90.1, _FPRM_NOTE),
    DepthPoint("FPRM", 24_960, 91.63, _FPRM_NOTE),
    DepthPoint("TRM", 24_960, 83.65),
]

# Fig. 1a, the carry-last diagnosis: TRM peaks early and degrades; InfiLoop keeps rising.
FIG1A: list[DepthPoint] = [
    DepthPoint("TRM", 468, 62.2, "peak"),
    DepthPoint("TRM", 1_872, 58.1),
    DepthPoint("InfiLoop", 1_872, 90.9),
]

# Carry-last diagnostics between outer updates 36 and 72 (per model).
CARRY_LAST_DIAGNOSTICS = {
    "from_update": 36,
    "to_update": 72,
    "changed_predictions_per_puzzle": {"TRM": 77.0, "InfiLoop": 24.0},
    "wrong_cells_change": {"TRM": +0.21, "InfiLoop": -1.25},
    "cells_right_at_36": 1.42e6,  # initially blank cells both models had right at update 36
    "flipped_at_least_once_pct": {"TRM": 20.9, "InfiLoop": 2.4},
    # aligned to the first solve: relative state change per update (%)
    "state_change_min_pct": {"TRM": 3.0, "InfiLoop": 0.3},
    "state_change_after_pct": {"TRM": 10.0},  # TRM climbs back to about 10 % per update
    "first_loss_updates_after_solve": {"TRM": 9},
    "lost_after_36_pct": {"TRM": 19.7, "InfiLoop": 0.0},
    "source": SOURCE,
}

# Exact accuracy (%) by number of blank cells at 1,872 layers; None is the paper's "–".
DIFFICULTY_LAYERS = 1_872
DIFFICULTY: list[dict] = [
    {"blanks": "45–51", "InfiLoop": 100.0, "FPRM": 100.0, "TRM": None},
    {"blanks": "52", "InfiLoop": 100.0, "FPRM": 96.5, "TRM": 95.8},
    {"blanks": "55", "InfiLoop": 93.4, "FPRM": 90.3, "TRM": 84.2},
    {"blanks": "58", "InfiLoop": 84.1, "FPRM": 77.9, "TRM": 64.5},
    {"blanks": "60", "InfiLoop": 59.5, "FPRM": 56.5, "TRM": 36.0},
]


# --- γ dynamics (outer axis, Sudoku) --------------------------------------------------------------

GAMMA = {
    "search_mean": 0.40,  # mean step size before the solve (about)
    "equal_weight_baseline": 0.56,  # 1 − β of the learned Sudoku model
    "at_solve": 0.91,  # at the update that completes the board
    "return_within_updates": 6,  # back to the baseline within 6 updates
    "score_clip": 8.0,
    # median content score ln e_t by number of wrong cells on the board
    "content_score_median": {0: 7.25, 20: 2.75, 33: -0.58},
    "no_content_score_cost_points": (6, 7),  # removing the score costs 6–7 points
    "source": SOURCE,
}


# --- Perturbation stability -----------------------------------------------------------------------

PERTURBATION = {
    "at_update": 36,
    "more_updates": 36,
    "eps_range": (1e-4, 0.3),
    "infiloop_retention_pct": 100.0,  # at every ε
    "trm_loss_pct": (15.0, 20.0),  # even with ε = 0
    "trm_distance_o1_within_updates": 12,  # at ε = 1e-4
    "source": SOURCE,
}


# --- Ablations (Sudoku-Extreme, 7,680 random test puzzles, exact %) -------------------------------

ABLATION_TEST_PUZZLES = 7_680
ABLATION_BUDGETS = ("H3L6", "H32L6")

# Axes: accuracy at H3 L6 and H32 L6.
ABLATION_AXES = {
    "both": {"H3L6": 82.1, "H32L6": 89.7},
    "inner": {"H3L6": 72.6, "H32L6": 79.4},
    "outer": {"H3L6": 75.1, "H32L6": 80.0},
}

# Decay mode and β₀ (H3 L6; the learned default also at H32 L6).
ABLATION_DECAY: list[dict] = [
    {"decay": "reverse", "beta": 1.82, "H3L6": 2.0, "H32L6": None},
    {"decay": "uniform", "beta": 1.0, "H3L6": 38.4, "H32L6": None},
    {"decay": "fixed", "beta": 0.55, "H3L6": 74.0, "H32L6": None},
    {"decay": "learned", "beta": 0.55, "H3L6": 82.1, "H32L6": 89.7},
    {"decay": "learned", "beta": 0.10, "H3L6": 66.3, "H32L6": None},
    {"decay": "learned", "beta": 0.90, "H3L6": 63.3, "H32L6": None},
]


# --- Claims the notebooks check -------------------------------------------------------------------

# The looped-LM study's numbers behind notebook 08's claims (benchmark averages in %; Llama3.1-1B backbone,
# 20 effective layers in training: L(K) = 20, the training depth of its allocations 2×10, 4×5, 5×4, 10×2 and of
# NonLoop 20×1).
LOOPLM_EXTRAPOLATION = {"reasoning": {20: 28.52, 40: 31.49}, "knowledge": {20: 62.80, 40: 52.11}}
# Its Key Finding 4 (reasoning, %): BaseLoop 4×5 at L(r) = 40, 5×4 at L(r) = 30, NonLoop 20×1 at its depth 20;
# and Key Finding 2's CLUTRR gains by chain length (as the summary gives them; none for lengths 4-10).
LOOPLM_NONLOOP = {"4x5": 31.49, "5x4": 31.88, "nonloop": 30.25}
LOOPLM_CLUTRR_GAIN = {2: 31.6, 3: 23.4}

# The looped-LM study's numbers behind its claims (benchmark averages in %).
STUDY_NUMBERS = {
    "loop_gating": 36.91, "baseloop": 36.59,  # overall, L(r) = 56, Qwen3-0.6B 7×4
    "history_lg": 37.30, "history_lg_over_best_part": 1.16,  # D = 84
    "source": STUDY,
}


_TRM, _INF = TABLE1_BY_CONNECTION["carry_last"], TABLE1_BY_CONNECTION["infiloop"]
_DECAY = {(d["decay"], d["beta"]): d for d in ABLATION_DECAY}
_INF_DEPTH = {p.updates: p.accuracy for p in DEPTH_SCALING if p.model == "InfiLoop"}
_DIAG = CARRY_LAST_DIAGNOSTICS
_TRM_LOSS = PERTURBATION["trm_loss_pct"][0]  # the lower end of 15–20 %: the smaller effect, the stricter differs
_F1 = {m: paper_curves.curve("fig1a", m) for m in ("TRM", "InfiLoop")}  # the authors' published Fig. 1(a) data
_F3 = {m: paper_curves.curve("fig3", m) for m in ("TRM", "InfiLoop")}  # and Fig. 3's
_GAIN_F1 = {m: c.at(72) - c.at(36) for m, c in _F1.items()}  # updates 36 -> 72 (the figure's deepest)
_GAIN_F3 = {m: c.at(960) - c.at(36) for m, c in _F3.items()}  # updates 36 -> 960


CLAIMS: list[Claim] = [
    Claim("main.infiloop_beats_carry_last_sudoku", "InfiLoop beats carry-last (TRM) on Sudoku-Extreme",
          "97.9 vs 74.7 %", "01_main_table", "InfiLoop − carry-last, exact accuracy at the training depth",
          round(_INF.sudoku - _TRM.sudoku, 2), "Table 1: 97.9 − 74.7"),
    Claim("depth.infiloop_improves_with_depth",
          "InfiLoop's accuracy keeps rising with test-time depth, where carry-last's (TRM's) does not",
          "86.5 % @ 936 → 92.74 % @ 24,960 layers; TRM 58.07 → 58.10 % over updates 36 → 72 (Fig. 1a)",
          "02_depth_scaling", "InfiLoop's exact accuracy at the deepest evaluation − at the training depth",
          round(_INF_DEPTH[960] - _INF_DEPTH[36], 2), "depth table: 92.74 % @ 960 − 86.5 % @ 36 updates",
          contrast=("InfiLoop's gain from the training depth to the deepest evaluation − carry-last's, on the same "
                    "puzzles"),
          contrast_effect=round(_GAIN_F1["InfiLoop"] - _GAIN_F1["TRM"], 2),
          contrast_basis=(f"Fig. 1(a), updates 36 → 72 (the authors' published data): InfiLoop "
                          f"{_GAIN_F1['InfiLoop']:+.2f}, TRM {_GAIN_F1['TRM']:+.2f}; Figure 3's curves over 36 → 960 "
                          f"give {_GAIN_F3['InfiLoop'] - _GAIN_F3['TRM']:+.2f} (InfiLoop {_GAIN_F3['InfiLoop']:+.2f}, "
                          f"TRM {_GAIN_F3['TRM']:+.2f}): the paper's two TRM runs disagree")),
    Claim("depth.carry_last_degrades", "carry-last peaks early and then loses accuracy with more updates",
          "Fig. 1a: 62.2 % @ 468 → 58.1 % @ 1,872 layers; Fig. 3's TRM never falls 0.32 points below its best",
          "02_depth_scaling",
          "carry-last's fall after its peak: accuracy at the peak − at the deepest evaluation, the peak chosen on the "
          "other half of the test puzzles", round(FIG1A[0].accuracy - FIG1A[1].accuracy, 2),
          "decided against Fig. 1a: 62.2 % @ 18 − 58.1 % @ 72 updates; the paper's Fig. 3 TRM (another run) rises "
          "to 83.65 % @ 960 and never falls more than 0.32 points below its running maximum"),
    # the carry-last diagnosis (infiloop/analysis/diagnosis.py): snapshots at the training depth and twice it
    Claim("diagnosis.carry_last_changes_more",
          "between two snapshots past the training depth carry-last changes more predictions than InfiLoop",
          "77.0 vs 24.0 per puzzle (updates 36 → 72)", "02_depth_scaling",
          "carry-last − InfiLoop, predictions changed per puzzle between the snapshots (summed over the updates)",
          round(_DIAG["changed_predictions_per_puzzle"]["TRM"] - _DIAG["changed_predictions_per_puzzle"]["InfiLoop"],
                2), "77.0 − 24.0", " predictions", 1.0),
    Claim("diagnosis.carry_last_wrong_cells_grow", "carry-last's wrong cells grow between the snapshots",
          "+0.21 per puzzle (36 → 72)", "02_depth_scaling",
          "carry-last's wrong cells per puzzle at the second snapshot − at the first",
          _DIAG["wrong_cells_change"]["TRM"], "+0.21", " cells", 1.0),
    Claim("diagnosis.infiloop_wrong_cells_fall",
          "InfiLoop's wrong cells fall between the snapshots, where carry-last's grow",
          "−1.25 per puzzle (36 → 72); TRM +0.21", "02_depth_scaling",
          "InfiLoop's wrong cells per puzzle at the first snapshot − at the second (positive: they fall)",
          -_DIAG["wrong_cells_change"]["InfiLoop"], "a fall of 1.25", " cells", 1.0,
          contrast=("InfiLoop's fall of wrong cells per puzzle between the snapshots − carry-last's, on the same "
                    "puzzles"),
          contrast_effect=round(-_DIAG["wrong_cells_change"]["InfiLoop"] + _DIAG["wrong_cells_change"]["TRM"], 2),
          contrast_basis="1.25 − (−0.21): InfiLoop's fall against TRM's growth"),
    Claim("diagnosis.carry_last_flips_right_cells",
          "carry-last turns more of the cells both models had right wrong at least once",
          "20.9 vs 2.4 % of the blank cells right at 36", "02_depth_scaling",
          "carry-last − InfiLoop, share of the blank cells both had right at the first snapshot turned wrong at least "
          "once before the second",
          round(_DIAG["flipped_at_least_once_pct"]["TRM"] - _DIAG["flipped_at_least_once_pct"]["InfiLoop"], 2),
          "20.9 − 2.4"),
    Claim("diagnosis.carry_last_state_moves_after_solve",
          "after the first solve carry-last's state keeps changing while InfiLoop's settles",
          "about 3 % per update at its lowest, back to about 10 % (TRM); 0.3 % (InfiLoop)", "02_depth_scaling",
          "carry-last − InfiLoop, mean relative state change per update in the 36 updates after the first solve, "
          "puzzles both solved",
          round(_DIAG["state_change_min_pct"]["TRM"] - _DIAG["state_change_min_pct"]["InfiLoop"], 2),
          "3.0 − 0.3: TRM's lowest, the smaller contrast (its mean over the window lies between 3 and 10 %)"),
    Claim("diagnosis.carry_last_loses_after_solve", "carry-last loses solved puzzles within 36 updates of the solve",
          "19.7 % of its solved puzzles", "02_depth_scaling",
          "carry-last's share of its solved puzzles wrong at least once in the 36 updates after the first solve",
          _DIAG["lost_after_36_pct"]["TRM"], "19.7 %"),
    Claim("diagnosis.infiloop_keeps_after_solve",
          "InfiLoop loses none of its solved puzzles within 36 updates, where carry-last (TRM) loses some",
          "0 % (TRM 19.7 %)", "02_depth_scaling",
          "InfiLoop's share of its solved puzzles wrong at least once in the 36 updates after the first solve",
          _DIAG["lost_after_36_pct"]["TRM"], "InfiLoop loses none where TRM loses 19.7 %: the contrast", absence=True,
          contrast="carry-last's share of its solved puzzles lost in the 36 updates after the solve − InfiLoop's",
          contrast_effect=_DIAG["lost_after_36_pct"]["TRM"] - _DIAG["lost_after_36_pct"]["InfiLoop"],
          contrast_basis="19.7 − 0"),
    Claim("gamma.search_below_baseline", "before the solve, γ stays below the equal-weight baseline 1 − β",
          "≈0.40 vs 0.56", "03_gamma_dynamics", "1 − β − mean γ in the updates before the first solve",
          round(GAMMA["equal_weight_baseline"] - GAMMA["search_mean"], 2), "0.56 − 0.40", "", 1.0),
    Claim("gamma.jump_at_solve", "γ jumps at the update that completes the board, then returns to 1 − β",
          "0.91, back to 0.56 within 6 updates", "03_gamma_dynamics",
          "γ at the solving update − the larger of γ before it and 1 − β",
          round(GAMMA["at_solve"] - max(GAMMA["search_mean"], GAMMA["equal_weight_baseline"]), 2),
          "0.91 − max(0.40, 0.56)", "", 1.0),
    # The paper reports three medians, not a correlation: the effect is how well the score tells right candidates from
    # wrong ones, for which it gives no number; the notebook states our medians at the same shares of wrong cells
    # beside the paper's (``gamma_figures.score_medians``). Earlier the effect was a rank correlation of the
    # mean score with the wrong cells, set against a "−1" that was only the order of the paper's three medians.
    Claim("gamma.score_tracks_correctness", "the content score falls as the number of wrong cells grows",
          "median 7.25 / 2.75 / −0.58 at 0 / 20 / 33 wrong cells", "03_gamma_dynamics",
          "AUROC of the content score for right (no wrong cell) against wrong candidates − ½, every update (positive: "
          "right boards score higher)", None,
          "no number: the paper gives medians by wrong cells (7.25 / 2.75 / −0.58 at 0 / 20 / 33 of 81), whose fall "
          "says right boards score higher but not by how much in this measure; ours beside them in the claim's row",
          "", 1.0),
    Claim("perturb.infiloop_retains", "InfiLoop keeps its solved puzzles after a perturbation of the state",
          "100 % at every ε ∈ [1e-4, 0.3]", "04_perturbation",
          "InfiLoop's loss of solved puzzles under the strongest perturbation", _TRM_LOSS,
          "InfiLoop loses none (0 %) where TRM loses 15–20 %: the contrast is 15 points", absence=True),
    Claim("perturb.carry_last_loses", "carry-last loses solved puzzles, even without a perturbation",
          "15–20 % lost, even at ε = 0", "04_perturbation",
          "carry-last's loss of its solved puzzles without a perturbation (ε = 0)", _TRM_LOSS,
          "15–20 % lost at ε = 0: the lower end"),
    Claim("ablation.learned_beats_fixed", "a learned decay beats a fixed, uniform or reverse one",
          "82.1 vs 74.0 / 38.4 / 2.0 % (H3 L6)", "05_beta0_ablation",
          "learned − the best of the fixed, uniform and reverse decays at the short budget",
          round(_DECAY["learned", 0.55]["H3L6"] - _DECAY["fixed", 0.55]["H3L6"], 2), "82.1 − 74.0 (H3 L6)"),
    Claim("ablation.reverse_fails", "a reverse decay (β > 1) fails", "2.0 % (β = 1.82, H3 L6)", "05_beta0_ablation",
          "learned − reverse decay at the short budget",
          round(_DECAY["learned", 0.55]["H3L6"] - _DECAY["reverse", 1.82]["H3L6"], 2), "82.1 − 2.0 (H3 L6)"),
    Claim("ablation.both_axes_best", "InfiLoop on both axes beats inner-only and outer-only",
          "82.1 vs 72.6 / 75.1 % (H3 L6); 89.7 vs 79.4 / 80.0 % (H32 L6)", "05_beta0_ablation",
          "both axes − the better single axis at the long budget",
          round(ABLATION_AXES["both"]["H32L6"] - max(ABLATION_AXES["inner"]["H32L6"], ABLATION_AXES["outer"]["H32L6"]),
                2), "89.7 − 80.0 (H32 L6)"),
    Claim("ablation.content_score_matters", "removing the content score costs accuracy",
          "6–7 points (train- or test-time)", "05_beta0_ablation",
          "with − without the content score at the long budget", float(GAMMA["no_content_score_cost_points"][0]),
          "6–7 points: the lower end"),
    # the looped-LM study (language models, FineWeb-Edu; its numbers are benchmark averages in %)
    Claim("study.history_beats_dense_injection",
          "history-state injection extrapolates where dense initial-state injection collapses",
          f"{STUDY}: dense injection collapses past the horizon; history (dense, w = 1) stays near the "
          "non-looped reference", "06_conditioning", "history (w = 1) − dense injection at the longest budget",
          None, "no number"),
    Claim("study.window_one_best", "a history window w = 1 extrapolates better than w = 2",
          f"{STUDY}: w = 2 or 4 progressively diminishes extrapolation", "06_conditioning",
          "w = 1 − w = 2 at the longest budget", None, "no number"),
    Claim("study.loop_gating_helps", "loop gating beats the unconditioned loop past the training horizon",
          f"{STUDY}: LG 36.91 vs BaseLoop 36.59 % overall (L(r) = 56, Qwen3-0.6B 7×4)", "06_conditioning",
          "loop gating − unconditioned at the longest budget",
          round(STUDY_NUMBERS["loop_gating"] - STUDY_NUMBERS["baseloop"], 2), "36.91 − 36.59"),
    Claim("study.history_lg_best_pair", "history + loop gating beats each of its parts",
          f"{STUDY}: H+LG 37.30 %, +1.16 pp over its strongest part; I+H 36.91, I+LG 36.33 (D = 84)",
          "06_conditioning", "history + LG − the better of its parts at the longest budget",
          STUDY_NUMBERS["history_lg_over_best_part"], "+1.16 pp"),
    # the looped-LM study's own system (notebook 08): a looped decoder C ∘ F^r ∘ P run past its horizon K, compared at
    # matched effective depth L(r) = p + r s + c (L(K) = 20 in the study, 8 at profile tiny)
    Claim("study.loops_help_reasoning", "extra loops past the training horizon raise reasoning accuracy",
          f"{STUDY}: reasoning 28.52 → 31.49 % from L(r) = 20 (= L(K)) to 40, at test time only",
          "08_looped_lm", "BaseLoop's reasoning (kinship) accuracy at L(r) = 2 L(K) − at L(r) = L(K)",
          round(LOOPLM_EXTRAPOLATION["reasoning"][40] - LOOPLM_EXTRAPOLATION["reasoning"][20], 2), "31.49 − 28.52",
          source="Key Finding 1: \"Reasoning: Improves from 28.52 at L(r)=20 to 31.49 at L(r)=40 (2.97 pp gain at "
                 "test-time only)\". Quantity: reasoning accuracy; direction: up; depths: L(K) → 2 L(K)."),
    Claim("study.loops_hurt_knowledge", "extra loops past the training horizon lower knowledge accuracy",
          f"{STUDY}: knowledge 62.80 → 52.11 % over the same range", "08_looped_lm",
          "BaseLoop's knowledge accuracy at L(r) = 2 L(K) − at L(r) = L(K)",
          round(LOOPLM_EXTRAPOLATION["knowledge"][40] - LOOPLM_EXTRAPOLATION["knowledge"][20], 2), "52.11 − 62.80",
          source="Key Finding 1: \"Knowledge: Decreases from 62.80 to 52.11 over the same range\". Quantity: "
                 "knowledge accuracy; direction: down; depths: L(K) → 2 L(K)."),
    Claim("study.short_chains_gain_more",
          "harder reasoning instances do not gain more from extra loops: short chains gain more than long ones",
          f"{STUDY}: CLUTRR gains 31.6 (length 2) and 23.4 (length 3), smaller gains or declines for lengths 4–10",
          "08_looped_lm", "BaseLoop's kinship gain from L(r) = L(K) to 2 L(K) on chains of length 2–3 − on "
          "lengths 4–10", None, "no number for lengths 4–10 (\"smaller gains or declines\")",
          source="Key Finding 2: \"CLUTRR: Large gains on short chains (31.6 for length 2, 23.4 for length 3) but "
                 "smaller gains or declines for longer chains (4–10)\". Quantity: the gain from extra loops; "
                 "direction: short > long; depths: not given for CLUTRR, here L(K) → 2 L(K) as Key Finding 1."),
    Claim("study.history_lg_beats_baseloop",
          "history injection + loop gating beats BaseLoop under an extended budget (overall accuracy)",
          f"{STUDY}: H+LG 37.30 % overall at D = 84; BaseLoop 36.59 % overall at L(r) = 56 (Qwen3-0.6B 7×4)",
          "08_looped_lm", "history (channel-wise, w = 2) + loop gating − BaseLoop, overall accuracy (the mean of "
          "knowledge and kinship) at L(r) = 3 L(K)", None,
          "no number at one depth: H+LG is given at D = 84, BaseLoop at L(r) = 56 (37.30 − 36.59 mixes two budgets)",
          source="\"History-state injection combined with timestep conditioning ... outperforming individual variants "
                 "and the unconditioned baseline under extended inference budgets\"; \"At D=84, H+LG reaches 37.30 "
                 "overall accuracy\"; guideline 4: \"Channel-wise history-state injection (window w=2) with Loop "
                 "Gating\". Quantity: overall accuracy; direction: up; depth: D = 84 = 3 L(K) of 7×4 (L(K) = 28)."),
    Claim("study.balanced_allocation_extrapolates",
          "a balanced core and loop count gains more from extra loops than the extreme allocations",
          f"{STUDY}: 5×4 and 4×5 keep improving to L(r) = 40; 2×10 peaks early and degrades, 10×2 stays flat",
          "08_looped_lm", "reasoning gain from L(r) = L(K) to 2 L(K): the balanced pure split − the better of the "
          "extreme splits (s×K at one L(K))", None, "no number",
          source="Key Finding 3: \"BaseLoop 2×10 ... peaks early, degrades under unrolling\"; \"10×2 ... remains "
                 "flat\"; \"5×4 and 4×5: strongest test-time scaling, continue improving up to L(r)=40\". "
                 "Quantity: the gain with extra loops; direction: balanced > extremes; depths: L(K) → 2 L(K); "
                 "at tiny 0+2×4+0 against 0+1×8+0 and 0+4×2+0 (the flat one)."),
    Claim("study.recurrent_beats_nonloop",
          "a balanced looped model past its horizon surpasses the non-looped model of its training depth",
          f"{STUDY}: BaseLoop 4×5 31.49 % at L(r) = 40, 5×4 31.88 % at L(r) = 30, NonLoop (20×1) 30.25 % "
          "(reasoning)", "08_looped_lm", "reasoning (kinship): the balanced BaseLoop at L(r) = 2 L(K) − the "
          "non-looped model (s = L(K), K = 1) at its depth L(K)",
          round(LOOPLM_NONLOOP["4x5"] - LOOPLM_NONLOOP["nonloop"], 2), "31.49 − 30.25 (4×5 at L(r) = 40 = 2 L(K))",
          source="Key Finding 4: \"BaseLoop 5×4 reaches 31.88 at L(r)=30; BaseLoop 4×5 achieves 31.49 at L(r)=40\"; "
                 "\"Both exceed NonLoop (20×1) reasoning score of 30.25\". Quantity: reasoning accuracy; direction: "
                 "looped > NonLoop; depths: looped at 2 L(K), NonLoop at L(K)."),
    Claim("study.coda_protects_knowledge", "a coda protects knowledge when the core runs fewer loops (r < K)",
          f"{STUDY}: 0+2×9+2 substantially mitigates knowledge decay under under-unrolling", "08_looped_lm",
          "knowledge change from L(r) = L(K) to L(K)/2, coda-only − prelude-only around one core (positive: the "
          "coda's knowledge falls less)", None, "no number",
          source="\"Coda alleviates knowledge decay during under-unrolling: Allocating non-recurrent layers to the "
                 "Coda (e.g., 0+2×9+2) substantially mitigates degradation\". Quantity: knowledge; direction: the "
                 "coda falls less; depths: under-unrolling, here L(K) → L(K)/2; at tiny 0+2×3+2 vs 2+2×3+0."),
    Claim("study.prelude_helps_reasoning", "a prelude-heavy allocation extrapolates reasoning better",
          f"{STUDY}: 2+2×9+0, 5+5×3+0 and 4+5×3+1 show strong reasoning extrapolation", "08_looped_lm",
          "reasoning gain from L(r) = L(K) to 2 L(K), prelude-only − coda-only around one core", None, "no number",
          source="\"Prelude-heavy allocations support reasoning extrapolation: Configurations like 2+2×9+0 "
                 "(four-layer) ... show strong reasoning extrapolation\". Quantity: the reasoning gain past the "
                 "horizon; direction: prelude > coda; depths: L(K) → 2 L(K); at tiny 2+2×3+0 vs 0+2×3+2."),
]


# The overthinking setting (notebook 09): tasks that extrapolate in size, where recurrent networks without recall are
# reported to lose their answers as iterations continue. Read with the search tool: the abstract of Bansal et al.
# 2022 (arXiv 2202.05826; NeurIPS 2022 proceedings page), which states the phenomenon and gives no number; their
# tables were not read, so no published number stands beside ours.
OVERTHINKING_SOURCE = ("Bansal et al. 2022, \"End-to-end Algorithm Synthesis with Recurrent Networks: Logical "
                       "Extrapolation Without Overthinking\", arXiv 2202.05826; Schwarzschild et al. 2021, \"Can You "
                       "Learn an Algorithm?\"")
CLAIMS += [
    Claim("overthink.carry_last_overthinks",
          "without recall, carry-last overthinks: on larger instances its accuracy rises, then falls as it iterates",
          f"{OVERTHINKING_SOURCE}: behaviour degenerates when many iterations are applied (\"overthinking\"); recall "
          "and progressive training prevent it (abstract). No published number read", "09_overthinking",
          "carry-last without recall at the largest test size: accuracy at its peak − at the deepest evaluation, the "
          "peak chosen on the other half of the test puzzles", None,
          "no published number read (the abstract, read, gives none; the tables were not read)"),
    Claim("overthink.infiloop_keeps", "InfiLoop keeps what it solved where carry-last overthinks",
          "the paper's thesis carried to this setting: InfiLoop loses none of what it solved where TRM loses 19.7 % "
          "(Fig. 1); the paper reports no size-extrapolation experiment", "09_overthinking",
          "InfiLoop without recall, at the largest test size: of the instances it solved at some update, the share "
          "wrong at the deepest one", _DIAG["lost_after_36_pct"]["TRM"],
          "no overthinking number in the paper: its contrast after the solve, InfiLoop none where TRM loses 19.7 % "
          "(Fig. 1), margin 9.85", absence=True,
          contrast="carry-last's share of what it solved lost by the deepest update − InfiLoop's, both without recall, "
                   "on the same instances (this claim's effect until 2026-12-07)",
          contrast_effect=_DIAG["lost_after_36_pct"]["TRM"] - _DIAG["lost_after_36_pct"]["InfiLoop"],
          contrast_basis="19.7 − 0, the paper's contrast after the solve (Fig. 1)"),
]

CLAIMS_BY_ID = {c.id: c for c in CLAIMS}

# The companion's notebooks the paper's content speaks of, in report order (their numbers): those that check a claim
# and the illustrations. Each notebook is defined by its spec module (infiloop/experiments/notebooks/experiments/),
# which this wing may not import: the claims stay here, keyed by notebook name, and this list follows from them.
NOTEBOOKS = tuple(sorted({c.notebook for c in CLAIMS} | set(ILLUSTRATIONS)))

# The depth at which each claim is decided, as the paper states it (the README's results table shows it): notebook 01
# decides at the training depth and shows matched compute and the best depth on validation beside it
# (analysis/depth_fair.py); every notebook 02 claim names its own depths, as the paper's Fig. 1 does.
_SNAPSHOTS = ("the snapshots at the training depth and twice it (the paper's 36 and 72; 3/4 and 3/2 of it in records "
              "made before 2026-12-05: their ours names the updates)")
_AFTER_SOLVE = "the 36 updates after each puzzle's first solve"
_PERTURBED = ("perturbed at the training depth (at 3/4 of it in records made before 2026-12-05), then as many updates "
              "again")
CLAIM_DEPTHS: dict[str, str] = {
    "main.infiloop_beats_carry_last_sudoku": "training depth (the depth-fair columns of notebook 01 beside it)",
    "depth.infiloop_improves_with_depth": "training depth → the deepest evaluated",
    "depth.carry_last_degrades": "its peak, chosen on held-out puzzles → the deepest evaluated",
    "diagnosis.carry_last_changes_more": _SNAPSHOTS, "diagnosis.carry_last_wrong_cells_grow": _SNAPSHOTS,
    "diagnosis.infiloop_wrong_cells_fall": _SNAPSHOTS, "diagnosis.carry_last_flips_right_cells": _SNAPSHOTS,
    "diagnosis.carry_last_state_moves_after_solve": _AFTER_SOLVE, "diagnosis.carry_last_loses_after_solve":
    _AFTER_SOLVE, "diagnosis.infiloop_keeps_after_solve": _AFTER_SOLVE,
    "gamma.search_below_baseline": "every update before the first solve",
    "gamma.jump_at_solve": "the updates around the first solve", "gamma.score_tracks_correctness": "every update",
    "perturb.infiloop_retains": _PERTURBED, "perturb.carry_last_loses": _PERTURBED,
    "ablation.learned_beats_fixed": "the short budget (the training depth)",
    "ablation.reverse_fails": "the short budget (the training depth)",
    "ablation.both_axes_best": "the long budget (32/3 of the short)",
    "ablation.content_score_matters": "the long budget (32/3 of the short)",
}


def claim_depth(claim_id: str) -> str:
    """The depth at which claim ``claim_id`` is decided (:data:`CLAIM_DEPTHS`; "" where none is named)."""
    return CLAIM_DEPTHS.get(claim_id, "")


def claims_for(notebook: str) -> list[Claim]:
    """The claims a notebook checks, in ``CLAIMS`` order."""
    return [c for c in CLAIMS if c.notebook == notebook]
