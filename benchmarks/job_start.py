"""What a job of the compute stage pays to start: a new Python process per job against a warm worker.

The compute stage of ``./reproduce.sh`` (infiloop/experiments/compute/scheduler.py) runs its jobs in warm workers by
default (compute/worker.py: one process per slot imports torch and the package once, then runs its jobs one after
another), or with ``--executor process`` each job in a new process. This script runs the same small real job (a
``compute.job.JobRun``: an evaluation of a smoke run trained first in a temporary run cache, read from its cache, so
that the job is its start, the run resolved and its result loaded), ``--jobs`` times each way, one at a time, and
prints each way's first job, its later jobs (median) and its total; then what a warm worker saves per job.
It also times a new process's own start alone (``measure.MeasuredTimer.process_start``: the imports and the device),
what ``plan`` charges a warm worker once per slot.

    python benchmarks/job_start.py                 # 10 jobs each way
    python benchmarks/job_start.py --quick         # 3 jobs each way (the test suite's run)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import ROOT, header

from infiloop.experiments.compute import worker
from infiloop.experiments.compute.job import MODULE, JobRun
from infiloop.experiments.compute.slots import Slot
from infiloop.experiments.cost.measure import MeasuredTimer
from infiloop.experiments.store.runs import get_run


def smoke_job(root: Path) -> JobRun:
    """The job both ways run: a smoke run's small evaluation, trained and computed once here beforehand."""
    run = get_run("sudoku", "infiloop", "smoke", root=root, progress=False)
    job = JobRun("eval", "cpu", 1, "sudoku", "infiloop", "smoke", {}, str(run.dir), "evaluate",
                 {"updates": 2, "every": 1, "limit": 4})
    job.run()
    return job


def fresh(job: JobRun, jobs: int, log: Path) -> list[float]:
    """Seconds of each of ``jobs`` runs of ``job``, each a new process (as ``scheduler._popen`` starts it)."""
    times = []
    for _ in range(jobs):
        t0 = time.perf_counter()
        with open(log, "a") as f:
            subprocess.run(job.command(), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, check=True)
        times.append(time.perf_counter() - t0)
    return times


def warm(job: JobRun, jobs: int, log: Path) -> list[float]:
    """Seconds of each of ``jobs`` runs of ``job`` in one warm worker (the first includes the worker's start)."""
    times, slot, env = [], Slot("cpu0", "cpu", 1), dict(os.environ)
    with worker.Pool() as pool:
        for _ in range(jobs):
            t0 = time.perf_counter()
            started = pool.start(slot, job, env, log)
            while started.poll() is None:
                time.sleep(0.005)
            if started.returncode != 0:
                raise SystemExit(f"the job failed in the warm worker: see {log}")
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10, help="jobs each way")
    ap.add_argument("--quick", action="store_true", help="3 jobs each way")
    args = ap.parse_args()
    n = 3 if args.quick else max(2, args.jobs)
    print(header("job start: a new process per job against a warm worker"))
    with tempfile.TemporaryDirectory(prefix="infiloop-job-start-") as d:
        log, job = Path(d) / "jobs.log", smoke_job(Path(d) / "runs")
        ways = {"fresh (a new process per job)": fresh(job, n, log), "warm (one worker for all)": warm(job, n, log)}
    process = MeasuredTimer().process_start("cpu").seconds
    print(f"\njob: a smoke run's evaluation read from its cache (python -m {MODULE} ...), {n} times each way, one at "
          "a time\n")
    print("| way | jobs | first job (s) | each later job, median (s) | total (s) |")
    print("|---|---|---|---|---|")
    for name, t in ways.items():
        print(f"| {name} | {n} | {t[0]:.2f} | {statistics.median(t[1:]):.3f} | {sum(t):.2f} |")
    saved = statistics.median(ways["fresh (a new process per job)"][1:]) - statistics.median(
        ways["warm (one worker for all)"][1:])
    print(f"\nper later job, a warm worker saves {saved:.2f} s; a new process's own start (imports, the device; what "
          f"plan charges a warm worker once per slot): {process:.2f} s")


if __name__ == "__main__":
    main()
