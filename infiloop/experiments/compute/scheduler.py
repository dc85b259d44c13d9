"""Run the experiment plan's jobs (infiloop/experiments/notebooks/manifest.py) on every core or GPU of this machine.

- **Slots.** On CPU, ``workers`` processes with ``threads`` torch threads each (default: one single-
  threaded worker per core, the faster split on this project's workloads by ``benchmarks/workers.py``).
  On CUDA, ``per_gpu`` slots per visible device (``slots.jobs_per_gpu``: one for a profile made for the GPU,
  several small jobs side by side for a profile made for the CPU); a job sees only its device
  (``CUDA_VISIBLE_DEVICES``), and never more jobs share one than it has slots. A training run that asks
  for ``gpus > 1`` takes a free slot on that many distinct devices and is launched with ``torchrun``
  (one process per device, DDP).
- **Order.** A job starts when the jobs it waits for have finished (an evaluation waits for its run's
  training); among ready jobs the costliest goes first (longest-processing-time order keeps the tail of
  the stage short). A job whose prerequisite failed is not started.
- **Processes.** Each slot runs its jobs one after another in a warm worker (``worker.py``: one Python process per
  slot that imports torch once, each job run as a new process would run it, with the same results); a job that kills
  its worker fails alone and the slot gets a new one. ``fresh_process=True`` (``reproduce --executor process``) starts
  a new process per job instead (``job.JobRun.command``), as a multi-GPU training always is. Every job's environment
  points Inductor's cache (``TORCHINDUCTOR_CACHE_DIR``) into the run cache (``paths.inductor_cache``), unless it is
  set.
- **Logs.** Each job writes its output to ``<run folder>/logs/<job>.log``; one progress line covers the
  whole stage (jobs done / total, time left from the jobs' estimated costs, and what the running trainings'
  own progress lines say: :func:`stage_line`).

The slots themselves, and the wall time of this order (``simulate``), are ``slots.py``'s; one job as it runs,
``job.py``'s.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ... import paths
from ...machine import progress_bar
from ...training import PROGRESS_RE
from ..notebooks.manifest import Job
from .job import JobRun
from .slots import Slot, check_gpus_per_run, take_slots
from .worker import Pool, compile_shape

# ------------------------------------------------------------------------------------------ commands


def job_name(job: Job) -> str:
    """A file name for the job's log: ``train``, ``eval-<cache file stem>`` or ``looplm``."""
    if job.kind in ("train", "looplm"):
        return job.kind
    return "eval-" + re.sub(r"[^A-Za-z0-9_.-]", "_", Path(job.eval.key).stem)


def log_path(job: Job) -> Path:
    return job.log_dir / f"{job_name(job)}.log"


def job_run(job: Job, profile: str, slots: list[Slot]) -> tuple[JobRun, dict]:
    """``job`` as it runs on ``slots`` (several only for a multi-GPU training), and its environment."""
    env = dict(os.environ)
    # torch.compile's kernels kept in the run cache: a later job, and a later run, compiles a graph once
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(paths.inductor_cache()))
    if slots[0].gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(s.gpu for s in slots)
    return JobRun.of(job, profile, slots[0].device, slots[0].threads), env


def command(job: Job, profile: str, slots: list[Slot]) -> tuple[list[str], dict]:
    """The command line and environment that run ``job`` on ``slots`` as a new process (``torchrun`` on several)."""
    run, env = job_run(job, profile, slots)
    return run.command(len(slots)), env


def _popen(cmd: list[str], env: dict, log: Path):
    """Start ``cmd`` with its output appended to ``log`` after a header line: another pipeline on the same run
    cache may run the same job (it then waits for the run's lock) and must not overwrite this one's log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {shlex.join(cmd)}\n")
        f.flush()
        return subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)


# ------------------------------------------------------------------------------------------ the stage


@dataclass
class Report:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # a prerequisite failed
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # wall time x slots per job
    seconds: float = 0.0


def last_progress(log: Path, tail_bytes: int = 8192) -> re.Match | None:
    """The last progress line (``training.PROGRESS_LINE``) a training job wrote into its log, parsed; None before
    its first (only the end of the log is read)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = list(PROGRESS_RE.finditer(text))
    return found[-1] if found else None


def share_done(log: Path) -> float:
    """The share of its steps a running training says it has done in its last progress line (0 before the first)."""
    m = last_progress(log)
    return min(1.0, int(m["step"]) / max(1, int(m["end"]))) if m else 0.0


def stage_line(finished: int, total: int, running: int, training_logs: list[Path]) -> str:
    """The compute stage's progress line: jobs finished of all, jobs running, and the sum of the minutes the
    running trainings say they have left in their last progress lines (with the longest of them)."""
    line = f"jobs {finished}/{total} ({running} running)"
    found = [m for m in map(last_progress, training_logs) if m is not None]
    if found:
        left = [int(m["min_left"]) for m in found]
        line += f"; {len(found)} training(s) report {sum(left)} min of steps left (longest {max(left)} min)"
    return line


def _start(job: Job, profile: str, mine: list[Slot], launch, pool):
    """Start ``job`` on slots ``mine``: in the slot's warm worker (``worker.py``) where there is a pool and the job
    runs on one slot, else as a new process (``launch``: multi-GPU trainings, ``fresh_process``)."""
    run, env = job_run(job, profile, mine)
    if pool is not None and len(mine) == 1:
        compiles, shape = compile_shape(job, mine[0].device)
        return pool.start(mine[0], run, env, log_path(job), compiles, shape)
    return launch(run.command(len(mine)), env, log_path(job))


