"""Benchmark 3: persistent aggregation memory vs loop count T.

InfiLoop keeps (h_t, log D_t) per token whatever T (eq. 4: O(d) state); Full Attention Residuals keeps
every candidate (eq. 2 with a query per step: O(T d)). Both connections are stepped T times on random
candidates (evaluation, no grad) and the state is measured at each checkpoint T:

- ``state bytes``: the bytes of the distinct storages behind the state's tensors (what the allocator
  holds for them, read from the tensors, not computed from a formula);
- ``RSS growth``: the process's resident set size minus its value at the first checkpoint (Linux;
  after the first steps have loaded the libraries; includes allocator caching, so it is context, not
  the headline);
- on CUDA, ``allocated``: ``torch.cuda.memory_allocated`` minus its value before the first step.

    python benchmarks/memory.py            # T = 10, 100, 1000, 10000 (Full AttnRes is O(T^2) time:
                                           # a few minutes at 10000)
    python benchmarks/memory.py --quick    # T up to 1000
"""

from __future__ import annotations

import argparse
import os
import time

import _common as C
import torch

from infiloop.model.connections import ConnectionConfig, build_connection


def storage_bytes(state: dict[str, torch.Tensor]) -> int:
    """Bytes of the distinct storages behind the state's tensors."""
    seen, total = set(), 0
    for t in state.values():
        s = t.untyped_storage()
        if s.data_ptr() not in seen:
            seen.add(s.data_ptr())
            total += s.nbytes()
    return total


def rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def run(name: str, checkpoints: list[int], tokens: int, d: int, device) -> list[dict]:
    torch.manual_seed(0)
    conn = build_connection(ConnectionConfig(name=name), d).to(device).eval()
    if name == "full_attnres":
        # The per-step queries start at zero (uniform weights); give them values so the run is generic.
        with torch.no_grad():
            conn.queries.normal_()
    else:
        with torch.no_grad():
            conn.q.normal_()
    cuda = torch.device(device).type == "cuda"
    g = torch.Generator().manual_seed(1)
    cand = lambda: torch.randn(tokens, d, generator=g).to(device)
    rss0 = None
    alloc0 = torch.cuda.memory_allocated() if cuda else None
    rows = []
    t0 = time.perf_counter()
    with torch.no_grad():
        state = conn.init(cand())
        t = 1  # candidates seen so far: z_0
        for target in sorted(checkpoints):
            while t < target:
                state, _, _ = conn.step(state, cand())
                t += 1
            C.sync(device)
            row = {
                "connection": name, "T": target, "tokens": tokens, "d": d,
                "state bytes": storage_bytes(state),
                "per token": f"{storage_bytes(state) / tokens:.0f}",
                "Connection.state_nbytes": conn.state_nbytes(state),
            }
            rss = rss_bytes()
            rss0 = rss if rss0 is None else rss0
            if rss is not None:
                row["RSS growth"] = f"{(rss - rss0) / 2**20:.2f} MiB"
            if cuda:
                row["allocated"] = torch.cuda.memory_allocated() - alloc0
            row["elapsed"] = C.fmt_time(time.perf_counter() - t0)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--T", default="10,100,1000,10000", help="comma-separated loop counts (checkpoints)")
    p.add_argument("--tokens", type=int, default=4, help="tokens whose state is kept")
    p.add_argument("--d", type=int, default=128, help="hidden size")
    p.add_argument("--connections", default="infiloop,full_attnres")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--quick", action="store_true", help="T up to 1000")
    a = p.parse_args(argv)
    C.set_threads(a.threads)
    checkpoints = [int(x) for x in a.T.split(",")]
    if a.quick:
        checkpoints = [t for t in checkpoints if t <= 1000] or [10, 100]
    print(C.header("Benchmark 3: persistent aggregation memory vs loop count T"))
    rows = []
    for name in a.connections.split(","):
        rows += run(name, checkpoints, a.tokens, a.d, a.device)
    print(C.table(rows))
    summary = []
    for name in a.connections.split(","):
        rs = [r for r in rows if r["connection"] == name]
        lo, hi = rs[0], rs[-1]
        summary.append(f"{name}: {lo['state bytes']} B at T={lo['T']} -> {hi['state bytes']} B at T={hi['T']} "
                       f"(x{hi['state bytes'] / lo['state bytes']:.1f})")
    print("; ".join(summary))
    inf = [r["state bytes"] for r in rows if r["connection"] == "infiloop"]
    if inf:
        print(f"infiloop_state_constant={len(set(inf)) == 1}")


if __name__ == "__main__":
    main()
