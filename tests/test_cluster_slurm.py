"""The Slurm path against a stricter fake Slurm (issue 50): a first real cluster's behaviours, one test each.

The fake (``FAKE``, one program installed as ``sbatch``, ``sacct``, ``squeue``, ``scontrol``, ``scancel``, ``srun``
and ``sinfo``) keeps a table of jobs in ``$FAKE_SLURM/jobs.json`` and the site's settings in ``site.json``:

- ``sbatch`` reads the ``#SBATCH`` lines as Slurm does: an option it does not know is refused
  (``unrecognized option``), and so are a bad value (numbers, memory, signal, open mode, ``--requeue`` with a value,
  a ``--gres`` other than ``gpu[:type]:N``), the ``--gpus*`` options where the site's ``select`` is not
  ``select/cons_tres`` (the fake's site: ``select/cons_res``, where only ``--gres`` asks for GPUs),
  a partition the site lacks, a time limit over the partition's ``MaxTime``, a ``--wckey`` outside the site's list
  where the site enforces wckeys, a submission over the user's ``MaxSubmitJobs`` (jobs still in the queue count),
  and an ``afterok`` dependency on a job that is unknown or ended otherwise than COMPLETED (``Job dependency
  problem``). It records the file and the environment it was called with.
- ``sacct -X -n -P -o JobID,State -j ID,...``: each job's state; a job's ``script`` of states is played one per call
  (a job that fails, times out, is pre-empted ... after its submission; also when the call fails); a new job is
  missing for ``sacct_lag`` calls (slurmdbd lags behind the controller); ``sacct_fail`` calls fail as a database
  outage does.
- ``squeue -h -r -u USER -o %i|%T|%r``: the jobs still in the queue, with a pending job's ``reason`` (``squeue_fail``
  calls fail); ``scontrol show job -o``: every job and its state (the controller's memory, without accounting).
- ``sinfo -h -N -o %N|%P|%c|%m|%G``: the site's ``nodes``, their CPUs, memory and GPUs (``Gres``).
- ``sacct``'s ``view`` of a job, played one per call, replaces what it says without changing the job (a database
  behind the controller: PREEMPTED for a job Slurm has requeued, RUNNING for one that has failed).
- ``scontrol show partition -o [NAME]``: the partitions with their ``MaxTime``; ``scontrol requeue ID``.
- With ``run`` set, ``sbatch`` also runs each job it accepts, in the background, after its dependencies (one job
  at a time, cancelled when a dependency did not complete): its script with the job's ``SLURM_*`` variables, and
  ``srun``, which runs its command with the output files it is given and refuses to start without
  ``--cpus-per-task`` (Slurm 22.05 to 23.02 would give the step one CPU).

``tests/test_cluster.py`` uses the same fake for the checks that were there before.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

submitit = pytest.importorskip("submitit")

from infiloop.errors import UsageError  # noqa: E402
from infiloop.experiments.compute import cluster, cluster_jobs, cluster_states, job, slurm  # noqa: E402
from infiloop.experiments.notebooks import manifest as jobs  # noqa: E402

FAKE = r'''#!@PYTHON@ -S
import json, os, re, sys

D = os.environ["FAKE_SLURM"]
CMD = os.path.basename(sys.argv[0])
ARGS = sys.argv[1:]
QUEUED = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING"}


def load(name, default):
    path = os.path.join(D, name)
    return json.load(open(path)) if os.path.exists(path) else default


def save(name, value):  # atomically: a job's runner reads the table while others write it
    path = os.path.join(D, name)
    with open(path + f".{os.getpid()}", "w") as f:
        json.dump(value, f)
    os.replace(path + f".{os.getpid()}", path)


def minutes(text):
    if text.upper() == "UNLIMITED":
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        h, m, s = (parts + [0, 0])[:3]
    elif len(parts) == 1:
        h, m, s = 0, parts[0], 0
    else:
        h, m, s = [0] * (3 - len(parts)) + parts
    return int(days or 0) * 1440 + h * 60 + m + (1 if s else 0)


def fail(*lines):
    for line in lines:
        print(line, file=sys.stderr)
    sys.exit(1)


def refuse(why, *before):
    fail(*[f"sbatch: error: {b}" for b in before], f"sbatch: error: Batch job submission failed: {why}")


import fcntl
import subprocess
import time

RUNNING_JOB = CMD == "sbatch" and ARGS[:1] == ["--run-job"]
if CMD != "srun" and not RUNNING_JOB:  # one Slurm command at a time reads and writes the tables
    LOCK = open(os.path.join(D, "lock"), "a")
    fcntl.flock(LOCK, fcntl.LOCK_EX)
    site, table = load("site.json", {}), load("jobs.json", {})
with open(os.path.join(D, "calls.jsonl"), "a") as f:
    f.write(json.dumps([CMD, *ARGS]) + "\n")
POSITIVE = {"nodes", "ntasks-per-node", "cpus-per-task", "gpus-per-node", "gpus", "gpus-per-task"}
KNOWN = POSITIVE | {"job-name", "output", "error", "open-mode", "signal", "time", "partition", "account", "qos",
                    "constraint", "exclude", "mem", "dependency", "kill-on-invalid-dep", "requeue", "no-requeue",
                    "wckey", "comment", "nodelist", "gres", "exclusive", "mail-type", "mail-user"}


def sbatch():
    text = open(ARGS[-1]).read()
    opts = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH "):
            key, eq, value = line[len("#SBATCH "):].strip().lstrip("-").partition("=")
            if key not in KNOWN:
                fail(f"sbatch: unrecognized option '--{key}{eq}{value}'", 'Try "sbatch --help" for more information')
            if key in ("requeue", "no-requeue") and eq:
                fail(f"sbatch: option '--{key}' doesn't allow an argument")
            opts[key] = value.strip("'")
    for key in POSITIVE & set(opts):
        if not opts[key].isdigit() or int(opts[key]) < 1:
            fail(f"sbatch: error: Invalid numeric value \"{opts[key]}\" for --{key}.")
    if site.get("select", "select/cons_tres") != "select/cons_tres" and POSITIVE & set(opts) - {
            "nodes", "ntasks-per-node", "cpus-per-task"}:  # the --gpus* options are cons_tres's alone
        refuse("Invalid generic resource (gres) specification")
    if "gres" in opts and not all(re.fullmatch(r"gpu(:[a-z0-9_]+)?:[1-9]\d*", g) for g in opts["gres"].split(",")):
        refuse("Invalid generic resource (gres) specification")
    if "mem" in opts and not re.fullmatch(r"\d+[KMGT]?B?", opts["mem"]):
        fail(f"sbatch: error: invalid memory constraint {opts['mem']}")
    if not re.fullmatch(r"(B:)?(SIG)?[A-Z0-9]+(@\d+)?", opts.get("signal", "USR2")):
        fail(f"sbatch: error: Invalid signal specification: {opts['signal']}")
    if opts.get("open-mode", "append") not in ("append", "truncate"):
        fail(f"sbatch: error: Invalid --open-mode argument: {opts['open-mode']}")
    if opts.get("kill-on-invalid-dep", "yes") not in ("yes", "no"):
        fail("sbatch: error: Invalid --kill-on-invalid-dep specification")
    partitions = site.get("partitions", {})
    part = opts.get("partition", site.get("default_partition", ""))
    if part not in partitions:
        refuse("Invalid partition name specified", f"invalid partition specified: {part}")
    longest = minutes(partitions[part])
    if "time" in opts and longest is not None and minutes(opts["time"]) > longest:
        refuse("Requested time limit is invalid (missing or exceeds some limit)")
    if site.get("wckeys") is not None and "wckey" in opts and opts["wckey"] not in site["wckeys"]:
        refuse("Invalid wckey specification")
    queued = sum(1 for j in table.values() if j.get("file") and j["state"] in QUEUED)
    if site.get("max_submit") is not None and queued >= site["max_submit"]:
        refuse("Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
               "QOSMaxSubmitJobPerUserLimit")
    for dep in filter(None, opts.get("dependency", "").split(",")):
        kind, *ids = dep.split(":")
        if kind != "afterok" or not ids:
            fail(f"sbatch: error: Invalid dependency specification {dep}")
        for i in ids:
            if i not in table or not table[i].get("file") or table[i]["state"] not in QUEUED | {"COMPLETED"}:
                refuse("Job dependency problem")
    n = str(site.get("next_id", 1000))
    site["next_id"] = int(n) + 1
    save("site.json", site)
    env = {k: v for k, v in os.environ.items() if k.startswith(("SLURM_", "SBATCH_", "SRUN_")) or k in ("RANK",
                                                                                                         "WORLD_SIZE")}
    job = table.setdefault(n, {})
    job.update({"file": text, "options": opts, "env": env, "lag": site.get("sacct_lag", 0)})
    job.setdefault("state", "PENDING")
    save("jobs.json", table)
    with open(os.path.join(D, "submitted.jsonl"), "a") as f:
        f.write(json.dumps({"id": n, "file": text, "env": env}) + "\n")
    if site.get("run"):  # run it for real, in the background, after its dependencies (one job at a time)
        open(os.path.join(D, f"script-{n}.sh"), "w").write(text)
        subprocess.Popen([sys.executable, "-S", sys.argv[0], "--run-job", n], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"Submitted batch job {n}")


def update(n, **values):
    with open(os.path.join(D, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = load("jobs.json", {})
        table[n].update(values)
        save("jobs.json", table)
        return table


def run_job(n):
    """What the controller and slurmd do for one job: wait for its dependencies, run its script with the job's
    variables, record how it ended."""
    while True:
        table = update(n)
        deps = [i for d in filter(None, table[n]["options"].get("dependency", "").split(",")) for i in d.split(":")[1:]]
        states = [table[i]["state"] for i in deps]
        if table[n]["state"] == "CANCELLED" or any(s not in QUEUED | {"COMPLETED"} for s in states):
            update(n, state="CANCELLED")
            return
        if all(s == "COMPLETED" for s in states):
            break
        time.sleep(0.1)
    with open(os.path.join(D, "run.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        opts = update(n, state="RUNNING")[n]["options"]
        env = dict(os.environ, SLURM_JOB_ID=n, SLURM_NTASKS=opts.get("ntasks-per-node", "1"), SLURM_PROCID="0",
                   SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_JOB_NUM_NODES="1", SLURM_JOB_NODELIST="node1",
                   SLURM_CPUS_PER_TASK=opts.get("cpus-per-task", "1"))
        code = subprocess.call(["bash", os.path.join(D, f"script-{n}.sh")], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    update(n, state="COMPLETED" if code == 0 else "FAILED")


def srun():
    """Runs its command with its output where it is told (Slurm 22.05-23.02: no CPUs unless given here)."""
    i, files = 0, {}
    while i < len(ARGS) and ARGS[i].startswith("-"):
        if ARGS[i] in ("--output", "--error"):
            files[ARGS[i]] = ARGS[i + 1].replace("%j", os.environ["SLURM_JOB_ID"]).replace("%t", "0")
            i += 1
        i += 1
    if not any(a.startswith("--cpus-per-task=") for a in ARGS[:i]):
        fail("srun: the job step would get one CPU (SLURM_CPUS_PER_TASK is not passed on since 22.05)")
    with open(files["--output"], "a") as out, open(files.get("--error", files["--output"]), "a") as err:
        sys.exit(subprocess.call(ARGS[i:], stdout=out, stderr=err))


def sacct():
    ids = [i for k, v in zip(ARGS, ARGS[1:]) if k == "-j" for i in v.split(",")]
    assert {"-X", "-P", "-n"} <= set(ARGS), ARGS
    for i in ids:  # the jobs go on whether the database answers or not
        if table.get(i, {}).get("file") and table[i].get("script"):
            table[i]["state"] = table[i]["script"].pop(0)
    save("jobs.json", table)
    if site.get("sacct_fail", 0) > 0:
        site["sacct_fail"] -= 1
        save("site.json", site)
        fail("sacct: error: Problem talking to the database: Connection refused")
    for i in ids:
        job = table.get(i)
        if not job or not job.get("file"):
            continue
        if job.get("lag", 0) > 0:
            job["lag"] -= 1
            continue
        state = job["view"].pop(0) if job.get("view") else job["state"]  # view: what sacct says, wrong or late
        state += " by 0" if state == "CANCELLED" else ""
        print(f"{i}|{state}")
    save("jobs.json", table)


def squeue():
    if site.get("squeue_fail", 0) > 0:
        site["squeue_fail"] -= 1
        save("site.json", site)
        fail("squeue: error: slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    assert "-h" in ARGS and "%i|%T|%r" in ARGS, ARGS
    for i, job in table.items():
        if job.get("file") and job["state"] in QUEUED:
            print(f"{i}|{job['state']}|{job.get('reason', 'None')}")


def sinfo():
    assert ARGS == ["-h", "-N", "-o", "%N|%P|%c|%m|%G"], ARGS
    for node in site.get("nodes", []):
        for part in node["partitions"]:
            star = "*" if part == site.get("default_partition") else ""
            print(f"{node['name']}|{part}{star}|{node['cpus']}|{node['memory']}|{node.get('gres', '(null)')}")


def scontrol():
    if ARGS[:2] == ["show", "partition"]:
        names = [a for a in ARGS[2:] if not a.startswith("-")]
        parts = site.get("partitions", {})
        for name in names or parts:
            if name not in parts:
                fail(f"Partition {name} not found")
            default = "YES" if name == site.get("default_partition") else "NO"
            print(f"PartitionName={name} AllowGroups=ALL Default={default} MaxTime={parts[name]} State=UP")
    elif ARGS[:1] == ["requeue"]:
        table[ARGS[1]]["state"] = "REQUEUED"
        save("jobs.json", table)
    elif ARGS[:2] == ["show", "job"]:  # the jobs the controller remembers (all of them here)
        for i, job in table.items():
            if job.get("file"):
                print(f"JobId={i} JobName=x JobState={job['state']} Reason=None")


if RUNNING_JOB:
    run_job(ARGS[1])
elif CMD == "scancel":
    for i in ARGS:
        if i in table:
            table[i]["state"] = "CANCELLED"
    save("jobs.json", table)
else:
    globals()[CMD]()
'''
SITE = {"partitions": {"cpu": "UNLIMITED", "gpu": "UNLIMITED", "short": "1:00:00"}, "default_partition": "cpu",
        "select": "select/cons_res",  # SelectType: --gpus-per-node and the other --gpus* options refused
        "nodes": [{"name": "c1", "partitions": ["cpu", "short"], "cpus": 16, "memory": 64000},
                  {"name": "g1", "partitions": ["gpu"], "cpus": 64, "memory": 512000, "gres": "gpu:h100:8(S:0-1)"}]}


class FakeSlurm:
    """The fake Slurm's state, as the tests see and set it."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _load(self, name: str) -> dict:
        path = self.folder / name
        return json.loads(path.read_text()) if path.is_file() else {}

    def submitted(self) -> list[dict]:
        path = self.folder / "submitted.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []

    def calls(self, command: str) -> list[list[str]]:
        path = self.folder / "calls.jsonl"
        return [c for c in map(json.loads, path.read_text().splitlines()) if c[0] == command] if path.is_file() else []

    def set_states(self, states: dict[str, str]) -> None:
        """Jobs' states now (a job not submitted yet starts in that state)."""
        table = self._load("jobs.json")
        for i, state in states.items():
            table.setdefault(i, {})["state"] = state
        (self.folder / "jobs.json").write_text(json.dumps(table))

    def script(self, states: dict[str, list[str]]) -> None:
        """States a job takes one per ``sacct`` call from the next one (after its submission)."""
        table = self._load("jobs.json")
        for i, seq in states.items():
            table.setdefault(i, {})["script"] = list(seq)
        (self.folder / "jobs.json").write_text(json.dumps(table))

    def view(self, states: dict[str, list[str]]) -> None:
        """What ``sacct`` says of a job, one per call, whatever its true state (a stale or lagging database)."""
        table = self._load("jobs.json")
        for i, seq in states.items():
            table.setdefault(i, {})["view"] = list(seq)
        (self.folder / "jobs.json").write_text(json.dumps(table))

    def site(self, **settings) -> None:
        (self.folder / "site.json").write_text(json.dumps({**self._load("site.json"), **settings}))

    def state(self, job_id: str) -> str:
        return self._load("jobs.json")[job_id]["state"]


