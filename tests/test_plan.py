"""`python -m infiloop plan`: every run and evaluation of a profile's notebooks with an explicit estimate,
tested at the smoke profile with an injected timer (fast, deterministic); the calibration cache; one real
calibration of a smoke shape; the arithmetic behind the `gpu` profile's one GPU-hour per model."""

import argparse
import io
import math
import re

import pytest

from infiloop import paths
from infiloop.experiments import archives as runs
from infiloop.experiments import cost as plan
from infiloop.experiments import profiles, recipes
from infiloop.experiments.cost import Timing
from infiloop.model import ModelConfig

STEP_S, START_S, UPDATE_S = 0.5, 2.0, 0.25
JOB_S = 3.0  # a job's start: a new process, its imports, data and model
LM_STEP_S, LM_BLOCK_S, LM_START_S = 0.1, 1e-5, 1.5  # a looped decoder's step, token-block and job start


class FakeTimer:
    def __init__(self):
        self.calls = []

    def train_step(self, run, batch, threads, device):
        self.calls.append(("train", plan._key(plan._shape(run)), batch, threads))
        return Timing(STEP_S, START_S, batch)

    def eval_update(self, run, batch, device):
        self.calls.append(("eval", plan._key(plan._shape(run)), batch))
        return Timing(UPDATE_S, 0.0, batch)

    def job_start(self, run, device):
        self.calls.append(("job start",))
        return Timing(JOB_S, 0.0, 0)

    def looplm_step(self, probe, device):
        self.calls.append(("looplm train", probe.task.task, probe.model.connection.name))
        return Timing(LM_STEP_S, 0.0, probe.train.batch_size)

    def looplm_block(self, probe, device):
        self.calls.append(("looplm eval", probe.task.task, probe.model.connection.name))
        return Timing(LM_BLOCK_S, 0.0, probe.train.eval_batch)

    def looplm_start(self, probe, device):
        self.calls.append(("looplm start",))
        return Timing(LM_START_S, 0.0, 0)


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    return tmp_path / "runs"


def _plan(timer, calibrate=False, jobs=2, params=()):
    out = io.StringIO()
    args = argparse.Namespace(profile="smoke", device="cpu", calibrate=calibrate, jobs=jobs, p=list(params))
    assert plan.main(args, timer=timer, stream=out) == 0
    return out.getvalue()


def test_plan_lists_every_run_and_evaluation_with_its_formula(root):
    timer = FakeTimer()
    text = _plan(timer)
    p = plan.make_plan("smoke")
    specs, evals = p.runs, p.evals
    assert f"{len(specs)} training runs, {len(evals)} evaluations" in text
    steps = profiles.PROFILES["smoke"]["train"]["steps"]
    run_lines = [ln for ln in text.splitlines() if re.match(r"sudoku\s+\w+\s+\d+ x ", ln)]
    assert len(run_lines) == len(specs)
    for ln in run_lines:
        assert f"{steps} x  {STEP_S:.4f} +   {START_S + JOB_S:.1f} s" in ln
    # per run: the job's start + start-up + steps x s/step; 2 jobs at a time on the CPU
    per_run = JOB_S + START_S + steps * STEP_S
    assert f"training: {plan._fmt_s(per_run * len(specs))} of runs -> " \
           f"{plan._fmt_s(per_run * math.ceil(len(specs) / 2))} wall" in text
    # per evaluation: the job's start + ceil(puzzles / batch) x updates x s/update, e.g. notebook 02 to smoke's
    # depth, 24 updates
    line = next(ln for ln in text.splitlines() if ln.startswith("02  sudoku/carry_last"))
    assert "64/64 = 3.0 +  1 x     24 x  0.2500 =     9.0 s" in line
    total_eval = sum(JOB_S + math.ceil(e.puzzles / e.batch) * e.updates * UPDATE_S for e in evals)
    assert f"evaluations: {plan._fmt_s(total_eval)}" in text
    # notebook 08's looped decoders: job start + steps x s/step + token-blocks x s/token-block each
    from infiloop.experiments import looplm

    assert len(p.models) == len(looplm.TASKS) * 2 * 2  # smoke: carry_last and infiloop, two seeds
    total_models = 0.0
    for m in p.models:
        blocks = looplm.work(m.probe)["eval"]
        seconds = LM_START_S + m.steps * LM_STEP_S + blocks * LM_BLOCK_S
        total_models += seconds
        line = next(ln for ln in text.splitlines() if ln.startswith(f"08  {m.id} "))
        assert f"{m.steps:5d} x {LM_STEP_S:6.4f} + {blocks:10.3g} x {LM_BLOCK_S:8.2e} =" in line
        assert line.endswith(f"-> {plan._fmt_s(seconds):>9s}")
    assert f"looped decoders: {plan._fmt_s(total_models)}" in text
    # the compute stage: training, evaluations and models on 2 slots, never below the floor (all slots busy)
    floor = (per_run * len(specs) + total_eval + total_models) / 2
    m = re.search(r"-> (.+) wall \(the floor, every slot busy: (.+)\) on ", text)
    assert m and m.group(2) == plan._fmt_s(floor)
    p.jobs = 2
    for r in p.runs:
        r.seconds = per_run
    for e in p.evals:
        e.seconds = JOB_S + math.ceil(e.puzzles / e.batch) * e.updates * UPDATE_S
    for mi in p.models:
        mi.seconds = LM_START_S + mi.steps * LM_STEP_S + looplm.work(mi.probe)["eval"] * LM_BLOCK_S
    assert m.group(1) == plan._fmt_s(plan.wall(p)) and floor <= plan.wall(p) <= 1.15 * floor + per_run
    # each distinct shape timed once: the beta/decay ablations share the InfiLoop shape
    trains = [c for c in timer.calls if c[0] == "train"]
    assert len(trains) == len(set(trains)) < len(specs) and all(c[3] >= 1 for c in trains)
    # a looped decoder's shape is timed once for all its seeds
    lm = [c for c in timer.calls if c[0].startswith("looplm ")]
    assert sorted(lm) == sorted({c for c in lm}) and len([c for c in lm if c[0] == "looplm train"]) == 4


