"""The Slurm path against a real Slurm (issue 60): slurmctld, slurmd and slurmdbd with MariaDB on this machine, one
node and one partition (``debug``), started by ``tests/slurm/start.sh`` (as root, Debian's Slurm 22.05).

    tests/slurm/start.sh && .venv/bin/python -m pytest -m slurm tests/test_slurm_real.py; tests/slurm/stop.sh

Without that cluster (no ``sinfo``, another cluster than the one start.sh writes, its node not idle) every test here
is skipped with the reason. Every command is Slurm's own: ``sbatch`` through submitit, ``squeue``, ``sacct``,
``scontrol`` and ``scancel``; the tests act on the cluster as a user or an administrator would (cancel, requeue,
hold and release a job, drain and resume the node, stop and start the accounting daemon), and put it back as it was.
The jobs ask for one CPU each where a test does not say otherwise, and their runs, results and logs go to the test's
temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

submitit = pytest.importorskip("submitit")

import test_cluster_slurm as fake  # noqa: E402  (the plans the fake-Slurm tests use)

from infiloop.experiments.compute import cluster, cluster_jobs  # noqa: E402
from infiloop.experiments.notebooks import manifest as jobs  # noqa: E402

HERE = Path(__file__).resolve().parent
PARTITION = "debug"
CLUSTER_NAME = "infiloop"  # tests/slurm/slurm.conf.in: the tests drain its node and stop its slurmdbd, no other's


def _run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)


def _cluster_problem() -> str:
    """Why the real-cluster tests cannot run here, or empty. Quick where start.sh's cluster is not configured or
    its controller is not listening (Slurm's own commands retry for 10 s)."""
    import socket

    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    text = conf.read_text(errors="replace") if conf.is_file() else ""
    if f"ClusterName={CLUSTER_NAME}" not in text:
        return (f"no test cluster here ({conf}: {'another cluster' if text else 'none'}): start one with "
                "tests/slurm/start.sh (root, Debian)")
    host = re.search(r"^SlurmctldHost=(\S+)", text, re.MULTILINE)
    try:
        socket.create_connection((host[1] if host else "localhost", 6817), timeout=2).close()
    except OSError as e:
        return f"the test cluster's slurmctld is not running ({e}): start it with tests/slurm/start.sh"
    try:
        config = _run("scontrol", "show", "config", check=False, timeout=20)
    except FileNotFoundError:
        return "no Slurm here (scontrol not found): start the test cluster with tests/slurm/start.sh (root, Debian)"
    except subprocess.TimeoutExpired:
        return "scontrol show config gave no answer in 20 s"
    name = re.search(r"^ClusterName\s*=\s*(\S+)", config.stdout, re.MULTILINE)
    if config.returncode or not name:
        said = " ".join((config.stderr or config.stdout).split())[:200]
        return f"no Slurm controller answers ({said}): start the test cluster with tests/slurm/start.sh (root, Debian)"
    if name[1] != CLUSTER_NAME:
        return f"this Slurm is the cluster {name[1]}, not tests/slurm/start.sh's ({CLUSTER_NAME}): not touched"
    nodes = _run("sinfo", "-h", "-N", "-p", PARTITION, "-o", "%N|%T", check=False).stdout.split()
    if not nodes or any(not n.endswith("|idle") for n in nodes):
        return f"the test cluster's node is not idle (sinfo: {' '.join(nodes) or 'no node'}): tests/slurm/start.sh"
    return ""


PROBLEM = _cluster_problem()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(bool(PROBLEM), reason=PROBLEM)]


# ------------------------------------------------------------------------------------------ helpers


def _queue() -> list[str]:
    return _run("squeue", "-h", "-o", "%i").stdout.split()


def _node() -> tuple[str, str]:
    name, state = _run("sinfo", "-h", "-N", "-p", PARTITION, "-o", "%N|%T").stdout.split()[0].split("|")
    return name, state


def _sacct(job_id: str) -> str:
    """How the job stands in the accounting (its latest start), as sacct says."""
    out = _run("sacct", "-X", "-n", "-P", "-o", "State", "-j", job_id, check=False).stdout.split("\n")[0]
    return out.split()[0] if out.strip() else ""