def install_fake_slurm(tmp_path: Path, monkeypatch) -> FakeSlurm:
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm"
    bin_dir.mkdir(exist_ok=True)
    state.mkdir(exist_ok=True)
    for name in ("sbatch", "sacct", "squeue", "scontrol", "scancel", "srun", "sinfo"):
        (bin_dir / name).write_text(FAKE.replace("@PYTHON@", sys.executable))
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(state))
    fake = FakeSlurm(state)
    fake.site(**SITE)
    return fake


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    return install_fake_slurm(tmp_path, monkeypatch)


@pytest.fixture
def roots(tmp_path, monkeypatch):
    from infiloop import paths

    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    return tmp_path


def sbatch_options(text: str) -> dict[str, str]:
    """The ``#SBATCH --key=value`` lines of a submission file (``True`` for a flag)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH --"):
            key, eq, value = line[len("#SBATCH --"):].partition("=")
            out[key] = value if eq else True
    return out


def _plan(recipes=("infiloop",)):
    """Notebook 01's smoke jobs of these recipes: a training and its evaluation each."""
    return first_evaluations([j for j in jobs.jobs(["01_main_table"], "smoke", {}) if j.spec.recipe in recipes])


def first_evaluations(plan):
    """Each training and its first evaluation (the depth trajectory): the plan these tests were written for, before
    notebook 01 also evaluated on the validation split."""
    seen = set()
    return [j for j in plan if j.kind != "eval" or not (tuple(j.after) in seen or seen.add(tuple(j.after)))]


