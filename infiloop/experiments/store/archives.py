"""Trained runs that travel: export to an archive, import from one or from a folder in its layout (a hub
snapshot: ``hub.py``).

An archive (``.tar`` or ``.zip``) or a hub repository holds, for each run, the files a finished run needs
and nothing that needs unpickling::

    MANIFEST.json                                   format, the exporter's CODE_VERSION, sha256 of every file
    runs/<task>/<recipe>-<profile>-<hash>/config.json
                                         .../model.safetensors   EMA weights
                                         .../DONE.json           the training summary
                                         .../metrics.jsonl       the training log
                                         .../best.safetensors    the checkpoint chosen on validation, best.json
                                         .../eval/*.npz          cached evaluations (numpy, no pickle)

Checkpoints (``checkpoint*.pt``, written by ``torch.save``) are not exported: an imported run is complete
and is never trained again. Import checks, before writing anything, that every member is a plain file at
one of these paths (no absolute path, no ``..``, no link), that the archive's code version is this code's
``recipes.CODE_VERSION``, that each folder name is the hash of its ``config.json`` (so the run cache
finds it) and that every file has the sha256 of the manifest; then each run is written into a temporary
folder beside its place in the run cache, checked to load and to reproduce its recorded accuracy on a few puzzles
(``verify.py``; or recorded as "not checked: <why>" in its ``imported.json``), and moved there in one rename.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from ... import paths
from ...errors import UsageError
from ...io import atomic_write
from ...tasks.base import DataError
from ...training import DONE, METRICS, WEIGHTS
from ...training.selection import BEST, BEST_RECORD
from ..settings import recipes
from . import runs as cache
from . import verify
from .inventory import runs_root
from .members import Source, open_source

FORMAT = "infiloop-runs"
FORMAT_VERSION = 1
MANIFEST = "MANIFEST.json"
RUN_FILES = ("config.json", WEIGHTS, DONE, METRICS, BEST, BEST_RECORD)  # the last three optional (copied when present)
REQUIRED = ("config.json", WEIGHTS, DONE)
_NAME = paths.PLAIN_NAME
_MEMBER = re.compile(rf"runs/(?P<task>{_NAME})/(?P<name>{_NAME})/(?P<file>config\.json|model\.safetensors|DONE\.json|"
                     rf"metrics\.jsonl|best\.safetensors|best\.json|eval/{_NAME}\.npz)")
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------------------------------------ export


def run_files(run_dir: Path) -> list[str]:
    """The files of a finished run that travel, relative to its folder, in a stable order."""
    files = [f for f in RUN_FILES if (run_dir / f).is_file()]
    files += sorted(f"eval/{p.name}" for p in (run_dir / "eval").glob("*.npz")
                    if p.is_file() and paths.is_plain_name(p.name))
    return files


def export_runs(run_dirs: list[str | os.PathLike], out: str | os.PathLike) -> tuple[Path, list[dict]]:
    """Write the finished runs ``run_dirs`` into the archive ``out`` (``.tar`` or ``.zip``); returns the
    archive's path and its manifest entries."""
    out = Path(out)
    kind = _archive_kind(out)
    if not run_dirs:
        raise UsageError("runs export: give at least one run folder")
    entries, sources = [], []
    for d in run_dirs:
        run = cache.load_run(d)
        if not run.done:
            raise DataError(f"{run.dir}: the run is not complete (no {DONE}); only finished runs can be exported")
        missing = [f for f in REQUIRED if not (run.dir / f).is_file()]
        if missing:
            raise DataError(f"{run.dir}: {', '.join(missing)} missing; train the run again before exporting it")
        cfg = run.config
        path = f"runs/{cfg['task']}/{cache.run_dir_for(cfg, Path('.')).name}"
        if any(e["path"] == path for e in entries):
            raise UsageError(f"runs export: {run.dir} is given twice (or holds the same run as another folder)")
        files = run_files(run.dir)
        entries.append({"path": path, "task": cfg["task"], "recipe": cfg["recipe"], "profile": cfg["profile"],
                        "files": {f: sha256_file(run.dir / f) for f in files}})
        sources.append(run.dir)
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "code_version": recipes.CODE_VERSION,
                "exported": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "runs": entries}
    data = (json.dumps(manifest, indent=1) + "\n").encode()

    def write(tmp):
        if kind == "zip":
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
                z.writestr(MANIFEST, data)
                for entry, src in zip(entries, sources):
                    for f in entry["files"]:
                        z.write(src / f, f"{entry['path']}/{f}")
        else:
            with tarfile.open(tmp, "w") as t:
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mtime = len(data), int(datetime.now().timestamp())
                t.addfile(info, io.BytesIO(data))
                for entry, src in zip(entries, sources):
                    for f in entry["files"]:
                        t.add(src / f, f"{entry['path']}/{f}", recursive=False)

    return atomic_write(out, write, suffix=out.suffix), entries


def _archive_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith(".tar"):
        return "tar"
    raise UsageError(f"{path}: expected an archive name ending in .tar or .zip")


# ------------------------------------------------------------------------------------------------ import


def _check_name(where: Path, name: str) -> re.Match | None:
    """``None`` for the manifest; the path's parts for a run file; a one-line refusal for anything else."""
    if name == MANIFEST:
        return None
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or "\\" in name:
        raise DataError(f"{where}: member {name!r} points outside the run cache (absolute path or '..'); "
                        f"refused, nothing was imported")
    m = _MEMBER.fullmatch(name)
    if m is None:
        raise DataError(f"{where}: unexpected member {name!r} (an archive of runs holds {MANIFEST} and "
                        f"runs/<task>/<run>/{{config.json, model.safetensors, DONE.json, metrics.jsonl, eval/*.npz}}); "
                        f"refused, nothing was imported")
    return m


