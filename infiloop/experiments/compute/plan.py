"""Cost before the run: every training run and evaluation that a profile's notebooks execute, and an
estimate of their time on this device (``python -m infiloop plan --profile P [--device cuda] [--calibrate]``).

The runs are ``cache.planned_runs``; the evaluations are the notebooks' own calls with the defaults of
their parameters cells (read from ``notebooks/NN_*.py``), deduplicated as the evaluation cache deduplicates
them. The estimate is a short calibration times the counts:

    per run:        job start + start-up + steps x s/step                  (s/step at the run's batch size)
    per evaluation: job start + ceil(puzzles / batch) x updates x s/update (s/update for one batch)
    per looped decoder (notebook 08): job start + steps x s/step + token-blocks x s/token-block
                    (its evaluation forwards counted in blocks applied at one position, ``looplm.work``)

On a CPU the slots share caches and memory bandwidth: every s/step and s/update is multiplied by the slow-down
of one job beside the others, measured once (the same short evaluation in ``jobs`` processes at once against one
alone). The job start is what every job of the scheduler pays before its first step: a new Python process that imports
torch and the package, reads the run's data and builds its model (measured once per device, about 2.5 s on a
2-core CPU; with 41 jobs of a minute or two, as at `quick`, 10 % of the stage).

The calibration times a few training steps (``training.train`` itself, on the run's data) and a few
evaluation updates (``evaluation.evaluate``) of every distinct model shape on this device; it is cached in
``runs/.plan-calibration.json`` keyed by the device, the torch version and the shape. Where a step at the
full batch would take more than a second, it is timed at a smaller batch and scaled (linear in the batch:
an upper bound on a GPU). Runs and evaluations already in the run cache cost nothing. Not included: data
building (this command builds the data first, as ``reproduce`` does), starting the notebooks and plotting.

Without a CUDA device here, a plan for one (``plan --profile gpu``, ``--device cuda``) is priced by arithmetic
instead (:class:`FlopCalibration`): each job's FLOPs (:func:`flops_per_step`, :func:`flops_per_update`,
``looplm.flops``) at a stated achieved throughput (``--tflops``, default :data:`ASSUMED_GPU_TFLOPS`), a timing
of a CUDA GPU cached in the calibration file replacing the arithmetic wherever it holds the shape; the jobs come
from the notebooks' declarations alone (:func:`declared_plan`), so no data is built or downloaded. The same
pricing makes the offer of the ``gpu`` profile printed after the default run on a CUDA GPU (:func:`gpu_offer`).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import numpy as np

from ... import paths
from ...io import atomic_write_text
from ...machine import cpu_name, threads_per_job, usable_cpus
from ..notebooks import manifest  # the declared jobs ("jobs" is a slot count here)
from ..store import runs as cache

CALIBRATION = ".plan-calibration.json"
TRAIN_WARM, TRAIN_TIMED = 2, 4  # training steps run before timing (allocation, compilation), then timed
EVAL_WARM, EVAL_TIMED, EVAL_REPEATS = 1, 3, 3  # evaluation updates: warm-up, then 3 timings of 3
MAX_STEP_S = 1.0  # a calibration step or update longer than this is timed at a smaller batch and scaled
# Assumed speeds, only to choose the calibration batch (never part of an estimate): FLOP/s.
GUESS_FLOPS = {"cpu": 2e10, "cuda": 5e13, "mps": 1e12}
# Achieved bf16 throughput assumed by gpu_hours_estimate and the FLOP estimate of a plan without CUDA (about a fifth
# of an H200's dense bf16 peak).
ASSUMED_GPU_TFLOPS = 200.0
PILOT = "python -m infiloop pilot --profile {profile}"  # the short measured run to take before a GPU profile


# ------------------------------------------------------------------------------------------ arithmetic


_COUNTED: dict[str, float] = {}  # flops_per_token and the looped decoders' work, once per shape in this process


def flops_per_token(model_cfg) -> float:
    """Multiply-add FLOPs of one application of the shared block, per position (forward).

    Channel weights (and the depthwise convolution) count 2 x their size per position; TRM's token-mixing
    weights act along the sequence (2 x size x d / S per position); attention adds 4 x S x d per layer
    (scores and weighted sum). Element-wise work (norms, the loop connections) is not counted. The model is
    built on the meta device (its weights counted, never initialised) once per configuration."""
    key = "reasoner " + json.dumps(model_cfg.to_dict(), sort_keys=True)
    if key not in _COUNTED:
        _COUNTED[key] = _flops_per_token(model_cfg)
    return _COUNTED[key]


def _flops_per_token(model_cfg) -> float:
    import torch

    from ...model.layers import Attention, TokenMixMLP
    from ...model.reasoner import LoopedReasoner

    with torch.device("meta"):
        model = LoopedReasoner(model_cfg)
    S, d = model_cfg.seq_len + model_cfg.prefix, model_cfg.d_model
    total = 0.0
    for layer in model.layers:
        for sub in layer.subs:
            per = d / S if isinstance(sub, TokenMixMLP) else 1.0
            total += sum(2.0 * p.numel() * per for p in sub.parameters() if p.ndim >= 2)
            if isinstance(sub, Attention):
                total += 4.0 * S * d
    return total


def flops_per_step(model_cfg, batch_size: int) -> float:
    """One training step (one supervision segment): H x (L + 1) block applications forward, and the
    backward pass (about twice the forward) through the last ``grad_outer`` outer updates."""
    apps = model_cfg.H * (model_cfg.L + 1) + 2 * model_cfg.grad_outer * (model_cfg.L + 1)
    return apps * batch_size * (model_cfg.seq_len + model_cfg.prefix) * flops_per_token(model_cfg)


def flops_per_update(model_cfg, puzzles: int) -> float:
    """One evaluation outer update (L + 1 block applications, forward only) of ``puzzles`` puzzles."""
    return (model_cfg.L + 1) * puzzles * (model_cfg.seq_len + model_cfg.prefix) * flops_per_token(model_cfg)


def looplm_counts(probe) -> dict[str, float]:
    """``looplm.work`` of a looped decoder with ``flops``, its job's FLOPs (``looplm.flops``): once per probe in
    this process, the models built on the meta device (their weights counted, never initialised)."""
    from dataclasses import asdict

    import torch

    from ..looplm import data_of, flops, work

    key = "looplm " + json.dumps(asdict(probe), sort_keys=True, default=str)
    if key not in _COUNTED:
        data_of(probe)  # the generated task, made on the CPU (and kept by looplm) before the meta device is on
        with torch.device("meta"):
            _COUNTED[key] = {**work(probe), "flops": flops(probe)}
    return _COUNTED[key]


def job_flops(job) -> float:
    """FLOPs of one scheduler job (``jobs.Job``): a training's steps, an evaluation's updates of its puzzles, or a
    looped decoder's training and evaluation (``looplm.flops``)."""
    if job.kind == "looplm":
        return looplm_counts(job.model.probe)["flops"]
    run = job.spec.run
    if job.kind == "train":
        cfg = run.train_config()
        return cfg.steps * flops_per_step(run.model_config(), cfg.batch_size)
    args, data, _ = run.eval_key(job.eval.kind, job.eval.args)
    return run.eval_updates(job.eval.kind, args) * flops_per_update(run.model_config(), len(data))