def _decoders(n: int):
    return [j for j in jobs.jobs(["08"], "smoke", {}) if j.kind == "looplm"][:n]


CFG = dict(time_min=30, cpus_per_task=2)


@pytest.fixture
def results(fake_slurm, monkeypatch):
    """A job's result is in the run cache once its latest Slurm job is COMPLETED (the fake runs nothing)."""
    from infiloop.experiments.compute.cluster_jobs import record_of

    def finished(job) -> bool:
        rec = cluster_states.read_record(record_of(job))
        return rec is not None and fake_slurm._load("jobs.json").get(rec["job_id"], {}).get("state") == "COMPLETED"

    monkeypatch.setattr(jobs.Job, "finished", finished)


def _times(fake: FakeSlurm) -> list[int]:
    return [int(sbatch_options(s["file"])["time"]) for s in fake.submitted()]


def _cluster_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("[cluster]")]


# ------------------------------------------------------------------------------ 1. a CUDA build for GPU jobs


@pytest.mark.parametrize("argv", [["--profile", "paper"], ["--profile", "smoke", "--device", "cuda"]])
def test_cuda_jobs_from_a_cpu_build_of_torch_stop_before_submitting_in_one_line(fake_slurm, tmp_path, monkeypatch,
                                                                               capsys, argv):
    import torch

    from infiloop import paths
    from infiloop.cli import main

    monkeypatch.setattr(torch.version, "cuda", None)  # this machine's build, made sure of
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    assert main(["reproduce", *argv, "--executor", "slurm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "is a CPU build" in err[0], err
    assert "./reproduce.sh setup --cuda" in err[0] and sys.executable in err[0]
    assert fake_slurm.submitted() == [] and not (tmp_path / "data").exists()


def test_a_cuda_build_passes_and_plan_or_a_cpu_profile_never_asks(fake_slurm, roots, monkeypatch):
    import argparse

    import torch

    monkeypatch.setattr(torch.version, "cuda", None)
    args = argparse.Namespace(slurm_config=None, partition="gpu", account=None, device="cuda", cluster="slurm")
    slurm.settings(args, submitting=False)  # plan shows the jobs all the same
    slurm.check_submitter("cpu", "slurm")  # a CPU profile's jobs need no CUDA
    with pytest.raises(UsageError, match="CPU build"):
        slurm.settings(args)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    slurm.settings(args)  # a CUDA build: the nodes have the GPUs (none is needed here)
    monkeypatch.setattr("infiloop.machine.cuda_problem", lambda: "no CUDA device is visible")
    with pytest.raises(UsageError, match="CUDA is not usable here .* --cluster local runs the jobs on this"):
        slurm.check_submitter("cuda", "local")  # the local cluster's jobs run here: this machine's GPU it is


# ------------------------------------------------------------------------------ 2. limits that grow


def test_a_job_that_reached_its_limit_is_submitted_again_with_a_longer_one_up_to_the_longest(fake_slurm, roots,
                                                                                            capsys):
    cfg = cluster.ClusterConfig(time_min=30, max_time_min=100, timeout_growth=2.0)
    plan = _plan()
    train, evaluation = plan
    first = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    for limit in (60, 100, 100):  # x2, then the longest; a training at the longest resumes there all the same
        old = first.submitted if limit == 60 else again.submitted  # noqa: F821
        fake_slurm.set_states({old[train.id]: "TIMEOUT", old[evaluation.id]: "CANCELLED"})
        again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
        new = {s["id"]: sbatch_options(s["file"]) for s in fake_slurm.submitted()[-2:]}
        assert set(again.submitted) == {train.id, evaluation.id}
        assert int(new[again.submitted[train.id]]["time"]) == limit
        assert new[again.submitted[evaluation.id]]["dependency"] == f"afterok:{again.submitted[train.id]}"
        assert int(new[again.submitted[evaluation.id]]["time"]) == 30
    assert "ended at its time limit of 30 min; asking for 1:00 h (timeout_growth 2)" in capsys.readouterr().err


def test_a_job_that_starts_over_is_reported_when_it_timed_out_at_the_longest_limit(fake_slurm, roots, capsys):
    cfg = cluster.ClusterConfig(time_min=30, max_time_min=50)
    plan = _decoders(1)
    for limit in (30, 50):
        out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
        assert _times(fake_slurm)[-1] == limit
        fake_slurm.set_states({out.submitted[plan[0].id]: "TIMEOUT"})
    capsys.readouterr()
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert out.submitted == {} and len(fake_slurm.submitted()) == 2
    lines = _cluster_lines(capsys.readouterr().err)
    assert lines == [f"[cluster] FAILED {plan[0].id}: timed out at 50 min, the longest limit it may ask for, and it "
                     "starts over each time: give it a faster partition or GPU, or a longer max_time_min"]


def test_no_limit_passes_the_partitions_longest_from_scontrol(fake_slurm, roots):
    cfg = cluster.ClusterConfig(partition="short", time_min=90)  # short: MaxTime=1:00:00
    plan = _plan()
    with pytest.raises(cluster.Refused, match="Requested time limit is invalid"):  # as Slurm would refuse it
        sub = cluster.submissions(plan, "smoke", "cpu", 1, cfg, cap=0)[0]
        cluster_jobs.submit_one(sub, "smoke", "cpu", "slurm", cfg, [])
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert len(out.submitted) == 2 and _times(fake_slurm) == [60, 60]
    assert cluster_states.minutes("2-00:00:00") == 2880 and cluster_states.minutes("UNLIMITED") == 0
    assert cluster_states.minutes("1:30") == 2 and cluster_states.minutes("45") == 45


def test_with_wait_a_timed_out_training_goes_again_with_a_longer_limit_and_its_evaluation_after_it(
        fake_slurm, roots, results):
    cfg = cluster.ClusterConfig(time_min=30)
    train, evaluation = _plan()
    fake_slurm.script({"1000": ["TIMEOUT"], "1001": ["CANCELLED"], "1002": ["COMPLETED"],
                       "1003": ["PENDING", "COMPLETED"]})
    out = cluster.run_cluster([train, evaluation], "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert out.submitted == {train.id: "1002", evaluation.id: "1003"} and sorted(out.done) == sorted(
        [train.id, evaluation.id]) and not out.failed
    assert _times(fake_slurm) == [30, 30, 60, 30]
    assert sbatch_options(fake_slurm.submitted()[3]["file"])["dependency"] == "afterok:1002"


# ------------------------------------------------------------------------------ 3, 4, 5, 8. what sbatch is given


def test_srun_gets_the_cpus_per_task_and_sbatch_asks_for_requeue_without_a_wckey(fake_slurm, roots):
    cluster.run_cluster(_plan(), "smoke", "cpu", cluster.ClusterConfig(**CFG), progress=False)
    for s in fake_slurm.submitted():
        sb, srun = sbatch_options(s["file"]), s["file"].split("\nsrun ", 1)[1].split("\n")[0]
        assert sb["cpus-per-task"] == "2" and "--cpus-per-task=2" in srun.split()  # Slurm 22.05-23.02 need both
        assert sb["requeue"] is True and sb["signal"] == "USR2@90" and "wckey" not in sb
        assert "gpus-per-node" not in sb  # a CPU job asks for no GPU (not --gpus-per-node=0)


def test_gpus_are_asked_for_by_gres_which_a_cons_res_site_accepts_and_a_gres_of_the_settings_wins(fake_slurm,
                                                                                                  roots):
    plan = _plan()
    out = cluster.run_cluster(plan, "smoke", "cuda", cluster.ClusterConfig(**CFG, partition="gpu"), gpus_per_run=2,
                              progress=False)
    assert len(out.submitted) == len(plan) == 2 and not out.failed
    files = {s["id"]: sbatch_options(s["file"]) for s in fake_slurm.submitted()}
    for j in plan:  # a training: two GPUs and a task each; its evaluation: one GPU
        sb = files[out.submitted[j.id]]
        assert not {"gpus-per-node", "gpus", "gpus-per-task"} & set(sb)
        assert (sb["gres"], sb["ntasks-per-node"]) == (("gpu:2", "2") if j.kind == "train" else ("gpu:1", "1"))
    cfg = cluster.ClusterConfig(**CFG, partition="gpu", sbatch={"gres": "gpu:h100:1"})  # a site that wants a type
    sub = cluster_jobs.submissions(plan, "smoke", "cuda", 1, cfg, bundled=False)
    assert [s.parameters["slurm_additional_parameters"]["gres"] for s in sub] == ["gpu:h100:1"] * 2
    assert all("gpus_per_node" not in s.parameters for s in sub)


def test_submitting_from_inside_an_allocation_passes_none_of_its_variables(fake_slurm, roots, monkeypatch):
    inherited = {"SLURM_JOB_ID": "77", "SLURM_CPUS_PER_TASK": "1", "SLURM_MEM_PER_CPU": "1000", "SRUN_DEBUG": "3",
                 "RANK": "0", "WORLD_SIZE": "4"}
    own = {"SBATCH_ACCOUNT": "site", "SLURM_CONF": "/etc/slurm/other.conf"}  # the user's settings of sbatch
    for k, v in {**inherited, **own}.items():
        monkeypatch.setenv(k, v)
    cluster.run_cluster(_plan(), "smoke", "cpu", cluster.ClusterConfig(**CFG), progress=False)
    for s in fake_slurm.submitted():
        assert s["env"] == own
    assert all(os.environ[k] == v for k, v in {**inherited, **own}.items())  # this process's are back


def test_a_wckey_is_sent_only_when_set_and_a_refused_one_is_reported_for_every_job(fake_slurm, roots, capsys):
    fake_slurm.site(wckeys=["proj"])  # a site that enforces wckeys: submitit's default "submitit" is refused
    plan = _plan()
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**CFG), progress=False)
    assert len(out.submitted) == 2 and all("wckey" not in sbatch_options(s["file"]) for s in fake_slurm.submitted())
    for s in fake_slurm.submitted():
        fake_slurm.set_states({s["id"]: "FAILED"})
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**CFG, wckey="proj"), progress=False)
    assert len(out.submitted) == 2 and sbatch_options(fake_slurm.submitted()[-1]["file"])["wckey"] == "proj"
    for s in fake_slurm.submitted():
        fake_slurm.set_states({s["id"]: "FAILED"})
    capsys.readouterr()
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**CFG, wckey="nope"), progress=False)
    train, evaluation = plan
    assert out.submitted == {} and out.refused == {train.id: "Batch job submission failed: Invalid wckey specification"}
    assert out.skipped == [evaluation.id]
    assert capsys.readouterr().err.splitlines() == [  # one line each, and nothing of submitit's own
        f"[cluster] FAILED {train.id}: refused by sbatch: Batch job submission failed: Invalid wckey specification",
        f"[cluster] not submitted: {evaluation.id} (a job it waits for failed)"]


