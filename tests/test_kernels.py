"""The fused Triton InfiLoop step (``infiloop/model/kernels/triton_step.py``) against the eager reference.

The kernels run on the CPU under Triton's interpreter. ``TRITON_INTERPRET=1`` has to be in the
environment before the kernel module is imported (Triton decides at decoration time), and other tests
in the same process may already have imported it, so every interpreter check runs in one subprocess:
this file re-executed as a script (``python tests/test_kernels.py --worker``). The worker computes all
cases, prints one JSON line per case, and the parent asserts them, one pytest test per case.

Tolerances (max abs error per tensor, relative to that tensor's max magnitude in the reference):
- float32: forward outputs and gradients within ``1e-5 * (1 + max|ref|)`` of the eager reference.
- bfloat16: the kernel computes in float32 and rounds once on store, while the eager reference rounds
  after every op, so both are compared with a float64 evaluation of the same (bf16-valued) inputs:
  the kernel's error must be within ``2 * err_eager + 2^-7 * (1 + max|truth|)`` (no worse than the
  reference beyond one bf16 rounding) and within ``5e-2 * (1 + max|truth|)`` outright.
Output dtypes must equal the reference's exactly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zlib
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HAS_TRITON = importlib.util.find_spec("triton") is not None

FP32_TOL = 1e-5
BF16_REL = 2.0**-7
BF16_ABS_CAP = 5e-2

# (case id, d, leading shape, dtype, content, clip mode, log_d scale, which outputs get a gradient)
# clip mode: "none" (no clip), "inactive" (clip above every score), "active" (clip between scores so
# that some rows are clamped and some are not).
CASES = [
    ("d1-r1-f32", 1, (1,), "float32", True, "none", 1.0, "all"),
    ("d1-r37-f32-clip", 1, (37,), "float32", True, "active", 1.0, "all"),
    ("d7-3x5-f32-clip", 7, (3, 5), "float32", True, "active", 1.0, "all"),
    ("d7-3x5-f32-nocontent", 7, (3, 5), "float32", False, "inactive", 1.0, "all"),
    ("d48-2x3x7-f32-clipoff", 48, (2, 3, 7), "float32", True, "inactive", 1.0, "all"),
    ("d100-r300-f32-clip", 100, (300,), "float32", True, "active", 1.0, "all"),
    ("d100-r300-f32-h-only", 100, (300,), "float32", True, "active", 1.0, "h"),
    ("d513-r9-f32-clip", 513, (9,), "float32", True, "active", 1.0, "all"),
    ("d513-r9-f32-nocontent", 513, (9,), "float32", False, "none", 1.0, "all"),
    ("d64-r20-f32-bigstate", 64, (20,), "float32", True, "active", 3000.0, "all"),
    ("d7-r13-bf16-clip", 7, (13,), "bfloat16", True, "active", 1.0, "all"),
    ("d100-4x9-bf16-clip", 100, (4, 9), "bfloat16", True, "active", 1.0, "all"),
    ("d513-r6-bf16-nocontent", 513, (6,), "bfloat16", False, "none", 1.0, "all"),
    ("d48-r33-bf16-noclip", 48, (33,), "bfloat16", True, "none", 1.0, "all"),
    # bf16 candidates with a float32 state, as under autocast: outputs promote as in the reference.
    ("d33-r21-bf16z-f32state", 33, (21,), "bfloat16+float32", True, "active", 1.0, "all"),
]
OUT_NAMES = ("h", "log_d", "gamma", "s")


# --------------------------------------------------------------------------------------------------
# Worker (runs under TRITON_INTERPRET=1 in a subprocess)
# --------------------------------------------------------------------------------------------------


def _run_case(case) -> dict:
    import torch

    from infiloop.model.kernels import infiloop_step as dispatch_step
    from infiloop.model.kernels.reference import infiloop_step as ref_step

    cid, d, lead, dtype_name, content, clip_mode, ld_scale, grads_of = case
    z_name, _, state_name = dtype_name.partition("+")
    dtype = getattr(torch, z_name)
    sdtype = getattr(torch, state_name or z_name)
    g = torch.Generator().manual_seed(zlib.crc32(cid.encode()))
    eps = 1e-6

    q64 = torch.randn(d, generator=g, dtype=torch.float64)
    z64 = torch.randn(*lead, d, generator=g, dtype=torch.float64)
    # Push a third of the rows towards q so that their scores are large (some rows hit an active clip).
    rows = z64.reshape(-1, d)
    rows[::3] += 2.0 * q64
    h64 = torch.randn(*lead, d, generator=g, dtype=torch.float64)
    ld64 = ld_scale * torch.randn(*lead, generator=g, dtype=torch.float64)
    rho64 = torch.tensor(0.3, dtype=torch.float64)

    # Round the inputs to the storage dtype first: every evaluation sees the same values.
    z_s, q_s = z64.to(dtype), q64.float()  # q is a float32 parameter, as in the model
    h_s, ld_s = h64.to(sdtype), ld64.to(sdtype)
    raw = (z_s.double() * torch.rsqrt(z_s.double().pow(2).mean(-1, keepdim=True) + eps)) @ q_s.to(dtype).double()
    if clip_mode == "none":
        clip = None
    elif clip_mode == "inactive":
        clip = float(raw.max()) + 1.0
    else:
        srt = raw.flatten().sort().values
        n = srt.numel()
        if n == 1:
            clip = float(srt[0]) - 0.5
        else:
            lo, hi = max(0, n // 4 - 1), min(n - 1, (3 * n) // 4 + 1)
            gaps = srt[lo + 1 : hi + 1] - srt[lo:hi]
            k = lo + int(gaps.argmax())
            clip = float(srt[k] + srt[k + 1]) / 2

    n_clamped = int((raw > clip).sum()) if clip is not None else 0

    def evaluate(fn, cast):
        """``cast=None``: the storage dtypes; ``torch.float64``: the float64 'truth'."""
        z, h, ld, q = (t.to(cast) if cast is not None else t.clone() for t in (z_s, h_s, ld_s, q_s))
        for t in (z, h, ld, q):
            t.requires_grad_()
        rho = rho64.to(torch.float64 if cast == torch.float64 else torch.float32).requires_grad_()
        log_beta = -torch.nn.functional.softplus(rho)
        outs = fn(z, h, ld, q, log_beta, clip, eps, content)
        wg = torch.Generator().manual_seed(7)
        if grads_of == "h":
            loss = (outs[0].double() * torch.randn(outs[0].shape, generator=wg, dtype=torch.float64)).sum()
        else:
            loss = sum((o.double() * torch.randn(o.shape, generator=wg, dtype=torch.float64)).sum() for o in outs)
        inputs = {"z": z, "h": h, "log_d": ld, "rho": rho}
        if content:
            inputs["q"] = q
        grads = torch.autograd.grad(loss, list(inputs.values()))
        res = dict(zip(OUT_NAMES, outs))
        res.update({f"grad_{k}": v for k, v in zip(inputs, grads)})
        if not content:
            # q must get no gradient at all without the content score, as in the reference.
            outs2 = fn(z, h, ld, q, -torch.nn.functional.softplus(rho), clip, eps, content)
            gq = torch.autograd.grad(outs2[0].sum(), q, allow_unused=True)[0]
            res["q_grad_is_none"] = gq is None
        return res

    def kernel(*a):
        return dispatch_step(*a, backend="triton")

    got = evaluate(kernel, None)
    ref = evaluate(ref_step, None)
    exact = dtype == sdtype == torch.float32
    out = {"id": cid, "dtype": "float32" if exact else "bfloat16", "n_clamped": n_clamped,
           "n_rows": int(raw.numel()), "tensors": {}}
    truth = None if exact else evaluate(ref_step, torch.float64)
    for name, r in ref.items():
        if name == "q_grad_is_none":
            out["q_grad_none"] = [got[name], r]
            continue
        k = got[name]
        entry = {"dtype_ok": k.dtype == r.dtype and k.shape == r.shape, "dtypes": [str(k.dtype), str(r.dtype)]}
        if truth is None:
            entry["err"] = float((k.double() - r.double()).abs().max()) if k.numel() else 0.0
            entry["scale"] = float(r.double().abs().max()) if r.numel() else 0.0
        else:
            t = truth[name]
            entry["err"] = float((k.double() - t).abs().max())
            entry["err_eager"] = float((r.double() - t).abs().max())
            entry["scale"] = float(t.abs().max())
        out["tensors"][name] = entry
    return out


def _run_module_check() -> dict:
    """The InfiLoop connection with backend='triton' vs 'eager' over several steps (state carried)."""
    import torch

    from infiloop.model.connections import ConnectionConfig, build_connection

    torch.manual_seed(0)
    d, lead = 24, (2, 5)
    eager = build_connection(ConnectionConfig(name="infiloop", backend="eager"), d)
    fused = build_connection(ConnectionConfig(name="infiloop", backend="triton"), d)
    with torch.no_grad():
        eager.q.normal_()
    fused.load_state_dict(eager.state_dict())
    zs = [torch.randn(*lead, d) for _ in range(6)]
    errs = []
    losses = []
    for conn in (eager, fused):
        state = conn.init(zs[0])
        total = 0.0
        hs = []
        for z in zs[1:]:
            state, h, diag = conn.step(state, z)
            hs.append(h)
            total = total + h.square().mean() + diag["gamma"].mean()
        total.backward()
        losses.append((hs, conn.q.grad.clone(), conn.rho.grad.clone()))
    for a, b in zip(losses[0][0], losses[1][0]):
        errs.append(float((a - b).abs().max()))
    return {
        "h_err": max(errs),
        "q_grad_err": float((losses[0][1] - losses[1][1]).abs().max()),
        "rho_grad_err": float((losses[0][2] - losses[1][2]).abs().max()),
        "q_grad_scale": float(losses[0][1].abs().max()),
    }


def _run_compile_check() -> dict:
    """Five steps of the InfiLoop connection on the Triton kernel, compiled whole (``fullgraph=True``: no graph
    break at the custom operator; the fake-tensor rule, not the interpreter, meets the tracer) against the same
    steps in eager mode, forward and gradients."""
    import torch

    from infiloop.model.connections import ConnectionConfig, build_connection

    torch.manual_seed(0)
    conn = build_connection(ConnectionConfig(name="infiloop", backend="triton"), 24)
    with torch.no_grad():
        conn.q.normal_()
    zs = [torch.randn(2, 5, 24) for _ in range(6)]

    def run(zs):
        state = conn.init(zs[0])
        out = 0.0
        for z in zs[1:]:
            state, h, diag = conn.step(state, z)
            out = out + h.square().mean() + diag["gamma"].mean()
        return out

    def value_and_grads(fn):
        loss = fn(zs)
        return [loss.detach(), *torch.autograd.grad(loss, [conn.q, conn.rho])]

    eager = value_and_grads(run)
    explanation = torch._dynamo.explain(run)(zs)
    compiled = value_and_grads(torch.compile(run, fullgraph=True, backend="aot_eager"))
    return {"graphs": explanation.graph_count, "breaks": explanation.graph_break_count,
            "err": max(float((a - b).abs().max()) for a, b in zip(compiled, eager))}


def _run_guard_check() -> dict:
    """Every kernel launch of a forward and backward happens inside ``on_device`` entered with the tensors' device:
    the guard is replaced by a recorder and each kernel by a wrapper that notes whether a guard is open."""
    import contextlib

    import torch

    from infiloop.model.kernels import fused_step, triton_step

    entered, launches, open_guards = [], [], []

    @contextlib.contextmanager
    def recorder(device):
        entered.append(str(device))
        open_guards.append(device)
        try:
            yield
        finally:
            open_guards.pop()

    class Watched:
        def __init__(self, name, kernel):
            self.name, self.kernel = name, kernel

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launches.append([self.name, [str(d) for d in open_guards]])
                return self.kernel[grid](*args, **kwargs)
            return launch

    real = triton_step.on_device, triton_step._fwd_kernel, triton_step._bwd_kernel
    triton_step.on_device = recorder
    triton_step._fwd_kernel, triton_step._bwd_kernel = Watched("fwd", real[1]), Watched("bwd", real[2])
    try:
        z, h = (torch.randn(2, 3, 8, requires_grad=True) for _ in range(2))
        q = torch.randn(8, requires_grad=True)
        out = fused_step(z, h, torch.zeros(2, 3), q, torch.tensor(-0.5), 8.0, 1e-6, True)
        torch.autograd.grad(sum(o.float().sum() for o in out), (z, h, q))
    finally:
        triton_step.on_device, triton_step._fwd_kernel, triton_step._bwd_kernel = real
    return {"entered": entered, "launches": launches}


def _worker() -> None:
    for case in CASES:
        print("CASE " + json.dumps(_run_case(case)), flush=True)
    print("MODULE " + json.dumps(_run_module_check()), flush=True)
    print("COMPILE " + json.dumps(_run_compile_check()), flush=True)
    print("GUARD " + json.dumps(_run_guard_check()), flush=True)


# --------------------------------------------------------------------------------------------------
# Parent (pytest)
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _worker_results() -> tuple[dict, dict, dict, dict]:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"kernel worker failed (rc={proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    cases, module, compiled, guard = {}, {}, {}, {}
    for line in proc.stdout.splitlines():
        if line.startswith("CASE "):
            c = json.loads(line[5:])
            cases[c["id"]] = c
        elif line.startswith("MODULE "):
            module = json.loads(line[7:])
        elif line.startswith("COMPILE "):
            compiled = json.loads(line[8:])
        elif line.startswith("GUARD "):
            guard = json.loads(line[6:])
    return cases, module, compiled, guard


needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")


@needs_triton
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fused_step_matches_reference(case):
    res = _worker_results()[0][case[0]]
    if case[5] == "active" and res["n_rows"] > 1:
        assert 0 < res["n_clamped"] < res["n_rows"], "the test should clamp some rows and not others"
    if "q_grad_none" in res:
        assert res["q_grad_none"] == [True, True], "without the content score q gets no gradient"
    failures = []
    for name, e in res["tensors"].items():
        if not e["dtype_ok"]:
            failures.append(f"{name}: dtype/shape {e['dtypes'][0]} vs reference {e['dtypes'][1]}")
            continue
        if res["dtype"] == "float32":
            tol = FP32_TOL * (1 + e["scale"])
            ok = e["err"] <= tol
            msg = f"{name}: err {e['err']:.3g} > tol {tol:.3g} (scale {e['scale']:.3g})"
        else:
            tol = min(2 * e["err_eager"] + BF16_REL * (1 + e["scale"]), BF16_ABS_CAP * (1 + e["scale"]))
            ok = e["err"] <= tol
            msg = (f"{name}: err vs float64 {e['err']:.3g} > tol {tol:.3g} "
                   f"(eager bf16 err {e['err_eager']:.3g}, scale {e['scale']:.3g})")
        if not ok:
            failures.append(msg)
    assert not failures, "; ".join(failures)


@needs_triton
def test_connection_module_uses_kernel_and_matches_eager():
    m = _worker_results()[1]
    assert m["h_err"] <= 1e-5
    assert m["q_grad_err"] <= 1e-5 * (1 + m["q_grad_scale"])
    assert m["rho_grad_err"] <= 1e-5


@needs_triton
def test_triton_step_compiles_without_a_graph_break():
    c = _worker_results()[2]
    assert (c["graphs"], c["breaks"]) == (1, 0)
    assert c["err"] <= 1e-6


@needs_triton
def test_every_kernel_launch_runs_under_the_tensors_device():
    """Triton launches on the current CUDA device: each launch (forward, backward) is inside the guard, entered
    with the tensors' device (here the CPU, under the interpreter)."""
    g = _worker_results()[3]
    assert g["entered"] == ["cpu", "cpu"]
    assert g["launches"] == [["fwd", ["cpu"]], ["bwd", ["cpu"]]]


