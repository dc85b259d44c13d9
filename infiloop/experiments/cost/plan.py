"""What a plan holds: the training runs, evaluations and looped decoders that a profile's notebooks (or any
declaration's jobs) compute, each with its counts (:func:`make_plan`, :func:`plan_of`; from the declarations alone,
no data built: ``declared.py``), their seconds from a calibration (:func:`estimate`; by job id, :func:`job_seconds`)
and the compute stage's wall time on its slots (:func:`wall`, the scheduler's order). ``command.py`` renders it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...machine import threads_per_job
from ..compute.slots import jobs_per_gpu, simulate, slots_for, visible_gpus
from ..notebooks import declarations, manifest  # manifest: the declared jobs ("jobs" is a slot count here)
from ..store import runs as cache
from .calibration import Calibration
from .flops import looplm_counts

# ------------------------------------------------------------------------------------------ what runs


@dataclass
class TrainItem:
    task: str
    recipe: str
    overrides: dict
    run: cache.Run
    steps: int
    batch: int
    cached: bool
    seconds: float = 0.0
    per_step: float = 0.0
    startup: float = 0.0
    checks: int = 0  # its checkpoints' validation checks (training/selection.py; :func:`validation_checks`)
    check_puzzles: int = 0
    check_depth: int = 0  # outer updates of a check: the training depth
    per_check: float = 0.0

    @property
    def check_seconds(self) -> float:
        return self.checks * self.per_check


@dataclass
class EvalItem:
    notebook: str
    run: cache.Run
    overrides: dict
    kind: str  # trajectory, perturbation or budgets
    puzzles: int
    batch: int
    updates: int  # outer updates run per batch of puzzles
    note: str
    cached: bool
    key: str
    seconds: float = 0.0
    per_update: float = 0.0
    test_set: str = "test"  # a named test set at another size runs on its own grid (tasks/extrapolation.py)

    @property
    def batches(self) -> int:
        return math.ceil(self.puzzles / self.batch)


@dataclass
class ModelItem:
    """A looped decoder of notebook 08: trained and evaluated in one job."""

    notebook: str
    id: str  # the notebook's model id, "task/allocation/connection@seed"
    probe: object  # looplm.Probe
    key: str  # its record
    cached: bool
    steps: int
    eval_blocks: float  # token-blocks of its evaluation (flops.looplm_work)
    seconds: float = 0.0
    per_step: float = 0.0
    per_block: float = 0.0  # seconds per token-block of the evaluation forward

    @property
    def eval_seconds(self) -> float:
        return self.eval_blocks * self.per_block


@dataclass
class Plan:
    profile: str
    device: str
    jobs: int
    runs: list[TrainItem] = field(default_factory=list)
    evals: list[EvalItem] = field(default_factory=list)
    models: list[ModelItem] = field(default_factory=list)
    job_start: float = 0.0  # seconds a job pays before its work in a new process (imports, data, model)
    process_start: float = 0.0  # of which the new process's own start (Python, torch, the package, the device)
    warm: bool = True  # jobs run in warm workers (reproduce's default), not each in a new process (--executor process)
    contention: float = 1.0  # how much slower a CPU job runs beside the others than alone (measured)
    looplm_start: float = 0.0  # a looped decoder's job start in a new process (imports, task, model)
    looplm_own: float = 0.0  # of which its task's generation and its model's build (timed inside the process)
    # Measured with real jobs in warm workers (measure.MeasuredTimer.warm_jobs; None where not measured): a training's
    # and an evaluation's own seconds beyond their steps, checks and updates, and a slot's start (the worker's, and
    # its first job's extra), the slots starting together.
    warm_train: float | None = None
    warm_eval: float | None = None
    worker_start: float = 0.0
    worker_stop: float = 0.0  # the stage's end: its workers told to stop and ended (measured with them)

    @property
    def train_start(self) -> float:
        """Seconds a training job pays beside its steps and checks: all of :attr:`job_start` in a new process; in a
        warm worker, whose own start is paid once (:attr:`start_per_slot`), what real jobs in warm workers were
        measured to pay (resolving the run, its data, its model, its outputs, the collection after it), else
        :attr:`job_start` less the process's start."""
        if not self.warm:
            return self.job_start
        return self.warm_train if self.warm_train is not None else max(0.0, self.job_start - self.process_start)

    @property
    def eval_start(self) -> float:
        """:attr:`train_start` for an evaluation job (beside its updates)."""
        if not self.warm:
            return self.job_start
        return self.warm_eval if self.warm_eval is not None else max(0.0, self.job_start - self.process_start)

    @property
    def looplm_start_per_job(self) -> float:
        """:attr:`train_start` for a looped decoder's job: in a warm worker its task's generation and its model's
        build (:attr:`looplm_own`) and a job's bookkeeping (an evaluation's, :attr:`warm_eval`, where measured; it
        counts a model's build twice, a few milliseconds)."""
        if not self.warm:
            return self.looplm_start
        if self.looplm_own or self.warm_eval is not None:
            return self.looplm_own + (self.warm_eval or 0.0)
        return max(0.0, self.looplm_start - self.process_start)  # a timer that times neither part

    @property
    def start_per_slot(self) -> float:
        """Seconds each slot pays once, before its first job: a warm worker's start, as measured with real jobs
        (else a new process's start alone); nothing with a new process per job, where every job pays it."""
        if not self.warm:
            return 0.0
        return self.worker_start if self.warm_train is not None else self.process_start