def test_an_option_the_site_does_not_know_is_refused_in_one_line(fake_slurm, roots):
    cfg = cluster.ClusterConfig(**CFG, sbatch={"nodes_per_job": 2})
    out = cluster.run_cluster(_plan(), "smoke", "cpu", cfg, progress=False)
    assert out.submitted == {} and len(out.refused) == 1 and len(out.skipped) == 1
    assert list(out.refused.values()) == ["unrecognized option '--nodes-per-job=2'"]


# ------------------------------------------------------------------------------ 6. states read right


def test_a_preempted_job_that_ended_goes_again_and_one_slurm_requeued_is_waited_for(fake_slurm, roots, results):
    cfg = cluster.ClusterConfig(**CFG)
    first, second = _decoders(2)
    cfg.decoders_per_job = 1
    # 1000: pre-empted and requeued by Slurm (sacct still says PREEMPTED, squeue has it PENDING): waited for;
    # 1001: pre-empted and ended (PreemptMode=CANCEL): submitted again (1002)
    fake_slurm.script({"1000": ["PENDING", "COMPLETED"], "1001": ["PREEMPTED"], "1002": ["COMPLETED"]})
    fake_slurm.view({"1000": ["PREEMPTED"]})
    out = cluster.run_cluster([first, second], "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert out.submitted == {first.id: "1000", second.id: "1002"} and sorted(out.done) == sorted([first.id,
                                                                                                   second.id])
    assert len(fake_slurm.submitted()) == 3 and fake_slurm.calls("squeue")


