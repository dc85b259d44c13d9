"""The parts of the device check (``gpu_check.py``), each run in a process of its own: what each measures, section by
section, on the device or (``--dry-run``) at a size the CPU can do.

Every section writes the part's JSON again when it ends (``Ctx.section``), so a part cut short by its timeout keeps
what it measured; ``gpu_check.py`` folds it into ``gpu_check.json`` as it comes.

- ``train_eager``: the pilot's training path (``experiments.cost.pilot.pilot_run``) **uncompiled**, bf16 autocast,
  after an untimed warm-up that compiles each connection's Triton kernels (``warm_kernels``),
  at the ``gpu`` profile's batch (768), for carry-last, InfiLoop and FPRM, an equal share of the part's time each:
  s/step after the first logged window, peak memory, loss and cell accuracy by step, and the pilot's criteria. On
  the device the ``gpu`` profile's model on generated 9x9 puzzles (no network there); in a dry run the smoke model
  at the same batch (four steps).
- ``kernels``: the fused Triton step against the eager reference, float32 and bfloat16 (and bf16 candidates with a
  float32 state, as under autocast), forward and every gradient, each against a float64 evaluation.
- ``step_speed``: one step (768 x 81 rows, d 512), eager vs Triton, forward and forward + backward; the forward's
  bandwidth as a share of a device-to-device copy; a sweep of rows per program; last, where time is left for its
  compile, ``torch.compile`` of the reference step (device only).
- ``evaluation``: seconds per outer update at the profile's evaluation batch (1,024), fp32, TF32 and bf16.
- ``model_overhead``: InfiLoop's whole-model cost against carry-last's (same weights, interleaved, eager).
- ``train_compiled``: the same training of InfiLoop **compiled** (Inductor, bf16, the same batch): the seconds to the
  first compiled step (a cold compile: Inductor's cache is a new folder), s/step after it, Dynamo's graph breaks
  and graphs. Last, with whatever time the others left: a compile slower than its budget leaves every other
  figure measured.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import _common as C
import numpy as np
import torch

PILOT_CONNECTIONS = ("carry_last", "infiloop", "fprm")
GPU_BATCH = 768  # the gpu profile's training batch (settings/profiles.py): the dry run trains at it too
GPU_DATA = {"n_train": 128, "augment": 7, "n_test": 64}  # generated: seconds to build, 1,024 training rows
WARMUP_STEPS = 20
LOG_EVERY = 5
RESERVE_S = 10.0  # of a training part's time: after the last pilot (its checkpoint, the report)
DATA_NOTE = ("generated 9x9 puzzles that singles do not solve (data.source=generate, {n_train} base puzzles x "
             "{views} views, {n_test} test puzzles tiled to the evaluation batch); warm-up {warmup} steps")
PRECISIONS = ("fp32", "tf32", "bf16")
# The dry run's compiled step: the smoke model cut to one update of one layer and one supervision segment at the
# smoke batch, so that Inductor's cold compile on the CPU (C++ code, one compile thread) takes about half a minute;
# InfiLoop takes the Triton kernel's custom operator (under the interpreter), the path a GPU takes.
DRY_COMPILED = ["model.H=1", "model.L=1", "train.max_segments=1", "train.batch_size=32", "model.inner.backend=triton",
                "model.outer.backend=triton"]

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
    t0: float = field(default_factory=time.perf_counter)  # gpu_check.py passes its process's start
    result: dict = field(default_factory=dict)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.t0)

    def save(self) -> None:
        self.result["seconds"] = round(time.perf_counter() - self.t0, 2)
        if self.json_path is not None:
            write_json(self.json_path, self.result)

    def section(self, label: str, fn, *args) -> None:
        """Run one section; an exception is recorded (and printed) and the part goes on with the next section."""
        t = time.perf_counter()
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - one failing section must not hide the others
            traceback.print_exc()
            self.result.setdefault("errors", []).append(f"{label}: {type(e).__name__}: {e}"[:400])
        self.result.setdefault("sections", []).append({"label": label, "seconds": round(time.perf_counter() - t, 2)})
        print(f"[{self.part} {time.perf_counter() - self.t0:.0f} s] {label} ({time.perf_counter() - t:.1f} s)",
              file=sys.stderr, flush=True)
        self.save()


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------------
# kernels: correctness against float64
# --------------------------------------------------------------------------------------------------


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


def _errors(got: dict, eager: dict, truth: dict, tol: float) -> tuple[dict, float, str, bool]:
    errors, worst, worst_at, dtypes_equal = {}, 0.0, "", True
    for k, t in truth.items():
        dtypes_equal &= got[k].dtype == eager[k].dtype and got[k].shape == eager[k].shape
        e_k = float((got[k].double() - t).abs().max()) if t.numel() else 0.0
        e_e = float((eager[k].double() - t).abs().max()) if t.numel() else 0.0
        allowed = 2 * e_e + tol * (1 + (float(t.abs().max()) if t.numel() else 0.0))
        errors[k] = {"kernel": e_k, "eager": e_e, "allowed": allowed}
        if e_k / allowed > worst:
            worst, worst_at = e_k / allowed, k
    return errors, worst, worst_at, bool(dtypes_equal)


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
    errors, worst, worst_at, dtypes_equal = _errors(got, eager, truth, TOL[zdt if zdt != "float32" else sdt])
    return {"name": name, "shape": [*lead, d], "z_dtype": zdt, "state_dtype": sdt, "content": content,
            "clamped": f"{n_clamped}/{n_rows}", "errors": errors, "worst_ratio": worst, "worst_at": worst_at,
            "dtypes_equal": dtypes_equal, "passed": bool(worst <= 1 and dtypes_equal)}


def part_kernels(ctx: Ctx) -> None:
    cases = ctx.result.setdefault("cases", [])
    for case in CASES_CPU if ctx.dry else CASES_FULL:
        ctx.section(f"case {case[0]}", lambda case=case: cases.append(check_case(case, ctx.device)))
    ctx.result["failed_checks"] = [c["name"] for c in cases if not c["passed"]]


# --------------------------------------------------------------------------------------------------
# step_speed: one connection step
# --------------------------------------------------------------------------------------------------


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


STEP_COMPILE_S = 30.0  # torch.compile of the reference step, forward and backward, cold: what its section needs


def part_step_speed(ctx: Ctx) -> None:
    res = ctx.result
    rows_n, d = (16, 8) if ctx.dry else (GPU_BATCH * 81, 512)
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
    if ctx.dry:
        return
    for dtype in (torch.bfloat16, torch.float32):  # last, and only where a cold compile fits what is left
        dn = str(dtype).replace("torch.", "")
        if ctx.left() < STEP_COMPILE_S:
            res["compile"][dn] = f"skipped: {ctx.left():.0f} s left, a cold compile of the step needs about " \
                                 f"{STEP_COMPILE_S:.0f} s"
            continue
        ctx.section(f"torch.compile {dn}", lambda dtype=dtype, dn=dn: res["compile"].__setitem__(
            dn, step_timing(rows_n, d, dtype, ctx.device, reps, inner, True, bw())))


# --------------------------------------------------------------------------------------------------
# train_eager, train_compiled: the pilot's training path
# --------------------------------------------------------------------------------------------------


def profile_and_overrides(ctx: Ctx) -> tuple[str, list[str]]:
    """The profile the training and evaluation parts use and its overrides: bf16 autocast at the gpu profile's
    batch; on the device generated puzzles (it has no network), in a dry run the smoke model for four steps."""
    if ctx.dry:
        return "smoke", ["train.precision=bf16", f"train.batch_size={GPU_BATCH}", "train.steps=4",
                         "train.warmup_steps=2"]
    return "gpu", ["data.source=generate", *(f"data.{k}={v}" for k, v in GPU_DATA.items()),
                   f"train.warmup_steps={WARMUP_STEPS}", "train.precision=bf16"]


def data_note(ctx: Ctx) -> str:
    if ctx.dry:
        return f"the smoke profile's generated 4x4 puzzles at batch {GPU_BATCH}, four steps; warm-up 2 steps"
    return DATA_NOTE.format(n_train=GPU_DATA["n_train"], views=1 + GPU_DATA["augment"], n_test=GPU_DATA["n_test"],
                            warmup=WARMUP_STEPS)


def pilot_once(name: str, profile: str, device: str, seconds: float, root: Path, compile_: str,
               overrides: list[str], dry: bool):
    """One connection through ``pilot_run`` (``compile_`` on or off), with the Dynamo counters of its compilation;
    returns (the PilotRun, its record)."""
    from torch._dynamo.utils import counters

    from infiloop.experiments.cost import pilot
    from infiloop.experiments.store.runs import resolve

    torch._dynamo.reset()
    counters.clear()
    r = pilot.pilot_run(name, profile, device, seconds, root, compile_, overrides, log_every=1 if dry else LOG_EVERY)
    run = resolve("sudoku", name, profile, overrides, root=root)
    rec = asdict(r)
    rec["budget_s"] = round(seconds, 1)
    rec["batch"] = run.train_config().batch_size
    rec["precision"] = run.train_config().precision
    rec["planned_s_per_step"] = pilot._planned_step_seconds(run.model_config(), rec["batch"], device)
    rec["dynamo"] = {"graph_breaks": int(sum(counters["graph_break"].values())),
                     "break_reasons": [str(k)[:300] for k in list(counters["graph_break"])[:5]],
                     "unique_graphs": int(counters["stats"].get("unique_graphs", 0))}
    shutil.rmtree(run.dir, ignore_errors=True)  # a checkpoint of the paper model: hundreds of MB
    return r, rec


def _train_data(ctx: Ctx, profile: str, over: list[str]) -> None:
    from infiloop.experiments.store.runs import resolve

    ctx.result["train_rows"] = len(resolve("sudoku", "infiloop", profile, over, root=ctx.work / "runs").train_data())


def warm_kernels(name: str, profile: str, over: list[str], device: str, root: Path) -> float:
    """One training segment's forward and backward of the connection's model at the pilot's shapes (its micro-batch,
    bf16 autocast), untimed by the pilot: Triton's kernels are compiled here, before the timing (12-18 s a
    connection from a cold cache on the H100 of 2026-12-06, which the eager part's s/step once paid). Returns its
    seconds."""
    from infiloop.experiments.store.runs import resolve
    from infiloop.model.connections import choose_kernels
    from infiloop.model.reasoner import LoopedReasoner

    t0 = time.perf_counter()
    run = resolve("sudoku", name, profile, over, root=root)
    cfg, tc, dev = run.model_config(), run.train_config(), torch.device(device)
    model = LoopedReasoner(cfg).to(dev)
    choose_kernels(model, dev)
    b = min(tc.micro_batch or tc.batch_size, tc.batch_size)
    inputs = torch.randint(1, cfg.vocab_size, (b, cfg.seq_len), device=dev)
    bf16 = tc.precision == "bf16" or (tc.precision == "auto" and dev.type == "cuda")
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
        _, logits, q_halt, _ = model(model.initial_carry(b, dev), inputs, torch.zeros(b, dtype=torch.long, device=dev))
    (logits.float().mean() + q_halt.float().mean()).backward()
    with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):  # evaluation's forward
        model(model.initial_carry(b, dev), inputs, torch.zeros(b, dtype=torch.long, device=dev))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return round(time.perf_counter() - t0, 2)


def part_train_eager(ctx: Ctx) -> None:
    """s/step of the three connections uncompiled (bf16, the gpu profile's batch), then the pilot's criteria; each
    connection's Triton kernels compiled first, outside the timed runs (:func:`warm_kernels`)."""
    from infiloop.experiments.cost import pilot

    res = ctx.result
    profile, over = profile_and_overrides(ctx)
    res.update(profile=profile, device=ctx.device, overrides=over, data=data_note(ctx), runs={}, warmup_s={})
    ctx.section("data", _train_data, ctx, profile, over)

    def warm():
        for name in PILOT_CONNECTIONS:
            res["warmup_s"][name] = warm_kernels(name, profile, over, ctx.device, ctx.work / "runs")

    ctx.section("warm-up: the Triton kernels compiled, untimed", warm)
    runs = {}
    for i, name in enumerate(PILOT_CONNECTIONS):
        share = ctx.pilot_seconds or max(10.0, (ctx.left() - RESERVE_S) / (len(PILOT_CONNECTIONS) - i))

        def one(name=name, share=share):
            runs[name], res["runs"][name] = pilot_once(name, profile, ctx.device, share, ctx.work / "runs", "off",
                                                       over, ctx.dry)

        ctx.section(f"eager {name} ({share:.0f} s)", one)

    def verdict():
        v = pilot.decide(list(runs.values()), {n: res["runs"][n]["planned_s_per_step"] for n in runs})
        res["pilot_criteria"] = [{"criterion": c, "met": ok, "measured": seen} for c, ok, seen in v.criteria]
        res["pilot_go"] = v.go

    if runs:
        ctx.section("the pilot's criteria", verdict)


def part_train_compiled(ctx: Ctx) -> None:
    """InfiLoop's training step compiled by Inductor from a cold cache: seconds to the first step, s/step after it,
    Dynamo's graph breaks and graphs (TORCH_LOGS=recompiles,graph_breaks writes them into the part's log too)."""
    res = ctx.result
    profile, over = profile_and_overrides(ctx)
    over = over + DRY_COMPILED if ctx.dry else over
    res.update(profile=profile, device=ctx.device, overrides=over, data=data_note(ctx), runs={},
               inductor_cache=os.environ.get("TORCHINDUCTOR_CACHE_DIR"))
    ctx.section("data", _train_data, ctx, profile, over)
    share = max(10.0, ctx.left() - RESERVE_S)  # all that is left: a cold compile comes first

    def one():
        _, res["runs"]["infiloop"] = pilot_once("infiloop", profile, ctx.device, share, ctx.work / "runs", "on", over,
                                                ctx.dry)

    ctx.section(f"compiled infiloop ({share:.0f} s)", one)


# --------------------------------------------------------------------------------------------------
# evaluation, model_overhead
# --------------------------------------------------------------------------------------------------


def _tiled(data, n: int):
    """``data`` with its rows repeated (or cut) to ``n`` rows: one evaluation batch of the profile's size."""
    idx = np.arange(n) % len(data)
    return replace(data, inputs=data.inputs[idx], labels=data.labels[idx], puzzle_ids=data.puzzle_ids[idx],
                   meta={k: v[idx] for k, v in data.meta.items()})


def eval_seconds(model, data, updates: int, warm: int, batch: int, device: str, precision: str) -> float:
    """Seconds of ``updates`` outer updates of ``evaluate`` on one batch, after ``warm`` updates of warm-up."""
    from infiloop.evaluation import evaluate

    evaluate(model, data, updates=warm, batch_size=batch, device=device, progress=False, precision=precision)
    C.sync(device)
    t0 = time.perf_counter()
    evaluate(model, data, updates=updates, batch_size=batch, device=device, progress=False, precision=precision)
    C.sync(device)
    return time.perf_counter() - t0


def part_evaluation(ctx: Ctx) -> None:
    from infiloop.experiments.store.runs import resolve
    from infiloop.model import LoopedReasoner

    res = ctx.result
    profile, over = profile_and_overrides(ctx)
    root = ctx.work / "runs"
    updates, warm = (2, 1) if ctx.dry else (8, 2)
    res.update(profile=profile, data=data_note(ctx), updates=updates, s_per_update={})
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
    preset, batch, reps, backend = ("smoke", 1, 1, "triton") if ctx.dry else ("gpu", GPU_BATCH, ctx.model_reps, "auto")
    res.update(preset=preset, batch=batch, reps=reps, by_dtype={})
    for dtype in (torch.bfloat16, torch.float32):
        dn = str(dtype).replace("torch.", "")
        ctx.section(f"overhead {dn}", lambda dtype=dtype, dn=dn: res["by_dtype"].__setitem__(
            dn, C.bench_overhead(preset, batch, ctx.device, reps, dtype=dtype, backend=backend)))


PART_FNS = {"train_eager": part_train_eager, "kernels": part_kernels, "step_speed": part_step_speed,
            "evaluation": part_evaluation, "model_overhead": part_model_overhead,
            "train_compiled": part_train_compiled}
