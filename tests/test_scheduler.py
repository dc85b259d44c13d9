"""The scheduler of the compute stage: slots, order, prerequisites, devices never shared."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from infiloop.experiments.compute import scheduler
from infiloop.experiments.compute.job import JobRun
from infiloop.experiments.compute.slots import (
    SMALL_JOBS_PER_GPU,
    check_gpus_per_run,
    cpu_slots,
    gpu_slots,
    jobs_per_gpu,
    simulate,
    slots_for,
)
from infiloop.experiments.notebooks.manifest import Job


def fake_job(jid: str, kind: str = "eval", after=(), tmp: Path = Path("/tmp")) -> Job:
    """A job whose run folder is a temporary one; only what the scheduler reads is filled in."""
    run = SimpleNamespace(dir=tmp / jid.replace(" ", "_"))
    spec = SimpleNamespace(run=run, task="sudoku", recipe="infiloop", overrides={"train.seed": 0})
    ev = None if kind == "train" else SimpleNamespace(kind="evaluate", args={}, key=str(run.dir / "eval" / "x.npz"))
    return Job(jid, kind, spec, ev, after=list(after))


class FakeLauncher:
    """Stands in for subprocess.Popen (the scheduler's tests of order and devices run with ``fresh_process=True``:
    every job is launched as a new process): each process ends after ``polls`` polls with the given exit code,
    and every launch records the devices of the jobs running at that moment."""

    def __init__(self, polls: int = 3, fail: tuple[str, ...] = ()):
        self.polls, self.fail = polls, fail
        self.running: list[SimpleNamespace] = []
        self.launched: list[tuple[list[str], str]] = []
        self.overlaps: list[set] = []

    def __call__(self, cmd, env, log):
        devices = set(env.get("CUDA_VISIBLE_DEVICES", "").split(",")) - {""}
        busy = [p for p in self.running if p.left > 0]
        for p in busy:
            if p.devices & devices:
                self.overlaps.append(p.devices & devices)
        proc = SimpleNamespace(left=self.polls, devices=devices, cmd=cmd, returncode=None)
        proc.returncode = 1 if any(f in " ".join(cmd) for f in self.fail) else 0

        def poll(p=proc):
            p.left -= 1
            return None if p.left > 0 else p.returncode

        proc.poll = poll
        self.running.append(proc)
        self.launched.append((cmd, env.get("CUDA_VISIBLE_DEVICES", "")))
        return proc


def test_cpu_slots_split_the_cores():
    slots = cpu_slots(cpus=8)
    assert len(slots) == 8 and all(s.threads == 1 and s.device == "cpu" for s in slots)
    slots = cpu_slots(workers=2, cpus=8)
    assert len(slots) == 2 and all(s.threads == 4 for s in slots)


def test_gpu_slots_follow_the_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert [s.gpu for s in gpu_slots()] == ["2", "5"]
    assert [s.name for s in slots_for("cuda:7")] == ["cuda:7"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match="no CUDA device is visible"):
        gpu_slots()


def test_concurrent_jobs_never_share_a_gpu(tmp_path):
    """Four simulated devices, eight runs and sixteen evaluations: at every launch the new job's device is
    not held by a running job, and every job runs after its prerequisites."""
    jobs = []
    for i in range(8):
        jobs.append(fake_job(f"train r{i}", "train", tmp=tmp_path))
        jobs += [fake_job(f"eval r{i} {k}", after=[f"train r{i}"], tmp=tmp_path) for k in range(2)]
    launcher = FakeLauncher(polls=2)
    order = []
    real = launcher.__call__

    def launch(cmd, env, log):
        order.append(log.parent.parent.name)
        return real(cmd, env, log)

    slots = gpu_slots(["0", "1", "2", "3"])
    report = scheduler.run_jobs(jobs, "smoke", slots, launch=launch, fresh_process=True, poll=0, progress=False)
    assert sorted(report.done) == sorted(j.id for j in jobs) and not report.failed
    assert launcher.overlaps == []
    assert {d for _, d in launcher.launched} == {"0", "1", "2", "3"}
    for i in range(8):  # both evaluations of run i start after its training
        first_eval = min(order.index(f"eval_r{i}_{k}") for k in range(2))
        assert order.index(f"train_r{i}") < first_eval


def _kind(cmd: list[str]) -> str:
    """The kind of the job a launched command line runs (its last argument: the job as JSON)."""
    return JobRun.from_json(cmd[-1]).kind


def test_a_run_asking_for_several_gpus_takes_them_and_uses_torchrun(tmp_path):
    jobs = [fake_job("train a", "train", tmp=tmp_path), fake_job("train b", "train", tmp=tmp_path),
            fake_job("eval a", after=["train a"], tmp=tmp_path)]
    launcher = FakeLauncher(polls=3)
    report = scheduler.run_jobs(jobs, "smoke", gpu_slots(["0", "1", "2", "3"]), gpus_per_run=2,
                                launch=launcher, fresh_process=True, poll=0, progress=False)
    assert not report.failed and launcher.overlaps == []
    trains = [(cmd, d) for cmd, d in launcher.launched if _kind(cmd) == "train"]
    assert len(trains) == 2 and all(len(d.split(",")) == 2 for _, d in trains)
    assert all("torch.distributed.run" in cmd and "--nproc_per_node=2" in cmd for cmd, _ in trains)
    evals = [(cmd, d) for cmd, d in launcher.launched if _kind(cmd) != "train"]
    assert len(evals) == 1 and len(evals[0][1].split(",")) == 1  # an evaluation takes one device


def test_a_failed_training_skips_its_evaluations_and_not_the_others(tmp_path):
    jobs = [fake_job("train bad", "train", tmp=tmp_path), fake_job("eval bad", after=["train bad"], tmp=tmp_path),
            fake_job("train good", "train", tmp=tmp_path), fake_job("eval good", after=["train good"], tmp=tmp_path)]
    launcher = FakeLauncher(polls=1, fail=("bad.marker",))
    jobs[0].spec.overrides = {"bad.marker": 1}  # only this one's command fails
    report = scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=2, cpus=2), launch=launcher, fresh_process=True,
                                poll=0, progress=False)
    assert report.failed == ["train bad"] and report.skipped == ["eval bad"]
    assert sorted(report.done) == ["eval good", "train good"]


def test_costliest_ready_job_starts_first(tmp_path):
    jobs = [fake_job(f"eval {c}", tmp=tmp_path) for c in ("small", "big", "mid")]
    cost = {"eval small": 1, "eval big": 9, "eval mid": 5}
    order = []
    launcher = FakeLauncher(polls=1)

    def launch(cmd, env, log):
        order.append(log.parent.parent.name)
        return launcher(cmd, env, log)

    scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=1, cpus=1), cost=lambda j: cost[j.id],
                       launch=launch, fresh_process=True, poll=0, progress=False)
    assert order == ["eval_big", "eval_mid", "eval_small"]


def test_simulate_is_the_makespan_of_that_order():
    # two slots; a (4) and b (3) start at once, c (2) waits for a; d (3) starts when b ends at 3
    seconds = {"a": 4, "b": 3, "c": 2, "d": 3}
    assert simulate(seconds, {"c": ["a"]}, 2) == 6  # b 0-3, d 3-6 ; a 0-4, c 4-6
    assert simulate(seconds, {}, 1) == 12
    assert simulate(seconds, {"d": ["c"], "c": ["a"]}, 4) == 9


@pytest.mark.parametrize("slots, n, message", [
    (["0", "1"], 3, "--gpus-per-run 3: only 2 CUDA device"),
    (None, 2, "--gpus-per-run 2: several GPUs per run need --device cuda"),
    (["0"], 0, "--gpus-per-run: expected 1 or more, got 0"),
])
def test_gpus_per_run_no_slot_set_can_give_is_refused_before_any_job_starts(tmp_path, slots, n, message):
    from infiloop.errors import UsageError

    launcher = FakeLauncher()
    given = gpu_slots(slots) if slots else cpu_slots(2)
    with pytest.raises(UsageError, match=message):
        scheduler.run_jobs([fake_job("train a", "train", tmp=tmp_path)], "smoke", given, gpus_per_run=n,
                           launch=launcher, fresh_process=True, poll=0, progress=False)
    assert launcher.launched == []


def test_reproduce_refuses_gpus_per_run_on_cpu_in_one_line_before_building_data(capsys, tmp_path, monkeypatch):
    from infiloop import paths
    from infiloop.cli import main

    monkeypatch.setattr(paths, "DATA", tmp_path / "data")

    assert main(["reproduce", "--profile", "smoke", "--device", "cpu", "--gpus-per-run", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: python -m infiloop reproduce: --gpus-per-run 2: several GPUs per run need "
                          "--device cuda") and len(err.splitlines()) == 1
    assert not (tmp_path / "data").exists(), "no data may be built before the refusal"


def test_each_jobs_cost_is_computed_once_however_long_the_stage_polls(tmp_path):
    """A cost may read the job's data; the scheduler polls twice a second and must not pay it each time."""
    calls = []
    jobs = [fake_job(f"train {i}", "train", tmp=tmp_path) for i in range(3)] + \
        [fake_job(f"eval {i}", after=[f"train {i}"], tmp=tmp_path) for i in range(3)]
    report = scheduler.run_jobs(jobs, "smoke", cpu_slots(2), lambda j: calls.append(j.id) or 1.0,
                                launch=FakeLauncher(polls=5), fresh_process=True, poll=0, progress=False)
    assert len(report.done) == 6 and sorted(calls) == sorted(j.id for j in jobs)