def test_a_suspended_job_is_polled_until_it_resumes_and_ends(fake_slurm, roots, results, capsys):
    plan = _decoders(1)
    fake_slurm.script({"1000": ["SUSPENDED", "SUSPENDED", "RUNNING", "COMPLETED"]})
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**CFG), progress=False, wait=True, poll=0)
    assert out.done == [plan[0].id] and len(fake_slurm.calls("sacct")) == 4
    said = [ln for ln in capsys.readouterr().err.splitlines() if "SUSPENDED" in ln]
    assert said == [f"[cluster] {plan[0].id}: its Slurm job 1000 is SUSPENDED; it goes on when Slurm resumes it"]


def test_a_state_that_cannot_be_read_never_submits_a_job_twice(fake_slurm, roots, capsys):
    cfg = cluster.ClusterConfig(**CFG)
    plan = _plan()
    fake_slurm.site(sacct_lag=2)  # slurmdbd behind the controller: a new job is not in sacct yet
    first = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)  # squeue has them: still queued
    assert again.submitted == {} and again.waiting == first.submitted
    fake_slurm.site(sacct_fail=1, squeue_fail=1)  # both fail: unknown, so not submitted again either
    capsys.readouterr()
    again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert again.submitted == {} and again.waiting == first.submitted and len(fake_slurm.submitted()) == 2
    lines = _cluster_lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("[cluster] the state of 2 job(s) is unknown (sacct failed (sacct: "
                                                   "error: Problem talking to the database: Connection refused); "
                                                   "squeue failed (squeue: error: slurm_load_jobs error:"), lines
    # sacct fails but squeue answers: a job it no longer has has ended, and goes again; a queued one waits
    train, evaluation = plan
    fake_slurm.set_states({first.submitted[train.id]: "COMPLETED"})
    fake_slurm.site(sacct_fail=1)
    again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert set(again.submitted) == {train.id} and again.waiting == {evaluation.id: first.submitted[evaluation.id]}