def test_evaluations_follow_the_notebooks(root):
    evals = plan.make_plan("smoke").evals
    by_nb = {}
    for e in evals:
        by_nb.setdefault(e.notebook, []).append(e)
    assert [e.run.config["recipe"] for e in by_nb["01"]] == list(recipes.MAIN_RECIPES)
    assert "03" not in by_nb  # notebook 03 reads notebook 02's InfiLoop trajectory
    assert len(by_nb["05"]) == len(recipes.ABLATIONS)
    depth = by_nb["05"][0].run.training_depth
    assert {e.updates for e in by_nb["05"]} == {round(depth * 32 / 3)}
    # notebook 06: carry-last and InfiLoop are read from notebook 02's trajectories, the timestep-conditioned
    # models are run once per budget
    nb06 = {e.run.config["recipe"]: e for e in by_nb["06"]}
    assert set(nb06) == set(recipes.CONDITIONING_RECIPES) - {"carry_last", "infiloop"}
    assert nb06["loop_gating"].updates > nb06["history_w1"].updates == profiles.depth("smoke")
    per = {e.kind for e in evals}
    assert per == {"trajectory", "perturbation", "budgets"}


def test_plan_keys_are_the_evaluation_cache_keys(smoke_run, root):
    """Each evaluation kind's key is the file its call writes (same arguments, same limit)."""
    for kind, args in [("evaluate", {"updates": 4, "every": 1, "limit": None, "snapshots": (2, 4)}),
                       ("perturb", {"at": 2, "eps": (0.0, 0.1), "updates_after": 2, "every": 1, "limit": 8, "seed": 0}),
                       ("budgets", {"budgets": (2, 4), "limit": 8})]:
        key = smoke_run.eval_cache_path(kind, args)
        _, path = getattr(smoke_run, kind)(**args, progress=False)
        assert key == path and path.is_file(), kind


def test_calibration_is_cached_by_device_and_shape(root):
    first = FakeTimer()
    _plan(first)
    cache = root / plan.CALIBRATION
    assert cache.is_file()
    again = FakeTimer()
    text = _plan(again)
    assert again.calls == [] and "all timings from the cache" in text
    fresh = FakeTimer()
    _plan(fresh, calibrate=True)
    assert len(fresh.calls) == len(first.calls)
    keys = list(__import__("json").loads(cache.read_text())["entries"])
    assert all(k.startswith(plan.device_name("cpu")) for k in keys)


def test_trained_runs_and_cached_evaluations_cost_nothing(smoke_run, root, tmp_path):
    archive, _ = runs.export_runs([smoke_run.dir], tmp_path / "r.tar")
    runs.import_runs(archive, root)
    text = _plan(FakeTimer())
    assert re.search(r"sudoku\s+infiloop\s+\d+\s+already trained", text)


def test_real_calibration_of_a_smoke_shape(smoke_run, root):
    cal = plan.Calibration("cpu", path=root / "cal.json")
    t = cal.train_step(smoke_run, 32, 1)
    e = cal.eval_update(smoke_run, 64)
    assert 0 < t.seconds < 5 and t.measured_batch == 32 and 0 < e.seconds < 5
    assert cal.measured == 2


