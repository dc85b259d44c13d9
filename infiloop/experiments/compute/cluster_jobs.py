"""What ``cluster.py`` submits to Slurm and how: the settings (:class:`ClusterConfig`), each job's resources and
time limit (:func:`submissions`; looped decoders bundled, :func:`bundle`), what a job runs (``job.PlanJob``) and
one submission through submitit (:func:`submit_one`). See ``cluster.py`` for the whole.

GPUs are asked for as ``--gres=gpu:N``, not submitit's ``--gpus-per-node``, which Slurm refuses under
``select/cons_res``; a ``gres`` in the settings' ``sbatch`` (``gpu:a100:2``) replaces it. Memory (``--mem``, per
node): the settings' ``mem_gb``, else the caller's host-memory estimate per node x 1.25 + 2 GB (``cost/host.py``: a
training's processes each hold their copy of the data; a partition's default per CPU is too little for it).
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ... import paths
from ...errors import UsageError
from ...io import atomic_write_text
from ...machine import usable_cpus
from .cluster_states import error_line, partition_max_minutes

if TYPE_CHECKING:
    from ..notebooks.manifest import Job

DEFAULT_CONFIG = paths.ROOT / "slurm.yaml"
TIME_SLACK_MIN = 10  # minutes added to every estimated limit: queueing a node, starting Python, loading the data
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
    wckey: str = ""  # sbatch --wckey where the site asks for one (none is sent otherwise)
    cpus_per_task: int = 0  # CPUs of each task (one task per GPU; on a CPU profile, its torch threads); 0: 8, at
    # most a node's (cluster_nodes.fit)
    mem_gb: float = 0.0  # memory per node in GB (0: each job's host-memory estimate x 1.25 + 2 GB, cost/host.py)
    gpus_per_node: int = 8  # the most GPUs one node has: --gpus-per-run may not ask for more
    cpu_tasks_per_training: int = 1  # on the CPU, a training as this many DDP processes (gloo), one task each
    time_margin: float = 2.0  # time limit = estimate x margin + TIME_SLACK_MIN
    time_min: int = 0  # a fixed time limit in minutes for every job (0: from the estimate)
    max_time_min: int = 0  # the partition's longest limit (0: scontrol's, where it tells)
    timeout_growth: float = 2.0  # a job that ended at its time limit is submitted again with this times the limit
    tflops: float = 200.0  # achieved TFLOP/s assumed for a GPU job when no GPU is here to measure
    max_requeue: int = 3  # submitit's requeues at the time limit (pre-emptions are not counted)
    resubmit: int = 3  # with --wait: submissions again of a job the cluster ended (time limit, pre-emption, node)
    max_queued: int = 100  # jobs of the plan in the queue at once (0: no cap); the rest follow as they end
    decoders_per_job: int = 8  # looped decoders run one after the other in one job
    stuck_min: float = 60.0  # with --wait: minutes a job may pend held, or for nodes drained or down, before it is
    # reported and no longer waited for
    setup: list = field(default_factory=list)  # shell lines run before each job (module load ..., source ...)
    sbatch: dict = field(default_factory=dict)  # any other sbatch option, e.g. {"exclude": "node12"}
    where: str = field(default="the cluster settings", compare=False, metadata={"internal": True})  # named in errors

    def validate(self, where: str) -> None:
        for f in settings_fields():
            value, kind = getattr(self, f.name), {"str": str, "int": int, "float": (int, float), "list": list,
                                                  "dict": dict}[f.type]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise UsageError(f"{where}: {f.name}={value!r}: expected a {f.type}")
        for name in ("gpus_per_node", "cpu_tasks_per_training", "time_margin", "tflops", "decoders_per_job",
                     "stuck_min"):
            if getattr(self, name) <= 0:
                raise UsageError(f"{where}: {name}={getattr(self, name)!r}: expected a number > 0")
        for name in ("cpus_per_task", "mem_gb", "time_min", "max_time_min", "max_requeue", "resubmit", "max_queued"):
            if getattr(self, name) < 0:
                raise UsageError(f"{where}: {name}={getattr(self, name)!r}: expected a number >= 0")
        if self.timeout_growth <= 1:
            raise UsageError(f"{where}: timeout_growth={self.timeout_growth!r}: expected a number > 1")
        if not all(isinstance(line, str) for line in self.setup):
            raise UsageError(f"{where}: setup: expected a list of shell lines (texts)")


def settings_fields() -> list:
    """The fields of :class:`ClusterConfig` that are settings (keys of ``slurm.yaml``)."""
    return [f for f in fields(ClusterConfig) if not f.metadata.get("internal")]


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
        known = [f.name for f in settings_fields()]
        if not isinstance(d, dict):
            raise UsageError(f"{path}: expected a mapping of settings ({', '.join(known)})")
        unknown = sorted(map(str, set(d) - set(known)))
        if unknown:
            raise UsageError(f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
    d.update({k: v for k, v in (("partition", partition), ("account", account)) if v is not None})
    cfg = ClusterConfig(**d, where=where)
    cfg.validate(where)
    return cfg


# ------------------------------------------------------------------------------------------ what is submitted


@dataclass
class Submission:
    """One cluster job: one job of the plan, or several looped decoders run one after the other."""

    jobs: list[Job]
    parameters: dict  # submitit's (AutoExecutor) parameters
    seconds: float  # the estimate the time limit comes from (0 when the settings fix the limit)
    gpus: int
    tasks: int

    @property
    def job(self) -> Job:
        return self.jobs[0]

    @property
    def key(self) -> str:
        return self.jobs[0].id

    @property
    def folder(self) -> Path:
        return self.job.log_dir / "slurm"

    @property
    def record(self) -> Path:
        return record_of(self.job)

    @property
    def timeout_min(self) -> int:
        return self.parameters["timeout_min"]

    @property
    def resumable(self) -> bool:
        """Whether a job that reached its limit goes on where it was (a training, from its checkpoint)."""
        return self.job.kind == "train"

    def finished(self) -> bool:
        return all(j.finished() for j in self.jobs)

    @property
    def label(self) -> str:
        return self.key if len(self.jobs) == 1 else f"{len(self.jobs)} looped decoders ({self.key}, ...)"


def record_of(job: Job) -> Path:
    """Where the submission of ``job`` is recorded."""
    from .scheduler import job_name

    return job.log_dir / "slurm" / f"{job_name(job)}.json"


def time_limit(seconds: float, cfg: ClusterConfig, cap: int | None = None) -> int:
    """Minutes asked for a job estimated at ``seconds``: ``time_min``, else estimate x margin + slack; cut to
    ``cap`` (default ``max_time_min``; 0: none), where a training requeues and resumes."""
    cap = cfg.max_time_min if cap is None else cap
    minutes = cfg.time_min or math.ceil(seconds * cfg.time_margin / 60) + TIME_SLACK_MIN
    return min(minutes, cap) if cap else minutes


def signal_s(minutes: int) -> int:
    """Seconds before a limit of ``minutes`` that submitit's signal asks to come: 90, less under 2.5 min. Slurm looks
    at limits every 30 s and sends it up to 30 s early: never in a job's first 30 s, before Python has a handler
    for it (the signal would end the job)."""
    return max(0, min(90, minutes * 60 - 60))


def limit_cap(cfg: ClusterConfig) -> int:
    """The longest limit a job may ask for: ``max_time_min``, else the partition's by ``scontrol`` (0: none)."""
    if cfg.max_time_min or shutil.which("scontrol") is None:
        return cfg.max_time_min
    return partition_max_minutes(cfg.partition)


