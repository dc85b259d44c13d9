"""The device check in one script: every GPU measurement of the companion in one run of under 9 minutes on an H200.

Parts (each in its own subprocess, with its own timeout, so that a hung or crashed part does not hide the others):

- ``kernels``: the fused Triton step against the eager reference, float32 and bfloat16 (and bf16 candidates with
  a float32 state, as under autocast), the forward outputs and the gradients of z, h, log D, q and log beta, on odd
  and on paper-sized shapes. Kernel and reference are both compared with a float64 evaluation of the same inputs:
  the kernel's error must be within twice the reference's plus 1e-5 (float32) or 2^-7 (bfloat16) times
  (1 + max |truth|). A case outside this is a correctness failure.
- ``step_speed``: one step (768 x 81 rows, d 512), eager vs Triton (vs ``torch.compile`` last), forward and forward
  + backward; the forward's bandwidth as a share of a measured device-to-device copy; a sweep of rows per program.
- ``training``: the pilot's training path (``experiments.compute.pilot.pilot_run``: the gpu profile's model, batch
  768, bf16 autocast, ``torch.compile``) for carry-last, InfiLoop and FPRM, an equal share of the part's time each:
  compile seconds, s/step after the first logged window, peak memory, loss and cell accuracy by step; graph breaks
  of each model by ``torch._dynamo.explain``. The device has no network: it trains on **generated** 9x9 puzzles
  (``data.source=generate``, 128 base puzzles x 8 views; the hub's Sudoku-Extreme is not read) with a warm-up of
  20 steps instead of 2,000 (so that the loss moves within a minute); nothing else differs from the profile.
- ``evaluation``: seconds per outer update of the gpu model (InfiLoop and carry-last) at the profile's evaluation
  batch (1,024), in fp32, TF32 and bf16 (``infiloop.evaluation.evaluate``).
- ``model_overhead``: the whole-model cost of InfiLoop against carry-last (same weights, interleaved, eager): one
  training step and one evaluation outer update, bf16 autocast and fp32 (``_common.bench_overhead``).

Writes ``gpu_check.json`` (everything measured) and ``gpu_check.md`` (a table of check, measured, goal, met?, then
the details: pilot loss curves, evaluation times, kernel errors) into ``--out`` (default: a new folder
``gpu_check-<date>`` under the system's temporary folder; its path is printed), with each part's JSON under
``parts/`` and its log under ``logs/``. Both files are rewritten after every part, so a run cut short keeps what
it measured. Exit status 1 if a kernel check fails or a part crashes or times out; goals not met are reported,
not failures. Without a CUDA device (and without ``--dry-run``) it says so and exits 0.

The device command (per-part timeouts inside, 510 s in all; the outer timeout is a last resort):

    timeout 540 python benchmarks/gpu_check.py --out "$OUT"

Other forms:

    python benchmarks/gpu_check.py --dry-run --out /tmp/gc   # every part on tiny shapes on the CPU (Triton's
                                                              # interpreter, smoke profile): checks the script,
                                                              # its timings mean nothing (--self-test-cpu: same)
    python benchmarks/gpu_check.py --parts kernels,step_speed --timeout training=300
    python benchmarks/gpu_check.py --part kernels --json kernels.json   # one part, in this process
"""

from __future__ import annotations

import os
import sys
import time

START = time.perf_counter()  # a part's time budget counts from its process's start (imports included)

if "--dry-run" in sys.argv or "--self-test-cpu" in sys.argv:
    # Triton decides at decoration time whether to interpret: set before anything imports the kernel module.
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import traceback  # noqa: E402
from dataclasses import asdict, dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402

import _common as C  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

PARTS = ("kernels", "step_speed", "training", "evaluation", "model_overhead")
# Per-part timeouts (seconds), the part's process start included: 510 s in all on the device.
TIMEOUTS = {"kernels": 70, "step_speed": 70, "training": 250, "evaluation": 55, "model_overhead": 65}
DRY_TIMEOUTS = {"kernels": 60, "step_speed": 60, "training": 90, "evaluation": 60, "model_overhead": 60}
BUDGET = 520.0  # the whole run; each part's timeout is cut to what is left of it
DRY_BUDGET = 150.0

GOAL_BW = 0.80  # kernel forward bandwidth, share of the measured copy bandwidth
GOAL_MODEL = 1.03  # InfiLoop's whole-model step / carry-last's
GOAL_STEP_S = 0.25  # the gpu profile's training step
LOSS_DROP = 0.05  # the pilot's loss falls: last logged at most 95 % of the first
LOSS_LIKE = 1.05  # and InfiLoop's at the last common logged step at most 5 % above carry-last's

PILOT_CONNECTIONS = ("carry_last", "infiloop", "fprm")
GPU_DATA = {"n_train": 128, "augment": 7, "n_test": 64}  # generated: seconds to build, 1,024 training rows
WARMUP_STEPS = 20
LOG_EVERY = 5
RESERVE_S = 15.0  # of the training part's time: after the last pilot (its last step, its checkpoint, the report)
DATA_NOTE = ("generated 9x9 puzzles that singles do not solve (data.source=generate, {n_train} base puzzles x "
             "{views} views, {n_test} test puzzles tiled to the evaluation batch); warm-up {warmup} steps")
PRECISIONS = ("fp32", "tf32", "bf16")

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
OUTPUTS = ["h", "log_d", "gamma", "s", "grad z", "grad h", "grad log_d", "grad log_beta", "grad q"]


