"""Cost before the run: every training run and evaluation that a profile's notebooks execute, and an
estimate of their time on this device (``python -m infiloop plan --profile P [--device cuda] [--calibrate]``).

The runs and evaluations are those the notebooks' spec modules declare (``manifest.jobs``), with the defaults of
their parameters cells (read from ``notebooks/NN_*.py``), deduplicated as the run and evaluation caches deduplicate
them. The estimate is a short calibration (``calibration.py``, ``measure.py``) times the counts (``plan.py``):

    per run:        job start + start-up + steps x s/step + checks x s/check   (s/step at the run's batch size;
                    a check: its checkpoint scored on the validation split, training/selection.py)
    per evaluation: job start + ceil(puzzles / batch) x updates x s/update (s/update for one batch)
    per looped decoder (notebook 08): job start + steps x s/step + token-blocks x s/token-block
                    (its evaluation forwards counted in blocks applied at one position, ``flops.looplm_work``)
    per slot:       a warm worker's start, once, before the slot's first job (nothing with --executor process)

On a CPU the slots share caches and memory bandwidth: every s/step and s/update is multiplied by the slow-down
of one job beside the others, measured once per shape (the same evaluation in ``jobs`` processes, timed in shared
windows with one process alone in every other window, ``processes.contention``). The job start is what
every job of the scheduler pays beside its own arithmetic. With a new Python process per job (``--executor process``)
that is the process's start (Python, torch and the package imported), reading the run's data and building its model,
measured together (``processes.job_start``, once per device). In warm workers (the default,
``worker.py``) it is measured with real jobs in real warm workers, as many at once as there are slots
(``processes.warm_jobs``): a short training and a one-update evaluation in each, after each worker's first
job; a slot pays its worker's start once (its first job less a later one), and each job the rest of its seconds (a
training's less its few steps and its check). The plan prints which it assumed and the numbers.

The calibration times a few training steps (``training.train`` itself, on the run's data) and a few
evaluation updates (``evaluation.evaluate``) of every distinct model shape on this device; it is cached in
``runs/.plan-calibration.json`` keyed by the device, the torch version and the shape. Where a step at the
full batch would take more than a second, it is timed at a smaller batch and scaled (linear in the batch:
an upper bound on a GPU). Runs and evaluations already in the run cache cost nothing. Not included: data
building (this command builds the data first, as ``reproduce`` does), starting the notebooks and plotting.

Without a CUDA device here, a plan for one (``plan --profile gpu``, ``--device cuda``) is priced by arithmetic
instead (``arithmetic.FlopCalibration``): each job's FLOPs (``flops.flops_per_step``, ``flops.flops_per_update``,
``flops.looplm_flops``) at a stated achieved throughput (``--tflops``, default :data:`ASSUMED_GPU_TFLOPS`), a timing
of a CUDA GPU cached in the calibration file replacing the arithmetic wherever it holds the shape; the jobs come
from the notebooks' declarations alone (``declared.declared_plan``), so no data is built or downloaded. The same
pricing makes the offer of the ``gpu`` profile printed after the default run on a CUDA GPU (:func:`gpu_offer`).
"""

from __future__ import annotations

import argparse
import sys

from ...machine import threads_per_job
from ..notebooks import declarations, manifest, parameters
from .arithmetic import FlopCalibration
from .calibration import Calibration
from .declared import declared_plan
from .flops import ASSUMED_GPU_TFLOPS
from .plan import ModelItem, Plan, estimate, make_plan, training_wall, wall
from .timer import Timer

PILOT = "python -m infiloop pilot --profile {profile}"  # the short measured run to take before a GPU profile


def _over(overrides: dict) -> str:
    """Overrides as ``key=value`` (the notebooks' training seed, the same for every run, left out)."""
    return " ".join(f"{k}={v}" for k, v in overrides.items() if k != "train.seed") or "-"


def _fmt_per(seconds: float, width: int = 7) -> str:
    """Seconds per step or per update: four decimals, or two significant digits below a millisecond (a GPU's)."""
    return f"{seconds:{width}.4f}" if seconds >= 1e-3 or seconds == 0 else f"{seconds:{width}.1e}"


