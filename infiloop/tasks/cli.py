"""``python -m infiloop data ...``: generate, validate and build the datasets (the paper's §4).

    data generate sudoku --n N --blanks A-B --seed S --out FILE.csv [--side 9] [--box 3x3]
    data generate maze --n N --size K --min-path P --seed S --out FILE.csv
    data validate sudoku|maze FILE.csv
    data build --task sudoku|maze|arc1|arc2 --profile smoke|tiny|paper [--set key=value ...] [--force]
               (--set path=DIR: your own files; --set source=generate: generated instead of the hub's set)
    data describe --task sudoku|maze --profile P [P ...] [--set key=value ...] [--json]
    data audit PROFILE [PROFILE ...] [--task T ...] [--set key=value ...] | --folder DIR [--task T]
               (test puzzles in the training set, up to the augmentation group: infiloop/tasks/audit.py)

The data profiles are handed in by the caller (``infiloop/cli/`` passes those of the run profiles), so that the
tasks wing never reads the experiments' definitions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .. import paths
from ..config import coerce, parse_setting, type_of_default
from ..errors import Parser, UsageError, run_command
from . import maze, sudoku
from .datasets import TASKS, DataProfile, audit_folder, build, profile_config
from .describe import describe, describe_markdown


def _range(s: str) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in s.split("-")) if "-" in s else (int(s), int(s))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a range A-B of integers, got {s!r}") from None
    if a > b:
        raise argparse.ArgumentTypeError(f"range {s!r} is empty")
    return a, b


def _box(s: str) -> tuple[int, int]:
    try:
        r, c = (int(x) for x in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a box shape like 3x3 or 2x3, got {s!r}") from None
    return r, c


def _count(s: str) -> int:
    try:
        n = int(s)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {s!r}")
    return n


def _overrides(task: str, data: DataProfile, items: list[str]) -> dict | None:
    """``--set KEY=VALUE`` items read as the types of the profile's settings (``config.coerce``); a key may be
    written as ``train``'s ``--set`` writes it (``data.path=DIR`` for ``path=DIR``)."""
    defaults = profile_config(task, data)
    out = {}
    for item in items:
        written, v = parse_setting(item)
        k = written.removeprefix("data.") or written
        out[k] = coerce(written, v, str if k == "path" else type_of_default(defaults.get(k)))
    return out or None


def parser(data_profiles: dict[str, DataProfile]) -> argparse.ArgumentParser:
    p = Parser(prog="python -m infiloop data",
               description="Generate, validate and build the datasets (the paper's §4).")
    sub = p.add_subparsers(dest="cmd", required=True)

    gen = sub.add_parser("generate", help="generate puzzles offline into a public-format CSV")
    gsub = gen.add_subparsers(dest="task", required=True)
    gs = gsub.add_parser("sudoku", help="puzzles with a unique solution")
    gs.add_argument("--n", type=_count, required=True, help="number of puzzles")
    gs.add_argument("--blanks", type=_range, required=True, help="blank cells, inclusive range A-B")
    gs.add_argument("--side", type=int, default=9, help="grid side (4, 6, 8 or 9; default 9)")
    gs.add_argument("--box", type=_box, default=None, help="box shape RxC (default: 2x2, 2x3, 2x4, 3x3)")
    gs.add_argument("--workers", type=int, default=None, help="processes (default: all CPUs for large sets)")
    gm = gsub.add_parser("maze", help="mazes with a unique shortest path")
    gm.add_argument("--n", type=_count, required=True, help="number of mazes")
    gm.add_argument("--size", type=int, default=30, help="side K of the K x K maze (default 30)")
    gm.add_argument("--min-path", type=int, default=111, help="minimum shortest-path length in moves")
    gm.add_argument("--loops", type=float, default=0.05, help="fraction of inner walls opened (default 0.05)")
    for g in (gs, gm):
        g.add_argument("--seed", type=int, default=0)
        g.add_argument("--out", type=Path, required=True, help="output CSV")
        g.add_argument("--quiet", action="store_true", help="no progress bar")

    val = sub.add_parser("validate", help="check a public-format CSV and summarise it")
    val.add_argument("task", choices=["sudoku", "maze"])
    val.add_argument("file", type=Path)
    val.add_argument("--box", type=_box, default=None, help="Sudoku box shape RxC if not the usual one")

    b = sub.add_parser("build", help="build a profile's training and test sets under data/")
    b.add_argument("--task", choices=TASKS, required=True)
    b.add_argument("--profile", choices=sorted(data_profiles), default="tiny")
    b.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile setting, e.g. --set n_train=500 or --set blanks=[20,30] (data.n_train=500 "
                        "alike); your own files: --set path=DIR (Sudoku, Maze: DIR/train.csv and DIR/test.csv in "
                        "the public CSV format; ARC: task folders or Kaggle files); generated puzzles instead of "
                        "the hub's: --set source=generate (data/README.md)")
    b.add_argument("--root", type=Path, default=None, help=f"data folder (default {paths.DATA})")
    b.add_argument("--force", action="store_true", help="rebuild even if a matching build exists")

    d = sub.add_parser("describe", help="difficulty distribution of profiles' data (built first if needed)")
    d.add_argument("--task", choices=["sudoku", "maze"], required=True)
    d.add_argument("--profile", nargs="+", choices=sorted(data_profiles), default=["tiny"])
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile setting, e.g. --set needs_search=true")
    d.add_argument("--root", type=Path, default=None, help=f"data folder (default {paths.DATA})")
    d.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")

    a = sub.add_parser("audit", help="look for test puzzles in the training set, up to the augmentation group "
                                     "(built first if needed; exit status 1 on a leak)")
    a.add_argument("profile", nargs="*", metavar="PROFILE", help=f"data profiles: {', '.join(data_profiles)}")
    a.add_argument("--task", action="append", choices=TASKS, default=None,
                   help="audit this task only (repeatable; default: every task of the profile)")
    a.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile setting, as in `data build`")
    a.add_argument("--root", type=Path, default=None, help=f"data folder (default {paths.DATA})")
    a.add_argument("--folder", type=Path, action="append", default=[], metavar="DIR",
                   help="a data folder in the layout `data build` writes (train.npz, test.npz; its task from "
                        "build.json or --task), e.g. data your own code built")
    return p


