"""Where the content score's separation of right from wrong boards comes from (``trajectories.separation_held``)."""

from __future__ import annotations

import numpy as np
import pytest

from infiloop.analysis import trajectories


def _pairs_auroc(right, wrong) -> float:
    d = np.asarray(right, np.float64)[:, None] - np.asarray(wrong, np.float64)[None, :]
    return float((d > 0).mean() + 0.5 * (d == 0).mean())


def _solving(k: int = 40, p: int = 30, seed: int = 0) -> np.ndarray:
    """[K, P] wrong cells: puzzle i is wrong (3 cells) until its solve at a drawn update, right after."""
    solve = np.random.default_rng(seed).integers(5, k - 5, p)
    return np.where(np.arange(k)[:, None] < solve[None, :], 3, 0)


def test_a_score_that_only_drifts_with_the_update_separates_over_every_update_but_not_within_one():
    wrong = _solving()
    drift = np.broadcast_to(np.arange(wrong.shape[0], dtype=np.float64)[:, None], wrong.shape).copy()
    out = trajectories.separation_held({"score_outer": drift, "wrong_cells_candidate": wrong})
    assert out["every_update"] == pytest.approx(_pairs_auroc(drift[wrong == 0], drift[wrong > 0]), abs=1e-12)
    assert out["every_update"] > 0.9  # right boards come late, and late scores are high
    assert out["within_update"] == pytest.approx(0.5, abs=1e-12)  # at one update every board scores the same
    assert out["higher_when_right"] == 1.0  # within a puzzle time and correctness still go together
    assert out["updates"] == int(((wrong == 0).any(1) & (wrong > 0).any(1)).sum())


def test_a_score_that_tracks_correctness_separates_within_each_update_and_each_puzzle():
    wrong = _solving(seed=1)
    rng = np.random.default_rng(2)
    score = np.where(wrong == 0, -1.0, 1.0) + 0.1 * rng.normal(size=wrong.shape)  # right boards score lower
    out = trajectories.separation_held({"score_outer": score, "wrong_cells_candidate": wrong})
    held = [_pairs_auroc(score[k][wrong[k] == 0], score[k][wrong[k] > 0]) for k in range(len(score))
            if (wrong[k] == 0).any() and (wrong[k] > 0).any()]
    assert out["within_update"] == pytest.approx(np.mean(held), abs=1e-12) and out["within_update"] < 0.01
    assert out["higher_when_right"] == 0.0 and out["puzzles"] == wrong.shape[1]
    never = trajectories.separation_held({"score_outer": score, "wrong_cells_candidate": wrong + 1})
    assert np.isnan(never["every_update"]) and never["updates"] == 0 and never["puzzles"] == 0