def gpu_hours_estimate(model_cfg, steps: int, batch_size: int, tflops: float = ASSUMED_GPU_TFLOPS) -> float:
    """Training hours of ``steps`` steps at an achieved throughput of ``tflops`` (an estimate, not a
    measurement: ``plan --device cuda`` measures)."""
    return steps * flops_per_step(model_cfg, batch_size) / (tflops * 1e12) / 3600


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
    eval_blocks: float  # token-blocks of its evaluation (looplm.work)
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
    job_start: float = 0.0  # seconds every job pays before its work (a new process: imports, data, model)
    contention: float = 1.0  # how much slower a CPU job runs beside the others than alone (measured)


def _over(overrides: dict) -> str:
    """Overrides as ``key=value`` (the notebooks' training seed, the same for every run, left out)."""
    return " ".join(f"{k}={v}" for k, v in overrides.items() if k != "train.seed") or "-"


def _eval_item(job: manifest.Job) -> EvalItem:
    """The evaluation of one plan job: how many puzzles, in batches of how many, over how many updates."""
    e, run = job.eval, job.spec.run
    args, data, path = run.eval_key(e.kind, e.args)
    batch = min(run.config["eval"]["batch_size"], len(data))
    updates = run.eval_updates(e.kind, args)
    kind, note = _eval_note(e.kind, args, run)
    return EvalItem(job.notebooks[0][:2], run, job.spec.overrides, kind, len(data), batch, updates, note,
                    path.is_file(), str(path))


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
    planned = manifest.jobs(notebooks or manifest.profile_notebooks(profile), profile, params)
    return plan_of(planned, profile, device, jobs or default_slots(profile, device, per_gpu))


