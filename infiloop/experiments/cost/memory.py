"""The plan's memory section: each GPU job's estimated peak memory (``training/memory.py``) beside the device's,
and the ``train.micro_batch`` that fits where the configured one does not; beside them each job's host memory
(``training/host_memory.py``, ``host.py``), which a Slurm job asks for.

The counts behind the estimates (one per model configuration and precision, on fake tensors: about a second each,
nothing trained or allocated) are kept in ``runs/.plan-memory.json``. It shares its name with ``training/memory.py``
on purpose: that module models a process's peak, this one prints the plan's jobs by it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ... import paths
from ...io import atomic_write_text
from ...training import host_memory, memory
from .plan import Plan

ASSUMED_GPU_BYTES = 80e9  # an H100's 80 GB, where no CUDA device is here and --gpu-memory does not say


def store_path() -> Path:
    return paths.RUNS / ".plan-memory.json"


def _read_store() -> dict:
    try:
        return json.loads(store_path().read_text())
    except (OSError, ValueError):
        return {}


def device_memory(device: str, given_gb: float | None) -> tuple[float, str]:
    """The bytes of the device the jobs will run on, and where that number comes from."""
    if given_gb:
        return given_gb * memory.GB, f"{given_gb:g} GB (--gpu-memory)"
    import torch

    if torch.cuda.is_available():
        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        return float(props.total_memory), f"{props.total_memory / memory.GB:.1f} GB ({props.name})"
    return ASSUMED_GPU_BYTES, f"{ASSUMED_GPU_BYTES / memory.GB:.0f} GB assumed (an H100; --gpu-memory GB to change)"


def _gb(n: float) -> str:
    return f"{n / memory.GB:6.1f}"


def _host(run, train_cfg, device: str, processes: int, store: dict) -> str:
    """A training's host memory for the plan's row: per process, and per node where it runs several processes."""
    est = host_memory.training_host(run.model_config(), train_cfg, run.split_rows(), device,
                                    processes if device.startswith("cuda") else 1, store)
    return _gb(est.per_process).strip() + (f" x{est.processes}" if est.processes > 1 else "")


def render(plan: Plan, gpus_per_run: int = 1, given_gb: float | None = None) -> list[str]:
    """The memory section's lines: a training's peak per process at its micro-batch (the state, the carried
    states, the step) and whether it fits :data:`memory.HEADROOM` of the device; an evaluation's peak at its batch."""
    device_bytes, where = device_memory(plan.device, given_gb)
    budget = device_bytes * memory.HEADROOM
    store = _read_store()
    before = dict(store)
    cuda = plan.device.startswith("cuda")
    memory.count_all([("train", r.run.model_config(), memory.trains_bf16(r.run.train_config(), cuda))
                      for r in plan.runs] + [("eval", e.run.model_config(), cuda) for e in plan.evals], store)
    out = [f"\n## memory (estimated peak per process: training/memory.py, the eager step's tensors counted on fake "
           f"tensors, nothing trained; device {where}; a job fits within {memory.HEADROOM:.0%} of it: "
           f"{_gb(budget).strip()} GB)",
           "task    recipe        batch  micro  state GB  carried GB  per slot MB  peak GB  fits?       host GB  "
           "overrides"]
    for r in plan.runs:
        tc = r.run.train_config()
        mem = memory.train_memory(r.run.model_config(), tc, plan.device.startswith("cuda"), gpus_per_run, store)
        micro = min(tc.micro_batch or mem.batch, mem.batch)
        peak = mem.peak(micro)
        state = mem.state
        if peak <= budget:
            verdict = "yes"
        else:
            fit = mem.fitting_micro_batch(device_bytes)
            verdict = (f"NO: set train.micro_batch={fit} ({_gb(mem.peak(fit)).strip()} GB)" if fit
                       else "NO: one slot at a time does not fit either")
        overrides = " ".join(f"{k}={v}" for k, v in r.overrides.items() if k != "train.seed") or "-"
        out.append(f"{r.task:7s} {r.recipe:12s} {mem.batch:6d} {micro:6d}  {_gb(state):>8s}  "
                   f"{_gb(2 * mem.carry_per_sample * mem.batch):>10s}  {mem.step.per_sample / 1e6:11.1f}  "
                   f"{_gb(peak):>7s}  {verdict:10s}  {_host(r.run, tc, plan.device, gpus_per_run, store):>7s}  "
                   f"{overrides}")
    out.append("state: weights, optimiser moments, EMA and gradients (float32; DDP's copy of them with several "
               "GPUs); carried: the process's slots' states, "
               "old and new; per slot: what one slot of a micro-batch adds (activations saved for the backward pass "
               "and its transients, counted at the run's precision); host: the host memory (RSS) of "
               "one process, x the processes of a node after it where there are several (training/host_memory.py: "
               "Python and torch, the training data at its stored size, the CUDA runtime's host side; what a Slurm "
               "job asks for x 1.25 + 2 GB)")
    seen: dict[tuple, int] = {}
    hosts: dict[tuple, int] = {}
    for e in plan.evals:
        mem = memory.eval_memory(e.run.model_config(), plan.device.startswith("cuda"), store)
        key = (e.run.config["task"], e.run.config["recipe"], e.batch)
        seen[key] = max(seen.get(key, 0), mem.peak(e.batch))
        hosts[key] = max(hosts.get(key, 0), host_memory.evaluation_host(
            e.run.model_config(), e.run.split_rows("test"), e.batch, plan.device, store).per_process)
    for (task, recipe, batch), peak in sorted(seen.items(), key=lambda kv: -kv[1])[:3]:  # the largest three
        out.append(f"evaluation {task}/{recipe} at {batch} puzzles a batch: {_gb(peak).strip()} GB "
                   f"({'fits' if peak <= budget else 'does NOT fit: lower the evaluation batch_size'}); host "
                   f"{_gb(hosts[(task, recipe, batch)]).strip()} GB")
    if store != before:
        atomic_write_text(store_path(), json.dumps(store, indent=1, sort_keys=True))
    return out