def fixed_limits(todo: list[Job], cfg: ClusterConfig) -> tuple[dict[str, float], str] | None:
    """With ``time_min`` in the settings every limit is that, and no job needs an estimate: no seconds, and how the
    limits were set; None otherwise (the caller prices the jobs: the cost model's ``cost.estimates``, at
    ``cfg.tflops`` where no GPU is here to measure)."""
    if not cfg.time_min:
        return None
    return {j.id: 0.0 for j in todo}, f"time_min {cfg.time_min} from the settings"


def _parameters(name: str, minutes: int, gpus: int, tasks: int, cfg: ClusterConfig, mem: float = 0.0) -> dict:
    """submitit's parameters of a job (see the module docstring); ``mem``: its ``--mem`` in GB (0: none)."""
    gres = {"gres": f"gpu:{gpus}"} if gpus else {}  # not submitit's gpus_per_node: see the module docstring
    params = {"name": name[:120], "timeout_min": minutes, "nodes": 1, "tasks_per_node": tasks,
              "cpus_per_task": cfg.cpus_per_task,
              "slurm_additional_parameters": {"kill-on-invalid-dep": "yes", "requeue": True, **gres, **cfg.sbatch},
              "slurm_setup": list(cfg.setup),
              # a task that fails ends the others (as torchrun does): they would wait in a collective for ever
              "slurm_srun_args": [f"--cpus-per-task={cfg.cpus_per_task}", "--kill-on-bad-exit=1"]}
    if cfg.wckey:
        params["slurm_wckey"] = cfg.wckey
    if mem:
        params["mem_gb"] = mem
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(cfg, key):
            params[f"slurm_{key}"] = getattr(cfg, key)
    return params


