"""The default run on a CUDA box: it trains on the GPU (several small jobs per device), keeps its runs, results and
figures apart from the CPU's, and ends with the offer of the gpu profile (the pilot command first, its trainings,
evaluations, looped decoders and GPU-hours). CUDA and the run itself are faked: no profile is run here. Also
``--no-compile``, which reaches every training of a run without moving a run folder."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest

from infiloop import paths
from infiloop.experiments import pipeline, placement
from infiloop.experiments.compute import local
from infiloop.experiments.cost import calibration, command, declared
from infiloop.experiments.settings import profiles, recipes


@pytest.fixture
def cuda_box(monkeypatch, tmp_path):
    """A CUDA device that torch reports usable (nothing runs on it), named for the calibration; writable folders in
    a temporary folder."""
    import torch

    monkeypatch.setattr(torch.version, "cuda", "12.9")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(calibration, "device_name", lambda device: "NVIDIA Test GPU (cuda)")
    for name in ("RUNS", "DATA", "RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())
        monkeypatch.delenv(f"INFILOOP_{name}", raising=False)
    return tmp_path


def _fake_stages(monkeypatch, seen: dict) -> None:
    """The run's stages replaced by recorders: what the compute stage was given, and where the folders were."""

    def compute(self, plan, args, settings, cost):
        seen.update(device=args.device, runs=paths.RUNS, results=paths.RESULTS, env=os.environ.get("INFILOOP_RUNS"),
                    slots=self.slots(args), plan=plan)
        return {}

    monkeypatch.setattr(pipeline.manifest, "jobs", lambda selected, profile, params: [])
    monkeypatch.setattr(pipeline, "_build_data", lambda plan: None)
    monkeypatch.setattr(local.Local, "compute", compute)
    monkeypatch.setattr(pipeline, "_run_notebooks", lambda *a, **k: None)
    monkeypatch.setattr(pipeline, "declared_parameters", lambda name: {"device"})
    monkeypatch.setattr("infiloop.experiments.report.build.build_report", lambda profile: paths.RESULTS / "report.html")


