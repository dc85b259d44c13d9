"""The plan's timings of whole processes (``measure.MeasuredTimer`` reports them as ``Timing``\\ s): a new process's
own start and a job's, real jobs in real warm workers (``worker.Pool``), and the slow-down of a job beside others on
this machine's cores. Every timing runs subprocesses from the repository, each started as a job starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ... import paths
from ...io import atomic_write_text
from ..store import runs as cache

# Every timing subprocess starts as a job does (python -m infiloop and the scheduler's jobs tune glibc's allocator
# first, machine.tune_allocator): untuned, the first steps of a process page their tensors in again and again.
TUNED = "from infiloop.machine import tune_allocator; tune_allocator(); "
# The slow-down beside other jobs: windows of this many seconds, alone and together in turn, the first this many
# seconds after the processes start
CONTENTION_WINDOWS, CONTENTION_WINDOW_S, CONTENTION_LEAD_S, CONTENTION_REPEATS = 8, 0.75, 5.0, 3
WARM_ROUNDS = 2  # trainings, then evaluations, that each probed warm worker runs after its first job (timed)
_IMPORTS = TUNED + "import sys, torch; from infiloop.experiments.compute import worker; worker.import_job_modules(); "


def least_of_two(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Seconds of the faster of two runs of ``cmd`` from the repository (the first may pay for a cold disk cache),
    and the number that run printed last (its own timing of a part of it; 0 where it printed none)."""
    runs = []
    for _ in range(2):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, cwd=paths.ROOT, env=env, stdout=subprocess.PIPE, text=True).stdout
        last = out.split()[-1] if out.split() else ""
        runs.append((time.perf_counter() - t0, float(last) if last.replace(".", "", 1).isdigit() else 0.0))
    return min(runs)


@contextlib.contextmanager
def run_folder(run: cache.Run):
    """A temporary run folder holding ``run``'s configuration, and the environment that finds its data."""
    env = {**os.environ, "INFILOOP_RUNS": str(paths.RUNS), "INFILOOP_DATA": str(paths.DATA)}
    with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
        atomic_write_text(Path(d) / "config.json", json.dumps(run.config))
        yield d, env


def process_start(device: str) -> float:
    """Seconds of a new process's own start, which a warm worker (``worker.py``) pays once for all its jobs: Python,
    torch and the modules the worker imports, and the device's first tensor (a CUDA context)."""
    return least_of_two([sys.executable, "-c", _IMPORTS + "torch.empty(0, device=sys.argv[1])", device])[0]


def job_start(run: cache.Run, device: str) -> float:
    """Seconds to start a job in a new process: it imports what a job imports (as :func:`process_start`), reads the
    run's training data and builds its model on ``device`` (the least of two starts)."""
    code = (_IMPORTS + "from infiloop.experiments.store import runs; "
            "from infiloop.model.reasoner import LoopedReasoner; run = runs.load_run(sys.argv[1]); "
            "run.train_data(); LoopedReasoner(run.model_config()).to(sys.argv[2])")
    with run_folder(run) as (d, env):
        return least_of_two([sys.executable, "-c", code, d, device], env)[0]


def looplm_start(probe: dict, device: str) -> tuple[float, float]:
    """Seconds to start a looped decoder's job (``probe``: its ``Probe`` as a dictionary) in a new process (the least
    of two starts): it imports what a job imports, generates the task and builds the model; and the seconds of the
    generation and the build alone (timed inside the process: what a warm worker's job pays)."""
    code = (_IMPORTS + "import json, time; from infiloop.training import looplm as t; "
            "from infiloop.model.looplm import LoopLM; p = t.Probe.from_dict(json.loads(sys.argv[1])); "
            "t0 = time.perf_counter(); LoopLM(t.model_config(p)).to(sys.argv[2]); "
            "print(f'{time.perf_counter() - t0:.6f}')")
    return least_of_two([sys.executable, "-c", code, json.dumps(probe), device])


