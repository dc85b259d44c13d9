"""The compute stage on a Slurm cluster through submitit: every training, evaluation and looped decoder of the
plan (``jobs.py``) becomes a Slurm job, each evaluation after its training.

    ./reproduce.sh --profile paper --executor slurm --partition gpu --account proj    # submit what is missing
    ./reproduce.sh --profile paper --executor slurm --wait       # ... wait for it, then the notebooks and report
    python -m infiloop plan --profile paper --executor slurm     # the jobs it would submit, nothing submitted

- **Resources.** A training asks for ``--gpus-per-run`` GPUs of one node (more than one: a task per GPU, DDP),
  an evaluation or a looped decoder for one GPU; each task for ``cpus_per_task`` CPUs (on a CPU profile, as
  many torch threads).
  The time limit is the job's estimate times ``time_margin`` plus ``TIME_SLACK_MIN`` minutes for its start,
  or ``time_min`` when the settings fix one. The estimate is ``plan``'s (``cost.job_seconds``, a calibration
  measured here) when this machine has the jobs' device, else the job's FLOPs at ``tflops`` (the login node of
  a GPU cluster has no GPU).
- **Dependencies.** An evaluation waits for its training (``--dependency=afterok:ID``); ``kill-on-invalid-dep``
  cancels it when the training fails, so that nothing waits for ever.
- **Resumable.** A job pre-empted or at its time limit is requeued with the same arguments (submitit's
  checkpoint hook, up to ``max_requeue`` times); a training resumes from its run folder's last checkpoint (at
  most ``train.checkpoint_every`` steps are done again), an evaluation or a looped decoder (notebook 08's
  minutes-long models) starts again.
- **Submitted once.** Jobs already in the run cache are not submitted. Each submission is recorded beside its
  run (``<run>/logs/slurm/<job>.json``; a looped decoder's in ``runs/looplm/logs/<record>/slurm/``); one still
  pending or running is not submitted again, and later jobs depend on it: running the same command again submits
  only what is missing or failed.
- **Logs.** submitit writes each job's output into ``<run>/logs/slurm/`` (``<Slurm id>_0_log.out`` and
  ``.err``); a failed job is named with its log in one line.

The run cache (``runs/``), the data and this checkout must be on a filesystem the nodes share; jobs run this
interpreter (``sys.executable``), after the ``setup`` lines of the settings.

``--cluster local`` and ``--cluster debug`` run the same jobs through submitit on this machine (a process per
job, or all in this process): how the tests check this module, and a way to try a setup before the queue. Only
Slurm knows ``afterok``, so with those the submitting process starts each job when its prerequisites are done,
and always waits.

Settings come from a YAML file (``--slurm-config``; ``slurm.yaml`` at the repository root when it exists) with
the keys of :class:`ClusterConfig`; ``--partition`` and ``--account`` win over the file.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from .. import paths
from ..errors import UsageError
from ..io import atomic_write_text
from ..machine import usable_cpus

if TYPE_CHECKING:
    from .jobs import Job

CLUSTERS = ("slurm", "local", "debug")
DEFAULT_CONFIG = paths.ROOT / "slurm.yaml"
TIME_SLACK_MIN = 10  # minutes added to every estimated limit: queueing a node, starting Python, loading the data
# Slurm states of a job that will still run (or is running): such a job is not submitted again.
ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "CONFIGURING", "COMPLETING", "RESIZING",
          "SUSPENDED", "STAGE_OUT", "SIGNALING", "PREEMPTED"}
INSTALL = "pip install submitit (or: pip install -e '.[cluster]')"


def submitit():
    """The submitit module, or a :class:`UsageError` saying how to install it."""
    try:
        import submitit as module
    except ImportError:
        raise UsageError(f"--executor slurm needs the submitit package, which is not installed: {INSTALL}") from None
    return module


# ------------------------------------------------------------------------------------------ settings


@dataclass
class ClusterConfig:
    """Settings of the cluster's jobs: the keys of ``slurm.yaml`` (every one optional)."""

    partition: str = ""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    cpus_per_task: int = 8  # CPUs of each task (one task per GPU); on a CPU profile, its torch threads
    mem_gb: float = 0.0  # memory per node (0: the partition's default)
    gpus_per_node: int = 8  # the most GPUs one node has: --gpus-per-run may not ask for more
    time_margin: float = 2.0  # time limit = estimate x margin + TIME_SLACK_MIN
    time_min: int = 0  # a fixed time limit in minutes for every job (0: from the estimate)
    max_time_min: int = 0  # the partition's longest limit (0: none); a longer job requeues there and resumes
    tflops: float = 200.0  # achieved TFLOP/s assumed for a GPU job when no GPU is here to measure
    max_requeue: int = 3  # requeues after pre-emption or the time limit
    setup: list = field(default_factory=list)  # shell lines run before each job (module load ..., source ...)
    sbatch: dict = field(default_factory=dict)  # any other sbatch option, e.g. {"exclude": "node12"}

    def validate(self, where: str) -> None:
        for f in fields(self):
            value, kind = getattr(self, f.name), {"str": str, "int": int, "float": (int, float), "list": list,
                                                  "dict": dict}[f.type]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise UsageError(f"{where}: {f.name}={value!r}: expected a {f.type}")
        for name in ("cpus_per_task", "gpus_per_node", "time_margin", "tflops"):
            if getattr(self, name) <= 0:
                raise UsageError(f"{where}: {name}={getattr(self, name)!r}: expected a number > 0")
        for name in ("mem_gb", "time_min", "max_time_min", "max_requeue"):
            if getattr(self, name) < 0:
                raise UsageError(f"{where}: {name}={getattr(self, name)!r}: expected a number >= 0")
        if not all(isinstance(line, str) for line in self.setup):
            raise UsageError(f"{where}: setup: expected a list of shell lines (texts)")