def _eval_item(job: manifest.Job) -> EvalItem:
    """The evaluation of one plan job: how many puzzles, in batches of how many, over how many updates."""
    e, run = job.eval, job.spec.run
    args, data, path = run.eval_key(e.kind, e.args)
    batch = min(run.config["eval"]["batch_size"], len(data))
    updates = run.eval_updates(e.kind, args)
    kind, note = eval_note(e.kind, args, run)
    return EvalItem(job.notebooks[0][:2], run, job.spec.overrides, kind, len(data), batch, updates, note,
                    path.is_file(), str(path), test_set=args.get("test_set", "test"))


def eval_note(method: str, args: dict, run: cache.Run) -> tuple[str, str]:
    """An evaluation's kind as the plan names it, and what it runs (its resolved arguments ``args``)."""
    if method == "evaluate":
        return "trajectory", f"to update {args['updates']}, every {args['every']}"
    if method == "perturb":
        return "perturbation", f"{args['at']} + {args['after']} x ({len(args['eps'])} eps + the reference)"
    grid = args["budgets"]
    if run.model_config().cond.uses_horizon:
        return "budgets", f"one run per budget ({len(grid)} budgets, told each)"
    return "budgets", f"one run to {max(grid)}"


def _read_from_trajectory(job: manifest.Job, jobs: list[manifest.Job]) -> bool:
    """A budgets evaluation of a model without a horizon is read from a trajectory of the plan that reaches
    every budget over the same puzzles (``Run._budgets_from_trajectory``): it costs nothing."""
    if job.eval.kind != "budgets" or job.spec.run.model_config().cond.uses_horizon:
        return False
    grid = sorted(job.eval.args["budgets"])
    n = len(job.spec.run.eval_key("budgets", job.eval.args)[1])
    for other in jobs:
        if other.kind == "eval" and other.eval.kind == "evaluate" and other.spec.run.dir == job.spec.run.dir:
            args, data, _ = other.spec.run.eval_key("evaluate", other.eval.args)
            if args["updates"] >= grid[-1] and all(b % args["every"] == 0 for b in grid) and len(data) == n:
                return True
    return False


def make_plan(profile: str, device: str = "cpu", jobs: int | None = None,
              notebooks: list[str] | None = None, params: dict | None = None, per_gpu: int | None = None) -> Plan:
    """The runs and evaluations that ``profile``'s notebooks read (experiments/notebooks/manifest.py), not yet timed;
    ``jobs`` slots (default: as reproduce's scheduler, a slot per core, or ``per_gpu`` per visible GPU)."""
    planned = manifest.jobs(notebooks or declarations.profile_notebooks(profile), profile, params)
    return plan_of(planned, profile, device, jobs or default_slots(profile, device, per_gpu))


def default_slots(profile: str, device: str, per_gpu: int | None = None) -> int:
    """The compute stage's slots on ``device`` as reproduce's scheduler makes them: one per core, or ``per_gpu``
    (default ``slots.jobs_per_gpu``) per visible GPU; 1 for a CUDA device that is not here."""
    try:
        if device.startswith("cuda") and per_gpu is None:
            per_gpu = jobs_per_gpu(profile, 1 if ":" in device else len(visible_gpus()))
        return len(slots_for(device, per_gpu=per_gpu or 1))
    except RuntimeError:  # planning a CUDA run on a machine without one
        return 1