def _finish(report: Report, finished: set, jid: str, job: Job, proc, started: float, slots: int) -> None:
    """Record a job that has ended: done, or failed with the path of its log."""
    report.cpu_seconds[jid] = (time.time() - started) * slots
    if proc.returncode == 0:
        report.done.append(jid)
        finished.add(jid)
    else:
        report.failed.append(jid)
        print(f"[scheduler] FAILED {jid}: see {log_path(job)}", file=sys.stderr, flush=True)


# How often the stage looks for ended jobs (at 2 a second a slot waited 0.25 s on average after each job: 9 of the
# 38 s of smoke's compute stage, 2026-12-04); the plan's probe of warm workers polls as often (``cost/processes.py``).
POLL_S = 0.05


def run_jobs(jobs: list[Job], profile: str, slots: list[Slot], cost: Callable[[Job], float] | None = None,
             gpus_per_run: int = 1, launch=_popen, poll: float = POLL_S, progress: bool = True,
             fresh_process: bool = False, pool: Pool | None = None) -> Report:
    """Run every job not yet done, as many at a time as there are slots; see the module docstring. Jobs run in warm
    workers (``worker.py``; ``pool``, default a new one closed at the end) unless ``fresh_process``: each a new
    process started by ``launch``, as multi-GPU trainings always are."""
    with contextlib.ExitStack() as stack:
        if not fresh_process and pool is None:
            pool = stack.enter_context(Pool())
        return _run(jobs, profile, slots, cost, gpus_per_run, launch, poll, progress,
                    None if fresh_process else pool)


def _run(jobs, profile, slots, cost, gpus_per_run, launch, poll, progress, pool) -> Report:
    """:func:`run_jobs`'s loop (``pool``: the warm workers, None for a new process per job)."""
    tqdm = progress_bar()
    check_gpus_per_run(slots, gpus_per_run)
    todo = {j.id: j for j in jobs if not j.done}
    # once per job: a cost may read the job's data, and the loop below polls 20 times a second (POLL_S)
    costs = {jid: (cost(j) if cost else 1.0) for jid, j in todo.items()}
    finished = {j.id for j in jobs if j.done}
    report, free, running = Report(), list(slots), {}
    total = sum(costs.values())
    bar = tqdm(total=total, disable=not progress, unit="s", unit_scale=True, dynamic_ncols=True,
               bar_format="{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]")
    n_jobs, ended = len(todo), 0.0  # ended: the costs of the jobs that have ended

    def describe():  # the bar counts each running training's share of its steps: a time left before any job ends
        trains = [j for *_, j in running.values() if j.kind == "train"] if progress else []
        bar.set_description(stage_line(len(report.done) + len(report.failed) + len(report.skipped), n_jobs,
                                       len(running), [log_path(j) for j in trains]), refresh=False)
        bar.n = min(total, ended + sum(costs[j.id] * share_done(log_path(j)) for j in trains))
        bar.refresh()

    t0 = last_read = time.time()
    describe()
    while todo or running:
        # a job whose prerequisite failed or was skipped never starts
        for j in [j for j in todo.values() if any(a in report.failed or a in report.skipped for a in j.after)]:
            report.skipped.append(todo.pop(j.id).id)
            ended += costs[j.id]
        ready = sorted((j for j in todo.values() if all(a in finished for a in j.after)), key=lambda j: costs[j.id],
                       reverse=True)
        for j in ready:
            need = gpus_per_run if (j.kind == "train" and free and free[0].gpu is not None) else 1
            taken = take_slots(free, need)
            if taken is None:
                continue
            mine, free = taken
            running[j.id] = (_start(j, profile, mine, launch, pool), mine, time.time(), todo.pop(j.id))
            describe()
        if not running:
            if todo:  # nothing can start: prerequisites outside this list
                for j in list(todo.values()):
                    report.skipped.append(todo.pop(j.id).id)
            break
        time.sleep(poll)
        if progress and time.time() - last_read >= 10:  # the trainings' own progress lines, every 10 s
            last_read = time.time()
            describe()
        for jid, (proc, mine, started, j) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[jid]
            free = free + mine
            _finish(report, finished, jid, j, proc, started, len(mine))
            ended += costs[j.id]
            describe()
    bar.close()
    report.seconds = time.time() - t0
    return report


def run_planned(jobs: list[Job], workers: int, progress: bool = True, fresh_process: bool = False,
                estimate: Callable[[list[Job], int], dict[str, float]] | None = None) -> Report:
    """Run jobs declared outside the notebooks (a study's) on ``workers`` CPU slots of one thread each, the costliest
    ready job first by ``estimate`` (the caller's: the seconds by id of the jobs not done, on so many slots; without
    progress, in the given order), in warm workers unless ``fresh_process``."""
    from .slots import cpu_slots

    slots = cpu_slots(workers=max(1, workers), threads=1)
    costs = estimate([j for j in jobs if not j.done], len(slots)) if progress and estimate else {}
    return run_jobs(jobs, "", slots, cost=(lambda j: costs.get(j.id, 0.0)) if costs else None, progress=progress,
                    fresh_process=fresh_process)
