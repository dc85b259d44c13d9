"""The whole reproduction: data -> compute -> notebooks (papermill) -> report.

    python -m infiloop reproduce [--profile quick] [--only NAME] [-p KEY VALUE ...] [--jobs N] [--no-compile]
                                 [--executor process]
    python -m infiloop reproduce --profile paper --executor slurm [--partition P --account A] [--wait]

The compute stage runs every training run and evaluation that the selected notebooks read, as declared in
each notebook's spec module (``notebooks/experiments/``), each once, by the executor of ``--executor``
(``compute/executors.py``): on every core or GPU of this machine (``local``, a warm worker per slot; ``process``, a
new process per job; on a GPU several small jobs side by side), or as Slurm jobs (``slurm``: the notebooks and the
report then run once every job is done); the notebooks then only load,
analyse and plot, on a CPU as many at a time as there are compute slots (one kernel each, one torch thread each).

The default profile runs on the GPU where CUDA is usable. A profile run on another kind of device than it is made
for keeps its run cache, results and figures apart, in ``results/<device>/`` (``placement.kept_apart``): a model trained
on a GPU (bf16 there, by ``train.precision`` auto) never stands in for one trained on the CPU, nor the other way.
After the default run on a GPU, the ``gpu`` profile is offered: its jobs, its GPU-hours and the pilot to run first
(``cost.command.gpu_offer``).

Every stage is timed into ``results/<profile>/stages.json``; a failing notebook does not stop the
others, and the exit status is non-zero when anything failed. Executed notebooks are kept under
``results/<profile>/`` for provenance (``results/`` is ``paths.RESULTS``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from .. import paths
from ..errors import DataError, Parser, UsageError
from ..io import atomic_write_text
from ..machine import cuda_problem
from .compute import executors
from .notebooks import declarations, manifest, parameters
from .notebooks.helper import PIPELINE
from .placement import apart_note, default_device, kept_apart
from .settings import profiles


def notebooks() -> list[str]:
    """Every notebook, in number order: those with a spec module (``notebooks/declarations.py`` lists them)."""
    return declarations.names()


def select(names: list[str], only: list[str], profile: str) -> list[str]:
    """The notebooks of ``names`` to run: those ``only`` names (``declarations.notebook_name``: "02_depth_scaling",
    "02" or "depth_scaling"), else those whose specs name the profile (``declarations.profile_notebooks``)."""
    wanted = {declarations.notebook_name(o) for o in only} if only else set(declarations.profile_notebooks(profile))
    return [n for n in names if n in wanted]


def declared_parameters(name: str) -> set[str]:
    """The parameters a notebook declares in its cell tagged ``parameters`` (read by ``parameters.py``)."""
    return parameters.declared_parameters(name)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def stage_error(e: BaseException) -> str:
    """A failed stage's error in one line: a notebook's as its error and cell (papermill's own message is the cell's
    whole traceback, which the executed notebook keeps), anything else as its type and message."""
    if hasattr(e, "ename") and hasattr(e, "evalue"):  # papermill.exceptions.PapermillExecutionError
        return f"{e.ename} in cell [{getattr(e, 'exec_count', '?')}]: {' '.join(str(e.evalue).split())}"
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


class Stages:
    """Timed stages, written to stages.json after each one (a killed pipeline keeps what it did).

    A partial run (``--only``) replaces the records of the stages it re-runs and keeps the others, so
    the report's provenance still covers every stage.
    """

    def __init__(self, path: Path):
        import threading

        self.path, self.stages, self.started = path, [], _now()
        self.lock = threading.Lock()  # notebooks run in parallel threads record their stages here
        if path.is_file():
            try:
                self.stages = json.loads(path.read_text())["stages"]
            except (ValueError, KeyError):
                self.stages = []

    def run(self, name: str, fn, stop_on: tuple[type[BaseException], ...] = ()) -> bool:
        """Run stage ``name`` and record it; a failure is recorded and the run goes on, except an error of a type in
        ``stop_on``, which is recorded and raised (the command line prints it as one ``error:`` line)."""
        print(f"\n[reproduce] === {name} ===", file=sys.stderr, flush=True)
        t0 = time.time()
        rec = {"name": name, "status": "ok"}
        stop = None
        try:
            extra = fn()
            if isinstance(extra, dict):  # measurements of the stage (the compute stage's floor)
                rec.update(extra)
        except Exception as e:  # noqa: BLE001 - one failing stage must not stop the others
            rec.update(status="failed", error=stage_error(e)[:2000])
            if isinstance(e, stop_on):
                stop = e
            else:
                print(f"[reproduce] {name} FAILED: {rec['error']}", file=sys.stderr, flush=True)
        rec["seconds"] = round(time.time() - t0, 2)
        rec["finished"] = _now()
        with self.lock:
            self.stages = [s for s in self.stages if s["name"] != name] + [rec]
            atomic_write_text(self.path, json.dumps({"stages": self.stages, "started": self.started,
                                                     "finished": _now()}, indent=1))
        if stop is not None:
            raise stop
        return rec["status"] == "ok"


def _build_data(planned) -> None:
    """Build (or find cached) the data sets of every run the notebooks read."""
    from .. import tasks

    for task, data, over in sorted({(j.spec.task, j.spec.run.config["data_profile"],
                                     json.dumps(j.spec.run.config["data_overrides"] or {}, sort_keys=True))
                                    for j in planned if j.kind == "train"}):
        tasks.build(task, profiles.data_profile(data), overrides=json.loads(over) or None)


def ipc_kernel_manager():
    """The kernel manager of the notebooks' kernels: IPC sockets in the temporary folder instead of TCP ports,
    so that ipykernel does not warn about unencrypted TCP into every run's output, and two pipelines on one
    machine never race for ports; and a shutdown without jupyter_client's SIGINT first (below)."""
    import tempfile
    import uuid

    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum, default

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

        @default("ip")
        def _socket_prefix(self) -> str:  # ipc sockets are files: keep them out of the working folder
            return str(Path(tempfile.gettempdir()) / f"infiloop-kernel-{uuid.uuid4().hex[:12]}")

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client interrupts a kernel before asking it to shut down; a kernel still finishing its last
            # message then logs "ERROR | KeyboardInterrupt caught in kernel" into the run's console although its
            # notebook succeeded. A finished notebook has nothing to interrupt: the shutdown only asks (then SIGTERM).
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IPCKernelManager


