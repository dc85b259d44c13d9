"""The compute stage on a Slurm cluster through submitit: every training, evaluation and looped decoder of the
plan (``notebooks/declarations.py``) becomes a Slurm job, each evaluation after its training.

    ./reproduce.sh --profile paper --executor slurm --partition gpu --account proj    # submit what is missing
    ./reproduce.sh --profile paper --executor slurm --wait       # ... wait for it, then the notebooks and report
    python -m infiloop plan --profile paper --executor slurm     # the jobs it would submit, nothing submitted

- **Before anything.** The jobs run this interpreter (``sys.executable``): for CUDA jobs its PyTorch must be a
  CUDA build (``./reproduce.sh`` installs one with ``--executor slurm``), else the command stops in one line. The
  run cache must take file locks that hold across nodes: where no lock can be taken (Lustre mounted ``noflock``)
  the command stops in one line; where locks hold on one node only (``localflock``) it says so.
- **Resources.** A training asks for ``--gpus-per-run`` GPUs of one node (more than one: a task per GPU, DDP),
  an evaluation or a looped decoder for one GPU; each task for ``cpus_per_task`` CPUs (given to ``srun`` too:
  Slurm 22.05 to 23.02 do not pass it on). Looped decoders go ``decoders_per_job`` to a job (one after the other).
  The time limit is the job's estimate times ``time_margin`` plus ``TIME_SLACK_MIN`` minutes, or ``time_min``;
  never above ``max_time_min`` or the partition's longest limit (``scontrol``). The estimate is ``plan``'s
  calibration when this machine has the jobs' device, else the job's FLOPs at ``tflops``.
- **What a node has.** Before anything is submitted, the partition's nodes are read (``sinfo``,
  ``cluster_nodes.py``): a job that asks for more CPUs, memory or GPUs than any node has (Slurm would leave it
  pending for ever) is refused in one line naming the setting; ``cpus_per_task`` not set is never more than a
  node's CPUs.
- **Dependencies.** An evaluation waits for its training (``--dependency=afterok:ID``); ``kill-on-invalid-dep``
  cancels it when the training fails, so that nothing waits for ever.
- **Resumable.** ``--requeue``: Slurm may requeue a job it pre-empts or whose node fails. At its time limit,
  submitit's signal (USR2, 90 s before) checkpoints the call and requeues it (up to ``max_requeue`` times); a
  training resumes from its run folder's last checkpoint, an evaluation or a looped decoder starts again. A job
  that ended at its time limit all the same is submitted again with ``timeout_growth`` times its limit (at most
  the longest limit; one that starts over and timed out there is reported instead).
- **Submitted once.** Jobs already in the run cache are not submitted. Each submission is recorded beside its
  run (``<run>/logs/slurm/<job>.json``; a looped decoder's in ``runs/looplm/logs/<record>/slurm/``); one still
  queued or running, or whose state cannot be read (``sacct`` and ``squeue`` failing), is not submitted again, and
  later jobs depend on it. The states are read by ``cluster_states.py``.
- **The queue.** At most ``max_queued`` of these jobs are in the queue at once; a refused submission (a submit
  limit, a dependency on a job that failed meanwhile, an option the site refuses) is reported and the rest go on.
  What is not submitted is submitted as earlier jobs end (``--wait``) or by the next run of the command.
  With ``--wait``, a job the cluster ended (time limit, pre-emption, node failure) is submitted again up to
  ``resubmit`` times, and what Slurm cancelled with it after it.
- **Pending for ever.** A job pending for a reason that never clears (``PartitionConfig``, a per-job QOS limit,
  ...) is cancelled and reported in one line with Slurm's reason; one only a person clears (held, drained nodes) is
  said once and waited for up to ``stuck_min`` minutes (``cluster_states.pending_kind``).
- **Logs.** submitit writes each job's output into ``<run>/logs/slurm/`` (``<Slurm id>_0_log.out`` and
  ``.err``); a failed job is named with its log in one line.

``--cluster local`` and ``--cluster debug`` run the same jobs through submitit on this machine (a process per
job, or all in this process): how the tests check this module, and a way to try a setup before the queue. Only
Slurm knows ``afterok``, so with those the submitting process starts each job when its prerequisites are done,
and always waits.

Settings come from a YAML file (``--slurm-config``; ``slurm.yaml`` at the repository root when it exists) with
the keys of :class:`ClusterConfig`; ``--partition`` and ``--account`` win over the file.

This module holds the passes over the queue; ``slurm.py`` the executor (its options, its checks before anything is
built, the plan's table); ``cluster_jobs.py`` what one submission is (settings, resources, limits); ``job.py`` what
a job runs on its node (``PlanJob``); ``cluster_states.py`` where the jobs stand; ``cluster_nodes.py`` what the
partition's nodes have.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import UsageError
from ...machine import progress_bar, usable_cpus
from .cluster_jobs import (
    TIME_SLACK_MIN,
    ClusterConfig,
    Refused,
    Submission,
    bundle,
    clock,
    fixed_limits,
    job_log,
    limit_cap,
    read_config,
    record_of,
    say,
    submissions,
    submit_one,
    submitit,
    time_limit,
)
from .cluster_nodes import fit
from .cluster_states import ENDED, UNKNOWN, cancel, grown_limit, job_states, pending_kind, read_record, refusal, verdict

if TYPE_CHECKING:
    from ..notebooks.manifest import Job

CLUSTERS = ("slurm", "local", "debug")
POLL_S = 60.0  # seconds between two looks at the queue while waiting (one sacct call each)
GROWTH_CAP_MIN = 7 * 24 * 60  # the longest a grown limit gets where neither the settings nor scontrol give one
@dataclass
class Outcome:
    submitted: dict[str, str] = field(default_factory=dict)  # plan job id -> cluster job id (this call)
    waiting: dict[str, str] = field(default_factory=dict)  # submitted earlier, still pending or running
    done: list[str] = field(default_factory=list)
    failed: dict[str, Path | str] = field(default_factory=dict)  # plan job id -> its log, or why it was refused
    skipped: list[str] = field(default_factory=list)  # a prerequisite failed
    held: list[str] = field(default_factory=list)  # not submitted yet: no room in the queue (or ask again later)
    refused: dict[str, str] = field(default_factory=dict)  # plan job id -> sbatch's reason (also in failed)


def run_cluster(planned: list[Job], profile: str, device: str, cfg: ClusterConfig, cluster: str = "slurm",
                gpus_per_run: int = 1, wait: bool = False, poll: float | None = None,
                progress: bool = True, max_running: int | None = None, seconds: dict[str, float] | None = None,
                memory: dict[str, float] | None = None) -> Outcome:
    """Submit every job of the plan that is not done nor in the queue; with ``wait`` (always on the local and debug
    clusters) wait until every job has ended. ``max_running``: jobs at a time on the local cluster (default: one
    per CPU); ``seconds``: each job's estimate by id, which sets its time limit (the caller's, from the cost model;
    none needed with ``time_min``); ``memory``: each job's ``--mem`` in GB by id (the caller's). See the module
    docstring."""
    if cluster not in CLUSTERS:
        raise UsageError(f"--cluster {cluster}: expected one of {', '.join(CLUSTERS)}")
    submitit()
    cfg = fit(cfg, device, gpus_per_run, cluster)
    if cluster == "slurm":
        cap = limit_cap(cfg)
        subs = submissions(planned, profile, device, gpus_per_run, cfg, seconds, bundled=False, cap=cap, memory=memory)
        run = _SlurmRun(subs, profile, device, cfg, cap, progress)
        return run.until_done(wait, POLL_S if poll is None else poll)
    subs = submissions(planned, profile, device, gpus_per_run, cfg, seconds, memory=memory)
    return _run_here(subs, profile, device, cluster, cfg, 0.5 if poll is None else poll, progress,
                     max_running or usable_cpus())


# ------------------------------------------------------------------------------------------ on Slurm


class _SlurmRun:
    """One ``run_cluster`` on Slurm, pass after pass: look at where every job stands (:meth:`look`), then submit
    what is to be submitted (:meth:`submit`). Keyed by plan job id; looped decoders are bundled as submitted."""

    def __init__(self, subs: list[Submission], profile: str, device: str, cfg: ClusterConfig, cap: int,
                 progress: bool):
        tqdm = progress_bar()
        self.by_id = {s.key: s for s in subs}
        self.profile, self.device, self.cfg, self.cap = profile, device, cfg, cap
        self.records = {k: r for k, s in self.by_id.items()
                        if (r := read_record(s.record)) is not None and r.get("cluster") == "slurm"}
        self.final: dict[str, str] = {}  # plan job id -> done, failed or skipped
        self.queued: dict[str, str] = {}  # plan job id -> Slurm id of its submission still in the queue
        self.retries: Counter = Counter()
        self.said: set[tuple[str, str]] = set()
        self.pending_since: dict[tuple[str, str], float] = {}  # (Slurm id, reason) -> when first seen, this run
        self.cancelled: dict[str, str] = {}  # Slurm id -> how its cancelling went (a reason that never clears)
        self.out, self.note, self.why_held = Outcome(), "", set()
        self.bar = tqdm(total=len(subs), disable=not progress, unit="job", dynamic_ncols=True, desc="cluster jobs")

    def until_done(self, wait: bool, poll: float) -> Outcome:
        first = True
        while True:
            self.submit(self.look(first))
            first = False
            if not wait or not (self.queued or self.out.held):
                break
            time.sleep(poll)
        self.bar.close()
        if self.out.held:
            say(f"{len(self.out.held)} job(s) not submitted yet ({'; '.join(sorted(self.why_held))}): run the same "
                "command again as jobs end, or add --wait")
        return self.out

    def _end(self, k: str, status: str, why: Path | str | None = None) -> None:
        self.final[k] = status
        self.queued.pop(k, None)
        self.bar.update(1)
        if status == "done":
            self.out.done.append(k)
        elif status == "skipped":
            self.out.skipped.append(k)
            say(why or f"not submitted: {k} (a job it waits for failed)")
        else:
            self.out.failed[k] = why
            say(f"FAILED {k}: " + (f"see {why}" if isinstance(why, Path) else str(why)))

    def look(self, first: bool) -> list[tuple[Submission, int]]:
        """Where each job stands (one sacct call, squeue when needed); the jobs to submit, with their limits."""
        ids = {str(r["job_id"]) for k, r in self.records.items() if k not in self.final}
        states, reasons, note = job_states(ids)
        if note != self.note:
            self.note = note
            if note:
                say(note)
        self.queued, todo = {}, []
        for k, s in self.by_id.items():
            if k in self.final:
                continue
            if s.finished():
                self._end(k, "done")
                continue
            rec = self.records.get(k)
            if rec is None:
                todo.append((s, s.timeout_min))
                continue
            jid = str(rec["job_id"])
            state = states.get(jid, UNKNOWN)
            ready = all(a not in self.by_id or self.by_id[a].finished() for a in s.job.after)
            step = verdict(state, first, ready, self.cfg.resubmit - self.retries[k])
            if step == "wait" and any(self.final.get(a) in ("failed", "skipped") for a in s.job.after):
                self._end(k, "skipped", f"{k}: no longer waited for (a job it waits for failed or is no longer "
                                        f"waited for); its Slurm job {jid} goes on or ends after that one")
            elif step == "wait" and (why := self._stuck(k, jid, state, reasons.get(jid, ""))):
                self._end(k, "failed", why)
            elif step == "wait":
                self.queued[k] = jid
                if first:
                    self.out.waiting[k] = jid
                self._once(k, state)
            elif step == "fail":
                log = job_log(Path(rec.get("folder") or s.folder), jid)
                self._end(k, "failed", f"Slurm job {jid} {ENDED.get(state, state.lower())}: see {log}")
            elif (limit := self._limit(s, rec, state)) is not None:
                if not first and ready:
                    self.retries[k] += 1
                    say(f"{k}: Slurm job {jid} {ENDED.get(state, state.lower())}; submitting it again")
                todo.append((s, limit))
        return todo

    def _once(self, k: str, state: str) -> None:
        if state == "SUSPENDED" and (k, state) not in self.said:
            self.said.add((k, state))
            say(f"{k}: its Slurm job {self.queued[k]} is SUSPENDED; it goes on when Slurm resumes it")

    def _stuck(self, k: str, jid: str, state: str, reason: str) -> str:
        """Why a pending job is no longer waited for, or empty: its reason never clears by itself (the job is
        cancelled), or only a person can clear it and it has pended so for ``stuck_min`` (it stays in the queue).
        Said once, with Slurm's reason."""
        kind, words = pending_kind(reason) if state == "PENDING" else ("", "")
        if not kind:
            return ""
        words = words.format(job=jid)
        if kind == "hopeless":
            if jid not in self.cancelled:  # once for the plan jobs of a bundle
                problem = cancel(jid)
                self.cancelled[jid] = f"scancel failed ({problem})" if problem else "cancelled"
            return f"Slurm job {jid} pends ({reason}), which never clears: {words}; {self.cancelled[jid]}"
        since = self.pending_since.setdefault((jid, reason), time.monotonic())
        if (jid, reason) not in self.said:
            self.said.add((jid, reason))
            say(f"{k}: its Slurm job {jid} pends ({reason}): {words}")
        if time.monotonic() - since < self.cfg.stuck_min * 60:
            return ""
        return (f"Slurm job {jid} has pended for {self.cfg.stuck_min:g} min ({reason}; stuck_min): no longer waited "
                f"for; it stays in the queue and runs once that clears (scancel {jid} to drop it)")

    def _limit(self, s: Submission, rec: dict, state: str) -> int | None:
        """The limit of a job submitted again: its last one (never less than planned), grown when it ended at it;
        None (and reported) for a job that starts over and timed out at the longest limit."""
        previous = int(rec.get("timeout_min") or s.timeout_min)
        if state != "TIMEOUT":
            return max(previous, s.timeout_min)
        grown = grown_limit(previous, s.timeout_min, self.cfg.timeout_growth, self.cap or GROWTH_CAP_MIN)
        if grown is not None:
            say(f"{s.key}: ended at its time limit of {clock(previous)}; asking for {clock(grown)} "
                 f"(timeout_growth {self.cfg.timeout_growth:g})")
            return grown
        if s.resumable:  # at the longest limit: it resumes from its checkpoint all the same
            return previous
        self._end(s.key, "failed", f"timed out at {clock(previous)}, the longest limit it may ask for, and it "
                                   "starts over each time: give it a faster partition or GPU, or a longer max_time_min")
        return None

    def _dependencies(self, sub: Submission) -> list[str] | str:
        """The Slurm ids ``sub`` waits for, or ``skip`` (a prerequisite failed) or ``hold`` (one is not in the
        queue yet)."""
        out = []
        for a in sub.job.after:
            if a not in self.by_id or self.by_id[a].finished():
                continue
            if self.final.get(a) in ("failed", "skipped"):
                return "skip"
            if a not in self.queued:
                return "hold"
            out.append(self.queued[a])
        return out

    def submit(self, todo: list[tuple[Submission, int]]) -> None:
        """Submit ``todo`` (prerequisites first, the looped decoders bundled), up to ``max_queued`` in the queue;
        a refused job is reported and the others go on."""
        limits = dict((s.key, limit) for s, limit in todo)
        self.out.held, self.why_held, full = [], set(), ""
        for sub in bundle([s for s, _ in todo], self.cfg, self.cap, limits):
            members = [j.id for j in sub.jobs]
            deps = self._dependencies(sub)
            if deps == "skip":
                for k in members:
                    self._end(k, "skipped")
                continue
            room = not self.cfg.max_queued or len(set(self.queued.values())) < self.cfg.max_queued
            if deps == "hold" or full or not room:
                self.out.held += members
                self.why_held.add("the queue refused more" if full else f"at most max_queued={self.cfg.max_queued} "
                                  "in the queue" if not room else "waiting for a job not submitted yet")
                continue
            try:
                limit = sub.timeout_min if sub.job.kind == "looplm" else limits[sub.key]  # a bundle's: bundle()
                job = submit_one(sub, self.profile, self.device, "slurm", self.cfg, deps, limit=limit)
            except Refused as e:
                full = self._refused(sub, str(e))
                continue
            for k in members:
                self.records[k] = read_record(record_of(self.by_id[k].job)) or {"job_id": str(job.job_id)}
                self.queued[k] = self.out.submitted[k] = str(job.job_id)
            say(f"submitted {sub.label} as Slurm job {job.job_id}" + (f" (after {', '.join(deps)})" if deps else ""))
        if full:
            say(f"the queue takes no more jobs now ({full}); {len(self.out.held)} job(s) wait for room")

    def _refused(self, sub: Submission, message: str) -> str:
        """Handle a refusal; returns the message when no more jobs should be submitted in this pass."""
        members = [j.id for j in sub.jobs]
        kind = refusal(message)
        if kind in ("limit", "busy"):
            self.out.held += members
            self.why_held.add("the queue refused more")
            return message
        if kind == "dependency":
            self.out.held += members
            self.why_held.add("a job it waits for ended meanwhile")
            say(f"{sub.label}: sbatch refused its dependency ({message}): a prerequisite ended meanwhile; looked at "
                 "again at the next pass (--wait) or the next run")
            return ""
        for k in members:
            self.out.refused[k] = message
            self._end(k, "failed", f"refused by sbatch: {message}")
        return ""