# --------------------------------------------------------------------------------------------------
# One part, in its own process
# --------------------------------------------------------------------------------------------------


@dataclass
class Ctx:
    """A part's settings, its time budget and its result (a dict written to ``json_path`` after every section)."""

    part: str
    dry: bool
    device: str
    work: Path
    seconds: float
    json_path: Path | None
    reps: int
    model_reps: int
    pilot_seconds: float | None
    t0: float = START
    result: dict = field(default_factory=dict)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.t0)

    def save(self) -> None:
        self.result["seconds"] = round(time.perf_counter() - self.t0, 2)
        if self.json_path is not None:
            _write_json(self.json_path, self.result)

    def section(self, label: str, fn, *args) -> None:
        """Run one section; an exception is recorded (and printed) and the part goes on with the next section."""
        t = time.perf_counter()
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - one failing section must not hide the others
            traceback.print_exc()
            self.result.setdefault("errors", []).append(f"{label}: {type(e).__name__}: {e}"[:400])
        print(f"[{self.part} {time.perf_counter() - self.t0:.0f} s] {label} ({time.perf_counter() - t:.1f} s)",
              file=sys.stderr, flush=True)
        self.save()


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


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


def _case_inputs(lead, d, zdt, sdt, device, clip_mode):
    g = torch.Generator().manual_seed(0)
    eps = 1e-6
    q = torch.randn(d, generator=g)
    z = torch.randn(*lead, d, generator=g)
    z.view(-1, d)[::3] += 2.0 * q
    h = torch.randn(*lead, d, generator=g)
    ld = torch.randn(*lead, generator=g)
    z, h, ld, q = z.to(device, zdt), h.to(device, sdt), ld.to(device, sdt), q.to(device)
    zd = z.double()
    raw = (zd * torch.rsqrt(zd.pow(2).mean(-1, keepdim=True) + eps)) @ q.to(zdt).double()
    clip = _clip_between_scores(raw.cpu(), clip_mode)
    n_clamped = int((raw > clip).sum()) if clip is not None else 0
    return (z, h, ld, q), clip, n_clamped, raw.numel()


def check_case(case, device) -> dict:
    """One correctness case: every output and gradient of the kernel, of the eager reference and of float64."""
    from infiloop.model.kernels import fused_step
    from infiloop.model.kernels.reference import infiloop_step as ref_step

    name, lead, d, zdt, sdt, content, clip_mode = case
    ins0, clip, n_clamped, n_rows = _case_inputs(lead, d, getattr(torch, zdt), getattr(torch, sdt), device, clip_mode)
    wg = torch.Generator().manual_seed(1)
    weights = [torch.randn(s, generator=wg, dtype=torch.float64).to(device)
               for s in (ins0[0].shape, tuple(lead), tuple(lead), tuple(lead))]

    def evaluate(fn, cast):
        ins = [t.to(cast) if cast is not None else t.clone() for t in ins0]
        for t in ins:
            t.requires_grad_()
        rho = torch.tensor(0.3, device=device, dtype=torch.float64 if cast == torch.float64 else torch.float32)
        rho.requires_grad_()
        outs = fn(*ins, -torch.nn.functional.softplus(rho), clip, 1e-6, content)
        loss = sum((o.double() * w).sum() for o, w in zip(outs, weights))
        wrt = [*ins[:3], rho] + ([ins[3]] if content else [])
        return dict(zip(OUTPUTS, [*(o.detach() for o in outs), *torch.autograd.grad(loss, wrt)]))

    got, eager, truth = evaluate(fused_step, None), evaluate(ref_step, None), evaluate(ref_step, torch.float64)
    tol = TOL[zdt if zdt != "float32" else sdt]
    errors, worst, worst_at, dtypes_equal = {}, 0.0, "", True
    for k, t in truth.items():
        dtypes_equal &= got[k].dtype == eager[k].dtype and got[k].shape == eager[k].shape
        e_k = float((got[k].double() - t).abs().max()) if t.numel() else 0.0
        e_e = float((eager[k].double() - t).abs().max()) if t.numel() else 0.0
        allowed = 2 * e_e + tol * (1 + (float(t.abs().max()) if t.numel() else 0.0))
        errors[k] = {"kernel": e_k, "eager": e_e, "allowed": allowed}
        if e_k / allowed > worst:
            worst, worst_at = e_k / allowed, k
    return {"name": name, "shape": [*lead, d], "z_dtype": zdt, "state_dtype": sdt, "content": content,
            "clamped": f"{n_clamped}/{n_rows}", "errors": errors, "worst_ratio": worst, "worst_at": worst_at,
            "dtypes_equal": bool(dtypes_equal), "passed": bool(worst <= 1 and dtypes_equal)}


def part_kernels(ctx: Ctx) -> None:
    cases = ctx.result.setdefault("cases", [])
    for case in CASES_CPU if ctx.dry else CASES_FULL:
        ctx.section(f"case {case[0]}", lambda case=case: cases.append(check_case(case, ctx.device)))
    ctx.result["failed_checks"] = [c["name"] for c in cases if not c["passed"]]


