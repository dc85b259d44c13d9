"""How files are written and read: atomically, without pickle, and under a lock where processes share them.

- :func:`atomic_write` / :func:`atomic_write_text`: write a temporary file beside the target, then move it
  into place (a reader never sees a half-written file); :func:`remove_stale_temps` removes what killed
  writes left behind.
- :func:`save_npz` / :func:`load_npz`: compressed numpy archives (data sets, trajectories), read with
  ``allow_pickle=False``.
- :func:`save_weights` / :func:`load_weights`: model weights as safetensors (no pickle).
- :func:`locked`: an exclusive lock on a file (the ``filelock`` library), e.g. one process trains a run
  folder while another waits for it; :func:`lock_problem`: whether such locks hold across the machines that
  share a folder (a cluster's file system may refuse them, or keep them to one node).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from filelock import FileLock

from .errors import DataError, StorageError

# A temporary file of atomic_write is ".<name>.<pid>-<random><suffix>"; one whose writer is gone and that is
# older than this is the leftover of a killed write (the age spares a writer on another machine).
STALE_TEMP_AGE_S = 60.0
_TEMP = re.compile(r"\.(?P<name>.+)\.(?:(?P<pid>\d+)-)?[a-z0-9_]{8}(?:\.tmp|\.npz)")


# ------------------------------------------------------------------------------------------ atomic writes


def atomic_write(path: str | os.PathLike, write, suffix: str = "") -> Path:
    """Call ``write(tmp_path)`` then move the finished file into place (never a half-written file).

    Leftovers of earlier killed writes of the same file are removed first (:func:`remove_stale_temps`). A full
    disk, a quota, a read-only folder or a missing permission is a :class:`StorageError` naming the file and
    what was kept (the previous file is never touched)."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent, path.name)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=suffix or ".tmp")
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600 (and some writers recreate the file): 0644 usually
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        storage = storage_error(e, path)
        if storage is not None:
            raise storage from e
        raise
    return path


NO_ROOM = {errno.ENOSPC, errno.EDQUOT}
NOT_ALLOWED = {errno.EROFS: "the folder is read-only", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied"}
# torch.save reports a full disk as a RuntimeError of its zip writer, without an errno
_TORCH_WRITE_FAILED = ("file write failed", "unexpected pos")


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def storage_error(e: BaseException, path: Path) -> StorageError | None:
    """The :class:`StorageError` that says why ``path`` could not be written, or None when ``e`` is another
    failure (the writer's own error then stands)."""
    code = getattr(e, "errno", None)
    full = code in NO_ROOM or (isinstance(e, RuntimeError) and any(t in str(e) for t in _TORCH_WRITE_FAILED))
    if not full and code not in NOT_ALLOWED:
        return None
    if full:
        try:
            free = f"{_size(shutil.disk_usage(_existing(path.parent)).free)} free there"
        except OSError:
            free = "free space unknown"
        why = ("over the disk quota" if code == errno.EDQUOT else "no space left on the device") + f" ({free}"
        why += f"; the previous {path.name} took {_size(path.stat().st_size)})" if path.is_file() else ")"
    else:
        why = NOT_ALLOWED[code]
    kept = f"the previous {path.name} is kept unchanged" if path.is_file() else "nothing of it was written"
    return StorageError(code or errno.ENOSPC, f"{path}: could not write it: {why}; {kept}")


def _existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8, newlines as given) atomically."""
    def _w(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)

    return atomic_write(path, _w)


def remove_stale_temps(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove the temporary files that killed :func:`atomic_write` calls left in ``folder`` (of the file
    ``name`` only, if given): those whose writing process is gone, older than ``STALE_TEMP_AGE_S``."""
    folder, removed, now = Path(folder), [], time.time()
    if not folder.is_dir():
        return removed
    for p in folder.iterdir():
        m = _TEMP.fullmatch(p.name)
        if not m or (name is not None and m["name"] != name):
            continue
        try:
            if now - p.stat().st_mtime < STALE_TEMP_AGE_S or (m["pid"] and _alive(int(m["pid"]))):
                continue
            p.unlink()
            removed.append(p)
        except FileNotFoundError:  # removed by another process meanwhile
            continue
    return removed


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


