"""The tasks, registered: one :class:`Task` record per task holding everything the code dispatches on by a task's
name: its data builder, leakage audit, vocabulary and validation split, its data settings per data profile, the
model's grid from the data settings, the cells a model decides, how a test set is scored, a user's CSV file, the
settings' puzzles in words, the text of a drawn cell (as ``model.connections`` and ``settings.recipes`` hold the
connections and the recipes). Adding a task is its module plus one entry of :data:`REGISTRY` (or, outside the
package, :func:`register`); a field a task has no use for stays None (ARC has no CSV files, and its header needs the
built set).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import audit, builders, extrapolation, maze, sudoku
from .arc import VOCAB_SIZE as ARC_VOCAB
from .audit import AuditResult
from .base import PAD_ID, DataError, TaskData
from .csvio import grid_side
from .prefix_sums import VOCAB as PREFIX_SUMS_VOCAB

# build(name, cfg, out, root, verbose) -> (files by name, where the data came from in words, summary, other records)
Builder = Callable[[str, dict, Path, Path, bool], tuple[dict, str, dict, dict]]
# validation_split(cfg, out, train, test, n, verbose) -> (the split, candidates passed over, its stream in words)
ValidationSplit = Callable[[dict, Path, TaskData, TaskData, int, bool], tuple[TaskData, int, str]]


@dataclass(frozen=True)
class Task:
    """One task: its name and what the code asks of it.

    ``header(cfg)``: what a model needs of a data set with settings ``cfg`` (grid, box, vocabulary, puzzle ids),
    read without building, or None where only the built set tells. ``to_fill(inputs)``: the cells whose answer
    the model decides. ``build(name, cfg, out, root, verbose)``: writes the data set of settings ``cfg`` into the
    folder ``out`` (``train.npz``, ``test.npz``, any named test sets; ``root`` is the data root, for downloads) and
    returns its files by name, where the data came from in words, the manifest's summary and its other records
    (``seeds``, ``inputs``: ``datasets.build`` writes them to ``build.json``). ``audit(train, test)``: the test items
    equal to a training item up to the task's symmetries (``audit.py``). ``vocab``: the token vocabulary, a size or
    a function of the grid's side (Sudoku: n + 2). ``validation_split(cfg, out, train, test, n, verbose)``: ``n``
    held-out puzzles of the training distribution kept apart from both sets, with how many candidates were passed
    over and the stream they came from in words (``validation.py``); None: the task has none.
    ``no_validation(cfg)``: why a set of settings ``cfg`` has no validation split ("" where it has one).
    ``optional_settings``: settings a data profile may leave out (they enter a config only when set, so that the
    data and the run hashes of the profiles without them stay as they were). ``data_profiles``: the builder's
    settings per data profile that the task brings itself (``settings/profiles.py`` adds them to
    ``DATA_PROFILES``; a profile there may not give the same task's settings too).

    ``voted``: scored by pass@2 over the views of each test task (ARC), not by exact accuracy per puzzle.
    ``user_file(path, grid, box)``: a test file in the public CSV format for a model of that grid.
    ``settings_text(cfg)``: the puzzles the settings make, in words (the contrast search's tables).
    ``cell_text(tokens)``: the text drawn in each cell of a board (empty: none). ``hardness(test)``: the axis of
    notebook 02's difficulty breakdown, (its name, its value per test puzzle, or None where the trajectory records
    it: Sudoku's blanks). ``paper_depth``: the task of the paper's depth curves and carry-last diagnostics
    (Sudoku-Extreme), on which notebook 02 decides its claims. ``size_setting``: the data setting that lists the
    sizes of the task's named test sets, ``test_<size>.npz`` (``extrapolation.py``; None: it has none); not part of a
    run's hash (``recipes.config_hash``)."""

    name: str
    header: Callable[[dict], dict | None]
    to_fill: Callable[[np.ndarray], np.ndarray]
    build: Builder
    audit: Callable[[TaskData, TaskData], AuditResult]
    vocab: int | Callable[[int], int]
    validation_split: ValidationSplit | None = None
    no_validation: Callable[[dict], str] | None = None
    optional_settings: tuple[str, ...] = ()
    data_profiles: Mapping[str, dict] = field(default_factory=dict)
    voted: bool = False
    user_file: Callable[[str | Path, tuple, tuple | None], TaskData] | None = None
    settings_text: Callable[[dict], str] | None = None
    cell_text: Callable[[np.ndarray], np.ndarray] | None = None
    hardness: Callable[[TaskData], tuple[str, np.ndarray | None]] | None = None
    paper_depth: bool = False
    size_setting: str | None = None


# ------------------------------------------------------------------------------------------ Sudoku


def _sudoku_vocab(n: int) -> int:
    return n + 2  # pad, blank and the digits 1..n


def _sudoku_header(cfg: dict) -> dict:
    n = cfg["side"]
    return {"grid": [n, n], "box": list(cfg["box"]), "vocab_size": _sudoku_vocab(n), "n_puzzles": 1}


def _sudoku_file(path: str | Path, grid: tuple, box: tuple | None) -> TaskData:
    n, side = grid[0], grid_side(path)
    br, bc = box
    if side is not None and side != n:
        raise DataError(f"{path}: the file holds {side}x{side} Sudoku puzzles, but this model was trained on "
                        f"{n}x{n} (boxes {br}x{bc}); give it a file of {n}x{n} puzzles")
    return sudoku.to_taskdata("user", sudoku.read_csv(path, (br, bc)))


def _sudoku_text(data: dict) -> str:
    side = data.get("side", 6)
    blanks = data["blanks"]
    text = f"{side}x{side}, blanks {blanks[0]}-{blanks[1]}" if not isinstance(blanks, dict) else f"{side}x{side}"
    need = data.get("needs_search")
    if need is not None:
        text += ", singles do not solve" if need else ", singles solve"
    if data.get("min_rating"):
        text += f", rating >= {data['min_rating']}"
    return text


def _sudoku_cells(tokens: np.ndarray) -> np.ndarray:
    return np.where(tokens >= 2, (tokens - 1).astype(str), "")


# ------------------------------------------------------------------------------------------ Maze

_MAZE_TEXT = {1: "#", 3: "S", 4: "G", 5: "•"}  # tokens of '#', 'S', 'G', 'o' (maze.py); open cells blank
MAZE_VOCAB = 6  # pad and the characters '#', ' ', 'S', 'G', 'o'


def _maze_header(cfg: dict) -> dict:
    k = cfg["size"]
    return {"grid": [k, k], "box": None, "vocab_size": MAZE_VOCAB, "n_puzzles": 1}


def _maze_file(path: str | Path, grid: tuple, box: tuple | None) -> TaskData:
    n, side = grid[0], grid_side(path)
    if side is not None and side != n:
        raise DataError(f"{path}: the file holds {side}x{side} mazes, but this model was trained on {n}x{n} mazes; "
                        f"give it a file of {n}x{n} mazes")
    return maze.to_taskdata("user", maze.read_csv(path))


def _maze_cells(tokens: np.ndarray) -> np.ndarray:
    return np.array([_MAZE_TEXT.get(int(t), "") for t in tokens.ravel()]).reshape(tokens.shape)


# ------------------------------------------------------------------------------------------ Prefix sums


def _prefix_cells(tokens: np.ndarray) -> np.ndarray:
    return np.where(tokens >= 1, (tokens - 1).astype(str), "")  # tokens 1, 2: the bits 0, 1


# ------------------------------------------------------------------------------------------ the registry


def _every_cell(inputs: np.ndarray) -> np.ndarray:
    return inputs != PAD_ID  # ARC's output is a whole new grid


def _arc(name: str) -> Task:
    return Task(name, lambda cfg: builders.arc_header(name, cfg), _every_cell, builders.build_arc, audit.audit_arc,
                ARC_VOCAB, no_validation=lambda cfg: builders.ARC_NO_VALIDATION, voted=True)


REGISTRY: dict[str, Task] = {
    "sudoku": Task("sudoku", _sudoku_header, lambda inputs: inputs == 1,  # the blanks
                   builders.build_sudoku, audit.audit_sudoku, _sudoku_vocab,
                   validation_split=builders.sudoku_validation, optional_settings=builders.SUDOKU_SELECTION,
                   user_file=_sudoku_file, settings_text=_sudoku_text, cell_text=_sudoku_cells,
                   hardness=lambda test: ("blanks", None), paper_depth=True),
    "maze": Task("maze", _maze_header, lambda inputs: inputs == 2,  # the open cells
                 builders.build_maze, audit.audit_maze, MAZE_VOCAB, validation_split=builders.maze_validation,
                 no_validation=builders.maze_no_validation, optional_settings=builders.MAZE_OPTIONAL,
                 user_file=_maze_file,
                 settings_text=lambda d: f"maze {d['size']}x{d['size']}, shortest path >= {d['min_path']}",
                 cell_text=_maze_cells, hardness=lambda test: ("path_length", test.meta["path_length"]),
                 size_setting=extrapolation.MAZE_SIZES),
    # every position of a bit string is scored (its running parity); the grid is 1 x length
    "prefix_sums": Task("prefix_sums", extrapolation.prefix_sums_header, _every_cell, extrapolation.build_prefix_sums,
                        audit.audit_prefix_sums, PREFIX_SUMS_VOCAB,
                        validation_split=extrapolation.prefix_sums_validation, cell_text=_prefix_cells,
                        size_setting=extrapolation.PREFIX_SUMS_SIZES),
    "arc1": _arc("arc1"),
    "arc2": _arc("arc2"),
}

def task(name: str) -> Task:
    """The registered task ``name``; an unknown one is a ValueError naming the tasks."""
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}; tasks: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def voted_tasks() -> list[str]:
    """The tasks scored by voting over views (ARC-AGI-1, then -2)."""
    return [name for name, t in REGISTRY.items() if t.voted]


def register(task: Task) -> Task:
    """Add ``task`` to :data:`REGISTRY` (a task defined outside the package: a test's, a notebook's); a name already
    registered is a ValueError. Everything that dispatches on a task's name finds it from then on."""
    if task.name in REGISTRY:
        raise ValueError(f"task {task.name!r} is registered already")
    REGISTRY[task.name] = task
    return task


@contextmanager
def registered(task: Task) -> Iterator[Task]:
    """``task`` registered (:func:`register`) for the length of a ``with`` block, and removed after it."""
    register(task)
    try:
        yield task
    finally:
        del REGISTRY[task.name]
