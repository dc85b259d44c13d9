"""Shared pieces of the benchmark scripts: the machine header, timers and the measurements that more
than one script makes (the connection step of benchmark 1 and the whole-model cost of benchmark 2 are
also run by ``gpu_check.py``).

Importing this module puts the repository root on ``sys.path``, so the scripts run as
``python benchmarks/<name>.py`` from anywhere without installing the package.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Speed is measured on the libraries' own kernels (the native numeric mode, infiloop/numeric.py), as every time in
# benchmarks/RESULTS.md was: the reproducible mode caps oneDNN at AVX2, which has no bf16 instructions (a bf16 step on
# the CPU 12x slower). INFILOOP_BENCH_NUMERIC=reproducible times the mode instead. Only in a benchmark's own process,
# before torch is loaded: a test that imports this module keeps its process's mode (its libraries chose already).
if "torch" not in sys.modules:
    os.environ["INFILOOP_NUMERIC"] = os.environ.get("INFILOOP_BENCH_NUMERIC", "native")

import torch  # noqa: E402

from infiloop.machine import cpu_model, usable_cpus  # noqa: E402

# --------------------------------------------------------------------------------------------------
# Machine header
# --------------------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    v = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        v["triton"] = triton.__version__
    except ImportError:
        v["triton"] = "not installed"
    if torch.cuda.is_available():
        v["cuda"] = str(torch.version.cuda)
    return v


def header(title: str, argv: list[str] | None = None) -> str:
    """Lines naming the benchmark, the machine, the versions, the date and the command."""
    argv = sys.argv if argv is None else argv
    v = versions()
    lines = [
        f"# {title}",
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine: {platform.node()} | CPU: {cpu_model()} | cores: {usable_cpus()} | "
        f"torch threads: {torch.get_num_threads()} | numeric mode: {os.environ.get('INFILOOP_NUMERIC')}",
    ]
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        lines.append(f"GPU: {p.name} ({p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs)")
    else:
        lines.append("GPU: none (CUDA not available)")
    lines.append("versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    lines.append("command: python " + " ".join(argv))
    return "\n".join(lines)


def gpu_facts() -> dict[str, str]:
    """The facts a GPU measurement is read against: date, GPU name, driver (the CUDA version torch was built with
    and nvidia-smi's driver version, where nvidia-smi answers), torch and Triton versions."""
    import shutil
    import subprocess

    v = versions()
    facts = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "host": platform.node(),
             "gpu": "none (CUDA not available)", "cuda (torch build)": str(torch.version.cuda),
             "nvidia driver": "unknown (no nvidia-smi)", "torch": v["torch"], "triton": v["triton"],
             "python": v["python"], "cpu": f"{cpu_model()} x {usable_cpus()}"}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        facts["gpu"] = f"{p.name} ({p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs)"
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                facts["nvidia driver"] = out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return facts


def set_threads(n: int | None) -> None:
    torch.set_num_threads(n if n else usable_cpus())


# --------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------


