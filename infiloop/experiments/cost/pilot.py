"""The pilot: ten minutes that say whether a profile's GPU-hours are worth spending.

``python -m infiloop pilot --profile gpu`` trains each connection of the paper's Table 1 (carry-last, FPRM,
InfiLoop) with the profile's exact settings (its model, batch, learning-rate schedule and precision; compiled
where the profile compiles) for an equal share of a time budget, from scratch, in ``runs/pilot/<profile>/``
(never the run cache: a pilot run is cut short on purpose). It then prints, per connection, the step time after
the first logged window (which holds the compilation), peak device memory, compile seconds and the kernel each
InfiLoop connection took (with any fallback), loss and cell accuracy by step, and InfiLoop's |q|, beta and share of
raw content scores at the clip; then **go** or **no-go** by three criteria it states:

1. every connection's loss is finite and falls: the last logged loss at most ``1 - loss_drop`` times the first;
2. InfiLoop's cell accuracy at the last common logged step is not below carry-last's by more than ``margin``;
3. on CUDA, the measured step time is within ``time_factor`` of the plan's estimate (``flops.flops_per_step`` at
   ``flops.ASSUMED_GPU_TFLOPS``), the whole training's time shown beside; elsewhere the plan is itself measured
   (``plan`` calibrates on the machine), so the criterion does not apply and is shown as such.

The report is also written to ``results/<profile>/pilot.json``. Exit status 0 for go, 1 for no-go.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ... import paths
from ...errors import Parser, UsageError
from ...io import atomic_write_text
from ...training import read_metrics, train
from ..settings import profiles, recipes
from ..store.runs import resolve
from . import calibration, flops, measure

CONNECTIONS = recipes.MAIN_RECIPES  # Table 1: carry-last, FPRM, InfiLoop
LOSS_DROP = 0.05  # criterion 1: the last logged loss at most 95 % of the first
MARGIN = 0.05  # criterion 2: InfiLoop's cell accuracy at most 5 points below carry-last's
TIME_FACTOR = 1.5  # criterion 3: measured training time at most 1.5 x the plan's estimate
DEFAULT_MINUTES = {"gpu": 10.0, "paper": 10.0}  # other profiles: 1 minute


@dataclass
class PilotRun:
    """What the pilot measured of one connection."""

    connection: str
    steps: int  # optimiser steps taken
    steps_planned: int  # the profile's steps (the whole training)
    seconds: float  # wall time of the pilot's training, compilation included
    s_per_step: float | None  # after the first logged window (compilation excluded); None with one window
    peak_memory_gb: float | None  # CUDA only
    compiled: bool
    compile_seconds: float | None
    compile_error: str | None
    kernels: dict[str, str]
    curve: list[dict] = field(default_factory=list)  # step, loss, cell_acc, exact_acc (and InfiLoop's statistics)

    def last(self, key: str) -> float | None:
        return self.curve[-1].get(key) if self.curve else None


def _log_every(steps_in_budget: int) -> int:
    """About twelve points on the loss curve."""
    return max(1, steps_in_budget // 12)


def pilot_run(connection: str, profile: str, device: str, seconds: float, root: Path, compile_: str | None,
              overrides: list[str], log_every: int | None = None) -> PilotRun:
    """Train ``connection`` at ``profile`` for about ``seconds`` from scratch in ``root`` and measure it; a log
    line every ``log_every`` steps (default: about twelve over the steps the plan expects in ``seconds``)."""
    run = resolve("sudoku", connection, profile, overrides or None, root=root)
    model_cfg, train_cfg = run.model_config(), run.train_config()
    guess = max(2, int(seconds / max(_planned_step_seconds(model_cfg, train_cfg.batch_size, device), 1e-3)))
    train_cfg.log_every = log_every or _log_every(min(guess, train_cfg.steps))
    train_cfg.checkpoint_every = train_cfg.steps  # one checkpoint, at the end: the pilot measures the steps
    if compile_ is not None:
        train_cfg.compile = compile_
    shutil.rmtree(run.dir, ignore_errors=True)  # always from scratch: the compile time is part of the measure
    data = run.train_data()
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.time()
    summary = train(model_cfg, train_cfg, data, run.dir, device=device, progress=False, time_limit_s=seconds)
    wall = time.time() - t0
    curve = [{k: v for k, v in rec.items() if k in ("step", "loss", "cell_acc", "exact_acc", "elapsed_s",
                                                    "outer_q_norm", "outer_beta", "outer_at_clip")}
             for rec in read_metrics(run.dir / "metrics.jsonl")]
    rate = None
    if len(curve) >= 2:
        rate = (curve[-1]["elapsed_s"] - curve[0]["elapsed_s"]) / (curve[-1]["step"] - curve[0]["step"])
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None
    return PilotRun(connection, int(summary["step"]), train_cfg.steps, round(wall, 2), rate, peak,
                    bool(summary.get("compiled")), summary.get("compile_seconds"), summary.get("compile_error"),
                    dict(summary.get("kernels") or {}), curve)


def _planned_step_seconds(model_cfg, batch_size: int, device: str) -> float:
    """The plan's estimate of one training step on CUDA (its FLOPs at the assumed rate); elsewhere a rough guess
    (``measure.GUESS_FLOPS``), used only to space the pilot's log lines."""
    kind = torch.device(device).type
    guess = measure.GUESS_FLOPS
    rate = flops.ASSUMED_GPU_TFLOPS * 1e12 if kind == "cuda" else guess.get(kind, guess["cpu"])
    return flops.flops_per_step(model_cfg, batch_size) / rate


