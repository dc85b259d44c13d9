"""Benchmark 4: depth throughput — outer updates per second when evaluating to 960 updates.

Each connection evaluates the same model (same weights, same batch) from the initial carry to
``--updates`` outer updates with ``LoopedReasoner.iterate`` (no grad; only the carry is kept); the
connections advance in turn, ``--chunk`` updates at a time, in one run. Reported: updates per second,
layers per second (one outer update executes ``(L + 1) * n_layers`` layers: 14 in the paper
configuration, so 960 updates = 13,440 layers here; the paper counts 26 per update in its evaluation
configuration) and the speed of the last tenth of the run against the first tenth, which stays flat
for an O(d)-state connection. Full Attention Residuals (O(T d) state, O(T) work per step) can be
added with ``--connections``; it slows down as T grows.

    python benchmarks/depth_throughput.py                     # tiny, 960 updates
    python benchmarks/depth_throughput.py --profile paper
    python benchmarks/depth_throughput.py --quick             # 96 updates
"""

from __future__ import annotations

import argparse
import time

import _common as C
import torch

from infiloop.experiments.settings.recipes import profile_model
from infiloop.model import LoopedReasoner
from infiloop.model.connections import ConnectionConfig

CPU_BATCH = {"tiny": 8, "paper": 1, "smoke": 8}
CUDA_BATCH = {"tiny": 256, "paper": 768, "smoke": 256}


def run(preset: str, names: list[str], batch: int, updates: int, chunk: int, device, backend: str,
        dtype) -> list[dict]:
    """Evaluate one model per connection to ``updates`` outer updates, advancing them in turn by
    ``chunk`` updates (alternating the order every round) so that a shared machine's load falls on
    all of them alike; each chunk is timed on its own."""
    base = profile_model(preset)
    g = torch.Generator().manual_seed(1)
    inputs = torch.randint(0, base.vocab_size, (batch, base.seq_len), generator=g).to(device)
    autocast = torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=dtype != torch.float32)
    runs = {}
    for name in names:
        cfg = base.replace(inner=ConnectionConfig(name=name, backend=backend),
                           outer=ConnectionConfig(name=name, backend=backend))
        torch.manual_seed(0)
        model = LoopedReasoner(cfg).to(device).eval()
        with autocast:  # warm-up (allocator, kernels' compilation) on a separate short run
            for _ in model.iterate(inputs, 2):
                pass
        runs[name] = {"it": model.iterate(inputs, updates), "times": [], "done": 0}
    C.sync(device)
    rnd = 0
    while any(r["done"] < updates for r in runs.values()):
        order = names if rnd % 2 == 0 else names[::-1]
        for name in order:
            r = runs[name]
            n = min(chunk, updates - r["done"])
            if n <= 0:
                continue
            t0 = time.perf_counter()
            with autocast:
                for _ in range(n):
                    next(r["it"])
            C.sync(device)
            r["times"].append((n, time.perf_counter() - t0))
            r["done"] += n
        rnd += 1
    lpu = base.layers_per_outer_update
    rows = []
    for name, r in runs.items():
        total = sum(t for _, t in r["times"])
        k = max(1, len(r["times"]) // 10)
        first = sum(t for _, t in r["times"][:k]) / sum(n for n, _ in r["times"][:k])
        last = sum(t for _, t in r["times"][-k:]) / sum(n for n, _ in r["times"][-k:])
        rows.append({
            "config": preset, "connection": name, "batch": batch, "updates": updates,
            "layers": updates * lpu, "time": C.fmt_time(total),
            "updates/s": f"{updates / total:.1f}", "layers/s": f"{updates * lpu / total:.0f}",
            "last/first tenth speed": f"{first / last:.2f}",
            "_ups": updates / total,
        })
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="tiny", help="comma-separated profiles whose models to run")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--updates", type=int, default=960)
    p.add_argument("--connections", default="carry_last,infiloop", help="e.g. carry_last,infiloop,fprm")
    p.add_argument("--chunk", type=int, default=24, help="updates per timed chunk (connections alternate)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--backend", default="auto", help="InfiLoop kernel backend: auto, eager or triton")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--quick", action="store_true", help="96 updates")
    a = p.parse_args(argv)
    C.set_threads(a.threads)
    if a.quick:
        a.updates = min(a.updates, 96)
    dtype = getattr(torch, a.dtype)
    cuda = a.device.startswith("cuda")
    print(C.header(f"Benchmark 4: depth throughput, evaluation to {a.updates} outer updates"))
    rows = []
    for prof in a.profile.split(","):
        batch = a.batch or (CUDA_BATCH if cuda else CPU_BATCH).get(prof, 1)
        lpu = profile_model(prof).layers_per_outer_update
        print(f"{prof}: {lpu} layers per outer update ((L + 1) x n_layers)")
        rows += run(prof, a.connections.split(","), batch, a.updates, a.chunk, a.device, a.backend, dtype)
    print(C.table(C.public(rows)))
    for prof in a.profile.split(","):
        ups = {r["connection"]: r["_ups"] for r in rows if r["config"] == prof}
        if "carry_last" in ups:
            rel = ", ".join(f"{k}={v / ups['carry_last']:.3f}" for k, v in ups.items() if k != "carry_last")
            print(f"{prof}: throughput relative to carry_last: {rel}")


if __name__ == "__main__":
    main()