@needs_triton
def test_the_launch_guard_of_a_cuda_tensor_names_its_device():
    """On CUDA the guard is ``torch.cuda.device`` of the tensors' own index (not entered here: no GPU needed)."""
    import contextlib

    import torch

    from infiloop.model.kernels.triton_step import on_device

    guard = on_device(torch.device("cuda", 1))
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1
    assert isinstance(on_device(torch.device("cpu")), contextlib.nullcontext)


def test_the_kernel_probe_runs_float32_and_bfloat16(monkeypatch, capsys):
    """The fallback probe (``kernels.probe.triton_fails``) runs the kernel in float32 and in bf16 candidates with a
    float32 state (autocast's path, a kernel of its own): one that builds in float32 but fails in bf16 is refused,
    in one warning line naming the failure; one that runs in both is taken; each device and size is asked once."""
    import torch

    from infiloop.model.kernels import probe
    from infiloop.model.kernels.reference import infiloop_step as ref_step

    seen = []

    def fake(z, h, log_d, q, log_beta, clip, eps, content):
        seen.append((z.dtype, h.dtype, log_d.dtype))
        if z.dtype == torch.bfloat16 and fail_bf16:
            raise RuntimeError("PassManager::run failed\nmore lines")
        return ref_step(z, h, log_d, q, log_beta, clip, eps, content)

    monkeypatch.setattr(probe, "fused_step", fake)
    monkeypatch.setattr(probe, "_TRITON_PROBES", {})
    fail_bf16 = False
    assert probe.triton_fails(torch.device("cpu"), 8) is None and capsys.readouterr().err == ""
    assert seen == [(torch.float32, torch.float32, torch.float32), (torch.bfloat16, torch.float32, torch.float32)]
    fail_bf16, seen[:] = True, []
    assert probe.triton_fails(torch.device("cpu"), 8) is None and not seen  # asked once per device and size
    assert probe.triton_fails(torch.device("cpu"), 16) == "RuntimeError: PassManager::run failed"
    assert capsys.readouterr().err.splitlines() == [
        "warning: the fused Triton step does not run on cpu (RuntimeError: PassManager::run failed); InfiLoop "
        "connections take the eager reference step (same results, slower)"]


