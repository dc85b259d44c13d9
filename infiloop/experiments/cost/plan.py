"""What a plan holds: the training runs, evaluations and looped decoders that a profile's notebooks (or any
declaration's jobs) compute, each with its counts (:func:`make_plan`, :func:`plan_of`; from the declarations alone,
no data built: :func:`declared_plan`), their seconds from a calibration (:func:`estimate`) and the compute stage's
wall time on its slots (:func:`wall`, the scheduler's order). ``plan.py`` renders it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ...machine import threads_per_job
from ..compute.slots import jobs_per_gpu, simulate, slots_for, visible_gpus
from ..notebooks import declarations, manifest, specs  # manifest: the declared jobs ("jobs" is a slot count here)
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
    warm: bool = True  # jobs run in warm workers (reproduce's default), not each in a new process (--fresh-process)
    contention: float = 1.0  # how much slower a CPU job runs beside the others than alone (measured)
    looplm_start: float = 0.0  # a looped decoder's job start in a new process (imports, task, model)
    looplm_own: float = 0.0  # of which its task's generation and its model's build (timed inside the process)
    # Measured with real jobs in warm workers (timing.MeasuredTimer.warm_jobs; None where not measured): a training's
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
    kind, note = _eval_note(e.kind, args, run)
    return EvalItem(job.notebooks[0][:2], run, job.spec.overrides, kind, len(data), batch, updates, note,
                    path.is_file(), str(path), test_set=args.get("test_set", "test"))


def _eval_note(method: str, args: dict, run: cache.Run) -> tuple[str, str]:
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


def declared_plan(profile: str, device: str, jobs: int, notebooks: list[str] | None = None,
                  params: dict | None = None) -> Plan:
    """The plan of ``profile``'s notebooks from their declarations alone (``jobs.needs``): no data is built, read
    or downloaded (the GPU profiles' Sudoku-Extreme comes from the hub), so a FLOP estimate can price a profile
    anywhere. Runs are deduplicated by folder and evaluations by their arguments with the run's defaults filled in,
    as the run cache does; an evaluation runs on its limit of puzzles, at most the data settings' test size; a
    budgets evaluation that a trajectory of the same run answers costs nothing (as in :func:`plan_of`)."""
    runs: dict[str, specs.RunSpec] = {}
    evals: dict[str, tuple[str, specs.EvalSpec, dict]] = {}
    models: dict[str, tuple[str, specs.ModelSpec]] = {}
    for nb in notebooks or declarations.profile_notebooks(profile):
        need = manifest.needs(nb, profile, **(params or {}))
        for spec in need.runs.values():
            runs.setdefault(str(spec.run.dir), spec)
        for e in need.evals.values():
            resolved = _declared_eval(e)
            key = json.dumps([str(e.run.run.dir), e.kind, resolved["args"]], sort_keys=True)
            evals.setdefault(key, (need.notebook, e, resolved))
        for m in need.models.values():
            models.setdefault(m.key, (need.notebook, m))
    plan = Plan(profile, device, jobs)
    for spec in runs.values():
        cfg = spec.run.train_config()
        plan.runs.append(TrainItem(spec.task, spec.recipe, spec.overrides, spec.run, cfg.steps, cfg.batch_size,
                                   spec.run.done))
    for key, (nb, e, resolved) in evals.items():
        if not _answered_by_trajectory(e, resolved, [(o, r) for _, o, r in evals.values()]):
            plan.evals.append(_declared_eval_item(nb, e, resolved, key))
    for nb, m in models.values():
        done = m.path.is_file()
        plan.models.append(ModelItem(nb[:2], m.id, m.probe, m.key, done, m.probe.train.steps,
                                     0.0 if done else looplm_counts(m.probe)["eval"]))
    return plan


def _given(args: dict, name: str, default):
    """``args[name]`` where it is given and not None (a run's default otherwise), as the run cache reads it."""
    value = args.get(name)
    return default if value is None else value


def _declared_eval(e: specs.EvalSpec) -> dict:
    """An evaluation's arguments with its run's defaults filled in (as ``Run.eval_key`` resolves them), its puzzle
    count and the outer updates each puzzle goes through, from the declaration and the data settings alone."""
    run, a = e.run.run, e.args
    ev = run.config["eval"]
    limit = _given(a, "limit", ev["limit"])
    puzzles = len(a["puzzles"]) if a.get("puzzles") else _test_puzzles(run, limit)
    if e.kind == "evaluate":
        args = {"updates": _given(a, "updates", ev["updates"]), "every": _given(a, "every", ev["every"]),
                "limit": limit, "per_token": bool(a.get("per_token")),
                "snapshots": sorted(int(x) for x in a.get("snapshots", ())),
                "puzzles": [int(x) for x in a.get("puzzles", ())]}
    elif e.kind == "perturb":
        args = {"at": a["at"], "eps": [float(x) for x in a["eps"]], "after": _given(a, "updates_after", ev["updates"]),
                "every": _given(a, "every", ev["every"]) if "every" in a else 1, "limit": limit,
                "seed": a.get("seed", 0)}
    else:
        args = {"budgets": sorted(int(b) for b in a["budgets"]), "limit": limit}
    for name, default in (("precision", "auto"), ("weights", "auto"), ("puzzle_ids", "own"), ("test_set", "test")):
        if a.get(name, default) != default:  # cached apart from the default's (``Run.eval_key``)
            args[name] = a[name]
    return {"args": args, "puzzles": puzzles, "updates": run.eval_updates(e.kind, args)}


def _test_puzzles(run: cache.Run, limit: int | None) -> int:
    """Puzzles of the profile's test set an evaluation with ``limit`` runs on, from the data settings (their
    ``n_test``; a hub set's whole test set is taken as at least the limit)."""
    from ... import tasks
    from ..settings import profiles

    settings = tasks.profile_config(run.config["task"], profiles.data_profile(run.config["data_profile"]),
                                    run.config["data_overrides"] or None)
    sizes = [n for n in (limit, settings.get("n_test")) if isinstance(n, int)]
    if not sizes:
        raise ValueError(f"{run.name}: neither an evaluation limit nor the data settings tell how many test "
                         "puzzles it has; plan it where its data is (--device cpu, or with CUDA)")
    return min(sizes)


def _answered_by_trajectory(e: specs.EvalSpec, resolved: dict, others: list[tuple[specs.EvalSpec, dict]]
                            ) -> bool:
    """:func:`_read_from_trajectory` for declared evaluations: a budgets evaluation of a model without a horizon,
    with a trajectory of the same run over as many puzzles that reaches every budget."""
    if e.kind != "budgets" or "precision" in resolved["args"] or e.run.run.model_config().cond.uses_horizon:
        return False
    grid = resolved["args"]["budgets"]
    return any(o.kind == "evaluate" and o.run.run.dir == e.run.run.dir and r["puzzles"] == resolved["puzzles"]
               and r["args"]["updates"] >= grid[-1] and all(b % r["args"]["every"] == 0 for b in grid)
               for o, r in others)


def _declared_eval_item(notebook: str, e: specs.EvalSpec, resolved: dict, key: str) -> EvalItem:
    """The :class:`EvalItem` of a declared evaluation (:func:`_eval_item` without the data). It counts as computed
    only where its run is trained here and its cache file exists."""
    run = e.run.run
    kind, note = _eval_note(e.kind, resolved["args"], run)
    cached = False
    if run.done:
        try:  # the data of a run trained here is here
            cached = Path(e.key).is_file()
        except (ValueError, OSError):
            cached = False
    batch = min(run.config["eval"]["batch_size"], resolved["puzzles"])
    return EvalItem(notebook[:2], run, e.run.overrides, kind, resolved["puzzles"], batch, resolved["updates"], note,
                    cached, key, test_set=resolved["args"].get("test_set", "test"))


def job_seconds(planned: list[manifest.Job], device: str, slots: int, calibration: Calibration | None = None
                ) -> dict[str, float]:
    """Estimated seconds of each job (by id) from the plan's calibration on this device: how the scheduler
    orders and the progress bar weighs jobs that no notebook declares."""
    calibration = calibration or Calibration(device)
    plan = estimate(plan_of(planned, "", device, slots), calibration)
    if calibration.measured:  # kept for the next plan of the same shapes
        calibration.save()
    by_run = {str(r.run.dir): r.seconds for r in plan.runs}
    by_key = {e.key: e.seconds for e in (*plan.evals, *plan.models)}
    return {j.id: by_run.get(str(j.spec.run.dir), 0.0) if j.kind == "train"
            else by_key.get(j.model.key if j.kind == "looplm" else j.eval.key, 0.0) for j in planned}


def run_planned(jobs: list[manifest.Job], workers: int, progress: bool = True, fresh_process: bool = False):
    """Run jobs declared outside the notebooks (``scheduler.run_jobs``) on ``workers`` CPU slots of one thread
    each, the costliest ready job first by :func:`job_seconds` (without progress, in the given order), in warm
    workers unless ``fresh_process``; the scheduler's ``Report``."""
    from ..compute.scheduler import run_jobs
    from ..compute.slots import cpu_slots

    slots = cpu_slots(workers=max(1, workers), threads=1)
    costs = job_seconds([j for j in jobs if not j.done], "cpu", len(slots)) if progress else {}
    return run_jobs(jobs, "", slots, cost=(lambda j: costs.get(j.id, 0.0)) if costs else None, progress=progress,
                    fresh_process=fresh_process)


def validation_checks(run: cache.Run) -> tuple[int, int, int]:
    """How a training of ``run`` scores its checkpoints on the validation split (``training/selection.py``): how
    many checks (one at each checkpoint before the last step, one at the end), how many puzzles each (the first
    ``eval.limit`` of the split, which is as large as the test set) and how many outer updates (the training depth,
    H x max_segments); (0, 0, 0) for a task without a validation split. From the settings alone: no data is read."""
    from ... import tasks
    from ...tasks import validation
    from ..settings import profiles

    if run.validation_unavailable():
        return 0, 0, 0
    train = run.train_config()
    limit = run.config["eval"]["limit"]
    try:
        n = validation.size(tasks.profile_config(run.config["task"], profiles.data_profile(run.config["data_profile"]),
                                                 run.config["data_overrides"] or None))
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
    """The warm workers' own costs from real jobs (``timing.MeasuredTimer.warm_jobs``): a probe training of
    ``first``'s run (``TRAIN_WARM`` steps and one validation check), an evaluation of one update on one puzzle and
    each worker's first job, all run together on the plan's slots. A training's bookkeeping is the probe's seconds
    less its steps, start-up and check as timed for the plan; an evaluation's is the probe's whole time (one update
    of one puzzle); a slot's start is its first job's seconds less a later one's."""
    from .calibration import TRAIN_WARM

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