def step_timing(rows: int, d: int, dtype, device, reps: int, inner: int, with_compile: bool, copy_bw: float) -> dict:
    """Eager and Triton (and torch.compile) times of one step, the kernel's share of the copy bandwidth."""
    res = C.bench_step(rows, d, dtype, device, reps, inner, with_compile, True, copy_bw)
    nbytes = C.step_bytes(rows, d, dtype)
    impls = {r["impl"]: {"fwd_s": r["_t_fwd"], "fwd_bwd_s": r["_t_fwd_bwd"], "fwd_gb_s": nbytes / r["_t_fwd"] / 1e9}
             for r in res}
    t, e = impls["triton"], impls["eager"]
    out = {"bytes": nbytes, "impls": impls, "triton_fwd_share_of_copy": nbytes / t["fwd_s"] / copy_bw,
           "triton_speedup_fwd": e["fwd_s"] / t["fwd_s"], "triton_speedup_fwd_bwd": e["fwd_bwd_s"] / t["fwd_bwd_s"]}
    if "torch.compile" in impls:
        c = impls["torch.compile"]
        out["compile_over_triton_fwd"] = c["fwd_s"] / t["fwd_s"]
        out["compile_over_triton_fwd_bwd"] = c["fwd_bwd_s"] / t["fwd_bwd_s"]
    return out


def block_sweep(device, reps: int, inner: int, copy_bw: float, rows_n: int, d: int) -> dict:
    """Forward time of the kernel for several rows-per-program (BLOCK_R) values, float32."""
    from infiloop.model.kernels import triton_step as ts

    z, h, ld, q, rho = C.step_inputs(rows_n, d, torch.float32, device)
    lb = -torch.nn.functional.softplus(rho)
    dtypes = ts.out_dtypes(z, h, ld)
    default = ts.launch_config(rows_n, d)[0]
    share = {}
    nbytes = C.step_bytes(rows_n, d, torch.float32)
    for br in sorted({1, 2, 4, 8, 16, 32, default}):
        fn = lambda br=br: ts._forward(z, h, ld, q, lb, 8.0, 1e-6, True, dtypes, block_r=br)
        share[str(br)] = nbytes / C.median(C.time_fn(fn, device, reps, inner=inner)) / copy_bw
    best = max(share, key=share.get)
    return {"default": default, "best": int(best), "share_of_copy": share}


def part_step_speed(ctx: Ctx) -> None:
    res = ctx.result
    rows_n, d = (16, 8) if ctx.dry else (768 * 81, 512)
    reps, inner = (1, 1) if ctx.dry else (ctx.reps, 20)
    res.update(rows=rows_n, d=d, step={}, compile={})
    bw = lambda: res["copy_gb_s"] * 1e9
    ctx.section("copy bandwidth", lambda: res.update(
        copy_gb_s=C.copy_bandwidth(C.step_bytes(rows_n, d, torch.float32), ctx.device, max(reps, 3)) / 1e9))
    for dtype in (torch.float32, torch.bfloat16):
        dn = str(dtype).replace("torch.", "")
        ctx.section(f"step {dn}", lambda dtype=dtype, dn=dn: res["step"].__setitem__(
            dn, step_timing(rows_n, d, dtype, ctx.device, reps, inner, False, bw())))
    ctx.section("BLOCK_R sweep", lambda: res.update(block_sweep=block_sweep(ctx.device, reps, inner, bw(), rows_n, d)))
    if not ctx.dry:  # last: compiling the reference may take long, and the kernel's figures are in by now
        for dtype in (torch.float32, torch.bfloat16):
            dn = str(dtype).replace("torch.", "")
            ctx.section(f"torch.compile {dn}", lambda dtype=dtype, dn=dn: res["compile"].__setitem__(
                dn, step_timing(rows_n, d, dtype, ctx.device, reps, inner, True, bw())))


def _profile(ctx: Ctx) -> tuple[str, list[str]]:
    """The profile the training and evaluation parts use and its overrides (no network on the device)."""
    if ctx.dry:
        return "smoke", ["train.warmup_steps=2"]
    return "gpu", ["data.source=generate", *(f"data.{k}={v}" for k, v in GPU_DATA.items()),
                   f"train.warmup_steps={WARMUP_STEPS}"]


def _data_note(ctx: Ctx) -> str:
    if ctx.dry:
        return "the smoke profile's generated 4x4 puzzles; warm-up 2 steps"
    return DATA_NOTE.format(n_train=GPU_DATA["n_train"], views=1 + GPU_DATA["augment"], n_test=GPU_DATA["n_test"],
                            warmup=WARMUP_STEPS)


def graph_breaks(name: str, profile: str, overrides: list[str], root: Path, device: str, dry: bool) -> dict:
    """``torch._dynamo.explain`` of one forward of the model (training mode, bf16 autocast on CUDA, batch 2): the
    graphs and breaks ``torch.compile`` sees. In a dry run InfiLoop takes the kernel's custom operator (under the
    interpreter), the path a GPU takes."""
    from infiloop.experiments.store.runs import resolve
    from infiloop.model import LoopedReasoner
    from infiloop.model.connections import InfiLoop, choose_kernels

    t0 = time.perf_counter()
    cfg = resolve("sudoku", name, profile, overrides, root=root).model_config()
    torch.manual_seed(0)
    model = LoopedReasoner(cfg).to(device)
    kernels = choose_kernels(model, device)
    if dry:
        for mname, m in model.named_modules():
            if isinstance(m, InfiLoop):
                m.kernel = kernels[mname] = "triton"
    g = torch.Generator().manual_seed(0)
    inputs = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=g).to(device)
    pids = torch.zeros(2, dtype=torch.long, device=device)
    cuda = torch.device(device).type == "cuda"
    torch._dynamo.reset()
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=cuda):
        e = torch._dynamo.explain(model)(model.initial_carry(2, device), inputs, pids)
    torch._dynamo.reset()
    return {"graph_count": e.graph_count, "graph_break_count": e.graph_break_count,
            "break_reasons": [str(r.reason)[:300] for r in e.break_reasons[:5]], "kernels": kernels,
            "seconds": round(time.perf_counter() - t0, 2)}