def default_slots(profile: str, device: str, per_gpu: int | None = None) -> int:
    """The compute stage's slots on ``device`` as reproduce's scheduler makes them: one per core, or ``per_gpu``
    (default ``scheduler.jobs_per_gpu``) per visible GPU; 1 for a CUDA device that is not here."""
    from .scheduler import jobs_per_gpu, slots_for, visible_gpus

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
    runs: dict[str, manifest.RunSpec] = {}
    evals: dict[str, tuple[str, manifest.EvalSpec, dict]] = {}
    models: dict[str, tuple[str, manifest.ModelSpec]] = {}
    for nb in notebooks or manifest.profile_notebooks(profile):
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


def _declared_eval(e: manifest.EvalSpec) -> dict:
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
    if a.get("precision", "auto") != "auto":  # cached apart from the default's (``cache._precision_arg``)
        args["precision"] = a["precision"]
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


def _answered_by_trajectory(e: manifest.EvalSpec, resolved: dict, others: list[tuple[manifest.EvalSpec, dict]]
                            ) -> bool:
    """:func:`_read_from_trajectory` for declared evaluations: a budgets evaluation of a model without a horizon,
    with a trajectory of the same run over as many puzzles that reaches every budget."""
    if e.kind != "budgets" or "precision" in resolved["args"] or e.run.run.model_config().cond.uses_horizon:
        return False
    grid = resolved["args"]["budgets"]
    return any(o.kind == "evaluate" and o.run.run.dir == e.run.run.dir and r["puzzles"] == resolved["puzzles"]
               and r["args"]["updates"] >= grid[-1] and all(b % r["args"]["every"] == 0 for b in grid)
               for o, r in others)


def _declared_eval_item(notebook: str, e: manifest.EvalSpec, resolved: dict, key: str) -> EvalItem:
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
                    cached, key)


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


# ------------------------------------------------------------------------------------------ calibration


@dataclass
class Timing:
    seconds: float  # per training step at the run's batch, or per evaluation update of one batch
    startup: float = 0.0  # a run's extra time before its steady steps (allocation, compilation)
    measured_batch: int = 0  # the batch the timing was taken at (scaled linearly to the real one)


class Timer(Protocol):
    def train_step(self, run: cache.Run, batch: int, threads: int, device: str) -> Timing: ...

    def eval_update(self, run: cache.Run, batch: int, device: str) -> Timing: ...

    def looplm_step(self, probe, device: str) -> Timing: ...

    def looplm_block(self, probe, device: str) -> Timing: ...


