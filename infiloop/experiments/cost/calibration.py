"""The timer of the plan and its calibration cache: a few training steps and evaluation updates of every distinct
model shape timed on this device (:class:`MeasuredTimer`), cached in ``<runs>/.plan-calibration.json`` by device,
torch version and shape (:class:`Calibration`); for a CUDA device that is not here, timings from arithmetic
(:class:`FlopTimer`, the FLOPs of ``flops.py``) or a GPU's cached ones (:class:`FlopCalibration`). The timings of
whole processes (a job's start, warm workers, the slow-down beside other jobs) are ``processes.py``'s.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
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
from . import processes
from .flops import answer_length, flops_per_step, flops_per_update, forward_blocks

CALIBRATION = ".plan-calibration.json"
TRAIN_WARM, TRAIN_TIMED = 2, 4  # training steps run before timing (allocation, compilation), then timed
EVAL_WARM, EVAL_TIMED, EVAL_REPEATS = 1, 3, 3  # evaluation updates: warm-up, then 3 timings of (at least) 4 and 3 of 1
# Steps too short to time a few are timed by as many as take 1.5 s (one timing: at 7 steps of quick's 0.045 s, the
# shapes' timings ranged over +-15 % on a quiet machine, 2026-12-04), at most MOST_TIMED; an evaluation's updates by
# as many as take 0.3 s (the median of three timings)
TRAIN_MIN_TIMED_S, MOST_TIMED = 1.5, 120
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
        elif per * TRAIN_TIMED < TRAIN_MIN_TIMED_S:  # steps too short to time a few: once more with more of them
            per, startup = self._train(run, b, threads, device, _enough(per, TRAIN_TIMED, TRAIN_MIN_TIMED_S))
        return Timing(per * batch / b, startup, b)

    def _train(self, run, b, threads, device, timed=TRAIN_TIMED):
        import torch

        from ...training import METRICS, train

        cfg = copy.copy(run.train_config())
        cfg.batch_size, cfg.log_every, cfg.checkpoint_every = b, 1, 10**9
        cfg.steps, cfg.threads = max(cfg.steps, TRAIN_WARM + timed + 1), threads
        old = torch.get_num_threads()
        try:
            with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
                train(run.model_config(), cfg, run.train_data(), d, device, TRAIN_WARM + timed, progress=False)
                lines = [json.loads(ln) for ln in (Path(d) / METRICS).read_text().splitlines() if ln.strip()]
        finally:
            torch.set_num_threads(old)
        t = [ln["elapsed_s"] for ln in lines]
        per = max(t[-1] - t[TRAIN_WARM - 1], 1e-3) / timed
        return per, max(0.0, t[TRAIN_WARM - 1] - TRAIN_WARM * per)

    def job_start(self, run, device):
        """Seconds to start a job in a new process (``processes.job_start``)."""
        return Timing(processes.job_start(run, device), 0.0, 0)

    def process_start(self, device):
        """Seconds of a new process's own start (``processes.process_start``)."""
        return Timing(processes.process_start(device), 0.0, 0)

    def warm_jobs(self, run, overrides, device, jobs, threads):
        """Real jobs in real warm workers, each training ``TRAIN_WARM`` steps (``processes.warm_jobs``)."""
        timed = processes.warm_jobs(run, overrides, device, jobs, threads, TRAIN_WARM)
        return {kind: Timing(s, 0.0, 0) for kind, s in timed.items()}

    def contention(self, run, device, jobs):
        """The slow-down of a CPU job beside ``jobs - 1`` others (``processes.contention``)."""
        return Timing(processes.contention(run, jobs), 0.0, 0)

    def eval_update(self, run, batch, device, test_set="test"):
        from ...evaluation import evaluate
        from ...model.reasoner import LoopedReasoner

        cfg = _test_set_config(run, test_set)
        b = _calibration_batch(flops_per_update(cfg, batch), batch, device)
        data = run.test_data(test_set)
        data = data.subset(np.arange(b) % len(data))
        model = LoopedReasoner(cfg).to(device).eval()
        evaluate(model, data, updates=EVAL_WARM, every=1, batch_size=b, device=device, progress=False)

        def timed(updates: int) -> float:
            t0 = time.perf_counter()
            evaluate(model, data, updates=updates, every=1, batch_size=b, device=device, progress=False)
            _sync(device)
            return time.perf_counter() - t0

        # an update's own cost: the call's fixed part (its batches set up, its result gathered) cancels in the
        # difference of a long and a short call (a job's is in its bookkeeping, planning.Plan.eval_start), the long
        # one long enough to time; the medians of a few timings each: robust to a busy machine
        n = _enough(timed(2) - timed(1), EVAL_TIMED, 0.3)
        long = float(np.median([timed(n + 1) for _ in range(EVAL_REPEATS)]))
        short = float(np.median([timed(1) for _ in range(EVAL_REPEATS)]))
        per = max(long - short, 1e-6) / n
        return Timing(per * batch / b, 0.0, b)


    def looplm_step(self, probe, device):
        """Seconds of one training step of the probe's model at its batch (``TRAIN_WARM`` steps first)."""
        from dataclasses import replace

        from ...model.looplm import LoopLM
        from ...training.looplm import data_of, model_config, train

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
        from ...training.looplm import correct, data_of, model_config

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
        """Seconds to start a looped decoder's job in a new process, with (``startup``) the seconds of its task's
        generation and its model's build (``processes.looplm_start``)."""
        from dataclasses import asdict

        return Timing(*processes.looplm_start(asdict(probe), device), 0)


