"""The run cache's inventory: where it is, one row per run folder, and the stale folders that this code can never
use (``runs list``, ``runs prune``)."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

from ... import paths
from ...tasks import TASKS
from ...tasks.base import DataError
from ...training import DONE
from ..settings import recipes
from . import runs as cache


def runs_root(root: str | os.PathLike | None = None) -> Path:
    """The run cache: ``root`` if given, else ``paths.RUNS`` (read now, so that tests can move it)."""
    return Path(root) if root is not None else paths.RUNS


def stale_reason(d: Path, cfg: dict | None) -> str:
    """Why the run folder ``d`` can never be used by this code ("" when it can): trained by another code
    version, named by another configuration hash, diverged, or without a readable configuration."""
    if cfg is None:
        return "no readable config.json"
    version = cfg.get("code_version", 1)
    if version != recipes.CODE_VERSION:
        return f"code version {version}, this code is {recipes.CODE_VERSION}"
    if not d.name.endswith("-" + recipes.config_hash(cfg)):
        return "its folder name does not match its configuration's hash"
    if (d / DONE).is_file():
        try:
            loss = json.loads((d / DONE).read_text()).get("final", {}).get("loss")
        except ValueError:
            return f"damaged {DONE}"
        if loss is not None and not math.isfinite(loss):
            return "training diverged"
    return ""


def list_runs(root: str | os.PathLike | None = None) -> list[dict]:
    """One row per run folder of the cache: task, name, recipe, profile, code version, done, size in bytes,
    and ``stale``: why this code can never use it ("" when it can; ``runs prune`` removes the stale ones). Only the
    reasoner's task folders hold runs: the looped decoders' records (``runs/looplm/``) and the pilot's scratch runs
    (``runs/pilot/``) are neither listed nor pruned."""
    root = runs_root(root)
    rows = []
    for d in sorted(p for p in root.glob("*/*") if p.is_dir() and p.parent.name in TASKS
                    and not p.name.startswith(".")):
        row = {"task": d.parent.name, "name": d.name, "recipe": "?", "profile": "?", "code_version": "?",
               "done": (d / DONE).is_file(), "bytes": sum(f.stat().st_size for f in d.rglob("*") if f.is_file()),
               "path": d}
        cfg = None
        try:
            cfg = cache.read_config(d / "config.json")
            row.update(recipe=cfg.get("recipe", "?"), profile=cfg.get("profile", "?"),
                       code_version=cfg.get("code_version", 1))
        except DataError:
            row["recipe"] = "(damaged config.json)"
        except OSError:
            row["recipe"] = "(no config.json)"
        row["stale"] = stale_reason(d, cfg)
        rows.append(row)
    return rows


def prune(root: str | os.PathLike | None = None, dry_run: bool = True) -> list[dict]:
    """The stale run folders (:func:`stale_reason`); removed unless ``dry_run``. Nothing else is touched."""
    stale = [r for r in list_runs(root) if r["stale"]]
    if not dry_run:
        for r in stale:
            shutil.rmtree(r["path"])
    return stale


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
