"""The slots a stage's jobs run on: CPU workers, or slots on each visible GPU (several small jobs side by side for a
profile made for the CPU), and the wall time of a stage's jobs on them (:func:`simulate`, the scheduler's order).

- **CPU.** ``workers`` processes with ``threads`` torch threads each (default: one single-threaded worker per core,
  the faster split on this project's workloads by ``benchmarks/workers.py``).
- **CUDA.** ``per_gpu`` slots per visible device (:func:`jobs_per_gpu`); a job sees only its device
  (``CUDA_VISIBLE_DEVICES``); a training run that asks for ``gpus > 1`` takes a free slot on that many distinct
  devices (:func:`take_slots`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...errors import UsageError
from ...machine import usable_cpus

# Workers per core on CPU: 1.0 means one single-threaded process per core (benchmarks/workers.py measured
# 2 x 1 thread against 1 x 2 threads on this project's 2-core reference machine; see benchmarks/RESULTS.md).
CPU_WORKERS_PER_CORE = 1.0
# Jobs side by side on one GPU for a profile made for the CPU: its models (tens of thousands of parameters, batches
# of 32 to 128) keep a GPU busy a small fraction of the time, each job launching kernels from its own CPU thread, and
# use well under a GiB of GPU memory each; a profile made for the GPU fills a device with one job.
SMALL_JOBS_PER_GPU = 4


@dataclass
class Slot:
    """Where one job (or one process of a multi-GPU job) runs."""

    name: str  # "cpu0", "cuda:3"
    device: str  # the torch device the job is told ("cpu" or "cuda": it sees only its own GPU)
    threads: int  # torch CPU threads
    gpu: str | None = None  # the CUDA device id it owns


def cpu_slots(workers: int | None = None, threads: int | None = None, cpus: int | None = None) -> list[Slot]:
    cpus = cpus or usable_cpus()
    workers = workers or max(1, int(cpus * CPU_WORKERS_PER_CORE))
    threads = threads or max(1, cpus // workers)
    return [Slot(f"cpu{i}", "cpu", threads) for i in range(workers)]


def visible_gpus() -> list[str]:
    """The CUDA device ids this process may use: CUDA_VISIBLE_DEVICES when set, else every device torch sees."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def jobs_per_gpu(profile: str, gpus: int = 1) -> int:
    """Jobs that share one GPU at once by default: one for a profile made for the GPU; for a profile made for
    the CPU :data:`SMALL_JOBS_PER_GPU`, fewer where the CPUs cannot give each job of every GPU a thread of its own
    (a small job's GPU time is launched from the CPU)."""
    from ..settings import profiles

    if profiles.device(profile) == "cuda":
        return 1
    return max(1, min(SMALL_JOBS_PER_GPU, usable_cpus() // max(1, gpus)))


def gpu_slots(gpus: list[str] | None = None, threads: int | None = None, per_gpu: int = 1) -> list[Slot]:
    """``per_gpu`` slots on each visible CUDA device (``cuda:3``, or ``cuda:3/0``, ``cuda:3/1``, ... with several),
    each with an equal share of the CPUs as torch threads."""
    gpus = visible_gpus() if gpus is None else gpus
    if not gpus:
        raise RuntimeError("device cuda: no CUDA device is visible (CUDA_VISIBLE_DEVICES, torch.cuda)")
    if per_gpu < 1:
        raise UsageError(f"--jobs-per-gpu: expected 1 or more, got {per_gpu}")
    threads = threads or max(1, usable_cpus() // (len(gpus) * per_gpu))
    return [Slot(f"cuda:{g}" if per_gpu == 1 else f"cuda:{g}/{k}", "cuda", threads, gpu=g)
            for k in range(per_gpu) for g in gpus]  # round robin: the first jobs spread over the devices


def slots_for(device: str, workers: int | None = None, threads: int | None = None,
              gpus: list[str] | None = None, per_gpu: int = 1) -> list[Slot]:
    """The compute stage's slots on ``device``: CPU workers, or ``per_gpu`` slots on each visible GPU (on the
    one GPU named by ``cuda:N``)."""
    if device.startswith("cuda"):
        if ":" in device:  # one named device: every job goes there
            gpus = [device.split(":", 1)[1]]
        return gpu_slots(gpus, threads, per_gpu)
    return cpu_slots(workers, threads)


def stage_slots(profile: str, device: str, workers: int | None = None, per_gpu: int | None = None) -> list[Slot]:
    """The compute stage's slots for ``profile``: ``workers`` on a CPU (default one per core); on CUDA ``per_gpu``
    per visible GPU (default :func:`jobs_per_gpu`: several small jobs side by side for a profile made for the CPU)."""
    if device.startswith("cuda") and per_gpu is None:
        per_gpu = jobs_per_gpu(profile, 1 if ":" in device else max(1, len(visible_gpus())))
    return slots_for(device, workers, per_gpu=per_gpu or 1)


def distinct_gpus(slots: list[Slot]) -> list[str]:
    """The CUDA devices of ``slots``, each once, in order."""
    return list(dict.fromkeys(s.gpu for s in slots if s.gpu is not None))


def check_gpus_per_run(slots: list[Slot], gpus_per_run: int) -> None:
    """Refuse, before anything starts, a number of GPUs per training run that no slot set can give."""
    if gpus_per_run < 1:
        raise UsageError(f"--gpus-per-run: expected 1 or more, got {gpus_per_run}")
    if gpus_per_run == 1:
        return
    if not slots or slots[0].gpu is None:
        raise UsageError(f"--gpus-per-run {gpus_per_run}: several GPUs per run need --device cuda; "
                         f"this run's device is {slots[0].device if slots else 'none'}")
    gpus = distinct_gpus(slots)
    if gpus_per_run > len(gpus):
        raise UsageError(f"--gpus-per-run {gpus_per_run}: only {len(gpus)} CUDA device(s) visible "
                         f"({', '.join(gpus)}); ask for at most {len(gpus)}")


def take_slots(free: list[Slot], need: int) -> tuple[list[Slot], list[Slot]] | None:
    """``need`` free slots on distinct devices (one for a job on one device) and the slots left free, or ``None``
    when the free slots cannot give them."""
    mine: list[Slot] = []
    for slot in free:
        if len(mine) == need:
            break
        if need == 1 or slot.gpu not in {s.gpu for s in mine}:
            mine.append(slot)
    if len(mine) < need:
        return None
    return mine, [s for s in free if s not in mine]


def simulate(seconds: dict[str, float], after: dict[str, list[str]], slots: int) -> float:
    """Wall time of :func:`run_jobs`'s order (ready jobs, costliest first, on ``slots`` slots) for jobs that
    take ``seconds[id]`` and wait for ``after[id]``: how ``plan`` turns job estimates into a stage's time."""
    import heapq

    now, free, running, done = 0.0, slots, [], set()
    todo = dict(seconds)
    while todo or running:
        ready = sorted((j for j in todo if all(a in done or a not in seconds for a in after.get(j, []))),
                       key=lambda j: todo[j], reverse=True)
        for j in ready[:free]:
            heapq.heappush(running, (now + todo.pop(j), j))
            free -= 1
        if not running:
            break
        now, j = heapq.heappop(running)
        done.add(j)
        free += 1
    return now
