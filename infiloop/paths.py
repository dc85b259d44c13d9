"""Where the repository's files live: the one module that knows every folder (showyourwork's ``paths``).

    ROOT        the repository (this checkout)
    RUNS        the run cache: runs/<task>/<recipe>-<profile>-<hash>/          INFILOOP_RUNS
    DATA        data sets, built or downloaded: data/<task>/<profile>/        INFILOOP_DATA
    RESULTS     notebook summaries, executed notebooks, reports: results/     INFILOOP_RESULTS
    FIGURES     figures written by the notebooks: figures/<profile>/          INFILOOP_FIGURES
    DOCS        docs/ (calibration.md)
    NOTEBOOKS   notebooks/

The four writable folders can be moved with the environment variables on the right (an absolute path,
or one relative to the repository root); they are read once, when ``infiloop`` is imported, and
subprocesses (papermill's kernels, ``reproduce``'s training jobs) inherit them. The test suite points
all four at a temporary folder. Code reads them as ``paths.RUNS`` etc. when it runs, never as a default
argument bound at import, so that a test (or a worker process) can set them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _folder(variable: str, default: str) -> Path:
    """``$variable`` (relative: to the repository root), else ``ROOT / default``."""
    value = os.environ.get(variable, "").strip()
    return (ROOT / Path(value).expanduser()).resolve() if value else ROOT / default


RUNS = _folder("INFILOOP_RUNS", "runs")
DATA = _folder("INFILOOP_DATA", "data")
RESULTS = _folder("INFILOOP_RESULTS", "results")
FIGURES = _folder("INFILOOP_FIGURES", "figures")
WRITABLE = {"RUNS": "runs", "DATA": "data", "RESULTS": "results", "FIGURES": "figures"}  # name -> default folder


def read_environment() -> None:
    """Read the four writable folders from the environment again, as at import: a warm worker
    (``experiments/compute/worker.py``) runs each job in the environment the job was given, as a new process would."""
    for name, default in WRITABLE.items():
        globals()[name] = _folder(f"INFILOOP_{name}", default)


def inductor_cache() -> Path:
    """Where ``torch.compile``'s Inductor keeps its compiled kernels for the jobs of the compute stage
    (``TORCHINDUCTOR_CACHE_DIR``): inside the run cache, so that a second run of the pipeline, and every job of
    one, reuses what an earlier job compiled for the same graph (a hidden folder: never listed as a run)."""
    return RUNS / ".inductor-cache"
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"

# A plain file or folder name (a profile, a notebook, a figure, a run, a cached evaluation): letters, digits,
# '_', '-' and '.', starting with a letter or digit; no separator, so it cannot leave its folder.
PLAIN_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def is_plain_name(name: str) -> bool:
    """Whether the whole of ``name`` is a plain name (``PLAIN_NAME``)."""
    return re.fullmatch(PLAIN_NAME, str(name)) is not None

