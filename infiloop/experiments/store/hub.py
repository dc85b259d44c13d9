"""Runs pulled from the hub: a hub repository in the archive's layout (``archives.py``), downloaded and imported."""

from __future__ import annotations

import os
from pathlib import Path

from ...tasks.base import DataError
from .archives import MANIFEST, import_runs


def pull(repo_id: str, revision: str | None = None, root: str | os.PathLike | None = None,
         cache_dir: str | os.PathLike | None = None, repo_type: str = "model") -> list[tuple[Path, str]]:
    """Download a hub repository of runs (the archive's layout, unpacked) and import it.

    Offline (``HF_HUB_OFFLINE``/``INFILOOP_OFFLINE`` set, or the hub unreachable) only a snapshot already in
    the hub cache is used."""
    from huggingface_hub import snapshot_download

    from ...tasks.hub import offline_reason

    reason = offline_reason()
    try:
        folder = snapshot_download(repo_id, revision=revision, repo_type=repo_type, cache_dir=cache_dir,
                                   allow_patterns=[MANIFEST, "runs/**"], local_files_only=reason is not None)
    except Exception as e:  # noqa: BLE001 - network, missing repository or revision, not cached while offline
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        extra = f" ({reason}; only a snapshot already in the hub cache can be used)" if reason else ""
        raise DataError(f"{repo_id}: could not get the runs from the hub{extra}: {text}") from None
    return import_runs(Path(folder), root)
