"""The whole reproduction: data -> models (in parallel, cached) -> notebooks (papermill) -> report.

    python -m infiloop reproduce [--profile tiny] [--only NAME] [-p KEY VALUE ...] [--jobs N]

Every stage is timed into ``results/<profile>/stages.json``; a failing notebook does not stop the
others, and the exit status is non-zero when anything failed. Executed notebooks are kept under
``results/<profile>/`` for provenance (``results/`` is ``paths.RESULTS``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

from . import paths
from .errors import Parser
from .experiments import PROFILES, planned_runs
from .io import atomic_write_text
from .machine import default_jobs, threads_per_job


def notebooks() -> list[str]:
    return sorted(p.stem for p in paths.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def declared_parameters(name: str) -> set[str]:
    """The parameters a notebook declares in its cell tagged ``parameters``."""
    import papermill as pm

    return set(pm.inspect_notebook(str(paths.NOTEBOOKS / f"{name}.ipynb")))


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Stages:
    """Timed stages, written to stages.json after each one (a killed pipeline keeps what it did).

    A partial run (``--only``) replaces the records of the stages it re-runs and keeps the others, so
    the report's provenance still covers every stage.
    """

    def __init__(self, path: Path):
        self.path, self.stages, self.started = path, [], _now()
        if path.is_file():
            try:
                self.stages = json.loads(path.read_text())["stages"]
            except (ValueError, KeyError):
                self.stages = []

    def run(self, name: str, fn) -> bool:
        print(f"\n[reproduce] === {name} ===", file=sys.stderr, flush=True)
        t0 = time.time()
        rec = {"name": name, "status": "ok"}
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - one failing stage must not stop the others
            rec.update(status="failed", error=f"{type(e).__name__}: {e}"[:2000])
            print(f"[reproduce] {name} FAILED: {rec['error']}", file=sys.stderr, flush=True)
        rec["seconds"] = round(time.time() - t0, 2)
        rec["finished"] = _now()
        self.stages = [s for s in self.stages if s["name"] != name] + [rec]
        atomic_write_text(self.path, json.dumps({"stages": self.stages, "started": self.started,
                                                 "finished": _now()}, indent=1))
        return rec["status"] == "ok"


def _build_data(profile: str) -> None:
    """Build (or find cached) the data sets of every task the notebooks need."""
    from . import tasks

    for task in sorted({spec[0] for spec in planned_runs(profile)}):
        tasks.build(task, PROFILES[profile]["data"])


def _train_all(profile: str, jobs: int, device: str) -> None:
    """Train every model the notebooks need, ``jobs`` at a time (one thread each on CPU)."""
    specs = planned_runs(profile)
    pending = list(specs)
    running: list[tuple[subprocess.Popen, tuple]] = []
    failed = []
    threads = threads_per_job(jobs)
    print(f"[reproduce] {len(specs)} models for profile {profile}, {jobs} at a time", file=sys.stderr)
    while pending or running:
        while pending and len(running) < jobs:
            task, recipe, over = pending.pop(0)
            cmd = [sys.executable, "-m", "infiloop", "train", "--profile", profile, "--task", task,
                   "--connection", recipe, "--device", device, "--threads", str(threads), "--quiet"]
            for k, v in over.items():
                cmd += ["--set", f"{k}={json.dumps(v)}"]
            print(f"[reproduce] train {task}/{recipe} {over or ''}", file=sys.stderr, flush=True)
            running.append((subprocess.Popen(cmd, cwd=paths.ROOT, stdout=subprocess.DEVNULL), (task, recipe, over)))
        time.sleep(0.5)
        for proc, spec in list(running):
            if proc.poll() is not None:
                running.remove((proc, spec))
                if proc.returncode != 0:
                    failed.append(spec)
    if failed:
        raise RuntimeError(f"{len(failed)} training runs failed: {failed}")


def _run_notebook(name: str, profile: str, params: dict, out_dir: Path) -> None:
    import papermill as pm

    out_dir.mkdir(parents=True, exist_ok=True)
    mine = declared_parameters(name)  # -p applies to the notebooks that declare it (a notebook refuses others)
    pm.execute_notebook(str(paths.NOTEBOOKS / f"{name}.ipynb"), str(out_dir / f"{name}.ipynb"),
                        parameters={"profile": profile, **{k: v for k, v in params.items() if k in mine}},
                        kernel_name="python3", cwd=str(paths.ROOT), progress_bar=True)


def default_device(profile: str) -> str:
    """``cuda`` for the GPU profiles on a machine with CUDA, else ``cpu`` (``tiny`` is made for the CPU)."""
    import torch

    return "cuda" if profile in ("gpu", "paper") and torch.cuda.is_available() else "cpu"


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m infiloop reproduce", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="tiny", help=f"one of {', '.join(PROFILES)} (default tiny)")
    ap.add_argument("--only", action="append", default=[], help="run only this notebook (repeatable)")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                    help="a papermill parameter for the notebooks (value read as YAML)")
    ap.add_argument("--jobs", type=int, default=default_jobs(), help="models trained at once")
    ap.add_argument("--device", default=None,
                    help="torch device (default: cuda for the gpu and paper profiles where CUDA works, else cpu)")
    ap.add_argument("--no-train", action="store_true", help="skip the parallel training stage")
    args = ap.parse_args(argv)
    if args.profile not in PROFILES:
        ap.error(f"unknown profile {args.profile!r}; valid choices: {', '.join(PROFILES)}")
    if args.device is None:
        args.device = default_device(args.profile)
    names = notebooks()

    def matches(name: str, wanted: str) -> bool:  # "02_depth_scaling", "02" or "depth_scaling"
        return name == wanted or name[:2] == wanted or name[3:] == wanted

    unknown = [o for o in args.only if not any(matches(n, o) for n in names)]
    if unknown:
        ap.error(f"unknown notebook(s) {unknown}; valid: {', '.join(names)} (or their number, or name without it)")
    selected = [n for n in names if not args.only or any(matches(n, o) for o in args.only)]
    params = {k: yaml.safe_load(v) for k, v in args.p}
    known = set().union(*(declared_parameters(n) for n in selected))
    if set(params) - known:
        ap.error(f"-p {', '.join(sorted(set(params) - known))}: not a parameter of the selected notebooks "
                 f"(theirs: {', '.join(sorted(known))})")
    params.setdefault("device", args.device)
    out_dir = paths.RESULTS / args.profile
    out_dir.mkdir(parents=True, exist_ok=True)
    stages = Stages(out_dir / "stages.json")
    t0 = time.time()
    ran = ["report", *selected] + ([] if args.only else ["data"]) + ([] if args.no_train or args.only else ["train"])
    if not args.only:
        stages.run("data", lambda: _build_data(args.profile))
    if not args.no_train and not args.only:
        stages.run("train", lambda: _train_all(args.profile, args.jobs, args.device))
    for name in selected:
        stages.run(name, lambda name=name: _run_notebook(name, args.profile, params, out_dir))
    from .report import build_report

    report: list[Path] = []
    stages.run("report", lambda: report.append(build_report(args.profile)))
    failed = [s["name"] for s in stages.stages if s["status"] != "ok" and s["name"] in ran]
    print(f"\n[reproduce] profile {args.profile}: {len(ran)} stages in {time.time() - t0:.0f} s", file=sys.stderr)
    if failed:
        print(f"[reproduce] FAILED: {', '.join(failed)} (see {out_dir / 'stages.json'})", file=sys.stderr)
    if report:
        print(f"[reproduce] report: {report[0]}")
    return 1 if failed else 0