def read_config(path: str | Path | None = None, partition: str | None = None,
                account: str | None = None) -> ClusterConfig:
    """The settings: the YAML file ``path`` (default ``slurm.yaml`` when it exists), then the options."""
    import yaml

    d: dict = {}
    if path is None and DEFAULT_CONFIG.is_file():
        path = DEFAULT_CONFIG
    where = "cluster settings"
    if path is not None:
        where = str(path)
        try:
            d = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as e:
            raise UsageError(f"--slurm-config {path}: cannot read it ({e.strerror or e})") from None
        except yaml.YAMLError as e:
            raise UsageError(f"{path}: not YAML ({' '.join(str(e).split())[:100]})") from None
        known = [f.name for f in fields(ClusterConfig)]
        if not isinstance(d, dict):
            raise UsageError(f"{path}: expected a mapping of settings ({', '.join(known)})")
        unknown = sorted(map(str, set(d) - set(known)))
        if unknown:
            raise UsageError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
    d.update({k: v for k, v in (("partition", partition), ("account", account)) if v is not None})
    cfg = ClusterConfig(**d)
    cfg.validate(where)
    return cfg


def add_options(ap) -> None:
    """The options of the compute stage's executor (``reproduce`` and ``plan``)."""
    ap.add_argument("--executor", choices=("local", "slurm"), default="local",
                    help="local: this machine's cores or GPUs (default); slurm: a Slurm job per training and "
                         "evaluation, through submitit (docs/cluster.md)")
    ap.add_argument("--cluster", choices=CLUSTERS, default="slurm",
                    help="with --executor slurm: submitit's backend; local or debug run the same jobs on this "
                         "machine (to try a setup)")
    ap.add_argument("--slurm-config", default=None, metavar="FILE",
                    help="YAML settings of the cluster's jobs (default slurm.yaml when it exists; docs/cluster.md)")
    ap.add_argument("--partition", default=None, help="Slurm partition (wins over the settings file)")
    ap.add_argument("--account", default=None, help="Slurm account (wins over the settings file)")
    ap.add_argument("--wait", action="store_true",
                    help="with --executor slurm: wait for the jobs, then run the notebooks and the report")


