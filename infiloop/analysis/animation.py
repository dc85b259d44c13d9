"""Watch the loop: animations drawn from measured trajectories (notebook 07).

Every frame shows what a trained model did, as the evaluation recorded it (``evaluation.py``):

- ``render_puzzle``: one puzzle, carry-last and InfiLoop side by side: the board decoded from the answer
  state at each outer update, cells coloured given / correct / wrong, with gamma_t of the outer axis and the
  content score s_t of the candidate, and markers at the first solve and at every loss of a solved board.
- ``render_race``: exact accuracy of every connection against outer updates, growing frame by frame, the
  training depth marked.
- ``render_arc``: the predicted output grid of one ARC task at each outer update, beside its input and target.

Frames (``frame_updates``): every outer update up to the training depth, then updates sampled on a log
scale to the last one, at most ``max_frames`` whatever the depth (each frame says so). The boards are the
predicted tokens that the evaluation keeps at exactly those updates (``pred_snapshots``): ``record`` runs
the cached evaluation of the chosen puzzle with a snapshot at every frame.

Files are written with matplotlib's own writers (``animation_canvas.py``, which also draws the boards pixel for
pixel): ``PillowWriter`` for the GIF (always; no external program), and ``FFMpegWriter`` for an MP4 beside it only
where ffmpeg exists. ``show`` puts the MP4 inline
as HTML5 video where there is one, else the GIF.

    frames = frame_updates(run.training_depth, 960)
    boards = {r: record(runs[r], puzzle, frames) for r in ("carry_last", "infiloop")}
    anim = render_puzzle(boards, test.inputs[puzzle], test.labels[puzzle], test.grid, test.box, "sudoku",
                         run.training_depth, figure_dir("tiny") / "watch_puzzle.gif", profile="tiny")
    read_board(read_frames(anim.path)[-1], anim.samples["infiloop"], CLASS_COLORS)   # the last board, read back
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..tasks.base import IGNORE_LABEL_ID
from ..tasks.registry import task as registered
from . import animation_canvas as drawing
from .plotting import COLORS, LABELS

MAX_FRAMES = 100

# Cell classes of a decoded board and their fills (light, so that the digits stay readable).
NO_LABEL, GIVEN, CORRECT, WRONG = range(4)
CLASS_NAMES = ("no label", "given", "filled in right", "wrong")
CLASS_COLORS = ("#FFFFFF", "#D9D9D9", "#8CD3A8", "#F3A07A")

# ARC tokens (tasks/arc.py): 0 pad, 1 end-of-grid border, 2..11 the ten ARC colours (the usual palette).
ARC_COLORS = ("#FFFFFF", "#5C5C5C", "#000000", "#0074D9", "#FF4136", "#2ECC40", "#FFDC00", "#AAAAAA",
              "#F012BE", "#FF851B", "#7FDBFF", "#870C25")


@dataclass
class Animation:
    """A written animation: the GIF (and MP4 where ffmpeg exists), the update each frame shows, how long it
    took, and, per board panel, the pixel (x, y) of one point inside each cell with the flat index of the cell
    it shows (a point no text or line covers: what a test samples to read the board back)."""

    path: Path
    updates: np.ndarray
    note: str
    seconds: float
    video: Path | None = None
    samples: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def frames(self) -> int:
        return len(self.updates)

    @property
    def nbytes(self) -> int:
        return self.path.stat().st_size

    def describe(self) -> str:
        return f"{self.path.name}: {self.frames} frames, {self.nbytes / 1e6:.2f} MB, rendered in {self.seconds:.1f} s"


# ----------------------------------------------------------------------------------------- frames


def _log_spaced(first: int, last: int, n: int) -> np.ndarray:
    """Up to ``n`` distinct integers from ``first`` to ``last`` (both included), evenly spaced in log."""
    if n <= 1 or first >= last:
        return np.array([last], dtype=np.int64)
    return np.unique(np.round(np.geomspace(first, last, n)).astype(np.int64))


def frame_updates(depth: int, last: int, max_frames: int = MAX_FRAMES) -> np.ndarray:
    """The outer updates shown, one per frame: every update to the training depth ``depth``, then updates
    log-spaced to ``last``; at most ``max_frames`` (a training depth above half of it is log-sampled too)."""
    if last < 1 or depth < 1 or max_frames < 2:
        raise ValueError(f"need last >= 1, depth >= 1 and max_frames >= 2; got {last}, {depth}, {max_frames}")
    head = min(depth, last)
    if head > max_frames // 2:
        return _log_spaced(1, last, max_frames)
    tail = _log_spaced(head, last, max_frames - head + 1)
    return np.concatenate([np.arange(1, head + 1), tail[tail > head]])


def frame_note(updates: np.ndarray, depth: int) -> str:
    """What the frames are, for the frame itself: "every update 1-16 (the training depth), then ..."."""
    ups, last = np.asarray(updates), int(updates[-1])
    dense = int(np.sum(ups == np.arange(1, len(ups) + 1)))
    if dense == len(ups):
        return f"{len(ups)} frames: every outer update 1–{last:,}"
    if dense >= min(depth, last):
        return (f"{len(ups)} frames: every outer update 1–{dense} (training depth {depth}), "
                f"then {len(ups) - dense} log-spaced to {last:,}")
    return f"{len(ups)} frames: outer updates log-spaced from 1 to {last:,} (training depth {depth})"


# ----------------------------------------------------------------------------------------- recorded data


def record(run, puzzle: int, frames: np.ndarray, limit: int | None = None, device: str = "cpu") -> dict:
    """The trajectory of test puzzle ``puzzle`` (an index into the first ``limit`` test puzzles) to the last
    frame, every update recorded and the predicted board kept at every frame (the run's evaluation cache)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one puzzle: nothing to share between threads, only contention
    try:
        traj, _ = run.evaluate(updates=int(frames[-1]), every=1, limit=limit, puzzles=(int(puzzle),),
                               snapshots=tuple(int(u) for u in frames), device=device, progress=False)
    finally:
        torch.set_num_threads(threads)
    return traj


def cell_classes(pred: np.ndarray, inputs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per cell: ``WRONG`` (prediction differs from the label), ``GIVEN`` (right, and shown in the input),
    ``CORRECT`` (right, and filled in by the model) or ``NO_LABEL`` (not scored)."""
    pred, inputs, labels = (np.asarray(a).astype(np.int64) for a in (pred, inputs, labels))
    cls = np.where(pred == labels, np.where(inputs == labels, GIVEN, CORRECT), WRONG)
    return np.where(labels == IGNORE_LABEL_ID, NO_LABEL, cls).astype(np.int8)


def events(traj: dict, puzzle: int = 0) -> tuple[int, list[int]]:
    """(first solve, updates at which a solved board was lost) of one puzzle of a trajectory recorded at
    every update; first solve -1 when it is never solved."""
    ok = np.asarray(traj["correct"][:, puzzle], bool)
    ups = traj["updates"]
    lost = [int(u) for u, before, now in zip(ups[1:], ok[:-1], ok[1:]) if before and not now]
    return int(traj["first_solve"][puzzle]), lost


def choose_puzzle(carry_last: dict, infiloop: dict) -> tuple[int, str]:
    """The default puzzle: one that carry-last solves and then loses (InfiLoop solving it, more blanks and a
    loss that lasts to the end preferred); else the hardest one InfiLoop has right at the end (most blanks,
    then latest first solve); else the one InfiLoop ends closest to. Returns (index, why)."""
    fs = carry_last["first_solve"]
    after = carry_last["updates"][:, None] > fs[None, :]
    lost = (fs > 0) & (after & ~carry_last["correct"]).any(0)
    blanks = infiloop["blanks"].astype(np.int64)
    inf_end = infiloop["correct"][-1]
    if lost.any():
        cand = np.flatnonzero(lost)
        key = [(bool(inf_end[p]), not bool(carry_last["correct"][-1, p]), int(blanks[p]), -int(p)) for p in cand]
        p = int(cand[max(range(len(cand)), key=key.__getitem__)])
        return p, (f"carry-last solves it at update {int(fs[p])} and then loses it "
                   f"({int(lost.sum())} such puzzles in this run)")
    if inf_end.any():
        cand = np.flatnonzero(inf_end)
        key = [(int(blanks[p]), int(infiloop["first_solve"][p]), -int(p)) for p in cand]
        p = int(cand[max(range(len(cand)), key=key.__getitem__)])
        return p, (f"carry-last loses no solved puzzle in this run; this is the hardest one InfiLoop solves "
                   f"({int(blanks[p])} blanks, first solved at update {int(infiloop['first_solve'][p])})")
    p = int(np.argmin(infiloop["wrong_cells"][-1]))
    return p, "InfiLoop solves none of the puzzles; this is the one it ends closest to"


def choose_arc_row(traj: dict, test, task_id: str = "") -> tuple[int, str, str]:
    """A test row of an ARC set: the first test pair of task ``task_id`` in its identity view, or by default
    the identity-view test pair with the fewest wrong cells at the last update of ``traj`` (one row per test
    row of ``test``). Returns (row, task id, why)."""
    names = list(test.info.get("tasks", []))
    rows = np.flatnonzero((test.meta["view"] == 0) & (test.meta["example"] == 0))
    ids = [names[int(test.meta["task"][r])] for r in rows]
    if task_id:
        if task_id not in ids:
            raise ValueError(f"ARC task {task_id!r} is not in this test set; its tasks: {', '.join(sorted(ids))}")
        return int(rows[ids.index(task_id)]), task_id, "chosen by the arc_task parameter"
    wrong = traj["wrong_cells"][-1][rows]
    k = int(np.argmin(wrong))
    done = "solved" if wrong[k] == 0 else f"{int(wrong[k])} wrong cells"
    return int(rows[k]), ids[k], (f"of the {len(rows)} test inputs, the one InfiLoop gets closest to at update "
                                  f"{int(traj['updates'][-1])} ({done})")


def event_text(first: int, lost: list[int]) -> str:
    """"first solved at update 7, lost at 12, 30" (or "never solved") for a summary."""
    if first <= 0:
        return "never solved"
    more = f" (and {len(lost) - 3} more)" if len(lost) > 3 else ""
    return f"first solved at update {first}" + (f", lost at {', '.join(map(str, lost[:3]))}{more}" if lost else
                                                ", never lost")


def _info(traj: dict) -> dict:
    return json.loads(str(traj["info"]))


def _frame_rows(traj: dict, frames: np.ndarray) -> np.ndarray:
    """Row of ``pred_snapshots`` for each frame (the snapshots must hold every frame)."""
    snaps = [int(u) for u in traj["snapshot_updates"]]
    missing = [int(u) for u in frames if int(u) not in snaps]
    if missing:
        raise ValueError(f"the trajectory has no prediction snapshot at updates {missing[:5]}: record it with "
                         "snapshots at every frame (animation.record)")
    return np.array([snaps.index(int(u)) for u in frames])


# ----------------------------------------------------------------------------------------- drawing


def _cell_texts(task: str, tokens: np.ndarray) -> np.ndarray:
    """The text shown in each cell (``registry.Task.cell_text``): Sudoku digits, maze symbols; none for other
    tasks."""
    tokens = np.asarray(tokens).astype(np.int64)
    text = registered(task).cell_text
    return text(tokens) if text is not None else np.full(tokens.shape, "")


def shown_texts(task: str, pred: np.ndarray, labels: np.ndarray, wrong: np.ndarray) -> np.ndarray:
    """The text each cell shows: its prediction's, and ``NO_SYMBOL`` in a ``wrong`` cell whose prediction draws
    nothing where every answer is a digit (Sudoku's blank or pad token): no wrong cell is left empty."""
    texts, answers = _cell_texts(task, pred), _cell_texts(task, labels).astype(str)
    digits = bool(answers.size) and bool(np.char.isdigit(answers).all())
    return np.where(np.asarray(wrong, bool) & (texts == "") & digits, drawing.NO_SYMBOL, texts)


def _status(update: int, first: int, lost: list[int]) -> str:
    """"✓ solved at 7 · ✗ lost at 12, 30" as far as ``update`` (losses: the first three, then a count)."""
    parts = [f"✓ solved at {first}"] if 0 < first <= update else ["not solved yet"]
    shown = [u for u in lost if u <= update]
    if shown:
        more = f" (+{len(shown) - 3})" if len(shown) > 3 else ""
        parts.append("✗ lost at " + ", ".join(str(u) for u in shown[:3]) + more)
    return " · ".join(parts)


def _texts_seen(task: str, boards: dict[str, dict]) -> set[str]:
    return {str(t) for b in boards.values() for t in np.unique(_cell_texts(task, b["pred_snapshots"]))}


def _board_panels(fig: Figure, gs, boards: dict[str, dict], grid: tuple[int, int], box, task: str):
    """The top row of :func:`render_puzzle`: a board per connection with its status line below it. Returns the
    animated artists, the boards, the status texts and each connection's (first solve, losses)."""
    texts = _texts_seen(task, boards) | {drawing.NO_SYMBOL}
    live, board, status, ev = [], {}, {}, {}
    for j, r in enumerate(boards):
        ax = fig.add_subplot(gs[0, j])
        board[r] = drawing.Board(ax, tuple(grid), CLASS_COLORS, box, texts)
        ax.set_title(LABELS.get(r, r), color=COLORS.get(r, "black"), fontsize=11, fontweight="bold")
        status[r] = ax.text(0.5, -0.03, "", transform=ax.transAxes, ha="center", va="top", fontsize=9,
                            linespacing=1.5)
        ev[r] = events(boards[r])
        live += [board[r], status[r]]
    return live, board, status, ev


def _trace_axes(fig: Figure, gs, boards: dict[str, dict], info: dict, depth: int, last: int):
    """The two lower panels of :func:`render_puzzle`: gamma_t and the content score s_t of the outer axis
    against outer updates, the training depth marked. Returns the axes, per connection (gamma, score or None,
    and its four animated lines), and the animated artists."""
    ax_g = fig.add_subplot(gs[1, :])
    ax_s = fig.add_subplot(gs[2, :], sharex=ax_g)
    for ax in (ax_g, ax_s):
        ax.axvline(depth, color="#AAAAAA", ls="--", lw=0.8)
        drawing.log_axis(ax, last)
        ax.tick_params(labelsize=8)
    traces, live = {}, []
    for r, t in boards.items():
        c = COLORS.get(r, "black")
        has_score = info[r].get("outer") == "infiloop"
        line_g, = ax_g.plot([], [], color=c, lw=1.2, label=LABELS.get(r, r))
        line_s = ax_s.plot([], [], color=c, lw=1.2)[0] if has_score else None
        solved, = ax_g.plot([], [], "o", color=c, ms=6, mec="black", mew=0.6)
        loss, = ax_g.plot([], [], "x", color="#C00000", ms=7, mew=1.8)
        traces[r] = (t["gamma_outer"][:, 0], t["score_outer"][:, 0] if has_score else None, line_g, line_s,
                     solved, loss)
        live += [x for x in (line_g, line_s, solved, loss) if x is not None]
        beta = info[r].get("beta", {}).get("outer")
        if beta is not None and has_score:
            ax_g.axhline(1 - beta, color=c, ls=":", lw=0.8)
    ax_g.set_ylim(0, 1.05)
    ax_g.set_ylabel("γ_t (outer)", fontsize=9)
    ax_g.text(depth, 1.0, " training depth", fontsize=7, color="#888888", va="top")
    ax_g.legend(loc="lower left", fontsize=7, ncol=len(boards), handlelength=1.2)
    scored = [tr[1] for tr in traces.values() if tr[1] is not None]
    if scored:
        lo, hi = min(float(v.min()) for v in scored), max(float(v.max()) for v in scored)
        pad = 0.1 * (hi - lo) + 0.05
        ax_s.set_ylim(lo - pad, hi + pad)
    ax_s.set_ylabel("score s_t", fontsize=9)
    ax_s.set_xlabel("outer updates", fontsize=9)
    no_score = [LABELS.get(r, r) for r, tr in traces.items() if tr[1] is None]
    if no_score:
        ax_s.text(0.99, 0.9, f"{', '.join(no_score)}: no content score", transform=ax_s.transAxes, ha="right",
                  va="top", fontsize=7, color="#777777")
    return ax_g, ax_s, traces, live


def render_puzzle(boards: dict[str, dict], inputs: np.ndarray, labels: np.ndarray, grid: tuple[int, int],
                  box: tuple[int, int] | None, task: str, depth: int, path: str | Path, fps: float = 8,
                  profile: str = "", title: str = "", video: bool | None = None) -> Animation:
    """One puzzle under each connection of ``boards`` (recipe -> its ``record``), side by side.

    Per frame: the board decoded at that update (``GIVEN`` / ``CORRECT`` / ``WRONG`` cells, the predicted
    symbol in each, a wrong one's in dark red), the wrong-cell count, gamma_t and s_t of the outer axis, and the first
    solve and losses so far; below, gamma_t and the content score s_t against outer updates up to the frame, the first
    solve marked with a dot and each loss with a cross.
    """
    names = list(boards)
    frames = boards[names[0]]["snapshot_updates"]
    rows = {r: _frame_rows(t, frames) for r, t in boards.items()}
    last = int(frames[-1])
    info = {r: _info(t) for r, t in boards.items()}
    layers = info[names[0]]["layers_per_update"]
    h, w = grid
    fig = drawing.figure(max(640, 40 + 300 * len(names)), 560)
    gs = fig.add_gridspec(3, len(names), left=0.09, right=0.97, top=0.88, bottom=0.1, hspace=0.6,
                          height_ratios=[3.3, 1, 1])
    live, board, status, ev = _board_panels(fig, gs, boards, grid, box, task)
    ax_g, ax_s, traces, lines = _trace_axes(fig, gs, boards, info, depth, last)
    live += lines
    fig.legend([Patch(facecolor=CLASS_COLORS[k], edgecolor="#999999") for k in (GIVEN, CORRECT, WRONG)],
               [CLASS_NAMES[k] for k in (GIVEN, CORRECT, WRONG)], loc="upper left", fontsize=8, ncol=1,
               frameon=False, handlelength=1, bbox_to_anchor=(0.0, 1.0))
    now = [ax_g.axvline(1, color="#888888", lw=0.8), ax_s.axvline(1, color="#888888", lw=0.8)]
    head = fig.text(0.5, 0.975, "", ha="center", va="top", fontsize=12)
    live += [*now, head]
    note = frame_note(frames, depth)
    drawing.footer(fig, note, profile, title)
    ups = boards[names[0]]["updates"]

    def draw(i: int) -> None:
        u = int(frames[i])
        n = int(np.searchsorted(ups, u, side="right"))
        head.set_text(f"update {u:,} of {last:,} ({u * layers:,} layers)")
        for r, t in boards.items():
            pred = t["pred_snapshots"][rows[r][i], 0]
            cls = cell_classes(pred, inputs, labels)
            board[r].set(cls, shown_texts(task, pred, labels, cls == WRONG), wrong_ink=cls == WRONG)
            g, s, line_g, line_s, solved, loss = traces[r]
            wrong = int((cls == WRONG).sum())
            first, lost = ev[r]
            shown = [x for x in lost if x <= u]
            status[r].set_text(f"{wrong} wrong cell{'s' * (wrong != 1)} · γ_t {g[n - 1]:.2f}"
                               + (f" · s_t {s[n - 1]:.2f}" if s is not None else "") + "\n" + _status(u, first, lost)
                               + (" · right again" if shown and not wrong else ""))
            status[r].set_color("#1A7F37" if not wrong else "#C00000" if shown else "#333333")
            line_g.set_data(ups[:n], g[:n])
            if line_s is not None:
                line_s.set_data(ups[:n], s[:n])
            solved.set_data(([first], [g[first - 1]]) if 0 < first <= u else ([], []))
            loss.set_data(shown, [g[x - 1] for x in shown])
        for line in now:
            line.set_xdata([u, u])

    seconds, mp4 = drawing.write_frames(fig, live, draw, len(frames), Path(path), fps, video)
    samples = {r: (board[r].samples(0.22), np.arange(h * w)) for r in names}  # clear of digit and lines
    return Animation(Path(path), np.asarray(frames), note, seconds, mp4, samples)


def render_race(trajs: dict[str, dict], depth: int, path: str | Path, fps: float = 8, profile: str = "",
                frames: np.ndarray | None = None, video: bool | None = None) -> Animation:
    """Exact accuracy of every connection (recipe -> trajectory) against outer updates, drawn up to each
    frame's update on fixed log axes, the training depth marked; each line's current value at its tip.
    ``frames``: the updates shown (default ``frame_updates(depth, last recorded update)``)."""
    names = list(trajs)
    last = min(int(t["updates"][-1]) for t in trajs.values())
    frames = frame_updates(depth, last) if frames is None else np.asarray(frames)
    last = int(frames[-1])
    layers = _info(trajs[names[0]])["layers_per_update"]
    n_puzzles = trajs[names[0]]["correct"].shape[1]
    fig = drawing.figure(640, 400)
    ax = fig.add_axes((0.1, 0.16, 0.66, 0.72))
    drawing.log_axis(ax, last)
    ax.set(ylim=(0, 100), xlabel="outer updates", ylabel="exact accuracy (%)")
    ax.axvline(depth, color="#888888", ls="--", lw=1)
    ax.text(depth, 2, " training depth", fontsize=8, color="#777777")
    lines, tips, live = {}, {}, []
    for r in names:
        lines[r], = ax.plot([], [], color=COLORS.get(r, "black"), lw=2)
        tips[r] = ax.text(1, 0, "", fontsize=8, color=COLORS.get(r, "black"), va="center", clip_on=False)
        live += [lines[r], tips[r]]
    now = ax.axvline(1, color="#BBBBBB", lw=0.8)
    head = fig.text(0.5, 0.975, "", ha="center", va="top", fontsize=12)
    live += [now, head]
    note = frame_note(frames, depth)
    drawing.footer(fig, note, profile, f"{n_puzzles:,} puzzles")
    acc = {r: (t["updates"], 100 * t["correct"].mean(1)) for r, t in trajs.items()}

    def draw(i: int) -> None:
        u = int(frames[i])
        head.set_text(f"exact accuracy · update {u:,} of {last:,} ({u * layers:,} layers)")
        at = {r: int(np.searchsorted(ups, u, side="right")) - 1 for r, (ups, _) in acc.items()}
        heights = drawing.spread([acc[r][1][at[r]] for r in names], gap=6.0)
        for r, y in zip(names, heights):
            ups, a = acc[r]
            lines[r].set_data(ups[:at[r] + 1], a[:at[r] + 1])
            tips[r].set_position((ups[at[r]] * 1.08, y))
            tips[r].set_text(f"{LABELS.get(r, r)} {a[at[r]]:.1f} %")
        now.set_xdata([u, u])

    seconds, mp4 = drawing.write_frames(fig, live, draw, len(frames), Path(path), fps, video)
    return Animation(Path(path), frames, note, seconds, mp4)


def render_arc(boards: dict[str, dict], inputs: np.ndarray, labels: np.ndarray, canvas: int, depth: int,
               path: str | Path, fps: float = 8, profile: str = "", title: str = "",
               video: bool | None = None) -> Animation:
    """One ARC test input under each connection of ``boards`` (recipe -> its ``record``): the input and the
    target, then each connection's predicted output at each frame's update, on the target's rows and columns
    with its end-of-grid border (ARC colours; pad white, border dark grey; wrong cells outlined in red), with
    the grid that decodes from it, its wrong cells, and its first solve and losses."""
    from ..tasks.arc import decode_grid

    names = list(boards)
    frames = boards[names[0]]["snapshot_updates"]
    rows = {r: _frame_rows(t, frames) for r, t in boards.items()}
    last = int(frames[-1])
    layers = _info(boards[names[0]])["layers_per_update"]
    x, y = (np.asarray(a).reshape(canvas, canvas) for a in (inputs, labels))
    out_r, out_c = drawing.crop(y)
    in_r, in_c = drawing.crop(x)
    n_panels = 2 + len(names)
    fig = drawing.figure(200 * n_panels + 40, 320)
    width = 0.94 / n_panels
    axes = [fig.add_axes((0.03 + k * width, 0.2, width * 0.9, 0.6)) for k in range(n_panels)]
    for ax, name, grid in ((axes[0], "input", x[in_r, in_c]), (axes[1], "target", y[out_r, out_c])):
        drawing.Board(ax, grid.shape, ARC_COLORS).set(grid)
        ax.set_title(name, fontsize=10)
    target = y[out_r, out_c]
    scored = target != IGNORE_LABEL_ID
    live, shown, status, ev = [], {}, {}, {}
    for ax, r in zip(axes[2:], names):
        shown[r] = drawing.Board(ax, target.shape, ARC_COLORS)
        ax.set_title(LABELS.get(r, r), color=COLORS.get(r, "black"), fontsize=10, fontweight="bold")
        status[r] = ax.text(0.5, -0.04, "", transform=ax.transAxes, ha="center", va="top", fontsize=8)
        ev[r] = events(boards[r])
        live += [shown[r], status[r]]
    head = fig.text(0.5, 0.975, "", ha="center", va="top", fontsize=11)
    live.append(head)
    note = frame_note(frames, depth)
    drawing.footer(fig, note, profile, title)

    def draw(i: int) -> None:
        u = int(frames[i])
        head.set_text(f"predicted output · update {u:,} of {last:,} ({u * layers:,} layers)")
        for r, t in boards.items():
            pred = t["pred_snapshots"][rows[r][i], 0].reshape(canvas, canvas)
            crop = pred[out_r, out_c]
            wrong = (crop != target) & scored
            shown[r].set(crop.astype(np.int64), wrong=wrong)
            grid = decode_grid(pred, canvas)
            decoded = "no grid decodes" if grid is None else f"decodes to {grid.shape[0]}×{grid.shape[1]}"
            first, lost = ev[r]
            status[r].set_text(f"{decoded}, {int(wrong.sum())} wrong\n{_status(u, first, lost)}")

    seconds, mp4 = drawing.write_frames(fig, live, draw, len(frames), Path(path), fps, video)
    cells = np.arange(canvas * canvas).reshape(canvas, canvas)[out_r, out_c].ravel()
    samples = {r: (shown[r].samples(0.5), cells) for r in names}
    return Animation(Path(path), np.asarray(frames), note, seconds, mp4, samples)


# ----------------------------------------------------------------------------------------- reading back


def read_frames(path: str | Path) -> list[np.ndarray]:
    """Every frame of a GIF, decoded by Pillow, as RGB arrays [height, width, 3] (uint8)."""
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)]


def nearest_colour(pixels: np.ndarray, palette) -> np.ndarray:
    """Index into ``palette`` (matplotlib colours) of the nearest colour to each RGB pixel [N, 3]."""
    pal = np.array([to_rgb(c) for c in palette]) * 255
    return np.argmin(((pixels[:, None, :].astype(float) - pal[None]) ** 2).sum(-1), 1)


def read_board(frame: np.ndarray, samples: tuple[np.ndarray, np.ndarray], palette) -> np.ndarray:
    """The palette index of each sampled cell of a decoded frame (``Animation.samples[panel]``)."""
    xy = np.round(samples[0]).astype(int)
    return nearest_colour(frame[xy[:, 1], xy[:, 0]], palette)


def show(anim: Animation):
    """The animation for a notebook: HTML5 video where an MP4 was written (ffmpeg), else the GIF."""
    from IPython.display import Image, Video

    if anim.video is not None and anim.video.is_file():
        return Video(str(anim.video), embed=True, html_attributes="controls autoplay loop muted")
    return Image(data=anim.path.read_bytes(), format="gif")