def pilot_once(name: str, profile: str, device: str, seconds: float, root: Path, dry: bool, overrides: list[str]):
    """One connection through ``pilot_run`` (compiled as the profile says on CUDA, eager in a dry run), with the
    Dynamo counters of its compilation; returns (the PilotRun, its record)."""
    from torch._dynamo.utils import counters

    from infiloop.experiments.compute import pilot
    from infiloop.experiments.store.runs import resolve

    torch._dynamo.reset()
    counters.clear()
    # about a minute a connection, most of it compiling: a log line every few steps (the step syncs anyway)
    r = pilot.pilot_run(name, profile, device, seconds, root, "off" if dry else None, overrides,
                        log_every=2 if dry else LOG_EVERY)
    run = resolve("sudoku", name, profile, overrides, root=root)
    rec = asdict(r)
    rec["budget_s"] = round(seconds, 1)
    rec["planned_s_per_step"] = pilot._planned_step_seconds(run.model_config(), run.train_config().batch_size, device)
    rec["dynamo"] = {"graph_breaks": int(sum(counters["graph_break"].values())),
                     "break_reasons": [str(k)[:300] for k in list(counters["graph_break"])[:5]],
                     "unique_graphs": int(counters["stats"].get("unique_graphs", 0))}
    shutil.rmtree(run.dir, ignore_errors=True)  # a checkpoint of the paper model: hundreds of MB
    return r, rec


def part_training(ctx: Ctx) -> None:
    from infiloop.experiments.compute import pilot
    from infiloop.experiments.store.runs import resolve

    res = ctx.result
    profile, over = _profile(ctx)
    root = ctx.work / "runs"
    res.update(profile=profile, device=ctx.device, overrides=over, data=_data_note(ctx), explain={}, runs={})
    ctx.section("data", lambda: res.update(train_rows=len(resolve("sudoku", "infiloop", profile, over,
                                                                     root=root).train_data())))
    explain = lambda name: res["explain"].__setitem__(name, graph_breaks(name, profile, over, root, ctx.device,
                                                                          ctx.dry))
    ctx.section("explain infiloop", explain, "infiloop")
    runs = {}
    for i, name in enumerate(PILOT_CONNECTIONS):
        share = ctx.pilot_seconds or max(10.0, (ctx.left() - RESERVE_S) / (len(PILOT_CONNECTIONS) - i))

        def one(name=name, share=share):
            runs[name], res["runs"][name] = pilot_once(name, profile, ctx.device, share, root, ctx.dry, over)

        ctx.section(f"pilot {name} ({share:.0f} s)", one)
    for name in ("carry_last", "fprm"):  # the other models' breaks are also counted while they train (compiled)
        if ctx.dry or ctx.left() > RESERVE_S:
            ctx.section(f"explain {name}", explain, name)

    def verdict():
        v = pilot.decide(list(runs.values()), {n: res["runs"][n]["planned_s_per_step"] for n in runs})
        res["pilot_criteria"] = [{"criterion": c, "met": ok, "measured": seen} for c, ok, seen in v.criteria]
        res["pilot_go"] = v.go

    if runs:
        ctx.section("the pilot's criteria", verdict)


def _tiled(data, n: int):
    """``data`` with its rows repeated (or cut) to ``n`` rows: one evaluation batch of the profile's size."""
    idx = np.arange(n) % len(data)
    return replace(data, inputs=data.inputs[idx], labels=data.labels[idx], puzzle_ids=data.puzzle_ids[idx],
                   meta={k: v[idx] for k, v in data.meta.items()})


def eval_seconds(model, data, updates: int, warm: int, batch: int, device: str, precision: str) -> float:
    """Seconds of ``updates`` outer updates of ``evaluate`` on one batch, after ``warm`` updates of warm-up."""
    from infiloop.evaluation import evaluate

    evaluate(model, data, warm, batch_size=batch, device=device, progress=False, precision=precision)
    C.sync(device)
    t0 = time.perf_counter()
    evaluate(model, data, updates, batch_size=batch, device=device, progress=False, precision=precision)
    C.sync(device)
    return time.perf_counter() - t0


def part_evaluation(ctx: Ctx) -> None:
    from infiloop.experiments.store.runs import resolve
    from infiloop.model import LoopedReasoner

    res = ctx.result
    profile, over = _profile(ctx)
    root = ctx.work / "runs"
    updates, warm = (2, 1) if ctx.dry else (8, 2)
    res.update(profile=profile, data=_data_note(ctx), updates=updates, s_per_update={})
    state = {}

    def setup():
        run = resolve("sudoku", "infiloop", profile, over, root=root)
        res["batch"] = batch = int(run.config["eval"]["batch_size"])
        state["data"] = _tiled(run.test_data(), batch)

    ctx.section("data", setup)
    for name in ("infiloop", "carry_last"):
        for precision in PRECISIONS:
            def one(name=name, precision=precision):
                if state.get("name") != name:
                    torch.manual_seed(0)
                    state["model"] = LoopedReasoner(resolve("sudoku", name, profile, over, root=root).model_config())
                    state["name"] = name
                t = eval_seconds(state["model"], state["data"], updates, warm, res["batch"], ctx.device, precision)
                res["s_per_update"].setdefault(name, {})[precision] = t / updates

            ctx.section(f"evaluate {name} {precision}", one)