def settings(args) -> ClusterConfig:
    """The cluster settings of the command line (``add_options``), once submitit is known to be installed."""
    submitit()
    return read_config(args.slurm_config, args.partition, args.account)


# ------------------------------------------------------------------------------------------ what is submitted


@dataclass
class Submission:
    """One job of the plan as a cluster job."""

    job: Job
    parameters: dict  # submitit's (AutoExecutor) parameters
    seconds: float  # the estimate the time limit comes from (0 when the settings fix the limit)
    gpus: int
    tasks: int

    @property
    def folder(self) -> Path:
        return self.job.log_dir / "slurm"

    @property
    def record(self) -> Path:
        from .scheduler import job_name

        return self.folder / f"{job_name(self.job)}.json"

    @property
    def timeout_min(self) -> int:
        return self.parameters["timeout_min"]


def time_limit(seconds: float, cfg: ClusterConfig) -> int:
    """Minutes asked for a job estimated at ``seconds``: ``time_min``, else estimate x margin + slack (cut to
    ``max_time_min``: the job then reaches it, requeues and resumes)."""
    if cfg.time_min:
        return cfg.time_min
    minutes = math.ceil(seconds * cfg.time_margin / 60) + TIME_SLACK_MIN
    return min(minutes, cfg.max_time_min) if cfg.max_time_min else minutes


def estimates(todo: list[Job], device: str, cfg: ClusterConfig) -> tuple[dict[str, float], str]:
    """Estimated seconds of each job, and how they were made: the plan's calibration when this machine has the
    jobs' device, else FLOPs at ``cfg.tflops``."""
    from ..machine import cuda_problem
    from .cost import job_flops, job_seconds

    if cfg.time_min:
        return {j.id: 0.0 for j in todo}, f"time_min {cfg.time_min} from the settings"
    if not device.startswith("cuda") or cuda_problem() is None:
        return job_seconds(todo, device, slots=1), f"the plan's calibration on this machine's {device}"
    return ({j.id: job_flops(j) / (cfg.tflops * 1e12) for j in todo},
            f"FLOPs at {cfg.tflops:g} TFLOP/s (no GPU here to measure; set tflops or time_min in the settings)")


def submissions(planned: list[Job], profile: str, device: str, gpus_per_run: int, cfg: ClusterConfig,
                seconds: dict[str, float] | None = None) -> list[Submission]:
    """The cluster jobs of the plan's jobs not yet done, with their resources (see the module docstring)."""
    from .scheduler import job_name

    if gpus_per_run < 1:
        raise UsageError(f"--gpus-per-run: expected 1 or more, got {gpus_per_run}")
    cuda = device.startswith("cuda")
    if gpus_per_run > 1 and not cuda:
        raise UsageError(f"--gpus-per-run {gpus_per_run}: several GPUs per run need --device cuda (this run's "
                         f"device is {device})")
    if gpus_per_run > cfg.gpus_per_node:
        raise UsageError(f"--gpus-per-run {gpus_per_run}: a node has at most gpus_per_node={cfg.gpus_per_node} "
                         "GPUs (settings); a run takes GPUs of one node")
    todo = [j for j in planned if not j.done]
    seconds = seconds if seconds is not None else estimates(todo, device, cfg)[0]
    out = []
    for j in todo:
        gpus = (gpus_per_run if j.kind == "train" else 1) if cuda else 0
        tasks = max(1, gpus) if j.kind == "train" else 1
        params = {"name": f"infiloop-{job_name(j)}-{j.home}"[:120], "timeout_min": time_limit(seconds[j.id], cfg),
                  "nodes": 1, "tasks_per_node": tasks, "cpus_per_task": cfg.cpus_per_task, "gpus_per_node": gpus,
                  "slurm_additional_parameters": {"kill-on-invalid-dep": "yes", **cfg.sbatch},
                  "slurm_setup": list(cfg.setup)}
        if cfg.mem_gb:
            params["mem_gb"] = cfg.mem_gb
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(cfg, key):
                params[f"slurm_{key}"] = getattr(cfg, key)
        out.append(Submission(j, params, seconds[j.id], gpus, tasks))
    return out


