"""Host memory (RSS) of a training or evaluation process, known before the hours: what ``plan`` prints beside each
job's GPU memory and what a Slurm job asks for (``experiments/cost/host.py``, ``compute/cluster_jobs.py``).

One training process holds, at its peak::

    host = BASELINE + data + (device cpu: the step's state, training/memory.py) + (device cuda: CUDA_HOST)
    data = rows x (2 x seq_len x 1 byte + 4 + META_ROW_BYTES)

- ``BASELINE``: Python, torch and the package imported, with what a training touches besides (autograd, the
  allocator's arenas, the threads), measured on the CPU (docs/gpu.md, ``benchmarks/host_memory.py``);
- ``data``: the training split in its stored types, which the trainer keeps (``trainer.py``): uint8 or int8 tokens
  of inputs and labels, int32 puzzle identifiers and the split's per-row metadata (at most 32 bytes a row: ARC's
  five int32 and ten int8 colours);
- on the CPU the model's whole peak lives on the host: weights, optimiser moments, EMA, gradients, the carried
  states and the step's activations (``memory.train_memory(...).peak``, the GPU model counted on fake tensors);
- on CUDA, the CUDA runtime's host side: the driver's context, the kernels of cuBLAS, cuDNN and torch mapped into
  the process (:data:`CUDA_HOST_BYTES`, an assumption: not measured here, where there is no GPU).

A node runs ``processes`` of them (one per GPU of a multi-GPU training; ``cpu_tasks_per_training`` on the CPU), each
with its own copy of the data: per node = processes x per process. An evaluation holds the same baseline, its test
split and, on the CPU, its weights and one outer update of a batch (``memory.eval_memory``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.reasoner import ModelConfig
from . import memory
from .config import TrainConfig

BASELINE_BYTES = 450e6  # see the module docstring; measured 2026-12-07 (docs/gpu.md)
CUDA_HOST_BYTES = 3e9  # assumed (module docstring)
META_ROW_BYTES = 32


@dataclass(frozen=True)
class HostMemory:
    """The host bytes of one process by part, and how many processes a node runs."""

    baseline: int
    data: int
    device_state: int  # on the CPU: the model's whole peak (memory.TrainMemory.peak or EvalMemory.peak); else 0
    cuda: int
    processes: int = 1

    @property
    def per_process(self) -> int:
        return self.baseline + self.data + self.device_state + self.cuda

    @property
    def per_node(self) -> int:
        return self.per_process * self.processes


def data_bytes(rows: int, seq_len: int) -> int:
    """Bytes of a split of ``rows`` rows of ``seq_len`` positions in its stored types (module docstring)."""
    return rows * (2 * seq_len + 4 + META_ROW_BYTES)


def _cuda(device: str) -> bool:
    return torch.device(device).type == "cuda"


def training_host(model_cfg: ModelConfig, train_cfg: TrainConfig, rows: int, device: str, processes: int = 1,
                  store=None) -> HostMemory:
    """The host memory of one of ``processes`` processes of a training on ``rows`` training rows."""
    cuda = _cuda(device)
    state = 0
    if not cuda:
        mem = memory.train_memory(model_cfg, train_cfg, False, processes, store)
        state = mem.peak(train_cfg.micro_batch)
    return HostMemory(int(BASELINE_BYTES), data_bytes(rows, model_cfg.seq_len), state,
                      int(CUDA_HOST_BYTES) if cuda else 0, processes)


def evaluation_host(model_cfg: ModelConfig, rows: int, batch: int, device: str, store=None) -> HostMemory:
    """The host memory of an evaluation of ``rows`` test rows at ``batch`` puzzles a batch (one process)."""
    cuda = _cuda(device)
    state = 0 if cuda else memory.eval_memory(model_cfg, False, store).peak(batch)
    return HostMemory(int(BASELINE_BYTES), data_bytes(rows, model_cfg.seq_len), state,
                      int(CUDA_HOST_BYTES) if cuda else 0)


def vm_hwm() -> int:
    """This process's peak resident memory in bytes (``VmHWM`` of ``/proc/self/status``; Linux)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("VmHWM is not in /proc/self/status")


__all__ = ["BASELINE_BYTES", "CUDA_HOST_BYTES", "HostMemory", "data_bytes", "evaluation_host", "training_host",
           "vm_hwm"]
