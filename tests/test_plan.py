"""`python -m infiloop plan`: every run and evaluation of a profile's notebooks with an explicit estimate,
tested at the smoke profile with an injected timer (fast, deterministic); the calibration cache; one real
calibration of a smoke shape; the arithmetic behind the `gpu` profile's one GPU-hour per model; `--only`; and
the FLOP estimate of a CUDA plan on a machine without CUDA (in GPU-hours, a GPU's cached timings replacing it)."""

import argparse
import io
import math
import re

import pytest

from infiloop import paths
from infiloop.experiments.cost import arithmetic, calibration, command, declared, flops, measure, plan, processes
from infiloop.experiments.cost.timer import Timing
from infiloop.experiments.settings import profiles, recipes
from infiloop.experiments.store import archives as runs
from infiloop.model import ModelConfig

STEP_S, START_S, UPDATE_S = 0.5, 2.0, 0.25
JOB_S = 3.0  # a job's start: a new process, its imports, data and model
LM_STEP_S, LM_BLOCK_S, LM_START_S = 0.1, 1e-5, 1.5  # a looped decoder's step, token-block and job start


class FakeTimer:
    def __init__(self):
        self.calls = []

    def train_step(self, run, batch, threads, device):
        self.calls.append(("train", calibration._key(calibration._shape(run)), batch, threads))
        return Timing(STEP_S, START_S, batch)

    def eval_update(self, run, batch, device, test_set="test"):
        self.calls.append(("eval", calibration._key(calibration._shape(run)), batch))
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


def _plan(timer, calibrate=False, jobs=2, params=(), executor="local"):
    out = io.StringIO()
    args = argparse.Namespace(profile="smoke", device="cpu", calibrate=calibrate, jobs=jobs, p=list(params),
                              executor=executor)
    assert command.main(args, timer=timer, stream=out) == 0
    return out.getvalue()


