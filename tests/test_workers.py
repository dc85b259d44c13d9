"""Warm workers (infiloop/experiments/compute/worker.py): the same records as a new process per job, a job that raises
or kills its worker fails alone, and ``--fresh-process`` keeps a new process per job."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from infiloop import paths
from infiloop.experiments import pipeline
from infiloop.experiments.compute import local, scheduler, worker
from infiloop.experiments.compute.job import JobRun
from infiloop.experiments.compute.slots import cpu_slots
from infiloop.experiments.notebooks import needs
from infiloop.experiments.notebooks.manifest import Job
from infiloop.experiments.settings import profiles

# What differs between two trainings of one run by its nature, not by its computation: the wall times, wherever they
# are (metrics.jsonl's records, DONE.json and its "final" record, the checkpoints and their window of records).
TIMED = {"elapsed_s", "train_seconds", "compile_seconds"}


@contextlib.contextmanager
def run_cache(root: Path):
    """``root`` as the run cache of this process and of the processes it starts."""
    old, old_env = paths.RUNS, os.environ.get("INFILOOP_RUNS")
    paths.RUNS, os.environ["INFILOOP_RUNS"] = root, str(root)
    try:
        yield root
    finally:
        paths.RUNS = old
        if old_env is None:
            os.environ.pop("INFILOOP_RUNS", None)
        else:
            os.environ["INFILOOP_RUNS"] = old_env


def smoke_jobs(overrides: dict | None = None, train: bool = True) -> list[Job]:
    """A smoke training (in the current run cache) and two of its evaluations: a trajectory and a perturbation."""
    need = needs.Needs("workers", "smoke", {"seed": 0})
    run = need.add_run("m", "sudoku", "infiloop", overrides)
    evals = [need.add_eval("traj", run, "evaluate", updates=6, every=2, limit=16),
             need.add_eval("pert", run, "perturb", at=2, eps=(0.0, 1e-3), updates_after=3, limit=16)]
    trained = Job(f"train {run.run.dir.name}", "train", run, done=not train and run.run.done)
    return [trained, *(Job(f"eval {run.run.dir.name} {Path(e.key).name}", "eval", run, e, after=[trained.id])
                       for e in evals)]


def _build_data() -> None:
    from infiloop import tasks

    tasks.build("sudoku", profiles.data_profile("smoke"))


def _untimed(x):
    """``x`` without the keys of :data:`TIMED`, in every dictionary it holds."""
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k not in TIMED}
    if isinstance(x, list | tuple):
        return [_untimed(v) for v in x]
    return x


def _same_file(a: Path, b: Path) -> None:
    """Two records of a run byte for byte: the weights and every array of an evaluation and of a checkpoint; the
    JSON records and the rest of the checkpoints without their wall times (:data:`TIMED`)."""
    if a.suffix == ".npz":
        with np.load(a) as x, np.load(b) as y:
            assert sorted(x.files) == sorted(y.files), a
            for k in x.files:
                assert x[k].dtype == y[k].dtype and x[k].shape == y[k].shape and x[k].tobytes() == y[k].tobytes(), \
                    f"{a}: {k}"
    elif a.suffix == ".jsonl":
        rows = [[_untimed(json.loads(ln)) for ln in p.read_text().splitlines() if ln.strip()] for p in (a, b)]
        assert rows[0] == rows[1], a
    elif a.suffix == ".json":
        assert _untimed(json.loads(a.read_text())) == _untimed(json.loads(b.read_text())), a
    elif a.suffix == ".pt":
        _same_value(*(_untimed(torch.load(p, weights_only=False)) for p in (a, b)), str(a))
    else:
        assert a.read_bytes() == b.read_bytes(), a


def _same_value(x, y, where: str) -> None:
    """Two values of a checkpoint equal, tensors byte for byte."""
    if isinstance(x, torch.Tensor):
        assert x.dtype == y.dtype and x.shape == y.shape and x.numpy().tobytes() == y.numpy().tobytes(), where
    elif isinstance(x, dict):
        assert x.keys() == y.keys(), where
        for k in x:
            _same_value(x[k], y[k], f"{where}.{k}")
    elif isinstance(x, list):
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y)):
            _same_value(u, v, f"{where}[{i}]")
    else:
        assert x == y, where


def _records(root: Path) -> dict[str, Path]:
    """Every file of the run cache but the logs, locks and Inductor's cache (none of them a result)."""
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*")
            if p.is_file() and "logs" not in p.parts and p.name != ".lock" and ".inductor-cache" not in p.parts}


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory):
    """The same smoke jobs in warm workers and with a new process per job, each into its own run cache."""
    _build_data()
    out = {}
    for how in ("warm", "fresh"):
        with run_cache(tmp_path_factory.mktemp(how)) as root:
            jobs = smoke_jobs()
            report = scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=1, cpus=1), poll=0.05, progress=False,
                                        fresh_process=how == "fresh")
            out[how] = root, report, jobs
    return out


