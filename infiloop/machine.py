"""The machine this runs on: its CPU and its Python environment against the lock file, for provenance, and how many
CPUs this process may use.

``usable_cpus`` counts the CPUs the process is allowed to run on (``os.sched_getaffinity``: a container's or
``taskset``'s limit), not every CPU of the machine, so that jobs and threads are sized to what is really there.
``tune_allocator`` keeps a CPU job's freed tensors in the C heap (glibc), which the command line and the scheduler's
jobs call first.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path

from .paths import ROOT


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells it, else every CPU); at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def threads_per_job(jobs: int) -> int:
    """torch CPU threads for each of ``jobs`` processes running at once: an equal share of the CPUs, at least 1."""
    return max(1, usable_cpus() // max(1, jobs))



def progress_bar():
    """The tqdm class of this process's progress bars: the notebook widget (``tqdm.auto``) where ipywidgets can draw
    it, else the text bar (``tqdm.std``). Inside a Jupyter kernel without ipywidgets (not a dependency),
    ``tqdm.auto`` warns "IProgress not found" on import, a red box on every executed notebook's page, and then
    draws the text bar all the same."""
    from importlib.util import find_spec

    if find_spec("ipywidgets") is None:
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm

# glibc's malloc serves a block above its mmap threshold (128 KiB at first) by mmap and unmaps it when freed, raising
# the threshold only as such blocks come back; and it trims the heap's free top above 128 KiB. A CPU step of the
# small models here allocates and frees activations of a few hundred KiB to a few MiB hundreds of times, and each
# one was paged in again by the kernel: measured 2026-12-04 on a 2-core AMD EPYC (docs/quick.md), 5-11 % of a
# `quick` training step and 8-20 % of an evaluation, in system time. Fixed thresholds keep them in the heap.
MMAP_THRESHOLD = 32 << 20  # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit): larger blocks are still mapped
TRIM_THRESHOLD = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


def tune_allocator() -> bool:
    """Keep freed blocks of up to :data:`MMAP_THRESHOLD` in glibc's heap and trim it only past
    :data:`TRIM_THRESHOLD` (``mallopt``), so that a job's tensors are not mapped and paged in again at every step.
    Numerics are untouched: only where memory comes from. True where it was set (glibc on Linux), else False (and
    nothing changes). Called first by ``python -m infiloop`` and by the scheduler's jobs and warm workers; a library
    user's process is left as it is."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False


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


