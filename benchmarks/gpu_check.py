"""One-shot GPU check of the fused InfiLoop kernel (meant for a single run of a few minutes on an H200).

1. Correctness on CUDA: the Triton step (eq. 5 in log space) against the eager reference, float32 and
   bfloat16 (and bf16 candidates with a float32 state, as under autocast), forward outputs and the
   gradients of z, h, log D, q and log beta, on odd and on paper-sized shapes. Both are compared with
   a float64 evaluation of the same inputs: the kernel's error must be within twice the eager
   reference's error plus 1e-5 (float32) or 2^-7 (bfloat16) times (1 + max |truth|).
2. Speed of one step: eager vs torch.compile vs Triton, forward and forward + backward, and the
   forward's achieved bandwidth against a measured device-to-device copy; a sweep of the kernel's
   rows-per-program to show whether the default tile is right.
3. Whole-model overhead in the paper configuration: InfiLoop (Triton kernel) vs carry-last on both
   axes, training step and evaluation outer update, interleaved.

Prints one table (check, measured, target, verdict). Exits 1 if a correctness check fails; performance
targets are reported, not enforced. Without a CUDA device it prints a message and exits 0.

    python benchmarks/gpu_check.py                 # everything (a few minutes)
    python benchmarks/gpu_check.py --no-compile --no-model
    TRITON_INTERPRET=1 python benchmarks/gpu_check.py --self-test-cpu   # all code paths on CPU, tiny
                                                                        # shapes, timings meaningless
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import _common as C
import torch

TARGET_BW = 0.70  # of the measured copy bandwidth
TARGET_SPEEDUP = 3.0  # over eager, forward
TARGET_MODEL = 1.03  # InfiLoop / carry-last, paper configuration

# (name, leading shape, d, z dtype, state dtype, content, clip mode)
CASES_FULL = [
    ("paper fp32", (768, 81), 512, "float32", "float32", True, "active"),
    ("paper bf16", (768, 81), 512, "bfloat16", "bfloat16", True, "active"),
    ("paper bf16 z / fp32 state", (768, 81), 512, "bfloat16", "float32", True, "active"),
    ("odd fp32 d=100", (3, 37), 100, "float32", "float32", True, "active"),
    ("odd fp32 d=513 no content", (5, 7), 513, "float32", "float32", False, "none"),
    ("odd bf16 d=7", (1001,), 7, "bfloat16", "bfloat16", True, "active"),
    ("odd fp32 d=1", (13,), 1, "float32", "float32", True, "none"),
    ("wide fp32 d=4099", (3, 11), 4099, "float32", "float32", True, "active"),
]
CASES_CPU = [
    ("odd fp32 d=100", (3, 37), 100, "float32", "float32", True, "active"),
    ("odd bf16 d=48", (2, 9), 48, "bfloat16", "bfloat16", True, "active"),
    ("bf16 z / fp32 state d=33", (2, 9), 33, "bfloat16", "float32", True, "active"),
    ("odd fp32 d=7 no content", (5,), 7, "float32", "float32", False, "none"),
]
TOL = {"float32": 1e-5, "bfloat16": 2.0**-7}


def _clip_between_scores(raw: torch.Tensor, mode: str) -> float | None:
    """A clip that some rows exceed and some do not, placed in the widest gap near the median."""
    if mode == "none":
        return None
    srt = raw.flatten().sort().values
    n = srt.numel()
    if n == 1:
        return float(srt[0]) - 0.5
    lo, hi = max(0, n // 2 - 50), min(n - 1, n // 2 + 50)
    gaps = srt[lo + 1 : hi + 1] - srt[lo:hi]
    k = lo + int(gaps.argmax())
    return float(srt[k] + srt[k + 1]) / 2


def check_case(case, device) -> list[dict]:
    from infiloop.model.kernels import fused_step
    from infiloop.model.kernels.reference import infiloop_step as ref_step

    name, lead, d, zdt, sdt, content, clip_mode = case
    zdt_, sdt_ = getattr(torch, zdt), getattr(torch, sdt)
    g = torch.Generator().manual_seed(0)
    eps = 1e-6
    q = torch.randn(d, generator=g)
    z = torch.randn(*lead, d, generator=g)
    z.view(-1, d)[::3] += 2.0 * q
    h = torch.randn(*lead, d, generator=g)
    ld = torch.randn(*lead, generator=g)
    z, h, ld, q = z.to(device, zdt_), h.to(device, sdt_), ld.to(device, sdt_), q.to(device)
    zd = z.double()
    raw = (zd * torch.rsqrt(zd.pow(2).mean(-1, keepdim=True) + eps)) @ q.to(zdt_).double()
    clip = _clip_between_scores(raw.cpu(), clip_mode)
    wg = torch.Generator().manual_seed(1)
    weights = [torch.randn(s, generator=wg, dtype=torch.float64).to(device)
               for s in (z.shape, lead, lead, lead)]

    def evaluate(fn, cast):
        ins = [t.to(cast) if cast is not None else t.clone() for t in (z, h, ld, q)]
        for t in ins:
            t.requires_grad_()
        rho = torch.tensor(0.3, device=device, dtype=torch.float64 if cast == torch.float64 else torch.float32)
        rho.requires_grad_()
        outs = fn(*ins, -torch.nn.functional.softplus(rho), clip, eps, content)
        loss = sum((o.double() * w).sum() for o, w in zip(outs, weights))
        wrt = [*ins[:3], rho] + ([ins[3]] if content else [])
        grads = torch.autograd.grad(loss, wrt)
        names = ["h", "log_d", "gamma", "s", "grad z", "grad h", "grad log_d", "grad log_beta", "grad q"]
        return dict(zip(names, [*outs, *grads]))

    got = evaluate(fused_step, None)
    eager = evaluate(ref_step, None)
    truth = evaluate(ref_step, torch.float64)
    tol = TOL[zdt if zdt != "float32" else sdt]
    rows = []
    worst, worst_name, dtype_ok = 0.0, "", True
    for k, t in truth.items():
        dtype_ok &= got[k].dtype == eager[k].dtype and got[k].shape == eager[k].shape
        e_k = float((got[k].double() - t).abs().max()) if t.numel() else 0.0
        e_e = float((eager[k].double() - t).abs().max()) if t.numel() else 0.0
        allowed = 2 * e_e + tol * (1 + float(t.abs().max()))
        if e_k / allowed > worst:
            worst, worst_name = e_k / allowed, f"{k} (err {e_k:.2e}, eager {e_e:.2e})"
    n_clamped = int((raw > clip).sum()) if clip is not None else 0
    rows.append({
        "check": f"correct: {name} {tuple(lead)}x{d}" + (f", {n_clamped}/{raw.numel()} clamped" if clip else ""),
        "measured": f"worst err/allowed {worst:.2f} at {worst_name}" + ("" if dtype_ok else "; DTYPE MISMATCH"),
        "target": "<= 1, dtypes equal",
        "verdict": "PASS" if worst <= 1 and dtype_ok else "FAIL",
        "_fail": not (worst <= 1 and dtype_ok),
    })
    return rows


def speed(device, reps: int, with_compile: bool, rows_n: int = 768 * 81, d: int = 512) -> list[dict]:
    bw = C.copy_bandwidth(C.step_bytes(rows_n, d, torch.float32), device, reps)
    out = [{"check": "device-to-device copy bandwidth", "measured": f"{bw / 1e9:.0f} GB/s", "target": "",
            "verdict": ""}]
    for dtype in (torch.float32, torch.bfloat16):
        res = C.bench_step(rows_n, d, dtype, device, reps, 20 if device == "cuda" else 1, with_compile, True, bw)
        by = {r["impl"]: r for r in res}
        nbytes = C.step_bytes(rows_n, d, dtype)
        dn = str(dtype).replace("torch.", "")
        for impl, r in by.items():
            out.append({"check": f"step {dn} {impl} ({rows_n}x{d})",
                        "measured": f"fwd {r['fwd']} ({r['fwd GB/s']} GB/s), fwd+bwd {r['fwd+bwd']}",
                        "target": "", "verdict": ""})
        t = by["triton"]
        frac = nbytes / t["_t_fwd"] / bw
        sp = by["eager"]["_t_fwd"] / t["_t_fwd"]
        sp_b = by["eager"]["_t_fwd_bwd"] / t["_t_fwd_bwd"]
        out.append({"check": f"triton {dn} fwd bandwidth / copy", "measured": f"{100 * frac:.0f}%",
                    "target": f">= {100 * TARGET_BW:.0f}%", "verdict": "met" if frac >= TARGET_BW else "NOT MET"})
        out.append({"check": f"triton {dn} speedup vs eager", "measured": f"fwd {sp:.1f}x, fwd+bwd {sp_b:.1f}x",
                    "target": f">= {TARGET_SPEEDUP:.0f}x", "verdict": "met" if sp >= TARGET_SPEEDUP else "NOT MET"})
        if "torch.compile" in by:
            out.append({"check": f"triton {dn} vs torch.compile",
                        "measured": f"fwd {by['torch.compile']['_t_fwd'] / t['_t_fwd']:.2f}x, fwd+bwd "
                                    f"{by['torch.compile']['_t_fwd_bwd'] / t['_t_fwd_bwd']:.2f}x",
                        "target": "", "verdict": ""})
    out.append(block_sweep(device, reps, bw, rows_n, d))
    return out


def block_sweep(device, reps: int, bw: float, rows_n: int, d: int) -> dict:
    """Forward time of the kernel for several rows-per-program (BLOCK_R) values, float32."""
    from infiloop.model.kernels import triton_step as ts

    z, h, ld, q, rho = C.step_inputs(rows_n, d, torch.float32, device)
    lb = -torch.nn.functional.softplus(rho)
    dtypes = ts._out_dtypes(z, h, ld)
    default = ts.launch_config(rows_n, d)[0]
    res = {}
    for br in sorted({1, 2, 4, 8, 16, 32, default}):
        fn = lambda br=br: ts._forward(z, h, ld, q, lb, 8.0, 1e-6, True, dtypes, block_r=br)
        res[br] = C.median(C.time_fn(fn, device, reps, inner=20 if device == "cuda" else 1))
    best = min(res, key=res.get)
    nbytes = C.step_bytes(rows_n, d, torch.float32)
    txt = ", ".join(f"{br}: {nbytes / t / bw * 100:.0f}%" for br, t in res.items())
    return {"check": f"BLOCK_R sweep fp32 {rows_n}x{d} (default {default})", "measured": f"% of copy bw: {txt}",
            "target": f"best {best}", "verdict": "default is best" if best == default else "tune?"}


def model_overhead(device, reps: int, preset: str = "paper", batch: int = 768, backend: str = "auto") -> list[dict]:
    out = []
    for dtype in (torch.bfloat16, torch.float32):
        r = C.bench_overhead(preset, batch, device, reps, dtype=dtype, backend=backend)
        dn = str(dtype).replace("torch.", "")
        for kind, label in (("train", "training step"), ("eval", "eval outer update")):
            ratio = r[f"{kind}_ratio"]
            out.append({
                "check": f"model {preset} b{batch} {dn}: {label}",
                "measured": f"infiloop {C.fmt_time(r[f'{kind}_infiloop'])} / carry_last "
                            f"{C.fmt_time(r[f'{kind}_carry_last'])} = {ratio:.3f}",
                "target": f"<= {TARGET_MODEL:.2f}",
                "verdict": "met" if ratio <= TARGET_MODEL else "NOT MET",
            })
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--model-reps", type=int, default=8)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile in the step timing")
    p.add_argument("--no-model", action="store_true", help="skip the whole-model overhead")
    p.add_argument("--self-test-cpu", action="store_true",
                   help="run every part on CPU tensors and tiny shapes (needs TRITON_INTERPRET=1); "
                        "checks the script, its timings mean nothing")
    a = p.parse_args(argv)
    print(C.header("GPU check: fused InfiLoop kernel"))
    if a.self_test_cpu:
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("--self-test-cpu needs TRITON_INTERPRET=1 in the environment")
            return 2
        device, cases = "cpu", CASES_CPU
    elif not torch.cuda.is_available():
        print("No CUDA device: nothing to check here. Run this script on a machine with an NVIDIA GPU "
              "(the CPU checks of the kernel are in tests/test_kernels.py).")
        return 0
    else:
        device, cases = "cuda", CASES_FULL
    from infiloop.model.kernels.triton_step import HAS_TRITON

    if not HAS_TRITON:
        print("triton is not installed: cannot check the fused kernel")
        return 1

    t0 = time.perf_counter()
    rows: list[dict] = []

    def section(fn, *args):
        try:
            rows.extend(fn(*args))
        except Exception as e:  # report and go on: one failing part must not hide the others
            traceback.print_exc()
            rows.append({"check": f"{fn.__name__} crashed", "measured": f"{type(e).__name__}: {e}"[:200],
                         "target": "", "verdict": "FAIL", "_fail": fn in (check_case,)})
        print(f"[{time.perf_counter() - t0:.0f} s] {fn.__name__} done", file=sys.stderr, flush=True)

    for case in cases:
        section(check_case, case, device)
    if device == "cuda":
        section(speed, device, a.reps, not a.no_compile)
        if not a.no_model:
            section(model_overhead, device, a.model_reps)
    else:
        # Exercise the timing code paths on tiny shapes (the numbers mean nothing under the interpreter).
        section(speed, device, 1, False, 16, 8)
        section(model_overhead, device, 1, "smoke", 1, "triton")
    print(C.table(C.public(rows)))
    failed = [r["check"] for r in rows if r.get("_fail")]
    print(f"total time {time.perf_counter() - t0:.0f} s")
    if failed:
        print(f"CORRECTNESS FAILED: {failed}")
        return 1
    print("correctness: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
