"""Evaluation to depth: wall time and peak memory of `evaluate` at 96 and at 960 outer updates.

Each depth runs in its own process (peak RSS is per process), on the same trained run and puzzles,
with nothing cached. Prints a table; the last line reads `peak_ratio=<rss@960 / rss@96> seconds_960=<s>`.

    python benchmarks/eval_depth.py RUN_DIR [--limit 256] [--threads 2] [--depths 96,960]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header  # noqa: E402

CHILD = r"""
import json, resource, sys, time, torch
torch.set_num_threads(int(sys.argv[4]))
from infiloop.experiments.store.runs import load_run
from infiloop.evaluation import evaluate
run = load_run(sys.argv[1])
model = run.load_model()
data = run.test_data().subset(slice(0, int(sys.argv[3])))
t0 = time.time()
traj = evaluate(model, data, updates=int(sys.argv[2]), every=1, batch_size=len(data), progress=False)
print(json.dumps({"seconds": time.time() - t0, "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "acc_last": float(traj["correct"][-1].mean())}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--limit", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--depths", default="96,960")
    args = ap.parse_args()
    print(header("evaluation to depth: time and peak memory"))
    rows = {}
    for n in (int(x) for x in args.depths.split(",")):
        out = subprocess.run([sys.executable, "-c", CHILD, args.run_dir, str(n), str(args.limit), str(args.threads)],
                             capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                           "PATH": "/usr/bin:/bin"})
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            return 1
        rows[n] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{'updates':>8} {'puzzles':>8} {'seconds':>9} {'peak RSS (MiB)':>15} {'exact acc @ last':>17}")
    for n, r in rows.items():
        print(f"{n:>8} {args.limit:>8} {r['seconds']:>9.1f} {r['peak_rss_kb'] / 1024:>15.1f} {r['acc_last']:>17.4f}")
    lo, hi = min(rows), max(rows)
    print(f"peak_ratio={rows[hi]['peak_rss_kb'] / rows[lo]['peak_rss_kb']:.3f} seconds_{hi}={rows[hi]['seconds']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