def rendezvous_port(job_id: str, ports: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The port of a Slurm job's DDP rendezvous (the first task's TCPStore), the same in every task: chosen by the job
    id among the ports below the system's ephemeral range. submitit's own choice (20000-60000) lies mostly inside that
    range, where the many short connections of ``squeue``/``sacct`` polling leave ports in TIME_WAIT: the store then
    failed to listen (EADDRINUSE) and the other tasks waited for it (seen on the test cluster)."""
    import random

    try:
        low = int(ports.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    first = 10000 if low > 12000 else 1024
    return random.Random(str(job_id)).randint(first, max(first, low - 1))


def leave_process_group() -> None:
    """Leave the process group of a multi-process training (:func:`init_distributed`) after it succeeded: a barrier
    (no process leaves while another still trains), ``destroy_process_group``, and an end without interpreter
    finalization once this process exits.

    Why the last: after a DDP training, gloo's worker threads outlive ``destroy_process_group`` (DDP's reducer keeps
    the process group alive in C++, where no garbage collection reaches it; torch 2.13) and live until the process
    ends. A worker still releasing the last collective's tensors at interpreter finalization needs the GIL; Python
    ends that thread inside C++ code that cannot unwind, and the process aborts ("terminate called without an active
    exception", SIGABRT: one two-process training in fifty under load; core dump and loop in docs/testing.md). So the
    process ends by ``os._exit`` after its output is flushed: everything it wrote is already closed (atomic writes).

    Not after a failure: the barrier would wait for a process that failed until the collective timed out; the exit
    ends the group then, and the launcher the others. The end without finalization is :func:`end_process` (the
    entry points call it with their exit status) or, in a Slurm task, whose exit submitit owns, an exit handler."""
    import torch.distributed as dist

    global _left_group
    if not dist.is_initialized():
        return
    dist.barrier()
    dist.destroy_process_group()
    _left_group = True


_left_group = False  # this process left a training's process group (leave_process_group)


def end_process(status: int, at_exit: bool = False) -> None:
    """End this process with ``status``: after :func:`leave_process_group`, at once, without interpreter finalization
    (its output flushed first); otherwise as usual. ``at_exit``: register that end as the last exit handler instead
    (status 0: a Slurm task's function returned, and submitit has written its result)."""
    if not _left_group:
        if not at_exit:
            sys.exit(status)
        return
    if at_exit:
        atexit.register(end_process, 0)
        return
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed file
            pass
    os._exit(status)


# --- The exact environment ------------------------------------------------------------------------------------
# The lock file holds every Python package version (with hashes) that the suite and the default run passed with.
#
# ``requirements-cpu.lock`` is written by ``./reproduce.sh lock`` (pip-compile of the environment's own pins, hashes
# from the package index) and installed by ``./reproduce.sh setup`` on the CPU path (``pip install --require-hashes
# --no-deps``). torch is not hash-locked: its CPU wheels differ by index (PyTorch's CPU index, a local build), so the
# lock names its version in its header and ``reproduce.sh`` installs the CPU build of exactly that version. The report's
# provenance says whether the environment it ran in matches the lock (:func:`lock_status`), so that a run in a different
# environment says so.

LOCK = ROOT / "requirements-cpu.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")
_HEADER = re.compile(r"^# locked for: python (\d+\.\d+), (\S+), torch==(\S+)")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Jinja2`` and ``jinja2``, ``ruamel.yaml`` and ``ruamel-yaml``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path = LOCK) -> dict:
    """``{"pins": {name: version}, "python": "3.11", "platform": "linux-x86_64", "torch": "2.13.0"}`` of a lock
    file; ValueError naming the file when its header or a pin cannot be read."""
    text = Path(path).read_text(encoding="utf-8")
    header = next((m for m in map(_HEADER.match, text.splitlines()) if m), None)
    if header is None:
        raise ValueError(f"{path}: no '# locked for: python X.Y, PLATFORM, torch==VERSION' header line")
    pins = {}
    for line in text.splitlines():
        m = _PIN.match(line)
        if m:
            pins[canonical(m.group(1))] = m.group(3)
    if not pins:
        raise ValueError(f"{path}: no pinned package (NAME==VERSION lines)")
    return {"pins": pins, "python": header.group(1), "platform": header.group(2), "torch": header.group(3)}


def this_platform() -> str:
    """``linux-x86_64``: the system and machine a lock is made for."""
    return f"{platform.system().lower()}-{platform.machine().lower()}"


def installed_versions() -> dict[str, str]:
    """Every installed distribution's version by canonical name: the first found on ``sys.path``, the one ``import``
    and ``importlib.metadata.version`` use. A later copy is not the environment's: setuptools appends its
    ``_vendor`` folder (its own older packaging, platformdirs, wheel) to ``sys.path`` when imported."""
    out = {}
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name:
            out.setdefault(canonical(name), d.version)
    return out


def lock_differences(lock: dict, have: dict[str, str]) -> list[str]:
    """What differs between a lock and the installed versions: ``name lock → installed`` (``missing`` when absent);
    torch compared by its public version (``2.13.0+cpu`` is the lock's ``2.13.0``); the project itself ignored."""
    out = []
    for name, want in sorted({**lock["pins"], "torch": lock["torch"]}.items()):
        got = have.get(name)
        if got is None:
            out.append(f"{name} {want} → missing")
        elif (got.split("+")[0] if name == "torch" else got) != want:
            out.append(f"{name} {want} → {got}")
    return out


def lock_status(path: Path = LOCK, have: dict[str, str] | None = None) -> str:
    """One line for the report's provenance: whether this environment is the lock's (its file and sha256), or how
    it differs (the first differences named), or that there is no lock."""
    path = Path(path)
    if not path.is_file():
        return f"no lock file ({path.name} absent): versions as resolved on the day of setup"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    try:
        lock = read_lock(path)
    except ValueError as e:
        return f"unreadable lock: {e}"
    diff = lock_differences(lock, installed_versions() if have is None else have)
    where = f"{path.name} (sha256 {digest}…; python {lock['python']}, {lock['platform']})"
    if not diff:
        return f"matches {where}: {len(lock['pins']) + 1} packages"
    shown = "; ".join(diff[:5]) + (f"; and {len(diff) - 5} more" if len(diff) > 5 else "")
    return f"DIFFERS from {where} in {len(diff)} package(s): {shown}"
