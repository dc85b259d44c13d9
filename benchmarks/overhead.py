"""Benchmark 2: whole-model cost of the InfiLoop connection.

The same model (same weights, same batch) with InfiLoop on both recurrent axes and with carry-last on
both axes, timed in one run with the two alternating every repetition (ABBA order):

- a training step: one supervision segment (H outer updates, gradients through the last) +
  cross-entropy of the logits against random labels + backward + AdamW step;
- an evaluation outer update: ``model.outer_update`` (L inner + 1 outer block application) under
  ``torch.no_grad()``.

The ratio InfiLoop / carry-last of the medians is the headline; absolute times are context. The last
line reads ``eval_overhead=<ratio> train_overhead=<ratio>``; when several configurations are measured
it reports the largest ratio of each kind over them (the worst case).

    python benchmarks/overhead.py                      # tiny and paper configurations
    python benchmarks/overhead.py --profile tiny       # one configuration
    python benchmarks/overhead.py --quick              # under a minute on a laptop
"""

from __future__ import annotations

import argparse

import _common as C
import torch

# CPU batch sizes: large enough that the block dominates Python overhead, small enough for a laptop.
# On CUDA the paper's batch (768) is the default.
CPU_BATCH = {"tiny": 32, "paper": 8, "smoke": 16}
CUDA_BATCH = {"tiny": 256, "paper": 768, "smoke": 256}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="tiny,paper",
                   help="model configuration(s): comma-separated profiles (tiny, paper; recipes.profile_model)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=None, help="batch size (default per configuration and device)")
    p.add_argument("--reps", type=int, default=20, help="interleaved repetitions of the training step "
                                                        "(the evaluation update gets twice as many)")
    p.add_argument("--dtype", default="float32", help="float32, or bfloat16 (autocast)")
    p.add_argument("--backend", default="auto", help="InfiLoop kernel backend: auto, eager or triton")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--quick", action="store_true", help="tiny configuration, few repetitions")
    a = p.parse_args(argv)
    C.set_threads(a.threads)
    profiles = a.profile.split(",")
    if a.quick:
        profiles, a.reps = ["tiny"], min(a.reps, 4)
    dtype = getattr(torch, a.dtype)
    cuda = a.device.startswith("cuda")
    print(C.header("Benchmark 2: whole-model cost of the connection (InfiLoop vs carry-last, both axes)"))
    results = []
    for prof in profiles:
        batch = a.batch or (CUDA_BATCH if cuda else CPU_BATCH).get(prof, 8)
        results.append(C.bench_overhead(prof, batch, a.device, a.reps, dtype, a.backend))
    print(f"repetitions: {a.reps} training steps and {2 * a.reps} evaluation updates per connection, "
          f"interleaved; dtype {a.dtype}; InfiLoop backend {a.backend}")
    for r in results:
        print(f"{r['preset']}: {r['params']:,} parameters, of which {r['connection params']} in the two "
              f"connections")
    print(C.table(C.overhead_rows(results)))
    ev = max(r["eval_ratio"] for r in results)
    tr = max(r["train_ratio"] for r in results)
    print(f"eval_overhead={ev:.3f} train_overhead={tr:.3f}")


if __name__ == "__main__":
    main()