def _fmt_h(hours: float) -> str:
    """GPU-hours: one decimal, or two significant digits below a tenth."""
    return f"{hours:.1f}" if hours >= 0.1 or hours == 0 else f"{hours:.2g}"


def _fmt_s(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _render_models(models: list[ModelItem]) -> list[str]:
    """The looped decoders' section of the plan: a line per model, its formula, and their total."""
    if not models:
        return []
    out = ["\n## looped decoders (notebook 08: each trained and evaluated in one job, beside the rest)",
           "nb  model                                      steps   s/step   evaluation (token-blocks x s)        time"]
    for m in models:
        head = f"{m.notebook:3s} {m.id:42s} {m.steps:5d}"
        out.append(f"{head}   already computed                                      0 s" if m.cached else
                   f"{head} x {_fmt_per(m.per_step, 6)} + {m.eval_blocks:10.3g} x {m.per_block:8.2e} = "
                   f"{_fmt_s(m.eval_seconds):>7s} -> {_fmt_s(m.seconds):>9s}")
    out.append(f"per model: job start + steps x s/step + evaluation; looped decoders: "
               f"{_fmt_s(sum(m.seconds for m in models))}")
    return out


def _starts(plan: Plan) -> str:
    """What the plan assumes of the jobs' processes (``worker.py``): a warm worker per slot, whose start is paid once
    and each job then only its own bookkeeping, or a new process per job (``--executor process``)."""
    if not plan.job_start and not plan.looplm_start:
        return "job starts: not counted (not measured by this timer)"
    if not plan.warm:
        return (f"a new process per job (--executor process): each job pays {plan.job_start:.1f} s before its work "
                f"(Python, torch and the package imported, its data read, its model built), a looped decoder "
                f"{plan.looplm_start:.1f} s")
    fresh = f"a new process per job (--executor process) would pay {plan.job_start:.1f} s each"
    if plan.warm_train is None:
        return (f"warm workers (one process per slot, reproduce's default): each slot pays {plan.start_per_slot:.1f} s "
                f"once (Python, torch and the package imported, the device initialised), then each job "
                f"{plan.train_start:.1f} s before its work (its data read, its model built), a looped decoder "
                f"{plan.looplm_start_per_job:.1f} s; {fresh}")
    return (f"warm workers (one process per slot, reproduce's default), measured with real jobs on {plan.jobs} "
            f"slot(s) at once: each slot pays {plan.start_per_slot:.1f} s once (the worker's start and its first "
            f"job's extra), then each training {plan.train_start:.2f} s and each evaluation {plan.eval_start:.2f} s "
            f"of its own (the run resolved, its data read, its model built, its outputs written, the collection "
            f"after it), a looped decoder {plan.looplm_start_per_job:.1f} s, and the workers' stop at the end "
            f"{plan.worker_stop:.1f} s; {fresh}")


def render(plan: Plan, calibration: Calibration) -> str:
    """The plan as text: one line per run and per evaluation, each with its formula, then the totals."""
    out = []
    n_cached = sum(r.cached for r in plan.runs) + sum(e.cached for e in plan.evals) + sum(m.cached for m in plan.models)
    out.append(f"# plan for profile {plan.profile} on {calibration.prefix}: {len(plan.runs)} training runs, "
               f"{len(plan.evals)} evaluations, {len(plan.models)} looped decoders ({n_cached} already in the run "
               "cache); training seed(s) "
               f"{', '.join(str(x) for x in sorted({r.run.config['train']['seed'] for r in plan.runs}))}")
    out.append(f"# {calibration.describe()}")
    out.append(f"# {_starts(plan)}")
    threads = threads_per_job(plan.jobs)
    where = (f"{plan.jobs} at a time, {threads} thread(s) each" if plan.device == "cpu"
             else f"on {plan.jobs} slot(s) of the GPU(s), each job timed alone on a GPU")
    if plan.contention > 1.0:
        where += (f"; s/step and s/update are {plan.contention:.2f}x the timings alone, as measured for {plan.jobs} "
                  f"jobs at once")
    out.append(f"\n## training (reproduce trains {where})")
    out.append("task    recipe         steps   s/step    checks  s/check   start-up    time     overrides")
    for r in plan.runs:
        head = f"{r.task:7s} {r.recipe:12s} {r.steps:7d}"
        if r.cached:
            out.append(f"{head}   already trained                               0 s      {_over(r.overrides)}")
        else:
            out.append(f"{head} x {_fmt_per(r.per_step)} + {r.checks:2d} x {_fmt_per(r.per_check)} + "
                       f"{r.startup + plan.train_start:5.1f} s = {_fmt_s(r.seconds):>9s}  {_over(r.overrides)}")
    train_total, train_wall = sum(r.seconds for r in plan.runs), training_wall(plan)
    out.append(f"per run: steps x s/step + checks x s/check (its checkpoints scored on the validation split, "
               f"training/selection.py) + start-up (the job's own, {plan.train_start:.1f} s, included); training: "
               f"{_fmt_s(train_total)} of runs -> "
               f"{_fmt_s(train_wall)} wall")
    out.append("\n## evaluations (each once, scheduled beside the training as soon as its run is trained)")
    out.append("nb  run                   kind          puzzles/batch  start   updates   s/update       time     "
               "what, overrides")
    for e in plan.evals:
        run = f"{e.run.config['task']}/{e.run.config['recipe']}"
        head = f"{e.notebook:3s} {run:21s} {e.kind:13s} {f'{e.puzzles}/{e.batch}':>9s}"
        what = f"{e.note}; {_over(e.overrides)}"
        if e.cached:
            out.append(f"{head}   cached                            0 s      {what}")
        else:
            out.append(f"{head} = {plan.eval_start:.1f} + {e.batches:2d} x {e.updates:6d} x "
                       f"{_fmt_per(e.per_update)} = {_fmt_s(e.seconds):>9s}  {what}")
    eval_total = sum(e.seconds for e in plan.evals)
    out.append(f"per evaluation: job start ({plan.eval_start:.1f} s) + ceil(puzzles / batch) x updates x s/update; "
               f"evaluations: {_fmt_s(eval_total)}")
    model_total = sum(m.seconds for m in plan.models)
    out += _render_models(plan.models)
    for name in declarations.undeclared_notebooks():
        out.append(f"not listed: the runs and evaluations of notebook {name} (it has no spec module in "
                   "infiloop/experiments/notebooks/experiments/)")
    out += _render_totals(plan, calibration, train_total, eval_total, model_total)
    return "\n".join(out)


def _render_totals(plan: Plan, calibration: Calibration, train_total: float, eval_total: float,
                   model_total: float) -> list[str]:
    """The plan's last lines: the compute stage's wall time on the slots, and on a GPU its GPU-hours."""
    floor = (train_total + eval_total + model_total) / plan.jobs
    decoders = f" + looped decoders {_fmt_s(model_total)}" if plan.models else ""
    out = [f"\nestimate: training {_fmt_s(train_total)} + evaluations {_fmt_s(eval_total)}{decoders} of jobs on "
           f"{plan.jobs} slot(s) -> {_fmt_s(wall(plan))} wall (the floor, every slot busy: {_fmt_s(floor)}) on "
           f"{calibration.where} (not included: data building, notebooks and report)"]
    if plan.device.startswith("cuda"):
        hours = (train_total + eval_total + model_total) / 3600
        basis = calibration.basis() if isinstance(calibration, FlopCalibration) else f"timed on {calibration.where}"
        out.append(f"GPU-hours: {_fmt_h(hours)} in all (training {_fmt_h(train_total / 3600)}, evaluations "
                   f"{_fmt_h(eval_total / 3600)}, looped decoders {_fmt_h(model_total / 3600)}; each job alone on "
                   f"one GPU; {basis})")
    return out


def main(args: argparse.Namespace, timer: Timer | None = None, stream=None, cluster_cfg=None) -> int:
    """``python -m infiloop plan`` (arguments parsed by ``cli/``): ``args.notebooks`` (default the profile's),
    and with ``args.by_flops`` the FLOP estimate of a CUDA device (:class:`FlopCalibration` at ``args.tflops``, the
    cached timings of ``args.gpu_name`` or of the GPU measured last replacing it; no data built); with
    ``cluster_cfg`` (``--executor slurm``) the cluster jobs that ``reproduce`` would submit."""
    stream = stream or sys.stdout
    notebooks = getattr(args, "notebooks", None) or declarations.profile_notebooks(args.profile)
    by_flops = getattr(args, "by_flops", False)
    print(f"# resolving the runs of profile {args.profile} (no data is built: a FLOP estimate) ..." if by_flops else
          f"# building the data and resolving the runs of profile {args.profile} ...", file=sys.stderr, flush=True)

    params = parameters.read_parameters(getattr(args, "p", None))
    if cluster_cfg is not None:
        from ..compute import cluster, slurm
        from . import estimates

        planned = manifest.jobs(notebooks, args.profile, params)
        todo = [j for j in planned if not j.done]
        seconds, how = (cluster.fixed_limits(todo, cluster_cfg)
                        or estimates(todo, args.device, tflops=cluster_cfg.tflops))
        subs = cluster.submissions(planned, args.profile, args.device, args.gpus_per_run, cluster_cfg, seconds)
        print(slurm.render(subs, how, args.cluster), file=stream)
        return 0
    if by_flops:
        plan = declared_plan(args.profile, args.device, args.jobs or 1, notebooks, params)
        calibration: Calibration = FlopCalibration(getattr(args, "tflops", None) or ASSUMED_GPU_TFLOPS,
                                                   getattr(args, "gpu_name", None))
    else:
        plan = make_plan(args.profile, args.device, args.jobs, notebooks, params, getattr(args, "jobs_per_gpu", None))
        calibration = Calibration(args.device, timer, fresh=args.calibrate)
        if any(not i.cached for i in (*plan.runs, *plan.evals, *plan.models)):
            print("# calibrating (a few timed steps of each model shape) ...", file=sys.stderr, flush=True)
    from ..compute import executors

    # the executor reproduce would use: warm workers pay the process start once a slot, a new process every job
    plan.warm = executors.executor(getattr(args, "executor", None) or executors.DEFAULT).warm
    estimate(plan, calibration)
    if calibration.measured:
        calibration.save()
    text = render(plan, calibration)
    if plan.device.startswith("cuda"):  # memory before the hours: each job's peak beside the device's
        from . import memory

        text += "\n" + "\n".join(memory.render(plan, getattr(args, "gpus_per_run", 1) or 1,
                                                     getattr(args, "gpu_memory", None)))
    print(text, file=stream)
    return 0


def gpu_offer(profile: str = "gpu", tflops: float = ASSUMED_GPU_TFLOPS, gpu: str | None = None) -> list[str]:
    """The offer printed after the default run on a CUDA GPU, as lines: the pilot command first, then what
    ``profile`` trains, evaluates and costs in GPU-hours on ``gpu`` (its timings cached by ``plan`` where they cover
    a shape, else FLOPs at ``tflops``: :class:`FlopCalibration`), and the command that runs it. Builds no data and
    measures nothing (:func:`declared_plan`)."""
    plan = declared_plan(profile, "cuda", 1)
    calibration = FlopCalibration(tflops, gpu=gpu)
    estimate(plan, calibration)
    hours = [sum(i.seconds for i in items) / 3600 for items in (plan.runs, plan.evals, plan.models)]
    cached = sum(i.cached for i in (*plan.runs, *plan.evals, *plan.models))
    return [f"next on this GPU, the '{profile}' profile; first its pilot (a short measured run): "
            f"{PILOT.format(profile=profile)}",
            f"  {len(plan.runs)} trainings ({_fmt_h(hours[0])} GPU-h), {len(plan.evals)} evaluations "
            f"({_fmt_h(hours[1])} GPU-h), {len(plan.models)} looped decoders ({_fmt_h(hours[2])} GPU-h): about "
            f"{_fmt_h(sum(hours))} GPU-hours in all"
            + (f" ({cached} jobs already done)" if cached else ""),
            f"  ({calibration.basis()}; every job: python -m infiloop plan --profile {profile})",
            f"  then: ./reproduce.sh --profile {profile}"]