def test_several_small_jobs_share_each_gpu_and_never_more_than_its_slots(tmp_path):
    """Two faked GPUs with three slots each: six jobs run at once, never more than three on a device, and every job
    is told only its own device."""
    slots = gpu_slots(["0", "1"], per_gpu=3)
    assert [s.name for s in slots] == ["cuda:0/0", "cuda:1/0", "cuda:0/1", "cuda:1/1", "cuda:0/2", "cuda:1/2"]
    jobs = [fake_job(f"train r{i}", "train", tmp=tmp_path) for i in range(12)]
    launcher = FakeLauncher(polls=4)
    most = []
    real = launcher.__call__

    def launch(cmd, env, log):
        proc = real(cmd, env, log)
        busy = [p for p in launcher.running if p.left > 0]
        most.append({g: sum(g in p.devices for p in busy) for g in ("0", "1")})
        return proc

    report = scheduler.run_jobs(jobs, "smoke", slots, launch=launch, fresh_process=True, poll=0, progress=False)
    assert sorted(report.done) == sorted(j.id for j in jobs)
    assert max(max(m.values()) for m in most) == 3 and {d for _, d in launcher.launched} == {"0", "1"}


def test_a_run_on_several_gpus_takes_distinct_devices_among_shared_slots(tmp_path):
    jobs = [fake_job("train a", "train", tmp=tmp_path), fake_job("eval x", tmp=tmp_path)]
    launcher = FakeLauncher(polls=2)
    scheduler.run_jobs(jobs, "smoke", gpu_slots(["0", "1"], per_gpu=2), gpus_per_run=2, launch=launcher,
                       fresh_process=True, poll=0, progress=False)
    train = next(d for cmd, d in launcher.launched if _kind(cmd) == "train")
    assert sorted(train.split(",")) == ["0", "1"]
    from infiloop.errors import UsageError

    with pytest.raises(UsageError, match="--gpus-per-run 3: only 2 CUDA device"):
        check_gpus_per_run(gpu_slots(["0", "1"], per_gpu=4), 3)


