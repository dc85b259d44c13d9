"""The compute stage as cluster jobs (infiloop/experiments/compute/cluster.py, through submitit).

- Slurm itself is faked by small programs on PATH (``tests/test_cluster_slurm.py``: ``sbatch`` validates each
  submission file as Slurm does, records it and answers a job id, ``sacct`` and ``squeue`` answer the states the
  test sets): the submission files submitit writes are checked line by line (resources, time limits, ``afterok``
  dependencies) and the re-submission rules are checked against the states.
- submitit's debug cluster (jobs in this process) and local cluster (a process per job) run real smoke jobs:
  the same run folders and results as the local scheduler, and a training pre-empted, then killed, resumes
  from its checkpoint each time.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

submitit = pytest.importorskip("submitit")

import test_cluster_slurm as strict  # noqa: E402  (the stricter fake Slurm and its fixtures)

from infiloop.experiments.compute import cluster  # noqa: E402
from infiloop.experiments.cost import estimates  # noqa: E402
from infiloop.experiments.cost.flops import PRECISION_SHARE, job_flops  # noqa: E402
from infiloop.experiments.notebooks import manifest as jobs  # noqa: E402
from infiloop.experiments.notebooks import needs  # noqa: E402

fake_slurm, roots, _sbatch = strict.fake_slurm, strict.roots, strict.sbatch_options


def _main_table_plan():
    return strict.first_evaluations(jobs.jobs(["01_main_table"], "smoke", {}))


def test_each_job_asks_for_its_resources_and_an_evaluation_waits_for_its_training(fake_slurm, roots, monkeypatch):
    monkeypatch.setattr("infiloop.machine.cuda_problem", lambda: "no CUDA device is visible")  # a login node
    cfg = cluster.ClusterConfig(partition="gpu", account="proj", cpus_per_task=6, mem_gb=64, tflops=1e-6,
                                setup=["module load cuda"], sbatch={"exclude": "node7"})
    from infiloop.experiments.compute.scheduler import job_name

    decoder = next(j for j in jobs.jobs(["08"], "smoke", {}) if j.kind == "looplm")  # one of notebook 08's models
    plan = [*_main_table_plan(), decoder]
    seconds, how = estimates([j for j in plan if not j.done], "cuda", tflops=cfg.tflops)  # what reproduce passes
    assert how.startswith("FLOPs at 1e-06 TFLOP/s (no GPU here to measure")
    out = cluster.run_cluster(plan, "smoke", "cuda", cfg, gpus_per_run=2, progress=False, seconds=seconds)
    files = {s["id"]: _sbatch(s["file"]) for s in fake_slurm.submitted()}
    texts = {s["id"]: s["file"] for s in fake_slurm.submitted()}
    assert len(files) == len(plan) == 7 and set(out.submitted.values()) == set(files)
    for job in plan:
        sb, slurm_id = files[out.submitted[job.id]], out.submitted[job.id]
        assert (sb["partition"], sb["account"], sb["cpus-per-task"], sb["mem"], sb["exclude"]) == \
            ("gpu", "proj", "6", "64GB", "node7")
        assert sb["kill-on-invalid-dep"] == "yes" and "module load cuda" in texts[slurm_id]
        assert sb["requeue"] is True and "wckey" not in sb and sb["signal"] == "USR2@90"
        assert "srun --unbuffered" in texts[slurm_id] and "--cpus-per-task=6" in texts[slurm_id].split("srun ")[1]
        # a training: 2 GPUs and a task per GPU; an evaluation or a looped decoder: one of each
        assert (sb["gres"], sb["ntasks-per-node"]) == (("gpu:2", "2") if job.kind == "train" else ("gpu:1", "1"))
        # no GPU here to measure: FLOPs at the stated throughput, times the margin, plus the slack
        # (the looped decoder in float32: at that rate's float32 share)
        rate = 1e6 * (PRECISION_SHARE["fp32"] if job.kind == "looplm" else 1.0)
        minutes = math.ceil(job_flops(job) / rate * cfg.time_margin / 60) + cluster.TIME_SLACK_MIN
        assert int(sb["time"]) == minutes
        if job.kind == "eval":
            assert sb["dependency"] == f"afterok:{out.submitted[job.after[0]]}"
        else:
            assert "dependency" not in sb
        record = json.loads((job.log_dir / "slurm" / f"{job_name(job)}.json").read_text())
        assert record["job_id"] == slurm_id and record["plan_job"] == job.id
    assert decoder.log_dir == decoder.model.path.parent / "logs" / decoder.model.path.stem


def test_running_again_submits_only_what_is_missing_or_failed(fake_slurm, roots):
    cfg = cluster.ClusterConfig(time_min=30)
    plan = _main_table_plan()
    first = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert len(first.submitted) == 6 and all(int(_sbatch(s["file"])["time"]) == 30 for s in fake_slurm.submitted())

    fake_slurm.set_states({i: "RUNNING" for i in first.submitted.values()})
    again = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert again.submitted == {} and again.waiting == first.submitted and len(fake_slurm.submitted()) == 6

    train = next(j for j in plan if j.kind == "train")
    evaluation = next(j for j in plan if j.kind == "eval" and j.after == [train.id])
    fake_slurm.set_states({first.submitted[train.id]: "FAILED", first.submitted[evaluation.id]: "CANCELLED"})
    third = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False)
    assert set(third.submitted) == {train.id, evaluation.id} and len(third.waiting) == 4
    new = {s["id"]: _sbatch(s["file"]) for s in fake_slurm.submitted()[6:]}
    assert new[third.submitted[evaluation.id]]["dependency"] == f"afterok:{third.submitted[train.id]}"
    # an evaluation still waiting on the cluster keeps its place: nothing of it is submitted twice
    assert len(fake_slurm.submitted()) == 8


def test_waiting_names_the_log_of_a_failed_job_and_what_it_held_up(fake_slurm, roots, capsys):
    cfg = cluster.ClusterConfig(time_min=30)
    plan = [j for j in _main_table_plan() if j.spec.recipe == "infiloop"]  # one training, one evaluation
    train = next(j for j in plan if j.kind == "train")
    evaluation = next(j for j in plan if j.kind == "eval")
    # the training (the first job submitted) fails once submitted; Slurm cancels its evaluation
    # (kill-on-invalid-dep); nothing reaches the run cache
    fake_slurm.script({"1000": ["FAILED"], "1001": ["CANCELLED"]})
    out = cluster.run_cluster(plan, "smoke", "cpu", cfg, progress=False, wait=True, poll=0)
    assert out.submitted == {train.id: "1000", evaluation.id: "1001"}
    assert list(out.failed) == [train.id] and out.skipped == [evaluation.id] and out.done == []
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "FAILED" in ln]
    log = train.spec.run.dir / "logs" / "slurm" / f"{out.submitted[train.id]}_0_log.err"
    assert lines == [f"[cluster] FAILED {train.id}: Slurm job 1000 failed: see {log}"]


def test_without_submitit_the_slurm_executor_says_how_to_install_it_in_one_line(capsys, tmp_path, monkeypatch):
    from infiloop import paths
    from infiloop.cli import main

    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit -> ImportError
    assert main(["reproduce", "--profile", "smoke", "--executor", "slurm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "pip install submitit" in err, err
    assert not (tmp_path / "data").exists(), "no data may be built before the refusal"


@pytest.mark.parametrize("text, message", [
    ("partition: gpu\nnodes_per_job: 2\n", "unknown setting(s) nodes_per_job"),
    ("cpus_per_task: eight\n", "cpus_per_task='eight': expected a int"),
    ("time_margin: 0\n", "time_margin=0: expected a number > 0"),
    ("- gpu\n", "expected a mapping of settings"),
    ("partition: [gpu\n", "not YAML"),
])
def test_a_bad_settings_file_is_refused_in_one_line_naming_the_file_and_setting(tmp_path, capsys, text, message):
    from infiloop.cli import main

    path = tmp_path / "slurm.yaml"
    path.write_text(text)
    assert main(["plan", "--profile", "smoke", "--executor", "slurm", "--slurm-config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and message in err, err


def test_options_win_over_the_settings_file_and_the_limit_is_cut_to_the_partitions(tmp_path):
    path = tmp_path / "slurm.yaml"
    path.write_text("partition: cpu\naccount: a\nmax_time_min: 120\ntime_margin: 3\n")
    cfg = cluster.read_config(path, partition="gpu")
    assert (cfg.partition, cfg.account) == ("gpu", "a")
    assert cluster.time_limit(600, cfg) == 30 + cluster.TIME_SLACK_MIN
    assert cluster.time_limit(10 * 3600, cfg) == 120  # then requeued at the limit, and resumed


def _cache_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*")
            if p.is_file() and (p.name == "DONE.json" or p.suffix == ".npz")}


# slow (17 s): two smoke jobs trained twice; the whole-profile comparison below is slow too
@pytest.mark.slow
def test_the_debug_cluster_trains_and_evaluates_what_the_local_scheduler_does(tmp_path, monkeypatch):
    """The same jobs, the same run folders (their hashes) and the same results through submitit as through the
    local scheduler (one thread per job in both)."""
    from infiloop import paths
    from infiloop.experiments.compute import scheduler
    from infiloop.experiments.compute.slots import cpu_slots

    results = {}
    for name in ("local", "debug"):
        monkeypatch.setattr(paths, "RUNS", tmp_path / name)
        plan = jobs.jobs(["03_gamma_dynamics"], "smoke", {})
        if name == "local":
            report = scheduler.run_jobs(plan, "smoke", cpu_slots(1, 1), progress=False)
            assert len(report.done) == 2, report
        else:
            out = cluster.run_cluster(plan, "smoke", "cpu", cluster.ClusterConfig(time_min=10, cpus_per_task=1),
                                      cluster="debug", progress=False)
            assert len(out.done) == 2 and not out.failed, out
        results[name] = _cache_files(tmp_path / name)
    assert set(results["local"]) == set(results["debug"]) and len(results["local"]) == 2
    for key, path in results["local"].items():
        other = results["debug"][key]
        if path.suffix == ".npz":
            a, b = np.load(path), np.load(other)
            assert set(a.files) == set(b.files)
            for f in a.files:
                assert np.array_equal(a[f], b[f]), f"{key}: {f} differs"
        else:
            final = [{k: v for k, v in json.loads(p.read_text())["final"].items() if k != "elapsed_s"}
                     for p in (path, other)]
            assert final[0] == final[1] and "loss" in final[0]


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux /proc; zombies left out)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _step(run_dir: Path) -> int:
    """The step of the run's last checkpoint, read again while it is being replaced (a moment without it)."""
    import torch

    for _ in range(200):
        try:
            return int(torch.load(run_dir / "checkpoint.pt", weights_only=True, map_location="cpu")["step"])
        except Exception:  # noqa: BLE001 - being replaced
            time.sleep(0.01)
    raise AssertionError(f"{run_dir}: no readable checkpoint.pt")


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds the job's process in /proc (Linux)")
def test_a_training_preempted_then_killed_resumes_from_its_checkpoint_each_time(tmp_path, monkeypatch):
    """Pre-empted (the signal Slurm sends before a time limit), the job is requeued by submitit and resumes; killed
    outright, it fails, and running the stage again submits it once more and it resumes again."""
    from infiloop import paths
    from infiloop.experiments.store import runs

    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    over = {"train.steps": 60, "train.checkpoint_every": 5, "train.log_every": 5}
    spec = needs.RunSpec("long", "sudoku", "infiloop", over, runs.resolve("sudoku", "infiloop", "smoke", over))
    plan = [jobs.Job(f"train {spec.run.dir.name}", "train", spec, done=False)]
    sub = cluster.submissions(plan, "smoke", "cpu", 1, cluster.ClusterConfig(time_min=10))[0]
    cfg = cluster.ClusterConfig(time_min=10, cpus_per_task=1)
    events = []

    def task_of_job(not_this: int) -> int:
        while not sub.record.is_file():
            time.sleep(0.05)
        controller = int(json.loads(sub.record.read_text())["job_id"])
        while not (tasks := [t for t in _children(controller) if t != not_this]):
            time.sleep(0.05)
        return tasks[0]

    def interrupt(sig, not_this=0) -> int:
        """Signal the job's task once it has written a checkpoint of its own (stat only: loading would slow it)."""
        task = task_of_job(not_this)
        started, ck = time.time(), spec.run.dir / "checkpoint.pt"
        while not (ck.is_file() and ck.stat().st_mtime > started):
            time.sleep(0.05)
        events.append((sig, _step(spec.run.dir)))
        os.kill(task, sig)
        return task

    def preempt_then_kill():
        first = interrupt(signal.SIGUSR2)  # submitit checkpoints the call and requeues it: a new task resumes
        interrupt(signal.SIGKILL, not_this=first)  # the new task, after a checkpoint of its own

    watcher = threading.Thread(target=preempt_then_kill, daemon=True)
    watcher.start()
    first = cluster.run_cluster(plan, "smoke", "cpu", cfg, cluster="local", progress=False, poll=0.2)
    watcher.join(timeout=60)
    assert [sig for sig, _ in events] == [signal.SIGUSR2, signal.SIGKILL]
    assert list(first.failed) == [plan[0].id] and not spec.run.done, "killed outright, the job fails"
    log = Path(first.failed[plan[0].id]).read_text()
    assert f"resuming {spec.run.dir.name} from its checkpoint at step " in log, log[-2000:]

    second = cluster.run_cluster(plan, "smoke", "cpu", cfg, cluster="local", progress=False, poll=0.2)
    assert second.done == [plan[0].id] and spec.run.done
    err = (sub.folder / f"{second.submitted[plan[0].id]}_0_log.err").read_text()
    resumed_at = int(err.split("from its checkpoint at step ")[1].split()[0])
    assert resumed_at >= events[1][1] > events[0][1] > 0, (events, resumed_at)
    assert json.loads((spec.run.dir / "DONE.json").read_text())["step"] == 60


