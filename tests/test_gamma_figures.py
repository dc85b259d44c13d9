"""Notebook 03's figures and phase terms (analysis/gamma_figures.py, trajectories.gamma_phase_quantities) on a planted
trajectory: what they draw is what the trajectory holds."""

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from infiloop.analysis import gamma_figures  # noqa: E402
from infiloop.analysis import trajectories as analysis  # noqa: E402


def _traj(k=30, p=20, seed=0):
    rng = np.random.default_rng(seed)
    fs = rng.integers(5, 20, p)
    fs[:3] = -1  # never solved
    ups = np.arange(1, k + 1)
    solved = (fs[None, :] > 0) & (ups[:, None] >= fs[None, :])
    gamma = np.where(solved, 0.9, 0.3).astype(np.float32)
    return {"updates": ups, "first_solve": fs.astype(np.int32), "correct": solved,
            "gamma_outer": gamma, "gamma_inner": gamma * 0.5, "score_outer": np.where(solved, 7.0, -1.0),
            "wrong_cells": np.where(solved, 0, 5).astype(np.int16),
            "wrong_cells_candidate": np.where(solved, 0, 5).astype(np.int16),
            "info": np.asarray(json.dumps({"beta": {"outer": 0.4, "inner": 0.5}}))}


def test_phase_quantities_end_with_the_baseline_of_the_seeds_beta():
    t = _traj()
    q = analysis.gamma_phase_quantities(t, "outer", 6, 6)
    assert len(q) == len(analysis.GAMMA_PHASES) + 1
    num, den = q[-1]
    assert np.allclose(num / den, 0.6)  # 1 − β of the outer axis
    search, unsolved = q[0], q[3]
    assert np.isclose(search[0].sum() / search[1].sum(), 0.3) and np.isclose(unsolved[0].sum() / unsolved[1].sum(), 0.3)


def test_figures_draw_the_trajectories():
    by_seed = {0: _traj(seed=0), 1: _traj(seed=1)}
    fig = gamma_figures.gamma_aligned(by_seed, {"outer": 0.6, "inner": 0.5}, 6, 12, 6, "smoke", 20)
    lines = fig.axes[0].get_lines()
    assert any(np.allclose(line.get_ydata(), 0.6) for line in lines)  # the baseline
    aligned = lines[0].get_ydata()
    assert np.allclose(aligned[:6], 0.3) and np.allclose(aligned[6:], 0.9)  # before the solve, then from it
    fig, w0, med0 = gamma_figures.content_score(by_seed, "smoke", 20)
    assert list(w0) == [0, 5] and list(med0) == [7.0, -1.0]
    stats = {"beta": 0.4, "gamma": 0.5, "score_mean": 2.0, "score_sd_cells": 0.1, "score_sd_boards": 0.2,
             "at_clip": 0.0, "score_wrong_corr": -0.5}
    log = [{"step": s, "outer_q_norm": 1.0 + s, **{f"outer_{k}": v for k, v in stats.items()}} for s in (10, 20)]
    dyn = {0: {axis: analysis.connection_dynamics(log, axis) for axis in ("outer", "inner")}}
    fig = gamma_figures.connection_training(dyn, "smoke")
    q_line = fig.axes[0].get_lines()[0]
    assert list(q_line.get_xdata()) == [10, 20] and list(q_line.get_ydata()) == [11.0, 21.0]