def test_calibration_batch_is_reduced_for_a_large_step():
    assert plan._calibration_batch(1e9, 64, "cpu") == 64
    assert plan._calibration_batch(1e15, 768, "cpu") < 768


def _gpu_model(recipe):
    d = ModelConfig().to_dict()  # the defaults are 9x9 Sudoku (vocabulary 11, 81 cells)
    d.update(profiles.PROFILES["gpu"]["model"])
    for k, v in recipes.RECIPES[recipe].items():
        d[k] = {**d[k], **v} if isinstance(v, dict) else v
    return ModelConfig.from_dict(d)


@pytest.mark.parametrize("recipe", recipes.MAIN_RECIPES)
def test_gpu_profile_is_about_one_gpu_hour_per_model(recipe):
    train = profiles.PROFILES["gpu"]["train"]
    hours = plan.gpu_hours_estimate(_gpu_model(recipe), train["steps"], train["batch_size"])
    assert 0.8 < hours < 1.25, hours
    assert profiles.PROFILES["gpu"]["eval"]["updates"] == 960


def test_flops_per_token_counts_the_paper_block():
    cfg = _gpu_model("infiloop")
    f = plan.flops_per_token(cfg)
    S, d = cfg.seq_len + cfg.prefix, cfg.d_model
    from infiloop.model import LoopedReasoner

    block = sum(p.numel() for p in LoopedReasoner(cfg).layers.parameters() if p.ndim >= 2)
    assert f == pytest.approx(2 * block + cfg.n_layers * 4 * S * d)


def test_gpu_data_profile_falls_back_to_the_generator_offline(tmp_path, monkeypatch):
    from infiloop.experiments.profiles import DATA_PROFILES, data_profile
    from infiloop.tasks import build, info

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = DATA_PROFILES["gpu"]["sudoku"]
    assert cfg["source"] == "hub" and cfg["side"] == 9 and cfg["blanks"] == [50, 60]
    ov = {"n_train": 3, "augment": 1, "n_test": 4}
    build("sudoku", data_profile("gpu"), root=tmp_path, overrides=ov, verbose=False)
    m = info("sudoku", data_profile("gpu"), root=tmp_path, overrides=ov)
    assert m["source"].startswith("generated offline (9x9, blanks 50-60)") and "HF_HUB_OFFLINE is set" in m["source"]
    assert m["summary"]["test_rows"] == 4 and 50 <= m["summary"]["test_blanks"][0]
    with pytest.raises(ValueError, match="data profile 'gpu' has no maze data"):
        build("maze", data_profile("gpu"), root=tmp_path)


def test_bad_arguments_are_one_line(capsys):
    from infiloop.cli import main

    assert main(["plan", "--profile", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: unknown profile 'nope' (--profile); valid choices: smoke, quick, tiny, search, gpu, paper"]


def test_every_notebook_is_planned():
    """A new notebook must be declared in infiloop/experiments/jobs.py (or its cost is silently missing)."""
    from infiloop.experiments import jobs as manifest

    assert manifest.undeclared_notebooks() == []


def test_plan_takes_the_notebooks_parameters_such_as_seeds(root):
    text = _plan(FakeTimer(), params=[("seeds", "0,1,2")])
    assert "training seed(s) 0, 1, 2" in text
    one = _plan(FakeTimer())
    assert "training seed(s) 0;" in one or one.splitlines()[0].endswith("training seed(s) 0")
    runs = lambda t: int(t.split(" training runs")[0].rsplit(" ", 1)[1])  # noqa: E731
    assert runs(text) == runs(one) + 2 * 3  # notebooks 01 and 02 take seeds: their three models twice more


def test_the_slow_down_beside_other_jobs_scales_every_cpu_timing(root):
    """The measured contention of two jobs at once multiplies s/step and s/update (and is said); one job alone
    is not slowed."""
    class Crowded(FakeTimer):
        def contention(self, run, device, jobs):
            self.calls.append(("contention", jobs))
            return Timing(1.5, 0.0, 0)

    text = _plan(Crowded(), jobs=2)
    assert "s/step and s/update are 1.50x the timings alone, as measured for 2 jobs at once" in text
    steps = profiles.PROFILES["smoke"]["train"]["steps"]
    assert f"{steps} x  {1.5 * STEP_S:.4f} +   {START_S + JOB_S:.1f} s" in text
    p = plan.estimate(plan.make_plan("smoke", jobs=1), plan.Calibration("cpu", Crowded(), path=root / "c.json"))
    assert p.contention == 1.0 and all(r.per_step == STEP_S for r in p.runs)