def test_jobs_per_gpu_by_default(monkeypatch):
    """One job per GPU for a profile made for the GPU; up to SMALL_JOBS_PER_GPU small ones for a profile made for
    the CPU, at most one per CPU core."""
    from infiloop.experiments.settings import profiles

    monkeypatch.setattr("infiloop.experiments.compute.slots.usable_cpus", lambda: 16)
    assert jobs_per_gpu("gpu") == jobs_per_gpu("paper") == 1
    assert jobs_per_gpu(profiles.DEFAULT) == SMALL_JOBS_PER_GPU == 4
    assert jobs_per_gpu(profiles.DEFAULT, gpus=8) == 2
    monkeypatch.setattr("infiloop.experiments.compute.slots.usable_cpus", lambda: 1)
    assert jobs_per_gpu(profiles.DEFAULT) == 1


def test_the_stage_line_sums_the_running_trainings_progress(tmp_path):
    """The compute stage's line reads the last progress line of each running training's log (training.py writes
    one every 30 s) and sums the minutes they have left; a log without one yet adds nothing."""
    from infiloop.training import PROGRESS_LINE

    def line(run, step, left):
        return PROGRESS_LINE.format(run=run, step=step, end=1000, loss=0.5, cell=0.8, exact=0.1, s_per_step=0.2,
                                    min_left=left) + "\n"

    a, b, quiet = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    a.write_text("starting\n" + line("run-a", 100, 9) + "noise\n" + line("run-a", 400, 7))
    b.write_text("x" * 20000 + "\n" + line("run-b", 50, 12))  # only the end of a long log is read
    quiet.write_text("no progress yet\n")
    assert scheduler.last_progress(a)["step"] == "400"
    assert scheduler.last_progress(tmp_path / "missing.log") is None
    text = scheduler.stage_line(3, 10, 3, [a, b, quiet])
    assert text == "jobs 3/10 (3 running); 2 training(s) report 19 min of steps left (longest 12 min)"
    assert scheduler.stage_line(0, 4, 1, [quiet]) == "jobs 0/4 (1 running)"
