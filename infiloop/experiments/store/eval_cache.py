"""A run's evaluations computed once and cached in its ``eval/`` folder: a trajectory (``evaluate``), a perturbation
(``perturb``) and the accuracy at fixed budgets (``budgets``), each keyed by its arguments and the data it ran on
(:meth:`EvalCache.eval_key`, how the experiment plan deduplicates them)."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from ... import numeric
from ...errors import UsageError
from ...evaluation import (
    TRAJECTORY_VERSION,
    EvalRequest,
    evaluate,
    evaluate_budgets,
    load_trajectory,
    perturb,
    precision_arg,
    save_trajectory,
)
from ...tasks.base import TaskData


class EvalCache:
    """The cached evaluations of a run (``runs.Run`` holds them): they read the run's folder ``dir``, its ``config``,
    its ``test_data``, ``model_config``, ``load_model`` and ``weights_used``."""

    def _eval_path(self, kind: str, args: dict, data: TaskData | None, data_file: str | None) -> Path:
        mode = numeric.current().name  # an evaluation in another numeric mode is another file; native: as cached
        ident = {"kind": kind, **args, "data": data_file or "profile-test", "n": len(data) if data else None,
                 "version": TRAJECTORY_VERSION, **({"numeric": mode} if mode != "native" else {})}
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


def first_line(e: BaseException) -> str:
    """The first line of an error's message (its type where it has none), for one-line warnings."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _cached(path: Path) -> dict | None:
    """A cached evaluation, or ``None`` when there is none or it is damaged (then it is computed again)."""
    if not path.is_file():
        return None
    try:
        return load_trajectory(path)
    except Exception as e:  # noqa: BLE001 - a cache that cannot be read is never trusted
        print(f"warning: {path}: damaged evaluation cache ({first_line(e)}); computing it again",
              file=sys.stderr, flush=True)
        return None

