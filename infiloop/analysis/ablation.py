"""What notebook 05 measures of the ablations (the paper's decay-mode, β₀, axis and content-score tables): the
paper's row of each variant, the table beside ours, the bar figure, and the four claims' effects, each paired on the
same test puzzles (every variant is evaluated on them)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from . import claims as effects
from . import paper, plotting
from .intervals import Interval

LEARNED = "beta0_0.55"  # the learned decay from β₀ = 0.55: the paper's default
OTHER_DECAYS = ("fixed_0.55", "uniform", "reverse_1.82")


def paper_rows(ablations: dict[str, dict]) -> dict[str, tuple]:
    """The paper's (H3 L6, H32 L6) accuracy of each variant (``ablations[key]["paper"]`` names its row), or
    (None, None) where the paper has none."""
    decay = {("decay", d["decay"], d["beta"]): (d["H3L6"], d["H32L6"]) for d in paper.ABLATION_DECAY}
    out = {}
    for key, a in ablations.items():
        ref = a["paper"]
        out[key] = (None, None) if ref is None else (
            decay[ref] if ref[0] == "decay" else tuple(paper.ABLATION_AXES[ref[1]].values()))
    return out


def _beta(b: dict, axis: str) -> str:
    return f"{b[axis]:.3f}" if axis in b else "– (carry-last)"


def _pct(v) -> str:
    return "–" if v is None else f"{v:.1f} %"


def table(acc: dict, label: dict, rows_paper: dict, short: int, long: int, pct) -> tuple[list[str], list[list]]:
    """Each variant's learned β, its accuracy at both budgets (``acc[key]`` = (short, long, β)) and the paper's."""
    cols = ["variant", "learned β (outer / inner)", f"ours @ {short}", f"ours @ {long}", "paper H3 L6",
            "paper H32 L6"]
    rows = [[label[k], f"{_beta(b, 'outer')} / {_beta(b, 'inner')}", pct(s), pct(lg), _pct(rows_paper[k][0]),
             _pct(rows_paper[k][1])] for k, (s, lg, b) in acc.items()]
    return cols, rows


def bars(acc: dict, label: dict, rows_paper: dict, short: int, long: int, profile: str, n_puzzles: int) -> Figure:
    """Exact accuracy of each variant at both budgets beside the paper's H3 L6 numbers."""
    fig, ax = plt.subplots(figsize=(11, 4.2))
    names = list(acc)
    x = np.arange(len(names))
    ax.bar(x - 0.3, [100 * acc[n][0] for n in names], 0.3, color=plotting.COLORS["infiloop"], alpha=0.6,
           label=f"this run after {short} outer updates (the short budget, as the paper's H = 3)")
    ax.bar(x, [100 * acc[n][1] for n in names], 0.3, color=plotting.COLORS["infiloop"],
           label=f"this run after {long} outer updates ({long / short:.3g} x as many, as the paper's H = 32)")
    ax.bar(x + 0.3, [rows_paper[n][0] or 0 for n in names], 0.3, color=plotting.COLORS["paper"], alpha=0.5,
           label="paper H3 L6 (9x9)")
    ax.set_xticks(x, [label[n] for n in names], rotation=25, ha="right")
    ax.set(ylabel="exact accuracy (%)", ylim=(0, 100))
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2, frameon=False)  # above the bars
    plotting.profile_note(ax, profile, n_puzzles)
    fig.tight_layout()
    return fig


def claim_effects(solved: dict[str, tuple]) -> dict[str, Interval]:
    """The four ablation claims' effects from ``solved[key]`` = (solved flags at the short budget, at the long one)
    of one seed: learned − the best other decay and learned − reverse at the short budget, both axes − the better
    single axis and with − without the content score at the long one."""
    def at(keys, budget):
        return [[solved[k][budget] for k in keys]]

    return {
        "ablation.learned_beats_fixed": effects.lead_over_best(at([LEARNED, *OTHER_DECAYS], 0)),
        "ablation.reverse_fails": effects.difference([tuple(at([LEARNED, "reverse_1.82"], 0)[0])]),
        "ablation.both_axes_best": effects.lead_over_best(at([LEARNED, "inner_only", "outer_only"], 1)),
        "ablation.content_score_matters": effects.difference([tuple(at([LEARNED, "no_content_score"], 1)[0])]),
    }


def claim_texts(s: dict, lg: dict, long: int, pct) -> dict[str, str]:
    """What each claim measured, in words (``s``, ``lg``: each variant's accuracy at the short and long budget)."""
    b = LEARNED
    return {
        "ablation.learned_beats_fixed": f"{pct(s[b])} vs fixed {pct(s['fixed_0.55'])} / uniform {pct(s['uniform'])} / "
                                        f"reverse {pct(s['reverse_1.82'])}",
        "ablation.reverse_fails": f"reverse {pct(s['reverse_1.82'])} vs learned {pct(s[b])}",
        "ablation.both_axes_best": f"{pct(s[b])} / {pct(lg[b])} vs inner {pct(s['inner_only'])} / "
                                   f"{pct(lg['inner_only'])}, outer {pct(s['outer_only'])} / {pct(lg['outer_only'])}",
        "ablation.content_score_matters": f"{pct(lg[b])} with, {pct(lg['no_content_score'])} without (@ {long})",
    }