def submissions(planned: list[Job], profile: str, device: str, gpus_per_run: int, cfg: ClusterConfig,
                seconds: dict[str, float] | None = None, bundled: bool = True, memory: dict[str, float] | None = None,
                cap: int | None = None) -> list[Submission]:
    """The cluster jobs of the plan's jobs not yet done, with their resources (see the module docstring) and limits
    from ``seconds``, each job's estimate by id (the caller's; none needed with ``time_min``, :func:`fixed_limits`);
    with ``bundled``, the looped decoders ``decoders_per_job`` to a job; ``memory``: each job's ``--mem`` in GB by id
    (the caller's, from the cost model's host-memory estimate; the settings' ``mem_gb`` wins)."""
    from .cluster_nodes import fit
    from .scheduler import job_name

    if not cfg.cpus_per_task:  # left to the nodes (cluster_nodes.fit)
        cfg = fit(cfg, device, gpus_per_run, submitting=False)

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
    if seconds is None:
        fixed = fixed_limits(todo, cfg)
        if fixed is None and todo:
            raise ValueError("submissions: the jobs' estimated seconds (cost.estimates) are needed without time_min")
        seconds = fixed[0] if fixed else {}
    cap = limit_cap(cfg) if cap is None else cap
    out, memory = [], memory or {}
    for j in todo:
        gpus = (gpus_per_run if j.kind == "train" else 1) if cuda else 0
        tasks = (max(1, gpus) if cuda else cfg.cpu_tasks_per_training) if j.kind == "train" else 1
        limit = time_limit(seconds[j.id], cfg, cap)
        out.append(Submission([j], _parameters(f"infiloop-{job_name(j)}-{j.home}", limit, gpus, tasks, cfg,
                                               cfg.mem_gb or memory.get(j.id, 0)), seconds[j.id], gpus, tasks))
    return bundle(out, cfg, cap) if bundled else out


def bundle(subs: list[Submission], cfg: ClusterConfig, cap: int, limits: dict[str, int] | None = None
           ) -> list[Submission]:
    """``subs`` with their looped decoders ``decoders_per_job`` to a job, the bundles after the jobs nothing waits
    for: the time limit of a bundle is that of its estimates' sum, or its members' largest in ``limits``."""
    limits = limits or {}
    decoders = [s for s in subs if s.job.kind == "looplm"]
    rest = [s for s in subs if s.job.kind != "looplm"]
    bundles = []
    for i in range(0, len(decoders), cfg.decoders_per_job):
        part = decoders[i:i + cfg.decoders_per_job]
        seconds = sum(s.seconds for s in part)
        minutes = max([time_limit(seconds, cfg, cap)] + [limits.get(s.key, 0) for s in part])
        name = f"infiloop-looplm-{part[0].job.home}" + (f"-and-{len(part) - 1}" if len(part) > 1 else "")
        mem = max(s.parameters.get("mem_gb", 0) for s in part)
        bundles.append(Submission([s.job for s in part], _parameters(name, minutes, part[0].gpus, 1, cfg, mem),
                                  seconds, part[0].gpus, 1))
    first = _prerequisites_first(rest)
    return [s for s in first if not s.job.after] + bundles + [s for s in first if s.job.after]


def clock(m: int) -> str:
    return f"{m // 60}:{m % 60:02d} h" if m >= 60 else f"{m} min"


# ------------------------------------------------------------------------------------------ submitting


class Refused(RuntimeError):
    """``sbatch`` refused a job; the message is its reason, on one line."""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def _clean_env(cluster: str):
    """Submitting from inside an allocation (``salloc``, a batch job): the job's ``SLURM_*`` variables (and
    torch's ``RANK``, ...) are hidden from ``sbatch`` (submitit's ``clean_env``), but not the user's own settings
    of every Slurm command (``SBATCH_*``, ``SLURM_CONF``) nor submitit's signal (``SUBMITIT_PREEMPT_SIGNAL``)."""
    if cluster != "slurm":
        yield
        return
    keep = {k: v for k, v in os.environ.items()
            if k.startswith("SBATCH_") or k in ("SLURM_CONF", "SUBMITIT_PREEMPT_SIGNAL")}  # the last: --signal's
    with submitit().helpers.clean_env():
        os.environ.update(keep)
        try:
            yield
        finally:
            for k in keep:
                os.environ.pop(k, None)


