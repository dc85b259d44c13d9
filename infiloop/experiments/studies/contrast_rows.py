"""The candidate rows of the search for the paper's contrast (``contrasts.py``): the data sets and settings each row
changes over its base profile (:data:`DATA_SETS`, :data:`ROWS`), how a row resolves to a run's task, data and
overrides (:func:`row_overrides`), the depths recorded, and each row's estimated cost (:func:`estimated_seconds`,
what ``contrasts --list`` prints).
"""

from __future__ import annotations

import copy

from ... import paths
from ...tasks.registry import REGISTRY
from ..settings.recipes import resolve_config

CONNECTIONS = ("carry_last", "infiloop")
RECORDED = paths.DOCS / "calibration-results"  # the rows run so far, kept with the code (docs/calibration.md)
MULTIPLES = (0.5, 1, 4, 60)  # depths recorded, as multiples of the training depth

# A row's settings, each optional (the base profile's value otherwise):
#   profile    base profile (default "tiny")
#   task       sudoku (default) or maze; a named data set may say it instead
#   data       a name in DATA_SETS, or data overrides (infiloop/tasks/datasets.py): Sudoku side, box, blanks,
#              needs_search, min_rating, n_train, ...; Maze size, min_path, n_train, ...
#   d_model, n_heads, n_layers, mixer ("mlp": TRM's token-mixing MLP, "attention"), H, L   the model
#   max_segments, steps                                  training depth is H x max_segments outer updates
#   overrides  any further dotted overrides (e.g. {"train.lr": 1e-3})
#   limit      test puzzles evaluated (default: the profile's, 256 at tiny); seeds: training seeds (default [0])
ROW_KEYS = {"d_model": "model.d_model", "n_heads": "model.n_heads", "n_layers": "model.n_layers",
            "mixer": "model.mixer", "H": "model.H", "L": "model.L", "max_segments": "train.max_segments",
            "steps": "train.steps"}
SETTINGS = {"profile", "task", "data", "overrides", "limit", "seeds", *ROW_KEYS}
TASKS = tuple(name for name, t in REGISTRY.items() if t.settings_text)  # sudoku, maze: settings make the puzzles
BASE_PROFILE = "tiny"  # the profile every row changes unless it names another

# Data sets a row names (or a row gives its own data overrides). Scaled-down analogues of Sudoku-Extreme:
# puzzles that naked and hidden singles do not solve (about 3 % of 6x6 candidates at 22-28 blanks, about
# 30 % of 9x9 ones at 50-60), 600 base puzzles x 5 views for training, 256 test puzzles.
DATA_SETS: dict[str, dict] = {
    "easy6": {},  # the tiny profile's: 6x6, blanks 14-22, every puzzle solved by singles
    "search6": {"blanks": [22, 28], "needs_search": True, "n_train": 600, "n_test": 256},
    "mixed6": {"blanks": [22, 28], "n_train": 600, "n_test": 256},  # the same blanks, no selection (mostly easy)
    "rated6": {"blanks": [22, 28], "min_rating": 1, "n_train": 600, "n_test": 256},  # at least one backtrack
    "search9": {"side": 9, "box": [3, 3], "blanks": [50, 60], "needs_search": True, "n_train": 600, "n_test": 256},
    # Mazes whose unique shortest path is near the longest the grid allows, as Maze-Hard keeps paths > 110 on
    # 30x30 (measured on 200 generated grids: the longest unique path from near one end has median 25 / 38 /
    # 44 moves at 8x8 / 10x10 / 12x12, 10th percentile 21 / 34 / 26); tiny's maze data is maze8 since row maze8-2500
    "maze8": {"task": "maze", "size": 8, "min_path": 20, "n_train": 1000, "n_test": 256},
    "maze10": {"task": "maze", "size": 10, "min_path": 32, "n_train": 1000, "n_test": 256},
    "maze12": {"task": "maze", "size": 12, "min_path": 36, "n_train": 1000, "n_test": 256},
}

