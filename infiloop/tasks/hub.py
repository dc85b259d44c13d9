"""Public datasets from the Hugging Face hub (the paper's benchmarks), asked through huggingface_hub itself.

:func:`fetch` returns a :class:`HubFile`: the local path of one file of a dataset repository at a revision, the
commit that revision resolved to, and the file's sha256; or it raises :class:`HubUnavailable` with the reason.
huggingface_hub does the asking, so its own settings hold: a proxy (``HTTPS_PROXY``, ``HTTP_PROXY``), a mirror
or private endpoint (``HF_ENDPOINT``), a token, offline mode (``HF_HUB_OFFLINE``; ``INFILOOP_OFFLINE`` as well
here). A file already in the hub cache at that revision (the project's ``data/hub``, or huggingface_hub's own) is
used without the network: offline, or when the hub does not answer.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .base import DataError

TIMEOUT_S = 10.0
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "INFILOOP_OFFLINE")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class HubUnavailable(RuntimeError):
    """The hub cannot provide the file (offline and not cached, unreachable, missing); ``str()`` gives the reason."""


@dataclass(frozen=True)
class HubFile:
    """One file of a hub dataset as found: ``revision`` as asked, ``commit`` as the hub (or the cache's record of
    it) resolved it, ``path`` in the hub cache, ``sha256`` of its bytes."""

    repo: str
    filename: str
    revision: str
    commit: str | None
    path: Path
    sha256: str


def offline_reason() -> str | None:
    """Why the hub must not be asked at all (``HF_HUB_OFFLINE`` or ``INFILOOP_OFFLINE`` set), or ``None``."""
    for var in OFFLINE_VARIABLES:
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set"
    return None


def sha256_of(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in blocks (hub files are hundreds of MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def commit_of(path: str | os.PathLike) -> str | None:
    """The commit of a file in a hub cache: the name of its ``snapshots/<commit>/`` folder (None elsewhere)."""
    p = Path(path)
    for parent in p.parents:
        if parent.parent.name == "snapshots":
            return parent.name
    return None


@contextmanager
def _quiet_retries():
    """huggingface_hub's warnings (a line per retry while the hub does not answer, about 25 s) held back: the
    answer is one line, its reason or the file."""
    log = logging.getLogger("huggingface_hub")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def default_cache() -> Path:
    """huggingface_hub's own cache (``HF_HUB_CACHE``, else under ``HF_HOME``; read now), where a dataset downloaded
    by ``huggingface-cli download`` or another project lies."""
    from huggingface_hub import constants

    return Path(os.environ.get("HF_HUB_CACHE", "").strip() or constants.HF_HUB_CACHE).expanduser()


def fetch(repo_id: str, filename: str, cache_dir: str | os.PathLike, revision: str = "main",
          timeout: float = TIMEOUT_S) -> HubFile:
    """``filename`` of the dataset repository ``repo_id`` at ``revision`` (a branch, tag or commit), downloaded
    into the hub cache ``cache_dir`` or found there; offline (:func:`offline_reason`) only the cache is read. A file
    neither the hub nor ``cache_dir`` provides is looked for in huggingface_hub's own cache (:func:`default_cache`)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - a declared dependency
        raise HubUnavailable("huggingface_hub is not installed") from None
    reason = offline_reason()
    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or None  # read now: huggingface_hub reads it at import
    ask = {"repo_type": "dataset", "revision": revision, "etag_timeout": timeout, "endpoint": endpoint}
    try:
        with _quiet_retries():
            local = hf_hub_download(repo_id, filename, cache_dir=cache_dir, local_files_only=reason is not None, **ask)
    except Exception as e:  # noqa: BLE001 - network errors, offline and not cached, missing repository or file
        why = reason or " ".join(str(e).split()) or type(e).__name__
        local = None
        if Path(cache_dir).resolve() != default_cache().resolve():
            try:  # read only: nothing is downloaded or written there
                local = hf_hub_download(repo_id, filename, cache_dir=default_cache(), local_files_only=True, **ask)
            except Exception:  # noqa: BLE001 - not there either
                pass
        if local is None:
            caches = f"the hub caches {cache_dir} and {default_cache()} do not hold it"
            raise HubUnavailable(f"{repo_id}: {filename} at revision {revision} is not available "
                                 f"({why}{', and ' if reason else '; '}{caches})") from None
    path = Path(local)
    digest = sha256_of(path)
    blob = path.resolve()
    # a file stored by git LFS sits in the cache as blobs/<its sha256>: a damaged download is told here
    if blob.parent.name == "blobs" and _SHA256.fullmatch(blob.name) and blob.name != digest:
        raise DataError(f"{path}: damaged download of {repo_id}/{filename} (sha256 {digest}, the hub's {blob.name}); "
                        f"delete {blob} and build again")
    return HubFile(repo_id, filename, revision, commit_of(path), path, digest)