def warm_jobs(run: cache.Run, overrides: dict, device: str, jobs: int, threads: int, steps: int) -> dict[str, float]:
    """Real jobs in real warm workers (``worker.Pool``, the jobs of ``scheduler.job_run``), ``jobs`` at once as
    the compute stage starts and runs them, in a temporary run cache: each worker's first job, a training of ``run``
    (with ``overrides``) cut to ``steps`` steps, then ``WARM_ROUNDS`` more such trainings and ``WARM_ROUNDS``
    evaluations of one update on one puzzle. The medians of the seconds from sending each kind of job to seeing its
    answer (polled as the scheduler polls): ``first`` (the worker's start included), ``train`` and ``eval``; and
    ``stop``, the seconds to end the workers. A training's seconds include its steps and its one validation check
    (at its end), which ``plan.estimate`` takes out again."""
    from ..compute.scheduler import POLL_S, job_run, log_path
    from ..compute.slots import Slot
    from ..compute.worker import Pool, compile_shape
    from ..notebooks.manifest import Job
    from ..notebooks.needs import EvalSpec, RunSpec

    cfg = run.config
    over = {**overrides, "train.steps": steps}
    slots = [Slot(f"probe{i}", device, threads) for i in range(jobs)]
    with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d, Pool() as pool:
        def training(i: int, name: str) -> Job:
            r = cache.resolve(cfg["task"], cfg["recipe"], cfg["profile"], over, run_dir=Path(d) / f"{i}-{name}")
            return Job(f"train {r.dir.name}", "train", RunSpec(f"probe {i}", cfg["task"], cfg["recipe"], over, r))

        def together(todo: list[Job]) -> list[float]:
            started = []
            for job, slot in zip(todo, slots):
                run_, env = job_run(job, cfg["profile"], [slot])
                env.update(INFILOOP_RUNS=str(paths.RUNS), INFILOOP_DATA=str(paths.DATA))  # this process's
                t0 = time.perf_counter()
                started.append((pool.start(slot, run_, env, log_path(job), *compile_shape(job, device)), t0))
            ended = [0.0] * len(started)
            while not all(ended):
                time.sleep(POLL_S)
                for k, (warm, t0) in enumerate(started):
                    if not ended[k] and warm.poll() is not None:
                        if warm.returncode:
                            raise RuntimeError(f"the plan's probe of warm workers: a job failed; see {warm.log}")
                        ended[k] = time.perf_counter() - t0
            return ended

        first = together([training(i, "first") for i in range(jobs)])
        trains = [s for k in range(WARM_ROUNDS) for s in together([training(i, f"r{k}") for i in range(jobs)])]
        evals = []
        for _ in range(WARM_ROUNDS):
            todo = []
            for i in range(jobs):
                spec = training(i, "first").spec
                e = EvalSpec(f"probe {i}", spec, "evaluate", {"updates": 1, "every": 1, "limit": 1})
                Path(e.key).unlink(missing_ok=True)  # computed again each round
                todo.append(Job(f"eval {spec.run.dir.name}", "eval", spec, e))
            evals += together(todo)
        t0 = time.perf_counter()
        pool.close()
        stop = time.perf_counter() - t0
    return {"first": float(np.median(first)), "train": float(np.median(trains)), "eval": float(np.median(evals)),
            "stop": stop}


# One process of the slow-down's timing: it evaluates the run's model on 64 test puzzles in windows that begin at the
# same moments in every process, rank 0 in all of them and the others only in every other one.
_WINDOWS = (TUNED + "import sys, time, json, torch; torch.set_num_threads(1); "
            "from infiloop.experiments.store import runs; "
            "from infiloop.evaluation import evaluate; from infiloop.model.reasoner import LoopedReasoner; "
            "import numpy as np; run = runs.load_run(sys.argv[1]); data = run.test_data(); "
            "data = data.subset(np.arange(64) % len(data)); "
            "m = LoopedReasoner(run.model_config()).eval(); "
            "evaluate(m, data, updates=1, batch_size=64, progress=False); "
            "start, width, rank, out = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), []\n"
            "for k in range(int(sys.argv[5])):\n"
            "    if k % 2 == 0 and rank > 0: continue\n"
            "    begin = start + k * width; time.sleep(max(0.0, begin - time.time()))\n"
            "    n, t0 = 0, time.perf_counter()\n"
            "    while time.time() < begin + 0.9 * width:\n"
            "        evaluate(m, data, updates=1, batch_size=64, progress=False); n += 1\n"
            "    out.append([k % 2, (time.perf_counter() - t0) / n])\n"
            "print(json.dumps(out))")


def contention(run: cache.Run, jobs: int) -> float:
    """How much slower a job runs beside ``jobs - 1`` others on this machine's cores than alone (they share caches,
    memory bandwidth and, on a virtual machine, perhaps a physical core): ``jobs`` processes run the same evaluation
    in ``CONTENTION_WINDOWS`` windows of ``CONTENTION_WINDOW_S`` seconds that begin at the same moments in every
    process (after their imports: a short timing started whenever a process is ready would often overlap nothing),
    one process alone in every other window and all of them together in the rest, so that a machine whose speed
    drifts is timed alone and together at nearly the same moments. The ratio of the median seconds per update
    together to alone; the median of ``CONTENTION_REPEATS`` such ratios, at least 1."""
    def slow_down(d, env) -> float:
        start = time.time() + CONTENTION_LEAD_S  # every process has imported and warmed up by then
        procs = [subprocess.Popen([sys.executable, "-c", _WINDOWS, d, str(start), str(CONTENTION_WINDOW_S), str(rank),
                                   str(CONTENTION_WINDOWS)], stdout=subprocess.PIPE, text=True, cwd=paths.ROOT,
                                  env=env) for rank in range(jobs)]
        timed = []
        for pr in procs:
            out = pr.communicate()[0].strip()
            if pr.returncode or not out:
                raise RuntimeError(f"the plan's timing of the slow-down beside other jobs failed (exit status "
                                   f"{pr.returncode}; its error is above)")
            timed += json.loads(out.splitlines()[-1])
        alone = float(np.median([s for together, s in timed if not together]))
        return float(np.median([s for together, s in timed if together])) / alone

    # the median of a few such timings: a virtual machine's cores are sometimes slower together for a while
    # (a timing of 1.43x among others of 1.00-1.12x, while the stage it priced ran at about 1.03x, 2026-12-04)
    with run_folder(run) as (d, env):
        return max(1.0, float(np.median([slow_down(d, env) for _ in range(CONTENTION_REPEATS)])))