@needs_triton
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="checks the non-interpreted CPU path")
def test_forcing_triton_on_cpu_without_interpreter_fails_clearly():
    import torch

    from infiloop.model.kernels import infiloop_step

    z = torch.randn(2, 4)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        infiloop_step(z, z, torch.zeros(2), torch.zeros(4), torch.tensor(-0.5), 8.0, 1e-6, backend="triton")


def test_auto_backend_on_cpu_is_the_reference():
    import torch

    from infiloop.model.kernels import infiloop_step
    from infiloop.model.kernels.reference import infiloop_step as ref

    z, h = torch.randn(3, 5), torch.randn(3, 5)
    args = (z, h, torch.randn(3), torch.randn(5), torch.tensor(-0.6), 1.0, 1e-6)
    for a, b in zip(infiloop_step(*args, backend="auto"), ref(*args)):
        assert torch.equal(a, b)


if __name__ == "__main__" and "--worker" in sys.argv:
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("the kernel worker must run with TRITON_INTERPRET=1")
    _worker()


# --------------------------------------------------------------------------------------------------
# Benchmark scripts: each runs in its quickest mode (keeps them in step with the package's API)
# --------------------------------------------------------------------------------------------------

def _table(stdout: str) -> list[dict[str, str]]:
    """The markdown table a benchmark prints, as rows of {column: cell}."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]


def _seconds(cell: str) -> float:
    value, unit = cell.split()
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]


def _check_connection_step(out: str) -> None:
    # one row per implementation and dtype: float32 on the CPU; float32 and bfloat16 on CUDA (two eager rows)
    eager = [r for r in _table(out) if r["impl"] == "eager"]
    assert eager
    for r in eager:
        assert 0 < _seconds(r["fwd"]) < _seconds(r["fwd+bwd"])  # backward costs something
        assert r["fwd speedup vs eager"] == "1.00x"
    median = _seconds(out.split("eager=")[-1].split(",")[0].strip())
    fwd = [_seconds(r["fwd"]) for r in eager]
    assert min(fwd) * 0.99 <= median <= max(fwd) * 1.01


def _check_memory(out: str) -> None:
    rows = {(r["connection"], int(r["T"])): r for r in _table(out)}
    tokens, d = 4, 16
    for r in rows.values():
        assert r["state bytes"] == r["Connection.state_nbytes"]
    # InfiLoop keeps h and log D: (d + 1) floats per token at any T; Full AttnRes keeps one more candidate
    # (d floats) and its one-byte validity flag per token and step.
    assert int(rows[("infiloop", 10)]["state bytes"]) == int(rows[("infiloop", 100)]["state bytes"]) \
        == tokens * (d + 1) * 4
    grow = int(rows[("full_attnres", 100)]["state bytes"]) - int(rows[("full_attnres", 10)]["state bytes"])
    assert grow == 90 * tokens * (4 * d + 1)
    assert "infiloop_state_constant=True" in out


def _check_overhead(out: str) -> None:
    for r in _table(out):
        ratio = _seconds(r["infiloop"]) / _seconds(r["carry_last"])
        assert float(r["ratio of medians"]) == pytest.approx(ratio, rel=0.02), r
    train = next(r for r in _table(out) if r["measure"] == "training step")
    assert f"train_overhead={train['ratio of medians']}" in out


def _check_depth_throughput(out: str) -> None:
    rows = {r["connection"]: r for r in _table(out)}
    for r in rows.values():
        assert int(r["layers"]) == 3 * int(r["updates"]) == 15  # smoke: (L + 1) x n_layers = 3
        assert float(r["updates/s"]) == pytest.approx(5 / _seconds(r["time"]), rel=0.02)
    rel = float(rows["infiloop"]["updates/s"]) / float(rows["carry_last"]["updates/s"])
    assert f"infiloop={rel:.3f}" in out or abs(float(out.split("infiloop=")[-1].split()[0]) - rel) < 2e-3


def _check_workers(out: str) -> None:
    rows = _table(out)
    w, t = map(int, rows[0]["workers x threads"].split(" x "))
    c = w * t  # the cores split: first one single-threaded worker per core, then fewer with more threads
    assert t == 1 and [r["workers x threads"] for r in rows] == [f"{c // t} x {t}" for t in range(1, c + 1)
                                                                  if c % t == 0]
    for r in rows:
        w = int(r["workers x threads"].split(" x ")[0])
        assert float(r["work per second"].split()[0]) == pytest.approx(w / float(r["slowest worker (s)"]), rel=0.02)
    assert max(float(r["relative"]) for r in rows) == 1.0


def _check_job_start(out: str) -> None:
    """Both ways ran every job, each total is the sum of its jobs, and the saving is the difference of the medians."""
    rows = _table(out)
    assert [r["way"] for r in rows] == ["fresh (a new process per job)", "warm (one worker for all)"]
    assert all(int(r["jobs"]) == 3 and float(r["total (s)"]) >= float(r["first job (s)"]) for r in rows)
    saved = float(rows[0]["each later job, median (s)"]) - float(rows[1]["each later job, median (s)"])
    printed = float(out.split("a warm worker saves ")[1].split(" s")[0])
    assert printed == pytest.approx(saved, abs=0.006)  # the table's medians are rounded to 3 decimals, the saving to 2


def _check_numeric_modes(out: str) -> None:
    """Two rows, two different hashes; the mode's is the InfiLoop smoke fingerprint this machine's family recorded
    (where one on its kernels is recorded)."""
    from infiloop.experiments.report import fingerprints

    rows = {r["setting"]: r["smoke InfiLoop seed 0: sha256 of the weights"].strip("`") for r in _table(out)}
    assert len(rows) == 2 and len(set(rows.values())) == 2, rows
    ref = fingerprints.reference(fingerprints.load())
    if ref is not None:
        assert ref[1]["smoke/sudoku/infiloop/seed0"].startswith(rows["reproducible mode (default)"])


def _check_plan_time(out: str) -> None:
    """The plan ran, built no data set, and the verdict is the slowest row's."""
    rows = _table(out)
    assert [(r["profile"], r["exit"], r["data sets built"]) for r in rows] == [("gpu", "0", "none")], rows
    slowest = max(float(r["seconds"]) for r in rows)
    assert f"slowest: {slowest:.1f} s" in out and ("met" if slowest <= 30 else "NOT met") in out


