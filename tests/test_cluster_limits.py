"""What a real Slurm found that the fakes did not (issue 60), checked against the fake Slurm of
``tests/test_cluster_slurm.py`` so that the suite checks it where no cluster is (``tests/test_slurm_real.py`` checks
the same on a real one):

- a job that asks for more than any node of its partition has is refused in one line naming the setting (the fake
  ``sinfo`` lists the nodes), and by default a task asks for no more CPUs than a node has;
- a job pending for a reason that never clears is cancelled and reported in one line; one that only a person can
  clear (held, nodes drained) is said once and waited for up to ``stuck_min``;
- without accounting the states come from ``squeue`` and ``scontrol``, said once;
- a time limit too short for submitit's signal gets none, and at the signal with no requeue left the job goes on
  to its limit (TIMEOUT, which ``--wait`` gives a longer limit) instead of failing.
"""

from __future__ import annotations

import json
import signal

import pytest

submitit = pytest.importorskip("submitit")

import test_cluster_slurm as strict  # noqa: E402

from infiloop.experiments.compute import cluster, cluster_jobs, cluster_states  # noqa: E402

fake_slurm, roots, results = strict.fake_slurm, strict.roots, strict.results
SMALL = [{"name": "n1", "partitions": ["cpu"], "cpus": 2, "memory": 3900},
         {"name": "g1", "partitions": ["gpu"], "cpus": 16, "memory": 64000, "gres": "gpu:a100:2(S:0),gpu:v100:2"}]


def _reason(fake, job_id: str, reason: str) -> None:
    table = fake._load("jobs.json")
    table[job_id]["reason"] = reason
    (fake.folder / "jobs.json").write_text(json.dumps(table))


# ------------------------------------------------------------------------------------------ what a node has


def test_by_default_a_task_asks_for_no_more_cpus_than_a_node_has(fake_slurm, roots):
    fake_slurm.site(nodes=SMALL)
    cfg = cluster.ClusterConfig(partition="cpu", time_min=30)
    cluster.run_cluster(strict._plan(), "smoke", "cpu", cfg, progress=False)
    assert {strict.sbatch_options(s["file"])["cpus-per-task"] for s in fake_slurm.submitted()} == {"2"}
    gpu = cluster.submissions(strict._plan(), "smoke", "cuda", 2, cluster.ClusterConfig(partition="gpu"),
                              seconds={j.id: 60.0 for j in strict._plan()})
    assert {s.parameters["cpus_per_task"] for s in gpu} == {8}  # 16 CPUs for 2 tasks: 8 each
    fake_slurm.site(nodes=[])  # sinfo lists nothing it could tell from: 8, as before
    assert cluster.submissions(strict._plan(), "smoke", "cpu", 1, cluster.ClusterConfig(time_min=30))[0].parameters[
        "cpus_per_task"] == 8


@pytest.mark.parametrize("setting, argv, said", [
    ("cpus_per_task: 4", [], "cpus_per_task=4 in {file}: a job would ask for 4 CPUs, and no node of partition cpu has "
                             "more than 2 (sinfo): set cpus_per_task to 2 or less"),
    ("mem_gb: 8", [], "mem_gb=8 in {file}: no node of partition cpu has more than 3.8 GB (sinfo): set mem_gb to 3 or "
                      "less (0: the partition's default)"),
    ("cpus_per_task: 10", ["--partition", "gpu", "--device", "cuda", "--gpus-per-run", "2"],
     "cpus_per_task=10 in {file}: a job would ask for 10 CPUs per task x 2 tasks, and no node of partition gpu has "
     "more than 16 (sinfo): set cpus_per_task to 8 or less"),
    ("", ["--partition", "gpu", "--device", "cuda", "--gpus-per-run", "5"],  # 2 A100 and 2 V100
     "--gpus-per-run 5: no node of partition gpu has more than 4 GPU(s) (sinfo's Gres): ask for 4 or fewer"),
    ("", ["--device", "cuda"], "--gpus-per-run 1: no node of partition cpu has more than 0 GPU(s) (sinfo's Gres): "
                               "choose a GPU partition (--partition), or --device cpu"),
    ("partition: nope", [], "--executor slurm: sinfo shows no partition 'nope' (partitions: cpu, gpu): set "
                            "--partition, or partition in {file}"),
])
def test_a_job_no_node_can_run_is_refused_in_one_line_naming_the_setting(fake_slurm, tmp_path, monkeypatch, capsys,
                                                                          setting, argv, said):
    import torch

    from infiloop import paths
    from infiloop.cli import main

    monkeypatch.setattr(torch.version, "cuda", "12.4")  # the nodes' build; not this machine's
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    fake_slurm.site(nodes=SMALL)
    settings = tmp_path / "slurm.yaml"
    settings.write_text(f"partition: cpu\ngpus_per_node: 8\n{setting}\n")
    assert main(["reproduce", "--profile", "smoke", "--executor", "slurm", "--slurm-config", str(settings),
                 *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and said.format(file=settings) in err[0], err
    assert fake_slurm.submitted() == [] and not (tmp_path / "data").exists()


# ------------------------------------------------------------------------------------------ why a job pends


def test_a_reason_that_never_clears_is_cancelled_and_reported_once(fake_slurm, roots, results):
    plan = strict._plan()
    train, evaluation = plan
    first = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**strict.CFG), progress=False)
    _reason(fake_slurm, first.submitted[train.id], "QOSMaxCpuPerJobLimit")
    _reason(fake_slurm, first.submitted[evaluation.id], "Dependency")
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**strict.CFG), progress=False, wait=True,
                              poll=0)
    job = first.submitted[train.id]
    assert fake_slurm.state(job) == "CANCELLED" and list(out.failed) == [train.id]
    assert out.failed[train.id] == (f"Slurm job {job} pends (QOSMaxCpuPerJobLimit), which never clears: it is over a "
                                    f"per-job limit of its QOS or account (sacctmgr show qos; sacctmgr show assoc): "
                                    "lower cpus_per_task, mem_gb or the time limit, or choose another qos in the "
                                    "settings; cancelled")
    assert out.skipped == [evaluation.id]  # Slurm cancels it with its training (kill-on-invalid-dep)