def _summary(task: str, path: Path, box) -> str:
    if task == "sudoku":
        s = sudoku.read_csv(path, box)
        b, r = s.blanks, s.rating
        return (f"{path}: ok, {len(s)} rows, {s.g.n}x{s.g.n} (boxes {s.g.br}x{s.g.bc}), "
                f"blanks {b.min()}-{b.max()} (mean {b.mean():.1f}), rating {r.min()}-{r.max()}")
    m = maze.read_csv(path)
    pl = m.path_length
    return f"{path}: ok, {len(m)} rows, {m.size}x{m.size}, path length {pl.min()}-{pl.max()} (mean {pl.mean():.1f})"


def main(argv: list[str] | None, data_profiles: dict[str, DataProfile]) -> int:
    """Run a data command on these data profiles (by name); an error is one line ``error: ...`` on stderr and exit
    status 2 or 1."""
    return run_command(lambda a: _main(a, data_profiles), sys.argv[1:] if argv is None else list(argv))


def _main(argv: list[str], data_profiles: dict[str, DataProfile]) -> int:
    args = parser(data_profiles).parse_args(argv)
    if args.cmd == "generate" and args.task == "sudoku":
        g = sudoku.geometry(args.side, args.box)
        s = sudoku.generate(args.n, g, args.blanks, args.seed, args.workers, progress=not args.quiet)
        sudoku.write_csv(args.out, s)
        print(f"wrote {args.n} {g.n}x{g.n} puzzles to {args.out} (blanks {s.blanks.min()}-{s.blanks.max()})")
    elif args.cmd == "generate":
        m = maze.generate(args.n, args.size, args.min_path, args.seed, args.loops, progress=not args.quiet)
        maze.write_csv(args.out, m)
        print(f"wrote {args.n} {args.size}x{args.size} mazes to {args.out} "
              f"(path length {m.path_length.min()}-{m.path_length.max()})")
    elif args.cmd == "validate":
        print(_summary(args.task, args.file, args.box))
    elif args.cmd == "audit":
        return _audit(args, data_profiles)
    elif args.cmd == "describe":
        rows = [describe(args.task, data_profiles[p], args.root,
                         _overrides(args.task, data_profiles[p], args.overrides), verbose=True) for p in args.profile]
        print(json.dumps(rows, indent=1) if args.json else describe_markdown(rows))
    else:
        data = data_profiles[args.profile]
        files = build(args.task, data, args.root, _overrides(args.task, data, args.overrides), force=args.force)
        man = json.loads(files["manifest"].read_text())
        print(f"{args.task}/{args.profile}: {man['source']}")
        for k, v in files.items():
            print(f"  {k}: {v}")
    return 0


def _shown(folder: Path) -> str:
    """A folder as the audit names it: relative to the working directory when it lies under it."""
    rel = os.path.relpath(Path(folder).resolve())
    return rel if not rel.startswith("..") else str(Path(folder).resolve())


def _audit(args, data_profiles: dict[str, DataProfile]) -> int:
    """``data audit``: one ``error:`` line (stderr) per leaking test row, ``note:`` lines for facts and a one-line
    summary per data set (stdout); exit status 1 when a test row leaks."""
    if not args.profile and not args.folder:
        raise UsageError(f"data audit: give a data profile ({', '.join(data_profiles)}) or --folder DIR")
    unknown = [p for p in args.profile if p not in data_profiles]
    if unknown:
        raise UsageError(f"data audit: unknown data profile {unknown[0]!r}; data profiles: "
                         f"{', '.join(data_profiles)} (a run profile trains on one of them: its \"data\")")
    if args.folder and args.task and len(args.task) > 1:
        raise UsageError("data audit: --folder takes one --task (the folder's)")
    sets = [(f, args.task[0] if args.task else None) for f in args.folder]
    for name in args.profile:
        data = data_profiles[name]
        tasks = [t for t in TASKS if t in data.tasks and (not args.task or t in args.task)]
        if not tasks:
            raise UsageError(f"data audit: data profile {name!r} has no {' or '.join(args.task)} data; its tasks: "
                             f"{', '.join(data.tasks)}")
        for task in tasks:
            files = build(task, data, args.root, _overrides(task, data, args.overrides))
            sets.append((files["train"].parent, task))
    leaked = False
    for folder, task in sets:
        result = audit_folder(folder, task)
        for line in result.lines(_shown(folder)):
            print(line, file=sys.stderr if line.startswith("error: ") else sys.stdout, flush=True)
        leaked |= not result.ok
    return 1 if leaked else 0
