"""The timer of the plan and its calibration cache: a few training steps and evaluation updates of every distinct
model shape timed on this device (:class:`MeasuredTimer`), cached in ``<runs>/.plan-calibration.json`` by device,
torch version and shape (:class:`Calibration`); for a CUDA device that is not here, timings from arithmetic
(:class:`FlopTimer`, the FLOPs of ``flops.py``) or a GPU's cached ones (:class:`FlopCalibration`).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import numpy as np

from ... import paths
from ...io import atomic_write_text
from ...machine import cpu_name, usable_cpus
from ..store import runs as cache
from .flops import answer_length, flops_per_step, flops_per_update, forward_blocks

CALIBRATION = ".plan-calibration.json"
TRAIN_WARM, TRAIN_TIMED = 2, 4  # training steps run before timing (allocation, compilation), then timed
EVAL_WARM, EVAL_TIMED, EVAL_REPEATS = 1, 3, 3  # evaluation updates: warm-up, then 3 timings of 3
# Every timing subprocess starts as a job does (python -m infiloop and the scheduler's jobs tune glibc's allocator
# first, machine.tune_allocator): untuned, the first steps of a process page their tensors in again and again.
_TUNED = "from infiloop.machine import tune_allocator; tune_allocator(); "
MAX_STEP_S = 1.0  # a calibration step or update longer than this is timed at a smaller batch and scaled
# One torch thread's achieved rate on a CPU, in TFLOP/s: the tiny model's training step (1.354e10 FLOPs,
# flops_per_step) took 0.50 s, and an outer update of 256 test puzzles (as many FLOPs) 0.46-0.48 s, with one thread
# (`python -m infiloop plan --profile tiny --calibrate`, 2026-11-30, a quiet 2-core VM). What a study's --list
# prices its rows by (measuring nothing); a plan measures instead.
CPU_THREAD_TFLOPS = 0.027
# Assumed speeds, only to choose the calibration batch (never part of an estimate): FLOP/s.
GUESS_FLOPS = {"cpu": 2e10, "cuda": 5e13, "mps": 1e12}
# ------------------------------------------------------------------------------------------ calibration


@dataclass
class Timing:
    seconds: float  # per training step at the run's batch, or per evaluation update of one batch
    startup: float = 0.0  # a run's extra time before its steady steps (allocation, compilation)
    measured_batch: int = 0  # the batch the timing was taken at (scaled linearly to the real one)


class Timer(Protocol):
    def train_step(self, run: cache.Run, batch: int, threads: int, device: str) -> Timing: ...

    def eval_update(self, run: cache.Run, batch: int, device: str, test_set: str = "test") -> Timing: ...

    def looplm_step(self, probe, device: str) -> Timing: ...

    def looplm_block(self, probe, device: str) -> Timing: ...


class MeasuredTimer:
    """Times ``training.train`` and ``evaluation.evaluate`` on this device (a few steps each)."""

    def train_step(self, run, batch, threads, device):
        b = _calibration_batch(flops_per_step(run.model_config(), batch), batch, device)
        per, startup = self._train(run, b, threads, device)
        if b < batch and per * 4 < MAX_STEP_S:  # the guess was cautious: once more at a larger batch
            b = min(batch, b * 4)
            per, startup = self._train(run, b, threads, device)
        return Timing(per * batch / b, startup, b)

    def _train(self, run, b, threads, device):
        import torch

        from ...training import METRICS, train

        cfg = copy.copy(run.train_config())
        cfg.batch_size, cfg.log_every, cfg.checkpoint_every = b, 1, 10**9
        cfg.steps, cfg.threads = max(cfg.steps, TRAIN_WARM + TRAIN_TIMED + 1), threads
        old = torch.get_num_threads()
        try:
            with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
                train(run.model_config(), cfg, run.train_data(), d, device, TRAIN_WARM + TRAIN_TIMED, progress=False)
                lines = [json.loads(ln) for ln in (Path(d) / METRICS).read_text().splitlines() if ln.strip()]
        finally:
            torch.set_num_threads(old)
        t = [ln["elapsed_s"] for ln in lines]
        per = max(t[-1] - t[TRAIN_WARM - 1], 1e-3) / TRAIN_TIMED
        return per, max(0.0, t[TRAIN_WARM - 1] - TRAIN_WARM * per)

    @staticmethod
    @contextlib.contextmanager
    def _run_folder(run):
        """A temporary run folder holding ``run``'s configuration, and the environment that finds its data."""
        env = {**os.environ, "INFILOOP_RUNS": str(paths.RUNS), "INFILOOP_DATA": str(paths.DATA)}
        with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
            atomic_write_text(Path(d) / "config.json", json.dumps(run.config))
            yield d, env

    def job_start(self, run, device):
        """Seconds to start a job in a new process: it imports what a job imports (as :meth:`process_start`), reads
        the run's training data and builds its model on ``device`` (the least of two starts: the first may pay for a
        cold disk cache)."""
        code = (_TUNED + "import sys, torch; from infiloop.experiments.compute import worker; "
                "worker.import_job_modules(); "
                "from infiloop.experiments.store import runs; "
                "from infiloop.model.reasoner import LoopedReasoner; run = runs.load_run(sys.argv[1]); "
                "run.train_data(); LoopedReasoner(run.model_config()).to(sys.argv[2])")
        with self._run_folder(run) as (d, env):
            return Timing(_least_of_two([sys.executable, "-c", code, d, device], env), 0.0, 0)

    def process_start(self, device):
        """Seconds of a new process's own start, which a warm worker (``worker.py``) pays once for all its jobs:
        Python, torch and the modules the worker imports, and the device's first tensor (a CUDA context)."""
        code = (_TUNED + "import sys, torch; from infiloop.experiments.compute import worker; "
                "worker.import_job_modules(); "
                "torch.empty(0, device=sys.argv[1])")
        return Timing(_least_of_two([sys.executable, "-c", code, device]), 0.0, 0)

    def contention(self, run, device, jobs):
        """How much slower a job runs beside ``jobs - 1`` others on this machine's cores than alone (they share
        caches and memory bandwidth): the same short evaluation in ``jobs`` processes at once, against one."""
        import subprocess

        code = (_TUNED + "import sys, time, torch; torch.set_num_threads(1); "
                "from infiloop.experiments.store import runs; "
                "from infiloop.evaluation import evaluate; from infiloop.model.reasoner import LoopedReasoner; "
                "import numpy as np; run = runs.load_run(sys.argv[1]); data = run.test_data(); "
                "data = data.subset(np.arange(64) % len(data)); "
                "m = LoopedReasoner(run.model_config()).eval(); evaluate(m, data, 1, 1, 64, 'cpu', progress=False); "
                "t0 = time.perf_counter(); evaluate(m, data, 12, 1, 64, 'cpu', progress=False); "
                "print(time.perf_counter() - t0)")
        with self._run_folder(run) as (d, env):
            def timed(n):
                procs = [subprocess.Popen([sys.executable, "-c", code, d], stdout=subprocess.PIPE, text=True,
                                          cwd=paths.ROOT, env=env) for _ in range(n)]
                return [float(pr.communicate()[0].split()[-1]) for pr in procs]

            alone = min(timed(1)[0], timed(1)[0])
            together = float(np.median(timed(jobs)))
        return Timing(max(1.0, together / alone), 0.0, 0)

    def eval_update(self, run, batch, device, test_set="test"):
        from ...evaluation import evaluate
        from ...model.reasoner import LoopedReasoner

        cfg = _test_set_config(run, test_set)
        b = _calibration_batch(flops_per_update(cfg, batch), batch, device)
        data = run.test_data(test_set)
        data = data.subset(np.arange(b) % len(data))
        model = LoopedReasoner(cfg).to(device).eval()
        evaluate(model, data, EVAL_WARM, 1, b, device, progress=False)
        times = []
        for _ in range(EVAL_REPEATS):  # the median of a few short timings: robust to a busy machine
            t0 = time.perf_counter()
            evaluate(model, data, EVAL_TIMED, 1, b, device, progress=False)
            _sync(device)
            times.append((time.perf_counter() - t0) / EVAL_TIMED)
        return Timing(float(np.median(times)) * batch / b, 0.0, b)


    def looplm_step(self, probe, device):
        """Seconds of one training step of the probe's model at its batch (``TRAIN_WARM`` steps first)."""
        from dataclasses import replace

        from ...model.looplm import LoopLM
        from ...training_looplm import data_of, model_config, train

        data = data_of(probe)
        model = LoopLM(model_config(probe, data)).to(device)
        train(model, data.train, replace(probe.train, steps=TRAIN_WARM))
        per = train(model, data.train, replace(probe.train, steps=TRAIN_TIMED))["seconds"] / TRAIN_TIMED
        return Timing(per, 0.0, probe.train.batch_size)

    def looplm_block(self, probe, device):
        """Seconds per token-block of the evaluation forward (``correct`` on a batch of the deepest test split at
        the probe's loops, :func:`flops.forward_blocks`), the median of ``EVAL_REPEATS`` timings."""
        from ...model.looplm import LoopLM
        from ...tasks.language import Split
        from ...training_looplm import correct, data_of, model_config

        data = data_of(probe)
        cfg = model_config(probe, data)
        model = LoopLM(cfg).to(device)
        split = data.test[max(data.test)]
        n = min(len(split), probe.train.eval_batch)
        part, loops = Split(split.tokens[:n], split.answer[:n], split.depth[:n]), probe.budgets()
        correct(model, part, loops[:1], n)
        times = []
        for _ in range(EVAL_REPEATS):
            t0 = time.perf_counter()
            correct(model, part, loops, n)
            _sync(device)
            times.append(time.perf_counter() - t0)
        blocks = forward_blocks(cfg, n, answer_length(part), loops)
        return Timing(float(np.median(times)) / blocks, 0.0, probe.train.eval_batch)

    def looplm_start(self, probe, device):
        """Seconds to start a looped decoder's job in a new process: it imports it, generates the task and builds the
        model (the least of two starts)."""
        from dataclasses import asdict

        code = (_TUNED + "import sys, json, torch; from infiloop.experiments import looplm; "
                "from infiloop.experiments.compute import scheduler; from infiloop import training_looplm as t; "
                "from infiloop.model.looplm import LoopLM; p = t.Probe.from_dict(json.loads(sys.argv[1])); "
                "LoopLM(t.model_config(p)).to(sys.argv[2])")
        return Timing(_least_of_two([sys.executable, "-c", code, json.dumps(asdict(probe)), device]), 0.0, 0)


