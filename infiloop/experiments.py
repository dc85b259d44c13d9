"""Profiles and the run cache (DESIGN.md, "Profiles" and "Data flow").

A *profile* is data: the data profile, the model settings and the training and evaluation settings.
A *run* is (task, connection recipe, profile, overrides); it lives in
``runs/<task>/<recipe>-<profile>-<hash of the full configuration>/`` with ``config.json``, checkpoints,
``metrics.jsonl``, the final EMA weights (``model.safetensors``) and ``DONE.json``. Asking for a run
that is complete returns it; a partial one resumes; a new one trains. Evaluations are cached in the
run's ``eval/`` folder, keyed by their arguments and the data they ran on.

Overrides are dotted keys: ``model.outer.beta=0.1``, ``train.lr=3e-4``, ``data.n_train=500``,
``eval.updates=960``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import paths, tasks
from .config import coerce, field_type, parse_setting, type_of_default
from .errors import UsageError
from .evaluation import TRAJECTORY_VERSION, evaluate, evaluate_budgets, load_trajectory, perturb, save_trajectory
from .io import atomic_write_text, load_npz, load_weights, locked, remove_stale_temps
from .model import LoopedReasoner, ModelConfig
from .tasks.base import DataError, TaskData
from .training import DONE, WEIGHTS, TrainConfig, train

# Connection recipes: the experiment-level names of SPEC sections 6 and 8, as model settings.
RECIPES: dict[str, dict] = {
    "carry_last": {"inner": {"name": "carry_last"}, "outer": {"name": "carry_last"}},
    "infiloop": {"inner": {"name": "infiloop"}, "outer": {"name": "infiloop"}},
    # FPRM: pre-norm block with learned residual scales and the damped fixed-point update (SPEC section 6).
    "fprm": {"norm": "pre", "residual_scale": True, "inner": {"name": "fprm"}, "outer": {"name": "fprm"}},
    "full_attnres": {"inner": {"name": "full_attnres"}, "outer": {"name": "full_attnres"}},
}
# Conditioners of the looped-LM study (SPEC section 7) on the carry-last model: its rescue setting for
# history injection (dense B_j, w = 1; w = 2 for the window study), loop gating, their pair, and the dense
# initial-state injection that the study finds to collapse.
_CARRY_LAST = RECIPES["carry_last"]
RECIPES.update({
    "history_w1": {**_CARRY_LAST, "cond": {"history": "dense", "window": 1}},
    "history_w2": {**_CARRY_LAST, "cond": {"history": "dense", "window": 2}},
    "loop_gating": {**_CARRY_LAST, "cond": {"timestep": "loop_gating"}},
    "history_lg": {**_CARRY_LAST, "cond": {"history": "dense", "window": 1, "timestep": "loop_gating"}},
    "inject_dense": {**_CARRY_LAST, "cond": {"inject": "dense"}},
})

# The calibration behind `tiny` is recorded in docs/calibration.md.
PROFILES: dict[str, dict] = {
    "smoke": {
        "data": "smoke",
        "model": {"d_model": 32, "n_heads": 2, "n_layers": 1, "ffn_multiple": 16, "pos": "grid", "conv": False,
                  "H": 2, "L": 2, "puzzle_emb_len": 0},
        "train": {"steps": 30, "batch_size": 32, "lr": 1e-3, "warmup_steps": 5, "weight_decay": 0.1, "ema": 0.9,
                  "max_segments": 4, "checkpoint_every": 10, "log_every": 5},
        "eval": {"updates": 24, "every": 1, "limit": 64, "batch_size": 64},
        "main_tasks": ["sudoku"],
        # no prefix for speed, except the one position ARC's per-task-view embeddings need
        "task_overrides": {"arc1": {"model.puzzle_emb_len": 1}, "arc2": {"model.puzzle_emb_len": 1}},
    },
    "tiny": {
        "data": "tiny",
        # TRM's token mixer (normalised over the sequence axis) with its hidden width not rounded up to 256
        # (that would double the block's cost at 36 cells); TRM's 16-position puzzle-embedding prefix, which
        # measured better than none for both connections (docs/calibration.md).
        "model": {"d_model": 64, "n_heads": 4, "n_layers": 2, "ffn_multiple": 32, "mixer": "mlp", "pos": "grid",
                  "conv": False, "H": 2, "L": 3, "token_mix_multiple": 1},
        "train": {"steps": 700, "batch_size": 64, "lr": 2e-3, "warmup_steps": 50, "weight_decay": 0.1,
                  "ema": 0.99, "max_segments": 8, "checkpoint_every": 100, "log_every": 25, "threads": 1},
        "eval": {"updates": 960, "every": 1, "limit": 256, "batch_size": 256},
        "main_tasks": ["sudoku"],  # maze at tiny: -p tasks sudoku,maze (slow: about 16 min a model)
    },
    # One GPU-hour per model on one H200-class device, by the FLOP estimate of infiloop/plan.py
    # (`gpu_hours_estimate`): the paper's model, batch and optimiser settings, 20,000 steps instead of
    # 100,000, and the depth evaluation to 960 updates on 4,096 test puzzles.
    "gpu": {
        "data": "gpu",
        "model": {},  # ModelConfig defaults are the paper's (SPEC section 2)
        "train": {"steps": 20_000, "batch_size": 768, "lr": 1e-4, "warmup_steps": 2000, "weight_decay": 1.0,
                  "ema": 0.999, "max_segments": 16, "checkpoint_every": 1000, "log_every": 100},
        "eval": {"updates": 960, "every": 1, "limit": 4096, "batch_size": 1024},
        "main_tasks": ["sudoku"],
    },
    "paper": {
        "data": "paper",
        "model": {},  # ModelConfig defaults are the paper's (SPEC section 2)
        # SPEC section 3. The number of steps is not given by the paper: 100,000 is this project's choice.
        "train": {"steps": 100_000, "batch_size": 768, "lr": 1e-4, "warmup_steps": 2000, "weight_decay": 1.0,
                  "ema": 0.999, "max_segments": 16, "checkpoint_every": 2000, "log_every": 100},
        "eval": {"updates": 960, "every": 1, "limit": 32768, "batch_size": 1024},
        "main_tasks": ["sudoku", "maze", "arc1", "arc2"],
        # per-task settings (SPEC section 3: peak lr 3e-4 for Maze and ARC)
        # TRM trains ARC's puzzle embeddings by sign-SGD at 1e-2 with weight decay 0.1 (its default config);
        # its Sudoku and Maze commands give them the main lr and weight decay (the defaults here).
        "task_overrides": {
            "maze": {"train.lr": 3e-4},
            **{arc: {"train.lr": 3e-4, "train.puzzle_emb_lr": 1e-2, "train.puzzle_emb_weight_decay": 0.1}
               for arc in ("arc1", "arc2")},
        },
    },
}
SECTIONS = ("data", "model", "train", "eval")
# Version of the code and formats that produce a run: part of every run's hash, so a run trained by an
# older model or training code is never reused silently. Raise it when a change alters trained weights.
CODE_VERSION = 2


def parse_overrides(items: list[str] | dict | None) -> dict[str, Any]:
    """``["model.outer.beta=0.1", ...]`` -> ``{"model.outer.beta": "0.1"}``: the values stay text until
    :func:`resolve_config` reads each by the type of its setting (``config.coerce``)."""
    if items is None:
        return {}
    if isinstance(items, dict):
        return dict(items)
    return dict(parse_setting(item) for item in items)


def _typed(key: str, value: Any, data_defaults: dict, eval_defaults: dict) -> Any:
    """An override's value as the type of its setting (a dataclass field, or the default's type)."""
    section, *rest = key.split(".")
    if section == "model":
        hint = field_type(ModelConfig, rest)
    elif section == "train":
        hint = field_type(TrainConfig, rest)
    elif section == "data" and rest:
        hint = str if rest == ["path"] else type_of_default(data_defaults.get(".".join(rest)))
    elif section == "eval" and rest:
        hint = type_of_default(eval_defaults.get(".".join(rest)))
    else:
        hint = Any
    return coerce(key, value, hint)


def _set(tree: dict, dotted: str, value: Any, valid: dict) -> None:
    keys = dotted.split(".")
    if keys[0] not in SECTIONS:
        raise UsageError(f"override {dotted!r}: the first part must be one of {', '.join(SECTIONS)}")
    node, ref = tree, valid
    for i, k in enumerate(keys):
        if not isinstance(ref, dict) or k not in ref:
            choices = sorted(ref) if isinstance(ref, dict) else []
            raise UsageError(f"override {dotted!r}: unknown key {'.'.join(keys[:i + 1])!r}; valid: {choices}")
        if i == len(keys) - 1:
            node[k] = value
        else:
            node = node.setdefault(k, {})
            ref = ref[k]


def resolve_config(task: str, recipe: str, profile: str, overrides: dict | list | None = None) -> dict:
    """The full configuration of a run, as plain data (this is what the run's hash covers)."""
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; valid choices: {', '.join(PROFILES)}")
    if recipe not in RECIPES:
        raise UsageError(f"unknown connection recipe {recipe!r}; valid choices: {', '.join(RECIPES)}")
    if task not in tasks.TASKS:
        raise UsageError(f"unknown task {task!r}; valid choices: {', '.join(tasks.TASKS)}")
    prof = copy.deepcopy(PROFILES[profile])
    overrides = {**prof.get("task_overrides", {}).get(task, {}), **parse_overrides(overrides)}
    data_defaults = tasks.profile_config(task, prof["data"])
    overrides = {k: _typed(k, v, data_defaults, prof["eval"]) for k, v in overrides.items()}
    data_over = {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith("data.")}
    data_cfg = tasks.profile_config(task, prof["data"], data_over)
    model = _model_settings(_data_header(task, prof["data"], data_over), prof["model"])
    for k, v in RECIPES[recipe].items():
        model[k] = {**model[k], **v} if isinstance(v, dict) else v
    cfg = {"code_version": CODE_VERSION, "task": task, "recipe": recipe, "profile": profile, "data": data_cfg,
           "data_profile": prof["data"],
           "data_overrides": data_over, "model": model, "train": {**TrainConfig().to_dict(), **prof["train"]},
           "eval": prof["eval"]}
    valid = {"data": data_cfg, "model": model, "train": cfg["train"], "eval": cfg["eval"]}
    for k, v in overrides.items():
        if not k.startswith("data."):
            _set(cfg, k, v, valid)
    cond = cfg["model"]["cond"]
    if cond["timestep"] != "none" and not cond["horizon"]:  # L_infer in training: the training depth
        cond["horizon"] = cfg["model"]["H"] * cfg["train"]["max_segments"]
    ModelConfig.from_dict(cfg["model"]).validate()
    TrainConfig.from_dict(cfg["train"]).validate()
    return json.loads(json.dumps(cfg))  # tuples -> lists: the same form as config.json


def _model_settings(header: dict, profile_model: dict) -> dict:
    """A model's settings as plain data: ``ModelConfig``'s defaults, the task's fields from a data set's header
    (vocabulary, grid, box, puzzle identifiers), then a profile's model settings."""
    model = ModelConfig().to_dict()
    model.update(vocab_size=header["vocab_size"], seq_len=header["grid"][0] * header["grid"][1],
                 grid=list(header["grid"]), box=header["box"],
                 n_puzzles=header["n_puzzles"])
    for k, v in profile_model.items():
        model[k] = v
    return model


def profile_model(profile: str) -> ModelConfig:
    """The model of ``profile`` on its Sudoku data (InfiLoop on both axes, no overrides), without building any
    data: the grid and box come from the data profile's settings. What ``python -m infiloop info --preset``
    describes; equal to the model of ``resolve_config("sudoku", "infiloop", profile)``."""
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}; valid choices: {', '.join(PROFILES)}")
    prof = copy.deepcopy(PROFILES[profile])
    data = tasks.profile_config("sudoku", prof["data"])
    side = data["side"]
    header = {"vocab_size": tasks.VOCAB["sudoku"](side), "grid": [side, side], "box": data["box"],
              "n_puzzles": 1}  # Sudoku has one puzzle identifier (tasks/sudoku.py)
    return ModelConfig.from_dict(_model_settings(header, prof["model"]))