# ------------------------------------------------------------------------------------------ on this machine


def _run_here(subs, profile, device, cluster, cfg, poll, progress, max_running) -> Outcome:
    """The local and debug clusters: start each job when its prerequisites are done (they know no ``afterok``),
    ``max_running`` at a time, until every job has ended."""
    tqdm = progress_bar()
    by_id = {s.key: s for s in subs}
    owner = {j.id: s.key for s in subs for j in s.jobs}
    todo, running, handles, out = set(by_id), set(), {}, Outcome()
    bar = tqdm(total=len(subs), disable=not progress, unit="job", dynamic_ncols=True, desc="cluster jobs")

    def ended(key: str) -> None:
        running.discard(key)
        for j in by_id[key].jobs:
            if j.finished():
                out.done.append(j.id)
            else:
                out.failed[j.id] = handles[key].paths.stderr
                say(f"FAILED {j.id}: see {out.failed[j.id]}")
        bar.update(1)

    def blocked(key: str) -> bool:
        return any(a in out.failed or a in out.skipped for a in by_id[key].job.after)

    while todo or running:
        for key in sorted(k for k in todo if blocked(k)):  # a job whose prerequisite failed never starts
            todo.discard(key)
            out.skipped += [j.id for j in by_id[key].jobs]
            bar.update(1)
        for key in sorted(todo):
            if len(running) >= max_running:
                break
            if all(a not in owner or a in out.done for a in by_id[key].job.after):
                todo.discard(key)
                handles[key] = submit_one(by_id[key], profile, device, cluster, cfg, [], max_running)
                for j in by_id[key].jobs:
                    out.submitted[j.id] = str(handles[key].job_id)
                running.add(key)
                if cluster == "debug":  # runs it, here and now
                    error = handles[key].exception()
                    if error is not None:
                        say(f"{key}: {type(error).__name__}: {error}")
                    ended(key)
        for key in sorted(k for k in running if handles[k].done()):
            ended(key)
        if todo or running:
            time.sleep(poll)
    bar.close()
    return out


def describe(out: Outcome) -> dict:
    """The compute stage's record in stages.json."""
    return {"executor": "slurm", "submitted": len(out.submitted), "in_flight": len(out.waiting),
            "done": len(out.done), "failed": len(out.failed), "skipped": len(out.skipped), "held": len(out.held),
            "refused": out.refused, "cluster_jobs": {**out.waiting, **out.submitted}}


__all__ = ["CLUSTERS", "TIME_SLACK_MIN", "ClusterConfig", "Outcome", "Refused", "Submission", "bundle",
           "describe", "fixed_limits", "read_config", "run_cluster", "submissions", "time_limit"]
