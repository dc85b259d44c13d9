"""Benchmark: the host-memory model of a training process (infiloop/training/host_memory.py) against the peak RSS
(VmHWM) of a new process that trains a few steps on the CPU with one torch thread, at three sizes.

    nice -n 19 python benchmarks/host_memory.py
"""

from __future__ import annotations

import _common as C  # noqa: F401  (the package on the path)
import torch

from infiloop.experiments.cost import host
from infiloop.experiments.store.runs import resolve
from infiloop.training import host_memory

# (profile, overrides): Sudoku 4x4 smoke, 6x6 tiny, 6x6 quick (widths 64 to 128, batches 32 to 128)
SIZES = [("smoke", {}), ("tiny", {}), ("quick", {})]


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'profile':8s} {'rows':>7s} {'data MB':>8s} {'state MB':>9s} {'model MB':>9s} {'measured MB':>12s} "
          f"{'error':>7s}")
    for profile, overrides in SIZES:
        run = resolve("sudoku", "infiloop", profile, overrides)
        measured = host.measured_host_peak("sudoku", "infiloop", profile, overrides)
        est = host_memory.training_host(run.model_config(), run.train_config(), run.split_rows(), "cpu")
        print(f"{profile:8s} {run.split_rows():7d} {est.data / 1e6:8.1f} {est.device_state / 1e6:9.1f} "
              f"{est.per_process / 1e6:9.1f} {measured / 1e6:12.1f} {est.per_process / measured - 1:+7.1%}")


if __name__ == "__main__":
    main()