def test_the_default_run_on_a_cuda_box_runs_there_apart_and_ends_with_the_gpu_offer(cuda_box, monkeypatch, capsys):
    """`reproduce` without arguments: device cuda, several jobs per GPU (two faked GPUs), the run's folders in
    results/cuda/ while it runs and restored after, then the offer (here of the smoke profile, to stay fast)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr("infiloop.experiments.compute.slots.usable_cpus", lambda: 16)
    monkeypatch.setattr(pipeline, "OFFERED_PROFILE", "smoke")
    seen: dict = {}
    _fake_stages(monkeypatch, seen)
    runs_before = paths.RUNS
    assert pipeline.main([]) == 0
    err = capsys.readouterr().err
    home = cuda_box / "results" / "cuda"
    assert seen["device"] == "cuda" and seen["runs"] == home / "runs" and seen["results"] == home
    assert seen["env"] == str(home / "runs") and "INFILOOP_RUNS" not in os.environ and paths.RUNS == runs_before
    assert len(seen["slots"]) == 8 and {s.gpu for s in seen["slots"]} == {"0", "1"}  # 4 small jobs per GPU
    assert f"kept apart in {home}/" in err
    offer = err[err.index("[reproduce] profile quick:"):].splitlines()
    offer = [ln for ln in offer if ln.startswith("[reproduce] ") and "report" not in ln][1:]
    assert offer[0].endswith("first its pilot (a short measured run): python -m infiloop pilot --profile smoke")
    unbuilt = declared.declared_plan("smoke", "cuda", 1)
    m = re.search(r"(\d+) trainings \(.+\), (\d+) evaluations \(.+\), (\d+) looped decoders \(.+\): about (\S+) "
                  r"GPU-hours in all", offer[1])
    assert m and tuple(map(int, m.groups()[:3])) == (len(unbuilt.runs), len(unbuilt.evals), len(unbuilt.models))
    assert "a FLOP estimate: FLOPs at 200 TFLOP/s achieved" in offer[2]
    assert offer[3].endswith("then: ./reproduce.sh --profile smoke")


def test_the_offer_uses_this_gpus_calibration_where_it_has_one(cuda_box):
    """After `plan --device cuda` measured this GPU, the offer prices the shapes it measured by those timings."""
    from infiloop.experiments.cost.calibration import Calibration
    from infiloop.experiments.cost.timer import Timing

    class Timer:
        def train_step(self, run, batch, threads, device):
            return Timing(0.5, 0.0, batch)

    p = declared.declared_plan("smoke", "cuda", 1, ["02_depth_scaling"])
    measured = Calibration("cuda", Timer())
    measured.train_step(p.runs[0].run, p.runs[0].batch, 0)
    measured.save()
    lines = command.gpu_offer("smoke", gpu="NVIDIA Test GPU (cuda)")
    assert re.search(r"\(\d+ timings measured on NVIDIA Test GPU \(cuda\) by `plan`, \d+ of them FLOPs", lines[2])


@pytest.mark.parametrize("argv", [["--only", "02"], ["--device", "cpu"], ["--profile", "smoke", "--device", "cuda"],
                                  ["--executor", "slurm"]])
def test_no_offer_after_any_other_run(argv):
    args = pipeline._parser().parse_args(argv)
    args.device = args.device or "cuda"
    assert not pipeline.offers_gpu_profile(args)
    args = pipeline._parser().parse_args([])
    args.device = "cuda"
    assert pipeline.offers_gpu_profile(args)


def test_a_profile_runs_apart_only_on_a_device_it_is_not_made_for(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "RESULTS", tmp_path / "results")
    with placement.kept_apart(profiles.DEFAULT, "cpu") as home:
        assert home is None and paths.RESULTS == tmp_path / "results"
    with placement.kept_apart("gpu", "cuda:1") as home:
        assert home is None
    runs = paths.RUNS
    with placement.kept_apart("gpu", "cpu") as home:
        assert home == tmp_path / "results" / "cpu" and paths.FIGURES == home / "figures"
        assert os.environ["INFILOOP_RESULTS"] == str(home)
    assert paths.RUNS == runs and paths.RESULTS == tmp_path / "results"


def test_a_gpu_listed_without_usable_cuda_is_said_and_the_default_run_stays_on_the_cpu(monkeypatch, capsys):
    monkeypatch.setattr(placement, "cuda_problem", lambda: "this PyTorch (x) is a CPU build")
    monkeypatch.setattr(placement, "_gpu_listed", lambda: True)
    assert placement.default_device(profiles.DEFAULT) == "cpu"
    assert "nvidia-smi lists a GPU, but CUDA is not usable here (this PyTorch (x) is a CPU build)" in \
        capsys.readouterr().err


# ------------------------------------------------------------------------------------------ --no-compile


def test_no_compile_reaches_every_training_and_keeps_the_run_folders(monkeypatch, tmp_path):
    """reproduce --no-compile: each training job sets train.compile=off (a typed override) and trains into the same
    folder (compile is hashed at its default, as CPU threads are left out); evaluations are untouched."""
    from infiloop.experiments.compute import scheduler
    from infiloop.experiments.compute.slots import cpu_slots
    from infiloop.experiments.notebooks.manifest import Job

    specs = {r: pipeline.manifest.needs("02", "smoke").runs[r] for r in recipes.MAIN_RECIPES}
    planned = [Job(f"train {s.run.dir.name}", "train", s) for s in specs.values()]
    planned.append(Job("eval x", "eval", specs["infiloop"], SimpleNamespace(kind="evaluate", args={}, key="x")))
    seen: dict = {}
    _fake_stages(monkeypatch, seen)
    monkeypatch.setattr(pipeline.manifest, "jobs", lambda selected, profile, params: planned)
    monkeypatch.setattr(paths, "RESULTS", tmp_path / "results")
    assert pipeline.main(["--profile", "smoke", "--device", "cpu", "--no-compile"]) == 0
    slots = cpu_slots(1, 1)
    for job in seen["plan"]:
        run, _ = scheduler.job_run(job, "smoke", slots)
        if job.kind == "train":
            assert run.overrides["train.compile"] == "off" and job.spec.run.dir == specs[job.spec.recipe].run.dir
            resolved = recipes.resolve_config("sudoku", job.spec.recipe, "smoke", job.spec.overrides)
            assert resolved["train"]["compile"] == "off"
            assert recipes.config_hash(resolved) == recipes.config_hash(specs[job.spec.recipe].run.config)
        else:
            assert "train.compile" not in job.spec.overrides


def test_train_no_compile_sets_it_for_that_training(monkeypatch, capsys):
    import infiloop.experiments.store.runs as cache
    from infiloop.cli import main

    asked = {}

    def get_run(task, recipe, profile, overrides, **kw):
        asked["overrides"] = list(overrides)
        return SimpleNamespace(done=False, dir="RUN")

    monkeypatch.setattr(cache, "get_run", get_run)
    assert main(["train", "--profile", "smoke", "--no-compile", "--set", "train.lr=3e-4"]) == 0
    assert asked["overrides"] == ["train.lr=3e-4", "train.compile=off"]
    assert capsys.readouterr().out.strip() == "RUN"