def part_model_overhead(ctx: Ctx) -> None:
    res = ctx.result
    preset, batch, reps, backend = ("smoke", 1, 1, "triton") if ctx.dry else ("gpu", 768, ctx.model_reps, "auto")
    res.update(preset=preset, batch=batch, reps=reps, by_dtype={})
    for dtype in (torch.bfloat16, torch.float32):
        dn = str(dtype).replace("torch.", "")
        ctx.section(f"overhead {dn}", lambda dtype=dtype, dn=dn: res["by_dtype"].__setitem__(
            dn, C.bench_overhead(preset, batch, ctx.device, reps, dtype=dtype, backend=backend)))


PART_FNS = {"kernels": part_kernels, "step_speed": part_step_speed, "training": part_training,
            "evaluation": part_evaluation, "model_overhead": part_model_overhead}


def run_part(a: argparse.Namespace) -> int:
    """One part in this process; its JSON to ``--json`` (else stdout). 0: no error and no failed check."""
    from infiloop import paths

    if a.dry_run:
        torch.set_num_threads(1)  # tiny shapes: a second thread only waits, and on a shared machine it spins
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="gpu_check-work-"))
    paths.DATA, paths.RUNS, paths.RESULTS = work / "data", work / "runs", work / "results"
    ctx = Ctx(a.part, a.dry_run, "cpu" if a.dry_run else "cuda", work, a.seconds or TIMEOUTS[a.part],
              Path(a.json) if a.json else None, a.reps, a.model_reps, a.pilot_seconds)
    ctx.result.update(part=a.part, dry_run=a.dry_run, device=C.gpu_facts()["gpu"], complete=False)
    ctx.save()
    try:
        PART_FNS[a.part](ctx)
    finally:
        ctx.result["complete"] = True
        ctx.save()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    if ctx.json_path is None:
        print(json.dumps(ctx.result, indent=1, default=str))
    return 1 if ctx.result.get("errors") or ctx.result.get("failed_checks") else 0


# --------------------------------------------------------------------------------------------------
# The whole check: each part in a subprocess with its timeout
# --------------------------------------------------------------------------------------------------