def test_warm_workers_record_what_new_processes_record(both_ways):
    """Run hashes (the folders), weights, evaluation arrays, checkpoints (tensors and random states), configuration
    and metrics are the same byte for byte; only the wall times differ (:data:`TIMED`: ``elapsed_s``,
    ``train_seconds``, ``compile_seconds``) and the logs (their header and timings; not compared)."""
    (warm, warm_report, jobs), (fresh, fresh_report, fresh_jobs) = both_ways["warm"], both_ways["fresh"]
    assert sorted(warm_report.done) == sorted(fresh_report.done) == sorted(j.id for j in jobs)
    a, b = _records(warm), _records(fresh)
    assert sorted(a) == sorted(b)
    assert any(k.endswith("model.safetensors") for k in a) and sum(k.endswith(".npz") for k in a) == 2
    for rel in a:
        _same_file(a[rel], b[rel])
    for j, fj in zip(jobs, fresh_jobs):  # the header of each log: the same command line, and where it ran
        assert "(in warm worker pid" in scheduler.log_path(j).read_text()
        assert "(in warm worker pid" not in scheduler.log_path(fj).read_text()


def test_the_numeric_mode_gives_one_set_of_bytes_in_every_process_path_and_others_without_it(both_ways, tmp_path):
    """The smoke training of InfiLoop, seed 0, in the reproducible numeric mode (infiloop/numeric.py): in a warm
    worker, in a new process per job, in this process and through ``python -m infiloop train`` the same weights byte
    for byte; the same command with ``INFILOOP_NUMERIC=native`` trains other weights into another run folder (the
    mode is part of the run's identity)."""
    import subprocess
    import sys

    from infiloop.experiments.report.fingerprints import weights_sha256
    from infiloop.experiments.store.runs import get_run

    def trained(root: Path) -> Path:
        (done,) = root.glob("sudoku/infiloop-smoke-*/model.safetensors")
        return done.parent

    here = get_run("sudoku", "infiloop", "smoke", root=tmp_path / "here", progress=False).dir
    cli = {}
    for mode in ("reproducible", "native"):
        done = subprocess.run([sys.executable, "-m", "infiloop", "train", "--profile", "smoke", "--recipe", "infiloop",
                               "--quiet"], env={**os.environ, "INFILOOP_NUMERIC": mode,
                                                "INFILOOP_RUNS": str(tmp_path / mode)},
                              capture_output=True, text=True, timeout=300, cwd=paths.ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        cli[mode] = trained(tmp_path / mode)
    paths_ = [trained(both_ways["warm"][0]), trained(both_ways["fresh"][0]), here, cli["reproducible"]]
    assert len({p.name for p in paths_}) == 1, [p.name for p in paths_]  # one run identity
    assert len({weights_sha256(p) for p in paths_}) == 1
    assert cli["native"].name != here.name and weights_sha256(cli["native"]) != weights_sha256(here)


class KillingPool(worker.Pool):
    """A pool whose worker is killed (SIGKILL) right after it is given the job logged at ``victim``."""

    def __init__(self, victim: Path):
        super().__init__()
        self.victim, self.pids = victim, []

    def start(self, slot, job, env, log, compiles=False, shape=None):
        job = super().start(slot, job, env, log, compiles, shape)
        self.pids.append(job.worker.pid)
        if log == self.victim:
            os.kill(job.worker.pid, signal.SIGKILL)
        return job


def _eval_jobs(smoke_run) -> list[Job]:
    """Evaluations of the session's trained smoke run (its training done)."""
    with run_cache(smoke_run.dir.parents[1]):
        jobs = smoke_jobs(train=False)
    assert jobs[0].spec.run.dir == smoke_run.dir and jobs[0].done
    spec = jobs[0].spec
    extra = needs.EvalSpec("traj2", spec, "evaluate", {"updates": 4, "every": 1, "limit": 8})
    return [*jobs, Job(f"eval {spec.run.dir.name} {Path(extra.key).name}", "eval", spec, extra, after=[jobs[0].id])]


def test_a_killed_job_fails_alone_and_its_slot_gets_a_new_worker(smoke_run):
    jobs = _eval_jobs(smoke_run)
    for j in jobs[1:]:
        Path(j.eval.key).unlink(missing_ok=True)
    victim = jobs[1]
    order = {j.id: -i for i, j in enumerate(jobs)}  # in the given order: the victim first
    with KillingPool(scheduler.log_path(victim)) as pool:
        report = scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=1, cpus=1), cost=lambda j: order[j.id],
                                    poll=0.05, progress=False, pool=pool)
    assert report.failed == [victim.id] and sorted(report.done) == sorted(j.id for j in jobs[2:])
    assert pool.started == 2 and pool.pids[0] != pool.pids[1] == pool.pids[2]
    log = scheduler.log_path(victim).read_text()
    assert "ended with signal 9 (SIGKILL) while running this job" in log
    assert all(Path(j.eval.key).is_file() for j in jobs[2:]) and not Path(victim.eval.key).is_file()