def _least_of_two(cmd: list[str], env: dict | None = None) -> float:
    """Seconds of the faster of two runs of ``cmd`` from the repository (the first may pay for a cold disk cache)."""
    import subprocess

    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=paths.ROOT, env=env)
        times.append(time.perf_counter() - t0)
    return min(times)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _calibration_batch(flops_full: float, batch: int, device: str) -> int:
    """The largest batch (a power-of-4 fraction of ``batch``) whose step the guessed speed puts under a second."""
    guess = GUESS_FLOPS.get(device.split(":")[0], GUESS_FLOPS["cpu"])
    b = batch
    while b > 1 and flops_full * b / batch / guess > MAX_STEP_S:
        b = max(1, b // 4)
    return b


def device_name(device: str) -> str:
    """What the timings belong to: the CPU model and count, or the GPU's name."""
    if device.startswith("cuda"):
        import torch

        return f"{torch.cuda.get_device_name(torch.device(device))} ({device})"
    return f"{cpu_name()} ({device})"


def _shape(run: cache.Run, test_set: str = "test") -> dict:
    """The model settings that change its cost (not initial values such as beta, nor the seed), on the grid
    ``test_set`` runs it at."""
    m = copy.deepcopy(run.config["model"])
    if test_set != "test":
        cfg = _test_set_config(run, test_set)
        m["grid"], m["seq_len"] = list(cfg.grid), cfg.seq_len
    for axis in ("inner", "outer"):
        m[axis].pop("beta", None)
        m[axis].pop("decay", None)
    m["cond"].pop("horizon", None)
    return m


def _test_set_config(run: cache.Run, test_set: str):
    """The model configuration an evaluation on ``test_set`` runs (a named test set at another size runs the same
    weights on its own grid, ``LoopedReasoner.resized``)."""
    from ...tasks.extrapolation import size_set_grid

    cfg = run.model_config()
    grid = size_set_grid(run.config["task"], test_set)
    return cfg if grid is None else cfg.at_grid(grid)


def _load() -> float | None:
    """The 1-minute load average when a timing is taken (a busy machine makes every timing slower)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class Calibration:
    """Timings by device and shape, cached in ``<runs>/.plan-calibration.json``."""

    def __init__(self, device: str, timer: Timer | None = None, fresh: bool = False, path: Path | None = None):
        import torch

        self.device, self.timer = device, timer or MeasuredTimer()
        self.path = path or paths.RUNS / CALIBRATION
        self.prefix = f"{device_name(device)} | torch {torch.__version__}"
        self.entries = self._load()  # other devices' and shapes' timings are kept when saving
        self.fresh, self.refreshed = fresh, set()  # fresh: measure every timing this plan needs again
        self.measured = 0
        self.seconds = 0.0
        self.used: list[dict] = []  # the entries this plan's estimate uses

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data.get("entries", {}) if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _get(self, kind: str, shape: dict, measure) -> Timing:
        key = f"{self.prefix} | {kind} | {_key(shape)}"
        if key not in self.entries or (self.fresh and key not in self.refreshed):
            self.refreshed.add(key)
            t0 = time.perf_counter()
            timing = measure()
            self.seconds += time.perf_counter() - t0
            self.measured += 1
            self.entries[key] = {"seconds": timing.seconds, "startup": timing.startup,
                                 "measured_batch": timing.measured_batch, "shape": shape,
                                 "measured": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "load_average": _load()}
        e = self.entries[key]
        self.used.append(e)
        return Timing(e["seconds"], e["startup"], e["measured_batch"])

    def train_step(self, run, batch: int, threads: int) -> Timing:
        cfg = run.config["train"]
        shape = {"model": _shape(run), "batch": batch, "threads": threads, "precision": cfg["precision"],
                 "compile": cfg["compile"]}
        return self._get("train", shape, lambda: self.timer.train_step(run, batch, threads, self.device))

    def eval_update(self, run, batch: int, threads: int = 0, test_set: str = "test") -> Timing:
        """Timed with ``threads`` torch threads (0: as they are), as the scheduler's slot will run it, on ``test_set``
        (a named test set at another size runs on its own grid)."""
        import torch

        shape = {"model": _shape(run, test_set), "batch": batch, **({"threads": threads} if threads else {})}

        def measure():
            old = torch.get_num_threads()
            torch.set_num_threads(threads or old)
            try:
                return self.timer.eval_update(run, batch, self.device, test_set)
            finally:
                torch.set_num_threads(old)

        return self._get("eval", shape, measure)

    def _looplm(self, kind: str, probe, threads: int, measure) -> Timing:
        """A looped decoder's timing, with ``threads`` torch threads (0: as they are), keyed by what sets its cost:
        the model, the task's shape and the batch (not the training seed)."""
        from dataclasses import asdict

        import torch

        task = {k: v for k, v in asdict(probe.task).items() if k != "seed"}
        shape = {"looplm": probe.model.to_dict(), "task": task, "batch": probe.train.batch_size,
                 "loops": probe.budgets(), **({"threads": threads} if threads else {})}

        def timed():
            old = torch.get_num_threads()
            torch.set_num_threads(threads or old)
            try:
                return measure(probe, self.device)
            finally:
                torch.set_num_threads(old)

        return self._get(kind, shape, timed)

    def looplm_step(self, probe, threads: int = 0) -> Timing:
        return self._looplm("looplm train", probe, threads, self.timer.looplm_step)

    def looplm_block(self, probe, threads: int = 0) -> Timing:
        return self._looplm("looplm eval", probe, threads, self.timer.looplm_block)

    def looplm_start(self, probe) -> float:
        """Seconds a looped decoder's job pays before its work (0 with a timer that does not measure it)."""
        if not hasattr(self.timer, "looplm_start"):
            return 0.0
        return self._get("looplm start", {"python": sys.executable},
                         lambda: self.timer.looplm_start(probe, self.device)).seconds

    def job_start(self, run) -> float:
        """Seconds a job pays before its work on this device (0 with a timer that does not measure it)."""
        if not hasattr(self.timer, "job_start"):
            return 0.0
        return self._get("job start", {"python": sys.executable},
                         lambda: self.timer.job_start(run, self.device)).seconds

    def process_start(self) -> float:
        """Seconds of a new process's own start on this device, of :meth:`job_start` (0 with a timer that does not
        measure it): what a warm worker pays once, and a new process per job pays for every job."""
        if not hasattr(self.timer, "process_start"):
            return 0.0
        return self._get("process start", {"python": sys.executable},
                         lambda: self.timer.process_start(self.device)).seconds

    def contention(self, run, jobs: int) -> float:
        """The slow-down of a CPU job beside ``jobs - 1`` others (1 with one job, on a GPU, or with a timer that
        does not measure it)."""
        if jobs <= 1 or self.device != "cpu" or not hasattr(self.timer, "contention"):
            return 1.0
        return self._get("contention", {"model": _shape(run), "jobs": jobs},
                         lambda: self.timer.contention(run, self.device, jobs)).seconds

    @property
    def where(self) -> str:
        """The device the timings belong to, in words."""
        return self.prefix.split(" | ")[0]

    def describe(self) -> str:
        """Where this plan's timings come from: measured now or cached, at what load average."""
        how = (f"{self.measured} timings measured now in {self.seconds:.0f} s" if self.measured
               else "all timings from the cache")
        loads = [e.get("load_average") for e in self.used if e.get("load_average") is not None]
        if loads:
            how += (f", at a load average of {min(loads):.1f} to {max(loads):.1f} on {usable_cpus()} CPUs "
                    f"(other work on the machine slows every timing, and so the estimate)")
        return f"calibration: {how} ({self.path}; --calibrate measures again)"

    def save(self) -> None:
        note = ("plan calibration: seconds per training step (at the run's batch) and per evaluation update "
                "(of one batch), by device, torch version and model shape; delete or use --calibrate to measure "
                "again")
        atomic_write_text(self.path, json.dumps({"note": note, "entries": self.entries}, indent=1, sort_keys=True))