def test_the_cluster_ending_a_job_sends_it_again_and_its_own_failure_is_reported(fake_slurm, roots, results, capsys):
    cfg = cluster.ClusterConfig(**CFG, decoders_per_job=1)
    plan = _decoders(3)
    fake_slurm.script({"1000": ["NODE_FAIL"], "1001": ["OUT_OF_MEMORY"], "1002": ["TIMEOUT"],
                       "1003": ["COMPLETED"], "1004": ["COMPLETED"]})
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert out.submitted == {plan[0].id: "1003", plan[1].id: "1001", plan[2].id: "1004"}
    assert sorted(out.done) == sorted([plan[0].id, plan[2].id]) and list(out.failed) == [plan[1].id]
    assert _times(fake_slurm) == [30, 30, 30, 30, 60]  # the timed-out one with twice its limit
    err = capsys.readouterr().err
    oom = "Slurm job 1001 ran out of memory (raise mem_gb in the settings): see "
    assert f"[cluster] FAILED {plan[1].id}: {oom}" in err
    assert f"[cluster] {plan[0].id}: Slurm job 1000 lost its node; submitting it again" in err


def test_with_wait_a_job_the_cluster_keeps_ending_is_reported_after_resubmit_tries(fake_slurm, roots, results):
    cfg = cluster.ClusterConfig(**CFG, resubmit=2)
    plan = _decoders(1)
    fake_slurm.script({str(i): ["NODE_FAIL"] for i in range(1000, 1010)})
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert len(fake_slurm.submitted()) == 3 and list(out.failed) == [plan[0].id]
    assert "Slurm job 1002 lost its node" in out.failed[plan[0].id]


# ------------------------------------------------------------------------------ 7, 11. refusals and the queue


def test_a_dependency_on_a_training_that_failed_meanwhile_is_held_and_the_rest_goes_on(fake_slurm, roots, capsys):
    cfg = cluster.ClusterConfig(**CFG)
    plan = _plan(("infiloop", "fprm"))
    first = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    trains = [j for j in plan if j.kind == "train"]
    evals = {j.after[0]: j for j in plan if j.kind == "eval"}
    t1, t2 = (first.submitted[t.id] for t in trains)
    # the first training has failed, but sacct has not caught up; both evaluations were cancelled
    fake_slurm.set_states({t1: "FAILED", t2: "RUNNING", **{first.submitted[e.id]: "CANCELLED" for e in evals.values()}})
    fake_slurm.view({t1: ["RUNNING"]})
    capsys.readouterr()
    again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert set(again.submitted) == {evals[trains[1].id].id} and again.held == [evals[trains[0].id].id]
    err = capsys.readouterr().err
    assert "sbatch refused its dependency (Batch job submission failed: Job dependency problem)" in err
    assert "1 job(s) not submitted yet" in err


