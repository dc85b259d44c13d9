"""The run cache: a run trained, resumed or loaded; its evaluations computed once and cached.

A *run* is (task, connection recipe, profile, overrides), resolved by ``experiments/settings/recipes.py``; it lives in
``runs/<task>/<recipe>-<profile>-<hash of the full configuration>/`` with ``config.json``, checkpoints,
``metrics.jsonl``, the final EMA weights (``model.safetensors``) and ``DONE.json``. Asking for a run
that is complete returns it; a partial one resumes; a new one trains. Evaluations are cached in the
run's ``eval/`` folder, keyed by their arguments and the data they ran on.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ... import paths, tasks
from ...errors import UsageError
from ...evaluation import (
    TRAJECTORY_VERSION,
    WEIGHT_CHOICES,
    EvalRequest,
    evaluate,
    evaluate_budgets,
    load_trajectory,
    perturb,
    precision_arg,
    save_trajectory,
)
from ...io import atomic_write_text, load_weights, locked, remove_stale_temps
from ...model.reasoner import LoopedReasoner, ModelConfig
from ...tasks import validation
from ...tasks.base import DataError, TaskData
from ...training import CHECKPOINT, DONE, METRICS, WEIGHTS, TrainConfig, read_checkpoint, read_metrics, train
from ...training.batching import rank_and_world
from ...training.selection import BEST, BEST_RECORD
from ..settings import profiles, recipes
from ..settings.recipes import config_hash, resolve_config


@dataclass
class Run:
    dir: Path
    config: dict
    trained_here: bool = field(default=False, compare=False)  # get_run trained it in this process

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
        """Depths a < b for "predictions changed" (a: where a perturbation is added): the training depth and twice it,
        as the paper's 36 and 72 of its Sudoku trained to 36 (docs/model.md; 3/4 and 3/2 of it until 2026-12-05)."""
        a = max(1, self.training_depth)
        return a, 2 * a

    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.config["model"])

    def train_config(self) -> TrainConfig:
        return TrainConfig.from_dict(self.config["train"])

    def train_data(self) -> TaskData:
        return tasks.load(self.config["task"], profiles.data_profile(self.config["data_profile"]), "train",
                          overrides=self.config["data_overrides"] or None)

    def test_data(self, test_set: str = "test") -> TaskData:
        """The test set, one of the named test sets at another size (``test_<size>``, ``tasks/extrapolation.py``), or
        the validation split of held-out training-distribution puzzles (``valid``, ``tasks/validation.py``)."""
        if test_set == validation.VALID:
            return validation.load(self.config["task"], profiles.data_profile(self.config["data_profile"]),
                                   overrides=self.config["data_overrides"] or None)
        return tasks.load(self.config["task"], profiles.data_profile(self.config["data_profile"]), test_set,
                          overrides=self.config["data_overrides"] or None)

    def validation_unavailable(self) -> str:
        """Why this run's data set has no validation split ("" when it has one; ``tasks/validation.py``)."""
        cfg = tasks.profile_config(self.config["task"], profiles.data_profile(self.config["data_profile"]),
                                   self.config["data_overrides"] or None)
        return validation.unavailable(self.config["task"], cfg)

    def selection_data(self) -> tuple[TaskData | None, str]:
        """The validation puzzles training scores its checkpoints on (``training/selection.py``): the first
        ``eval.limit`` of the validation split; or None and why there are none."""
        why = self.validation_unavailable()
        if why:
            return None, why
        try:
            valid = self.test_data(validation.VALID)
        except DataError as e:
            return None, str(e)
        limit = self.config["eval"]["limit"]
        return (valid.subset(slice(0, limit)) if limit else valid), ""

    def summary(self) -> dict:
        return json.loads((self.dir / DONE).read_text())

    def metrics(self) -> list[dict]:
        """The training log (``metrics.jsonl``): one record per logged step, the connection statistics of
        ``training.connection_stats`` included."""
        return read_metrics(self.dir / METRICS)

    def weights_used(self, weights: str = "auto") -> dict:
        """Which weights :meth:`load_model` loads for ``weights`` (:data:`WEIGHT_CHOICES`): ``auto`` the final file
        (the EMA of the weights where training kept one, else the weights at the last step), ``ema`` that file only
        where it holds an EMA, ``last`` the weights at the last step from the last checkpoint, ``best`` the checkpoint
        chosen on the validation split (``training/selection.py``: its step and validation accuracy); with the step."""
        if weights not in WEIGHT_CHOICES:
            raise UsageError(f"weights must be one of {', '.join(WEIGHT_CHOICES)}, got {weights!r}")
        if weights == "best":
            return self._best_used()
        ema = float(self.config["train"].get("ema", 0.0)) > 0
        step = int(self.summary().get("step", self.config["train"]["steps"])) if self.done else None
        if weights == "ema" and not ema:
            raise UsageError(f"{self.dir}: trained without a weight EMA (train.ema=0): its weights are the last "
                             "step's (--weights last or auto)")
        if weights == "last" or (weights == "auto" and not ema):
            return {"kind": "last", "step": step, "file": WEIGHTS if weights == "auto" else CHECKPOINT}
        return {"kind": "ema", "step": step, "file": WEIGHTS}

    def _best_used(self) -> dict:
        rec = json.loads((self.dir / BEST_RECORD).read_text()) if (self.dir / BEST_RECORD).is_file() else None
        if rec is None:
            raise DataError(f"{self.dir}: no {BEST_RECORD}: trained before the checkpoint chosen on validation was "
                            "kept (--weights auto or last score its other weights; train it again for best)")
        if rec.get("step") is None:
            raise UsageError(f"{self.dir}: no checkpoint chosen on validation: {rec.get('why') or 'none kept'}")
        return {"kind": "best", "step": rec["step"], "file": BEST, "selected_on": "validation",
                "of": rec["kind"], "valid_exact": rec["valid_exact"], "depth": rec["depth"]}

    def load_model(self, device: str = "cpu", weights: str = "auto") -> LoopedReasoner:
        """The trained model in evaluation mode with the weights :meth:`weights_used` names: the final file
        (safetensors) or the last checkpoint's weights (``torch.load(weights_only=True)``); no pickle either way."""
        if self.weights_used(weights)["file"] == CHECKPOINT:
            return self._checkpoint_model(device)
        if not self.done:
            raise DataError(f"{self.dir}: the run is not complete (no {DONE}); train it first")
        loss = self.summary().get("final", {}).get("loss")
        if loss is not None and not math.isfinite(loss):  # finished before divergence was an error
            raise DataError(f"{self.dir}: training diverged (final loss {loss}); delete the folder and train again")
        path = self.dir / self.weights_used(weights)["file"]
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

    def _checkpoint_model(self, device: str) -> LoopedReasoner:
        if not self.done:
            raise DataError(f"{self.dir}: the run is not complete (no {DONE}); train it first")
        ck = read_checkpoint(self.dir)
        if ck is None:
            raise DataError(f"{self.dir}: no {CHECKPOINT} (an imported run travels without it): its last step's "
                            "weights are not here; --weights auto scores the final weights")
        model = LoopedReasoner(self.model_config())
        model.load_state_dict(ck["model"])
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

    def _evaluate_key(self, request: EvalRequest | None = None, data: TaskData | None = None,
                      data_file: str | None = None, **fields) -> tuple[dict, TaskData, Path]:
        r = EvalRequest.of(request, **fields)
        ev = self.config["eval"]
        limit = self._limit(r.limit, data)
        if data is None and r.test_set != "test":
            data = self.test_data(r.test_set)
        data = self._select(data, limit)
        r = replace(r, updates=ev["updates"] if r.updates is None else r.updates,
                    every=ev["every"] if r.every is None else r.every, limit=limit)
        args = r.cache_args()
        if r.puzzles:
            if not all(0 <= p < len(data) for p in r.puzzles):
                raise ValueError(f"puzzles {list(r.puzzles)} must index the {len(data)} evaluated test puzzles")
            data = data.subset(list(r.puzzles))
        return args, data, self._eval_path("traj", args, data, data_file)

    def evaluate(self, request: EvalRequest | None = None, data: TaskData | None = None, data_file: str | None = None,
                 **fields) -> tuple[dict, Path]:
        """The trajectory of ``request`` (``evaluation.EvalRequest``, or its ``fields`` as keywords) on the test set
        or on ``data`` (a user's file, read from ``data_file``); cached.

        ``updates``, ``every``, ``limit`` and ``batch_size`` default to the profile's (``limit``: all of a given
        ``data``). ``precision``, ``weights`` and ``puzzle_ids`` other than their defaults are cached apart; the
        trajectory's ``info`` records them. ``test_set``: one of the data set's named test sets at another size
        (``test_<size>``), run by the same weights on that grid (``LoopedReasoner.resized``; a model whose weights
        depend on the grid's size is refused); the profile's limit applies, cached apart."""
        r = EvalRequest.of(request, **fields)
        args, data, path = self._evaluate_key(r, data, data_file)
        cached = _cached(path)
        if cached is not None:
            return cached, path
        model = self.load_model(r.device, r.weights)
        if tuple(data.grid) != tuple(model.cfg.grid):
            model = model.resized(data.grid)
        r = replace(r, updates=args["updates"], every=args["every"],
                    batch_size=r.batch_size or self.config["eval"]["batch_size"])
        traj = evaluate(model, data, r, self.weights_used(r.weights))
        save_trajectory(path, traj)
        return traj, path

    def _perturb_key(self, at: int, eps: tuple[float, ...], updates_after: int | None = None, every: int | None = 1,
                     limit: int | None = None, data: TaskData | None = None, data_file: str | None = None,
                     seed: int = 0, precision: str = "auto") -> tuple[dict, TaskData, Path]:
        ev = self.config["eval"]
        after = ev["updates"] if updates_after is None else updates_after
        args = {"at": at, "eps": [float(e) for e in eps], "after": after,
                "every": ev["every"] if every is None else every, "limit": self._limit(limit, data), "seed": seed,
                **precision_arg(precision)}
        data = self._select(data, args["limit"])
        return args, data, self._eval_path("perturb", args, data, data_file)

    def perturb(self, at: int, eps: tuple[float, ...], updates_after: int | None = None, every: int | None = 1,
                limit: int | None = None, data: TaskData | None = None, data_file: str | None = None,
                device: str = "cpu", seed: int = 0, progress: bool = True, precision: str = "auto"
                ) -> tuple[dict, Path]:
        """Perturbation at update ``at`` (``evaluation.perturb``); cached. ``None`` takes the profile's
        ``updates`` (after the perturbation), ``every`` and ``limit`` (``limit``: all of a given ``data``)."""
        args, data, path = self._perturb_key(at, eps, updates_after, every, limit, data, data_file, seed, precision)
        cached = _cached(path)
        if cached is not None:
            return cached, path
        out = perturb(self.load_model(device), data, at, eps, args["after"], args["every"],
                      self.config["eval"]["batch_size"], device, seed, progress, precision, self.weights_used())
        save_trajectory(path, out)
        return out, path

    def _budgets_key(self, budgets: tuple[int, ...], limit: int | None = None, data: TaskData | None = None,
                     data_file: str | None = None, precision: str = "auto") -> tuple[dict, TaskData, Path]:
        limit = self._limit(limit, data)
        args = {"budgets": sorted(int(b) for b in budgets), "limit": limit, **precision_arg(precision)}
        data_ = self._select(data, limit)
        return args, data_, self._eval_path("budgets", args, data_, data_file)

    def budgets(self, budgets: tuple[int, ...], limit: int | None = None, data: TaskData | None = None,
                data_file: str | None = None, batch_size: int | None = None, device: str = "cpu",
                progress: bool = True, precision: str = "auto") -> tuple[dict, Path]:
        """Exact accuracy after exactly N outer updates for each budget N (``evaluate_budgets``); cached.

        A model that is not told its budget (no timestep conditioning) is read from a cached trajectory
        of the same test puzzles that reaches every budget, when there is one (e.g. notebook 02's)."""
        own_test = data is None
        args, data, path = self._budgets_key(budgets, limit, data, data_file, precision)
        cached = _cached(path)
        if cached is not None:
            return cached, path
        out = None
        if own_test and precision == "auto" and not self.model_config().cond.uses_horizon:
            out = self._budgets_from_trajectory(args["budgets"], data)
        if out is None:
            out = evaluate_budgets(self.load_model(device), data, tuple(budgets),
                                   batch_size or self.config["eval"]["batch_size"], device, progress,
                                   precision=precision, weights=self.weights_used())
        save_trajectory(path, out)
        return out, path

    def eval_key(self, kind: str, args: dict) -> tuple[dict, TaskData, Path]:
        """What ``getattr(self, kind)(**args)`` computes, without computing it (kind: evaluate, perturb or
        budgets): its arguments with the profile's defaults filled in, the puzzles it runs on and its cache
        file. How the experiment plan (experiments/notebooks/manifest.py) deduplicates, plans and orders evaluations."""
        keys = {"evaluate": self._evaluate_key, "perturb": self._perturb_key, "budgets": self._budgets_key}
        if kind not in keys:
            raise ValueError(f"evaluation kind {kind!r}: expected one of {', '.join(keys)}")
        return keys[kind](**args)

    def eval_cache_path(self, kind: str, args: dict) -> Path:
        """The cache file of ``getattr(self, kind)(**args)`` (:meth:`eval_key`)."""
        return self.eval_key(kind, args)[2]

    def eval_updates(self, kind: str, resolved: dict) -> int:
        """Outer updates one puzzle goes through in an evaluation with the arguments ``resolved`` (as
        :meth:`eval_key` returns them): its cost in model updates. A perturbation runs the reference and each
        eps after update ``at``; a model told its budget (timestep conditioning) runs once per budget, any
        other model once to the largest."""
        if kind == "evaluate":
            return resolved["updates"]
        if kind == "perturb":
            return resolved["at"] + resolved["after"] * (len(resolved["eps"]) + 1)
        if kind == "budgets":
            grid = resolved["budgets"]
            return sum(grid) if self.model_config().cond.uses_horizon else max(grid)
        raise ValueError(f"evaluation kind {kind!r}: expected one of evaluate, perturb, budgets")

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
        """The profile's limit for its own test sets; a user's file is never cut unless asked."""
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