def read_manifest(src: Source) -> dict:
    names = {m.name for m in src.members()}
    if MANIFEST not in names:
        raise DataError(f"{src.where}: no {MANIFEST}: not an archive written by `python -m infiloop runs export`")
    with src.open(MANIFEST) as f:
        raw = f.read(1 << 22)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise DataError(f"{src.where}: damaged {MANIFEST} ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("runs"), list):
        raise DataError(f"{src.where}: {MANIFEST} is not a manifest of infiloop runs (format {FORMAT!r} expected)")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DataError(f"{src.where}: archive format version {manifest.get('format_version')}; this code reads "
                        f"version {FORMAT_VERSION}")
    if manifest.get("code_version") != recipes.CODE_VERSION:
        raise DataError(f"{src.where}: runs exported by code version {manifest.get('code_version')}, this code is "
                        f"version {recipes.CODE_VERSION} (the model or its training changed): they cannot be "
                        f"used here; refused, nothing was imported")
    return manifest


def import_runs(where: str | os.PathLike, root: str | os.PathLike | None = None) -> list[tuple[Path, str]]:
    """Import every run of an archive or of a folder in the archive's layout into the run cache ``root``.

    Returns ``(run folder, "imported" | "already present")`` per run. Nothing is written unless every check
    passes; a run already in the cache with the same files is left as it is."""
    where = Path(where)
    src = open_source(where)
    manifest = read_manifest(src)
    members = {m.name: m for m in src.members()}
    by_run: dict[str, list[str]] = {}
    for name in members:
        m = _check_name(where, name)
        if m is not None:
            by_run.setdefault(f"runs/{m['task']}/{m['name']}", []).append(m["file"])
    declared = {}
    for e in manifest["runs"]:
        if not isinstance(e, dict) or not isinstance(e.get("files"), dict) or not isinstance(e.get("path"), str):
            raise DataError(f"{where}: {MANIFEST}: malformed run entry {e!r}")
        _check_name(where, f"{e['path']}/config.json")
        declared[e["path"]] = e
    for path, files in by_run.items():
        if path not in declared:
            raise DataError(f"{where}: {path}/ is not in {MANIFEST} (refused, nothing was imported)")
        extra = sorted(set(files) - set(declared[path]["files"]))
        if extra:
            raise DataError(f"{where}: {path}/{extra[0]} is not in {MANIFEST} (refused, nothing was imported)")
    for path, e in declared.items():
        missing = [f for f in e["files"] if f not in by_run.get(path, [])]
        missing += [f for f in REQUIRED if f not in e["files"]]
        if missing:
            raise DataError(f"{where}: {path}/{missing[0]} is missing (refused, nothing was imported)")

    root = runs_root(root)
    staged, results = [], []
    try:
        for path, e in declared.items():
            dest = root / PurePosixPath(path).relative_to("runs")
            if dest.exists():
                if _same_files(dest, e["files"]):
                    results.append((dest, "already present"))
                    continue
                raise DataError(f"{dest}: a run folder of that name is already in the run cache with other files; "
                                f"delete it first to import {path} from {where}")
            tmp = Path(tempfile.mkdtemp(prefix=f".import-{dest.name}-", dir=_mkdir(dest.parent)))
            staged.append((tmp, dest))
            for f, digest in e["files"].items():
                _copy_verified(src, f"{path}/{f}", tmp / f, digest, where)
            cfg = _check_config(tmp, path, where)
            _check_loads_and_reproduces(tmp, cfg, path, where)
            results.append((dest, "imported"))
        for tmp, dest in staged:
            os.replace(tmp, dest)
        staged = []
    finally:
        for tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _same_files(dest: Path, files: dict[str, str]) -> bool:
    return (dest / DONE).is_file() and all((dest / f).is_file() and sha256_file(dest / f) == digest
                                           for f, digest in files.items())


def _copy_verified(src: Source, name: str, target: Path, digest: str, where: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with src.open(name) as fin, open(target, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            h.update(chunk)
            fout.write(chunk)
    if h.hexdigest() != digest:
        raise DataError(f"{where}: {name}: sha256 {h.hexdigest()[:16]}… differs from the manifest's {digest[:16]}… "
                        f"(damaged or altered); refused, nothing was imported")


def _check_config(folder: Path, path: str, where: Path) -> None:
    """The run's config must be readable, of this code version, and hash to the folder's name."""
    try:
        cfg = cache.read_config(folder / "config.json")
        json.loads((folder / DONE).read_text(encoding="utf-8"))
    except (DataError, ValueError) as e:
        raise DataError(f"{where}: {path}: {e}".replace(str(folder), path)) from None
    if cfg.get("code_version") != recipes.CODE_VERSION:
        raise DataError(f"{where}: {path}/config.json: code version {cfg.get('code_version')}, this code is version "
                        f"{recipes.CODE_VERSION}; refused, nothing was imported")
    want = f"runs/{cfg['task']}/{cache.run_dir_for(cfg, Path('.')).name}"
    if want != path:
        raise DataError(f"{where}: {path}/config.json describes the run {want}, not {path} (renamed folder or edited "
                        f"configuration); refused, nothing was imported")
    return cfg


def _check_loads_and_reproduces(folder: Path, cfg: dict, path: str, where: Path) -> None:
    """The staged run loads and reproduces its recorded accuracy on a few puzzles (``verify.py``); the result, or
    why it could not be checked here, goes into its ``imported.json``."""
    run = cache.Run(folder, cfg)
    try:
        run.load_model()
        result = verify.check_reproduces(run)
    except DataError as e:
        raise DataError(f"{where}: {path}: {str(e).replace(str(folder), path)}") from None
    verify.write_result(folder, result, str(where))