def _until(what: str, test, timeout: float = 120, every: float = 0.2):
    """Poll ``test`` until it returns something true; fail naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = test()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (queue: {_run('squeue', check=False).stdout})")


@pytest.fixture
def real(tmp_path, monkeypatch):
    """The run cache, results and figures in ``tmp_path`` (for this process and the jobs, which inherit the
    environment through sbatch), a look at the queue twice a second, and the cluster as it was afterwards: no job
    left in the queue, the node resumed, accounting running. Lines of ``[cluster]`` are collected in ``said``."""
    from infiloop import paths

    assert not _queue(), f"jobs left in the test cluster's queue: {_queue()}"
    for name in ("RUNS", "RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())
        monkeypatch.setenv(f"INFILOOP_{name}", str(tmp_path / name.lower()))
    monkeypatch.setattr(cluster, "POLL_S", 0.5)
    said: list[str] = []
    monkeypatch.setattr(cluster, "say", lambda text: said.append(text) or cluster_jobs.say(text))
    yield said
    left = _queue()
    if left:
        _run("scancel", *left, check=False)
    node, state = _node()
    if state.startswith("drain") or state == "down":
        _run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    if _run("sacctmgr", "-n", "list", "cluster", check=False).returncode:
        _run(str(HERE / "slurm" / "start.sh"), timeout=120)
    _until("the queue empty again", lambda: not _queue(), timeout=60)


def _config(**settings) -> cluster.ClusterConfig:
    return cluster.ClusterConfig(**{"partition": PARTITION, "cpus_per_task": 1, "time_min": 10, **settings})


def _training_and_evaluation():
    """Notebook 01's smoke training of carry-last and its first evaluation."""
    return fake.first_evaluations([j for j in jobs.jobs(["01_main_table"], "smoke", {})
                                   if j.spec.recipe == "carry_last"])


class Waiting(threading.Thread):
    """``run_cluster(..., wait=True)`` in the background, its outcome in ``out`` (or its error in ``error``)."""

    def __init__(self, plan, cfg, **kwargs):
        super().__init__(daemon=True)
        self.plan, self.cfg, self.kwargs, self.out, self.error = plan, cfg, kwargs, None, None
        self.start()

    def run(self):
        try:
            self.out = cluster.run_cluster(self.plan, "smoke", "cpu", self.cfg, wait=True, poll=0.3, progress=False,
                                           **self.kwargs)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def result(self, timeout: float):
        self.join(timeout)
        assert not self.is_alive(), f"--wait still waiting after {timeout:.0f} s (queue: {_queue()})"
        if self.error is not None:
            raise self.error
        return self.out


def _job_of(job: jobs.Job, after: str = "", timeout: float = 60) -> str:
    """The Slurm id of the latest submission of ``job`` (a new one, when ``after`` is the one before)."""
    def read() -> str:
        path = cluster_jobs.record_of(job)
        rec = json.loads(path.read_text()) if path.is_file() else {}
        return str(rec.get("job_id", "")) if str(rec.get("job_id", "")) != after else ""

    return _until(f"{job.id} submitted", read, timeout=timeout)


def _lines(said: list[str], text: str) -> list[str]:
    return [ln for ln in said if text in ln]


def _summaries(results: Path) -> dict:
    """Each notebook's claims and tables (without columns of seconds)."""
    out = {}
    for path in sorted((results / "smoke" / "summaries").glob("*.json")):
        s = json.loads(path.read_text())
        tables = []
        for t in s.get("tables", []):
            keep = [i for i, c in enumerate(t.get("columns", [])) if "(s)" not in c]
            tables.append({**t, "columns": [t["columns"][i] for i in keep],
                           "rows": [[row[i] for i in keep] for row in t.get("rows", [])]})
        out[path.stem] = {"claims": s.get("claims"), "tables": tables}
    return out


# ------------------------------------------------------------------------------------------ the whole path


