"""The overthinking measures of notebook 09 (infiloop/analysis/overthinking.py) on planted trajectories: a model that
solves and then loses its instances overthinks, one that keeps them does not, and the contrast says which."""

import numpy as np
import pytest

from infiloop.analysis import intervals, overthinking, plotting


def _trajs(kind: str, k: int = 20, p: int = 200, seeds: int = 3) -> list[dict]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(seeds):
        solve = rng.integers(1, k // 2, p)  # each instance's first solve
        ups = np.arange(1, k + 1)
        correct = ups[:, None] >= solve[None, :]
        if kind == "overthinks":  # most are lost again at the second half
            correct &= ~((ups[:, None] > k // 2) & (rng.random(p) < 0.7)[None, :])
        if kind == "solves_less_loses_all":  # a third ever solved, every one of them lost at the second half
            solve = np.where(rng.random(p) < 1 / 3, solve, k + 1)
            correct = (ups[:, None] >= solve[None, :]) & (ups[:, None] <= k // 2)
        g = np.where(correct, 0.1, 0.6).astype(np.float32)
        out.append({"updates": ups.astype(np.int32), "correct": correct, "first_solve": solve.astype(np.int32),
                    "gamma_outer": g, "score_outer": np.where(correct, 7.0, 1.0).astype(np.float32)})
    return out


def test_a_model_that_loses_what_it_solved_overthinks_and_one_that_keeps_does_not():
    lose, keep = overthinking.measures(_trajs("overthinks")), overthinking.measures(_trajs("keeps"))
    assert intervals.verdict(lose.fall) is True and lose.fall.value > 0.5  # falls from its held-out peak
    assert lose.lost.value > 0.5 and keep.lost.value == 0 and keep.fall.value == 0
    assert keep.at(keep.peak).value == 1.0 and keep.at(20).value == 1.0
    assert 1 <= lose.peak <= 11 and lose.at(lose.peak).value > lose.at(20).value
    contrast = overthinking.fall_contrast(_trajs("overthinks"), _trajs("keeps"))
    assert intervals.verdict(contrast) is True  # the first falls more than the second
    assert intervals.verdict(overthinking.fall_contrast(_trajs("keeps"), _trajs("overthinks"))) is False
    kept = overthinking.lost_contrast(_trajs("overthinks"), _trajs("keeps"))
    assert intervals.verdict(kept) is True and abs(kept.value - lose.lost.value) < 0.02  # keep loses none
    assert intervals.verdict(overthinking.lost_contrast(_trajs("keeps"), _trajs("overthinks"))) is False
    text = overthinking.statement(lose, keep, kept, contrast, 40)
    assert "carry-last without recall does overthink" in text and "InfiLoop does keep more" in text


def test_a_model_that_solved_less_and_lost_all_of_it_falls_less_but_does_not_keep_more():
    """Why the InfiLoop claim reads the share of solved instances lost, not the fall (docs/overthinking.md): a model
    that solves a third of what carry-last solves and loses every one falls less, and keeps nothing."""
    cl, less = _trajs("overthinks"), _trajs("solves_less_loses_all")
    m = overthinking.measures(less)
    assert m.lost.value == 1.0 and m.at(20).value == 0
    assert intervals.verdict(overthinking.fall_contrast(cl, less)) is True  # "falls less"
    kept = overthinking.lost_contrast(cl, less)
    assert kept.value < 0 and intervals.verdict(kept) is False  # loses a larger share of what it solved
    text = overthinking.statement(overthinking.measures(cl), m, kept, overthinking.fall_contrast(cl, less), 40)
    assert "InfiLoop does not keep more" in text


def test_table_gamma_and_labels():
    labels = {r: overthinking.label(r, plotting.LABELS) for r in ("carry_last_no_recall", "infiloop_recall")}
    assert labels == {"carry_last_no_recall": f"{plotting.LABELS['carry_last']}, no recall",
                      "infiloop_recall": f"{plotting.LABELS['infiloop']}, recall"}
    ms = {"carry_last_no_recall": overthinking.measures(_trajs("overthinks")),
          "infiloop_recall": overthinking.measures(_trajs("keeps"))}
    cols, rows = overthinking.table(ms, labels, depth=8)
    assert cols[1] == "@ training depth (8)" and cols[3] == "@ 20 updates" and len(rows) == 2
    assert rows[1][3].startswith("100.0 %") and rows[1][5].startswith("0.0 %")
    g = overthinking.gamma_along(_trajs("keeps"))
    assert np.allclose(g["gamma_outer_right"][-1], 0.1) and np.isnan(g["gamma_outer_wrong"][-1])
    assert np.allclose(g["score_outer_wrong"][0], 1.0)


def _solved_then_lost(after: int, k: int = 40, p: int = 60, seeds: int = 3) -> list[dict]:
    """Every instance solved at a random update of the first ten and wrong from ``after`` updates after its solve on:
    by the deepest update every model of this kind has lost all it solved, whatever ``after`` is."""
    rng = np.random.default_rng(after)
    out = []
    for _ in range(seeds):
        solve = rng.integers(1, 11, p)
        ups = np.arange(1, k + 1)
        correct = (ups[:, None] >= solve[None, :]) & (ups[:, None] < (solve + after)[None, :])
        out.append({"updates": ups.astype(np.int32), "correct": correct, "first_solve": solve.astype(np.int32)})
    return out


def test_window_terms_read_each_instance_a_fixed_distance_after_its_own_solve():
    correct = np.array([[0, 0, 1, 0], [1, 0, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0]], bool)  # 5 updates
    t = {"updates": np.arange(1, 6), "correct": correct, "first_solve": np.array([2, 4, 1, -1], np.int32)}
    lost, room = overthinking.window_terms(t, 2)
    # solved at 2 (read at 4: right), at 4 (read at 6: no room), at 1 (read at 3: wrong), never solved (no room)
    assert room.tolist() == [True, False, True, False] and lost.tolist() == [False, False, True, False]
    lost, room = overthinking.window_terms(t, 3)  # at 5: instance 0 wrong; instance 2 read at 4: wrong
    assert room.tolist() == [True, False, True, False] and lost.tolist() == [True, False, True, False]
    t["updates"] = np.array([1, 2, 4, 8, 16])
    with pytest.raises(ValueError, match="every update"):
        overthinking.window_terms(t, 2)


def test_the_read_after_the_solve_tells_apart_models_that_both_end_at_zero():
    """Both models lose everything they solved by the deepest update (the `overthink` record's 100 % and 100 %, a
    difference of 0 that says nothing): read 4 updates after each instance's solve, the one that loses at once differs
    from the one that holds its answers for 20 updates; at 36, both have lost them."""
    fast, slow = _solved_then_lost(2), _solved_then_lost(20)
    at_end = overthinking.lost_contrast(fast, slow)
    assert at_end.value == 0 and at_end.lo < 0 < at_end.hi and intervals.verdict(at_end) is None
    early = overthinking.window_contrast(fast, slow, 4)
    assert early.value == pytest.approx(1.0) and intervals.verdict(early) is True
    late = overthinking.window_contrast(fast, slow, 32)  # 32 >= 20: both wrong by then, where they have room
    assert late.value == 0 and intervals.verdict(late) is None
    labels = {"fast": "fast", "slow": "slow"}
    cols, rows = overthinking.window_table({"fast": fast, "slow": slow}, [("fast", "slow")], labels, (4, 32))
    assert cols == overthinking.WINDOW_COLUMNS and [r[1] for r in rows] == [
        "4 updates after the first solve", "32 updates after the first solve", "at update 40 (the claim's read)"]
    assert rows[0][2].startswith("100.0 %") and rows[0][3].startswith("0.0 %") and rows[0][4].startswith("+100.0")
    assert rows[0][2].endswith("of 60 / 60 / 60")  # every instance solved by update 10 has 4 updates left
    # instances solved after update 8 have no 32 updates left: the counts per seed say how many were read
    assert all(int(n) < 60 for n in rows[1][2].split(" of ")[1].split(" / "))


@pytest.mark.parametrize("infiloop, carry_last, verdict", [("keeps", "overthinks", "agrees"),
                                                           ("solves_less_loses_all", "overthinks", "differs"),
                                                           ("overthinks", "keeps", "differs")])
def test_the_keep_claim_is_infiloops_own_loss_against_the_margin(infiloop, carry_last, verdict):
    """overthink.infiloop_keeps since 2026-12-07 (notebook 09): InfiLoop's own share of what it solved lost by the
    deepest update, against half the paper's 19.7 %; testable because some model (here carry-last or InfiLoop itself)
    loses more than that margin. A model that keeps everything agrees; one that loses what it solved differs."""
    from infiloop.analysis import claims

    own, why = overthinking.infiloop_keeps(_trajs(carry_last), _trajs(infiloop))
    assert why == "" and intervals.outcome(own, 0.197, absence=True) == verdict
    c = claims.claim_dict("overthink.infiloop_keeps", "ours", effect=own, untestable=why, seeds=[0, 1, 2])
    assert c["verdict"] == verdict and c["data"]["guard"] is not None
    text = overthinking.statement(overthinking.measures(_trajs(carry_last)), overthinking.measures(_trajs(infiloop)),
                                  overthinking.lost_contrast(_trajs(carry_last), _trajs(infiloop)),
                                  overthinking.fall_contrast(_trajs(carry_last), _trajs(infiloop)), 40, own, why)
    assert text.endswith(f"{verdict}.") and "9.85 %" in text
    calm, why = overthinking.infiloop_keeps(_trajs("keeps"), _trajs("keeps"))  # nobody loses: nothing to keep against
    assert "cost no model more than 9.85 %" in why