# ------------------------------------------------------------------------------------------ numpy archives


def save_npz(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` as a compressed ``.npz`` atomically (object arrays are refused by the reader)."""
    return atomic_write(path, lambda tmp: np.savez_compressed(tmp, **arrays), suffix=".npz")


def load_npz(path: str | os.PathLike, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (only ``keys``, if given), read without pickle."""
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in (f.files if keys is None else keys)}


# ------------------------------------------------------------------------------------------ model weights


def save_weights(path: str | os.PathLike, weights: dict) -> Path:
    """Tensors ``{name: tensor}`` as a safetensors file, atomically."""
    from safetensors.torch import save_file

    return atomic_write(path, lambda tmp: save_file({k: v.contiguous() for k, v in weights.items()}, tmp))


def load_weights(path: str | os.PathLike) -> dict:
    """The tensors of a safetensors file (no pickle); weights that hold NaN or Inf (a diverged run, or a damaged
    file from elsewhere) are refused."""
    import torch
    from safetensors.torch import load_file

    weights = load_file(str(path))
    bad = [k for k, v in weights.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise DataError(f"{path}: the weights hold NaN or Inf ({', '.join(bad[:3])}"
                        f"{f' and {len(bad) - 3} more' if len(bad) > 3 else ''}): a diverged or damaged run; "
                        "train it again")
    return weights


# ------------------------------------------------------------------------------------------ locks


def locked(path: str | os.PathLike):
    """An exclusive lock on the file ``path`` (created with its folder if needed), as a context manager:
    ``with locked(run_dir / ".lock"): ...``. Another process asking for it waits until it is released."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path))


MOUNTS = Path("/proc/self/mounts")
# Mount options under which a lock on a file holds only for the processes of one machine
_NODE_LOCAL_LOCKS = {"lustre": ("localflock",), "nfs": ("local_lock=flock", "local_lock=all", "nolock"),
                     "nfs4": ("local_lock=flock", "local_lock=all")}


def _mount_of(folder: Path) -> tuple[str, str, list[str]]:
    """The mount point, file system type and mount options of ``folder`` (from ``MOUNTS``; empty where unknown)."""
    try:
        lines = MOUNTS.read_text(encoding="utf-8").splitlines()
    except OSError:
        return "", "", []
    best = ("", "", [])
    where = str(folder.resolve())
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        point = parts[1].replace("\\040", " ")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, parts[2], parts[3].split(","))
    return best


def lock_problem(folder: str | os.PathLike) -> tuple[str, str] | None:
    """Whether locks on files in ``folder`` (:func:`locked`) keep processes on different machines apart:
    ``None`` when they do (as far as can be told from here), ``("none", why)`` when no lock can be taken there at
    all (Lustre mounted ``noflock``, NFS without its lock daemon: every lock raises), ``("node", why)`` when a lock
    holds only on the machine that took it (Lustre ``localflock``, NFS ``local_lock=flock``)."""
    import fcntl

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    point, fs, options = _mount_of(folder)
    on = f"{folder} ({fs or 'a file system'} at {point or '?'}" + (f", mounted {','.join(options)})" if options
                                                                  else ")")
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".lock-probe-")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES):
            return "none", f"{on}: a file lock cannot be taken there ({e.strerror or e})"
    finally:
        os.close(fd)
        os.unlink(probe)
    local = [o for o in options if o in _NODE_LOCAL_LOCKS.get(fs, ())]
    if local:
        return "node", f"{on}: its locks hold only on the machine that takes them ({local[0]})"
    return None


def fill_block(text: str, start: str, end: str, block: str) -> str | None:
    """``text`` with everything from ``start`` to ``end`` (markers included) replaced by ``block``, which
    carries the markers itself; None when ``text`` lacks either marker (how the generated tables of the README
    and ``docs/`` are kept between their markers)."""
    if start not in text or end not in text:
        return None
    return text[:text.index(start)] + block + text[text.index(end) + len(end):]