def plan_of(planned: list[manifest.Job], profile: str, device: str, jobs: int) -> Plan:
    """The plan of these scheduler jobs (any declaration's: the notebooks', the contrast search's), not yet
    timed."""
    plan = Plan(profile, device, jobs)
    for job in planned:
        if job.kind == "looplm":
            m = job.model
            plan.models.append(ModelItem(job.notebooks[0][:2], m.id, m.probe, m.key, job.done, m.probe.train.steps,
                                         0.0 if job.done else looplm_counts(m.probe)["eval"]))
        elif job.kind == "train":
            cfg = job.spec.run.train_config()
            plan.runs.append(TrainItem(job.spec.task, job.spec.recipe, job.spec.overrides, job.spec.run, cfg.steps,
                                       cfg.batch_size, job.done))
        elif not _read_from_trajectory(job, planned):
            plan.evals.append(_eval_item(job))
    return plan


def job_seconds(planned: list[manifest.Job], device: str, slots: int, calibration: Calibration | None = None
                ) -> dict[str, float]:
    """Estimated seconds of each job (by id) from the plan's calibration on this device (``estimates``, the
    package's, where this machine has the device): how a study's jobs are ordered and weighed."""
    calibration = calibration or Calibration(device)
    plan = estimate(plan_of(planned, "", device, slots), calibration)
    if calibration.measured:  # kept for the next plan of the same shapes
        calibration.save()
    by_run = {str(r.run.dir): r.seconds for r in plan.runs}
    by_key = {e.key: e.seconds for e in (*plan.evals, *plan.models)}
    return {j.id: by_run.get(str(j.spec.run.dir), 0.0) if j.kind == "train"
            else by_key.get(j.model.key if j.kind == "looplm" else j.eval.key, 0.0) for j in planned}


def validation_checks(run: cache.Run) -> tuple[int, int, int]:
    """How a training of ``run`` scores its checkpoints on the validation split (``training/selection.py``): how
    many checks (one at each checkpoint before the last step, one at the end), how many puzzles each (the first
    ``eval.limit`` of the split, which is as large as the test set) and how many outer updates (the training depth,
    H x max_segments); (0, 0, 0) for a task without a validation split. From the settings alone: no data is read."""
    from ... import tasks
    from ...tasks import validation

    if run.validation_unavailable():
        return 0, 0, 0
    train = run.train_config()
    limit = run.config["eval"]["limit"]
    try:
        n = validation.size(run.data_settings())
    except tasks.DataError:  # no size in the settings: the limit, where there is one
        n = limit or 0
    checks = (train.steps - 1) // train.checkpoint_every + 1
    return checks, min(n, limit) if limit else n, run.model_config().H * train.max_segments


def _price_checks(item: TrainItem, calibration: Calibration, threads: int, contention: float) -> None:
    """Fill in ``item``'s validation checks: each an evaluation of its puzzles in batches of the training's batch
    size, to the training depth (``training/selection.py``)."""
    item.checks, item.check_puzzles, item.check_depth = validation_checks(item.run)
    if not item.checks or not item.check_puzzles:
        item.per_check = 0.0
        return
    batch = min(item.batch, item.check_puzzles)
    per_update = calibration.eval_update(item.run, batch, threads).seconds * contention
    item.per_check = math.ceil(item.check_puzzles / batch) * item.check_depth * per_update


def _measure_warm(plan: Plan, first, calibration: Calibration, threads: int) -> None:
    """The warm workers' own costs from real jobs (``measure.MeasuredTimer.warm_jobs``): a probe training of
    ``first``'s run (``TRAIN_WARM`` steps and one validation check), an evaluation of one update on one puzzle and
    each worker's first job, all run together on the plan's slots. A training's bookkeeping is the probe's seconds
    less its steps, start-up and check as timed for the plan; an evaluation's is the probe's whole time (one update
    of one puzzle); a slot's start is its first job's seconds less a later one's."""
    from .measure import TRAIN_WARM

    costs = calibration.warm_jobs(first.run, first.overrides, plan.jobs, threads or 1)
    if costs is None:
        return
    probe = TrainItem("", "", first.overrides, first.run, TRAIN_WARM, first.run.config["train"]["batch_size"], False)
    t = calibration.train_step(probe.run, probe.batch, threads)
    _price_checks(probe, calibration, threads, plan.contention)
    own = TRAIN_WARM * t.seconds * plan.contention + t.startup + min(probe.checks, 1) * probe.per_check
    plan.warm_train = max(0.0, costs["train"] - own)
    plan.warm_eval = costs["eval"]
    plan.worker_start = max(0.0, costs["first"] - costs["train"])
    plan.worker_stop = costs["stop"]


