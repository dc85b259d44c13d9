"""Notebook 03's figures of the learned connection, drawn from recorded trajectories and training logs: γ aligned to
the first solve (the paper's Fig. 3a), the content score against the candidate's wrong cells, and the connection
during training."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from . import paper, plotting
from . import trajectories as analysis

STYLES = ("-", "--", ":", "-.")  # one line style per training seed


def gamma_aligned(by_seed: dict, baseline: dict[str, float], before: int, after: int, settle: int, profile: str,
                  n_puzzles: int) -> Figure:
    """Mean γ_t of both axes aligned to the first solve, per seed, with the equal-weight baseline 1 − β and the
    never-solved puzzles' mean."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    several = len(by_seed) > 1
    for ax, axis in zip(axes, ("outer", "inner")):
        for i, (s, t) in enumerate(by_seed.items()):
            off, g, _ = analysis.aligned_to_first_solve(t, f"gamma_{axis}", before, after)
            ax.plot(off, g, color=plotting.COLORS["infiloop"], marker=".", alpha=1.0 if i == 0 else 0.5,
                    ls=STYLES[i % 4], label="solved puzzles (mean" + (f", seed {s})" if several else ")"))
        ax.axhline(baseline[axis], color="grey", ls="--", lw=1,
                   label=f"equal-weight baseline 1 − β = {baseline[axis]:.2f}" + (" (mean)" if several else ""))
        unsolved = [analysis.gamma_phases(t, axis, before, settle)["unsolved"] for t in by_seed.values()]
        if any(u == u for u in unsolved):
            mean = float(np.nanmean(unsolved))
            ax.axhline(mean, color=plotting.COLORS["carry_last"], ls=":",
                       label=f"never-solved puzzles (mean {mean:.2f})")
        ax.axvline(0, color="black", lw=0.5)
        ax.set(title=f"{axis} axis", xlabel="updates from the first solve", ylim=(0, 1))
        ax.legend(loc="lower right", fontsize=8)
    axes[0].set_ylabel("γ_t (mean over cells)")
    plotting.profile_note(axes[1], profile, n_puzzles)
    fig.tight_layout()
    return fig


def content_score(by_seed: dict, profile: str, n_puzzles: int) -> tuple[Figure, np.ndarray, np.ndarray]:
    """The median content score s_t against the wrong cells of the candidate z_t it scores (the state h_t may still
    hold an older board when the candidate was rejected), per seed, beside the paper's medians; returns the figure
    and the first seed's wrong-cell counts and medians."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    first = None
    for i, (s, t) in enumerate(by_seed.items()):
        by_wrong = analysis.score_by_wrong_cells(t, "outer", of="candidate")
        w = np.array(sorted(by_wrong))
        med = np.array([by_wrong[k][0] for k in w])
        first = first or (w, med)
        ax.plot(w, med, marker="o", color=plotting.COLORS["infiloop"], alpha=1.0 if i == 0 else 0.5, ls=STYLES[i % 4],
                label="this run (median over updates and puzzles" + (f", seed {s})" if len(by_seed) > 1 else ")"))
    pw = sorted(paper.GAMMA["content_score_median"].items())
    ax.plot([k for k, _ in pw], [v for _, v in pw], color=plotting.COLORS["paper"], label="paper (9x9)",
            **plotting.PAPER_STYLE)
    ax.axhline(paper.GAMMA["score_clip"], color="grey", ls=":", lw=1)
    ax.text(first[0].max(), paper.GAMMA["score_clip"], "clip 8.0", ha="right", va="bottom", fontsize=8, color="grey")
    ax.set(xlabel="wrong cells of the candidate z_t", ylabel="content score ln e_t (outer axis)")
    ax.legend(fontsize=8)
    plotting.profile_note(ax, profile, n_puzzles)
    fig.tight_layout()
    return fig, first[0], first[1]


PAPER_BOARD_CELLS = 81  # the paper's medians are by wrong cells of 9x9 boards


def score_medians(by_seed: dict, cells: int) -> list[tuple[int, int, float, float]]:
    """The paper's measure of the content score, ours beside it: the median outer score over every update, puzzle and
    seed, paired with the candidate's wrong cells, at the counts that stand where the paper's 0, 20 and 33 wrong cells
    stand on its 81-cell boards (the same share of ``cells``; the nearest count above 0 that occurs; right boards only
    at 0, NaN where no candidate was right). Returns [(our count, the paper's count, our median, the paper's
    median)]."""
    s = np.concatenate([t["score_outer"].astype(np.float64).ravel() for t in by_seed.values()])
    w = np.concatenate([t["wrong_cells_candidate"].ravel() for t in by_seed.values()])
    wrong = np.unique(w[w > 0])
    out = []
    for k, median in sorted(paper.GAMMA["content_score_median"].items()):
        ours = 0 if k == 0 or not wrong.size else int(wrong[np.argmin(np.abs(wrong - k * cells / PAPER_BOARD_CELLS))])
        hit = w == ours
        out.append((ours, k, float(np.median(s[hit])) if hit.any() else float("nan"), median))
    return out


def score_medians_text(medians: list[tuple[int, int, float, float]], cells: int) -> str:
    """:func:`score_medians` in words: ``median -0.22 / -0.25 / -0.30 at 0 / 9 / 15 wrong cells of 36 (the paper: 7.25
    / 2.75 / -0.58 at 0 / 20 / 33 of 81)``."""
    def join(i, fmt):
        return " / ".join(format(m[i], fmt) for m in medians)

    return (f"median {join(2, '.2f')} at {join(0, 'd')} wrong cells of {cells} (the paper: {join(3, 'g')} at "
            f"{join(1, 'd')} of {PAPER_BOARD_CELLS})")


TRAINING_PANELS = [("q_norm", "|q|"), ("beta", "β"), ("gamma", "mean γ_t"),
                   ("score_mean", "raw score (mean ± sd over cells)"), ("at_clip", "share of raw scores ≥ clip"),
                   ("score_wrong_corr", "rank corr. score vs wrong cells")]


def connection_training(dynamics: dict, profile: str) -> Figure:
    """What each axis's connection learned during training (``trajectories.connection_dynamics`` per seed and axis):
    |q|, β, mean γ, the raw score with its spread over cells, the share at the clip, the score's rank correlation."""
    fig, axes = plt.subplots(2, 3, figsize=(14, 7), sharex=True)
    for ax, (key, title) in zip(axes.ravel(), TRAINING_PANELS):
        for i, (s, by_axis) in enumerate(dynamics.items()):
            for axis, color in (("outer", plotting.COLORS["infiloop"]), ("inner", plotting.COLORS["fprm"])):
                d = by_axis[axis]
                if not np.isfinite(d[key]).any():
                    continue
                ax.plot(d["step"], d[key], color=color, ls=STYLES[i % 4],
                        label=axis + (f", seed {s}" if len(dynamics) > 1 else ""))
                if key == "score_mean":
                    ax.fill_between(d["step"], d[key] - d["score_sd_cells"], d[key] + d["score_sd_cells"],
                                    color=color, alpha=0.15)
        if key == "score_mean":
            ax.axhline(paper.GAMMA["score_clip"], color="grey", ls=":", lw=1)
        if key == "score_wrong_corr":
            ax.axhline(0.0, color="grey", lw=0.5)
        ax.set(title=title)
    for ax in axes[1]:
        ax.set_xlabel("training step")
    axes[0, 0].legend(fontsize=8)
    plotting.profile_note(fig, profile)
    fig.tight_layout()
    return fig