@dataclass
class Verdict:
    go: bool
    criteria: list[tuple[str, bool | None, str]]  # (criterion, met (None: does not apply), what was measured)


def decide(runs: list[PilotRun], planned_s_per_step: dict[str, float | None], loss_drop: float = LOSS_DROP,
           margin: float = MARGIN, time_factor: float = TIME_FACTOR) -> Verdict:
    """Go or no-go from the pilot's measurements, by the three criteria of this module's docstring."""
    criteria = []
    for r in runs:
        losses = [c["loss"] for c in r.curve]
        finite = bool(losses) and all(math.isfinite(x) for x in losses)
        falls = finite and len(losses) >= 2 and losses[-1] <= (1 - loss_drop) * losses[0]
        seen = f"{losses[0]:.3f} -> {losses[-1]:.3f} over {r.steps} steps" if losses else "no logged loss"
        criteria.append((f"{r.connection}: finite loss that falls by at least {loss_drop:.0%}", falls, seen))
    by = {r.connection: r for r in runs}
    if "infiloop" in by and "carry_last" in by:
        a, b = by["infiloop"].curve, by["carry_last"].curve
        common = sorted({c["step"] for c in a} & {c["step"] for c in b})
        if common:
            at = common[-1]
            inf = next(c["cell_acc"] for c in a if c["step"] == at)
            cl = next(c["cell_acc"] for c in b if c["step"] == at)
            criteria.append((f"InfiLoop's cell accuracy not below carry-last's by more than {margin:.0%}",
                             inf >= cl - margin, f"at step {at}: InfiLoop {inf:.3f}, carry-last {cl:.3f}"))
        else:
            criteria.append(("InfiLoop's cell accuracy not below carry-last's", False, "no common logged step"))
    for r in runs:
        plan = planned_s_per_step[r.connection]
        if plan is None:
            criteria.append((f"{r.connection}: step time within {time_factor}x the plan's", None,
                             "does not apply off CUDA (the plan of a CPU profile is itself measured)"))
            continue
        if r.s_per_step is None:
            criteria.append((f"{r.connection}: step time within {time_factor}x the plan's", False,
                             "one logged window only: train longer (--minutes)"))
            continue
        ok = r.s_per_step <= time_factor * plan
        criteria.append((f"{r.connection}: step time within {time_factor}x the plan's", ok,
                         f"{r.s_per_step:.3g} s/step measured, {plan:.3g} planned; the whole training "
                         f"{_duration(r.s_per_step * r.steps_planned)} measured against "
                         f"{_duration(plan * r.steps_planned)} planned"))
    return Verdict(all(ok is not False for _, ok, _ in criteria), criteria)


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"