def estimate(plan: Plan, calibration: Calibration) -> Plan:
    """Fill in the seconds of every run and evaluation of ``plan`` (cached ones cost nothing)."""
    threads = threads_per_job(plan.jobs) if plan.device == "cpu" else 0
    todo = [i for i in (*plan.runs, *plan.evals) if not i.cached]
    plan.job_start = calibration.job_start(todo[0].run) if todo else 0.0
    plan.contention = calibration.contention(todo[0].run, plan.jobs) if todo else 1.0
    models = [m for m in plan.models if not m.cached]
    start = calibration.looplm_start(models[0].probe) if models else None
    plan.looplm_start, plan.looplm_own = (start.seconds, start.startup) if start else (0.0, 0.0)
    plan.process_start = calibration.process_start() if plan.warm and (todo or models) else 0.0
    plan.warm_train = plan.warm_eval = None
    plan.worker_start = plan.worker_stop = 0.0
    if plan.warm and todo:
        _measure_warm(plan, todo[0], calibration, threads)
    for item in models:
        item.per_step = calibration.looplm_step(item.probe, threads).seconds * plan.contention
        item.per_block = calibration.looplm_block(item.probe, threads).seconds * plan.contention
        item.seconds = plan.looplm_start_per_job + item.steps * item.per_step + item.eval_seconds
    for item in plan.runs:
        if item.cached:
            continue
        t = calibration.train_step(item.run, item.batch, threads)
        item.per_step, item.startup = t.seconds * plan.contention, t.startup
        _price_checks(item, calibration, threads, plan.contention)
        item.seconds = plan.train_start + t.startup + item.steps * item.per_step + item.check_seconds
    for item in plan.evals:
        if item.cached:
            continue
        timing = calibration.eval_update(item.run, item.batch, threads, item.test_set)
        item.per_update = timing.seconds * plan.contention
        item.seconds = plan.eval_start + item.batches * item.updates * item.per_update
    return plan


def training_wall(plan: Plan) -> float:
    """Wall time of the training jobs alone, scheduled as reproduce schedules them (``scheduler.py``), after the
    warm workers' start."""
    return plan.start_per_slot + simulate({str(r.run.dir): r.seconds for r in plan.runs}, {}, plan.jobs) \
        + plan.worker_stop


def wall(plan: Plan) -> float:
    """Wall time of the compute stage: every training and evaluation job on ``plan.jobs`` slots (cores, or
    GPUs), each evaluation after its run's training, the costliest ready job first (``scheduler.py``), after the warm
    workers' start (every slot's at once) and before their stop."""
    seconds = {str(r.run.dir): r.seconds for r in plan.runs}
    after = {}
    for i, e in enumerate(plan.evals):
        seconds[f"eval {i}"] = e.seconds
        after[f"eval {i}"] = [str(e.run.dir)]
    seconds.update({m.key: m.seconds for m in plan.models})
    return plan.start_per_slot + simulate(seconds, after, plan.jobs) + plan.worker_stop


def seconds_of(plan: Plan) -> float:
    """The plan's estimate of the compute stage in seconds (:func:`wall`)."""
    return wall(plan)


class _CacheOnly:
    """A timer that measures nothing: a timing the calibration cache lacks raises ``LookupError``."""

    def __getattr__(self, name: str):
        from .measure import MeasuredTimer

        if not hasattr(MeasuredTimer, name):
            raise AttributeError(name)

        def uncached(*args, **kwargs):
            raise LookupError(name)
        return uncached


def cached_wall(planned: list[manifest.Job], profile: str, device: str, slots: int) -> float | None:
    """The compute stage's wall time (:func:`wall`) from this machine's calibration cache alone, for the line the
    pipeline prints before the stage; None where a timing is missing (measuring it would delay the stage)."""
    try:
        return wall(estimate(plan_of(planned, profile, device, slots), Calibration(device, timer=_CacheOnly())))
    except LookupError:
        return None
