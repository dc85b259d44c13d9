"""What notebook 06 measures of the looped-LM study's conditioners on the reasoner: the learned loop gate, the size of
the learned history and injection maps, and the study's four claims' effects at the longest budget, paired on the
same test puzzles (one training seed per model)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from . import claims as effects
from . import plotting
from .intervals import Interval


def gate_figure(models: dict, device: str, profile: str) -> Figure:
    """The learned loop gate g(t) over t = ℓ / L_infer of the two loop-gated models (mean and 10–90 % of channels)."""
    t = torch.linspace(0, 1, 101)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for r in ("loop_gating", "history_lg"):
        with torch.no_grad():
            g = models[r].cond.loop_gate(t.to(device))[:, 0].cpu().numpy()  # [T, d]
        ax.plot(t, g.mean(1), color=plotting.COLORS[r], label=f"{plotting.LABELS[r]}: mean over channels")
        ax.fill_between(t, np.percentile(g, 10, 1), np.percentile(g, 90, 1), color=plotting.COLORS[r], alpha=0.15)
    ax.axhline(1, color="grey", ls=":", lw=1)
    ax.set(xlabel="t = ℓ / L_infer", ylabel="loop gate g(t) (10–90 % of channels)", ylim=(0, 2))
    ax.legend(fontsize=8, loc="upper right")
    plotting.profile_note(ax, profile)
    fig.tight_layout()
    return fig


def spectral(w: torch.Tensor) -> float:
    """The spectral norm of a matrix map; the largest |entry| of a scalar or channel-wise one."""
    return float(torch.linalg.matrix_norm(w.detach().float().cpu(), ord=2)) if w.ndim == 2 else float(w.abs().max())


LEARNED_COLUMNS = ["model", "learned map (spectral norm; max |.| for scalar or channel maps)"]


def learned_maps(models: dict) -> list[list[str]]:
    """The size of each history model's B_j and of dense injection's W_h − I and W_0."""
    rows = []
    for r in ("history_w1", "history_w2", "history_lg"):
        b = models[r].cond.B
        rows.append([plotting.LABELS[r], ", ".join(f"‖B_{j + 1}‖ = {spectral(b[j]):.3f}" for j in range(len(b)))])
    c = models["inject_dense"].cond
    eye = torch.eye(c.W_h.shape[0], device=c.W_h.device)
    rows.append([plotting.LABELS["inject_dense"],
                 f"‖W_h − I‖ = {spectral(c.W_h - eye):.3f}, ‖W_0‖ = {spectral(c.W_0):.3f}"])
    return rows


def claim_effects(solved_long: dict[str, np.ndarray], at_long: dict[str, float], budget: int, pct
                  ) -> dict[str, tuple[str, Interval]]:
    """The study's four claims at the longest ``budget``: what was measured in words and the effect's interval, from
    each model's solved flags there (``solved_long``) and its accuracy (``at_long``)."""
    def pair(a, b):
        return effects.difference([(solved_long[a], solved_long[b])])

    return {
        "study.history_beats_dense_injection": (
            f"@ {budget}: history (w = 1) {pct(at_long['history_w1'])} vs dense injection "
            f"{pct(at_long['inject_dense'])}", pair("history_w1", "inject_dense")),
        "study.window_one_best": (
            f"@ {budget}: w = 1 {pct(at_long['history_w1'])} vs w = 2 {pct(at_long['history_w2'])}",
            pair("history_w1", "history_w2")),
        "study.loop_gating_helps": (
            f"@ {budget}: loop gating {pct(at_long['loop_gating'])} vs unconditioned {pct(at_long['carry_last'])}",
            pair("loop_gating", "carry_last")),
        "study.history_lg_best_pair": (
            f"@ {budget}: history + LG {pct(at_long['history_lg'])} vs history {pct(at_long['history_w1'])}, "
            f"LG {pct(at_long['loop_gating'])}",
            effects.lead_over_best([[solved_long[k] for k in ("history_lg", "history_w1", "loop_gating")]])),
    }
