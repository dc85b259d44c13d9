"""Test sets at several sizes: the size-extrapolation setting of the recurrent-reasoning literature (Schwarzschild et
al. 2021, "Can You Learn an Algorithm?"; Bansal et al. 2022, arXiv 2202.05826), where a network trained on small
instances runs on larger ones for many more iterations than it was trained with, and where iterating is known to
destroy answers ("overthinking") unless the input is recalled and training is progressive.

A data set of this setting holds its training set at one size and, beside the usual ``test.npz`` (held-out
instances at the training size), one *named test set* per size, ``test_<size>.npz`` (:func:`size_set_name`):

- ``prefix_sums`` (:mod:`.prefix_sums`): bit strings of ``train_length`` for training, a test set at each of
  ``test_lengths`` (a 1 x n grid each); the test strings at the training length are never training strings.
- ``maze`` with the optional setting ``test_sizes``: mazes of ``size`` for training (the usual maze set), a test
  set of mazes of each size k of ``test_sizes``, whose shortest paths are at least ``min_path`` scaled by k / size
  (:func:`maze_min_path`); at the training size the named set is the usual test set (kept apart from the training
  mazes up to the square's symmetries, ``audit.without_leaks``); mazes of another size cannot equal a training one.

The data setting that lists the sizes of a task's named test sets is its ``Task.size_setting`` (``registry.py``:
:data:`PREFIX_SUMS_SIZES`, :data:`MAZE_SIZES`). The sizes do not change the training set, so they are no part of a
run's hash (``recipes.config_hash``): adding a test size trains nothing again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import audit, maze, prefix_sums
from .base import DataError, TaskData
from .sources import VALID

PREFIX_SUMS_SIZES, MAZE_SIZES = "test_lengths", "test_sizes"  # the two tasks' size settings (``Task.size_setting``)


def size_set_name(size: int) -> str:
    """The name of the test set at ``size`` (a string length or a maze side): ``test_<size>``."""
    return f"test_{int(size)}"


def size_set_grid(task: str, test_set: str) -> tuple[int, int] | None:
    """The grid of the named test set ``test_<size>`` of ``task`` (``1 x size`` for bit strings, ``size x size`` for
    mazes), from its name alone; None for any other set (the training grid's)."""
    if not test_set.startswith("test_") or not test_set[5:].isdigit():
        return None
    size = int(test_set[5:])
    return (1, size) if task == "prefix_sums" else (size, size)


def named_sizes(task: str, cfg: dict, key: str | None) -> list[int]:
    """The sizes of the named test sets of ``task``'s data set with settings ``cfg``, listed by its size setting
    ``key`` (the task's ``size_setting``; None: a task without named test sets); empty: none."""
    sizes = cfg.get(key) if key else None
    if not sizes:
        return []
    if not all(isinstance(s, int) and s >= 1 for s in sizes) or len(set(sizes)) != len(sizes):
        raise DataError(f"{task}: {key} must be distinct whole numbers >= 1, not {sizes!r}")
    return sorted(sizes)


def prefix_sums_header(cfg: dict) -> dict:
    """What a model of the prefix-sums set ``cfg`` needs: a 1 x ``train_length`` grid, vocabulary 3."""
    return {"grid": [1, cfg["train_length"]], "box": None, "vocab_size": prefix_sums.VOCAB, "n_puzzles": 1}


def build_prefix_sums(task: str, cfg: dict, out: Path, root: Path, verbose: bool):
    """The builder of ``prefix_sums`` (its ``Task.build``, registry.py): ``train.npz``, ``test.npz`` (held-out
    strings at the training length) and ``test_<n>.npz`` for each of ``test_lengths``."""
    n, lengths = cfg["train_length"], named_sizes(task, cfg, PREFIX_SUMS_SIZES)
    try:
        train, tests = prefix_sums.split(cfg["n_train"], cfg["n_test"], n, tuple(sorted({n, *lengths})), cfg["seed"])
    except ValueError as e:  # more strings asked for than there are
        raise DataError(f"prefix_sums: {e}") from None
    source = (f"generated offline (bit strings of {n} for training; test lengths "
              f"{', '.join(map(str, lengths)) or n})")
    for d in (train, *tests.values()):
        d.info["source"] = source
    files = {"train": train.save(out / "train.npz"), "test": tests[n].save(out / "test.npz")}
    for length in lengths:
        files[size_set_name(length)] = tests[length].save(out / f"{size_set_name(length)}.npz")
    leaks = audit.audit_prefix_sums(train, tests[n])
    if not leaks.ok:  # prefix_sums.split draws them apart: a leak here is a bug
        raise DataError(f"prefix_sums: {len(leaks.leaks)} test strings are training strings")
    seeds = {"seed": cfg["seed"], "split": "training strings and the held-out ones at the training length: one draw "
             "without replacement (prefix_sums.split); the longer test strings from a stream of their own",
             "rng": f"numpy.random.default_rng(bytes of 'prefix/<length>/{cfg['seed']}[/test]')"}
    summary = {"train_rows": len(train), "test_rows": len(tests[n]), "test_leaks_replaced": 0,
               "test_sets": {size_set_name(k): len(tests[k]) for k in lengths}}
    return files, source, summary, {"seeds": seeds}



def prefix_sums_validation(cfg: dict, out: Path, train: TaskData, test: TaskData, n: int, verbose: bool):
    """The validation split of ``prefix_sums`` (validation.py): strings of the training length from their own stream,
    one draw (distinct strings where they are few), those equal to a training or test string left out."""
    length = cfg["train_length"]
    k = min(2 ** length, n + len(train) + len(test)) if length < prefix_sums.EXHAUSTIVE_BELOW else 2 * n
    cand = prefix_sums.to_taskdata(f"prefix-{length}-valid", prefix_sums.generate(k, length, f"{cfg['seed']}/{VALID}"))
    seen = {r.astype(np.int8).tobytes() for d in (train, test) for r in d.inputs}
    keep = [i for i, r in enumerate(cand.inputs) if r.astype(np.int8).tobytes() not in seen][:n]
    stream = f"numpy.random.default_rng(bytes of 'prefix/{length}/{cfg['seed']}/valid')"
    return cand.subset(keep), (keep[-1] + 1 - len(keep)) if keep else k, stream

def maze_min_path(cfg: dict, size: int) -> int:
    """The least shortest path of the test mazes of side ``size``: the training ``min_path`` scaled by
    ``size / cfg["size"]`` (rounded), so that larger mazes are not easier ones."""
    return int(round(cfg["min_path"] * size / cfg["size"]))


def maze_test_sets(cfg: dict, test: maze.MazeSet, out: Path, source: str, verbose: bool, summary: dict) -> dict:
    """The named test sets of a maze set with ``test_sizes``: at the training size the usual (leak-free) test set
    ``test``, at every other size ``n_test`` generated mazes from a stream of their own. Returns their files; records
    each set's rows and least path in ``summary["test_sets"]``."""
    files, record = {}, summary.setdefault("test_sets", {})
    for k in named_sizes("maze", cfg, MAZE_SIZES):
        if k == cfg["size"]:
            mazes = test
        else:
            mazes = maze.generate(cfg["n_test"], k, maze_min_path(cfg, k), seed=f"{cfg['seed']}/test",
                                  loops=cfg["loops"], progress=verbose)
        d = maze.to_taskdata(f"maze-{k}-test", mazes, info={"source": source})
        files[size_set_name(k)] = d.save(out / f"{size_set_name(k)}.npz")
        record[size_set_name(k)] = {"rows": len(d), "min_path": maze_min_path(cfg, k),
                                    "path_length": [int(d.meta["path_length"].min()),
                                                    int(d.meta["path_length"].max())]}
    return files


def leaking_test_sets(train: TaskData, named: dict[str, TaskData], task_audit) -> dict[str, list[int]]:
    """The rows of each named test set equal to a training item (``task_audit(train, test)``, the task's audit: up
    to its symmetries); a set of another size than the training set's has none by construction (its grids differ)."""
    out = {}
    for name, test in named.items():
        out[name] = task_audit(train, test).test_rows if test.grid == train.grid else []
    return out

