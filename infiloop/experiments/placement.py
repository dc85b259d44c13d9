"""Where a profile runs: the device it runs on without ``--device`` (the GPU for the GPU profiles, and for the default
profile where CUDA is usable), and its run cache, results and figures kept apart in ``results/<device>/`` where it runs
on another kind of device than it is made for (``reproduce`` and ``plan``; docs/pipeline.md)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .. import paths
from ..errors import UsageError
from ..machine import cuda_problem
from .settings import profiles


def default_device(profile: str) -> str:
    """The device a profile runs on without ``--device``: ``cuda`` for the GPU profiles, and for the default profile
    where CUDA is usable (the default run on a CUDA box uses its GPU; :func:`kept_apart`); ``cpu`` otherwise. A GPU
    profile where CUDA is not usable is a :class:`UsageError` saying why: it would train for weeks on the CPU
    (``--device cpu`` asks for that)."""
    if profiles.device(profile) != "cuda":
        if profile != profiles.DEFAULT:
            return "cpu"
        problem = cuda_problem()
        if problem and _gpu_listed():
            print(f"[reproduce] nvidia-smi lists a GPU, but CUDA is not usable here ({problem}): this run stays on "
                  "the CPU (docs/setup.md: a CUDA build of PyTorch)", file=sys.stderr, flush=True)
        return "cpu" if problem else "cuda"
    problem = cuda_problem()
    if problem:
        raise UsageError(f"--profile {profile} is made for a CUDA GPU, and CUDA is not usable here: {problem}; "
                         f"give --device cpu to run it on the CPU all the same (weeks at this model size)")
    return "cuda"


def _gpu_listed() -> bool:
    """Whether ``nvidia-smi -L`` lists a GPU (a CUDA box, whether or not this PyTorch can use it)."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return False
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


@contextlib.contextmanager
def kept_apart(profile: str, device: str):
    """Run ``profile`` on ``device`` with its run cache, results and figures kept apart where the device is of
    another kind than the profile is made for (the default profile on a CUDA GPU; a GPU profile with ``--device
    cpu``): ``<results>/<device>/`` holds ``runs/``, ``<profile>/`` and ``figures/``. A run's folder is named by the
    hash of its configuration, and the device is not in it (``train.precision`` auto trains in bf16 on CUDA and in
    float32 elsewhere): kept apart, a GPU-trained model never stands in for a CPU-trained one, nor the other way,
    and the recorded results of the CPU (``results/<profile>``) are never overwritten. The data is shared. Yields
    the folder (``None`` where nothing moves); ``paths`` and the environment that subprocesses (jobs, notebook
    kernels) read are restored after."""
    kind = device.split(":")[0]
    if kind == profiles.device(profile):
        yield None
        return
    home = paths.RESULTS / kind
    moved = {"RUNS": home / "runs", "RESULTS": home, "FIGURES": home / "figures"}
    old_paths = {name: getattr(paths, name) for name in moved}
    old_env = {name: os.environ.get(f"INFILOOP_{name}") for name in moved}
    try:
        for name, folder in moved.items():
            setattr(paths, name, folder)
            os.environ[f"INFILOOP_{name}"] = str(folder)
        yield home
    finally:
        for name in moved:
            setattr(paths, name, old_paths[name])
            if old_env[name] is None:
                os.environ.pop(f"INFILOOP_{name}", None)
            else:
                os.environ[f"INFILOOP_{name}"] = old_env[name]


def apart_note(profile: str, device: str, home: Path) -> str:
    """The line that says where a run kept apart (:func:`kept_apart`) keeps its files."""
    made_for = {"cpu": "CPU", "cuda": "GPU"}.get(profiles.device(profile), profiles.device(profile))
    return (f"profile {profile} is made for the {made_for} and runs on {device} here: its runs, results and figures "
            f"are kept apart in {home}/ (runs/, {profile}/, figures/), never mixed with those of the {made_for}")
