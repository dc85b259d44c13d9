"""The common in-memory dataset record of every task (the paper's benchmarks; TRM's format).

A :class:`TaskData` holds token grids in TRM's layout: one row per example, ``inputs`` and
``labels`` of shape ``[N, L]`` with ``L = rows * cols`` of the token grid. Token id 0 is the pad
token everywhere, and in ``labels`` it is also the *ignored* label (``IGNORE_LABEL_ID``): a position
whose label is 0 carries no loss and is not scored. Task token schemes:

- Sudoku (TRM's tokens): 0 pad, 1 blank, digit ``v`` -> ``v + 1``; vocabulary ``n + 2`` (11 for 9x9).
- Maze (TRM's): TRM's charset ``"# SGo"`` -> 1..5, 0 pad; vocabulary 6.
- ARC (TRM's): 0 pad, 1 end-of-grid border, colour ``c`` -> ``c + 2``; vocabulary 12.

Files are compressed ``.npz`` archives read with ``allow_pickle=False``, written atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..io import load_npz, save_npz

PAD_ID = 0
IGNORE_LABEL_ID = 0
FORMAT_VERSION = 1


def where(path: str | os.PathLike | None, line: int | None = None) -> str:
    """``"file.csv:12: "`` style prefix for error messages."""
    if path is None:
        return "" if line is None else f"line {line}: "
    return f"{path}:{line}: " if line is not None else f"{path}: "


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype for the token ids of a vocabulary (used on disk)."""
    return np.dtype(np.uint8) if vocab_size <= 256 else np.dtype(np.int32)