def render(subs: list[Submission], how: str, cluster: str = "slurm") -> str:
    """``plan --executor slurm``: the jobs that would be submitted, their resources and what each waits for
    (by row number)."""
    row = {s.job.id: i for i, s in enumerate(subs, 1)}
    lines = [f"## {len(subs)} job(s) to submit to {cluster} (time limits from {how})",
             "  #  job                                                         GPUs tasks CPUs    limit  after"]
    for i, s in enumerate(subs, 1):
        after = ",".join(str(row[a]) for a in s.job.after if a in row) or "-"
        lines.append(f"{i:3d}  {s.job.id[:59]:59s} {s.gpus:4d} {s.tasks:5d} {s.parameters['cpus_per_task']:4d} "
                     f"{_minutes(s.timeout_min):>8s}  {after}")
    total = sum(s.timeout_min * max(1, s.gpus) for s in subs)
    lines.append(f"asked for in all: {total / 60:.1f} {'GPU' if any(s.gpus for s in subs) else 'node'}-hours of "
                 "time limits (an upper bound: a job ends when it is done)")
    return "\n".join(lines)


def _minutes(m: int) -> str:
    return f"{m // 60}:{m % 60:02d} h" if m >= 60 else f"{m} min"


# ------------------------------------------------------------------------------------------ the job itself


class PlanJob:
    """What a cluster job runs: one job of the plan (``scheduler.run_one``). Pre-empted or at its time limit,
    submitit calls :meth:`checkpoint` and requeues the same call: a training resumes from its run folder."""

    def __call__(self, spec: dict, device: str, threads: int) -> str:
        import torch

        from ..machine import init_distributed
        from .scheduler import run_one

        try:
            tasks = submitit().JobEnvironment().num_tasks
        except RuntimeError:  # the debug cluster's jobs run in the submitting process, outside any job environment
            tasks = 1
        if tasks > 1:  # one task per GPU of a multi-GPU training: DDP from Slurm's variables
            submitit().helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
            device = init_distributed(device)
        old = torch.get_num_threads()
        try:
            run_one(spec, device, threads)
        finally:
            torch.set_num_threads(old)  # the debug cluster runs jobs in the submitting process
        return spec.get("run_dir") or spec["root"]

    def checkpoint(self, *args, **kwargs):
        return submitit().helpers.DelayedSubmission(self, *args, **kwargs)


# ------------------------------------------------------------------------------------------ submitting


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _state(job_id: str, folder: Path) -> str:
    """The Slurm state of a job as ``sacct`` last said (:func:`_refresh`), its first word: ``PENDING``,
    ``CANCELLED``, ...; ``UNKNOWN`` for a job sacct does not list (yet)."""
    job = submitit().SlurmJob(folder, job_id)  # registers the id with the watcher shared by every SlurmJob
    return (job.watcher.get_state(job_id, mode="cache") or "UNKNOWN").split()[0].upper()


def _refresh() -> None:
    """One ``sacct`` call for every job registered so far."""
    submitit().SlurmJob.watcher.update()


def in_flight(subs: list[Submission], cluster: str) -> dict[str, str]:
    """The Slurm ids of these jobs' earlier submissions that are still pending or running (one ``sacct`` call), by
    plan job id. Only a Slurm job outlives the process that submitted it: local and debug jobs are never in flight."""
    if cluster != "slurm":
        return {}
    recorded = {}
    for s in subs:
        try:
            rec = json.loads(s.record.read_text(encoding="utf-8"))
            if rec.get("cluster") == "slurm":
                recorded[s.job.id] = (str(rec["job_id"]), s.folder)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # none, or unreadable: submit again (the run's lock keeps two trainings apart)
    for job_id, folder in recorded.values():
        submitit().SlurmJob(folder, job_id)
    if recorded:
        _refresh()
    return {jid: job_id for jid, (job_id, folder) in recorded.items() if _state(job_id, folder) in ACTIVE}


