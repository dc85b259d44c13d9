"""The difficulty distribution of a data profile's sets (``python -m infiloop data describe``): Sudoku blanks, rating
and the share naked and hidden singles solve; Maze path length, dead ends and path share."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import maze, sudoku
from .base import TaskData
from .datasets import DataProfile, build, changed_settings


def describe(task: str, data: DataProfile, root: Path | None = None, overrides: dict | None = None,
             verbose: bool = False) -> dict:
    """The difficulty distribution of a profile's training (base puzzles, no augmentations) and test
    sets, built first if needed: Sudoku blanks, rating and the fraction naked + hidden singles solve
    (:func:`sudoku.difficulty`); Maze path length, dead ends and path share (:func:`maze.difficulty`)."""
    if task not in ("sudoku", "maze"):
        raise ValueError(f"describe covers sudoku and maze, not {task!r}")
    files = build(task, data, root, overrides, verbose=verbose)
    out = {"task": task, "profile": data.name, "overrides": changed_settings(task, data, overrides),
           "source": json.loads(files["manifest"].read_text())["source"]}
    for split in ("train", "test"):
        d = TaskData.load(files[split])
        if task == "sudoku":
            base = d.subset(np.flatnonzero(d.meta["aug"] == 0)) if "aug" in d.meta else d
            out[split] = sudoku.difficulty(sudoku.from_taskdata(base))
        else:
            out[split] = maze.difficulty(maze.from_taskdata(d))
    return out


def describe_markdown(rows: list[dict]) -> str:
    """A markdown table of :func:`describe` results (one task), a line per profile and split."""
    def q(v: list) -> str:
        return " / ".join(str(x) for x in v)

    def name(r: dict) -> str:
        over = ", ".join(f"{k}={json.dumps(v)}" for k, v in r["overrides"].items())
        return f"`{r['profile']}`" + (f" ({over})" if over else "")

    if rows[0]["task"] == "sudoku":
        lines = ["| profile | split | puzzles | blanks min / median / 90 % / max | rating min / median / 90 % / max "
                 "| rating mean | singles solve |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            for split in ("train", "test"):
                d = r[split]
                lines.append(f"| {name(r)} | {split} | {d['puzzles']:,} | {q(d['blanks'])} | {q(d['rating'])} "
                             f"| {d['rating_mean']:.2f} | {100 * d['singles']:.1f} % |")
    else:
        lines = ["| profile | split | mazes | path length min / median / 90 % / max "
                 "| dead ends min / median / 90 % / max | path share of open cells (median) |",
                 "|---|---|---|---|---|---|"]
        for r in rows:
            for split in ("train", "test"):
                d = r[split]
                lines.append(f"| {name(r)} | {split} | {d['mazes']:,} | {q(d['path_length'])} | {q(d['dead_ends'])} "
                             f"| {d['path_share'][1]:.2f} |")
    return "\n".join(lines)