def resolve(task: str, recipe: str, profile: str = profiles.DEFAULT, overrides: dict | list | None = None,
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


def get_run(task: str, recipe: str, profile: str = profiles.DEFAULT, overrides: dict | list | None = None,
            root: Path | None = None, run_dir: str | Path | None = None, device: str = "cpu",
            max_steps: int | None = None, progress: bool = True) -> Run:
    """The trained run: from the cache, resumed from its last checkpoint, or trained now."""
    if max_steps is not None and max_steps < 1:
        raise UsageError(f"max_steps: expected a number of steps >= 1, got {max_steps}")
    run = resolve(task, recipe, profile, overrides, root, run_dir)
    if run.done:
        return run
    rank, world = rank_and_world()
    first = rank == 0  # under torchrun: holds the lock and prepares the folder; the others wait for its answer
    with locked(run.dir / ".lock") if first else nullcontext():
        if first:
            _check_same_config(run)  # another process may have started this folder with another configuration
            done = run.done  # another process finished it while we waited
            if not done:
                remove_stale_temps(run.dir)
                if not (run.dir / "config.json").is_file():
                    atomic_write_text(run.dir / "config.json", json.dumps(run.config, indent=1, sort_keys=True))
        if world > 1:
            told = [done if first else None]
            torch.distributed.broadcast_object_list(told, src=0)
            done = told[0]
        if done:
            return run
        old_threads = torch.get_num_threads()
        valid, why = run.selection_data()
        train(run.model_config(), run.train_config(), run.train_data(), run.dir, device, max_steps, progress,
              valid=valid, valid_why=why)
        if world > 1:
            torch.distributed.barrier()  # the first process writes the weights and DONE.json before any reads them
        run.trained_here = True
        torch.set_num_threads(old_threads)
    return run


def trained_run(task: str, recipe: str, profile: str = profiles.DEFAULT, overrides: dict | list | None = None,
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
    if run.config.get("code_version", 1) != recipes.CODE_VERSION:
        raise DataError(f"{d}: trained by code version {run.config.get('code_version', 1)}, this code is version "
                        f"{recipes.CODE_VERSION} (the model or its training changed): train it again")
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
    """A user's test file for a model of ``cfg``, refused with both sizes when it does not fit the model (the task's
    reader: ``registry.Task.user_file``)."""
    read = tasks.registry.task(task).user_file
    if read is None:
        readable = [name for name, t in tasks.registry.REGISTRY.items() if t.user_file is not None]
        raise UsageError(f"--data: a test file in the public CSV format is for {' and '.join(readable)} runs; "
                         f"this run's task is {task}")
    return read(path, cfg.grid, cfg.box)
