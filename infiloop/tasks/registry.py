"""The tasks, registered: one :class:`Task` record per task holding what the code outside ``infiloop/tasks/``
dispatches on (the model's vocabulary and grid from the data settings, the cells a model decides, how a test set is
scored, a user's CSV file, the settings' puzzles in words, the text of a drawn cell), as ``model.connections`` and
``settings.recipes`` hold the connections and the recipes. Adding a task is its module plus one entry of
:data:`REGISTRY`; a field a task has no use for stays None (ARC has no CSV files, and its header needs the built
set). The data builders are ``datasets.py``'s (``BUILDERS``), the data profiles' settings ``settings/profiles.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import extrapolation, maze, sudoku
from .base import PAD_ID, DataError, TaskData
from .csvio import grid_side


@dataclass(frozen=True)
class Task:
    """One task: its name and what the code asks of it.

    ``header(cfg)``: what a model needs of a data set with settings ``cfg`` (grid, box, vocabulary, puzzle ids),
    read without building, or None where only the built set tells. ``to_fill(inputs)``: the cells whose answer
    the model decides. ``voted``: scored by pass@2 over the views of each test task (ARC), not by exact accuracy
    per puzzle. ``user_file(path, grid, box)``: a test file in the public CSV format for a model of that grid.
    ``settings_text(cfg)``: the puzzles the settings make, in words (the contrast search's tables).
    ``cell_text(tokens)``: the text drawn in each cell of a board (empty: none). ``hardness(test)``: the axis of
    notebook 02's difficulty breakdown, (its name, its value per test puzzle, or None where the trajectory records
    it: Sudoku's blanks). ``paper_depth``: the task of the paper's depth curves and carry-last diagnostics
    (Sudoku-Extreme), on which notebook 02 decides its claims."""

    name: str
    header: Callable[[dict], dict | None]
    to_fill: Callable[[np.ndarray], np.ndarray]
    voted: bool = False
    user_file: Callable[[str | Path, tuple, tuple | None], TaskData] | None = None
    settings_text: Callable[[dict], str] | None = None
    cell_text: Callable[[np.ndarray], np.ndarray] | None = None
    hardness: Callable[[TaskData], tuple[str, np.ndarray | None]] | None = None
    paper_depth: bool = False


# ------------------------------------------------------------------------------------------ Sudoku


def _sudoku_header(cfg: dict) -> dict:
    n = cfg["side"]
    return {"grid": [n, n], "box": list(cfg["box"]), "vocab_size": n + 2, "n_puzzles": 1}


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


def _maze_header(cfg: dict) -> dict:
    k = cfg["size"]
    return {"grid": [k, k], "box": None, "vocab_size": 6, "n_puzzles": 1}


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


def _no_header(cfg: dict) -> None:
    return None  # ARC: the built set's tasks decide the puzzle identifiers


def _every_cell(inputs: np.ndarray) -> np.ndarray:
    return inputs != PAD_ID  # ARC's output is a whole new grid


REGISTRY: dict[str, Task] = {
    "sudoku": Task("sudoku", _sudoku_header, lambda inputs: inputs == 1, user_file=_sudoku_file,  # the blanks
                   settings_text=_sudoku_text, cell_text=_sudoku_cells, hardness=lambda test: ("blanks", None),
                   paper_depth=True),
    "maze": Task("maze", _maze_header, lambda inputs: inputs == 2, user_file=_maze_file,  # the open cells
                 settings_text=lambda d: f"maze {d['size']}x{d['size']}, shortest path >= {d['min_path']}",
                 cell_text=_maze_cells, hardness=lambda test: ("path_length", test.meta["path_length"])),
    # every position of a bit string is scored (its running parity); the grid is 1 x length
    "prefix_sums": Task("prefix_sums", extrapolation.prefix_sums_header, _every_cell, cell_text=_prefix_cells),
    "arc1": Task("arc1", _no_header, _every_cell, voted=True),
    "arc2": Task("arc2", _no_header, _every_cell, voted=True),
}


def task(name: str) -> Task:
    """The registered task ``name``; an unknown one is a ValueError naming the tasks."""
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}; tasks: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def voted_tasks() -> list[str]:
    """The tasks scored by voting over views (ARC-AGI-1, then -2)."""
    return [name for name, t in REGISTRY.items() if t.voted]