class MeasuredTimer:
    """Times ``training.train`` and ``evaluation.evaluate`` on this device (a few steps each)."""

    def train_step(self, run, batch, threads, device):
        b = _calibration_batch(flops_per_step(run.model_config(), batch), batch, device)
        per, startup = self._train(run, b, threads, device)
        if b < batch and per * 4 < MAX_STEP_S:  # the guess was cautious: once more at a larger batch
            b = min(batch, b * 4)
            per, startup = self._train(run, b, threads, device)
        return Timing(per * batch / b, startup, b)

    def _train(self, run, b, threads, device):
        import torch

        from ...training import METRICS, train

        cfg = copy.copy(run.train_config())
        cfg.batch_size, cfg.log_every, cfg.checkpoint_every = b, 1, 10**9
        cfg.steps, cfg.threads = max(cfg.steps, TRAIN_WARM + TRAIN_TIMED + 1), threads
        old = torch.get_num_threads()
        try:
            with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
                train(run.model_config(), cfg, run.train_data(), d, device, TRAIN_WARM + TRAIN_TIMED, progress=False)
                lines = [json.loads(ln) for ln in (Path(d) / METRICS).read_text().splitlines() if ln.strip()]
        finally:
            torch.set_num_threads(old)
        t = [ln["elapsed_s"] for ln in lines]
        per = max(t[-1] - t[TRAIN_WARM - 1], 1e-3) / TRAIN_TIMED
        return per, max(0.0, t[TRAIN_WARM - 1] - TRAIN_WARM * per)

    @staticmethod
    @contextlib.contextmanager
    def _run_folder(run):
        """A temporary run folder holding ``run``'s configuration, and the environment that finds its data."""
        env = {**os.environ, "INFILOOP_RUNS": str(paths.RUNS), "INFILOOP_DATA": str(paths.DATA)}
        with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
            atomic_write_text(Path(d) / "config.json", json.dumps(run.config))
            yield d, env

    def job_start(self, run, device):
        """Seconds to start a job: a new process imports what a job imports, reads the run's training data and
        builds its model on ``device`` (the least of two starts: the first may pay for a cold disk cache)."""
        import subprocess

        code = ("import sys, torch; from infiloop.experiments.compute import scheduler; "
                "from infiloop.experiments.store import runs; "
                "from infiloop.model.reasoner import LoopedReasoner; run = runs.load_run(sys.argv[1]); "
                "run.train_data(); LoopedReasoner(run.model_config()).to(sys.argv[2])")
        with self._run_folder(run) as (d, env):
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", code, d, device], check=True, cwd=paths.ROOT, env=env)
                times.append(time.perf_counter() - t0)
        return Timing(min(times), 0.0, 0)

    def contention(self, run, device, jobs):
        """How much slower a job runs beside ``jobs - 1`` others on this machine's cores than alone (they share
        caches and memory bandwidth): the same short evaluation in ``jobs`` processes at once, against one."""
        import subprocess

        code = ("import sys, time, torch; torch.set_num_threads(1); from infiloop.experiments.store import runs; "
                "from infiloop.evaluation import evaluate; from infiloop.model.reasoner import LoopedReasoner; "
                "import numpy as np; run = runs.load_run(sys.argv[1]); data = run.test_data(); "
                "data = data.subset(np.arange(64) % len(data)); "
                "m = LoopedReasoner(run.model_config()).eval(); evaluate(m, data, 1, 1, 64, 'cpu', progress=False); "
                "t0 = time.perf_counter(); evaluate(m, data, 12, 1, 64, 'cpu', progress=False); "
                "print(time.perf_counter() - t0)")
        with self._run_folder(run) as (d, env):
            def timed(n):
                procs = [subprocess.Popen([sys.executable, "-c", code, d], stdout=subprocess.PIPE, text=True,
                                          cwd=paths.ROOT, env=env) for _ in range(n)]
                return [float(pr.communicate()[0].split()[-1]) for pr in procs]

            alone = min(timed(1)[0], timed(1)[0])
            together = float(np.median(timed(jobs)))
        return Timing(max(1.0, together / alone), 0.0, 0)

    def eval_update(self, run, batch, device):
        from ...evaluation import evaluate
        from ...model.reasoner import LoopedReasoner

        b = _calibration_batch(flops_per_update(run.model_config(), batch), batch, device)
        data = run.test_data()
        data = data.subset(np.arange(b) % len(data))
        model = LoopedReasoner(run.model_config()).to(device).eval()
        evaluate(model, data, EVAL_WARM, 1, b, device, progress=False)
        times = []
        for _ in range(EVAL_REPEATS):  # the median of a few short timings: robust to a busy machine
            t0 = time.perf_counter()
            evaluate(model, data, EVAL_TIMED, 1, b, device, progress=False)
            _sync(device)
            times.append((time.perf_counter() - t0) / EVAL_TIMED)
        return Timing(float(np.median(times)) * batch / b, 0.0, b)


    def looplm_step(self, probe, device):
        from ..looplm import time_train_step

        return Timing(time_train_step(probe, device, TRAIN_WARM, TRAIN_TIMED), 0.0, probe.train.batch_size)

    def looplm_block(self, probe, device):
        from ..looplm import time_forward_block

        return Timing(time_forward_block(probe, device, EVAL_REPEATS), 0.0, probe.train.eval_batch)

    def looplm_start(self, probe, device):
        """Seconds to start a looped decoder's job: a new process imports it, generates the task and builds the
        model (the least of two starts)."""
        import subprocess
        from dataclasses import asdict

        code = ("import sys, json, torch; from infiloop.experiments import looplm; "
                "from infiloop.experiments.compute import scheduler; "
                "p = looplm.Probe.from_dict(json.loads(sys.argv[1])); "
                "looplm.LoopLM(looplm.model_config(p)).to(sys.argv[2])")
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code, json.dumps(asdict(probe)), device], check=True, cwd=paths.ROOT)
            times.append(time.perf_counter() - t0)
        return Timing(min(times), 0.0, 0)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _calibration_batch(flops_full: float, batch: int, device: str) -> int:
    """The largest batch (a power-of-4 fraction of ``batch``) whose step the guessed speed puts under a second."""
    guess = GUESS_FLOPS.get(device.split(":")[0], GUESS_FLOPS["cpu"])
    b = batch
    while b > 1 and flops_full * b / batch / guess > MAX_STEP_S:
        b = max(1, b // 4)
    return b


def device_name(device: str) -> str:
    """What the timings belong to: the CPU model and count, or the GPU's name."""
    if device.startswith("cuda"):
        import torch

        return f"{torch.cuda.get_device_name(torch.device(device))} ({device})"
    return f"{cpu_name()} ({device})"


def _shape(run: cache.Run) -> dict:
    """The model settings that change its cost (not initial values such as beta, nor the seed)."""
    m = copy.deepcopy(run.config["model"])
    for axis in ("inner", "outer"):
        m[axis].pop("beta", None)
        m[axis].pop("decay", None)
    m["cond"].pop("horizon", None)
    return m


def _load() -> float | None:
    """The 1-minute load average when a timing is taken (a busy machine makes every timing slower)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class Calibration:
    """Timings by device and shape, cached in ``<runs>/.plan-calibration.json``."""

    def __init__(self, device: str, timer: Timer | None = None, fresh: bool = False, path: Path | None = None):
        import torch

        self.device, self.timer = device, timer or MeasuredTimer()
        self.path = path or paths.RUNS / CALIBRATION
        self.prefix = f"{device_name(device)} | torch {torch.__version__}"
        self.entries = self._load()  # other devices' and shapes' timings are kept when saving
        self.fresh, self.refreshed = fresh, set()  # fresh: measure every timing this plan needs again
        self.measured = 0
        self.seconds = 0.0
        self.used: list[dict] = []  # the entries this plan's estimate uses

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return data.get("entries", {}) if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _get(self, kind: str, shape: dict, measure) -> Timing:
        key = f"{self.prefix} | {kind} | {_key(shape)}"
        if key not in self.entries or (self.fresh and key not in self.refreshed):
            self.refreshed.add(key)
            t0 = time.perf_counter()
            timing = measure()
            self.seconds += time.perf_counter() - t0
            self.measured += 1
            self.entries[key] = {"seconds": timing.seconds, "startup": timing.startup,
                                 "measured_batch": timing.measured_batch, "shape": shape,
                                 "measured": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "load_average": _load()}
        e = self.entries[key]
        self.used.append(e)
        return Timing(e["seconds"], e["startup"], e["measured_batch"])

    def train_step(self, run, batch: int, threads: int) -> Timing:
        cfg = run.config["train"]
        shape = {"model": _shape(run), "batch": batch, "threads": threads, "precision": cfg["precision"],
                 "compile": cfg["compile"]}
        return self._get("train", shape, lambda: self.timer.train_step(run, batch, threads, self.device))

    def eval_update(self, run, batch: int, threads: int = 0) -> Timing:
        """Timed with ``threads`` torch threads (0: as they are), as the scheduler's slot will run it."""
        import torch

        shape = {"model": _shape(run), "batch": batch, **({"threads": threads} if threads else {})}

        def measure():
            old = torch.get_num_threads()
            torch.set_num_threads(threads or old)
            try:
                return self.timer.eval_update(run, batch, self.device)
            finally:
                torch.set_num_threads(old)

        return self._get("eval", shape, measure)

    def _looplm(self, kind: str, probe, threads: int, measure) -> Timing:
        """A looped decoder's timing, with ``threads`` torch threads (0: as they are), keyed by what sets its cost:
        the model, the task's shape and the batch (not the training seed)."""
        from dataclasses import asdict

        import torch

        task = {k: v for k, v in asdict(probe.task).items() if k != "seed"}
        shape = {"looplm": probe.model.to_dict(), "task": task, "batch": probe.train.batch_size,
                 "loops": probe.budgets(), **({"threads": threads} if threads else {})}

        def timed():
            old = torch.get_num_threads()
            torch.set_num_threads(threads or old)
            try:
                return measure(probe, self.device)
            finally:
                torch.set_num_threads(old)

        return self._get(kind, shape, timed)

    def looplm_step(self, probe, threads: int = 0) -> Timing:
        return self._looplm("looplm train", probe, threads, self.timer.looplm_step)

    def looplm_block(self, probe, threads: int = 0) -> Timing:
        return self._looplm("looplm eval", probe, threads, self.timer.looplm_block)

    def looplm_start(self, probe) -> float:
        """Seconds a looped decoder's job pays before its work (0 with a timer that does not measure it)."""
        if not hasattr(self.timer, "looplm_start"):
            return 0.0
        return self._get("looplm start", {"python": sys.executable},
                         lambda: self.timer.looplm_start(probe, self.device)).seconds

    def job_start(self, run) -> float:
        """Seconds a job pays before its work on this device (0 with a timer that does not measure it)."""
        if not hasattr(self.timer, "job_start"):
            return 0.0
        return self._get("job start", {"python": sys.executable},
                         lambda: self.timer.job_start(run, self.device)).seconds

    def contention(self, run, jobs: int) -> float:
        """The slow-down of a CPU job beside ``jobs - 1`` others (1 with one job, on a GPU, or with a timer that
        does not measure it)."""
        if jobs <= 1 or self.device != "cpu" or not hasattr(self.timer, "contention"):
            return 1.0
        return self._get("contention", {"model": _shape(run), "jobs": jobs},
                         lambda: self.timer.contention(run, self.device, jobs)).seconds

    @property
    def where(self) -> str:
        """The device the timings belong to, in words."""
        return self.prefix.split(" | ")[0]

    def describe(self) -> str:
        """Where this plan's timings come from: measured now or cached, at what load average."""
        how = (f"{self.measured} timings measured now in {self.seconds:.0f} s" if self.measured
               else "all timings from the cache")
        loads = [e.get("load_average") for e in self.used if e.get("load_average") is not None]
        if loads:
            how += (f", at a load average of {min(loads):.1f} to {max(loads):.1f} on {usable_cpus()} CPUs "
                    f"(other work on the machine slows every timing, and so the estimate)")
        return f"calibration: {how} ({self.path}; --calibrate measures again)"

    def save(self) -> None:
        note = ("plan calibration: seconds per training step (at the run's batch) and per evaluation update "
                "(of one batch), by device, torch version and model shape; delete or use --calibrate to measure "
                "again")
        atomic_write_text(self.path, json.dumps({"note": note, "entries": self.entries}, indent=1, sort_keys=True))


class FlopTimer:
    """Timings from arithmetic, not measurement: a step's or an update's FLOPs (:func:`flops_per_step`,
    :func:`flops_per_update`, ``looplm.flops``) at ``tflops`` TFLOP/s achieved. What a plan for a CUDA device prices
    its jobs by where there is none (no job start, no slow-down beside other jobs)."""

    def __init__(self, tflops: float = ASSUMED_GPU_TFLOPS):
        self.flop_per_s = tflops * 1e12

    def train_step(self, run, batch, threads, device):
        return Timing(flops_per_step(run.model_config(), batch) / self.flop_per_s, 0.0, batch)

    def eval_update(self, run, batch, device):
        return Timing(flops_per_update(run.model_config(), batch) / self.flop_per_s, 0.0, batch)

    @staticmethod
    def _looplm(probe) -> tuple[float, float]:
        """A looped decoder's (token-blocks of one training step, FLOPs of one token-block), from
        ``looplm.flops``: its steps count 3 x their forward blocks (forward and backward)."""
        w = looplm_counts(probe)
        return w["step"], w["flops"] / (3 * probe.train.steps * w["step"] + w["eval"])

    def looplm_step(self, probe, device):
        blocks, per_block = self._looplm(probe)
        return Timing(3 * blocks * per_block / self.flop_per_s, 0.0, probe.train.batch_size)

    def looplm_block(self, probe, device):
        return Timing(self._looplm(probe)[1] / self.flop_per_s, 0.0, probe.train.eval_batch)


class FlopCalibration(Calibration):
    """The timings of a CUDA GPU that is not here: where the calibration file holds a timing of this shape measured
    on a CUDA GPU (``gpu``, as ``device_name`` names it, e.g. ``"NVIDIA H200 (cuda)"``; by default the GPU measured
    last, with any torch version), that timing; otherwise the arithmetic of :class:`FlopTimer` at ``tflops``.
    Measures nothing and writes nothing."""

    def __init__(self, tflops: float = ASSUMED_GPU_TFLOPS, gpu: str | None = None, path: Path | None = None):
        self.device, self.timer, self.tflops = "cuda", FlopTimer(tflops), tflops
        self.path = path or paths.RUNS / CALIBRATION
        self.entries = self._load()
        self.fresh, self.refreshed, self.measured, self.seconds, self.used = False, set(), 0, 0.0, []
        self.gpu = gpu or self._last_gpu()
        self.from_gpu, self.estimated = 0, 0
        self.prefix = (f"a CUDA GPU ({self.gpu}'s cached timings, else FLOPs at {tflops:g} TFLOP/s)" if self.gpu
                       else f"a CUDA GPU (FLOPs at {tflops:g} TFLOP/s)")

    def _last_gpu(self) -> str | None:
        """The CUDA device whose timing was measured last in the calibration file, or None."""
        measured = [(e.get("measured", ""), key.split(" | ")[0]) for key, e in self.entries.items()
                    if "(cuda" in key.split(" | ")[0] and isinstance(e, dict)]
        return max(measured)[1] if measured else None

    def _gpu_entry(self, kind: str, shape: dict) -> dict | None:
        """The newest timing of ``kind`` at ``shape`` measured on :attr:`gpu` (any torch version), or None."""
        if not self.gpu:
            return None
        tail = f" | {kind} | {_key(shape)}"
        found = [e for key, e in self.entries.items() if key.startswith(f"{self.gpu} | ") and key.endswith(tail)]
        return max(found, key=lambda e: e.get("measured", "")) if found else None

    def _get(self, kind: str, shape: dict, measure) -> Timing:
        entry = self._gpu_entry(kind, shape)
        if entry is not None:
            self.from_gpu += 1
            self.used.append(entry)
            return Timing(entry["seconds"], entry.get("startup", 0.0), entry.get("measured_batch", 0))
        self.estimated += 1
        return measure()

    @property
    def where(self) -> str:
        return f"a CUDA GPU ({self.gpu})" if self.from_gpu else "a CUDA GPU (a FLOP estimate)"

    def basis(self) -> str:
        """In a few words, what the prices rest on: the FLOP arithmetic, the cached timings of a GPU, or both."""
        flops = f"FLOPs at {self.tflops:g} TFLOP/s achieved"
        if not self.from_gpu:
            return f"a FLOP estimate: {flops}"
        if not self.estimated:
            return f"{self.gpu}'s timings, measured by `plan`"
        return f"{self.from_gpu} timings measured on {self.gpu} by `plan`, {self.estimated} of them {flops}"

    def describe(self) -> str:
        return (f"timings: not measured: {self.basis()} (--tflops; an estimate: small models, "
                f"as the looped decoders, reach far less); a GPU's timings replace the FLOPs where {self.path} holds "
                f"them (python -m infiloop plan --device cuda on the GPU measures them)")

    def save(self) -> None:  # nothing was measured: the arithmetic is never cached
        return


def estimate(plan: Plan, calibration: Calibration) -> Plan:
    """Fill in the seconds of every run and evaluation of ``plan`` (cached ones cost nothing)."""
    threads = threads_per_job(plan.jobs) if plan.device == "cpu" else 0
    todo = [i for i in (*plan.runs, *plan.evals) if not i.cached]
    plan.job_start = calibration.job_start(todo[0].run) if todo else 0.0
    plan.contention = calibration.contention(todo[0].run, plan.jobs) if todo else 1.0
    models = [m for m in plan.models if not m.cached]
    start = calibration.looplm_start(models[0].probe) if models else 0.0
    for item in models:
        item.per_step = calibration.looplm_step(item.probe, threads).seconds * plan.contention
        item.per_block = calibration.looplm_block(item.probe, threads).seconds * plan.contention
        item.seconds = start + item.steps * item.per_step + item.eval_seconds
    for item in plan.runs:
        if item.cached:
            continue
        t = calibration.train_step(item.run, item.batch, threads)
        item.per_step, item.startup = t.seconds * plan.contention, t.startup
        item.seconds = plan.job_start + t.startup + item.steps * item.per_step
    for item in plan.evals:
        if item.cached:
            continue
        item.per_update = calibration.eval_update(item.run, item.batch, threads).seconds * plan.contention
        item.seconds = plan.job_start + item.batches * item.updates * item.per_update
    return plan


def training_wall(plan: Plan) -> float:
    """Wall time of the training jobs alone, scheduled as reproduce schedules them (``scheduler.py``)."""
    from .scheduler import simulate

    return simulate({str(r.run.dir): r.seconds for r in plan.runs}, {}, plan.jobs)


def wall(plan: Plan) -> float:
    """Wall time of the compute stage: every training and evaluation job on ``plan.jobs`` slots (cores, or
    GPUs), each evaluation after its run's training, the costliest ready job first (``scheduler.py``)."""
    from .scheduler import simulate

    seconds = {str(r.run.dir): r.seconds for r in plan.runs}
    after = {}
    for i, e in enumerate(plan.evals):
        seconds[f"eval {i}"] = e.seconds
        after[f"eval {i}"] = [str(e.run.dir)]
    seconds.update({m.key: m.seconds for m in plan.models})
    return simulate(seconds, after, plan.jobs)


# ------------------------------------------------------------------------------------------ output


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


def render(plan: Plan, calibration: Calibration) -> str:
    """The plan as text: one line per run and per evaluation, each with its formula, then the totals."""
    out = []
    n_cached = sum(r.cached for r in plan.runs) + sum(e.cached for e in plan.evals) + sum(m.cached for m in plan.models)
    out.append(f"# plan for profile {plan.profile} on {calibration.prefix}: {len(plan.runs)} training runs, "
               f"{len(plan.evals)} evaluations, {len(plan.models)} looped decoders ({n_cached} already in the run "
               "cache); training seed(s) "
               f"{', '.join(str(x) for x in sorted({r.run.config['train']['seed'] for r in plan.runs}))}")
    out.append(f"# {calibration.describe()}")
    threads = threads_per_job(plan.jobs)
    where = (f"{plan.jobs} at a time, {threads} thread(s) each" if plan.device == "cpu"
             else f"on {plan.jobs} slot(s) of the GPU(s), each job timed alone on a GPU")
    if plan.contention > 1.0:
        where += (f"; s/step and s/update are {plan.contention:.2f}x the timings alone, as measured for {plan.jobs} "
                  f"jobs at once")
    out.append(f"\n## training (reproduce trains {where})")
    out.append("task    recipe         steps   s/step    start-up    time     overrides")
    for r in plan.runs:
        head = f"{r.task:7s} {r.recipe:12s} {r.steps:7d}"
        if r.cached:
            out.append(f"{head}   already trained             0 s      {_over(r.overrides)}")
        else:
            out.append(f"{head} x {_fmt_per(r.per_step)} + {r.startup + plan.job_start:5.1f} s = "
                       f"{_fmt_s(r.seconds):>9s}  {_over(r.overrides)}")
    train_total, train_wall = sum(r.seconds for r in plan.runs), training_wall(plan)
    out.append(f"per run: steps x s/step + start-up (the job's start, {plan.job_start:.1f} s, included); training: "
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
            out.append(f"{head} = {plan.job_start:.1f} + {e.batches:2d} x {e.updates:6d} x {_fmt_per(e.per_update)} = "
                       f"{_fmt_s(e.seconds):>9s}  "
                       f"{what}")
    eval_total = sum(e.seconds for e in plan.evals)
    out.append(f"per evaluation: job start ({plan.job_start:.1f} s) + ceil(puzzles / batch) x updates x s/update; "
               f"evaluations: {_fmt_s(eval_total)}")
    model_total = sum(m.seconds for m in plan.models)
    out += _render_models(plan.models)
    for name in manifest.undeclared_notebooks():
        out.append(f"not listed: the runs and evaluations of notebook {name} (not declared in "
                   "infiloop/experiments/notebooks/manifest.py)")
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
    """``python -m infiloop plan`` (arguments parsed by ``cli.py``): ``args.notebooks`` (default the profile's),
    and with ``args.by_flops`` the FLOP estimate of a CUDA device (:class:`FlopCalibration` at ``args.tflops``, the
    cached timings of ``args.gpu_name`` or of the GPU measured last replacing it; no data built); with
    ``cluster_cfg`` (``--executor slurm``) the cluster jobs that ``reproduce`` would submit."""
    stream = stream or sys.stdout
    notebooks = getattr(args, "notebooks", None) or manifest.profile_notebooks(args.profile)
    by_flops = getattr(args, "by_flops", False)
    print(f"# resolving the runs of profile {args.profile} (no data is built: a FLOP estimate) ..." if by_flops else
          f"# building the data and resolving the runs of profile {args.profile} ...", file=sys.stderr, flush=True)

    params = manifest.read_parameters(getattr(args, "p", None))
    if cluster_cfg is not None:
        from . import cluster

        planned = manifest.jobs(notebooks, args.profile, params)
        todo = [j for j in planned if not j.done]
        seconds, how = cluster.estimates(todo, args.device, cluster_cfg)
        subs = cluster.submissions(planned, args.profile, args.device, args.gpus_per_run, cluster_cfg, seconds)
        print(cluster.render(subs, how, args.cluster), file=stream)
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
    estimate(plan, calibration)
    if calibration.measured:
        calibration.save()
    print(render(plan, calibration), file=stream)
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


def seconds_of(plan: Plan) -> float:
    """The plan's estimate of the compute stage in seconds (:func:`wall`)."""
    return wall(plan)