# The candidate rows, cheapest first. Base: the tiny model (d = 64, token-mixing MLP, 2 layers, H = 2, L = 3,
# 8 segments: training depth 16, 700 steps). The minutes per model in the comments below (training +
# evaluation of 256 puzzles to 60x the training depth, one thread) predate TRM's 16-position prefix; with it
# a step costs about 2.5 times as much: `python -m infiloop contrasts --list` prints today's estimates
# (`estimated_seconds`, from the rows' FLOPs), about 46 CPU hours for the whole list, one seed, both connections.
ROWS: dict[str, dict] = {
    # difficulty at the tiny budget: the tiny profile itself (singles solve every puzzle), puzzles that need
    # search, and the same blanks without selection                                             2.3 + 1.6 min each
    "easy-700": {},
    "search6-700": {"data": "search6"},
    "mixed6-700": {"data": "mixed6"},
    # recursion per segment: a single inner update                                                4.2 + 0.8 min
    "search6-L1": {"data": "search6", "steps": 2500, "L": 1},
    # training length and difficulty: the probe (search puzzles, 2,500 steps), its control without
    # selection, and a minimum rating (at least one solver backtrack) instead of the singles criterion
    #                                                                                             8.3 + 1.6 min each
    "search6-2500": {"data": "search6", "steps": 2500},
    "mixed6-2500": {"data": "mixed6", "steps": 2500},
    "rating6-2500": {"data": "rated6", "steps": 2500},
    # supervision segments: training depth 8 and 32 (the cost of a step does not change)     8.3 + 0.8 / 3.2 min
    "search6-seg4": {"data": "search6", "steps": 2500, "max_segments": 4},
    "search6-seg16": {"data": "search6", "steps": 2500, "max_segments": 16},
    # training depth 4: added after search6-seg4 moved carry-last towards the paper's picture (more state change
    # after the solve, more solved puzzles lost than at 8 segments)                                8.3 + 0.4 min
    "search6-seg2": {"data": "search6", "steps": 2500, "max_segments": 2},
    # block: attention (TRM's ARC and Maze block) instead of the token-mixing MLP                 8.4 + 1.6 min
    "search6-attn": {"data": "search6", "steps": 2500, "mixer": "attention"},
    # recursion per segment: three outer updates (depth 24)                                        9.7 + 2.4 min
    "search6-H3": {"data": "search6", "steps": 2500, "H": 3},
    # width 128                                                                                    13.3 + 2.5 min
    "search6-d128": {"data": "search6", "steps": 2500, "d_model": 128},
    # the paper's recursion per segment, H = 3, L = 6 (depth 24)                                 17.0 + 4.2 min
    "search6-H3L6": {"data": "search6", "steps": 2500, "H": 3, "L": 6},
    # over-trained: 6,000 steps                                                                   20.0 + 1.6 min
    "search6-6000": {"data": "search6", "steps": 6000},
    # the `search` profile itself (search6 puzzles, 1,500 steps) with its three seeds: after
    # `./reproduce.sh --profile search` its runs and depth trajectories are in the run cache (--root), so this
    # row computes nothing
    "search-profile": {"profile": "search", "seeds": [0, 1, 2]},
    # 9x9 puzzles that need search (50-60 blanks): attention, the tiny model, width 128, over-trained
    #                                                                        19.5 / 21.1 / 34.5 / 50.6 + 4-7 min
    "search9-attn": {"data": "search9", "steps": 2500, "mixer": "attention"},
    "search9-2500": {"data": "search9", "steps": 2500},
    "search9-d128": {"data": "search9", "steps": 2500, "d_model": 128},
    "search9-6000": {"data": "search9", "steps": 6000},
    # Maze at CPU scale (issue: all four benchmarks): long paths on small grids, attention (TRM's Maze block)
    # and the token-mixing MLP, then longer training and a larger grid
    "maze8-attn": {"data": "maze8", "steps": 2500, "mixer": "attention"},
    "maze8-2500": {"data": "maze8", "steps": 2500},
    # tiny's 700 steps on the same mazes: maze8-2500's training exact accuracy was already 0.90 / 0.65 at step 700
    # (the learning rate is constant after warm-up), so the Maze column may not need 2,500 steps
    "maze8-700": {"data": "maze8", "steps": 700},
    "maze8-attn-6000": {"data": "maze8", "steps": 6000, "mixer": "attention"},
    "maze10-attn": {"data": "maze10", "steps": 2500, "mixer": "attention"},
    "maze12-attn": {"data": "maze12", "steps": 2500, "mixer": "attention"},
}


