"""Each job's host memory (``training/host_memory.py``) from the data settings, no data built (the rows of a split:
``Run.split_rows``); what ``plan`` prints and what a Slurm job asks for (:func:`slurm_mem_gb`: the estimate
per node x :data:`SLURM_FACTOR` + :data:`SLURM_EXTRA_GB`, rounded up)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from ...training import host_memory

SLURM_FACTOR, SLURM_EXTRA_GB = 1.25, 2.0  # a Slurm job's memory: the estimate per node x 1.25 + 2 GB
LOOPLM_BYTES = 1e9  # a looped decoder's job besides the baseline: its small model and generated task (assumed)


def job_host(job, device: str, processes: int = 1, store=None) -> host_memory.HostMemory:
    """The host memory of one scheduler job (``manifest.Job``) on ``device``, ``processes`` processes a node for a
    training."""
    cuda = device.startswith("cuda")
    if job.kind == "looplm":
        return host_memory.HostMemory(int(host_memory.BASELINE_BYTES), int(LOOPLM_BYTES), 0,
                                      int(host_memory.CUDA_HOST_BYTES) if cuda else 0)
    run = job.spec.run
    if job.kind == "train":
        return host_memory.training_host(run.model_config(), run.train_config(), run.split_rows(), device,
                                         processes, store)
    return host_memory.evaluation_host(run.model_config(), run.split_rows("test"), run.config["eval"]["batch_size"],
                                       device, store)


def slurm_mem_gb(estimate: host_memory.HostMemory) -> int:
    """The memory a Slurm job asks for (``--mem``, GB per node): the estimate per node x 1.25 + 2 GB, rounded up."""
    return math.ceil(estimate.per_node / 1e9 * SLURM_FACTOR + SLURM_EXTRA_GB)


CHILD = """
import json, sys, tempfile, torch
torch.set_num_threads(1)
from infiloop.experiments.store.runs import resolve
from infiloop.training import train
from infiloop.training.host_memory import vm_hwm
task, recipe, profile, overrides, steps = json.loads(sys.argv[1])
run = resolve(task, recipe, profile, overrides)
with tempfile.TemporaryDirectory() as d:
    train(run.model_config(), run.train_config(), run.train_data(compact=True), d, "cpu", max_steps=steps,
          progress=False)
print(json.dumps({"vm_hwm": vm_hwm()}))
"""


def measured_host_peak(task: str, recipe: str, profile: str, overrides: dict, steps: int = 3) -> int:
    """The peak RSS (VmHWM) of a new process that trains ``steps`` steps of the run on the CPU with one torch thread,
    its data built first (here, not in it). What the host model is checked against (tests/test_host_memory.py,
    benchmarks/host_memory.py)."""
    from ..store.runs import resolve

    resolve(task, recipe, profile, overrides).train_data(compact=True)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps([task, recipe, profile, overrides, steps])],
                          capture_output=True, text=True, timeout=900, check=False,
                          preexec_fn=lambda: os.nice(19))  # niced: it shares the machine
    if done.returncode:
        raise RuntimeError(f"the measured training failed: {done.stderr[-2000:]}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["vm_hwm"])


__all__ = ["SLURM_EXTRA_GB", "SLURM_FACTOR", "job_host", "measured_host_peak", "slurm_mem_gb"]
