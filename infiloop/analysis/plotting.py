"""One figure style for every notebook: colours and labels per connection, saving, and the profile stamp.

    from infiloop import plotting
    plotting.use_style()
    fig, ax = plt.subplots()
    ax.plot(x, y, color=plotting.COLORS["infiloop"], label=plotting.LABELS["infiloop"])
    plotting.profile_note(ax, "tiny", 256)                 # under the axes, at the right
    plotting.save_figure(fig, "depth_scaling", "tiny")   # figures/tiny/depth_scaling.{png,pdf} (paths.FIGURES)

The backend is left alone (no ``MPLBACKEND``): notebooks show figures inline.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from .. import paths
from ..io import atomic_write
from ..labels import CONNECTIONS

PNG_DPI = 150


class _WithConnections(Mapping):
    """Each registered connection's ``label`` or ``color`` (``labels.CONNECTIONS``, written as each is
    registered, ``model/registry.py``), first and as registered now, then the entries of ``others``."""

    def __init__(self, attribute: str, others: dict[str, str]):
        self.attribute, self.others = attribute, others

    def __getitem__(self, name: str) -> str:
        entry = CONNECTIONS.get(name)
        return getattr(entry, self.attribute) if entry is not None else self.others[name]

    def __iter__(self) -> Iterator[str]:
        yield from CONNECTIONS
        yield from (k for k in self.others if k not in CONNECTIONS)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# Colour-blind-safe (Okabe-Ito); the same connection or recipe has the same colour in every figure. A connection's
# own colour and label are registered with its class; here are those of the other recipes and of the paper.
COLORS = _WithConnections("color", {
    # conditioners of the looped-LM study (notebook 06), on the carry-last model
    "history_w1": "#56B4E9",  # sky blue
    "history_w2": "#88CCEE",  # light cyan, dashed (LINESTYLES)
    "loop_gating": "#AA7700",  # ochre
    "history_lg": "#000000",  # black
    "inject_dense": "#999933",  # olive
    "paper": "#555555",  # grey: the paper's reported numbers
})

LABELS = _WithConnections("label", {
    "history_w1": "history injection (w = 1)",
    "history_w2": "history injection (w = 2)",
    "loop_gating": "loop gating",
    "history_lg": "history (w = 1) + loop gating",
    "inject_dense": "dense initial-state injection",
    "paper": "paper",
})

# Line styles for recipes whose colours are close.
LINESTYLES = {"history_w2": "--"}

# How the paper's numbers are drawn beside ours: hollow markers, dashed lines.
PAPER_STYLE = {"linestyle": "--", "marker": "o", "markerfacecolor": "none", "alpha": 0.8}


def use_style() -> None:
    """Set the project's seaborn/matplotlib style (call once at the top of a notebook)."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette=[COLORS[k] for k in COLORS])
    mpl.rcParams.update({
        "figure.figsize": (6.4, 4.0),
        "figure.dpi": 100,
        "savefig.dpi": PNG_DPI,
        "savefig.bbox": "tight",
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titlesize": "medium",
        "legend.frameon": False,
        "pdf.fonttype": 42,  # embed TrueType: text stays text in the PDF
    })


def figure_dir(profile: str, root: str | Path | None = None) -> Path:
    """``<paths.FIGURES>/<profile>/``, or ``<root>/figures/<profile>/`` for another checkout ``root``."""
    if not paths.is_plain_name(profile):
        raise ValueError(f"profile name {profile!r} is not a plain name")
    return (Path(root) / "figures" if root else paths.FIGURES) / profile


def save_figure(fig, name: str, profile: str, root: str | Path | None = None) -> list[Path]:
    """Write ``figures/<profile>/<name>.png`` (dpi 150) and ``.pdf`` atomically; return both paths."""
    if not paths.is_plain_name(name):
        raise ValueError(f"figure name {name!r}: use letters, digits, '_', '-', '.' only")
    out = figure_dir(profile, root)
    written = []
    for ext in ("png", "pdf"):
        dpi = PNG_DPI if ext == "png" else None
        written.append(atomic_write(out / f"{name}.{ext}",
                                  lambda tmp, ext=ext, dpi=dpi: fig.savefig(tmp, format=ext, dpi=dpi),
                                  suffix=f".{ext}"))
    return written


def profile_note(ax_or_fig, profile: str, n_items: int | None = None, what: str = "puzzles") -> Annotation:
    """Stamp "profile: tiny · 256 puzzles" at the lower right of the figure of ``ax_or_fig``, under every axes with its
    tick labels, axis labels and legends as they stand when the figure is drawn: it never covers a curve, a bar or a
    legend (inside an axes it did). A figure saved with ``savefig.bbox = "tight"`` (:func:`use_style`) grows to hold
    it."""
    fig = ax_or_fig if isinstance(ax_or_fig, Figure) else ax_or_fig.get_figure()
    text = f"profile: {profile}" + (f" · {n_items:,} {what}" if n_items is not None else "")

    def under_everything(renderer) -> Bbox:
        # an axes' tight box holds its legend, inside or outside it; a figure legend is left out, as a tight save
        # places one at the lower edge against the cropped figure, which the note itself would push down and down
        boxes = [a.get_tightbbox(renderer) for a in fig.axes if a.get_visible()]
        boxes = [b for b in boxes if b is not None and b.width > 0]
        return Bbox.union(boxes) if boxes else fig.bbox

    note = Annotation(text, xy=(1, 0), xycoords=under_everything, xytext=(0, -3), textcoords="offset points",
                      ha="right", va="top", fontsize="x-small", color="#777777")
    fig.add_artist(note)
    return note