def test_a_job_that_raises_fails_alone_and_the_same_worker_runs_the_next(smoke_run):
    jobs = _eval_jobs(smoke_run)[:3]
    bad = jobs[1]  # its run folder holds a run of other settings: the job raises in the worker (UsageError)
    bad.spec, bad.id = replace(bad.spec, overrides={**bad.spec.overrides, "train.lr": 0.5}), "eval bad"
    for j in jobs[2:]:
        Path(j.eval.key).unlink(missing_ok=True)
    order = {j.id: -i for i, j in enumerate(jobs)}
    with worker.Pool() as pool:
        report = scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=1, cpus=1), cost=lambda j: order[j.id],
                                    poll=0.05, progress=False, pool=pool)
        assert pool.started == 1 and all(w.alive for w in pool.workers.values())
    assert report.failed == ["eval bad"] and report.done == [jobs[2].id]
    assert "error: " in scheduler.log_path(bad).read_text()


def test_a_worker_that_ended_while_idle_is_replaced_before_the_next_job(smoke_run, tmp_path):
    evaluation = _eval_jobs(smoke_run)[1]  # the job computes it, or reads it, and says where it is
    slot, env = cpu_slots(workers=1, cpus=1)[0], dict(os.environ)
    with worker.Pool() as pool:
        for i in range(2):
            job = pool.start(slot, JobRun.of(evaluation, "smoke", "cpu", 1), env, tmp_path / f"{i}.log")
            while job.poll() is None:
                time.sleep(0.02)
            assert job.returncode == 0 and evaluation.eval.key in (tmp_path / f"{i}.log").read_text()
            if i == 0:
                os.kill(job.worker.pid, signal.SIGKILL)
                job.worker.proc.wait()
        assert pool.started == 2


def test_fresh_process_starts_a_new_process_per_job(smoke_run, tmp_path):
    """``run_jobs(fresh_process=True)`` launches every job as a new process (``launch``), and no worker."""
    jobs = _eval_jobs(smoke_run)[:2]
    Path(jobs[1].eval.key).unlink(missing_ok=True)
    launched = []

    def launch(cmd, env, log):
        launched.append(cmd)
        return scheduler._popen(cmd, env, log)

    started = []
    pool = KillingPool(tmp_path / "nothing")
    pool.start = lambda *a, **k: started.append(a)
    report = scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=1, cpus=1), launch=launch, poll=0.05,
                                progress=False, fresh_process=True, pool=pool)
    assert report.done == [jobs[1].id] and len(launched) == 1 and not started
    assert launched[0][1:3] == ["-m", "infiloop.experiments.compute.job"]
    assert JobRun.from_json(launched[0][3]) == JobRun.of(jobs[1], "smoke", "cpu", 1)  # the job itself, as data


