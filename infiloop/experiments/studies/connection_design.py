"""The connection study's design (docs/connection-study.md): the profile and task it trains, its connections and
seeds, the two blocks, the connection as built before the study, and the variants, each changing one thing about how
the connection is trained; a model's run-cache overrides. ``connection_study.py`` runs the study, ``score_verdict.py``
asks whether a variant's outer score tells right boards from wrong ones."""

from __future__ import annotations

PROFILE = "search"
TASK = "sudoku"
CONNECTIONS = ("carry_last", "infiloop")
SEEDS = (0, 1)  # the training seeds of a row unless named (--seeds)

# The two blocks: TRM's Sudoku block for the search profile's 1,500 steps, and the paper's attention block
# (that of the gpu and paper profiles) for 800; the training cell accuracy is read at these steps.
BLOCKS: dict[str, dict] = {
    "mlp": {"overrides": {"train.steps": 1500}, "read_at": (400, 800, 1200, 1500)},
    "attention": {"overrides": {"train.steps": 800, "model.mixer": "attention"}, "read_at": (200, 400, 600, 800)},
}


def _both(key: str, value) -> dict:
    return {f"model.inner.{key}": value, f"model.outer.{key}": value}


# The connection as it was built before this study: every variant states all three switches, so that its runs
# do not change when the recipes' defaults do (the recipes now train the study's choice, `no_z0_history_cand`).
AS_BUILT = {**_both("z0_candidate", True), **_both("history_grad", False), "train.candidate_loss": 0.0}

# Each variant: a label, the overrides over the profile (over AS_BUILT), and whether carry-last has the setting
# too ("shared": its own carry-last runs are trained) or not (compared with the baseline's carry-last).
VARIANTS: dict[str, dict] = {
    "baseline": {"label": "as built (hard clip at 8, z_0 a candidate, history detached, loss on h_t)",
                 "overrides": {}, "shared": True},
    "history_grad": {"label": "gradient of log D_{t-1} through the history's scores and ages",
                     "overrides": _both("history_grad", True), "shared": False},
    "soft_cap": {"label": "soft cap 8 tanh(s / 8) instead of the hard clip",
                 "overrides": _both("clip_mode", "soft"), "shared": False},
    "no_clip": {"label": "no clip", "overrides": _both("score_clip", None), "shared": False},
    "no_z0": {"label": "the initial state is not a candidate (gamma_1 = 1)",
              "overrides": _both("z0_candidate", False), "shared": False},
    "no_decay_conn": {"label": "no weight decay on q and rho", "overrides": {"train.decay": "no_connections"},
                      "shared": False},
    "candidate_loss": {"label": "loss on the candidate z_t as well (weight 0.5)",
                       "overrides": {"train.candidate_loss": 0.5}, "shared": False},
    "grad_outer_2": {"label": "gradients through both outer updates of a segment (grad_outer = H = 2)",
                     "overrides": {"model.grad_outer": 2}, "shared": True},
    # where the block's learning stalls: InfiLoop on one axis only (the paper's axis ablation), and a fixed
    # step size equal to InfiLoop's at initialisation (q = 0: gamma -> 1 - beta_0 = 0.45) on both axes
    "outer_only": {"label": "InfiLoop on the outer axis only (inner: carry-last)",
                   "overrides": {"model.inner.name": "carry_last"}, "shared": False},
    "inner_only": {"label": "InfiLoop on the inner axis only (outer: carry-last)",
                   "overrides": {"model.outer.name": "carry_last"}, "shared": False},
    "fixed_step": {"label": "a fixed step size 0.45 on both axes (InfiLoop at initialisation, no learning)",
                   "overrides": {**_both("name", "ema"), **_both("gamma", 0.45)}, "shared": False},
    # combinations of the single changes
    "no_z0_history": {"label": "z_0 not a candidate + history gradient",
                      "overrides": {**_both("z0_candidate", False), **_both("history_grad", True)}, "shared": False},
    "no_z0_cand": {"label": "z_0 not a candidate + candidate loss",
                   "overrides": {**_both("z0_candidate", False), "train.candidate_loss": 0.5}, "shared": False},
    "no_z0_history_cand": {"label": "z_0 not a candidate + history gradient + candidate loss",
                           "overrides": {**_both("z0_candidate", False), **_both("history_grad", True),
                                         "train.candidate_loss": 0.5}, "shared": False},
    "history_grad_soft": {"label": "history gradient and soft cap",
                          "overrides": {**_both("history_grad", True), **_both("clip_mode", "soft")},
                          "shared": False},
}
# carry-last has no content score, clip, initial-state weight or history gradient, and its candidate is its
# state (the candidate loss is the same loss): such variants reuse the baseline's carry-last runs.


def check_variant(name: str) -> dict:
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name]


def overrides(variant: str, block: str, seed: int) -> dict:
    """The run-cache overrides of one model of the study: the block's, the as-built switches, the variant's."""
    return {**BLOCKS[block]["overrides"], **AS_BUILT, **check_variant(variant)["overrides"], "train.seed": seed}


def models(variant: str, block: str, seed: int) -> list[tuple[str, str]]:
    """(recipe, variant whose run it is) for the two connections of a variant: carry-last of a variant
    that carry-last does not share is the baseline's."""
    own = "carry_last" if check_variant(variant)["shared"] else None
    return [("carry_last", variant if own else "baseline"), ("infiloop", variant)]
