"""Notebook 05's analysis (analysis/ablation.py): the paper's row of each variant, the table, and the four claims'
effects on planted solved flags, each landing on the side the flags put it."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from infiloop.analysis import ablation  # noqa: E402
from infiloop.experiments.settings.recipes import ABLATIONS  # noqa: E402


def test_paper_rows_and_table():
    rows = ablation.paper_rows(ABLATIONS)
    assert rows["beta0_0.55"] == (82.1, 89.7) and rows["reverse_1.82"] == (2.0, None)
    assert set(rows) == set(ABLATIONS)
    acc = {k: (0.5, 0.6, {"outer": 0.4} if k != "outer_only" else {}) for k in ABLATIONS}
    label = {k: a["label"] for k, a in ABLATIONS.items()}
    cols, table = ablation.table(acc, label, rows, 16, 170, lambda v: f"{100 * v:.1f} %")
    assert cols[2:4] == ["ours @ 16", "ours @ 170"] and len(table) == len(ABLATIONS)
    learned = next(r for r in table if r[0] == label["beta0_0.55"])
    assert learned[4:] == ["82.1 %", "89.7 %"] and learned[1].startswith("0.400 / –")
    fig = ablation.bars(acc, label, rows, 16, 170, "smoke", 64)
    assert len(fig.axes[0].patches) == 3 * len(ABLATIONS)


def test_claim_effects_follow_the_flags():
    rng = np.random.default_rng(0)
    p = 400
    base = rng.random(p) < 0.5
    better = base | (rng.random(p) < 0.5)
    solved = {k: (base.astype(float), base.astype(float)) for k in ABLATIONS}
    solved["beta0_0.55"] = (better.astype(float), better.astype(float))  # the learned decay solves more
    got = ablation.claim_effects(solved)
    assert set(got) == {"ablation.learned_beats_fixed", "ablation.reverse_fails", "ablation.both_axes_best",
                        "ablation.content_score_matters"}
    assert all(iv.lo > 0 for iv in got.values())
    solved["beta0_0.55"] = (base.astype(float) * 0, base.astype(float) * 0)  # and now solves nothing
    assert all(iv.hi < 0 for iv in ablation.claim_effects(solved).values())
    s = {k: 0.5 for k in ABLATIONS}
    texts = ablation.claim_texts(s, s, 170, lambda v: f"{100 * v:.1f} %")
    assert texts["ablation.content_score_matters"] == "50.0 % with, 50.0 % without (@ 170)"


def test_conditioning_claims_follow_the_flags():
    """Notebook 06's claims (analysis/conditioning.py) on planted flags: each effect on the side the flags put it."""
    import torch

    from infiloop.analysis import conditioning

    rng = np.random.default_rng(1)
    base = rng.random(300) < 0.4
    more = (base | (rng.random(300) < 0.5)).astype(float)
    keys = ("history_w1", "history_w2", "inject_dense", "loop_gating", "carry_last", "history_lg")
    solved = {k: base.astype(float) for k in keys}
    solved.update(history_w1=more, loop_gating=more)
    got = conditioning.claim_effects(solved, {k: float(v.mean()) for k, v in solved.items()}, 64,
                                     lambda v: f"{100 * v:.1f} %")
    assert got["study.history_beats_dense_injection"][1].lo > 0 and got["study.window_one_best"][1].lo > 0
    assert got["study.loop_gating_helps"][1].lo > 0
    assert got["study.history_lg_best_pair"][1].hi < 0  # history + LG below the better of its parts
    assert got["study.window_one_best"][0].startswith("@ 64: w = 1 ")
    assert conditioning.spectral(torch.diag(torch.tensor([3.0, -1.0]))) == 3.0
    assert conditioning.spectral(torch.tensor([0.5, -2.0])) == 2.0
