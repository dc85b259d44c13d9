"""Where the Slurm jobs of ``cluster.py`` stand, and what each state means for them.

The states are read with ``sacct`` and ``squeue`` directly, not through submitit's watcher: the watcher swallows
``sacct``'s errors (a failing or lagging ``sacct`` reads as ``UNKNOWN``) and stops polling a job it takes for
finished, SUSPENDED among them.

- ``sacct`` gives the state of every job, ended ones too (``-X``: the allocation, not its steps).
- ``squeue`` settles what ``sacct`` cannot: a job it does not list yet (``slurmdbd`` lags behind the controller), a
  job whose ``sacct`` failed, a PREEMPTED or NODE_FAIL job that Slurm requeues (``--requeue``); and it says why a
  job pends (:func:`pending_kind`: a reason that clears by itself, one only a person can clear, or one that never
  clears). Without accounting (``sacct`` failing: no slurmdbd, or it is down) ``scontrol show job`` tells how a job
  that has left the queue ended, for as long as the controller remembers it (``MinJobAge``). A job that none of
  them lists is ``GONE``: ended, and forgotten (the run cache says whether it did its work); one whose state none
  can tell (all failed) is ``UNKNOWN`` and is never submitted again meanwhile.
- ``scontrol show partition`` gives the partition's longest time limit, which no limit asked for may pass.
"""

from __future__ import annotations

import getpass
import json
import math
import re
import subprocess
from pathlib import Path