BENCH_SMOKE = [
    # both dtypes, as on CUDA (two eager rows)
    ("connection_step.py", ["--quick", "--no-compile", "--rows", "64", "--d", "48", "--threads", "1",
                            "--dtype", "float32,bfloat16"], {},
     _check_connection_step),
    ("memory.py", ["--T", "10,100", "--d", "16", "--threads", "1"], {}, _check_memory),
    ("overhead.py", ["--profile", "smoke", "--batch", "2", "--reps", "2", "--threads", "1"], {}, _check_overhead),
    ("depth_throughput.py", ["--profile", "smoke", "--batch", "2", "--updates", "5", "--threads", "1"], {},
     _check_depth_throughput),
    # slow (15 s): two worker layouts timed against each other; its table is in benchmarks/RESULTS.md
    pytest.param("workers.py", ["--quick", "--kinds", "eval", "--settle", "2"], {}, _check_workers,
                 marks=pytest.mark.slow),
    # slow (about 20 s on 2 cores): 3 small jobs in new processes and in a warm worker, and a process start alone
    pytest.param("job_start.py", ["--quick"], {}, _check_job_start, marks=pytest.mark.slow),
    # slow (about 15 s): two smoke trainings in new processes, the mode's bytes against the native ones
    pytest.param("numeric_modes.py", ["--quick"], {}, _check_numeric_modes, marks=pytest.mark.slow),
    # slow (about 20 s on 2 cores): the gpu profile planned in a new process, nothing cached
    pytest.param("plan_time.py", ["--profile", "gpu"], {}, _check_plan_time, marks=pytest.mark.slow),
    # gpu_check.py: tests/test_gpu_check.py
]


@pytest.mark.parametrize("script,args,env,expect", BENCH_SMOKE,
                         ids=[f"{v[0]}{'-selftest' if v[1] == ['--self-test-cpu'] else ''}"
                              for v in (getattr(s, "values", s) for s in BENCH_SMOKE)])
def test_benchmark_script_runs(script, args, env, expect):
    """Each benchmark in its quickest mode: it runs, and what it prints is consistent (sizes by formula,
    ratios equal to the times they are computed from)."""
    if env.get("TRITON_INTERPRET") and not HAS_TRITON:
        pytest.skip("triton is not installed")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    if callable(expect):
        expect(proc.stdout)
    else:
        assert expect in proc.stdout, proc.stdout[-3000:]