def run_notebook(name: str, profile: str, params: dict, out_dir: Path, progress: bool = True) -> None:
    """Notebook ``name`` through papermill into ``out_dir/<name>.ipynb``, with the ``params`` it declares (the
    pipeline's stages; the notebook command's run by hand)."""
    import papermill as pm

    out_dir.mkdir(parents=True, exist_ok=True)
    mine = declared_parameters(name)  # -p applies to the notebooks that declare it (a notebook refuses others)
    pm.execute_notebook(str(paths.NOTEBOOKS / f"{name}.ipynb"), str(out_dir / f"{name}.ipynb"),
                        parameters={"profile": profile, **{k: v for k, v in params.items() if k in mine}},
                        kernel_name="python3", cwd=str(paths.ROOT), progress_bar=progress,
                        kernel_manager_class=ipc_kernel_manager())


def _run_notebooks(stages: Stages, selected: list[str], profile: str, params: dict, out_dir: Path,
                   workers: int) -> None:
    """Every selected notebook, ``workers`` at a time (each in its own kernel; they only read the run cache and
    write their own files). Several at once: each kernel gets one torch thread (``OMP_NUM_THREADS=1``): two
    kernels of two threads on two cores slow each other down several times."""
    # The kernels write the profile's results, not the scratch folder of a notebook run by hand (helper.keep_apart);
    # several at once, each gets one torch thread
    several = workers > 1 and len(selected) > 1
    old = {k: os.environ.get(k) for k in (PIPELINE, *(("OMP_NUM_THREADS", "MKL_NUM_THREADS") if several else ()))}
    os.environ.update({k: "1" for k in old})  # inherited by the kernels started below
    try:
        if not several:
            for name in selected:
                stages.run(name, lambda name=name: run_notebook(name, profile, params, out_dir))
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(lambda name: stages.run(name, lambda: run_notebook(name, profile, params, out_dir,
                                                                                    progress=False)), selected))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _parser() -> Parser:
    ap = Parser(prog="python -m infiloop reproduce", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=profiles.DEFAULT, help=f"one of {profiles.choices()}")
    ap.add_argument("--only", action="append", default=[], help="run only this notebook (repeatable)")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                    help="a papermill parameter for the notebooks (value read as YAML)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="jobs at a time on CPU (default: one single-threaded job per core; also the local "
                         "cluster's); on CUDA see --jobs-per-gpu")
    ap.add_argument("--jobs-per-gpu", type=int, default=None,
                    help="on CUDA, jobs side by side on each GPU (default: 1 for the gpu and paper profiles, "
                         "up to 4 small jobs for the profiles made for the CPU, at most one per CPU core)")
    ap.add_argument("--no-compile", action="store_true",
                    help="train without torch.compile (--set train.compile=off for every training of the run; "
                         "the run folders stay the same: compile is not part of a run's hash)")
    ap.add_argument("--gpus-per-run", type=int, default=1,
                    help="GPUs per training run on CUDA (more than 1: torchrun, one process per GPU)")
    ap.add_argument("--device", default=None,
                    help="torch device (default: cuda for the gpu and paper profiles where CUDA works, else cpu)")
    ap.add_argument("--no-compute", "--no-train", action="store_true",
                    help="skip the compute stage (the notebooks compute what they miss, one at a time)")
    executors.add_options(ap)
    return ap


