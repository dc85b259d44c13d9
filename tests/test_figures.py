"""What the figures draw: the profile note under every axes and legend (never over a bar or a legend), notebook 08's
depth ticks apart from one another."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from infiloop.analysis import ablation, plotting  # noqa: E402


def _occupied(fig, renderer) -> list[Bbox]:
    """Every axes of ``fig`` with its labels, and every axes' legend, as drawn."""
    return [a.get_tightbbox(renderer) for a in fig.axes] + [lg.get_window_extent(renderer) for a in fig.axes
                                                            for lg in [a.get_legend()] if lg is not None]


def _ablation_figure():
    """Notebook 05's bars (the note once lay over the legend and the bars at the lower right)."""
    names = [f"variant {k}" for k in range(6)]
    acc = {n: (0.9, 0.95, None) for n in names}
    return ablation.bars(acc, {n: n for n in names}, {n: (95.0, 97.0) for n in names}, 16, 48, "smoke", 64)


def _panels_figure():
    """Two panels, a legend at the lower right of one and outside the other (as notebook 06's), the note stamped on the
    axes whose legend it once covered."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax in axes:
        ax.plot(np.arange(10), np.linspace(0, 1, 10), label="a curve")
        ax.set_xlabel("outer updates")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes[1].legend(loc="lower right")
    fig.tight_layout()
    return fig, axes[1]


@pytest.mark.parametrize("make", ["ablation", "panels", "figure"])
def test_the_profile_note_lies_under_every_axes_and_legend(make):
    plotting.use_style()
    if make == "ablation":
        fig = _ablation_figure()
        note = next(a for a in fig.artists if "profile: smoke" in getattr(a, "get_text", lambda: "")())
    else:
        fig, ax = _panels_figure()
        note = plotting.profile_note(ax if make == "panels" else fig, "smoke", 64)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # draws it, as the notebooks save it (bbox tight)
    renderer = fig.canvas.get_renderer()
    box = note.get_window_extent(renderer)
    assert note.get_text() == "profile: smoke · 64 puzzles"
    hit = [b for b in _occupied(fig, renderer) if b.overlaps(box)]
    assert not hit, f"the note {box} covers {hit}"
    assert fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans).contains(box.x1 - 1, box.y0 + 1), \
        "the saved figure (bbox tight) cuts the note off"
    plt.close(fig)


def _tick_overlaps(labels_of, profile: str) -> list[tuple[str, str]]:
    """Notebook 08's loop figure at ``profile``'s depths (two log panels, 11 x 4 inches), each depth labelled by
    ``labels_of(ax, loops, k, depths)``: the pairs of tick labels whose boxes overlap once drawn."""
    from infiloop.experiments import looplm
    from infiloop.experiments.notebooks.manifest import needs

    g = needs("08", profile).derived["grid"]
    loops, k = g.loops(g.base), looplm.allocation(g.base)[2]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax in axes:
        ax.plot(g.depths, np.linspace(20, 80, len(g.depths)), marker="o")
        ax.set(xscale="log", xlabel="effective depth L(r) at test time", ylim=(0, 100))
        labels_of(ax, loops, k, g.depths)
    fig.suptitle("a title as long as the notebook's, trained at L(K), run to L(r)")
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    hits = []
    for ax in axes:
        ticks = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        assert len(ticks) == len(g.depths)
        boxes = [t.get_window_extent(renderer) for t in ticks]
        hits += [(ticks[i].get_text(), ticks[j].get_text()) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
                 if boxes[i].overlaps(boxes[j])]
    plt.close(fig)
    return hits


@pytest.mark.parametrize("profile", ["smoke", "quick", "tiny"])
def test_the_looped_lm_depth_ticks_do_not_overlap(profile):
    """looped_lm_loops.png: every effective depth labelled with its r and r / K, no two labels over each other."""
    from infiloop.analysis import looplm_grid

    plotting.use_style()
    assert _tick_overlaps(looplm_grid.depth_ticks, profile) == []


def test_the_two_line_depth_labels_overlapped():
    """The check above sees the labels the figure had before: "L = 12\\nr = 6 (3K)" over "L = 16\\nr = 8 (4K)"."""
    from infiloop.analysis import looplm_grid

    def before(ax, loops, k, depths):
        ax.set_xticks(depths, [looplm_grid.depth_label(loops, k, d).replace(": ", "\n") for d in depths])
        ax.minorticks_off()

    plotting.use_style()
    assert _tick_overlaps(before, "quick")