def sync(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_fn(fn: Callable[[], object], device, reps: int, inner: int = 1, warmup: int = 2) -> list[float]:
    """Seconds per call of ``fn``: ``reps`` samples, each the mean over ``inner`` back-to-back calls."""
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(device)
        out.append((time.perf_counter() - t0) / inner)
    return out


def interleaved(fns: dict[str, Callable[[], object]], device, reps: int, warmup: int = 1) -> dict[str, list[float]]:
    """Time several functions in one run, alternating them every repetition (ABBA order, so slow drifts
    of a shared machine fall on both sides equally). Returns seconds per call, per name."""
    names = list(fns)
    for _ in range(warmup):
        for n in names:
            fns[n]()
    sync(device)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            sync(device)
            t0 = time.perf_counter()
            fns[n]()
            sync(device)
            out[n].append(time.perf_counter() - t0)
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def table(rows: list[dict], cols: list[str] | None = None) -> str:
    """A GitHub-style markdown table of ``rows`` (dicts), columns in order of first appearance."""
    if not rows:
        return "(no rows)"
    if cols is None:
        cols = []
        for r in rows:
            cols += [k for k in r if k not in cols]
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda xs: "| " + " | ".join(x.ljust(w) for x, w in zip(xs, width)) + " |"
    return "\n".join([line(cols), "|" + "|".join("-" * (w + 2) for w in width) + "|", *map(line, cells)])


# --------------------------------------------------------------------------------------------------
# Benchmark 1: one connection step
# --------------------------------------------------------------------------------------------------


def step_inputs(rows: int, d: int, dtype: torch.dtype, device, requires_grad: bool = False, seed: int = 0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dtype)
    z, h, log_d = mk(rows, d), mk(rows, d), mk(rows)
    q = torch.randn(d, generator=g).to(device=device, dtype=torch.float32)
    rho = torch.tensor(0.3, device=device)
    if requires_grad:
        for t in (z, h, log_d, q, rho):
            t.requires_grad_()
    return z, h, log_d, q, rho


def step_bytes(rows: int, d: int, dtype: torch.dtype) -> int:
    """Bytes one step must move: one read of z and of the state (h, log D), one write of the state."""
    e = torch.empty((), dtype=dtype).element_size()
    return rows * (3 * d + 2) * e


def copy_bandwidth(nbytes: int, device, reps: int) -> float:
    """Measured device-to-device (or memory-to-memory) copy bandwidth in bytes/s, counting read + write."""
    n = max(nbytes // 8, 1)
    src = torch.empty(n, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    t = median(time_fn(lambda: dst.copy_(src), device, reps, inner=10))
    return 2 * src.numel() * 4 / t


def step_variants(device, with_compile: bool, with_triton: bool) -> dict[str, Callable]:
    """The implementations of one step compared by benchmark 1: name -> fn(z, h, log_d, q, log_beta)."""
    from infiloop.model.kernels.reference import infiloop_step

    clip, eps = 8.0, 1e-6
    variants: dict[str, Callable] = {
        "eager": lambda z, h, ld, q, lb: infiloop_step(z, h, ld, q, lb, clip, eps, True),
    }
    if with_compile:
        compiled = torch.compile(infiloop_step, dynamic=False)
        variants["torch.compile"] = lambda z, h, ld, q, lb: compiled(z, h, ld, q, lb, clip, eps, True)
    if with_triton:
        from infiloop.model.kernels import fused_step

        variants["triton"] = lambda z, h, ld, q, lb: fused_step(z, h, ld, q, lb, clip, eps, True)
    return variants


def bench_step(rows: int, d: int, dtype: torch.dtype, device, reps: int, inner: int,
               with_compile: bool, with_triton: bool, copy_bw: float | None = None) -> list[dict]:
    """Time per step (forward, and forward + backward) of each variant, and the achieved bandwidth of
    the forward against the bytes that must move."""
    variants = step_variants(device, with_compile, with_triton)
    nbytes = step_bytes(rows, d, dtype)
    out = []
    z, h, ld, q, rho = step_inputs(rows, d, dtype, device)
    zg, hg, ldg, qg, rhog = step_inputs(rows, d, dtype, device, requires_grad=True)
    weights = None
    eager_fwd = eager_bwd = None
    for name, fn in variants.items():
        lb = -torch.nn.functional.softplus(rho)

        def fwd(fn=fn, lb=lb):
            with torch.no_grad():
                return fn(z, h, ld, q, lb)

        def fwd_bwd(fn=fn):
            nonlocal weights
            outs = fn(zg, hg, ldg, qg, -torch.nn.functional.softplus(rhog))
            if weights is None:
                weights = [torch.randn_like(o, dtype=torch.float32) for o in outs[:3]]
            loss = sum((o.float() * w).sum() for o, w in zip(outs[:3], weights))
            return torch.autograd.grad(loss, (zg, hg, ldg, qg, rhog))

        t_f = median(time_fn(fwd, device, reps, inner=inner, warmup=3))
        t_fb = median(time_fn(fwd_bwd, device, reps, inner=max(1, inner // 2), warmup=3))
        if name == "eager":
            eager_fwd, eager_bwd = t_f, t_fb
        row = {
            "impl": name, "rows": rows, "d": d, "dtype": str(dtype).replace("torch.", ""),
            "fwd": fmt_time(t_f), "fwd GB/s": f"{nbytes / t_f / 1e9:.1f}",
        }
        if copy_bw:
            row["fwd % copy bw"] = f"{100 * nbytes / t_f / copy_bw:.0f}%"
        row["fwd speedup vs eager"] = f"{eager_fwd / t_f:.2f}x"
        row["fwd+bwd"] = fmt_time(t_fb)
        row["fwd+bwd speedup vs eager"] = f"{eager_bwd / t_fb:.2f}x"
        row["_t_fwd"], row["_t_fwd_bwd"] = t_f, t_fb
        out.append(row)
    return out


def public(rows: list[dict]) -> list[dict]:
    """Rows without the raw numbers kept for computation (keys starting with '_')."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


# --------------------------------------------------------------------------------------------------
# Benchmark 2: whole-model cost of the connection
# --------------------------------------------------------------------------------------------------


def model_pair(preset: str, device, backend: str = "auto", seed: int = 0):
    """The same model (same weights) with InfiLoop on both axes and with carry-last on both axes."""
    from infiloop.experiments.settings.recipes import profile_model
    from infiloop.model import LoopedReasoner
    from infiloop.model.connections import ConnectionConfig

    base = profile_model(preset)
    models = {}
    for name in ("infiloop", "carry_last"):
        conn = ConnectionConfig(name=name, backend=backend)
        cfg = base.replace(inner=conn, outer=ConnectionConfig(name=name, backend=backend))
        torch.manual_seed(seed)
        models[name] = LoopedReasoner(cfg).to(device)
    # Identical block weights: the carry-last model has no connection parameters, so load non-strictly.
    models["carry_last"].load_state_dict(models["infiloop"].state_dict(), strict=False)
    return models


def bench_overhead(preset: str, batch: int, device, reps: int, dtype: torch.dtype = torch.float32,
                   backend: str = "auto") -> dict:
    """Median time of one training step (segment forward + cross-entropy + backward + AdamW) and of one
    evaluation outer update (no grad), InfiLoop vs carry-last on both axes, interleaved in one run."""
    models = model_pair(preset, device, backend)
    cfg = models["infiloop"].cfg
    g = torch.Generator().manual_seed(1)
    inputs = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=g).to(device)
    labels = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), generator=g).to(device)
    autocast = torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=dtype != torch.float32)

    train_fns, eval_fns = {}, {}
    for name, model in models.items():
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1.0)
        state = {"carry": model.initial_carry(batch, device)}

        def train_step(model=model, opt=opt, state=state):
            with autocast:
                carry, logits, q_halt, _ = model(state["carry"], inputs)
                loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            state["carry"] = carry

        with torch.no_grad():
            x = model.embed(inputs)
        ev = {"carry": model.initial_carry(batch, device)}

        def eval_update(model=model, x=x, ev=ev):
            with torch.no_grad(), autocast:
                ev["carry"], _ = model.outer_update(ev["carry"], x)

        train_fns[name], eval_fns[name] = train_step, eval_update

    t_train = interleaved(train_fns, device, reps)
    t_eval = interleaved(eval_fns, device, reps * 2)
    res = {"preset": preset, "batch": batch, "params": models["infiloop"].n_params(),
           "connection params": models["infiloop"].connection_params()}
    for kind, t in (("train", t_train), ("eval", t_eval)):
        a, b = median(t["infiloop"]), median(t["carry_last"])
        res[f"{kind}_infiloop"], res[f"{kind}_carry_last"], res[f"{kind}_ratio"] = a, b, a / b
        # Spread of the paired ratios (i-th repetition of each), a cheap noise estimate.
        pairs = sorted(x / y for x, y in zip(t["infiloop"], t["carry_last"]))
        res[f"{kind}_ratio_iqr"] = (pairs[len(pairs) // 4], pairs[(3 * len(pairs)) // 4])
        res[f"{kind}_ratio_paired"] = median(pairs)
    return res


def overhead_rows(results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        for kind, label in (("train", "training step"), ("eval", "eval outer update")):
            lo, hi = r[f"{kind}_ratio_iqr"]
            rows.append({
                "config": r["preset"], "batch": r["batch"], "measure": label,
                "carry_last": fmt_time(r[f"{kind}_carry_last"]), "infiloop": fmt_time(r[f"{kind}_infiloop"]),
                "ratio of medians": f"{r[f'{kind}_ratio']:.3f}",
                "paired ratios: median": f"{r[f'{kind}_ratio_paired']:.3f}",
                "IQR": f"{lo:.3f}-{hi:.3f}",
            })
    return rows