def test_plan_lists_every_run_and_evaluation_with_its_formula(root):
    timer = FakeTimer()
    text = _plan(timer)
    p = plan.make_plan("smoke")
    specs, evals = p.runs, p.evals
    assert f"{len(specs)} training runs, {len(evals)} evaluations" in text
    steps = profiles.PROFILES["smoke"]["train"]["steps"]
    run_lines = [ln for ln in text.splitlines() if re.match(r"(sudoku|prefix_sums)\s+\w+\s+\d+ x ", ln)]
    assert len(run_lines) == len(specs)
    # every smoke training checks its checkpoints on the validation split: at steps 10 and 20 and at its end, the
    # first 64 validation puzzles in batches of its 32 sequences to its training depth (H 2 x 4 segments)
    assert {plan.validation_checks(r.run) for r in specs} == {(3, 64, 8)}
    per_check = 2 * 8 * UPDATE_S
    for ln in run_lines:
        assert f"{steps} x  {STEP_S:.4f} +  3 x  {per_check:.4f} +   {START_S + JOB_S:.1f} s" in ln
    # per run: the job's start + start-up + steps x s/step + checks x s/check; 2 jobs at a time on the CPU
    per_run = JOB_S + START_S + steps * STEP_S + 3 * per_check
    assert f"training: {command._fmt_s(per_run * len(specs))} of runs -> " \
           f"{command._fmt_s(per_run * math.ceil(len(specs) / 2))} wall" in text
    # per evaluation: the job's start + ceil(puzzles / batch) x updates x s/update, e.g. notebook 02's depth
    # evaluation to smoke's depth, 24 updates (listed under notebook 01, whose depth-fair columns read it first)
    line = next(ln for ln in text.splitlines() if ln.startswith("01  sudoku/carry_last") and " x     24 x " in ln)
    assert "64/64 = 3.0 +  1 x     24 x  0.2500 =     9.0 s" in line
    total_eval = sum(JOB_S + math.ceil(e.puzzles / e.batch) * e.updates * UPDATE_S for e in evals)
    assert f"evaluations: {command._fmt_s(total_eval)}" in text
    # notebook 08's looped decoders: job start + steps x s/step + token-blocks x s/token-block each
    from infiloop.experiments import looplm

    assert len(p.models) == len(looplm.grid("smoke").connections) * 2 == 6  # smoke: three connections, two seeds
    total_models = 0.0
    for m in p.models:
        blocks = flops.looplm_work(m.probe)["eval"]
        seconds = LM_START_S + m.steps * LM_STEP_S + blocks * LM_BLOCK_S
        total_models += seconds
        line = next(ln for ln in text.splitlines() if ln.startswith(f"08  {m.id} "))
        assert f"{m.steps:5d} x {LM_STEP_S:6.4f} + {blocks:10.3g} x {LM_BLOCK_S:8.2e} =" in line
        assert line.endswith(f"-> {command._fmt_s(seconds):>9s}")
    assert f"looped decoders: {command._fmt_s(total_models)}" in text
    # the compute stage: training, evaluations and models on 2 slots, never below the floor (all slots busy)
    floor = (per_run * len(specs) + total_eval + total_models) / 2
    m = re.search(r"-> (.+) wall \(the floor, every slot busy: (.+)\) on ", text)
    assert m and m.group(2) == command._fmt_s(floor)
    p.jobs = 2
    for r in p.runs:
        r.seconds = per_run
    for e in p.evals:
        e.seconds = JOB_S + math.ceil(e.puzzles / e.batch) * e.updates * UPDATE_S
    for mi in p.models:
        mi.seconds = LM_START_S + mi.steps * LM_STEP_S + flops.looplm_work(mi.probe)["eval"] * LM_BLOCK_S
    assert m.group(1) == command._fmt_s(plan.wall(p)) and floor <= plan.wall(p) <= 1.15 * floor + per_run
    # each distinct shape timed once: the beta/decay ablations share the InfiLoop shape
    trains = [c for c in timer.calls if c[0] == "train"]
    assert len(trains) == len(set(trains)) < len(specs) and all(c[3] >= 1 for c in trains)
    # a looped decoder's shape is timed once for all its seeds
    lm = [c for c in timer.calls if c[0].startswith("looplm ")]
    assert sorted(lm) == sorted({c for c in lm}) and len([c for c in lm if c[0] == "looplm train"]) == 3


def test_evaluations_follow_the_notebooks(root):
    evals = plan.make_plan("smoke").evals
    by_nb = {}
    for e in evals:
        by_nb.setdefault(e.notebook, []).append(e)
    # notebook 01: each main model at its training depth, then to the profile's depth on the test set (notebook 02's
    # evaluation, shared) and on the validation split (the depth-fair columns)
    assert [e.run.config["recipe"] for e in by_nb["01"]] == [r for r in recipes.MAIN_RECIPES for _ in range(3)]
    assert [e.updates for e in by_nb["01"]][:3] == [by_nb["01"][0].run.training_depth, *[profiles.depth("smoke")] * 2]
    assert "02" not in by_nb  # notebook 02 reads notebook 01's evaluations to depth
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
    cache = root / calibration.CALIBRATION
    assert cache.is_file()
    again = FakeTimer()
    text = _plan(again)
    assert again.calls == [] and "all timings from the cache" in text
    fresh = FakeTimer()
    _plan(fresh, calibrate=True)
    assert len(fresh.calls) == len(first.calls)
    keys = list(__import__("json").loads(cache.read_text())["entries"])
    assert all(k.startswith(calibration.device_name("cpu")) for k in keys)


def test_trained_runs_and_cached_evaluations_cost_nothing(smoke_run, root, tmp_path):
    archive, _ = runs.export_runs([smoke_run.dir], tmp_path / "r.tar")
    runs.import_runs(archive, root)
    text = _plan(FakeTimer())
    assert re.search(r"sudoku\s+infiloop\s+\d+\s+already trained", text)


