"""The validation split: held-out puzzles of the *training* distribution, never the test set, on which a test-time
choice (the best depth of a connection, the best checkpoint of a training run) is made before the test set is read.

A choice made on the test set and then scored on the same test set is biased upwards (the maximum of noisy
accuracies); the paper reports its depth-scaling curves on the test puzzles, so the depth-fair tables of notebook 01
choose each connection's depth here instead (``analysis/depth_fair.py``). The split lives beside the data set's
``train.npz`` and ``test.npz`` as ``valid.npz`` with its record ``valid.json``; it is built on first use from the
built set and is no part of ``build.json``, of a data folder's name or of any run's hash, so no data set is built
again and no run is trained again because it exists.

Where its puzzles come from (:func:`unavailable` says why a task has none):

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

import numpy as np

from .. import paths
from ..io import atomic_write_text, locked
from . import audit, maze, prefix_sums, sudoku
from .base import DataError, TaskData
from .datasets import DataProfile, build, build_dir, data_origin, profile_config, split_setting
from .hub import sha256_of

VALID = "valid"  # the split's name: Run.test_data("valid"), evaluate(test_set="valid")
FILE, RECORD = "valid.npz", "valid.json"


def unavailable(task: str, cfg: dict) -> str:
    """Why ``task``'s data set with settings ``cfg`` has no validation split ("" when it has one)."""
    if task in ("arc1", "arc2"):
        return (f"{task}: every training task and every evaluation task's demonstration pairs are trained on (TRM's "
                f"protocol), so no puzzle of the training distribution is held out")
    if task == "maze" and data_origin(task, cfg) != "generate":
        return "maze: the published training set is trained on whole, so no maze of it is held out"
    if task not in ("sudoku", "maze", "prefix_sums"):
        return f"{task}: no validation split is defined for this task"
    return ""


def size(cfg: dict) -> int:
    """Puzzles in the validation split: as many as the test set (``n_test``, else ``fallback_n_test``)."""
    n = cfg.get("n_test") or cfg.get("fallback_n_test")
    if not n:
        raise DataError("validation split: the data settings give no n_test (nor fallback_n_test) to size it by")
    return int(n)


def audit_validation(task: str, train: TaskData, test: TaskData, valid: TaskData) -> dict[str, audit.AuditResult]:
    """The leakage audits of the validation split against the training set and against the test set
    (``{"train": ..., "test": ...}``, ``audit.audit``: up to the task's symmetries)."""
    return {"train": audit.audit(task, train, valid), "test": audit.audit(task, test, valid)}


def _leaking(task: str, train: TaskData, test: TaskData, to_data):
    """``leaking(candidates)``: the candidate rows equal to a training or a test item up to the task's symmetries."""
    def leaking(candidates) -> list[int]:
        found = audit_validation(task, train, test, to_data(candidates))
        return sorted(set(found["train"].test_rows) | set(found["test"].test_rows))
    return leaking


def _first_clean(make, n: int, leaking):
    """The first ``n`` candidates of ``make(k)`` that do not leak (candidate i depends only on its stream and i, so a
    larger k keeps the first ones), with how many were passed over; fewer than ``n`` where ``make`` runs out of
    candidates (a published file's rows)."""
    k = n
    while True:
        cand = make(k)
        bad = set(leaking(cand))
        if len(cand) - len(bad) >= n or len(cand) < k:
            break
        k *= 2
    keep = [i for i in range(len(cand)) if i not in bad][:n]
    return cand.take(keep), (keep[-1] + 1 - len(keep)) if keep else len(cand)


def _sudoku(cfg: dict, out: Path, train: TaskData, test: TaskData, n: int, verbose: bool):
    leaking = _leaking("sudoku", train, test, lambda s: sudoku.to_taskdata("c", s))
    if data_origin("sudoku", cfg) == "generate":
        g = sudoku.geometry(cfg["side"], tuple(cfg["box"]))
        blanks = tuple(split_setting(cfg, "blanks", "train"))
        sel = sudoku.Selection(split_setting(cfg, "needs_search", "train"),
                               split_setting(cfg, "min_rating", "train", 0) or 0)
        make = (lambda k: sudoku.generate(k, g, blanks, f"{cfg['seed']}/{VALID}", progress=verbose, select=sel))
        stream = f"random.Random('sudoku/{g.n}/{g.br}x{g.bc}/{blanks[0]}-{blanks[1]}/{cfg['seed']}/valid/<i>')"
    else:
        rows = sudoku.read_csv(json.loads((out / "build.json").read_text())["inputs"]["train"]["path"],
                               tuple(cfg["box"]))
        order = np.random.default_rng([cfg["seed"], 2718]).permutation(len(rows))
        make = (lambda k: rows.take(order[:min(k, len(rows))]))
        stream = f"training-file rows in the order of numpy.random.default_rng([{cfg['seed']}, 2718]).permutation"
    found, replaced = _first_clean(make, n, leaking)
    return sudoku.to_taskdata("sudoku-valid", found, info={"source": f"validation split: {stream}"}), replaced, stream


def _maze(cfg: dict, train: TaskData, test: TaskData, n: int, verbose: bool):
    dead = split_setting(cfg, "min_dead_ends", "train", 0) or 0
    make = (lambda k: maze.generate(k, cfg["size"], cfg["min_path"], seed=f"{cfg['seed']}/{VALID}",
                                    loops=cfg["loops"], progress=verbose, min_dead_ends=dead))
    found, replaced = _first_clean(make, n, _leaking("maze", train, test, lambda s: maze.to_taskdata("c", s)))
    stream = f"random.Random('maze/{cfg['size']}/{cfg['min_path']}/{cfg['loops']}/{cfg['seed']}/valid/<i>')"
    return maze.to_taskdata("maze-valid", found, info={"source": f"validation split: {stream}"}), replaced, stream


def _prefix_sums(cfg: dict, train: TaskData, test: TaskData, n: int):
    """Strings of the training length from their own stream, one draw (distinct strings where they are few), those
    equal to a training or test string left out."""
    length = cfg["train_length"]
    k = min(2 ** length, n + len(train) + len(test)) if length < prefix_sums.EXHAUSTIVE_BELOW else 2 * n
    cand = prefix_sums.to_taskdata(f"prefix-{length}-valid", prefix_sums.generate(k, length, f"{cfg['seed']}/{VALID}"))
    seen = {r.astype(np.int8).tobytes() for d in (train, test) for r in d.inputs}
    keep = [i for i, r in enumerate(cand.inputs) if r.astype(np.int8).tobytes() not in seen][:n]
    stream = f"numpy.random.default_rng(bytes of 'prefix/{length}/{cfg['seed']}/valid')"
    return cand.subset(keep), (keep[-1] + 1 - len(keep)) if keep else k, stream


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
        if task == "sudoku":
            valid, replaced, stream = _sudoku(cfg, out, train, test, n, verbose)
        elif task == "maze":
            valid, replaced, stream = _maze(cfg, train, test, n, verbose)
        else:
            valid, replaced, stream = _prefix_sums(cfg, train, test, n)
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