@dataclass
class TaskData:
    """A split of one task as token grids.

    ``inputs``/``labels``: ``[N, L]`` integer token ids (``L = grid[0] * grid[1]``); labels use
    ``IGNORE_LABEL_ID = 0`` for positions without a target. ``puzzle_ids``: ``[N]`` ids of learned
    per-puzzle embeddings (0 = none; ARC uses one id per task view). ``meta``: per-row arrays
    (``[N, ...]``), e.g. ``blanks``, ``rating``, ``path_length``, ``task``, ``view``. ``n_puzzles``
    counts puzzle ids including 0. ``info``: JSON-serialisable facts about the split (source,
    task names, ...).
    """

    name: str
    inputs: np.ndarray
    labels: np.ndarray
    grid: tuple[int, int]
    vocab_size: int
    puzzle_ids: np.ndarray | None = None
    meta: dict[str, np.ndarray] = field(default_factory=dict)
    box: tuple[int, int] | None = None
    n_puzzles: int = 1
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.inputs = np.asarray(self.inputs)
        self.labels = np.asarray(self.labels)
        n = len(self.inputs)
        if self.puzzle_ids is None:
            self.puzzle_ids = np.zeros(n, dtype=np.int32)
        self.puzzle_ids = np.asarray(self.puzzle_ids)
        self.grid = (int(self.grid[0]), int(self.grid[1]))
        if self.box is not None:
            self.box = (int(self.box[0]), int(self.box[1]))
        seq = self.grid[0] * self.grid[1]
        if self.inputs.ndim != 2 or self.inputs.shape[1] != seq:
            raise DataError(f"{self.name}: inputs must be [N, {seq}], got {self.inputs.shape}")
        if self.labels.shape != self.inputs.shape:
            raise DataError(f"{self.name}: labels {self.labels.shape} != inputs {self.inputs.shape}")
        if self.puzzle_ids.shape != (n,):
            raise DataError(f"{self.name}: puzzle_ids must be [{n}], got {self.puzzle_ids.shape}")
        for k, v in self.meta.items():
            if len(v) != n:
                raise DataError(f"{self.name}: meta[{k!r}] has {len(v)} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def seq_len(self) -> int:
        return self.grid[0] * self.grid[1]

    def subset(self, idx) -> TaskData:
        """Rows ``idx`` (indices, slice or boolean mask) as a new record."""
        if isinstance(idx, slice):
            idx = np.arange(len(self))[idx]
        idx = np.asarray(idx)
        return TaskData(
            name=self.name,
            inputs=self.inputs[idx],
            labels=self.labels[idx],
            grid=self.grid,
            vocab_size=self.vocab_size,
            puzzle_ids=self.puzzle_ids[idx],
            meta={k: v[idx] for k, v in self.meta.items()},
            box=self.box,
            n_puzzles=self.n_puzzles,
            info=dict(self.info),
        )

    def header(self) -> dict:
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "grid": list(self.grid),
            "box": list(self.box) if self.box else None,
            "vocab_size": int(self.vocab_size),
            "n_puzzles": int(self.n_puzzles),
            "pad_id": PAD_ID,
            "ignore_label_id": IGNORE_LABEL_ID,
            "info": self.info,
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write a compressed ``.npz`` atomically (tokens stored in the smallest dtype)."""
        dt = token_dtype(self.vocab_size)
        arrays = {
            "header": np.array(json.dumps(self.header())),
            "inputs": self.inputs.astype(dt),
            "labels": self.labels.astype(dt),
            "puzzle_ids": self.puzzle_ids.astype(np.int32),
        }
        for k, v in self.meta.items():
            v = np.asarray(v)
            if v.dtype == object:
                raise DataError(f"{self.name}: meta[{k!r}] has dtype object, which cannot be saved without pickle")
            arrays[f"meta.{k}"] = v
        return save_npz(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike, dtype=np.int32) -> TaskData:
        """Read a file written by :meth:`save`; tokens are cast to ``dtype`` (``None`` keeps uint8)."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: no such dataset file")
        try:
            arrays = load_npz(path)
            header = json.loads(str(arrays["header"]))
        except (OSError, ValueError, KeyError) as e:
            raise DataError(f"{path}: not a dataset file written by TaskData.save ({e})") from e
        if header.get("format") != FORMAT_VERSION:
            raise DataError(f"{path}: dataset format {header.get('format')}, expected {FORMAT_VERSION}")
        inputs, labels = arrays["inputs"], arrays["labels"]
        if dtype is not None:
            inputs, labels = inputs.astype(dtype), labels.astype(dtype)
        return cls(
            name=header["name"],
            inputs=inputs,
            labels=labels,
            grid=tuple(header["grid"]),
            vocab_size=header["vocab_size"],
            puzzle_ids=arrays["puzzle_ids"],
            meta={k[5:]: v for k, v in arrays.items() if k.startswith("meta.")},
            box=tuple(header["box"]) if header["box"] else None,
            n_puzzles=header["n_puzzles"],
            info=header.get("info", {}),
        )


# The 8 dihedral transforms of a grid (TRM's numbering) and their inverses.
DIHEDRAL_INVERSE = (0, 3, 2, 1, 4, 5, 6, 7)


def dihedral(grid: np.ndarray, tid: int) -> np.ndarray:
    """Transform ``tid`` of the last two axes: 0 id, 1-3 rotations by 90/180/270 degrees
    (counter-clockwise), 4 left-right flip, 5 up-down flip, 6 transpose, 7 anti-transpose."""
    ax = (-2, -1)
    if tid == 0:
        return grid
    if tid in (1, 2, 3):
        return np.rot90(grid, k=tid, axes=ax)
    if tid == 4:
        return np.flip(grid, axis=-1)
    if tid == 5:
        return np.flip(grid, axis=-2)
    if tid == 6:
        return np.swapaxes(grid, -2, -1)
    if tid == 7:
        return np.flip(np.rot90(grid, k=1, axes=ax), axis=-1)
    raise ValueError(f"dihedral transform id {tid} is not in 0..7")


def inverse_dihedral(grid: np.ndarray, tid: int) -> np.ndarray:
    return dihedral(grid, DIHEDRAL_INVERSE[tid])