def test_real_calibration_of_a_smoke_shape(smoke_run, root):
    cal = calibration.Calibration("cpu", path=root / "cal.json")
    t = cal.train_step(smoke_run, 32, 1)
    e = cal.eval_update(smoke_run, 64)
    assert 0 < t.seconds < 5 and t.measured_batch == 32 and 0 < e.seconds < 5
    assert cal.measured == 2


def test_calibration_batch_is_reduced_for_a_large_step():
    assert measure._calibration_batch(1e9, 64, "cpu") == 64
    assert measure._calibration_batch(1e15, 768, "cpu") < 768


def _gpu_model(recipe):
    d = ModelConfig().to_dict()  # the defaults are 9x9 Sudoku (vocabulary 11, 81 cells)
    d.update(profiles.PROFILES["gpu"]["model"])
    for k, v in recipes.RECIPES[recipe].items():
        d[k] = {**d[k], **v} if isinstance(v, dict) else v
    return ModelConfig.from_dict(d)


@pytest.mark.parametrize("recipe", recipes.MAIN_RECIPES)
def test_gpu_profile_is_about_one_gpu_hour_per_model(recipe):
    train = profiles.PROFILES["gpu"]["train"]
    hours = flops.gpu_hours_estimate(_gpu_model(recipe), train["steps"], train["batch_size"])
    assert 0.8 < hours < 1.25, hours
    assert profiles.PROFILES["gpu"]["eval"]["updates"] == 960


def test_flops_per_token_counts_the_paper_block():
    cfg = _gpu_model("infiloop")
    f = flops.flops_per_token(cfg)
    S, d = cfg.seq_len + cfg.prefix, cfg.d_model
    from infiloop.model import LoopedReasoner

    block = sum(p.numel() for p in LoopedReasoner(cfg).layers.parameters() if p.ndim >= 2)
    assert f == pytest.approx(2 * block + cfg.n_layers * 4 * S * d)