def _executor(sub: Submission, cluster: str, cfg: ClusterConfig, dependency: list[str]):
    ex = submitit().AutoExecutor(folder=sub.folder, cluster=cluster, slurm_max_num_timeout=cfg.max_requeue)
    params = dict(sub.parameters)
    if dependency and cluster == "slurm":
        params["slurm_additional_parameters"] = {**params["slurm_additional_parameters"],
                                                 "dependency": "afterok:" + ":".join(dependency)}
    if cluster != "slurm":
        params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
    ex.update_parameters(**params)
    return ex


def submit_one(sub: Submission, profile: str, device: str, cluster: str, cfg: ClusterConfig,
               dependency: list[str], max_running: int = 1):
    """Submit one job and record it beside its run; returns submitit's job. A CPU job uses its ``cpus_per_task``
    threads on a node, and its share of this machine's CPUs on the local and debug clusters (``max_running`` jobs
    at a time)."""
    threads = 0
    if device == "cpu":
        threads = cfg.cpus_per_task if cluster == "slurm" else max(1, min(cfg.cpus_per_task,
                                                                           usable_cpus() // max_running))
    job = _executor(sub, cluster, cfg, dependency).submit(PlanJob(), sub.job.to_json(profile), device, threads)
    atomic_write_text(sub.record, json.dumps({"job_id": str(job.job_id), "cluster": cluster, "plan_job": sub.job.id,
                                              "submitted": _now(), "after": dependency}, indent=1))
    return job


@dataclass
class Outcome:
    submitted: dict[str, str] = field(default_factory=dict)  # plan job id -> cluster job id (this call)
    waiting: dict[str, str] = field(default_factory=dict)  # submitted earlier, still pending or running
    done: list[str] = field(default_factory=list)
    failed: dict[str, Path] = field(default_factory=dict)  # plan job id -> its log
    skipped: list[str] = field(default_factory=list)  # a prerequisite failed


def _finished_well(job: Job) -> bool:
    """Whether the job's result is in the run cache (the truth, whatever the queue says)."""
    return job.finished()


def run_cluster(planned: list[Job], profile: str, device: str, cfg: ClusterConfig, cluster: str = "slurm",
                gpus_per_run: int = 1, wait: bool = False, poll: float | None = None,
                progress: bool = True, max_running: int | None = None) -> Outcome:
    """Submit every job of the plan that is not done nor in flight; with ``wait`` (always on the local and debug
    clusters) wait until every job has ended. ``max_running``: jobs at a time on the local cluster (default: one
    per CPU). See the module docstring."""
    if cluster not in CLUSTERS:
        raise UsageError(f"--cluster {cluster}: expected one of {', '.join(CLUSTERS)}")
    submitit()
    subs = submissions(planned, profile, device, gpus_per_run, cfg)
    out = Outcome()
    ids: dict[str, str] = {}  # plan job id -> cluster job id, for dependencies
    out.waiting = in_flight(subs, cluster)
    ids.update(out.waiting)
    handles = {}  # plan job id -> submitit job
    pending = _prerequisites_first([s for s in subs if s.job.id not in ids])
    if cluster == "slurm":  # Slurm orders them (afterok): submit all now, each after its prerequisites
        for s in pending:
            dep = [ids[a] for a in s.job.after if a in ids]
            handles[s.job.id] = submit_one(s, profile, device, cluster, cfg, dep)
            out.submitted[s.job.id] = ids[s.job.id] = str(handles[s.job.id].job_id)
            _say(f"submitted {s.job.id} as Slurm job {ids[s.job.id]}" + (f" (after {', '.join(dep)})" if dep else ""))
        if not wait:
            return out
    return _wait(subs, pending, handles, out, profile, device, cluster, cfg,
                 poll if poll is not None else (60.0 if cluster == "slurm" else 0.5), progress,
                 max_running or usable_cpus())


def _prerequisites_first(subs: list[Submission]) -> list[Submission]:
    """``subs`` ordered so that every job comes after the jobs among them it waits for (their Slurm ids are
    needed for its ``afterok``)."""
    ids, placed, out, rest = {s.job.id for s in subs}, set(), [], list(subs)
    while rest:
        ready = [s for s in rest if all(a not in ids or a in placed for a in s.job.after)]
        if not ready:
            raise RuntimeError(f"the plan's jobs wait for each other in a cycle: {', '.join(s.job.id for s in rest)}")
        out += ready
        placed |= {s.job.id for s in ready}
        rest = [s for s in rest if s.job.id not in placed]
    return out


def _say(text: str) -> None:
    print(f"[cluster] {text}", file=sys.stderr, flush=True)


def _wait(subs, pending, handles, out: Outcome, profile, device, cluster, cfg, poll, progress,
          max_running) -> Outcome:
    """Until every job has ended: on Slurm, poll sacct; on the local and debug clusters, start each job when its
    prerequisites are done (they know no ``afterok``)."""
    from tqdm.auto import tqdm

    by_id = {s.job.id: s for s in subs}
    todo = {s.job.id for s in pending} if cluster != "slurm" else set()
    running = {jid for jid in by_id if jid not in todo}
    bar = tqdm(total=len(subs), disable=not progress, unit="job", dynamic_ncols=True, desc="cluster jobs")

    def ended(jid: str, ok: bool) -> None:
        running.discard(jid)
        if ok:
            out.done.append(jid)
        else:
            s = by_id[jid]
            log = _log(s, handles.get(jid), out.submitted.get(jid) or out.waiting.get(jid))
            out.failed[jid] = log
            _say(f"FAILED {jid}: see {log}")
        bar.update(1)

    while todo or running:
        for jid in sorted(todo):  # local and debug: a job whose prerequisite failed never starts
            if any(a in out.failed or a in out.skipped for a in by_id[jid].job.after):
                todo.discard(jid)
                out.skipped.append(jid)
                bar.update(1)
        for jid in sorted(todo):
            if len(running) >= max_running:
                break
            if all(a not in by_id or a in out.done for a in by_id[jid].job.after):
                todo.discard(jid)
                handles[jid] = submit_one(by_id[jid], profile, device, cluster, cfg, [], max_running)
                out.submitted[jid] = str(handles[jid].job_id)
                running.add(jid)
                if cluster == "debug":  # runs it, here and now
                    error = handles[jid].exception()
                    if error is not None:
                        _say(f"{jid}: {type(error).__name__}: {error}")
                    ended(jid, error is None and _finished_well(by_id[jid].job))
        if cluster == "slurm" and running:
            _refresh()
        for jid in sorted(running):
            if cluster == "slurm":
                state = _state(out.submitted.get(jid) or out.waiting[jid], by_id[jid].folder)
                if state in ACTIVE or state == "UNKNOWN":  # UNKNOWN: not in sacct yet
                    continue
            elif not handles[jid].done():
                continue
            ended(jid, _finished_well(by_id[jid].job))
        if todo or running:
            time.sleep(poll)
    bar.close()
    return out


def _log(sub: Submission, handle, job_id: str | None) -> Path:
    """The log of a failed job: submitit's error file (where Python's traceback is)."""
    if handle is not None:
        return handle.paths.stderr
    return submitit().SlurmJob(sub.folder, job_id or "0").paths.stderr


def describe(out: Outcome) -> dict:
    """The compute stage's record in stages.json."""
    return {"executor": "slurm", "submitted": len(out.submitted), "in_flight": len(out.waiting),
            "done": len(out.done), "failed": len(out.failed), "skipped": len(out.skipped),
            "cluster_jobs": {**out.waiting, **out.submitted}}


__all__ = ["CLUSTERS", "ClusterConfig", "Outcome", "PlanJob", "Submission", "estimates", "read_config", "render",
           "run_cluster", "submissions", "time_limit"]