class Terminated(Exception):
    """SIGTERM (the outer ``timeout``): stop the running part, write what was measured."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _status(timed_out: bool, rc: int | None, result: dict | None) -> str:
    if timed_out:
        return "timed out"
    if result is None or not result.get("complete"):
        return f"crashed (exit {rc})"
    if result.get("failed_checks"):
        return "FAILED"
    if result.get("errors") or rc != 0:
        return f"crashed (exit {rc})"
    return "ok"


def run_child(name: str, timeout: float, a: argparse.Namespace, out: Path, work: Path) -> dict:
    """Run part ``name`` in a subprocess (its own process group) for at most ``timeout`` seconds."""
    js, log = out / "parts" / f"{name}.json", out / "logs" / f"{name}.log"
    js.unlink(missing_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--json", str(js), "--work", str(work),
           "--seconds", f"{timeout:.0f}", "--reps", str(a.reps), "--model-reps", str(a.model_reps)]
    cmd += ["--dry-run"] if a.dry_run else []
    cmd += ["--pilot-seconds", str(a.pilot_seconds)] if a.pilot_seconds else []
    t0, timed_out, rc, killed = time.perf_counter(), False, None, False
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, cwd=C.ROOT)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except (Terminated, KeyboardInterrupt):
            killed = True
            _kill_group(proc)
    try:
        result = json.loads(js.read_text()) if js.is_file() else None
    except ValueError:
        result = None
    rec = {"status": "killed (outer timeout)" if killed else _status(timed_out, rc, result),
           "seconds": round(time.perf_counter() - t0, 1), "timeout_s": round(timeout), "returncode": rc,
           "log": str(log.relative_to(out)), "result": result}
    if rec["status"] != "ok":
        tail = log.read_text(errors="replace").splitlines()[-30:]
        print(f"--- {name}: {rec['status']}; last lines of {log}:\n" + "\n".join(tail), file=sys.stderr, flush=True)
    return rec


def part_timeouts(a: argparse.Namespace) -> dict[str, float]:
    t = dict(DRY_TIMEOUTS if a.dry_run else TIMEOUTS)
    for item in a.timeout:
        k, _, v = item.partition("=")
        if k not in PARTS or not v:
            raise SystemExit(f"--timeout {item!r}: expected PART=SECONDS with PART one of {', '.join(PARTS)}")
        t[k] = float(v)
    return t


def run_all(a: argparse.Namespace, out: Path) -> dict:
    timeouts = a.timeouts
    budget = a.budget or (DRY_BUDGET if a.dry_run else BUDGET)
    report = {"header": C.gpu_facts(), "mode": "dry run (CPU, Triton interpreter, tiny shapes)" if a.dry_run
              else "device", "command": "python " + " ".join(sys.argv), "out": str(out), "budget_s": budget,
              "timeouts_s": {p: timeouts[p] for p in a.parts}, "parts": {}}
    work = Path(tempfile.mkdtemp(prefix="gpu_check-work-"))
    t0 = time.perf_counter()
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        for name in a.parts:
            left = budget - (time.perf_counter() - t0) - 5.0
            timeout = min(timeouts[name], left)
            if timeout < 10:
                report["parts"][name] = {"status": "skipped (no time left in the budget)", "result": None}
            else:
                print(f"[{time.perf_counter() - t0:.0f} s] {name}: starting (timeout {timeout:.0f} s)",
                      file=sys.stderr, flush=True)
                report["parts"][name] = run_child(name, timeout, a, out, work)
                print(f"[{time.perf_counter() - t0:.0f} s] {name}: {report['parts'][name]['status']}",
                      file=sys.stderr, flush=True)
            write_report(report, out)
            if report["parts"][name]["status"].startswith("killed"):
                raise Terminated()
    except (Terminated, KeyboardInterrupt):
        report["interrupted"] = True
    finally:
        signal.signal(signal.SIGTERM, old)
        shutil.rmtree(work, ignore_errors=True)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    write_report(report, out)
    return report


# --------------------------------------------------------------------------------------------------
# Goals and the report
# --------------------------------------------------------------------------------------------------


def _row(check: str, measured: str, goal: str = "", met: bool | None = None) -> dict:
    measured = measured.replace("|", "/")  # a compile error's text must not break the markdown table
    return {"check": check, "measured": measured, "goal": goal,
            "met?": "-" if met is None else ("yes" if met else "NO")}


def _result(parts: dict, name: str) -> tuple[dict, str]:
    p = parts.get(name) or {}
    return (p.get("result") or {}), p.get("status", "not run")


def _missing(check: str, status: str, goal: str = "") -> dict:
    return _row(check, f"not measured (part {status})", goal)


def goals_kernels(parts: dict) -> list[dict]:
    r, status = _result(parts, "kernels")
    check = "kernels = reference (fp32, bf16; forward and every gradient)"
    cases = r.get("cases") or []
    if not cases:
        return [_missing(check, status)]
    worst = max(cases, key=lambda c: c["worst_ratio"])
    ok = sum(c["passed"] for c in cases)
    measured = (f"{ok}/{len(cases)} cases within tolerance; worst err/allowed {worst['worst_ratio']:.2f} "
                f"({worst['name']}: {worst['worst_at']})")
    return [_row(check, measured, "err <= 2 err_eager + tol (1 + max abs truth), dtypes equal",
                 ok == len(cases) and status == "ok")]


def goals_step_speed(parts: dict) -> list[dict]:
    r, status = _result(parts, "step_speed")
    rows = []
    if "copy_gb_s" in r:
        rows.append(_row("device-to-device copy bandwidth", f"{r['copy_gb_s']:.0f} GB/s"))
    for dn in ("float32", "bfloat16"):
        s = (r.get("step") or {}).get(dn)
        check = f"fused step forward {dn} ({r.get('rows', '?')}x{r.get('d', '?')}), bandwidth / copy"
        if not s:
            rows.append(_missing(check, status, f">= {GOAL_BW:.0%}"))
            continue
        share = s["triton_fwd_share_of_copy"]
        rows.append(_row(check, f"{share:.0%} ({s['impls']['triton']['fwd_gb_s']:.0f} GB/s)", f">= {GOAL_BW:.0%}",
                         share >= GOAL_BW))
        rows.append(_row(f"fused step {dn} vs eager", f"fwd {s['triton_speedup_fwd']:.1f}x, fwd+bwd "
                         f"{s['triton_speedup_fwd_bwd']:.1f}x"))
        c = (r.get("compile") or {}).get(dn)
        if c:
            rows.append(_row(f"fused step {dn} vs torch.compile of the reference",
                             f"fwd {c['compile_over_triton_fwd']:.2f}x, "
                             f"fwd+bwd {c['compile_over_triton_fwd_bwd']:.2f}x"))
    b = r.get("block_sweep")
    if b:
        txt = ", ".join(f"{k}: {v:.0%}" for k, v in b["share_of_copy"].items())
        rows.append(_row(f"rows per program (default {b['default']}), fp32 share of copy", txt))
    return rows


def goals_overhead(parts: dict) -> list[dict]:
    r, status = _result(parts, "model_overhead")
    rows = []
    for dn in ("bfloat16", "float32"):
        o = (r.get("by_dtype") or {}).get(dn)
        for kind, label in (("train", "training step"), ("eval", "evaluation outer update")):
            check = (f"whole-model {label}, InfiLoop / carry-last ({dn}, eager, {r.get('preset', 'gpu')} "
                     f"b{r.get('batch', 768)})")
            if not o:
                rows.append(_missing(check, status, f"<= {GOAL_MODEL:.2f}"))
                continue
            ratio = o[f"{kind}_ratio"]
            rows.append(_row(check, f"{C.fmt_time(o[f'{kind}_infiloop'])} / {C.fmt_time(o[f'{kind}_carry_last'])} = "
                             f"{ratio:.3f}", f"<= {GOAL_MODEL:.2f}", ratio <= GOAL_MODEL))
    return rows


def _loss_like(runs: dict) -> tuple[str, bool | None]:
    """InfiLoop's pilot loss falls (by LOSS_DROP) and ends within LOSS_LIKE of carry-last's, at their last common
    logged step."""
    a, b = (runs.get(n, {}).get("curve") or [] for n in ("infiloop", "carry_last"))
    common = sorted({c["step"] for c in a} & {c["step"] for c in b})
    if len(common) < 2:
        return "fewer than two common logged steps", None
    at = common[-1]
    la = {c["step"]: c["loss"] for c in a}
    lb = {c["step"]: c["loss"] for c in b}
    falls = all(math.isfinite(x) for x in la.values()) and la[at] <= (1 - LOSS_DROP) * la[common[0]]
    return (f"InfiLoop {la[common[0]]:.3f} -> {la[at]:.3f}, carry-last {lb[common[0]]:.3f} -> {lb[at]:.3f} "
            f"(steps {common[0]}-{at})", bool(falls and la[at] <= LOSS_LIKE * lb[at]))


def goals_training(parts: dict) -> list[dict]:
    r, status = _result(parts, "training")
    runs, explain, prof = r.get("runs") or {}, r.get("explain") or {}, r.get("profile", "gpu")
    rows = []
    for n in ("infiloop", "carry_last", "fprm"):
        e, x = explain.get(n), runs.get(n)
        check = f"graph breaks, {n} model"
        if e:
            rows.append(_row(check, f"{e['graph_break_count']} breaks, {e['graph_count']} graph(s) "
                             "(torch._dynamo.explain)", "0", e["graph_break_count"] == 0))
        elif x and x["compiled"]:
            d = x["dynamo"]
            rows.append(_row(check, f"{d['graph_breaks']} breaks, {d['unique_graphs']} graph(s) (compiling its "
                             "training step)", "0", d["graph_breaks"] == 0))
        else:
            rows.append(_missing(check, status, "0"))
    for n in PILOT_CONNECTIONS:
        x = runs.get(n)
        check = f"training step {n} ({prof} profile, pilot path)"
        if not x or x.get("s_per_step") is None:
            why = f"part {status}" if not x else "one logged window only: " + (
                "compilation took the share" if x["compiled"] else "the share was too short")
            rows.append(_row(check, f"not measured ({why})", f"<= {GOAL_STEP_S} s"))
        else:
            mode = "bf16 autocast" if r.get("device") == "cuda" else "fp32"  # train.precision auto
            rows.append(_row(check, f"{x['s_per_step']:.3f} s/step ({x['steps']} steps, {mode}, "
                             f"{'compiled' if x['compiled'] else 'eager'})", f"<= {GOAL_STEP_S} s",
                             x["s_per_step"] <= GOAL_STEP_S))
    a, b = runs.get("infiloop", {}).get("s_per_step"), runs.get("carry_last", {}).get("s_per_step")
    rows.append(_row("training step, InfiLoop / carry-last (pilot path)",
                     f"{a / b:.3f}" if a and b else "not measured", f"<= {GOAL_MODEL:.2f}",
                     a / b <= GOAL_MODEL if a and b else None))
    for n in PILOT_CONNECTIONS:
        x = runs.get(n)
        if x:
            mode = "yes" if x["compiled"] else f"no ({x['compile_error'] or 'eager'})"
            mem = "-" if x["peak_memory_gb"] is None else f"{x['peak_memory_gb']:.1f} GiB"
            first = "" if x["compile_seconds"] is None else f", {x['compile_seconds']} s to the first step"
            rows.append(_row(f"{n}: compile, peak memory", f"compiled {mode}{first}; peak {mem}; "
                             f"{x['dynamo']['graph_breaks']} breaks while training"))
    measured, met = _loss_like(runs)
    rows.append(_row("InfiLoop's pilot loss falls like carry-last's", measured,
                     f"falls >= {LOSS_DROP:.0%}, ends <= {LOSS_LIKE:.2f} x carry-last's", met))
    return rows


def goals_evaluation(parts: dict) -> list[dict]:
    r, status = _result(parts, "evaluation")
    s = r.get("s_per_update") or {}
    if not s:
        return [_missing("evaluation s/update (fp32, TF32, bf16)", status)]
    rows = [_row(f"evaluation {n} b{r.get('batch')}, s/update", ", ".join(f"{p} {C.fmt_time(t)}" for p, t in v.items()))
            for n, v in s.items()]
    inf = s.get("infiloop", {})
    if "fp32" in inf and "tf32" in inf:
        rows.append(_row("evaluation TF32 speed-up over fp32 (InfiLoop)", f"{inf['fp32'] / inf['tf32']:.2f}x"))
    return rows


def goal_rows(parts: dict) -> list[dict]:
    """The table's rows, for the parts this run asked for (run, timed out or skipped)."""
    fns = {"kernels": goals_kernels, "step_speed": goals_step_speed, "training": goals_training,
           "evaluation": goals_evaluation, "model_overhead": goals_overhead}
    return [row for name, fn in fns.items() if name in parts for row in fn(parts)]