def _data_header(task: str, data_profile: str, data_over: dict) -> dict:
    """Grid, box, vocabulary and puzzle count of a built training set (builds it if needed)."""
    files = tasks.build(task, data_profile, overrides=data_over or None, verbose=False)
    return json.loads(str(load_npz(files["train"], ["header"])["header"]))


def config_hash(cfg: dict) -> str:
    """Hash of everything that defines the trained model, ``code_version`` included (not the evaluation
    settings, not CPU threads)."""
    keyed = {k: v for k, v in cfg.items() if k != "eval"}
    keyed["train"] = {k: v for k, v in cfg["train"].items() if k != "threads"}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:10]


@dataclass
class Run:
    dir: Path
    config: dict

    @property
    def done(self) -> bool:
        return (self.dir / DONE).is_file()

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def training_depth(self) -> int:
        """Outer updates a puzzle sees in training: H per segment x at most ``max_segments`` segments."""
        return self.config["model"]["H"] * self.config["train"]["max_segments"]

    def standard_snapshots(self) -> tuple[int, int]:
        """Depths a < b for "predictions changed": 3/4 and 3/2 of the training depth, as the paper's
        36 and 72 of its 48 (H = 3 x 16 segments)."""
        a = max(1, 3 * self.training_depth // 4)
        return a, 2 * a

    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.config["model"])

    def train_config(self) -> TrainConfig:
        return TrainConfig.from_dict(self.config["train"])

    def train_data(self) -> TaskData:
        return tasks.load(self.config["task"], self.config["data_profile"], "train",
                          overrides=self.config["data_overrides"] or None)

    def test_data(self) -> TaskData:
        return tasks.load(self.config["task"], self.config["data_profile"], "test",
                          overrides=self.config["data_overrides"] or None)

    def summary(self) -> dict:
        return json.loads((self.dir / DONE).read_text())

    def load_model(self, device: str = "cpu") -> LoopedReasoner:
        """The trained model with its EMA weights, in evaluation mode (safetensors: no pickle)."""
        if not self.done:
            raise DataError(f"{self.dir}: the run is not complete (no {DONE}); train it first")
        loss = self.summary().get("final", {}).get("loss")
        if loss is not None and not math.isfinite(loss):  # finished before divergence was an error
            raise DataError(f"{self.dir}: training diverged (final loss {loss}); delete the folder and train again")
        path = self.dir / WEIGHTS
        redo = (f"delete it and {self.dir / DONE}, then run the train command of this run again: it rewrites "
                f"the weights from the last checkpoint")
        if not path.is_file():
            raise DataError(f"{path}: missing although {DONE} says the run is complete; {redo}")
        model = LoopedReasoner(self.model_config())
        try:
            model.load_state_dict(load_weights(path))
        except Exception as e:  # noqa: BLE001 - any failure to read the file means a damaged file
            raise DataError(f"{path}: damaged weights ({_first_line(e)}); {redo}") from e
        return model.to(device).eval()

    def user_data(self, path: str | Path) -> TaskData:
        """A test file in the public CSV format for this run's model; refused unless it has the model's size."""
        return _user_data(self.config["task"], self.model_config(), path)

    # ----------------------------------------------------------------- cached evaluations
    def _eval_path(self, kind: str, args: dict, data: TaskData | None, data_file: str | None) -> Path:
        ident = {"kind": kind, **args, "data": data_file or "profile-test", "n": len(data) if data else None,
                 "version": TRAJECTORY_VERSION}
        if data_file:
            ident["data_sha"] = hashlib.sha256(Path(data_file).read_bytes()).hexdigest()[:16]
        h = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        return self.dir / "eval" / f"{kind}-{h}.npz"

    def _evaluate_key(self, updates: int | None = None, every: int | None = None, limit: int | None = None,
                      data: TaskData | None = None, data_file: str | None = None, per_token: bool = False,
                      snapshots: tuple[int, ...] = (), puzzles: tuple[int, ...] = ()) -> tuple[dict, TaskData, Path]:
        ev = self.config["eval"]
        updates = ev["updates"] if updates is None else updates
        every = ev["every"] if every is None else every
        limit = self._limit(limit, data)
        data = self._select(data, limit)
        args = {"updates": updates, "every": every, "limit": limit, "per_token": per_token,
                "snapshots": sorted(int(s) for s in snapshots)}
        if puzzles:
            puzzles = [int(p) for p in puzzles]
            if not all(0 <= p < len(data) for p in puzzles):
                raise ValueError(f"puzzles {puzzles} must index the {len(data)} evaluated test puzzles")
            data = data.subset(puzzles)
            args["puzzles"] = puzzles
        return args, data, self._eval_path("traj", args, data, data_file)

    def evaluate(self, updates: int | None = None, every: int | None = None, limit: int | None = None,
                 data: TaskData | None = None, data_file: str | None = None, batch_size: int | None = None,
                 per_token: bool = False, snapshots: tuple[int, ...] = (), device: str = "cpu",
                 progress: bool = True, puzzles: tuple[int, ...] = ()) -> tuple[dict, Path]:
        """Trajectory of the test set (or ``data``) to ``updates`` outer updates; cached.

        ``updates``, ``every`` and ``limit`` default to the profile's (``limit``: all of a given ``data``).
        ``puzzles``: only these rows of the (limited) set, in this order, e.g. one puzzle recorded with
        a prediction snapshot at every frame of an animation."""
        args, data, path = self._evaluate_key(updates, every, limit, data, data_file, per_token, snapshots, puzzles)
        cached = _cached(path)
        if cached is not None:
            return cached, path
        traj = evaluate(self.load_model(device), data, args["updates"], args["every"],
                        batch_size or self.config["eval"]["batch_size"], device, per_token, snapshots, progress)
        save_trajectory(path, traj)
        return traj, path

    def _perturb_key(self, at: int, eps: tuple[float, ...], updates_after: int | None = None, every: int | None = 1,
                     limit: int | None = None, data: TaskData | None = None, data_file: str | None = None,
                     seed: int = 0) -> tuple[dict, TaskData, Path]:
        ev = self.config["eval"]
        after = ev["updates"] if updates_after is None else updates_after
        args = {"at": at, "eps": [float(e) for e in eps], "after": after,
                "every": ev["every"] if every is None else every, "limit": self._limit(limit, data), "seed": seed}
        data = self._select(data, args["limit"])
        return args, data, self._eval_path("perturb", args, data, data_file)

    def perturb(self, at: int, eps: tuple[float, ...], updates_after: int | None = None, every: int | None = 1,
                limit: int | None = None, data: TaskData | None = None, data_file: str | None = None,
                device: str = "cpu", seed: int = 0, progress: bool = True) -> tuple[dict, Path]:
        """Perturbation at update ``at`` (``evaluation.perturb``); cached. ``None`` takes the profile's
        ``updates`` (after the perturbation), ``every`` and ``limit`` (``limit``: all of a given ``data``)."""
        args, data, path = self._perturb_key(at, eps, updates_after, every, limit, data, data_file, seed)
        cached = _cached(path)
        if cached is not None:
            return cached, path
        out = perturb(self.load_model(device), data, at, eps, args["after"], args["every"],
                      self.config["eval"]["batch_size"], device, seed, progress)
        save_trajectory(path, out)
        return out, path

    def _budgets_key(self, budgets: tuple[int, ...], limit: int | None = None, data: TaskData | None = None,
                     data_file: str | None = None) -> tuple[dict, TaskData, Path]:
        limit = self._limit(limit, data)
        args = {"budgets": sorted(int(b) for b in budgets), "limit": limit}
        data_ = self._select(data, limit)
        return args, data_, self._eval_path("budgets", args, data_, data_file)

    def budgets(self, budgets: tuple[int, ...], limit: int | None = None, data: TaskData | None = None,
                data_file: str | None = None, batch_size: int | None = None, device: str = "cpu",
                progress: bool = True) -> tuple[dict, Path]:
        """Exact accuracy after exactly N outer updates for each budget N (``evaluate_budgets``); cached.

        A model that is not told its budget (no timestep conditioning) is read from a cached trajectory
        of the same test puzzles that reaches every budget, when there is one (e.g. notebook 02's)."""
        own_test = data is None
        args, data, path = self._budgets_key(budgets, limit, data, data_file)
        cached = _cached(path)
        if cached is not None:
            return cached, path
        out = None
        if own_test and not self.model_config().cond.uses_horizon:
            out = self._budgets_from_trajectory(args["budgets"], data)
        if out is None:
            out = evaluate_budgets(self.load_model(device), data, tuple(budgets),
                                   batch_size or self.config["eval"]["batch_size"], device, progress)
        save_trajectory(path, out)
        return out, path

    def eval_cache_path(self, kind: str, args: dict) -> Path:
        """The cache file of ``getattr(self, kind)(**args)`` (kind: evaluate, perturb or budgets), without
        computing it: how the experiment plan (infiloop/manifest.py) deduplicates evaluations."""
        keys = {"evaluate": self._evaluate_key, "perturb": self._perturb_key, "budgets": self._budgets_key}
        if kind not in keys:
            raise ValueError(f"evaluation kind {kind!r}: expected one of {', '.join(keys)}")
        return keys[kind](**args)[2]

    def _budgets_from_trajectory(self, budgets: list[int], data: TaskData) -> dict | None:
        for p in sorted((self.dir / "eval").glob("traj-*.npz")):
            traj = _cached(p)
            if traj is None:
                continue
            info = json.loads(str(traj["info"]))
            every = info["every"]
            if (info["data"] != data.name or info["n_puzzles"] != len(data) or info["updates"] < budgets[-1]
                    or any(b % every for b in budgets)):
                continue
            rows = [b // every - 1 for b in budgets]
            return {"budgets": np.asarray(budgets, np.int32), "correct": traj["correct"][rows],
                    "wrong_cells": traj["wrong_cells"][rows],
                    "info": np.asarray(json.dumps({**info, "budgets": budgets, "from_trajectory": p.name}))}
        return None

    def _limit(self, limit: int | None, data: TaskData | None) -> int | None:
        """The profile's limit for its own test set; a user's file is never cut unless asked."""
        return self.config["eval"]["limit"] if limit is None and data is None else limit

    def _select(self, data: TaskData | None, limit: int | None) -> TaskData:
        if limit is not None and limit < 1:
            raise UsageError(f"limit: expected a number of puzzles >= 1, got {limit}")
        data = self.test_data() if data is None else data
        if limit is not None and limit < len(data):
            data = data.subset(slice(0, limit))
        return data


def run_dir_for(cfg: dict, root: Path | None = None) -> Path:
    """The folder of a run in the run cache ``root`` (default ``paths.RUNS``)."""
    root = paths.RUNS if root is None else root
    return Path(root) / cfg["task"] / f"{cfg['recipe']}-{cfg['profile']}-{config_hash(cfg)}"


def resolve(task: str, recipe: str, profile: str = "tiny", overrides: dict | list | None = None,
            root: Path | None = None, run_dir: str | Path | None = None) -> Run:
    """The run for this configuration (trained or not); ``root`` defaults to ``paths.RUNS``."""
    cfg = resolve_config(task, recipe, profile, overrides)
    d = Path(run_dir) if run_dir else run_dir_for(cfg, root)
    run = Run(d, cfg)
    _check_same_config(run)
    return run


def read_config(path: Path) -> dict:
    """A run's ``config.json``; a damaged one is a :class:`DataError` that says what to do."""
    redo = f"delete the folder {path.parent} (or train into another --run-dir) and train again"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # invalid JSON or not UTF-8 text
        raise DataError(f"{path}: damaged run configuration ({_first_line(e)}); {redo}") from None
    if not isinstance(cfg, dict) or not {"task", "model", "train", "eval"} <= set(cfg):
        raise DataError(f"{path}: not a run configuration (expected the keys task, model, train, eval); {redo}")
    return cfg


def _check_same_config(run: Run) -> None:
    """Refuse a folder that holds a run of another configuration (checked again under the lock)."""
    existing = run.dir / "config.json"
    if existing.is_file() and config_hash(read_config(existing)) != config_hash(run.config):
        raise UsageError(f"{run.dir}: holds a run with a different configuration; choose another --run-dir")


def get_run(task: str, recipe: str, profile: str = "tiny", overrides: dict | list | None = None,
            root: Path | None = None, run_dir: str | Path | None = None, device: str = "cpu",
            max_steps: int | None = None, progress: bool = True) -> Run:
    """The trained run: from the cache, resumed from its last checkpoint, or trained now."""
    if max_steps is not None and max_steps < 1:
        raise UsageError(f"max_steps: expected a number of steps >= 1, got {max_steps}")
    run = resolve(task, recipe, profile, overrides, root, run_dir)
    if run.done:
        return run
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    # Under torchrun every process trains together: a file lock would make them wait for each other.
    with (nullcontext() if distributed else locked(run.dir / ".lock")):
        _check_same_config(run)  # another process may have started this folder with another configuration
        if run.done:  # another process finished it while we waited
            return run
        remove_stale_temps(run.dir)
        cfg_text = json.dumps(run.config, indent=1, sort_keys=True)
        if not (run.dir / "config.json").is_file() and (not distributed or torch.distributed.get_rank() == 0):
            atomic_write_text(run.dir / "config.json", cfg_text)
        old_threads = torch.get_num_threads()
        train(run.model_config(), run.train_config(), run.train_data(), run.dir, device, max_steps, progress)
        torch.set_num_threads(old_threads)
    return run


def trained_run(task: str, recipe: str, profile: str = "tiny", overrides: dict | list | None = None,
                root: Path | None = None) -> Run | None:
    """The run for this configuration if it has finished training, else ``None``. Trains nothing, and
    builds no data unless a finished run of this task, recipe and profile exists."""
    root = paths.RUNS if root is None else root
    if not any((Path(root) / task).glob(f"{recipe}-{profile}-*/{DONE}")):
        return None
    run = resolve(task, recipe, profile, overrides, root)
    return run if run.done else None


def load_run(run_dir: str | Path) -> Run:
    """The run in folder ``run_dir`` (as printed by ``train``); leftovers of killed writes are removed."""
    d = Path(run_dir)
    p = d / "config.json"
    if not d.is_dir():
        raise DataError(f"{d}: no such run folder (give the folder printed by `python -m infiloop train`)")
    if not p.is_file():
        raise DataError(f"{d}: not a run folder (no config.json)")
    run = Run(d, read_config(p))
    if run.config.get("code_version", 1) != CODE_VERSION:
        raise DataError(f"{d}: trained by code version {run.config.get('code_version', 1)}, this code is version "
                        f"{CODE_VERSION} (the model or its training changed): train it again")
    for folder in (d, d / "eval"):
        remove_stale_temps(folder)
    return run


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _cached(path: Path) -> dict | None:
    """A cached evaluation, or ``None`` when there is none or it is damaged (then it is computed again)."""
    if not path.is_file():
        return None
    try:
        return load_trajectory(path)
    except Exception as e:  # noqa: BLE001 - a cache that cannot be read is never trusted
        print(f"warning: {path}: damaged evaluation cache ({_first_line(e)}); computing it again",
              file=sys.stderr, flush=True)
        return None


def _user_data(task: str, cfg: ModelConfig, path: str | Path) -> TaskData:
    """A user's test file for a model of ``cfg``, refused with both sizes when it does not fit the model."""
    from .tasks import maze, sudoku
    from .tasks.csvio import grid_side

    if task not in ("sudoku", "maze"):
        raise UsageError(f"--data: a test file in the public CSV format is for sudoku and maze runs; "
                         f"this run's task is {task}")
    n, side = cfg.grid[0], grid_side(path)
    if task == "sudoku":
        br, bc = cfg.box
        if side is not None and side != n:
            raise DataError(f"{path}: the file holds {side}x{side} Sudoku puzzles, but this model was trained on "
                            f"{n}x{n} (boxes {br}x{bc}); give it a file of {n}x{n} puzzles")
        return sudoku.to_taskdata("user", sudoku.read_csv(path, (br, bc)))
    if side is not None and side != n:
        raise DataError(f"{path}: the file holds {side}x{side} mazes, but this model was trained on {n}x{n} mazes; "
                        f"give it a file of {n}x{n} mazes")
    return maze.to_taskdata("user", maze.read_csv(path))


# ------------------------------------------------------------------------------------------ the notebooks' runs

MAIN_RECIPES = ("carry_last", "fprm", "infiloop")

# SPEC section 5 ablations of InfiLoop (both axes unless stated), under stable ids: ``label`` is what the
# notebook prints, ``overrides`` the model settings over the InfiLoop recipe, ``paper`` the row of the paper's
# ablation tables it corresponds to (infiloop/paper.py: ("decay", decay, beta0) in ABLATION_DECAY,
# ("axes", axis) in ABLATION_AXES; None where the paper has no such row).
ABLATIONS: dict[str, dict] = {
    "beta0_0.55": {"label": "learned β₀=0.55", "overrides": {}, "paper": ("decay", "learned", 0.55)},
    "beta0_0.10": {"label": "learned β₀=0.10", "overrides": {"model.inner.beta": 0.10, "model.outer.beta": 0.10},
                   "paper": ("decay", "learned", 0.10)},
    "beta0_0.90": {"label": "learned β₀=0.90", "overrides": {"model.inner.beta": 0.90, "model.outer.beta": 0.90},
                   "paper": ("decay", "learned", 0.90)},
    "fixed_0.55": {"label": "fixed β=0.55", "overrides": {"model.inner.decay": "fixed", "model.outer.decay": "fixed"},
                   "paper": ("decay", "fixed", 0.55)},
    "uniform": {"label": "uniform β=1", "overrides": {"model.inner.decay": "uniform", "model.outer.decay": "uniform"},
                "paper": ("decay", "uniform", 1.0)},
    "reverse_1.82": {"label": "reverse β=1.82",
                     "overrides": {"model.inner.decay": "reverse", "model.outer.decay": "reverse",
                                   "model.inner.beta": 1.82, "model.outer.beta": 1.82},
                     "paper": ("decay", "reverse", 1.82)},
    "inner_only": {"label": "inner axis only", "overrides": {"model.outer.name": "carry_last"},
                   "paper": ("axes", "inner")},
    "outer_only": {"label": "outer axis only", "overrides": {"model.inner.name": "carry_last"},
                   "paper": ("axes", "outer")},
    "no_content_score": {"label": "no content score",
                         "overrides": {"model.inner.content_score": False, "model.outer.content_score": False},
                         "paper": None},
}


# Notebook 06: the conditioners of the looped-LM study beside the unconditioned baseline and InfiLoop.
CONDITIONING_RECIPES = ("carry_last", "history_w1", "history_w2", "loop_gating", "history_lg", "inject_dense",
                        "infiloop")