# A job that will still run or is running: it is waited for, never submitted again. SUSPENDED resumes where it was
# (its state is read again at every poll).
ACTIVE = frozenset({"PENDING", "RUNNING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "CONFIGURING", "COMPLETING",
                    "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "STOPPED"})
# Ended by the cluster rather than by the program: worth submitting again by itself (with --wait).
RETRYABLE = frozenset({"TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"})
UNKNOWN, GONE = "UNKNOWN", "GONE"
QUERY_TIMEOUT_S = 120  # sacct, squeue and scontrol may be slow on a busy cluster; longer is a failure
# Why a job that ended without its result did so, in words (the log says more)
ENDED = {"TIMEOUT": "reached its time limit", "PREEMPTED": "was pre-empted (and not requeued)",
         "NODE_FAIL": "lost its node", "BOOT_FAIL": "lost its node at boot", "DEADLINE": "passed its deadline",
         "OUT_OF_MEMORY": "ran out of memory (raise mem_gb in the settings)", "CANCELLED": "was cancelled",
         "FAILED": "failed", "COMPLETED": "ended without its result", GONE: "ended (Slurm no longer lists it)"}


def _query(cmd: list[str]) -> tuple[str | None, str]:
    """The output of a Slurm command, or ``None`` and why it failed (missing, an error status, too slow)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except FileNotFoundError:
        return None, f"{cmd[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"{cmd[0]} gave no answer in {QUERY_TIMEOUT_S} s"
    if done.returncode:
        said = " ".join((done.stderr or done.stdout).split())[:160]
        return None, f"{cmd[0]} failed ({said or f'exit status {done.returncode}'})"
    return done.stdout, ""


def _job_ids(text: str) -> list[str]:
    """The job ids a ``sacct``/``squeue`` id names: ``123``, ``123_4``, or each of an array's ``123_[1-3,7]``."""
    m = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", text)
    if not m:
        return [text]
    out = []
    for part in m[2].split(","):
        lo, _, hi = part.partition("-")
        out += [f"{m[1]}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def _read_table(text: str, reasons: dict[str, str] | None = None) -> dict[str, str]:
    """``id|STATE[|REASON]`` lines as {job id: first word of the state} (``CANCELLED by 123`` -> ``CANCELLED``);
    a pending job's reason goes into ``reasons``."""
    out = {}
    for line in text.splitlines():
        cells = line.strip().split("|")
        if len(cells) > 1 and cells[0] and cells[1].strip() and "." not in cells[0]:
            for one in _job_ids(cells[0]):
                out[one] = cells[1].split()[0].upper().rstrip("+")
                if reasons is not None and out[one] == "PENDING" and len(cells) > 2:
                    reasons[one] = cells[2].strip()
    return out


def sacct_states(ids: set[str]) -> tuple[dict[str, str] | None, str]:
    """The state of each job ``sacct`` lists (one call), or ``None`` and why ``sacct`` failed."""
    cmd = ["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(sorted({i.split("_")[0] for i in ids}))]
    text, why = _query(cmd)
    return (None, why) if text is None else (_read_table(text), "")


def queue_states(reasons: dict[str, str] | None = None) -> tuple[dict[str, str] | None, str]:
    """The state of each job of this user in the queue (``squeue``), or ``None`` and why ``squeue`` failed; why
    each pending job pends goes into ``reasons``."""
    text, why = _query(["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%i|%T|%r"])
    return (None, why) if text is None else (_read_table(text, reasons), "")


def controller_states(ids: set[str]) -> dict[str, str]:
    """The state of each of the jobs ``ids`` that the controller still remembers (``scontrol show job``: ended jobs
    for ``MinJobAge`` seconds), without accounting; empty when it cannot tell."""
    text, _ = _query(["scontrol", "show", "job", "-o"])
    out = {}
    for line in (text or "").splitlines():
        cells = dict(c.split("=", 1) for c in line.split() if "=" in c)
        one = cells.get("JobId", "")
        if cells.get("ArrayTaskId") and cells.get("ArrayJobId"):
            one = f"{cells['ArrayJobId']}_{cells['ArrayTaskId']}"
        if one in ids and cells.get("JobState"):
            out[one] = cells["JobState"].upper()
    return out


def job_states(ids: set[str]) -> tuple[dict[str, str], dict[str, str], str]:
    """The state of each of the jobs ``ids`` (see the module docstring), why each pending one pends, and a line on
    what could not be read (empty when all went well)."""
    if not ids:
        return {}, {}, ""
    accounted, sacct_why = sacct_states(ids)
    accounted, reasons = accounted or {}, {}
    if all(accounted.get(i) in ACTIVE - {"PENDING"} for i in ids):
        return {i: accounted[i] for i in ids}, reasons, ""
    queued, squeue_why = queue_states(reasons)
    missing = {i for i in ids if i not in accounted and not (queued and i in queued)}
    remembered = controller_states(missing) if missing and queued is not None else {}
    out = {}
    for i in ids:
        if queued is not None and i in queued:
            out[i] = queued[i]
        elif i in accounted:
            out[i] = accounted[i]  # an active one squeue has just let go of: the next poll tells how it ended
        elif i in remembered:
            out[i] = remembered[i]  # without accounting: how it ended, while the controller remembers it
        else:
            out[i] = GONE if queued is not None else UNKNOWN  # not in the queue: ended, whatever sacct says
    unknown = sum(s == UNKNOWN for s in out.values())
    note = ""
    if unknown:
        note = (f"the state of {unknown} job(s) is unknown ({'; '.join(w for w in (sacct_why, squeue_why) if w)}): "
                "they count as still queued and are not submitted again")
    elif sacct_why:
        note = (f"no accounting ({sacct_why}): the jobs' states are read from squeue and scontrol (a job neither "
                "lists any more has ended; the run cache says whether it did its work)")
    return out, reasons, note


# Why a job pends, when it is not waiting its turn. HOPELESS: never clears by itself, nor by anything a person does to
# the queue (the job asks for what its partition, account or QOS cannot give): the job is cancelled and reported.
# A PERSON: clears when someone acts (releases the job, resumes the nodes or the partition): said once, waited for up
# to stuck_min minutes. Each with what to change, in words.
HOPELESS = {
    "PartitionConfig": "it asks for more CPUs, memory or GPUs than any node of its partition has (cpus_per_task, "
                       "mem_gb, --gpus-per-run, or another partition)",
    "PartitionTimeLimit": "its time limit is over the partition's MaxTime (max_time_min in the settings)",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows",
    "PerJobLimit|MaxCpuPerJob|MaxMemPerJob|MaxGRESPerJob|MaxTRESPerJob|MaxWallDurationPerJob|MaxNodePerJob|QOSMin":
        "it is over a per-job limit of its QOS or account (sacctmgr show qos; sacctmgr show assoc): lower "
        "cpus_per_task, mem_gb or the time limit, or choose another qos in the settings",
    "InvalidAccount|AccountNotAllowed": "its account cannot use this partition (account in the settings, --account)",
    "InvalidQOS|QOSNotAllowed": "its QOS cannot be used here (qos in the settings)",
    "BadConstraints": "no node of its partition has the features it asks for (constraint in the settings)",
}
A_PERSON = {
    "JobHeld": "it is held: it waits until released (scontrol release {job})",
    "ReqNodeNotAvail|DOWN, DRAINED|NodeDown": "the nodes it may run on are drained or down: it waits until they are "
                                              "back (scontrol update NodeName=... State=RESUME)",
    "PartitionDown|PartitionInactive": "its partition is down: it waits until the partition is up",
}


def pending_kind(reason: str) -> tuple[str, str]:
    """What a pending job's reason (``squeue %r``) means: ``hopeless``, ``person`` or ``""`` (it waits its turn,
    for a dependency, a start time, resources or a limit that others' jobs ending will lift), with the words for it."""
    for kind, table in (("hopeless", HOPELESS), ("person", A_PERSON)):
        for pattern, words in table.items():
            if re.search(pattern, reason, re.IGNORECASE):
                return kind, words
    return "", ""


def cancel(job_id: str) -> str:
    """``scancel`` a job; empty, or why it failed."""
    return _query(["scancel", job_id])[1]


def verdict(state: str, first_look: bool, prerequisites_done: bool, retries_left: int) -> str:
    """What to do with a job not in the run cache whose latest submission is in ``state``: ``wait`` (queued,
    running, suspended, or its state unknown: never submitted twice), ``submit`` it again, or ``fail``.

    At the first look (a submission of an earlier run: running the command again submits what is missing) every
    ended job is submitted again. Later, while waiting, a job is submitted again when Slurm cancelled it with its
    prerequisite (which is submitted again first) or when the cluster ended it (RETRYABLE) and retries are left."""
    if state in ACTIVE or state == UNKNOWN:
        return "wait"
    if first_look or not prerequisites_done:
        return "submit"
    return "submit" if state in RETRYABLE and retries_left > 0 else "fail"


def grown_limit(previous: int, planned: int, growth: float, cap: int) -> int | None:
    """The limit in minutes for a job that reached its limit ``previous``: ``growth`` times it (at least the
    ``planned`` limit), at most ``cap`` (0: none); ``None`` when it was at the cap already."""
    if cap and previous >= cap:
        return None
    grown = max(planned, math.ceil(previous * growth))
    return min(grown, cap) if cap else grown


def refusal(message: str) -> str:
    """What an ``sbatch`` refusal means: ``limit`` (a submit limit: the rest waits for room), ``busy`` (the
    controller did not answer: try later), ``dependency`` (a prerequisite ended meanwhile: look again), or
    ``other`` (this job as it is: reported)."""
    low = message.lower()
    if "maxsubmit" in low or "submit limit" in low or "maxjobs" in low:
        return "limit"
    if "temporarily unable" in low or "timed out" in low or "unable to contact" in low:
        return "busy"
    if "dependency" in low:
        return "dependency"
    return "other"


def error_line(message: str) -> str:
    """The line of an ``sbatch`` refusal that says why (its last ``error:`` line), on one line."""
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip()]
    said = [ln for ln in lines if "error" in ln.lower() or "option" in ln.lower()] or lines or ["no message"]
    return re.sub(r"^(sbatch: )?(error: )?", "", " ".join(said[-1].split()))[:200]


def minutes(text: str) -> int:
    """A Slurm duration (``UNLIMITED``, ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``) in whole minutes; 0
    for none."""
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return 0
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        h, m, s = (parts + [0, 0])[:3]
    else:
        h, m, s = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    return int(days or 0) * 1440 + h * 60 + m + (1 if s else 0)


def partition_max_minutes(partition: str) -> int:
    """The longest time limit of ``partition`` (the default partition when empty) by ``scontrol``; 0 when there is
    none or it cannot be read."""
    text, _ = _query(["scontrol", "show", "partition", "-o", *([partition] if partition else [])])
    for line in (text or "").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if partition or fields.get("Default") == "YES":
            return minutes(fields.get("MaxTime", ""))
    return 0


def preempt_signal():
    """The signal submitit's jobs get before their time limit and when pre-empted (``SUBMITIT_PREEMPT_SIGNAL``), or
    None where this system has no such signal."""
    import os
    import signal

    return getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2").removeprefix("SIG"), None)


def leave_time_limit_to_slurm() -> None:
    """In a job, once submitit has set its signal handlers: where no requeue is left (``max_requeue`` of them done,
    or 0), submitit's handler of the signal before the time limit would end the job FAILED at once ("timed-out too
    many times"), so that ``--wait`` would never give it a longer limit. Then the job goes on instead, and Slurm ends
    it TIMEOUT at its limit (submitted again with a longer one; a training resumes from its checkpoint). A
    pre-emption's signal is submitit's as before (requeued, not counted)."""
    import signal
    import sys

    sig = preempt_signal()
    handler = signal.getsignal(sig) if sig is not None else None
    owner = getattr(handler, "__self__", None)
    delayed = getattr(owner, "_delayed", None)
    if getattr(delayed, "_timeout_countdown", 1) > 0 or not hasattr(owner, "has_timed_out"):
        return

    def at_time_limit(signum, frame):
        if not owner.has_timed_out():
            return handler(signum, frame)
        print("[cluster] the time limit is near and no requeue is left (max_requeue): the job goes on until Slurm "
              "ends it (TIMEOUT); --wait or the next run submits it again with a longer limit", file=sys.stderr,
              flush=True)

    signal.signal(sig, at_time_limit)


def read_record(path: Path) -> dict | None:
    """A submission record (``cluster._SlurmRun.submit``), or ``None`` when there is none or it cannot be read (the
    job is then submitted again: the run's lock keeps two trainings apart)."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        return rec if isinstance(rec, dict) and isinstance(rec.get("job_id"), (str, int)) else None
    except (OSError, ValueError):
        return None


__all__ = ["ACTIVE", "ENDED", "GONE", "RETRYABLE", "UNKNOWN", "cancel", "controller_states", "error_line",
           "grown_limit", "job_states", "leave_time_limit_to_slurm", "minutes", "partition_max_minutes", "pending_kind",
           "read_record", "refusal", "verdict"]
