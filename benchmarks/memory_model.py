"""Benchmark: the memory model of a training step (infiloop/training/memory.py) against the trainer's measured peak.

For each size: the estimate (the state, the carried slots twice, the step counted on fake tensors at micro-batches 1
and 2 and extended in a straight line) and what the real trainer allocates at its peak in its first two steps (the CPU
allocator's events; on CUDA the caching allocator's peak), and their ratio. The goal: within 25 % at every size.
Then the `paper` profile's largest trainings at their micro-batch, estimated.

    python benchmarks/memory_model.py            # on this machine's device (cuda where there is one)
    python benchmarks/memory_model.py --device cpu
"""

from __future__ import annotations

import argparse

import _common as C
import torch

from infiloop.experiments.store.runs import resolve
from infiloop.training import memory

# (profile, overrides, micro-batch, precision): Sudoku 6x6 at widths 32 to 256, whole batches and micro-batches
SIZES = [
    ("quick", {}, 0, "fp32"),
    ("quick", {}, 8, "bf16"),
    ("tiny", {}, 0, "bf16"),
    ("tiny", {}, 8, "fp32"),
    ("tiny", {"model.d_model": 128}, 0, "fp32"),
    ("tiny", {"model.d_model": 256, "train.batch_size": 32}, 8, "bf16"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    print(C.header("memory model of a training step against the trainer's measured peak"))
    print(f"\n{'size':42s} {'micro':>5s} {'prec':>4s} {'estimate MB':>12s} {'measured MB':>12s} {'ratio':>6s}")
    worst = 0.0
    for profile, overrides, micro, precision in SIZES:
        run = resolve("sudoku", "infiloop", profile, overrides)
        model_cfg, train_cfg = run.model_config(), run.train_config()
        train_cfg.micro_batch, train_cfg.precision = micro, precision
        cuda = args.device.startswith("cuda")
        estimate = memory.train_memory(model_cfg, train_cfg, on_cuda=cuda).peak(micro)
        measured = memory.measured_training_peak(model_cfg, train_cfg, run.train_data(), args.device)
        worst = max(worst, abs(estimate / measured - 1))
        name = f"{profile} d={model_cfg.d_model} batch={train_cfg.batch_size}"
        print(f"{name:42s} {micro or train_cfg.batch_size:5d} {precision:>4s} {estimate / 1e6:12.1f} "
              f"{measured / 1e6:12.1f} {estimate / measured:6.3f}")
    print(f"\nlargest error: {worst:.1%} (goal: within 25 %: {'met' if worst <= 0.25 else 'NOT met'})")
    print(f"\n`paper` trainings at their micro-batch (estimate; {memory.HEADROOM:.0%} of 80 GB = "
          f"{memory.HEADROOM * 80:.0f} GB):")
    for task in ("sudoku", "maze", "arc2"):
        for recipe in ("carry_last", "fprm", "infiloop"):
            run = resolve(task, recipe, "paper")
            tc = run.train_config()
            mem = memory.train_memory(run.model_config(), tc, on_cuda=True)
            print(f"  {task:7s} {recipe:11s} batch {tc.batch_size}, micro-batch {tc.micro_batch or tc.batch_size:4d}: "
                  f"{mem.peak(tc.micro_batch) / 1e9:6.1f} GB (the whole batch at once: {mem.peak(0) / 1e9:6.1f} GB)")


if __name__ == "__main__":
    main()
