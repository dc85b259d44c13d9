"""Two pipelines at once on one run cache (two ``./reproduce.sh`` on one machine, or two hosts on a shared
filesystem): both finish, every run is trained once, and both read the same results.

Slow (two smoke pipelines side by side, a few minutes on two cores); run it on purpose, ten times in a row:
``INFILOOP_CONCURRENCY_ROUNDS=10 pytest -m slow tests/test_concurrency.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infiloop.paths import ROOT

ROUNDS = int(os.environ.get("INFILOOP_CONCURRENCY_ROUNDS", "1"))
# the main models (01) and the ablations (05, whose default variant is 01's InfiLoop run): 11 runs
NOTEBOOKS = ["01", "05"]


def _pipeline(tmp: Path, name: str) -> subprocess.Popen:
    env = dict(os.environ, INFILOOP_RUNS=str(tmp / "runs"), INFILOOP_DATA=str(tmp / "data"),
               INFILOOP_RESULTS=str(tmp / name / "results"), INFILOOP_FIGURES=str(tmp / name / "figures"))
    cmd = [sys.executable, "-m", "infiloop", "reproduce", "--profile", "smoke", "--jobs", "1"]
    for nb in NOTEBOOKS:
        cmd += ["--only", nb]
    log = open(tmp / f"{name}.log", "w")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def _results(tmp: Path, name: str) -> dict:
    """What each notebook measured (its claims and tables), without the times of the run."""
    out = {}
    for path in sorted((tmp / name / "results" / "smoke" / "summaries").glob("*.json")):
        s = json.loads(path.read_text())
        out[path.stem] = {k: s.get(k) for k in ("claims", "tables")}
    return out


@pytest.mark.long  # two smoke pipelines: 200-260 s
@pytest.mark.slow
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_two_pipelines_on_one_run_cache_train_every_run_once(tmp_path, round_):
    a, b = _pipeline(tmp_path, "a"), _pipeline(tmp_path, "b")
    for p, name in ((a, "a"), (b, "b")):
        assert p.wait(timeout=900) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
    runs = [d for d in (tmp_path / "runs").glob("*/*") if (d / "DONE.json").is_file()]
    assert len(runs) == 11
    for run in runs:
        log = (run / "logs" / "train.log").read_text()
        # each pipeline ran the training job of this run (headers), exactly one of them trained it
        assert log.count(" pid ") == 2 and log.count("# done (trained now)") == 1, (run, log)
        assert log.count("# done (from the run cache)") == 1, (run, log)
    assert not list((tmp_path / "runs").rglob("*.tmp*"))  # no half-written file left behind
    results = _results(tmp_path, "a")
    assert len(results) == len(NOTEBOOKS) and results == _results(tmp_path, "b")