def _enough(per: float, least: int, seconds: float = 0.3) -> int:
    """How many steps or updates of ``per`` seconds each take ``seconds`` together (``least`` at the least, at
    most ``MOST_TIMED``): fewer, and the timing's own resolution and the machine's jitter would be a large part."""
    return int(min(MOST_TIMED, max(least, math.ceil(seconds / max(per, 1e-4)))))


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

    def looplm_start(self, probe) -> Timing:
        """Seconds a looped decoder's job pays before its work in a new process, with (``startup``) the part a warm
        worker's job pays: the task's generation and the model's build (0 with a timer that does not measure it)."""
        if not hasattr(self.timer, "looplm_start"):
            return Timing(0.0)
        from dataclasses import asdict

        # by the task it generates (not its seed); "imports" marks the timing that imports what a job imports
        task = {k: v for k, v in asdict(probe.task).items() if k != "seed"}
        return self._get("looplm start", {"python": sys.executable, "task": task, "imports": "jobs"},
                         lambda: self.timer.looplm_start(probe, self.device))

    def job_start(self, run) -> float:
        """Seconds a job pays before its work on this device (0 with a timer that does not measure it)."""
        if not hasattr(self.timer, "job_start"):
            return 0.0
        data = [run.config["task"], run.config["data_profile"], run.config["data_overrides"]]  # the data it reads
        return self._get("job start", {"python": sys.executable, "data": data, "model": _shape(run)},
                         lambda: self.timer.job_start(run, self.device)).seconds

    def process_start(self) -> float:
        """Seconds of a new process's own start on this device, of :meth:`job_start` (0 with a timer that does not
        measure it): what a warm worker pays once, and a new process per job pays for every job."""
        if not hasattr(self.timer, "process_start"):
            return 0.0
        return self._get("process start", {"python": sys.executable},
                         lambda: self.timer.process_start(self.device)).seconds

    def warm_jobs(self, run, overrides: dict, jobs: int, threads: int) -> dict[str, float] | None:
        """Seconds of real jobs in ``jobs`` warm workers at once with ``threads`` threads each
        (:meth:`MeasuredTimer.warm_jobs`: ``first``, ``train``, ``eval``, ``stop``), measured together and cached
        apart; None with a timer that does not measure them."""
        if not hasattr(self.timer, "warm_jobs"):
            return None
        shape = {"model": _shape(run), "batch": run.config["train"]["batch_size"], "jobs": jobs, "threads": threads,
                 "python": sys.executable}
        measured: dict[str, Timing] = {}

        def measure(kind: str) -> Timing:
            if not measured:
                measured.update(self.timer.warm_jobs(run, overrides, self.device, jobs, threads))
            return measured[kind]

        return {kind: self._get(f"warm {kind}", shape, lambda kind=kind: measure(kind)).seconds
                for kind in ("first", "train", "eval", "stop")}

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