def _reproduce(tmp: Path, name: str, *extra: str):
    import subprocess

    from infiloop.paths import ROOT

    env = dict(os.environ, **{f"INFILOOP_{k}": str(tmp / name / k.lower())
                              for k in ("RUNS", "DATA", "RESULTS", "FIGURES")})
    cmd = [sys.executable, "-m", "infiloop", "reproduce", "--profile", "smoke", "--jobs", "2", *extra]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    out = {}
    for path in sorted((tmp / name / "results" / "smoke" / "summaries").glob("*.json")):
        s = json.loads(path.read_text())
        out[path.stem] = {"claims": s.get("claims"), "tables": [_without_times(t) for t in s.get("tables", [])]}
    return out, done.stderr


def _without_times(table: dict) -> dict:
    """A summary table without its columns of seconds (notebook 07 times its rendering)."""
    keep = [i for i, c in enumerate(table.get("columns", [])) if "(s)" not in c]
    return {**table, "columns": [table["columns"][i] for i in keep],
            "rows": [[row[i] for i in keep] for row in table.get("rows", [])]}


@pytest.mark.long  # the whole smoke profile through submitit: about 6 min
@pytest.mark.slow
def test_the_whole_smoke_profile_through_submitit_reports_what_the_local_scheduler_does(tmp_path):
    """``./reproduce.sh --profile smoke --executor slurm --cluster local``: every notebook and the report, with the
    same numbers as the local scheduler's (minutes on two cores)."""
    settings = tmp_path / "slurm.yaml"
    settings.write_text("cpus_per_task: 1\ntime_min: 30\n")
    local, _ = _reproduce(tmp_path, "local")
    via_submitit, err = _reproduce(tmp_path, "submitit", "--executor", "slurm", "--cluster", "local",
                                   "--slurm-config", str(settings))
    assert "[cluster]" not in err or "FAILED" not in err
    assert len(local) >= 7 and via_submitit == local
    assert (tmp_path / "submitit" / "results" / "smoke" / "report.html").is_file()