def _check_executor(args):
    """The device and the executor's settings, refused before any data is built; returns the executor and its
    settings."""
    ex = executors.executor(args.executor)
    if not ex.here:  # the jobs' device is the nodes', not this machine's
        args.device = args.device or profiles.device(args.profile)
    elif args.device is None:
        args.device = default_device(args.profile)
    elif args.device.startswith("cuda") and (problem := cuda_problem()):
        raise UsageError(f"--device {args.device}: CUDA is not usable here ({problem}); use --device cpu")
    return ex, ex.check(args)


def estimate_line(seconds: float | None) -> str:
    """The compute stage's estimate before it starts: the plan's from this machine's kept timings
    (``plan.cached_wall``: ``plan`` measures them once), else when the bar will show one."""
    if seconds is not None:
        return (f"estimate: about {seconds / 60:.1f} min of compute, then the notebooks (python -m infiloop plan: "
                "the same estimate, job by job)")
    return ("no estimate yet: this machine's timings are not measured (python -m infiloop plan measures and keeps "
            "them, about a minute); the bar shows the time left once the first trainings report progress (30 s)")


def without_compile(planned) -> None:
    """``--no-compile``: every training job of the plan told ``train.compile=off`` (its ``--set``). The run folders
    stay the same: compile is left out of a run's hash (``recipes.config_hash``), like its CPU threads."""
    from dataclasses import replace

    for job in planned:
        if job.kind == "train":
            job.spec = replace(job.spec, overrides={**job.spec.overrides, "train.compile": "off"})


def pricing(executor, args, settings):
    """What ``executor`` weighs the jobs by, from the cost model: their FLOPs (the order and the time left), or their
    seconds on the device (``cost.estimates``: the plan's calibration where this machine has it, else FLOPs at the
    settings' ``tflops``); a FLOP pricing also says the compute stage's wall time where this machine's calibration
    has every timing (``estimate_line``), printed before the stage."""
    from .cost import estimates
    from .cost.flops import job_flops
    from .cost.plan import cached_wall

    if executor.priced_by == "flops":
        def flops(todo):
            return {j.id: job_flops(j) for j in todo}

        flops.estimate_line = lambda planned, n: estimate_line(cached_wall(planned, args.profile, args.device, n))
        return flops

    def seconds(todo):
        return estimates(todo, args.device, tflops=getattr(settings, "tflops", None))[0]

    def memory(todo):  # the host memory a job asks for (Slurm's --mem), per node
        from .cost import host

        tasks = getattr(settings, "cpu_tasks_per_training", 1)
        per_run = args.gpus_per_run if args.device.startswith("cuda") else tasks
        return {j.id: host.slurm_mem_gb(host.job_host(j, args.device, per_run if j.kind == "train" else 1))
                for j in todo}

    seconds.memory = memory
    return seconds


def _compute_stage(stages: Stages, plan, args, executor, settings, selected, params, out_dir: Path) -> int | None:
    """The compute stage by the executor; an exit status when the notebooks must not run yet: the jobs of an executor
    that does not run them here (a cluster) have failed or are not all done (the notebooks would compute here what
    the cluster has not)."""
    ok = stages.run("compute", lambda: executor.compute(plan, args, settings, pricing(executor, args, settings)))
    if executor.here:
        return None
    if not ok:
        print(f"[reproduce] FAILED: compute (see {out_dir / 'stages.json'}); the notebooks run once every job is "
              "done", file=sys.stderr)
        return 1
    if not all(j.done for j in manifest.jobs(selected, args.profile, params)):
        print(f"[reproduce] the notebooks and the report run when the {args.executor} jobs are done: run the same "
              "command again then (it submits nothing twice), or add --wait; `python -m infiloop runs list` and "
              "squeue say what is done", file=sys.stderr)
        return 0
    return None


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    profiles.check(args.profile, "--profile")
    try:
        executor, settings = _check_executor(args)
        selected = select(notebooks(), args.only, args.profile)
        params = parameters.read_parameters(args.p)
    except UsageError as e:
        ap.error(str(e))
    known = set().union(*(declared_parameters(n) for n in selected))
    if set(params) - known:
        ap.error(f"-p {', '.join(sorted(set(params) - known))}: not a parameter of the selected notebooks "
                 f"(theirs: {', '.join(sorted(known))})")
    params.setdefault("device", args.device)
    with kept_apart(args.profile, args.device) as home:
        if home is not None:
            print(f"[reproduce] {apart_note(args.profile, args.device, home)}", file=sys.stderr, flush=True)
        status = _run(ap, args, executor, settings, selected, params)
    if status == 0 and offers_gpu_profile(args):
        print_gpu_offer()
    return status