def test_bad_arguments_are_one_line(capsys):
    from infiloop.cli import main

    assert main(["plan", "--profile", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: unknown profile 'nope' (--profile); valid choices: smoke, quick, tiny, search, overthink, "
                   "gpu, paper"]


def test_every_notebook_is_planned():
    """A new notebook must be declared in experiments/notebooks/manifest.py (or its cost is silently missing)."""
    from infiloop.experiments.notebooks import declarations

    assert declarations.undeclared_notebooks() == []


def test_plan_takes_the_notebooks_parameters_such_as_seeds(root):
    text = _plan(FakeTimer(), params=[("seeds", "0,1,2")])
    assert "training seed(s) 0, 1, 2" in text
    one = _plan(FakeTimer())
    assert "training seed(s) 0;" in one or one.splitlines()[0].endswith("training seed(s) 0")
    runs = lambda t: int(t.split(" training runs")[0].rsplit(" ", 1)[1])  # noqa: E731
    # notebooks 01 and 02 take seeds: their three models twice more; notebook 09 its eight (six and two arms)
    assert runs(text) == runs(one) + 2 * 3 + 2 * 8


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
    assert f"{steps} x  {1.5 * STEP_S:.4f} +  3 x  {1.5 * 2 * 8 * UPDATE_S:.4f} +   {START_S + JOB_S:.1f} s" in text
    cal = calibration.Calibration("cpu", Crowded(), path=root / "c.json")
    p = plan.estimate(plan.make_plan("smoke", jobs=1), cal)
    assert p.contention == 1.0 and all(r.per_step == STEP_S for r in p.runs)


PROCESS_S = 2.0  # of JOB_S, a new process's own start: paid once per slot by a warm worker


class StartingTimer(FakeTimer):
    def process_start(self, device):
        self.calls.append(("process start",))
        return Timing(PROCESS_S, 0.0, 0)


def test_warm_workers_pay_the_process_start_once_per_slot_and_fresh_processes_every_job(root):
    """Where real jobs in warm workers are not measured (this timer), the plan models reproduce's warm workers as a
    process start per slot and then each job its data and model, and --executor process as every job all of its start,
    and says which it assumed, with both numbers."""
    steps, check = profiles.PROFILES["smoke"]["train"]["steps"], 2 * 8 * UPDATE_S
    warm = _plan(StartingTimer())
    assert (f"# warm workers (one process per slot, reproduce's default): each slot pays {PROCESS_S:.1f} s once"
            in warm and f"then each job {JOB_S - PROCESS_S:.1f} s before its work" in warm)
    assert f"a new process per job (--executor process) would pay {JOB_S:.1f} s each" in warm
    assert f"{steps} x  {STEP_S:.4f} +  3 x  {check:.4f} +   {START_S + JOB_S - PROCESS_S:.1f} s" in warm
    fresh = _plan(StartingTimer(), executor="process")
    assert f"# a new process per job (--executor process): each job pays {JOB_S:.1f} s before its work" in fresh
    assert f"{steps} x  {STEP_S:.4f} +  3 x  {check:.4f} +   {START_S + JOB_S:.1f} s" in fresh
    cal = calibration.Calibration("cpu", StartingTimer(), path=root / "c.json")
    p = plan.estimate(plan.make_plan("smoke", jobs=2), cal)
    assert p.start_per_slot == PROCESS_S and p.train_start == p.eval_start == JOB_S - PROCESS_S
    jobs = len(p.runs) + len(p.evals) + len(p.models)
    p.warm = False
    fresh_plan = plan.estimate(p, cal)
    assert fresh_plan.start_per_slot == 0.0 and fresh_plan.train_start == fresh_plan.eval_start == JOB_S
    warm_wall = plan.wall(plan.estimate(plan.make_plan("smoke", jobs=2), cal))
    # the warm stage saves the process start of every job but each slot's first
    assert 0 < plan.wall(fresh_plan) - warm_wall <= jobs * PROCESS_S


FIRST_S, WARM_TRAIN_S, WARM_EVAL_S = 4.0, 9.5, 0.4  # real jobs in warm workers: a first training, a later one, an eval
STOP_S = 0.7  # the workers' stop


class WarmTimer(StartingTimer):
    def warm_jobs(self, run, overrides, device, jobs, threads):
        self.calls.append(("warm jobs", jobs, threads))
        return {"first": Timing(WARM_TRAIN_S + FIRST_S), "train": Timing(WARM_TRAIN_S), "eval": Timing(WARM_EVAL_S),
                "stop": Timing(STOP_S)}


def test_real_jobs_in_warm_workers_set_each_jobs_own_cost_and_each_slots_start(root):
    """Measured with real jobs in warm workers: a slot pays its first job's extra once; a training its probe's
    seconds less the probe's steps, start-up and one check; an evaluation its probe's seconds (one update); and a
    looped decoder its task's generation and model's build and that bookkeeping."""
    timer = WarmTimer()
    cal = calibration.Calibration("cpu", timer, path=root / "c.json")
    p = plan.estimate(plan.make_plan("smoke", jobs=2), cal)
    assert ("warm jobs", 2, 1) in timer.calls
    probe_own = measure.TRAIN_WARM * STEP_S + START_S + 2 * 8 * UPDATE_S  # two steps, the start-up, one check
    assert p.worker_start == p.start_per_slot == FIRST_S
    assert p.train_start == pytest.approx(WARM_TRAIN_S - probe_own) and p.eval_start == WARM_EVAL_S
    assert p.looplm_start_per_job == WARM_EVAL_S  # this timer's looped-decoder start has no own part
    assert p.worker_stop == STOP_S and plan.wall(p) == pytest.approx(
        FIRST_S + STOP_S + plan.simulate({**{str(r.run.dir): r.seconds for r in p.runs},
                                              **{f"eval {i}": e.seconds for i, e in enumerate(p.evals)},
                                              **{m.key: m.seconds for m in p.models}},
                                             {f"eval {i}": [str(e.run.dir)] for i, e in enumerate(p.evals)}, 2))
    steps = profiles.PROFILES["smoke"]["train"]["steps"]
    for r in p.runs:
        assert r.seconds == pytest.approx(WARM_TRAIN_S - probe_own + START_S + steps * STEP_S + 3 * 2 * 8 * UPDATE_S)
    e = p.evals[0]
    assert e.seconds == pytest.approx(WARM_EVAL_S + e.batches * e.updates * UPDATE_S)
    text = _plan(WarmTimer())
    assert (f"measured with real jobs on 2 slot(s) at once: each slot pays {FIRST_S:.1f} s once (the worker's start "
            f"and its first job's extra), then each training {WARM_TRAIN_S - probe_own:.2f} s and each evaluation "
            f"{WARM_EVAL_S:.2f} s of its own") in text
    # with a new process per job the probe is not taken and every job pays its whole start
    fresh = plan.make_plan("smoke", jobs=2)
    fresh.warm = False
    timer = WarmTimer()
    fp = plan.estimate(fresh, calibration.Calibration("cpu", timer, path=root / "d.json"))
    assert not any(c[0] == "warm jobs" for c in timer.calls) and fp.train_start == JOB_S


def test_the_checks_the_plan_counts_are_those_a_training_makes(smoke_run):
    """validation_checks (from the settings alone) against the record a real smoke training wrote: one check per
    checkpoint and one at the end, on as many validation puzzles, to the same depth."""
    import json

    checks, puzzles, depth = plan.validation_checks(smoke_run)
    best = json.loads((smoke_run.dir / "best.json").read_text())
    assert len(best["checked"]) == checks == 3 and best["puzzles"] == puzzles and best["depth"] == depth


def test_real_jobs_in_real_warm_workers(smoke_run, root, tmp_path):
    """The probe behind the warm costs: real trainings and evaluations of a smoke run in two real warm workers at
    once. A worker's first job carries its start (seconds of imports); later jobs are short; nothing is left behind
    in the run cache or the temporary folder."""
    import tempfile

    before = set(tmp_path.parent.iterdir())
    tempfile.tempdir = str(tmp_path)  # the probe's temporary run cache, to see that it is removed
    try:
        costs = measure.MeasuredTimer().warm_jobs(smoke_run, {}, "cpu", 2, 1)
    finally:
        tempfile.tempdir = None
    first, train, evaluation, stop = (costs[k].seconds for k in ("first", "train", "eval", "stop"))
    assert first > train + 0.5 and 0 < train < 5 and 0 < evaluation < train and 0 < stop < 5
    assert list(tmp_path.iterdir()) == [] and set(tmp_path.parent.iterdir()) == before
    assert not root.exists() or not any(root.rglob("DONE.json"))


def test_the_slow_down_beside_other_jobs_is_measured_alone_and_together_in_turn(smoke_run, monkeypatch):
    """Two real processes time the same evaluation in shared windows, one alone in every other window: the ratio is
    a slow-down (at least 1) and not absurd on a machine with two cores."""
    monkeypatch.setattr(processes, "CONTENTION_WINDOWS", 4)
    monkeypatch.setattr(processes, "CONTENTION_WINDOW_S", 0.5)
    monkeypatch.setattr(processes, "CONTENTION_REPEATS", 1)
    slow_down = measure.MeasuredTimer().contention(smoke_run, "cpu", 2).seconds
    assert 1.0 <= slow_down < 3.0


def test_a_real_process_start_is_measured_once_and_cached(root):
    """Measured here (two new processes that import what a warm worker imports), then read from the cache."""
    cal = calibration.Calibration("cpu", path=root / "c.json")
    assert cal.process_start() > 0 and cal.measured == 1
    cal.save()
    again = calibration.Calibration("cpu", path=root / "c.json")
    assert again.process_start() == cal.process_start() and again.measured == 0


# ------------------------------------------------------------------------------------------ without CUDA: FLOPs


@pytest.fixture
def no_cuda(monkeypatch, tmp_path):
    """No CUDA device here, whatever this machine has; the run cache, data and results in a temporary folder."""
    import infiloop.cli

    monkeypatch.setattr(infiloop.cli, "cuda_problem", lambda: "no CUDA (the test says)")
    for name in ("RUNS", "DATA", "RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())


def _cli_plan(capsys, *argv):
    from infiloop.cli import main

    code = main(["plan", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def _training_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(r"sudoku\s+\w+\s+\d+ x ", ln)]


def test_plan_of_the_gpu_profile_without_cuda_prices_every_training_in_gpu_hours(no_cuda, capsys):
    """plan --profile gpu on a machine without CUDA: the device is the profile's, each training priced by its FLOPs
    at the stated throughput, GPU-hours in all, and no data built (the hub's Sudoku-Extreme is not here)."""
    out, err = _cli_plan(capsys, "--profile", "gpu", "--only", "01")
    assert "no CUDA device here" in err and "FLOPs at 200 TFLOP/s" in err
    lines = _training_lines(out)
    assert len(lines) == 3  # notebook 01 at gpu: carry-last, FPRM, InfiLoop on Sudoku
    train = profiles.PROFILES["gpu"]["train"]
    per_step = flops.flops_per_step(_gpu_model("infiloop"), train["batch_size"]) / 200e12
    assert any(f"{train['steps']} x  {per_step:.4f} +" in ln for ln in lines)
    hours = float(re.search(r"^GPU-hours: ([\d.]+) in all", out, re.M).group(1))
    assert 2.4 < hours < 3.8, hours  # about one GPU-hour per training: the profile's own estimate
    assert "a FLOP estimate: FLOPs at 200 TFLOP/s achieved" in out
    assert not (paths.DATA / "sudoku").exists()
    slower, _ = _cli_plan(capsys, "--profile", "gpu", "--only", "01", "--tflops", "100")
    assert float(re.search(r"^GPU-hours: ([\d.]+) in all", slower, re.M).group(1)) == pytest.approx(2 * hours,
                                                                                                 abs=0.11)


@pytest.mark.long  # plans the whole gpu profile, measuring its shapes: minutes
@pytest.mark.slow
def test_plan_of_the_whole_gpu_profile_without_cuda(no_cuda, capsys):
    """Every job of the gpu profile priced without CUDA or its data (about 10 s on 2 cores: notebook 08's tasks are
    generated to count its looped decoders' work): 16 trainings, 26 evaluations computed (two of notebook 06's are
    read from notebook 02's trajectories; three on the validation split, shared by notebooks 01 and 02), 30 looped
    decoders."""
    out, _ = _cli_plan(capsys, "--profile", "gpu")
    assert "16 training runs, 26 evaluations, 30 looped decoders" in out and len(_training_lines(out)) == 16
    hours = float(re.search(r"^GPU-hours: ([\d.]+) in all", out, re.M).group(1))
    assert 14 < hours < 21, hours


def test_tflops_is_for_a_cuda_plan_and_a_bad_one_is_one_line(no_cuda, capsys):
    from infiloop.cli import main

    for argv, message in ((["--device", "cpu", "--tflops", "100"], "--tflops prices the jobs of a CUDA device"),
                          (["--tflops", "0"], "expected a throughput in TFLOP/s > 0, e.g. 200, got '0'"),
                          (["--gpu-memory", "-8"], "expected a memory size in GB > 0, e.g. 80, got '-8'")):
        assert main(["plan", "--profile", "smoke", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_a_cuda_plan_without_cuda_is_the_arithmetic_of_each_job(no_cuda, capsys):
    """--device cuda at smoke: every training line's s/step is its FLOPs over the throughput, every evaluation's
    s/update too; the totals are GPU-hours."""
    out, _ = _cli_plan(capsys, "--profile", "smoke", "--device", "cuda", "--only", "02", "--tflops", "0.001")
    p = declared.declared_plan("smoke", "cuda", 1, ["02_depth_scaling"])
    assert len(_training_lines(out)) == len(p.runs) == 3
    run = p.runs[0]
    step = flops.flops_per_step(run.run.model_config(), run.batch) / 1e9
    assert f"{run.steps} x  {step:.4f} +" in out
    e = p.evals[0]
    update = flops.flops_per_update(e.run.model_config(), e.batch) / 1e9
    assert f"x {e.updates:6d} x  {update:.4f} =" in out
    assert re.search(r"^GPU-hours: [\d.e-]+ in all \(training", out, re.M)


def test_only_narrows_the_plan_as_it_narrows_reproduce(root, capsys):
    """--only (repeatable; number, name or both) plans those notebooks alone; an unknown one is one line."""
    from infiloop.cli import main

    def planned(*only):
        out = io.StringIO()
        args = argparse.Namespace(profile="smoke", device="cpu", calibrate=False, jobs=2, p=[],
                                  notebooks=[jobs_.notebook_name(o) for o in only] or None)
        assert command.main(args, timer=FakeTimer(), stream=out) == 0
        return out.getvalue()

    from infiloop.experiments.notebooks import manifest as jobs_

    both = planned("02", "perturbation")
    notebooks = {ln[:2] for ln in both.split("## evaluations")[1].splitlines() if re.match(r"\d\d  ", ln)}
    assert notebooks == {"02", "04"} and "3 training runs" in both and "0 looped decoders" in both
    assert "24 training runs" in planned()  # 01-08's 16 and notebook 09's eight
    capsys.readouterr()
    assert main(["plan", "--profile", "smoke", "--only", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown notebook 'nope'; valid: 01_main_table")


def test_a_gpus_cached_calibration_replaces_the_flops_where_it_holds_the_shape(root, monkeypatch):
    """Timings measured on a CUDA GPU (here a fake timer under a GPU's name) are used for the shapes they cover,
    the FLOP arithmetic for the others, and the plan says which; nothing is measured or written."""
    monkeypatch.setattr(calibration, "device_name", lambda device: "NVIDIA Test GPU (cuda)")
    p = declared.declared_plan("smoke", "cuda", 1, ["02_depth_scaling"])
    measured = calibration.Calibration("cuda", FakeTimer(), path=root / "cal.json")
    measured.train_step(p.runs[0].run, p.runs[0].batch, 0)  # carry-last's shape only
    measured.save()
    before = (root / "cal.json").read_text()
    flops = arithmetic.FlopCalibration(path=root / "cal.json")
    plan.estimate(p, flops)
    assert flops.gpu == "NVIDIA Test GPU (cuda)" and flops.from_gpu == 1 and flops.estimated > 0
    assert p.runs[0].per_step == STEP_S and p.runs[1].per_step < 1e-3  # carry-last measured, FPRM by its FLOPs
    assert "1 timings measured on NVIDIA Test GPU (cuda)" in flops.basis()
    assert (root / "cal.json").read_text() == before
    other = arithmetic.FlopCalibration(path=root / "cal.json", gpu="NVIDIA Other (cuda)")
    plan.estimate(declared.declared_plan("smoke", "cuda", 1, ["02_depth_scaling"]), other)
    assert other.from_gpu == 0 and other.basis().startswith("a FLOP estimate")


def test_the_declared_plan_agrees_with_the_plan_of_the_data(root):
    """Without its data, the plan counts the same runs and evaluations with the same puzzles and updates as the plan
    built on the data (smoke: every notebook)."""
    built, unbuilt = plan.make_plan("smoke", jobs=1), declared.declared_plan("smoke", "cpu", 1)
    assert [r.run.dir for r in built.runs] == [r.run.dir for r in unbuilt.runs]
    key = lambda e: (str(e.run.dir), e.kind, e.puzzles, e.batch, e.updates, e.note)  # noqa: E731
    assert sorted(map(key, built.evals)) == sorted(map(key, unbuilt.evals))
    assert [m.key for m in built.models] == [m.key for m in unbuilt.models]


def test_looped_decoders_are_priced_at_the_float32_rate_they_train_in_on_a_gpu_not_here(root, monkeypatch):
    """A looped decoder trains and evaluates in float32 (no autocast): on a CUDA GPU that is not here its FLOPs go
    at the float32 share of the assumed bf16 rate (67 of 989 TFLOP/s on an H100), in the plan's timer and in the
    cluster's estimates; a reasoner's training (bf16 autocast) at the rate itself; on the CPU nothing changes."""
    from infiloop.experiments import cost
    from infiloop.experiments.notebooks import manifest as jobs_

    monkeypatch.setattr("infiloop.machine.cuda_problem", lambda: "no CUDA device is visible")
    decoder = next(j for j in jobs_.jobs(["08"], "smoke", {}) if j.kind == "looplm")
    train = next(j for j in jobs_.jobs(["01_main_table"], "smoke", {}) if j.kind == "train")
    share = flops.PRECISION_SHARE["fp32"]
    assert share == pytest.approx(67 / 989) and flops.job_precision(decoder) == "fp32"
    assert flops.job_precision(train) == "bf16"
    seconds, how = cost.estimates([decoder, train], "cuda", tflops=100.0)
    assert seconds[decoder.id] == pytest.approx(flops.job_flops(decoder) / (100e12 * share))
    assert seconds[train.id] == pytest.approx(flops.job_flops(train) / 100e12)
    assert "float32" in how
    timer, probe = arithmetic.FlopTimer(100.0), decoder.model.probe
    on_cpu, on_gpu = timer.looplm_step(probe, "cpu"), timer.looplm_step(probe, "cuda")
    assert on_gpu.seconds == pytest.approx(on_cpu.seconds / share)
    assert timer.looplm_block(probe, "cuda").seconds == pytest.approx(timer.looplm_block(probe, "cpu").seconds / share)
    run = train.spec.run
    assert timer.train_step(run, 8, 1, "cuda").seconds == pytest.approx(timer.train_step(run, 8, 1, "cpu").seconds)


def test_the_estimate_before_the_compute_stage_comes_from_the_kept_timings_alone(root):
    """The line the default run prints before its compute stage: the plan's wall time where this machine's calibration
    keeps every timing, nothing measured (a missing one would delay the stage), and else when the bar will show one."""
    from infiloop.experiments.notebooks import declarations, manifest
    from infiloop.experiments.pipeline import estimate_line

    planned = manifest.jobs(declarations.profile_notebooks("smoke"), "smoke", None)
    assert plan.cached_wall(planned, "smoke", "cpu", 2) is None and not (root / calibration.CALIBRATION).exists()
    class Every(WarmTimer):  # every timing the measuring timer takes
        def contention(self, run, device, jobs):
            return Timing(1.2, 0.0, 0)

    cal = calibration.Calibration("cpu", Every())
    expected = plan.wall(plan.estimate(plan.plan_of(planned, "smoke", "cpu", 2), cal))
    cal.save()
    assert plan.cached_wall(planned, "smoke", "cpu", 2) == pytest.approx(expected) and expected > 0
    assert estimate_line(plan.cached_wall(planned, "smoke", "cpu", 2)) == (
        f"estimate: about {expected / 60:.1f} min of compute, then the notebooks (python -m infiloop plan: the same "
        "estimate, job by job)")
    assert estimate_line(None).startswith("no estimate yet: this machine's timings are not measured")