def test_a_submit_limit_holds_the_rest_for_the_next_run(fake_slurm, roots, results, capsys):
    fake_slurm.site(max_submit=3)  # MaxSubmitJobs=3: pending jobs count
    cfg = cluster.ClusterConfig(**CFG, max_queued=0)
    plan = _plan(("infiloop", "fprm"))
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert len(out.submitted) == 3 and len(out.held) == 1 and not out.failed
    assert "the queue takes no more jobs now (Batch job submission failed: Job violates accounting/QOS policy (job " \
           "submit limit, user's size and/or time limits)); 1 job(s) wait for room" in capsys.readouterr().err
    fake_slurm.set_states({i: "COMPLETED" for i in out.submitted.values()})
    again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert list(again.submitted) == out.held


def test_at_most_max_queued_jobs_are_in_the_queue_and_the_rest_follow_as_they_end(fake_slurm, roots, results,
                                                                                    monkeypatch):
    cfg = cluster.ClusterConfig(**CFG, max_queued=2)
    plan = _plan(("infiloop", "fprm", "carry_last"))
    fake_slurm.script({str(i): ["RUNNING", "COMPLETED"] for i in range(1000, 1006)})
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert len(out.submitted) == 2 and len(out.held) == 4  # without --wait: the rest on the next run
    in_queue, submit_one = [], cluster.submit_one

    def counting(*args, **kwargs):
        table = fake_slurm._load("jobs.json")
        in_queue.append(sum(1 for j in table.values() if j.get("file") and j["state"] in ("PENDING", "RUNNING")))
        return submit_one(*args, **kwargs)

    monkeypatch.setattr(cluster, "submit_one", counting)
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert len(out.done) == 6 and not out.held and len(fake_slurm.submitted()) == 6
    assert len(in_queue) == 4 and max(in_queue) < 2  # each submitted when the queue had room