def _curves_table(runs: dict) -> str:
    names = [n for n in PILOT_CONNECTIONS if runs.get(n, {}).get("curve")]
    if not names:
        return "(no loss curve)"
    by = {n: {c["step"]: c for c in runs[n]["curve"]} for n in names}
    steps = sorted(set().union(*(by[n] for n in names)))
    rows = []
    for st in steps:
        row = {"step": st}
        for n in names:
            c = by[n].get(st)
            row[f"{n} loss"] = f"{c['loss']:.4f}" if c else ""
            row[f"{n} cell acc"] = f"{c['cell_acc']:.3f}" if c else ""
        rows.append(row)
    return C.table(rows)


def _detail_sections(parts: dict) -> list[str]:
    out = []
    r, _ = _result(parts, "training")
    if r.get("runs"):
        out += ["", f"### Pilot path: loss and cell accuracy by step ({r.get('data')})", "", _curves_table(r["runs"])]
        rows = [{"connection": n, "steps": x["steps"], "budget s": x["budget_s"],
                 "s/step": "-" if x["s_per_step"] is None else f"{x['s_per_step']:.3g}",
                 "planned s/step": f"{x['planned_s_per_step']:.3g}", "peak GiB": x["peak_memory_gb"],
                 "compile s": x["compile_seconds"], "kernels": ", ".join(sorted(set(x["kernels"].values()))) or "-"}
                for n, x in r["runs"].items()]
        out += ["", C.table(rows)]
    for c in r.get("pilot_criteria") or []:
        out.append(f"- pilot criterion [{'met' if c['met'] else 'NOT met'}] {c['criterion']}: {c['measured']}")
    k, _ = _result(parts, "kernels")
    if k.get("cases"):
        rows = [{"case": c["name"], "shape": "x".join(map(str, c["shape"])), "clamped": c["clamped"],
                 "worst err/allowed": f"{c['worst_ratio']:.2f} ({c['worst_at']})",
                 "fwd h err": f"{c['errors']['h']['kernel']:.1e}",
                 "grad z err": f"{c['errors']['grad z']['kernel']:.1e}",
                 "passed": c["passed"]} for c in k["cases"]]
        out += ["", "### Kernel errors (against float64; the reference's own error sets the allowance)", "",
                C.table(rows)]
    return out