# ------------------------------------------------------------------------------------------ rows


def check_row(name: str, row: dict) -> None:
    unknown = set(row) - SETTINGS
    if unknown:
        raise ValueError(f"calibration row {name!r}: unknown settings {sorted(unknown)}; known: {sorted(SETTINGS)}")
    row_data(row)
    if row_task(row) not in TASKS:
        raise ValueError(f"calibration row {name!r}: task {row_task(row)!r}; expected one of {', '.join(TASKS)}")


def _named(row: dict) -> dict:
    data = row.get("data", {})
    if isinstance(data, str):
        if data not in DATA_SETS:
            raise ValueError(f"unknown data set {data!r}; known: {', '.join(DATA_SETS)}")
        data = DATA_SETS[data]
    return data


def row_profile(row: dict) -> str:
    """The profile a row's settings change (``BASE_PROFILE`` unless the row names one)."""
    return row.get("profile", BASE_PROFILE)


def row_task(row: dict) -> str:
    """A row's task: its own ``task``, else its named data set's, else Sudoku."""
    return row.get("task") or _named(row).get("task", "sudoku")


def row_data(row: dict) -> dict:
    """A row's data overrides (its named data set's, or its own)."""
    return {k: copy.deepcopy(v) for k, v in _named(row).items() if k != "task"}


def row_overrides(row: dict, seed: int = 0) -> dict:
    """The run-cache overrides of a row (dotted keys) for one training seed."""
    out = {f"data.{k}": v for k, v in row_data(row).items()}
    out.update({dotted: row[k] for k, dotted in ROW_KEYS.items() if k in row})
    out.update(row.get("overrides", {}))
    out["train.seed"] = seed
    return out


def row_config(row: dict) -> dict:
    """The resolved configuration of a row's carry-last run (from the settings alone: no data is built)."""
    return resolve_config(row_task(row), "carry_last", row_profile(row), row_overrides(row))


def depths(training_depth: int) -> dict[str, int]:
    """The recorded depths: {multiple: outer updates} for 0.5x, 1x, 4x and 60x the training depth."""
    return {f"{m:g}": max(1, round(m * training_depth)) for m in MULTIPLES}


def estimated_seconds(row: dict) -> tuple[float, float]:
    """(training, evaluation) seconds per connection and seed with one thread: the row's carry-last run's FLOPs
    (``flops.train_flops`` of its steps, ``flops.eval_flops`` of 60x its training depth on its test puzzles),
    timed at one CPU thread's achieved rate (``arithmetic.CPU_THREAD_TFLOPS``, through ``arithmetic.FlopTimer``). The
    FLOPs leave out element-wise work, which dominates at the tiny model's size: a wider model or a larger grid
    is priced above what it measures (docs/calibration.md's train / eval minutes)."""
    from ...model.reasoner import ModelConfig
    from ..cost.arithmetic import CPU_THREAD_TFLOPS, FlopTimer
    from ..cost.flops import eval_flops, train_flops

    cfg = row_config(row)
    model, train = ModelConfig.from_dict(cfg["model"]), cfg["train"]
    limit = row.get("limit") or cfg["eval"]["limit"]
    puzzles = min(n for n in (limit, cfg["data"].get("n_test")) if isinstance(n, int))
    updates = depths(model.H * train["max_segments"])["60"]
    timer = FlopTimer(CPU_THREAD_TFLOPS)
    return (timer.seconds(train_flops(model, train["steps"], train["batch_size"])),
            timer.seconds(eval_flops(model, updates, puzzles)))


# The connection study changed InfiLoop (and FPRM) on this day (docs/connection-study.md); carry-last's runs kept
# their names. A row recorded before it holds InfiLoop as built, which the study still trains (variant `baseline`).
CONNECTION_STUDY_DATE = "2026-12-01"


def as_built(record: dict) -> bool:
    """Whether a row's InfiLoop models are the connection as built before the connection study."""
    return str(record.get("updated", "")) < CONNECTION_STUDY_DATE
