"""The plan's timings from arithmetic rather than measurement: a job's FLOPs (``flops.py``) at an achieved rate
(:class:`FlopTimer`: a GPU's assumed one, ``flops.ASSUMED_GPU_TFLOPS``, or one CPU thread's measured one,
:data:`CPU_THREAD_TFLOPS`), and the calibration a plan for a CUDA device uses where it has not measured that GPU
(:class:`FlopCalibration`)."""

from __future__ import annotations

from pathlib import Path

from ... import paths
from .calibration import CALIBRATION, Calibration, _key
from .flops import ASSUMED_GPU_TFLOPS, PRECISION_SHARE, flops_per_step, flops_per_update, looplm_counts
from .timer import Timing, test_set_config

# One torch thread's achieved rate on a CPU, in TFLOP/s: the tiny model's training step (1.354e10 FLOPs,
# flops_per_step) took 0.50 s, and an outer update of 256 test puzzles (as many FLOPs) 0.46-0.48 s, with one thread
# (`python -m infiloop plan --profile tiny --calibrate`, 2026-11-30, a quiet 2-core VM). What a study's --list
# prices its rows by (measuring nothing); a plan measures instead.
CPU_THREAD_TFLOPS = 0.027


class FlopTimer:
    """Timings from arithmetic, not measurement: a step's or an update's FLOPs (:func:`flops_per_step`,
    :func:`flops_per_update`, :func:`looplm_flops`) at ``tflops`` TFLOP/s achieved, on a CUDA device in bf16: a job
    in float32 (the looped decoders, a training with ``precision: fp32``) at that rate's float32 share
    (:meth:`rate`). What a plan for a CUDA device prices its jobs by where there is none (no job start, no slow-down
    beside other jobs)."""

    def __init__(self, tflops: float = ASSUMED_GPU_TFLOPS):
        self.flop_per_s = tflops * 1e12

    def seconds(self, flops: float) -> float:
        """Seconds of ``flops`` FLOPs at this timer's rate (a job's, from ``flops.py``)."""
        return flops / self.flop_per_s

    def rate(self, device, precision: str = "bf16") -> float:
        """FLOP/s at ``precision`` on ``device``: on a CUDA device the rate's share at that precision
        (``flops.PRECISION_SHARE``, the rate being bf16's); elsewhere the rate itself (a CPU's is float32's)."""
        on_cuda = str(device).startswith("cuda")
        return self.flop_per_s * (PRECISION_SHARE["bf16" if precision == "auto" else precision] if on_cuda else 1.0)

    def train_step(self, run, batch, threads, device):
        rate = self.rate(device, run.train_config().precision)
        return Timing(flops_per_step(run.model_config(), batch) / rate, 0.0, batch)

    def eval_update(self, run, batch, device, test_set="test"):
        return Timing(flops_per_update(test_set_config(run, test_set), batch) / self.flop_per_s, 0.0, batch)

    @staticmethod
    def _looplm(probe) -> tuple[float, float]:
        """A looped decoder's (token-blocks of one training step, FLOPs of one token-block), from
        :func:`looplm_flops`: its steps count 3 x their forward blocks (forward and backward)."""
        w = looplm_counts(probe)
        return w["step"], w["flops"] / (3 * probe.train.steps * w["step"] + w["eval"])

    def looplm_step(self, probe, device):  # a looped decoder computes in float32 (flops.job_precision)
        blocks, per_block = self._looplm(probe)
        return Timing(3 * blocks * per_block / self.rate(device, "fp32"), 0.0, probe.train.batch_size)

    def looplm_block(self, probe, device):
        return Timing(self._looplm(probe)[1] / self.rate(device, "fp32"), 0.0, probe.train.eval_batch)


class FlopCalibration(Calibration):
    """The timings of a CUDA GPU that is not here: where the calibration file holds a timing of this shape measured
    on a CUDA GPU (``gpu``, as ``device_name`` names it, e.g. ``"NVIDIA H200 (cuda)"``; by default the GPU measured
    last, with any torch version), that timing; otherwise the arithmetic of :class:`FlopTimer` at ``tflops``.
    Measures nothing and writes nothing."""

    def __init__(self, tflops: float = ASSUMED_GPU_TFLOPS, gpu: str | None = None, path: Path | None = None):
        self.device, self.timer, self.tflops = "cuda", FlopTimer(tflops), tflops
        self.path = path or paths.RUNS / CALIBRATION
        self.entries = self._load()
        self.fresh, self.refreshed, self.measured, self.seconds, self.used = False, set(), 0, 0.0, []
        self.gpu = gpu or self._last_gpu()
        self.from_gpu, self.estimated = 0, 0
        self.prefix = (f"a CUDA GPU ({self.gpu}'s cached timings, else FLOPs at {tflops:g} TFLOP/s)" if self.gpu
                       else f"a CUDA GPU (FLOPs at {tflops:g} TFLOP/s)")

    def _last_gpu(self) -> str | None:
        """The CUDA device whose timing was measured last in the calibration file, or None."""
        measured = [(e.get("measured", ""), key.split(" | ")[0]) for key, e in self.entries.items()
                    if "(cuda" in key.split(" | ")[0] and isinstance(e, dict)]
        return max(measured)[1] if measured else None

    def _gpu_entry(self, kind: str, shape: dict) -> dict | None:
        """The newest timing of ``kind`` at ``shape`` measured on :attr:`gpu` (any torch version), or None."""
        if not self.gpu:
            return None
        tail = f" | {kind} | {_key(shape)}"
        found = [e for key, e in self.entries.items() if key.startswith(f"{self.gpu} | ") and key.endswith(tail)]
        return max(found, key=lambda e: e.get("measured", "")) if found else None

    def _get(self, kind: str, shape: dict, measure) -> Timing:
        entry = self._gpu_entry(kind, shape)
        if entry is not None:
            self.from_gpu += 1
            self.used.append(entry)
            return Timing(entry["seconds"], entry.get("startup", 0.0), entry.get("measured_batch", 0))
        self.estimated += 1
        return measure()

    @property
    def where(self) -> str:
        return f"a CUDA GPU ({self.gpu})" if self.from_gpu else "a CUDA GPU (a FLOP estimate)"

    def basis(self) -> str:
        """In a few words, what the prices rest on: the FLOP arithmetic, the cached timings of a GPU, or both."""
        flops = f"FLOPs at {self.tflops:g} TFLOP/s achieved"
        if not self.from_gpu:
            return f"a FLOP estimate: {flops}"
        if not self.estimated:
            return f"{self.gpu}'s timings, measured by `plan`"
        return f"{self.from_gpu} timings measured on {self.gpu} by `plan`, {self.estimated} of them {flops}"

    def describe(self) -> str:
        return (f"timings: not measured: {self.basis()} (--tflops; an estimate: small models, "
                f"as the looped decoders, reach far less); a GPU's timings replace the FLOPs where {self.path} holds "
                f"them (python -m infiloop plan --device cuda on the GPU measures them)")

    def save(self) -> None:  # nothing was measured: the arithmetic is never cached
        return