def test_reproduce_executor_process_reaches_the_scheduler(monkeypatch, tmp_path):
    """``reproduce --executor process`` (or ``--fresh-process``) runs the compute stage with a new process per job;
    without it, warm workers."""
    seen = []
    monkeypatch.setattr(pipeline, "_build_data", lambda plan: None)
    monkeypatch.setattr(local.Local, "compute", lambda self, *a: seen.append((self.name, self.warm)) or {})
    monkeypatch.setattr(pipeline, "_run_notebooks", lambda *a: None)
    monkeypatch.setattr("infiloop.experiments.report.build.build_report", lambda profile: tmp_path / "report.html")
    for flag in (["--fresh-process"], ["--executor", "process"], []):
        assert pipeline.main(["--profile", "smoke", "--only", "01", "--device", "cpu", *flag]) == 0
    assert seen == [("process", False), ("process", False), ("local", True)]


def test_every_job_compiles_into_the_run_caches_inductor_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    with run_cache(tmp_path):
        job = smoke_jobs()[0]
        _, env = scheduler.command(job, "smoke", cpu_slots(workers=1, cpus=1))
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / ".inductor-cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert scheduler.command(job, "smoke", cpu_slots(workers=1, cpus=1))[1]["TORCHINDUCTOR_CACHE_DIR"] == str(
        tmp_path / "mine")  # a cache the user chose stays theirs


@pytest.mark.slow  # minutes: Inductor compiles the smoke model on the CPU, once (7 min in all on a busy core)
def test_compiled_trainings_of_one_shape_reuse_the_compiled_code_and_record_the_same(tmp_path_factory, monkeypatch):
    """Two trainings of one shape with ``train.compile=on`` (seeds 0 and 1): in a warm worker the second starts with
    the first's compiled code (``CompiledShapes``); with a new process each, both load Inductor's kernels from the
    shared cache. The records are the same byte for byte either way (wall times aside)."""
    _build_data()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
    roots, reused = {}, {}
    for how in ("warm", "fresh"):
        with run_cache(tmp_path_factory.mktemp(f"compiled-{how}")) as root:
            jobs = [smoke_jobs({"train.seed": s, "train.compile": "on"})[0] for s in (0, 1)]
            with worker.Pool() as pool:
                report = scheduler.run_jobs(jobs, "smoke", cpu_slots(workers=1, cpus=1), poll=0.2, progress=False,
                                            fresh_process=how == "fresh", pool=pool)
                reused[how] = sum(w.reused for w in pool.workers.values())
            assert sorted(report.done) == sorted(j.id for j in jobs), report
            roots[how] = root
    assert reused == {"warm": 1, "fresh": 0}
    a, b = _records(roots["warm"]), _records(roots["fresh"])
    assert sorted(a) == sorted(b) and sum(k.endswith("model.safetensors") for k in a) == 2
    for rel in a:
        _same_file(a[rel], b[rel])
    assert all(json.loads(p.read_text())["compiled"] for k, p in a.items() if k.endswith("DONE.json"))


def test_a_training_on_several_gpus_stays_a_new_process_beside_warm_workers(tmp_path):
    """Warm by default: an evaluation goes to its slot's worker, a training on 2 GPUs is launched with torchrun."""
    from types import SimpleNamespace

    from test_scheduler import FakeLauncher, fake_job

    from infiloop.experiments.compute.slots import gpu_slots

    class FakePool:
        def __init__(self):
            self.started = []

        def start(self, slot, job, env, log, compiles=False, shape=None):
            self.started.append((slot.gpu, job))
            return SimpleNamespace(poll=lambda: 0, returncode=0)

    jobs = [fake_job("train a", "train", tmp=tmp_path), fake_job("eval a", after=["train a"], tmp=tmp_path)]
    launcher, pool = FakeLauncher(polls=1), FakePool()
    report = scheduler.run_jobs(jobs, "smoke", gpu_slots(["0", "1"]), gpus_per_run=2, launch=launcher, poll=0,
                                progress=False, pool=pool)
    assert sorted(report.done) == ["eval a", "train a"]
    assert len(launcher.launched) == 1 and "torch.distributed.run" in launcher.launched[0][0]
    assert len(pool.started) == 1 and pool.started[0][1].kind == "eval" and pool.started[0][1].device == "cuda"
