"""Public datasets from the Hugging Face hub, with a short timeout and an offline answer (the paper's benchmarks).

``fetch`` returns the local path of a dataset file (downloaded into ``<data>/hub`` or found in that
cache) or raises :class:`HubUnavailable` with the reason, so that callers fall back to the
project's generators and say why.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

TIMEOUT_S = 10.0


class HubUnavailable(RuntimeError):
    """The hub cannot provide the file (offline, unreachable, missing); ``str()`` gives the reason."""


def offline_reason() -> str | None:
    """Why the hub must not be asked at all, or ``None``."""
    for var in ("HF_HUB_OFFLINE", "INFILOOP_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set"
    return None


def reachable(timeout: float = 3.0) -> str | None:
    """``None`` when a TCP connection to the hub endpoint opens within ``timeout``, else the reason.
    (huggingface_hub itself retries with back-off for about 25 s before giving up.)"""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return None
    except OSError as e:
        return f"{host}:{port} unreachable: {e}"


def fetch(repo_id: str, filename: str, cache_dir: Path, timeout: float = TIMEOUT_S) -> Path:
    """Download (or reuse) ``filename`` of the dataset repository ``repo_id``."""
    reason = offline_reason()
    if reason is None and (why := reachable(min(timeout, 3.0))):
        reason = why
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:  # pragma: no cover - a declared dependency
        raise HubUnavailable("huggingface_hub is not installed") from None
    cache_dir = Path(cache_dir)
    try:
        if reason:  # a file cached by an earlier download is still usable
            return Path(hf_hub_download(repo_id, filename, repo_type="dataset", cache_dir=cache_dir,
                                        local_files_only=True))
        return Path(hf_hub_download(repo_id, filename, repo_type="dataset", cache_dir=cache_dir,
                                    etag_timeout=timeout))
    except Exception as e:  # network errors, offline mode, missing repository or file
        msg = reason or f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip()
        raise HubUnavailable(f"{repo_id}/{filename} not available ({msg})") from None