def test_notebook_01_through_slurm_gives_the_local_schedulers_claims_and_tables(real, tmp_path, monkeypatch):
    """``./reproduce.sh --profile smoke --only 01 --executor slurm --partition debug --wait``: every job submitted,
    run by Slurm and COMPLETED in sacct; the notebook's claims and tables those of the local scheduler."""
    from infiloop import paths
    from infiloop.cli import main

    settings = tmp_path / "slurm.yaml"
    settings.write_text("cpus_per_task: 1\ntime_min: 30\n")  # one thread a job, as the local scheduler's 2 slots
    assert main(["reproduce", "--profile", "smoke", "--only", "01", "--executor", "slurm", "--partition", PARTITION,
                 "--wait", "--slurm-config", str(settings)]) == 0
    stages = {s["name"]: s for s in json.loads((tmp_path / "results" / "smoke" / "stages.json").read_text())["stages"]}
    compute = stages["compute"]
    assert compute["status"] == "ok" and compute["submitted"] == compute["done"] == 12, compute
    assert {_sacct(i) for i in compute["cluster_jobs"].values()} == {"COMPLETED"}
    assert _lines(real, "FAILED") == []
    for name in ("RUNS", "RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / "local" / name.lower())
        monkeypatch.setenv(f"INFILOOP_{name}", str(tmp_path / "local" / name.lower()))
    assert main(["reproduce", "--profile", "smoke", "--only", "01", "--jobs", "2"]) == 0
    local, slurm = _summaries(tmp_path / "local" / "results"), _summaries(tmp_path / "results")
    assert list(local) == ["01_main_table"] and local[
        "01_main_table"]["tables"], "the local scheduler's notebook summarised nothing"
    assert slurm == local


# ------------------------------------------------------------------------------------------ what a node can do


def test_by_default_a_cpu_job_asks_for_the_cpus_a_node_has_and_runs(real):
    """No ``cpus_per_task`` in the settings: a CPU job asks for a node's CPUs (here all of them), not 8, and
    runs (it used to pend for ever: Reason=PartitionConfig)."""
    node_cpus = int(_run("sinfo", "-h", "-p", PARTITION, "-o", "%c").stdout.split()[0].rstrip("+"))
    train = _training_and_evaluation()[0]
    out = cluster.run_cluster([train], "smoke", "cpu", cluster.ClusterConfig(partition=PARTITION, time_min=10),
                              progress=False)
    job_id = out.submitted[train.id]
    shown = _run("scontrol", "show", "job", "-o", job_id).stdout
    assert f"CPUs/Task={min(8, node_cpus)} " in shown, shown

    def ran():
        squeue = _run("squeue", "-h", "-j", job_id, "-o", "%T|%r", check=False).stdout.strip()
        assert not squeue.startswith("PENDING|PartitionConfig"), f"Slurm job {job_id} pends for ever: {squeue}"
        return _sacct(job_id) == "COMPLETED"

    _until(f"Slurm job {job_id} COMPLETED", ran, timeout=120)
    assert train.finished()


@pytest.mark.parametrize("setting, said", [
    ("cpus_per_task: 8", "cpus_per_task=8 in {file}: a job would ask for 8 CPUs, and no node of partition debug has "
                         "more than {cpus} (sinfo): set cpus_per_task to {cpus} or less"),
    ("mem_gb: 100000", "mem_gb=100000 in {file}: no node of partition debug has more than"),
])
def test_a_job_no_node_can_run_is_refused_in_one_line_naming_the_setting(real, tmp_path, capsys, setting, said):
    from infiloop.cli import main

    node_cpus = _run("sinfo", "-h", "-p", PARTITION, "-o", "%c").stdout.split()[0].rstrip("+")
    settings = tmp_path / "slurm.yaml"
    settings.write_text(setting + "\n")
    assert main(["reproduce", "--profile", "smoke", "--only", "01", "--executor", "slurm", "--partition", PARTITION,
                 "--slurm-config", str(settings)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and said.format(file=settings, cpus=node_cpus) in err[0], err
    assert not _queue() and not list(tmp_path.rglob("*.json")), "nothing may be submitted"


@pytest.mark.parametrize("case", ["PartitionConfig", "QOSMaxCpuPerJobLimit"])
def test_a_job_pending_for_a_reason_that_never_clears_is_reported_once_and_not_waited_for(real, monkeypatch, case):
    """Slurm takes the job and leaves it pending: more CPUs than the node has (as where ``sinfo`` cannot tell,
    so nothing is refused before), or over the per-job limit of its QOS (start.sh's ``cpu1``: one CPU a job).
    ``--wait`` reports it in one line with Slurm's reason, cancels it, and returns; its evaluation is not run."""
    from infiloop.experiments.compute import cluster_nodes

    plan = _training_and_evaluation()[:2]
    if case == "PartitionConfig":
        monkeypatch.setattr(cluster_nodes, "read_nodes", lambda partition: (None, []))
        cfg = _config(cpus_per_task=64)
    else:
        cfg = _config(cpus_per_task=2, qos="cpu1")
    out = Waiting(plan, cfg).result(timeout=60)
    train, evaluation = plan
    assert list(out.failed) == [train.id] and out.skipped == [evaluation.id] and not out.done
    job_id = out.submitted[train.id]
    assert out.failed[train.id].startswith(f"Slurm job {job_id} pends ({case}), which never clears: ")
    assert out.failed[train.id].endswith("; cancelled")
    assert len(_lines(real, f"FAILED {train.id}: Slurm job {job_id} pends ({case})")) == 1
    _until(f"Slurm job {job_id} CANCELLED", lambda: _sacct(job_id) == "CANCELLED", timeout=30)


# ------------------------------------------------------------------------------------------ the cluster ends a job


def _long_training(steps: int, every: int) -> jobs.Job:
    from infiloop.experiments.notebooks import needs
    from infiloop.experiments.store import runs

    over = {"train.steps": steps, "train.checkpoint_every": every, "train.log_every": every}
    spec = needs.RunSpec("long", "sudoku", "infiloop", over, runs.resolve("sudoku", "infiloop", "smoke", over))
    return jobs.Job(f"train {spec.run.dir.name}", "train", spec, done=False)


def _checkpoint_step(run_dir: Path) -> int:
    import torch

    try:
        return int(torch.load(run_dir / "checkpoint.pt", weights_only=True, map_location="cpu")["step"])
    except Exception:  # noqa: BLE001 - not written yet, or being replaced
        return 0


def test_a_training_requeued_while_it_runs_resumes_to_the_weights_of_an_uninterrupted_run(real, tmp_path,
                                                                                         monkeypatch):
    """``scontrol requeue`` of the training while it runs, between two of its step checkpoints: Slurm signals it
    (SIGTERM), the training writes a checkpoint at its next step boundary and stops; queued again, held, then
    released, it resumes from that step (no step lost since the signal), and its weights equal, bit for bit, those
    of the same training run without a break (one thread).

    The requeue comes right after the first of the checkpoints every 100 steps, so the step it resumes from is not one
    of them: the checkpoint the signal asked for. A requeued job gets SIGTERM, and SIGKILL ``KillWait`` (5 s) later;
    before the training stopped at SIGTERM, submitit passed it over and the training went on for those seconds: it
    lost the steps since its last checkpoint, or reached its end and finished instead of resuming (the log then
    lacked the resume line, once in about fifty suites)."""
    from safetensors.torch import load_file

    from infiloop import paths
    from infiloop.experiments.compute.job import JobRun

    monkeypatch.setattr(paths, "RUNS", tmp_path / "uninterrupted")
    reference = _long_training(400, 100)
    JobRun.of(reference, "smoke", "cpu", 1).run()
    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    train = _long_training(400, 100)
    assert train.spec.run.dir != reference.spec.run.dir and train.spec.run.dir.name == reference.spec.run.dir.name
    waiting = Waiting([train], _config())
    job_id = _job_of(train)
    step = _until("a checkpoint of the job's own", lambda: _checkpoint_step(train.spec.run.dir), every=0.02)
    _run("scontrol", "requeue", job_id)
    _until(f"Slurm job {job_id} pending again", lambda: _run("squeue", "-h", "-j", job_id, "-o", "%T",
                                                             check=False).stdout.strip() == "PENDING")
    stopped = _checkpoint_step(train.spec.run.dir)  # written at the step boundary after the signal
    assert step == 100 and 100 < stopped < 200 and not (train.spec.run.dir / "model.safetensors").exists(), stopped
    _run("scontrol", "release", job_id)
    _run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
    out = waiting.result(timeout=120)
    assert out.done == [train.id] and out.submitted == {train.id: job_id}, out
    _until(f"Slurm job {job_id} COMPLETED", lambda: _sacct(job_id) == "COMPLETED", timeout=30)
    history = _run("sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", job_id).stdout.split()
    assert history[0] == "REQUEUED" and history[-1] == "COMPLETED", history
    log = (train.spec.run.dir / "logs" / "slurm" / f"{job_id}_0_log.err").read_text()
    assert f"resuming {train.spec.run.dir.name} from its checkpoint at step {stopped} " in log, log[-3000:]
    mine, theirs = (load_file(j.spec.run.dir / "model.safetensors") for j in (train, reference))
    assert set(mine) == set(theirs) and all(mine[k].equal(theirs[k]) for k in mine), "the weights differ"


def test_a_job_at_a_too_short_limit_ends_timeout_and_goes_again_with_a_longer_one(real):
    """``time_min: 1`` and no requeue left (``max_requeue: 0``): the training cannot start (another process holds
    its run's lock, as a training elsewhere would) and Slurm ends it at its limit: TIMEOUT in sacct; ``--wait``
    submits it again with twice the limit, and it finishes. Before, submitit's signal before the limit came in the
    job's first 30 s and ended it FAILED (or killed Python before it had a handler), and nothing grew; now a limit
    this short has no signal (``cluster_jobs.signal_s``), and where one comes with no requeue left the job goes on
    to its limit (``cluster_states.leave_time_limit_to_slurm``, tests/test_cluster_limits.py)."""
    from infiloop.io import locked

    train = _training_and_evaluation()[0]
    lock = locked(train.spec.run.dir / ".lock")
    lock.acquire()
    try:
        waiting = Waiting([train], _config(time_min=1, max_requeue=0))
        first = _job_of(train)
        second = _job_of(train, after=first, timeout=150)  # once Slurm has ended the first (60-90 s)
        _until(f"Slurm job {first} gone", lambda: not _run("squeue", "-h", "-j", first, check=False).stdout.strip())
    finally:
        lock.release()
    out = waiting.result(timeout=120)
    assert _sacct(first) == "TIMEOUT" and out.done == [train.id] and out.submitted == {train.id: second}
    _until(f"Slurm job {second} COMPLETED", lambda: _sacct(second) == "COMPLETED", timeout=30)
    assert "TimeLimit=00:02:00 " in _run("scontrol", "show", "job", "-o", second).stdout
    assert _lines(real, "ended at its time limit of 1 min; asking for 2 min (timeout_growth 2)")


def test_a_cancelled_job_is_reported_with_its_state_and_submitted_again_by_the_next_wait(real):
    from infiloop.io import locked

    train, evaluation = _training_and_evaluation()[:2]
    lock = locked(train.spec.run.dir / ".lock")  # keeps the training running until it is cancelled
    lock.acquire()
    try:
        waiting = Waiting([train, evaluation], _config())
        first = _job_of(train)
        _until(f"Slurm job {first} running", lambda: _sacct(first) == "RUNNING")
        _run("scancel", first)
        out = waiting.result(timeout=60)
    finally:
        lock.release()
    assert list(out.failed) == [train.id] and out.skipped == [evaluation.id]
    assert out.failed[train.id].startswith(f"Slurm job {first} was cancelled: see ")
    assert _sacct(first) == "CANCELLED"
    again = Waiting([train, evaluation], _config()).result(timeout=120)
    assert sorted(again.done) == sorted([train.id, evaluation.id]) and again.submitted[train.id] != first


# ------------------------------------------------------------------------------------------ a person in the loop


def test_a_held_job_is_said_once_and_goes_on_when_released(real):
    train = _training_and_evaluation()[0]
    waiting = Waiting([train], _config(sbatch={"hold": True}))
    job_id = _job_of(train)
    _until("the hold said", lambda: _lines(real, f"Slurm job {job_id} pends (JobHeldUser)"))
    time.sleep(1.5)  # a few more looks at the queue: nothing more is said
    _run("scontrol", "release", job_id)
    out = waiting.result(timeout=120)
    assert out.done == [train.id]
    assert len(_lines(real, "pends (JobHeldUser): it is held: it waits until released (scontrol release")) == 1


def test_a_drained_node_is_said_once_waited_for_up_to_stuck_min_and_resumed(real):
    train = _training_and_evaluation()[0]
    node, _ = _node()
    _run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=infiloop-test")
    out = Waiting([train], _config(stuck_min=0.05)).result(timeout=60)  # 3 s
    job_id = out.submitted[train.id]
    assert list(out.failed) == [train.id] and "has pended for 0.05 min (" in out.failed[train.id]
    assert "no longer waited for; it stays in the queue" in out.failed[train.id]
    assert _run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "PENDING"
    said = len(real)
    waiting = Waiting([train], _config())  # the next run waits for the same job
    _until("the drained node said", lambda: len(_lines(real[said:], f"Slurm job {job_id} pends (")) == 1)
    time.sleep(1.5)
    _run("scontrol", "update", f"NodeName={node}", "State=RESUME")
    again = waiting.result(timeout=120)
    assert again.done == [train.id] and again.submitted == {} and again.waiting == {train.id: job_id}
    assert len(_lines(real[said:], f"Slurm job {job_id} pends (")) == 1


def test_without_accounting_the_states_come_from_squeue_and_scontrol_said_once(real, tmp_path):
    """slurmdbd stopped: ``sacct`` fails; the jobs are submitted and waited for all the same, how each ended read
    from ``scontrol`` (a failed job is reported as failed, not as gone), said once per run."""
    _run(str(HERE / "slurm" / "stop.sh"), "slurmdbd")
    assert _run("sacct", "-X", "-n", check=False).returncode != 0
    train, evaluation = _training_and_evaluation()[:2]
    out = Waiting([train], _config(setup=["exit 3"])).result(timeout=60)  # the job's setup line fails
    job_id = out.submitted[train.id]
    assert list(out.failed) == [train.id] and out.failed[train.id].startswith(f"Slurm job {job_id} failed: see ")
    assert len(_lines(real, "no accounting (sacct failed (")) == 1
    out = Waiting([train, evaluation], _config()).result(timeout=120)
    assert sorted(out.done) == sorted([train.id, evaluation.id])
    assert len(_lines(real, "the jobs' states are read from squeue and scontrol")) == 2


def test_a_training_of_two_tasks_is_one_ddp_training_and_resumes_when_requeued(real, tmp_path):
    """A multi-GPU training as Slurm runs it, with the CPU standing in for the GPUs: ``--executor slurm`` with
    ``cpu_tasks_per_training: 2`` submits tests/test_distributed.py's training (notebook 05's no-content-score
    ablation at smoke, micro-batches of 6) as one job of two tasks (srun; gloo): it finishes COMPLETED, both tasks hold
    the same weights at every checkpoint, and they equal the one-process training of the same global batch within
    test_distributed.py's tolerance. The same job requeued right after its first checkpoint (step 10) stops both
    tasks at one step boundary after the signal, with a checkpoint there, resumes from it and ends with the
    uninterrupted job's weights, bit for bit. Both tasks take the run's lock through one process (rank 0): two locks
    in one process failed every such job."""
    import test_distributed as ddp
    from safetensors.torch import load_file

    from infiloop.experiments.compute.job import JobRun

    one, two, again = (ddp._no_content_score_job(tmp_path / name) for name in ("one", "two", "again"))
    JobRun.of(one, "smoke", "cpu", 1).run()
    out = Waiting([two], _config(cpu_tasks_per_training=2)).result(timeout=300)
    job_id = out.submitted[two.id]
    assert out.done == [two.id], out
    _until(f"Slurm job {job_id} COMPLETED", lambda: _sacct(job_id) == "COMPLETED", timeout=30)
    log = (two.spec.run.dir / "logs" / "slurm" / f"{job_id}_0_log.err").read_text()
    steps = [int(s) for s in re.findall(r"# step (\d+): the 2 processes hold the same weights", log)]
    assert steps == [10, 20, 30], log[-3000:]
    w1, w2 = (load_file(j.spec.run.dir / "model.safetensors") for j in (one, two))
    assert w1.keys() == w2.keys()
    for k in w1:
        assert (w1[k] - w2[k]).abs().max() <= ddp.ATOL, f"{k}: two tasks != one process"

    waiting = Waiting([again], _config(cpu_tasks_per_training=2))
    job_id = _job_of(again)
    first = _until("the job's first checkpoint", lambda: _checkpoint_step(again.spec.run.dir), every=0.02)
    _run("scontrol", "requeue", job_id)
    _until(f"Slurm job {job_id} pending again", lambda: _run("squeue", "-h", "-j", job_id, "-o", "%T",
                                                             check=False).stdout.strip() == "PENDING")
    stopped = _checkpoint_step(again.spec.run.dir)  # written at the step boundary after the requeue's SIGTERM
    assert first == 10 and 10 < stopped < 30 and not (again.spec.run.dir / "model.safetensors").exists(), stopped
    _run("scontrol", "release", job_id)
    _run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
    out = waiting.result(timeout=300)
    assert out.done == [again.id], out
    _until(f"Slurm job {job_id} COMPLETED", lambda: _sacct(job_id) == "COMPLETED", timeout=30)
    log = (again.spec.run.dir / "logs" / "slurm" / f"{job_id}_0_log.err").read_text()
    assert f"resuming {again.spec.run.dir.name} from its checkpoint at step {stopped} " in log, log[-3000:]
    w3 = load_file(again.spec.run.dir / "model.safetensors")
    assert all(w3[k].equal(w2[k]) for k in w2), "the resumed two-task training differs from the uninterrupted one"
