"""Overthinking (notebook 09): exact accuracy against iterations on test sets larger than the training instances,
and the measures of the recurrent-reasoning literature's "overthinking" (Bansal et al. 2022, arXiv 2202.05826;
Schwarzschild et al. 2021) for carry-last, FPRM and InfiLoop, each with and without recall.

Per model and test size, over the seeds (:func:`measures`): the accuracy curve with its 95 % band, the peak of the
mean curve (the update of the peak), the fall after the peak chosen on held-out puzzles (``claims.held_out_fall``:
accuracy at the peak − at the deepest update, so that it is not positive by construction), and the share of puzzles
solved at some update and wrong at the end (``claims.proportion``); between two models, the difference of those shares
(:func:`lost_contrast`, the InfiLoop claim's effect) and of their falls (:func:`fall_contrast`), and the same share read
a fixed number of updates after each instance's own first solve (:func:`window_table`: at the deepest update both
models can sit at 0 %, where the share saturates). For InfiLoop, γ_t and the content score s_t of the outer axis along
the way (the paper's eq. 5 and eq. 2; :func:`gamma_along`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import claims, intervals
from . import trajectories as analysis
from .intervals import Interval


@dataclass
class Measures:
    """One model at one test size, over its seeds (trajectories on the same test puzzles)."""

    updates: np.ndarray  # [K] recorded outer updates
    curve: Interval  # exact accuracy at each update: mean over seeds, 95 % band
    peak: int  # the update where the mean curve is highest (first of equals)
    fall: Interval  # accuracy at the held-out peak − at the deepest update
    held_out_peaks: str  # the updates chosen as each half's peak, per seed (``claims.peaks_text``)
    lost: Interval  # solved at some update, wrong at the end, among the solved

    def at(self, update: int) -> Interval:
        return self.curve.point(int(np.flatnonzero(self.updates == update)[0]))


def measures(trajs: list[dict], replicates: int = 1000) -> Measures:
    """The overthinking measures of one model at one test size from its trajectories, one per seed."""
    ups = trajs[0]["updates"]
    curve = intervals.over_seeds(trajs, analysis.accuracy_terms, replicates, bounds=intervals.SHARE)
    fall = claims.held_out_fall([t["correct"] for t in trajs])
    lost = claims.proportion(*zip(*map(analysis.lost_terms, trajs)))
    return Measures(ups, curve, int(ups[int(np.nanargmax(curve.value))]), fall, claims.peaks_text(fall, ups), lost)


def table(ms: dict[str, Measures], labels: dict[str, str], depth: int) -> tuple[list[str], list[list]]:
    """Columns and rows of one test size: per model its accuracy at the training depth, the peak and its update, the
    accuracy at the deepest update, the fall after the held-out peak and solved-then-lost."""
    last = int(next(iter(ms.values())).updates[-1])
    cols = ["model", f"@ training depth ({depth})", "peak @ update", f"@ {last} updates",
            "fall after the held-out peak (peaks of the two halves)", "solved, then wrong at the end"]
    rows = []
    for r, m in ms.items():
        at_depth = m.at(depth).pct() if depth <= last else "–"
        rows.append([labels[r], at_depth, f"{m.at(m.peak).pct()} @ {m.peak}", m.at(last).pct(),
                     f"{m.fall.points()} ({m.held_out_peaks})", m.lost.pct()])
    return cols, rows


def fall_contrast(trajs_a: list[dict], trajs_b: list[dict]) -> Interval:
    """Model a's fall after its held-out peak − model b's, on the same instances of each seed (``claims.fall_contrast``;
    positive: a overthinks more)."""
    return claims.fall_contrast([t["correct"] for t in trajs_a], [t["correct"] for t in trajs_b])


def lost_contrast(trajs_a: list[dict], trajs_b: list[dict]) -> Interval:
    """Of the instances each model solved at some update, the share wrong at the deepest update: model a's − model b's,
    on the same instances of each seed (``claims.ratio_difference`` of ``trajectories.lost_terms``; positive: b loses
    less of what it solved, it keeps more). A seed where a model solved nothing has no share and is left out."""
    def terms(t: dict) -> tuple[np.ndarray, np.ndarray]:
        lost, solved = analysis.lost_terms(t)
        return lost.astype(np.float64), solved.astype(np.float64)

    return claims.ratio_difference([(terms(a), terms(b)) for a, b in zip(trajs_a, trajs_b)], bounds=(-1.0, 1.0))


def infiloop_keeps(trajs_cl: list[dict], trajs_inf: list[dict]) -> tuple[Interval, str]:
    """The claim ``overthink.infiloop_keeps`` as an absence claim (since 2026-12-07): InfiLoop's share of the instances
    it solved at some update that are wrong at the deepest (``claims.share``), and why it is untestable ("" when it is
    not): unless some model's share lies above the claim's margin (half the paper's TRM's 19.7 %), keeping them says
    nothing (``claims.untestable_unless_lost``, carry-last's and InfiLoop's shares). Its contrast, carry-last's share −
    InfiLoop's (:func:`lost_contrast`), is added from the guard's data (``contrasts.with_contrasts``)."""
    def terms(t: dict) -> tuple[np.ndarray, np.ndarray]:
        lost, solved = analysis.lost_terms(t)
        return lost.astype(np.float64), solved.astype(np.float64)

    own = claims.share([terms(t) for t in trajs_inf])
    losses = {"carry-last": claims.share([terms(t) for t in trajs_cl]), "InfiLoop": own}
    return own, claims.untestable_unless_lost(losses, "iterating to the deepest update",
                                              margin=claims.margin("overthink.infiloop_keeps"))


# Updates after each instance's first solve at which "solved, then wrong" is read again (:func:`window_table`): at
# `overthink` 1x, 3x and 9x its training depth of 4 (the paper's own window, 36 updates, is about one training depth).
WINDOWS = (4, 12, 36)


def window_terms(traj: dict, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(wrong ``window`` updates after the first solve, solved with ``window`` recorded updates after it) per instance:
    the read of "solved, then wrong at the end" moved to a fixed distance from each instance's own solve, which does
    not saturate when every model ends at 0 %. Needs a trajectory recorded at every update."""
    ups, fs = traj["updates"], traj["first_solve"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("reading a window after the solve needs a trajectory recorded at every update (every=1)")
    room = (fs > 0) & (fs + window <= ups[-1])
    rows = np.where(room, fs + window - ups[0], 0)
    return room & ~traj["correct"][rows, np.arange(len(fs))], room


def window_contrast(trajs_a: list[dict], trajs_b: list[dict], window: int) -> Interval:
    """Model a's share of solved instances wrong ``window`` updates after the solve − model b's (:func:`window_terms`),
    paired as :func:`lost_contrast` is: the same instances of each seed and the same resample for both."""
    def terms(t: dict) -> tuple[np.ndarray, np.ndarray]:
        lost, room = window_terms(t, window)
        return lost.astype(np.float64), room.astype(np.float64)

    return claims.ratio_difference([(terms(a), terms(b)) for a, b in zip(trajs_a, trajs_b)], bounds=(-1.0, 1.0))


WINDOW_COLUMNS = ["models (first − second)", "read", "first: solved, then wrong", "second: solved, then wrong",
                  "first − second (paired)"]


def window_table(trajs: dict[str, list[dict]], pairs: list[tuple[str, str]], labels: dict[str, str],
                 windows: tuple[int, ...] = WINDOWS) -> tuple[list[str], list[list[str]]]:
    """Per pair of recipes (``trajs[r]``: one trajectory per seed on the same instances) and window: each model's share
    of its solved instances wrong that many updates after its first solve (with the exact interval of its pooled
    counts; "–" where no instance was solved with that many updates left) and their paired difference, then the same
    read at the deepest update (the claim's, :func:`lost_contrast`)."""
    rows = []
    for a, b in pairs:
        name = f"{labels[a]} − {labels[b]}"
        for w in windows:
            shares = [claims.proportion(*zip(*(window_terms(t, w) for t in trajs[r]))) for r in (a, b)]
            rows.append([name, f"{w} updates after the first solve", *(f"{x.pct()} of {_solved(trajs[r], w)}" for x, r
                                                                         in zip(shares, (a, b))),
                         window_contrast(trajs[a], trajs[b], w).points()])
        last = int(trajs[a][0]["updates"][-1])
        ends = [claims.proportion(*zip(*map(analysis.lost_terms, trajs[r]))) for r in (a, b)]
        rows.append([name, f"at update {last} (the claim's read)", *(x.pct() for x in ends),
                     lost_contrast(trajs[a], trajs[b]).points()])
    return WINDOW_COLUMNS, rows


def _solved(trajs: list[dict], window: int) -> str:
    """How many instances each seed solved with ``window`` updates left: ``"12 / 0 / 30"``."""
    return " / ".join(str(int(window_terms(t, window)[1].sum())) for t in trajs)


def gamma_along(trajs: list[dict], axis: str = "outer") -> dict[str, np.ndarray]:
    """InfiLoop's γ_t and content score s_t (eq. 5, eq. 2) of ``axis`` along the way, mean over puzzles and seeds at
    each recorded update, apart for the puzzles right and wrong at that update (NaN where there are none)."""
    out = {}
    for key in (f"gamma_{axis}", f"score_{axis}"):
        v = np.stack([t[key] for t in trajs]).astype(np.float64)  # [S, K, P]
        right = np.stack([t["correct"] for t in trajs])
        out[key] = v.mean(axis=(0, 2))
        with np.errstate(invalid="ignore"):
            out[f"{key}_right"] = np.where(right, v, 0).sum((0, 2)) / right.sum((0, 2))
            out[f"{key}_wrong"] = np.where(~right, v, 0).sum((0, 2)) / (~right).sum((0, 2))
    return out


# The two further arms (``recipes.OVERTHINK_ARMS``): their names in words, and the colour and line of their curves.
ARM_LABELS = {"average_no_recall": "fixed-β average (no content score), no recall",
              "carry_last_progressive": "carry-last, recall + progressive loss (α = 1)"}
ARM_STYLES = {"average_no_recall": ("ema", "--"), "carry_last_progressive": ("carry_last", ":")}


def style(model: str) -> tuple[str, str]:
    """The colour key (``plotting.COLORS``) and line style of a model's curve: solid with recall, dashed without."""
    if model in ARM_STYLES:
        return ARM_STYLES[model]
    return model.removesuffix("_no_recall").removesuffix("_recall"), "--" if model.endswith("_no_recall") else "-"


def label(recipe: str, labels: dict[str, str]) -> str:
    """A recipe of the setting in words: ``"carry-last, no recall"`` for ``carry_last_no_recall``."""
    if recipe in ARM_LABELS:
        return ARM_LABELS[recipe]
    base, recall = (recipe.removesuffix("_no_recall"), False) if recipe.endswith("_no_recall") else \
        (recipe.removesuffix("_recall"), True)
    return f"{labels[base]}, {'recall' if recall else 'no recall'}"


def statement(cl: Measures, inf: Measures, kept: Interval, falls: Interval, size: int, own: Interval | None = None,
              untestable: str = "") -> str:
    """The two claims in one paragraph, as the intervals decide them (``intervals.verdict``): carry-last's fall after
    its held-out peak (no published number: the side of zero), InfiLoop's own loss ``own`` against the absence claim's
    margin (:func:`infiloop_keeps`; ``untestable`` says why it cannot be tested, if so), and beside it ``kept``
    (:func:`lost_contrast`, carry-last's share of solved instances lost − InfiLoop's) and ``falls``
    (:func:`fall_contrast`)."""
    said = {True: "does", False: "does not", None: "cannot be said to"}
    v1, v2 = intervals.verdict(cl.fall), intervals.verdict(kept)
    first = (f"At the largest test size ({size}), carry-last without recall {said[v1]} overthink: its accuracy "
             f"falls {cl.fall.points()} from its held-out peak to the deepest update ({cl.at(cl.peak).pct()} at its "
             f"peak, update {cl.peak}).")
    second = (f"Of the instances each solved at some update, carry-last without recall loses {cl.lost.pct()} by the "
              f"deepest update and InfiLoop without recall {inf.lost.pct()}; carry-last's share minus InfiLoop's is "
              f"{kept.points()}, so InfiLoop {said[v2]} keep more of what it solved than carry-last. (InfiLoop's fall "
              f"from its held-out peak is {inf.fall.points()}; carry-last's fall minus InfiLoop's, {falls.points()}, "
              f"also counts what a model never solved.)")
    if own is None:
        return f"{first} {second}"
    m = claims.margin("overthink.infiloop_keeps")
    third = (f"As the paper's claim is one of absence (InfiLoop keeps what it solves), InfiLoop's own loss, "
             f"{own.pct()}, is set against half the paper's TRM's loss after the solve ({100 * m:g} %): "
             + (f"untestable ({untestable})." if untestable else
                f"{intervals.outcome(own, 2 * m, absence=True)}."))
    return f"{first} {second} {third}"


SEPARATION_COLUMNS = ["model", "test size", "AUROC of the content score, right against wrong strings [95 % interval]",
                      "seeds with both kinds"]


def separation_table(trajs: dict, labels: dict) -> list[list]:
    """Whether InfiLoop's content score tells right strings from wrong ones: ``trajs[(size, recipe)]`` one trajectory
    per seed; per InfiLoop model and size, the AUROC of the outer axis' score s_t for right (no wrong cell) against
    wrong candidates over every recorded update (``claims.score_separation``: 0.5 is chance, the interval over seeds
    and instances), and how many seeds had both right and wrong candidates to compare."""
    rows = []
    for (size, r), ts in sorted(trajs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if not r.startswith("infiloop"):
            continue
        terms = [analysis.separation_terms(t, "outer") for t in ts]
        iv = claims.score_separation(terms)
        auroc = ("undefined (no seed had both right and wrong strings)" if iv.value != iv.value else
                 f"{0.5 + iv.value:.2f} [{0.5 + iv.lo:.2f}, {0.5 + iv.hi:.2f}]")
        rows.append([labels[r], size, auroc, f"{iv.seeds} of {len(ts)}"])
    return rows