def render_md(report: dict) -> str:
    h = report["header"]
    lines = [f"## GPU check: {report['mode']}", "",
             f"date {h['date']}; GPU {h['gpu']}; driver {h['nvidia driver']}, CUDA {h['cuda (torch build)']}; "
             f"torch {h['torch']}, Triton {h['triton']}; host {h['host']}", "",
             f"command: `{report['command']}`", ""]
    if report["mode"] != "device":
        lines += ["**Dry run: the timings below mean nothing** (CPU, interpreter, tiny shapes).", ""]
    if report.get("interrupted"):
        lines += ["**Interrupted** (SIGTERM: the outer timeout) before every part had run.", ""]
    lines.append(C.table(goal_rows(report["parts"])))
    parts = [{"part": n, "status": p.get("status"), "seconds": p.get("seconds", "-"),
              "timeout s": p.get("timeout_s", "-"), "log": p.get("log", "-")} for n, p in report["parts"].items()]
    lines += ["", C.table(parts), *_detail_sections(report["parts"])]
    return "\n".join(lines) + "\n"


def write_report(report: dict, out: Path) -> None:
    report["goals"] = goal_rows(report["parts"])
    report["ok"] = bool(report["parts"]) and all(p.get("status") == "ok" for p in report["parts"].values()) \
        and not report.get("interrupted")
    _write_json(out / "gpu_check.json", report)
    (out / "gpu_check.md").write_text(render_md(report))


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None, help="folder for gpu_check.json, gpu_check.md, parts/ and logs/ "
                   "(default: a new folder gpu_check-<date> under the system's temporary folder)")
    p.add_argument("--dry-run", action="store_true", help="every part on tiny shapes on the CPU (Triton's "
                   "interpreter, smoke profile): checks the script; its timings mean nothing")
    p.add_argument("--self-test-cpu", dest="dry_run", action="store_true", help="the same as --dry-run")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    p.add_argument("--timeout", action="append", default=[], metavar="PART=SECONDS",
                   help=f"a part's timeout (defaults {TIMEOUTS})")
    p.add_argument("--budget", type=float, default=None, help=f"seconds for the whole run (default {BUDGET:.0f}); "
                   "each part's timeout is cut to what is left")
    p.add_argument("--reps", type=int, default=10, help="timing repetitions of the step")
    p.add_argument("--model-reps", type=int, default=6, help="repetitions of the whole-model overhead")
    p.add_argument("--pilot-seconds", type=float, default=None,
                   help="training seconds per connection (default: an equal share of the training part's time; "
                        "30 in a dry run, where the smoke profile's 30 steps end sooner)")
    p.add_argument("--part", choices=PARTS, default=None, help="run one part in this process")
    p.add_argument("--json", default=None, help="with --part: write its JSON here (default: stdout)")
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seconds", type=float, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.parts = [x.strip() for x in a.parts.split(",") if x.strip()]
    if bad := [x for x in a.parts if x not in PARTS]:
        p.error(f"--parts: unknown part {', '.join(bad)}; choose from {', '.join(PARTS)}")
    a.timeouts = part_timeouts(a)
    if a.dry_run and a.pilot_seconds is None:
        a.pilot_seconds = 30.0  # a limit only: the smoke profile's 30 steps take about a second
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if not a.dry_run and not torch.cuda.is_available():
        print("No CUDA device: nothing to measure here. To check the script itself on the CPU, run it with "
              "--dry-run (every part on tiny shapes under Triton's interpreter; its timings mean nothing).")
        return 0
    if a.part:
        return run_part(a)
    out = Path(a.out) if a.out else Path(tempfile.gettempdir()) / \
        f"gpu_check-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    print(C.header("GPU check" + (" (dry run)" if a.dry_run else "")), file=sys.stderr)
    print(f"writing {out / 'gpu_check.json'} and {out / 'gpu_check.md'}", file=sys.stderr, flush=True)
    report = run_all(a, out)
    print(render_md(report))
    print(f"report: {out / 'gpu_check.md'} and {out / 'gpu_check.json'} ({report['seconds']:.0f} s)")
    if report.get("interrupted"):
        return 124
    bad = {n: p["status"] for n, p in report["parts"].items() if p.get("status") != "ok"}
    if bad:
        print("NOT OK: " + "; ".join(f"{n} {s}" for n, s in bad.items()))
        return 1
    print("all parts ok: kernel checks passed (goals above are reported, not enforced)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
