"""Where a report's numbers come from: the code's commit, the machine, the CUDA stack and the installed packages
(:func:`provenance`, :func:`cuda_provenance`, :func:`write_packages`).
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from ... import paths
from ...io import atomic_write_text
from ...machine import canonical, cpu_name, lock_status


def _run(cmd: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(root: Path | None = None) -> dict[str, str]:
    """Git commit and tree state, versions and the machine (read-only: no git command writes)."""
    root = paths.ROOT if root is None else Path(root)  # the checkout (``--root``: another one)
    info = {}
    commit = _run(["git", "rev-parse", "HEAD"], root)
    dirty = _run(["git", "--no-optional-locks", "status", "--porcelain"], root)
    info["git commit"] = (commit + (" (tree has uncommitted or untracked files)" if dirty else " (clean tree)")
                          if commit else "unknown (not a git checkout)")
    info["python"] = platform.python_version()
    for pkg in ("torch", "numpy", "matplotlib"):
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = "not installed"
    info["cpu"] = cpu_name()
    info.update(cuda_provenance(root))
    info["platform"] = platform.platform()
    info[PACKAGES_KEY] = f"{len(installed_packages())} ({PACKAGES_FILE})"
    info["environment lock"] = lock_status()
    return info


PACKAGES_FILE = "packages.txt"
PACKAGES_KEY = "installed packages"


def cuda_provenance(root: Path) -> dict[str, str]:
    """The CUDA build of torch, the GPUs torch sees (name x count) and the NVIDIA driver; "none" for each
    that is absent (a CPU build of torch, no GPU, no ``nvidia-smi``)."""
    try:
        import torch

        cuda = torch.version.cuda or "none (a CPU build of torch)"
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        names = [torch.cuda.get_device_name(i) for i in range(count)]
    except Exception as e:  # noqa: BLE001 - provenance never stops the report
        cuda, names = f"unknown ({type(e).__name__})", []
    gpus = ", ".join(f"{n} × {names.count(n)}" for n in dict.fromkeys(names)) if names else "none"
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], root) \
        if shutil.which("nvidia-smi") else None
    drivers = ", ".join(dict.fromkeys(ln.strip() for ln in driver.splitlines() if ln.strip())) if driver else ""
    return {"cuda": cuda, "cuda device": gpus, "nvidia driver": drivers or "none"}


def installed_packages() -> list[str]:
    """``name==version`` of every installed distribution, sorted by name (one per name)."""
    seen = {}
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name:
            seen.setdefault(canonical(name), f"{name}=={d.version}")
    return [seen[k] for k in sorted(seen)]


def write_packages(folder: Path) -> Path:
    """``<folder>/packages.txt``: the installed packages with versions, in the form pip reads."""
    head = (f"# installed packages of the environment that built this report ({sys.executable}),\n"
            f"# python {platform.python_version()} on {platform.platform()}, "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n")
    return atomic_write_text(folder / PACKAGES_FILE, head + "".join(p + "\n" for p in installed_packages()))