def render(profile: str, device: str, runs: list[PilotRun], verdict: Verdict) -> str:
    """The pilot's report: a table per connection, the loss curves, the criteria and the verdict."""
    lines = [f"pilot of profile {profile!r} on {calibration.device_name(device)}", "",
             "| connection | steps | s/step | peak memory | compiled | compile s | kernels |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        kern = ", ".join(sorted(set(r.kernels.values()))) or "-"
        mode = "yes" if r.compiled else ("no (fell back: " + r.compile_error + ")" if r.compile_error else "no")
        lines.append(f"| {r.connection} | {r.steps} of {r.steps_planned} | "
                     f"{'-' if r.s_per_step is None else f'{r.s_per_step:.3g}'} | "
                     f"{'-' if r.peak_memory_gb is None else f'{r.peak_memory_gb:.1f} GiB'} | {mode} | "
                     f"{'-' if r.compile_seconds is None else r.compile_seconds} | {kern} |")
    for r in runs:
        lines += ["", f"{r.connection}: step, loss, cell accuracy"
                  + (", |q|, beta, share of scores at the clip (outer axis)" if r.connection == "infiloop" else "")]
        for c in r.curve:
            extra = ""
            if "outer_q_norm" in c:
                extra = f"  |q| {c['outer_q_norm']:.3f}  beta {c['outer_beta']:.3f}  at clip {c['outer_at_clip']:.3f}"
            lines.append(f"  {c['step']:>6}  {c['loss']:.4f}  {c['cell_acc']:.3f}{extra}")
    lines += ["", "criteria:"]
    mark = {True: "met", False: "NOT met", None: "n/a"}
    lines += [f"  [{mark[ok]}] {name}: {seen}" for name, ok, seen in verdict.criteria]
    lines += ["", "go" if verdict.go else "no-go"]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    p = Parser(prog="python -m infiloop pilot", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="gpu", help=profiles.choices())
    p.add_argument("--device", default=None, help="default: cuda where there is one, else cpu")
    p.add_argument("--minutes", type=float, default=None,
                   help="the whole pilot's training time, shared equally (default 10 for gpu and paper, else 1)")
    p.add_argument("--connections", default=",".join(CONNECTIONS), help="comma-separated Table-1 recipes")
    p.add_argument("--no-compile", action="store_true", help="train in eager mode (default: as the profile)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting, as `train` takes it")
    a = p.parse_args(argv)
    if a.profile not in profiles.PROFILES:
        raise UsageError(f"--profile {a.profile!r}: unknown profile; choose from {profiles.choices()}")
    a.connections = [c.strip() for c in a.connections.split(",") if c.strip()]
    bad = [c for c in a.connections if c not in recipes.RECIPES]
    if bad or not a.connections:
        raise UsageError(f"--connections: unknown recipe {', '.join(bad) or '(none)'}; choose from "
                         f"{', '.join(CONNECTIONS)}")
    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if a.minutes is None:
        a.minutes = DEFAULT_MINUTES.get(a.profile, 1.0)
    if not a.minutes > 0:
        raise UsageError(f"--minutes must be positive, got {a.minutes}")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    root = paths.RUNS / "pilot" / a.profile
    share = 60 * a.minutes / len(a.connections)
    runs, planned = [], {}
    for name in a.connections:
        print(f"# pilot: training {name} at {a.profile} for about {share:.0f} s", file=sys.stderr, flush=True)
        r = pilot_run(name, a.profile, a.device, share, root, "off" if a.no_compile else None, a.set)
        runs.append(r)
        cfg = resolve("sudoku", name, a.profile, a.set or None, root=root)
        on_cuda = torch.device(a.device).type == "cuda"
        planned[name] = (_planned_step_seconds(cfg.model_config(), cfg.train_config().batch_size, a.device)
                         if on_cuda else None)
    verdict = decide(runs, planned)
    print(render(a.profile, a.device, runs, verdict))
    out = paths.RESULTS / a.profile / "pilot.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps({"profile": a.profile, "device": calibration.device_name(a.device),
                                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                       "go": verdict.go, "criteria": verdict.criteria,
                                       "runs": [asdict(r) for r in runs]}, indent=1))
    print(f"# pilot report: {out}", file=sys.stderr)
    return 0 if verdict.go else 1