def test_looped_decoders_go_several_to_a_job(fake_slurm, roots):
    cfg = cluster.ClusterConfig(**CFG, decoders_per_job=2)
    plan = _decoders(5)
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert sorted(out.submitted.values()) == ["1000", "1000", "1001", "1001", "1002"]
    assert len(fake_slurm.submitted()) == 3
    text = slurm.render(cluster.submissions(plan, "smoke", "cpu", 1, cfg), "the settings")  # what plan shows
    assert text.startswith("## 3 job(s) to submit to slurm") and text.count("2 looped decoders (looplm ") == 2
    for j in plan:
        rec = json.loads(cluster_jobs.record_of(j).read_text())
        assert rec["job_id"] == out.submitted[j.id] and (len(rec["bundle"]) in (0, 2))
    # the bundle's job runs each of its decoders, one failing does not stop the next, and the job then fails
    ran = []

    def run(job):
        ran.append(job.root)
        if len(ran) == 1:
            raise ValueError("broken")

    from infiloop.experiments.compute.job import JobRun

    specs = [j.to_json("smoke") for j in plan[:2]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(JobRun, "run", run)
        with pytest.raises(RuntimeError, match="1 of 2 looped decoders of this job failed: .*ValueError: broken"):
            job.PlanJob()(specs, "cpu", 1)
    assert len(ran) == 2


# ------------------------------------------------------------------------------ 9. locks on a shared file system


def _mounted(tmp_path: Path, monkeypatch, fs: str, options: str) -> Path:
    from infiloop import io

    mounts = tmp_path / "mounts"
    mounts.write_text(f"rootfs / rootfs rw 0 0\n10.0.0.1@tcp:/scratch {tmp_path} {fs} {options} 0 0\n")
    monkeypatch.setattr(io, "MOUNTS", mounts)
    return tmp_path / "runs"


def _no_flock(monkeypatch, code: int = errno.ENOSYS) -> None:
    import fcntl

    def flock(fd, op):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", flock)


def test_a_run_cache_where_no_lock_can_be_taken_stops_the_command_in_one_line(fake_slurm, tmp_path, monkeypatch,
                                                                              capsys):
    from infiloop import paths
    from infiloop.cli import main

    monkeypatch.setattr(paths, "RUNS", _mounted(tmp_path, monkeypatch, "lustre", "rw,noflock,lazystatfs"))
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    _no_flock(monkeypatch)  # Lustre mounted noflock: flock says ENOSYS
    assert main(["reproduce", "--profile", "smoke", "--executor", "slurm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--executor slurm: the run cache " in err[0], err
    assert f"(lustre at {tmp_path}, mounted rw,noflock,lazystatfs): a file lock cannot be taken there" in err[0]
    assert "mount it with flock (Lustre: -o flock)" in err[0]
    assert fake_slurm.submitted() == [] and not (tmp_path / "data").exists()


@pytest.mark.parametrize("fs, options, said", [
    ("lustre", "rw,localflock", "localflock"), ("nfs", "rw,vers=3,local_lock=flock", "local_lock=flock"),
    ("nfs4", "rw,vers=4.2,local_lock=all", "local_lock=all")])
def test_locks_that_hold_on_one_node_only_are_said_in_one_line(tmp_path, monkeypatch, capsys, fs, options, said):
    from infiloop import io, paths

    runs = _mounted(tmp_path, monkeypatch, fs, options)
    assert io.lock_problem(runs) == ("node", f"{runs} ({fs} at {tmp_path}, mounted {options}): its locks hold only "
                                             f"on the machine that takes them ({said})")
    monkeypatch.setattr(paths, "RUNS", runs)
    slurm.check_submitter("cpu", "slurm")
    assert capsys.readouterr().err.strip().splitlines() == [
        f"[cluster] warning: the run cache {io.lock_problem(runs)[1]}: the submission records alone keep two jobs "
        "of one run apart"]
    _mounted(tmp_path, monkeypatch, fs, "rw,flock" if fs == "lustre" else "rw,vers=4.2")
    assert io.lock_problem(runs) is None


def test_nfs_without_its_lock_daemon_cannot_lock(tmp_path, monkeypatch):
    from infiloop import io

    runs = _mounted(tmp_path, monkeypatch, "nfs", "rw,vers=3")
    _no_flock(monkeypatch, errno.ENOLCK)
    kind, why = io.lock_problem(runs)
    assert kind == "none" and why.endswith(f"a file lock cannot be taken there ({os.strerror(errno.ENOLCK)})")


def test_a_multi_gpu_training_holds_its_runs_lock_once_and_stops_when_another_holds_it(tmp_path, monkeypatch):
    """The first process of a DDP training takes the run's lock once (in ``get_run``), trains holding it, and tells
    the others; held by another process, every process stops in one error at once instead of waiting in a
    collective. Before, the Slurm job took the lock and ``get_run`` took it again in the same thread: filelock
    refused ("Deadlock ... already held by a different FileLock instance") and every multi-GPU job failed."""
    import fcntl

    from infiloop.experiments.store import runs

    held = []

    def train(*args, **kwargs):  # is the run's lock held while it trains?
        with open(tmp_path / "run" / ".lock", "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(False)
            except BlockingIOError:
                held.append(True)
        raise RuntimeError("trained")

    told = []
    monkeypatch.setattr(runs, "rank_and_world", lambda: (0, 2))  # the first of two processes
    monkeypatch.setattr(runs.torch.distributed, "broadcast_object_list", lambda obj, src: told.append(list(obj)))
    monkeypatch.setattr(runs, "train", train)
    with pytest.raises(RuntimeError, match="trained"):
        runs.get_run("sudoku", "infiloop", "smoke", run_dir=tmp_path / "run")
    assert held == [True] and told[0] == [True]  # it took the lock, said so, and trained holding it
    with open(tmp_path / "run" / ".lock", "a") as other:  # another process training it
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RuntimeError, match="another process is training this run"):
            runs.get_run("sudoku", "infiloop", "smoke", run_dir=tmp_path / "run")
    assert held == [True] and told[-1] == [False]  # told the others, trained nothing


# ------------------------------------------------------------------------------ 10. the GPU of each task


@pytest.mark.parametrize("rank, visible, tasks, gpu", [
    (3, 4, 4, 3),  # each task sees the job's four GPUs (torchrun, or Slurm without binding)
    (3, 1, 4, 0),  # the site binds one GPU per task: it sees only its own, as cuda:0
    (0, 1, 1, 0), (3, 2, 4, 1)])
def test_each_task_takes_its_gpu_among_those_it_sees(rank, visible, tasks, gpu):
    from infiloop.machine import local_gpu

    assert local_gpu(rank, visible, tasks) == gpu


def test_joining_a_multi_gpu_training_sets_the_gpu_it_sees(monkeypatch):
    import torch
    import torch.distributed as dist

    from infiloop.machine import init_distributed, local_gpu

    chosen = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(dist, "init_process_group", lambda backend: chosen.append(backend))
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert init_distributed("cuda") == "cuda:0" and chosen == [0, "nccl"]  # not cuda:3: invalid device ordinal
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert init_distributed("cuda") == "cuda:3"
    with pytest.raises(RuntimeError, match="task 3: no CUDA device is visible"):
        local_gpu(3, 0, 4)


# ------------------------------------------------------------------------------ the whole path, jobs run for real


def _run_for_real(fake: FakeSlurm, tmp_path: Path, monkeypatch) -> None:
    """The fake runs each job it accepts (its script, srun, submitit, the plan's job) in the background, after its
    dependencies, one at a time; the run cache, results and figures go to ``tmp_path``."""
    from infiloop import paths

    fake.site(run=True)
    for name in ("RUNS", "RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())
        monkeypatch.setenv(f"INFILOOP_{name}", str(tmp_path / name.lower()))
    monkeypatch.setattr(cluster, "POLL_S", 0.5)


@pytest.mark.long  # the whole smoke profile through the fake Slurm: minutes
@pytest.mark.slow
def test_the_smoke_profile_through_the_fake_slurm_submits_waits_and_reports(fake_slurm, tmp_path, monkeypatch):
    """``./reproduce.sh --profile smoke --only 01 --executor slurm --wait``: every job submitted, run by the fake
    (through srun and submitit, as on a node), waited for; then the notebook and the report."""
    from infiloop.cli import main

    _run_for_real(fake_slurm, tmp_path, monkeypatch)
    settings = tmp_path / "slurm.yaml"
    settings.write_text("cpus_per_task: 1\ntime_min: 30\n")
    assert main(["reproduce", "--profile", "smoke", "--only", "01", "--executor", "slurm", "--wait",
                 "--slurm-config", str(settings)]) == 0
    stages = {s["name"]: s for s in json.loads((tmp_path / "results" / "smoke" / "stages.json").read_text())["stages"]}
    assert stages["compute"]["status"] == "ok" and stages["01_main_table"]["status"] == "ok", stages
    assert len(fake_slurm.submitted()) == 12 and all(fake_slurm.state(s["id"]) == "COMPLETED"
                                                    for s in fake_slurm.submitted())
    assert (tmp_path / "results" / "smoke" / "report.html").is_file()


def test_the_rendezvous_port_lies_below_the_ephemeral_ports_and_is_the_same_in_every_task(tmp_path):
    """submitit's port (20000-60000) lies mostly among the ports the system hands to client connections, where the
    cluster's own polling leaves some in TIME_WAIT: the first task's store failed to listen (EADDRINUSE)."""
    from infiloop.machine import rendezvous_port

    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    ports = {rendezvous_port(str(j), ranges) for j in range(200)}
    assert all(10000 <= p < 32768 for p in ports) and len(ports) > 150  # spread over the range by job id
    assert rendezvous_port("4242", ranges) == rendezvous_port("4242", ranges)
    ranges.write_text("15000 60999\n")
    assert all(10000 <= rendezvous_port(str(j), ranges) < 15000 for j in range(50))