def _run(ap: Parser, args, executor, settings, selected: list[str], params: dict) -> int:
    """The stages of the run: data, compute, the notebooks, the report; the exit status."""
    out_dir = paths.RESULTS / args.profile
    out_dir.mkdir(parents=True, exist_ok=True)
    stages = Stages(out_dir / "stages.json")
    t0 = time.time()
    ran = ["report", *selected] + ([] if args.no_compute else ["data", "compute"])
    try:
        plan = manifest.jobs(selected, args.profile, params)
    except UsageError as e:
        ap.error(str(e))
    if args.no_compile:
        without_compile(plan)
    if not args.no_compute:
        # without its data nothing can be computed or shown: a data error (the hub unreachable for a hub set, a
        # data.path that does not exist, a bad row) stops the run in one line
        stages.run("data", lambda: _build_data(plan), stop_on=(DataError,))
        if (status := _compute_stage(stages, plan, args, executor, settings, selected, params, out_dir)) is not None:
            return status
    from .compute.slots import cpu_slots

    # CPU: as many notebooks at once as compute slots (they only load); on a GPU box and with --no-compute (the
    # notebooks compute what they miss) one at a time
    at_once = 1 if args.no_compute or args.device != "cpu" else len(cpu_slots(args.jobs))
    _run_notebooks(stages, selected, args.profile, params, out_dir, at_once)
    from .report.build import build_report

    report: list[Path] = []
    stages.run("report", lambda: report.append(build_report(args.profile)))
    failed = [s["name"] for s in stages.stages if s["status"] != "ok" and s["name"] in ran]
    print(f"\n[reproduce] profile {args.profile}: {len(ran)} stages in {time.time() - t0:.0f} s", file=sys.stderr)
    if failed:
        print(f"[reproduce] FAILED: {', '.join(failed)} (see {out_dir / 'stages.json'})", file=sys.stderr)
    if report:
        print(f"[reproduce] report: {report[0]}")
    return 1 if failed else 0


# The profile offered after the default run on a CUDA GPU (the next step up: 9x9 Sudoku, the paper's model).
OFFERED_PROFILE = "gpu"


def offers_gpu_profile(args) -> bool:
    """Whether the run was the default one on a CUDA GPU (the default profile, every notebook, this machine), after
    which, when it succeeded, the ``gpu`` profile is offered."""
    return (args.profile == profiles.DEFAULT and not args.only and executors.executor(args.executor).here
            and args.device.startswith("cuda") and profiles.device(args.profile) != "cuda")


def print_gpu_offer() -> None:
    """Print the ``gpu`` profile's offer (``cost.command.gpu_offer``): the pilot command first, its trainings,
    evaluations and looped decoders, GPU-hours in all on this GPU (its cached timings, else FLOPs at the assumed
    throughput)."""
    from .cost.calibration import device_name
    from .cost.command import gpu_offer

    try:
        gpu = device_name("cuda")
    except Exception:  # noqa: BLE001 - the name only selects this GPU's cached timings
        gpu = None
    try:
        lines = gpu_offer(OFFERED_PROFILE, gpu=gpu)
    except Exception as e:  # noqa: BLE001 - the run is over: an offer that cannot be priced must not fail it
        lines = [f"next on this GPU, the '{OFFERED_PROFILE}' profile (it could not be priced here: "
                 f"{' '.join(str(e).split())[:200]}); "
                 f"python -m infiloop plan --profile {OFFERED_PROFILE} lists its jobs"]
    print("", file=sys.stderr)
    for line in lines:
        print(f"[reproduce] {line}", file=sys.stderr)
