"""The plan's calibration cache (:class:`Calibration`): each timing of a model shape on a device, measured once by
its timer (``measure.MeasuredTimer`` by default) and kept in ``<runs>/.plan-calibration.json`` by device, torch
version and shape; :func:`device_name` names what the timings belong to. A CUDA device that is not here is priced by
``arithmetic.FlopCalibration`` instead.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from ... import paths
from ...io import atomic_write_text
from ...machine import cpu_name, usable_cpus
from ..store import runs as cache
from .measure import MeasuredTimer
from .timer import Timer, Timing, test_set_config

CALIBRATION = ".plan-calibration.json"


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
        cfg = test_set_config(run, test_set)
        m["grid"], m["seq_len"] = list(cfg.grid), cfg.seq_len
    for axis in ("inner", "outer"):
        m[axis].pop("beta", None)
        m[axis].pop("decay", None)
    m["cond"].pop("horizon", None)
    return m


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
