"""Benchmark 1: one InfiLoop connection step (eq. 5 in log space) — eager vs torch.compile vs the fused
Triton kernel (where CUDA exists).

Prints time per step (forward alone, as in evaluation, and forward + backward, as in training) and the
forward's achieved bandwidth against the bytes that must move: one read of z and of the state
(h, log D) and one write of the state; the diagnostics gamma and s (two numbers per token) are not
counted. The measured copy bandwidth of the same device is printed beside it.

    python benchmarks/connection_step.py                 # default shapes
    python benchmarks/connection_step.py --quick         # under a minute on a laptop
    python benchmarks/connection_step.py --no-compile    # skip torch.compile (no C++ compiler)
"""

from __future__ import annotations

import argparse

import _common as C
import torch


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--rows", default=None,
                   help="comma-separated token counts (batch x sequence); default 648,10368 on CPU "
                        "(8 and 128 Sudoku boards), 62208 on CUDA (768 boards)")
    p.add_argument("--d", default="512", help="comma-separated hidden sizes")
    p.add_argument("--dtype", default=None, help="comma-separated: float32,bfloat16 (default float32 on "
                                                 "CPU, both on CUDA)")
    p.add_argument("--reps", type=int, default=15, help="timed samples per variant (median reported)")
    p.add_argument("--inner", type=int, default=10, help="calls per timed sample")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--quick", action="store_true", help="small shapes and few repetitions")
    a = p.parse_args(argv)
    C.set_threads(a.threads)
    cuda = a.device.startswith("cuda")
    if a.quick:
        a.reps, a.inner = 5, 3
        a.rows = a.rows or "648"
    rows_list = [int(x) for x in (a.rows or ("62208" if cuda else "648,10368")).split(",")]
    d_list = [int(x) for x in a.d.split(",")]
    dtypes = [getattr(torch, x) for x in (a.dtype or ("float32,bfloat16" if cuda else "float32")).split(",")]

    print(C.header("Benchmark 1: one InfiLoop connection step"))
    with_triton = False
    if cuda:
        from infiloop.model.kernels.triton_step import HAS_TRITON

        with_triton = HAS_TRITON
    else:
        print("triton: not timed (no CUDA device; the interpreter is for correctness only)")
    bw = C.copy_bandwidth(max(step_bytes_max(rows_list, d_list, dtypes), 1 << 24), a.device, a.reps)
    print(f"measured copy bandwidth (read + write): {bw / 1e9:.1f} GB/s")
    rows = []
    for dtype in dtypes:
        for d in d_list:
            for n in rows_list:
                rows += C.bench_step(n, d, dtype, a.device, a.reps, a.inner, not a.no_compile, with_triton, bw)
    print(C.table(C.public(rows)))
    best = {}
    for r in rows:
        best.setdefault(r["impl"], []).append(r["_t_fwd"])
    print("median forward time per impl: " + ", ".join(f"{k}={C.fmt_time(C.median(v))}" for k, v in best.items()))


def step_bytes_max(rows_list, d_list, dtypes) -> int:
    return max(C.step_bytes(n, d, dt) for n in rows_list for d in d_list for dt in dtypes)


if __name__ == "__main__":
    main()
