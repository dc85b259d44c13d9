"""How many jobs at a time pay on this CPU: w workers x t threads (w x t = cores) for training and evaluation.

The compute stage of ``./reproduce.sh`` runs the plan's jobs on slots (experiments/compute/scheduler.py). On a CPU a
slot is one process with some torch threads; this script measures which split of the cores gives the most
work per second. Each split starts ``w`` identical worker processes that wait at a common start time (so
their timed windows overlap) and then each run the same work: ``--steps`` training steps of the profile's
InfiLoop model (``training.train``) or ``--updates`` evaluation updates of ``--puzzles`` test puzzles
(``evaluation.evaluate``). Throughput = w x work / the slowest worker's time.

    python benchmarks/workers.py                    # tiny profile, every split of this machine's cores
    python benchmarks/workers.py --quick            # a few seconds per split (the test suite's smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
from _common import ROOT, header

from infiloop.machine import usable_cpus


def splits(cores: int) -> list[tuple[int, int]]:
    """(workers, threads) with workers x threads = cores, most workers first."""
    return [(cores // t, t) for t in range(1, cores + 1) if cores % t == 0]


def worker(args) -> None:
    from infiloop.evaluation import evaluate
    from infiloop.experiments.store import runs as experiments
    from infiloop.model import LoopedReasoner
    from infiloop.training import train

    torch.set_num_threads(args.threads)
    run = experiments.resolve("sudoku", "infiloop", args.profile, {"train.seed": 0})
    if args.kind == "train":
        cfg = run.train_config()
        cfg.steps, cfg.threads, cfg.checkpoint_every, cfg.log_every = args.steps, args.threads, 10**9, 10**9
        model_cfg, data = run.model_config(), run.train_data()
        with tempfile.TemporaryDirectory() as d:
            while time.time() < args.start:
                time.sleep(0.01)
            t0 = time.perf_counter()
            train(model_cfg, cfg, data, d, "cpu", None, False)
    else:
        model = LoopedReasoner(run.model_config()).eval()  # untrained: the cost of an update is the same
        data = run.test_data().subset(slice(0, args.puzzles))
        while time.time() < args.start:
            time.sleep(0.01)
        t0 = time.perf_counter()
        evaluate(model, data, updates=args.updates, every=1, batch_size=args.puzzles, progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def measure(kind: str, w: int, t: int, args) -> float:
    """Seconds of the slowest of ``w`` concurrent workers, each with ``t`` threads."""
    start = time.time() + args.settle
    cmd = [sys.executable, __file__, "--worker", kind, "--threads", str(t), "--profile", args.profile,
           "--steps", str(args.steps), "--updates", str(args.updates), "--puzzles", str(args.puzzles),
           "--start", str(start)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(w)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a {kind} worker failed: {outs}")
    return max(json.loads(o.strip().splitlines()[-1])["seconds"] for o in outs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="tiny")
    ap.add_argument("--cores", type=int, default=usable_cpus(), help="cores to split (default: this process's)")
    ap.add_argument("--steps", type=int, default=60, help="training steps per worker")
    ap.add_argument("--updates", type=int, default=48, help="evaluation updates per worker")
    ap.add_argument("--puzzles", type=int, default=256, help="test puzzles per evaluation batch")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds from launch to the common start")
    ap.add_argument("--kinds", default="train,eval", help="what to measure: train, eval or both (comma-separated)")
    ap.add_argument("--quick", action="store_true", help="smoke profile, a few steps (a check that it runs)")
    ap.add_argument("--worker", choices=("train", "eval"), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.kind = args.worker
        return worker(args)
    if args.quick:
        args.profile, args.steps, args.updates, args.puzzles, args.settle = "smoke", 3, 4, 16, 4.0
    print(header("jobs at a time on the CPU: workers x threads"))
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f}")
    except OSError:
        pass
    print(f"work per worker: train {args.steps} steps / eval {args.updates} updates x {args.puzzles} puzzles "
          f"({args.profile} InfiLoop model)\n")
    print("| kind | workers x threads | slowest worker (s) | work per second | relative |")
    print("|---|---|---|---|---|")
    best = {}
    for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
        rows = []
        for w, t in splits(args.cores):
            s = measure(kind, w, t, args)
            rows.append((w, t, s, w / s))
        top = max(r[3] for r in rows)
        for w, t, s, rate in rows:
            print(f"| {kind} | {w} x {t} | {s:.4g} | {rate:.4g} jobs/s | {rate / top:.2f} |")
        best[kind] = max(rows, key=lambda r: r[3])[:2]
    print("\nbest: " + ", ".join(f"{k} {w} x {t}" for k, (w, t) in best.items()))


if __name__ == "__main__":
    main()
