"""The machine this runs on: its CPU, for provenance, and how many CPUs this process may use.

``usable_cpus`` counts the CPUs the process is allowed to run on (``os.sched_getaffinity``: a container's or
``taskset``'s limit), not every CPU of the machine, so that jobs and threads are sized to what is really there.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, else every CPU); at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def threads_per_job(jobs: int) -> int:
    """torch CPU threads for each of ``jobs`` processes running at once: an equal share of the CPUs, at least 1."""
    return max(1, usable_cpus() // max(1, jobs))


def _cpuinfo_models() -> list[str]:
    """The ``model name`` of every logical CPU in /proc/cpuinfo (empty where there is none)."""
    try:
        return [m.strip() for m in re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)]
    except OSError:
        return []


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what ``platform`` knows."""
    models = _cpuinfo_models()
    return models[0] if models else platform.processor() or platform.machine()


def cpu_name() -> str:
    """The CPU model and the number of logical CPUs of the machine, e.g. ``"AMD EPYC 9654 × 2"`` (the count
    where /proc/cpuinfo gives it)."""
    models = _cpuinfo_models()
    return f"{models[0]} × {len(models)}" if models else platform.processor() or platform.machine()


def cuda_problem() -> str | None:
    """Why CUDA cannot be used here, in a few words, or ``None`` when it can: a CPU build of torch, no
    device visible (``CUDA_VISIBLE_DEVICES``), or a driver the CUDA build cannot use (torch's own warning)."""
    import warnings

    import torch

    if torch.version.cuda is None:
        return f"this PyTorch ({torch.__version__}) is a CPU build"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    if available:
        return None
    said = " ".join(" ".join(str(w.message).split()) for w in caught)
    if "driver" in said.lower():
        return f"the NVIDIA driver cannot run this CUDA {torch.version.cuda} build of PyTorch ({said[:160]})"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "no CUDA device is visible" + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else "")


def local_gpu(local_rank: int, visible: int, local_tasks: int) -> int:
    """The index, among the CUDA devices this process sees, of the GPU of task ``local_rank`` of the
    ``local_tasks`` tasks on its node: its own rank when it sees one GPU per task or more (torchrun, or Slurm
    showing each task the job's GPUs), 0 when the site binds one GPU per task (it sees only that one)."""
    if visible < 1:
        raise RuntimeError(f"task {local_rank}: no CUDA device is visible to it "
                           f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    if visible >= local_tasks:
        return local_rank
    return 0 if visible == 1 else local_rank % visible


def init_distributed(device: str) -> str:
    """Join the process group of a multi-process training (torchrun's or Slurm's ``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``): NCCL on CUDA, gloo on the CPU. Returns this process's
    device: its own GPU among those it sees (:func:`local_gpu`)."""
    import torch
    import torch.distributed as dist

    if not device.startswith("cuda"):
        dist.init_process_group("gloo")
        return device
    rank = int(os.environ.get("LOCAL_RANK", 0))
    tasks = int(os.environ.get("LOCAL_WORLD_SIZE", rank + 1))
    index = local_gpu(rank, torch.cuda.device_count(), tasks)
    torch.cuda.set_device(index)
    dist.init_process_group("nccl")
    return f"cuda:{index}"
