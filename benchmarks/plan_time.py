"""Benchmark: how long ``python -m infiloop plan`` takes for the GPU profiles on this machine, with nothing cached.

Each profile is planned in a new process, its run folder and data folder empty (temporary folders given through
``INFILOOP_RUNS`` and ``INFILOOP_DATA``): the FLOP estimate of every job and the memory section (each model's step
counted on fake tensors, ``infiloop/training/memory.py``). The goal: within 30 s, and no data set built.

    python benchmarks/plan_time.py                 # gpu and paper
    python benchmarks/plan_time.py --profile gpu
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

GOAL_S = 30.0


def plan_seconds(profile: str) -> tuple[float, int, list[str]]:
    """Seconds of ``plan --profile profile`` in a new process with empty run and data folders, its exit status and
    the data sets it left in its data folder."""
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "INFILOOP_RUNS": str(Path(d) / "runs"), "INFILOOP_DATA": str(Path(d) / "data")}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "infiloop", "plan", "--profile", profile], cwd=C.ROOT, env=env,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        data = Path(d) / "data"
        built = sorted(str(p.parent.relative_to(data)) for p in data.rglob("build.json")) if data.is_dir() else []
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return seconds, done.returncode, built


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", help="a profile to plan (default: gpu and paper)")
    args = ap.parse_args()
    print(C.header("plan of the GPU profiles with nothing cached"))
    rows, worst = [], 0.0
    for profile in args.profile or ["gpu", "paper"]:
        print(f"planning {profile} in a new process ...", file=sys.stderr, flush=True)
        seconds, status, built = plan_seconds(profile)
        worst = max(worst, seconds)
        rows.append({"profile": profile, "seconds": f"{seconds:.1f}", "exit": status,
                     "data sets built": ", ".join(built) or "none"})
    print(C.table(rows))
    print(f"\nslowest: {worst:.1f} s (goal: within {GOAL_S:.0f} s: {'met' if worst <= GOAL_S else 'NOT met'})")


if __name__ == "__main__":
    main()
