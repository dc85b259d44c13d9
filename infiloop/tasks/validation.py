"""The validation split: held-out puzzles of the *training* distribution, never the test set, on which a test-time
choice (the best depth of a connection, the best checkpoint of a training run) is made before the test set is read.

A choice made on the test set and then scored on the same test set is biased upwards (the maximum of noisy
accuracies); the paper reports its depth-scaling curves on the test puzzles, so the depth-fair tables of notebook 01
choose each connection's depth here instead (``analysis/depth_fair.py``). The split lives beside the data set's
``train.npz`` and ``test.npz`` as ``valid.npz`` with its record ``valid.json``; it is built on first use from the
built set and is no part of ``build.json``, of a data folder's name or of any run's hash, so no data set is built
again and no run is trained again because it exists.

Where its puzzles come from (each task's record says how, ``Task.validation_split``; :func:`unavailable` says why
a task has none, ``Task.no_validation``):

- **Sudoku, generated**: puzzles drawn like the training puzzles (the training split's blank range and selection)
  from a random stream of their own, ``<seed>/valid`` (the training puzzles come from ``<seed>/train``, the test
  puzzles from ``<seed>/test``).
- **Sudoku, published** (hub or ``path``): training-file rows the training subsample did not take, in the order of a
  permutation drawn from ``numpy.random.default_rng([seed, 2718])``.
- **Maze, generated**: mazes of the training settings from the stream ``<seed>/valid``; a published maze set uses
  every training row, so it has no validation split.
- **prefix sums**: strings of the training length from the stream ``<seed>/valid``.
- **ARC** has none: every training task and the evaluation tasks' demonstration pairs are trained on (TRM's
  protocol), so no puzzle of the training distribution is held out.

It holds as many puzzles as the test set (``n_test``; ``fallback_n_test`` where the test set is the whole published
one). Every validation puzzle is kept apart from the training set and from the test set up to the symmetries the
project trains under, by the leakage audits of ``audit.py`` (a leaking candidate is replaced by the next of the same
stream); :func:`audit_validation` audits the split once more before it is written, and a split that overlaps either
set is refused (:class:`DataError`), never written.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import paths
from ..io import atomic_write_text, locked
from . import audit
from .base import DataError, TaskData
from .datasets import DataProfile, build, build_dir, profile_config
from .hub import sha256_of
from .registry import REGISTRY
from .sources import VALID  # the split's name: Run.test_data("valid"), evaluate(test_set="valid")

__all__ = ["VALID", "audit_validation", "build_validation", "load", "size", "unavailable"]
FILE, RECORD = "valid.npz", "valid.json"


def unavailable(task: str, cfg: dict) -> str:
    """Why ``task``'s data set with settings ``cfg`` has no validation split ("" when it has one): its record's
    ``no_validation(cfg)``, or that it defines none (``validation_split`` None)."""
    record = REGISTRY.get(task)
    why = record.no_validation(cfg) if record and record.no_validation else ""
    if not why and (record is None or record.validation_split is None):
        why = "no validation split is defined for this task"
    return f"{task}: {why}" if why else ""


def size(cfg: dict) -> int:
    """Puzzles in the validation split: as many as the test set (``n_test``, else ``fallback_n_test``)."""
    n = cfg.get("n_test") or cfg.get("fallback_n_test")
    if not n:
        raise DataError("validation split: the data settings give no n_test (nor fallback_n_test) to size it by")
    return int(n)


def audit_validation(task: str, train: TaskData, test: TaskData, valid: TaskData) -> dict[str, audit.AuditResult]:
    """The leakage audits of the validation split against the training set and against the test set
    (``{"train": ..., "test": ...}``, the task's ``Task.audit``: up to its symmetries)."""
    check = REGISTRY[task].audit
    return {"train": check(train, valid), "test": check(test, valid)}


def build_validation(task: str, data: DataProfile, root: Path | None = None, overrides: dict | None = None,
                     verbose: bool = False) -> Path:
    """The validation split of ``task``'s data set in ``data`` (built, then reused while the data set is the same
    build): its ``valid.npz``. A task without one (:func:`unavailable`) is a :class:`DataError` that says why."""
    root = paths.DATA if root is None else Path(root)
    cfg = profile_config(task, data, overrides)
    why = unavailable(task, cfg)
    if why:
        raise DataError(f"no validation split: {why}")
    files = build(task, data, root, overrides, verbose=verbose)
    out = build_dir(task, data, overrides, root)
    with locked(out.parent / f".{out.name}.valid.lock"):
        stamp = sha256_of(files["manifest"])
        record = out / RECORD
        if record.is_file() and (out / FILE).is_file() and json.loads(record.read_text()).get("build") == stamp:
            return out / FILE
        train, test, n = TaskData.load(files["train"]), TaskData.load(files["test"]), size(cfg)
        valid, replaced, stream = REGISTRY[task].validation_split(cfg, out, train, test, n, verbose)
        checked = audit_validation(task, train, test, valid)
        _refuse_leaks(task, out, checked)
        valid.save(out / FILE)
        atomic_write_text(record, json.dumps({
            "task": task, "profile": data.name, "rows": len(valid), "asked": n, "stream": stream,
            "candidates_replaced": replaced, "build": stamp,
            "audit": {k: r.counts() for k, r in checked.items()}}, indent=1))
    return out / FILE


def _refuse_leaks(task: str, out: Path, checked: dict[str, audit.AuditResult]) -> None:
    for against, res in checked.items():
        if not res.ok:
            raise DataError(f"{out / FILE}: {len(res.leaks)} validation {task} puzzles equal {against} puzzles up to "
                            f"{res.group} (rows {res.test_rows[:5]}); the validation split must be disjoint from "
                            f"the training and the test set")


def load(task: str, data: DataProfile, root: Path | None = None, overrides: dict | None = None,
         verbose: bool = False) -> TaskData:
    """The validation split as :class:`TaskData` (built on first use, :func:`build_validation`)."""
    return TaskData.load(build_validation(task, data, root, overrides, verbose))