DRAINED = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"  # 22.05's


@pytest.mark.parametrize("reason", ["JobHeldUser", DRAINED, "ReqNodeNotAvail, UnavailableNodes:n1"])
def test_a_reason_a_person_clears_is_said_once_and_waited_for_up_to_stuck_min(fake_slurm, roots, results, capsys,
                                                                               reason):
    plan = strict._decoders(1)
    fake_slurm.script({"1000": ["PENDING"] * 6 + ["COMPLETED"]})
    first = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**strict.CFG), progress=False)
    _reason(fake_slurm, "1000", reason)
    capsys.readouterr()
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**strict.CFG), progress=False, wait=True,
                              poll=0)
    assert out.done == [plan[0].id] and out.waiting == first.submitted and fake_slurm.state("1000") == "COMPLETED"
    said = [ln for ln in capsys.readouterr().err.splitlines() if "pends" in ln]
    assert len(said) == 1 and said[0].startswith(f"[cluster] {plan[0].id}: its Slurm job 1000 pends ({reason}): ")
    # stuck_min: a job pending so that long is no longer waited for, and stays in the queue
    fake_slurm.set_states({"1000": "PENDING"})
    fake_slurm.script({"1000": []})
    out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(**strict.CFG, stuck_min=0.001),
                              progress=False, wait=True, poll=0.05)
    assert list(out.failed) == [plan[0].id] and fake_slurm.state("1000") == "PENDING"
    assert out.failed[plan[0].id].startswith(f"Slurm job 1000 has pended for 0.001 min ({reason}; stuck_min): no "
                                             "longer waited for; it stays in the queue")


# ------------------------------------------------------------------------------------------ without accounting


def test_without_accounting_how_a_job_ended_comes_from_scontrol_said_once(fake_slurm, roots, results, capsys):
    fake_slurm.site(sacct_fail=1000)
    plan = strict._decoders(2)
    fake_slurm.script({"1000": ["RUNNING", "RUNNING", "COMPLETED"], "1001": ["RUNNING", "FAILED"]})
    cfg = cluster.ClusterConfig(**strict.CFG, decoders_per_job=1)
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert out.done == [plan[0].id] and out.failed[plan[1].id].startswith("Slurm job 1001 failed: see ")
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "no accounting" in ln]
    assert len(notes) == 1 and "the jobs' states are read from squeue and scontrol" in notes[0]


# ------------------------------------------------------------------------------------------ the time limit's signal


@pytest.mark.parametrize("minutes, seconds", [(1, 0), (2, 60), (3, 90), (30, 90)])
def test_the_signal_before_a_short_limit_never_comes_in_the_jobs_first_30_seconds(fake_slurm, roots, minutes,
                                                                                   seconds):
    assert cluster_jobs.signal_s(minutes) == seconds
    cluster.run_cluster(strict._decoders(1), "smoke", "cpu", cluster.ClusterConfig(cpus_per_task=1,
                                                                                      time_min=minutes),
                        progress=False)
    assert strict.sbatch_options(fake_slurm.submitted()[0]["file"])["signal"] == f"USR2@{seconds}"


class _Handler:
    """Stands for submitit's SignalHandler: its bound method is the signal's handler."""

    def __init__(self, countdown: int, timed_out: bool):
        self._delayed = type("Delayed", (), {"_timeout_countdown": countdown})()
        self.timed_out, self.called = timed_out, []

    def has_timed_out(self) -> bool:
        return self.timed_out

    def checkpoint_and_try_requeue(self, signum, frame=None):
        self.called.append(signum)


@pytest.mark.parametrize("countdown, timed_out, submitits", [(0, True, False), (0, False, True), (2, True, True)])
def test_at_the_limit_with_no_requeue_left_the_job_goes_on_to_slurms_timeout(capsys, countdown, timed_out,
                                                                              submitits):
    owner = _Handler(countdown, timed_out)
    old = signal.signal(signal.SIGUSR2, owner.checkpoint_and_try_requeue)
    try:
        cluster_states.leave_time_limit_to_slurm()
        signal.raise_signal(signal.SIGUSR2)
    finally:
        signal.signal(signal.SIGUSR2, old)
    assert owner.called == ([signal.SIGUSR2] if submitits else [])  # a pre-emption, or requeues left: submitit's
    said = "the time limit is near and no requeue is left (max_requeue): the job goes on until Slurm ends it (TIMEOUT)"
    assert (said in capsys.readouterr().err) is not submitits
