"""The device check in one script: every GPU measurement of the companion in one run of at most seven minutes.

The parts (``gpu_check_parts.py``), in this order, each in its own subprocess with its own timeout, so that a hung
or crashed part does not hide the others and a slow compile leaves the other figures measured:

- ``train_eager``: the pilot's training of carry-last, InfiLoop and FPRM **uncompiled**, bf16 autocast, at the
  ``gpu`` profile's model and batch (768): s/step, peak memory, loss by step, the pilot's criteria;
- ``kernels``: the fused Triton step against the eager reference (float32, bfloat16; forward and every gradient);
- ``step_speed``: one step, eager vs Triton, its bandwidth against a copy; ``torch.compile`` of the step last, only
  where a cold compile fits what is left;
- ``evaluation``: seconds per outer update in fp32, TF32 and bf16;
- ``model_overhead``: InfiLoop's whole-model cost against carry-last's;
- ``train_compiled``: InfiLoop's training step compiled by Inductor from a cold cache, with the seconds of its
  compile, s/step after it and its graph breaks; it gets whatever time the others left.

Every part but the compiled one runs uncompiled, so no budget but the last holds a compile; the last's holds a
cold Inductor compile of the gpu model (140 s at least, more when the others end early). Each part runs with
``TORCH_LOGS=recompiles,graph_breaks``; its log's warnings, recompiles and graph breaks are counted in the report.

Writes ``gpu_check.json`` (everything measured) and ``gpu_check.md`` (a table of check, measured, goal, met?, then
the details) into ``--out`` (default: a new folder ``gpu_check-<date>`` under the system's temporary folder), with
each part's JSON under ``parts/`` and its log under ``logs/``. Both are rewritten after every section of every part,
so a run cut short keeps what it measured. Exit status 1 if a kernel check fails or a part crashes or times out
(goals not met are reported, not failures); 2, with one ``error:`` line naming the problem, where CUDA is missing or
unusable (a CPU build of torch, no device visible, a driver the build cannot use, a device it has no code for).

The device command (docs/gpu.md: versions, driver and memory first; 400 s of parts, the outer timeout a last resort
that still leaves a 15-minute slot time for one rerun of a part):

    timeout 420 python benchmarks/gpu_check.py --out "$OUT/gpu_check"

Other forms:

    python benchmarks/gpu_check.py --dry-run --out /tmp/gc   # every section on the CPU at a size it can do (bf16
                                                              # autocast, Triton's interpreter, an Inductor compile,
                                                              # a batch of 768): checks the script, its timings mean
                                                              # nothing (--self-test-cpu: the same)
    python benchmarks/gpu_check.py --parts train_compiled --budget 240   # one part again, in what is left
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
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import _common as C  # noqa: E402
import gpu_check_parts as P  # noqa: E402
import gpu_check_report as R  # noqa: E402
import torch  # noqa: E402

PARTS = tuple(P.PART_FNS)
# Per-part timeouts (seconds), the part's process start included: the last gets what is left of the budget.
# train_eager: 30 s more since it compiles the Triton kernels before its timing (about 45 s cold), not within it.
TIMEOUTS = {"train_eager": 105, "kernels": 40, "step_speed": 45, "evaluation": 35, "model_overhead": 35,
            "train_compiled": 400}
# A dry run checks the plumbing on the CPU, where Inductor's cold compile of the whole model takes 60 s on an idle
# 2-core machine and over 100 s beside other work (CI's slow step: timed out at 75 s): its timings mean nothing.
DRY_TIMEOUTS = {"train_eager": 50, "kernels": 30, "step_speed": 30, "evaluation": 30, "model_overhead": 30,
                "train_compiled": 240}
BUDGET = 400.0  # the whole run; each part's timeout is cut to what is left of it
DRY_BUDGET = 420.0
POLL_S = 1.0  # how often a running part's JSON is folded into gpu_check.json
LOGS = "recompiles,graph_breaks"


# --------------------------------------------------------------------------------------------------
# One part, in its own process
# --------------------------------------------------------------------------------------------------


def run_part(a: argparse.Namespace) -> int:
    """One part in this process; its JSON to ``--json`` (else stdout). 0: no error and no failed check."""
    from infiloop import paths

    if a.dry_run:
        torch.set_num_threads(1)  # small shapes: a second thread only waits, and on a shared machine it spins
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="gpu_check-work-"))
    paths.DATA, paths.RUNS, paths.RESULTS = work / "data", work / "runs", work / "results"
    ctx = P.Ctx(a.part, a.dry_run, "cpu" if a.dry_run else "cuda", work, a.seconds or TIMEOUTS[a.part],
                Path(a.json) if a.json else None, a.reps, a.model_reps, a.pilot_seconds, t0=START)
    ctx.result.update(part=a.part, dry_run=a.dry_run, device=C.gpu_facts()["gpu"], complete=False)
    ctx.save()
    try:
        P.PART_FNS[a.part](ctx)
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


def _read(js: Path) -> dict | None:
    try:
        return json.loads(js.read_text()) if js.is_file() else None
    except ValueError:
        return None


def part_env(name: str, a: argparse.Namespace, work: Path) -> dict:
    """The part's environment: Dynamo's recompiles and graph breaks into its log; the compiled part with new Inductor
    and Triton caches (a cold compile, as a first training on a new machine has), one compile thread in a dry run."""
    env = dict(os.environ, TORCH_LOGS=LOGS)
    if name == "train_compiled":
        env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"] = str(work / "inductor"), str(work / "triton")
        if a.dry_run:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    return env


def _wait(proc: subprocess.Popen, timeout: float, on_tick) -> tuple[int | None, bool]:
    """Wait for ``proc`` up to ``timeout`` seconds, calling ``on_tick`` every POLL_S; (returncode, timed out)."""
    end = time.perf_counter() + timeout
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(POLL_S, end - time.perf_counter()))), False
        except subprocess.TimeoutExpired:
            if time.perf_counter() >= end:
                _kill_group(proc)
                return None, True
            on_tick()


def run_child(name: str, timeout: float, a: argparse.Namespace, out: Path, work: Path, report: dict) -> dict:
    """Run part ``name`` in a subprocess (its own process group) for at most ``timeout`` seconds, folding its JSON
    into the report every time a section ends."""
    js, log = out / "parts" / f"{name}.json", out / "logs" / f"{name}.log"
    js.unlink(missing_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--json", str(js), "--work", str(work),
           "--seconds", f"{timeout:.0f}", "--reps", str(a.reps), "--model-reps", str(a.model_reps)]
    cmd += ["--dry-run"] if a.dry_run else []
    cmd += ["--pilot-seconds", str(a.pilot_seconds)] if a.pilot_seconds else []
    t0, killed, seen = time.perf_counter(), False, [None]
    rec = {"status": "running", "timeout_s": round(timeout), "log": str(log.relative_to(out)), "result": None}
    report["parts"][name], report["running"] = rec, name

    def tick():
        if js.is_file() and js.stat().st_mtime_ns != seen[0]:
            seen[0] = js.stat().st_mtime_ns
            rec.update(result=_read(js), seconds=round(time.perf_counter() - t0, 1), log_counts=R.count_log(log))
            R.write_report(report, out)

    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, cwd=C.ROOT,
                                env=part_env(name, a, work))
        try:
            rc, timed_out = _wait(proc, timeout, tick)
        except (Terminated, KeyboardInterrupt):
            killed, rc, timed_out = True, None, False
            _kill_group(proc)
    result = _read(js)
    rec.update(status="killed (outer timeout)" if killed else _status(timed_out, rc, result),
               seconds=round(time.perf_counter() - t0, 1), returncode=rc, result=result, log_counts=R.count_log(log))
    report.pop("running", None)
    if rec["status"] != "ok":
        tail = log.read_text(errors="replace").splitlines()[-30:]
        print(f"--- {name}: {rec['status']}; last lines of {log}:\n" + "\n".join(tail), file=sys.stderr, flush=True)
    return rec


def part_timeouts(a: argparse.Namespace) -> dict[str, float]:
    t = dict(DRY_TIMEOUTS if a.dry_run else TIMEOUTS)
    for item in a.timeout:
        k, _, v = item.partition("=")
        if k not in PARTS or not v:
            raise SystemExit(f"error: --timeout {item!r}: expected PART=SECONDS with PART one of {', '.join(PARTS)}")
        t[k] = float(v)
    return t


def _run_parts(a: argparse.Namespace, out: Path, report: dict, work: Path, t0: float, budget: float) -> None:
    for name in a.parts:
        left = budget - (time.perf_counter() - t0) - 3.0
        timeout = min(a.timeouts[name], left)
        if timeout < 10:
            report["parts"][name] = {"status": "skipped (no time left in the budget)", "result": None}
        else:
            print(f"[{time.perf_counter() - t0:.0f} s] {name}: starting (timeout {timeout:.0f} s)",
                  file=sys.stderr, flush=True)
            report["parts"][name] = run_child(name, timeout, a, out, work, report)
            print(f"[{time.perf_counter() - t0:.0f} s] {name}: {report['parts'][name]['status']}",
                  file=sys.stderr, flush=True)
        R.write_report(report, out)
        if report["parts"][name]["status"].startswith("killed"):
            raise Terminated()


def run_all(a: argparse.Namespace, out: Path) -> dict:
    budget = a.budget or (DRY_BUDGET if a.dry_run else BUDGET)
    report = {"header": C.gpu_facts(), "mode": "dry run (CPU, Triton interpreter, small shapes)" if a.dry_run
              else "device", "command": "python " + " ".join(sys.argv), "out": str(out), "budget_s": budget,
              "timeouts_s": {p: a.timeouts[p] for p in a.parts}, "parts": {}}
    work = Path(tempfile.mkdtemp(prefix="gpu_check-work-"))
    t0 = time.perf_counter()
    old = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run_parts(a, out, report, work, t0, budget)
    except (Terminated, KeyboardInterrupt):
        report["interrupted"] = True
        report.pop("running", None)
    finally:
        signal.signal(signal.SIGTERM, old)
        shutil.rmtree(work, ignore_errors=True)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    R.write_report(report, out)
    return report


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def cuda_unusable() -> str | None:
    """Why this check cannot measure anything here (one phrase), or None: ``machine.cuda_problem`` (a CPU build of
    torch, no device visible, a driver the build cannot use), then a first CUDA operation in a process of its own
    (a device this build has no code for fails there, not in ``is_available``)."""
    from infiloop.machine import cuda_problem

    problem = cuda_problem()
    if problem:
        return problem
    probe = "import torch; x = torch.ones(8, device='cuda'); print(float((x + 1).sum()))"
    try:
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "a first CUDA operation did not finish in 120 s"
    if res.returncode != 0 or res.stdout.strip() != "16.0":
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        return f"a first CUDA operation failed ({lines[-1].strip()[:200] if lines else f'exit {res.returncode}'})"
    return None


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None, help="folder for gpu_check.json, gpu_check.md, parts/ and logs/ "
                   "(default: a new folder gpu_check-<date> under the system's temporary folder)")
    p.add_argument("--dry-run", action="store_true", help="every section on the CPU at a size it can do (Triton's "
                   "interpreter, smoke model): checks the script; its timings mean nothing")
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
                        "30 in a dry run, where its four steps end sooner)")
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
        a.pilot_seconds = 30.0  # a limit only: the smoke model's four steps take seconds
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.part:
        return run_part(a)
    if not a.dry_run and (problem := cuda_unusable()):
        print(f"error: gpu_check.py: CUDA is not usable here: {problem} (--dry-run checks the script on the CPU)",
              file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else Path(tempfile.gettempdir()) / \
        f"gpu_check-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    print(C.header("GPU check" + (" (dry run)" if a.dry_run else "")), file=sys.stderr)
    print(f"writing {out / 'gpu_check.json'} and {out / 'gpu_check.md'}", file=sys.stderr, flush=True)
    report = run_all(a, out)
    print(R.render_md(report))
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