def _executor(sub: Submission, cluster: str, cfg: ClusterConfig, dependency: list[str], limit: int | None):
    ex = submitit().AutoExecutor(folder=sub.folder, cluster=cluster, slurm_max_num_timeout=cfg.max_requeue)
    params = dict(sub.parameters)
    if limit:
        params["timeout_min"] = limit
    if dependency and cluster == "slurm":
        params["slurm_additional_parameters"] = {**params["slurm_additional_parameters"],
                                                 "dependency": "afterok:" + ":".join(dependency)}
    params["slurm_signal_delay_s"] = signal_s(params["timeout_min"])
    if cluster != "slurm":
        params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
    ex.update_parameters(**params)
    if cluster == "slurm" and "slurm_wckey" not in params:
        # submitit sends --wckey=submitit unless told None, which its AutoExecutor drops: a site that enforces wckeys
        # refuses the job (submitit issues 1632, 1758). None on the Slurm executor itself: no --wckey line.
        ex._executor.parameters["wckey"] = None
    return ex


def submit_one(sub: Submission, profile: str, device: str, cluster: str, cfg: ClusterConfig,
               dependency: list[str], max_running: int = 1, limit: int | None = None):
    """Submit one cluster job and record it beside each of its plan's jobs; returns submitit's job, or raises
    :class:`Refused`. A CPU job uses its ``cpus_per_task`` threads on a node, and its share of this machine's CPUs
    on the local and debug clusters (``max_running`` jobs at a time)."""
    from .job import PlanJob

    threads = 0
    if device == "cpu":
        threads = cfg.cpus_per_task if cluster == "slurm" else max(1, min(cfg.cpus_per_task,
                                                                           usable_cpus() // max_running))
    spec = [j.to_json(profile) for j in sub.jobs] if len(sub.jobs) > 1 else sub.job.to_json(profile)
    ex = _executor(sub, cluster, cfg, dependency, limit)
    errors = (submitit().core.utils.FailedJobError, submitit().core.utils.FailedSubmissionError)
    try:
        with _clean_env(cluster), redirect_stderr(io.StringIO()):  # submitit prints sbatch's refusal: said below
            job = ex.submit(PlanJob(), spec, device, threads)
    except errors as e:
        raise Refused(error_line(str(e))) from None
    for j in sub.jobs:
        atomic_write_text(record_of(j), json.dumps(
            {"job_id": str(job.job_id), "cluster": cluster, "plan_job": j.id, "submitted": _now(), "after": dependency,
             "timeout_min": limit or sub.timeout_min, "folder": str(sub.folder),
             "bundle": [m.id for m in sub.jobs] if len(sub.jobs) > 1 else []}, indent=1))
    return job


def _prerequisites_first(subs: list[Submission]) -> list[Submission]:
    """``subs`` ordered so that every job comes after the jobs among them it waits for (their Slurm ids are
    needed for its ``afterok``)."""
    ids, placed, out, rest = {s.key for s in subs}, set(), [], list(subs)
    while rest:
        ready = [s for s in rest if all(a not in ids or a in placed for a in s.job.after)]
        if not ready:
            raise RuntimeError(f"the plan's jobs wait for each other in a cycle: {', '.join(s.key for s in rest)}")
        out += ready
        placed |= {s.key for s in ready}
        rest = [s for s in rest if s.key not in placed]
    return out


def say(text: str) -> None:
    print(f"[cluster] {text}", file=sys.stderr, flush=True)


def job_log(folder: Path, job_id: str) -> Path:
    """The log of a failed job: submitit's error file (where Python's traceback is)."""
    return submitit().core.utils.JobPaths(folder, job_id).stderr


__all__ = ["DEFAULT_CONFIG", "INSTALL", "TIME_SLACK_MIN", "ClusterConfig", "Refused", "Submission", "bundle",
           "fixed_limits", "limit_cap", "read_config", "record_of", "submissions", "submit_one", "submitit",
           "time_limit"]
