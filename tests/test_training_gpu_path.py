"""What a GPU run needs of training, tested on the CPU: gradient accumulation (``train.micro_batch``) that
gives the whole batch's update, one ``error:`` line when a step runs out of memory, the fall-back to eager
mode when ``torch.compile`` fails, progress lines for the logs of jobs and TensorBoard events."""

import contextlib
import io
import json
import sys
import types
import weakref

import pytest
import torch
from torch import nn

import infiloop.training.trainer as training  # the module whose LoopedReasoner the tests replace
from infiloop.errors import UsageError, exit_status, message
from infiloop.experiments.store.runs import resolve
from infiloop.tasks.base import DataError
from infiloop.training import PROGRESS_RE, TrainConfig, read_metrics, train
from infiloop.training.records import Progress

# A smaller model than the smoke profile's, for speed: one layer of width 16, 2 outer updates of 1 inner update.
TINY = {"model.d_model": 16, "model.H": 2, "model.L": 1, "train.batch_size": 8, "train.steps": 4,
        "train.warmup_steps": 1, "train.log_every": 2, "train.checkpoint_every": 100, "train.ema": 0.0}


@pytest.fixture(scope="module")
def smoke():
    """(model config, train config, training data) of the smoke profile's Sudoku at the TINY settings."""
    run = resolve("sudoku", "infiloop", "smoke", TINY)
    return run.model_config(), run.train_config(), run.train_data()


def _train(smoke, run_dir, max_steps=None, **train_changes):
    model_cfg, train_cfg, data = smoke
    cfg = TrainConfig.from_dict({**train_cfg.to_dict(), **train_changes})
    return train(model_cfg, cfg, data, run_dir, max_steps=max_steps, progress=False, return_model=True,
                 progress_every_s=1e9)


class _HaltingReasoner(training.LoopedReasoner):
    """The model with a halting head that halts some slots from the first step (TRM's starts at q = -5 and
    would halt none in a few steps): deep supervision's halting and exploration take part in the test."""

    def __init__(self, cfg):
        super().__init__(cfg)
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            self.q_head.weight.copy_(torch.randn(self.q_head.weight.shape, generator=g) * 0.2)
            self.q_head.bias.zero_()


def test_micro_batches_give_the_whole_batch_update_in_float64(smoke, tmp_path, monkeypatch):
    """Float64 model and losses: after several steps of 6 slots with halting (by q_halt, with exploration, and
    at max_segments) and refills, chunks of 2 (even) and 4 (4 + 2) give the weights, metrics, connection
    statistics and carried states of the whole batch at once, within 1e-10."""
    monkeypatch.setattr(training, "LoopedReasoner", _HaltingReasoner)
    torch.set_default_dtype(torch.float64)
    try:
        runs = {mb: _train(smoke, tmp_path / f"mb{mb}", batch_size=6, steps=6, max_segments=3, halt_exploration=0.5,
                           micro_batch=mb, lr=3e-3, candidate_loss=0.5, log_every=3, checkpoint_every=6)
                for mb in (0, 2, 4)}
    finally:
        torch.set_default_dtype(torch.float32)
    (_, whole), metrics = runs[0], read_metrics(tmp_path / "mb0" / "metrics.jsonl")
    assert next(whole.parameters()).dtype == torch.float64
    # logged at steps 3 and 6: halting only at max_segments would give segments 3 and 3
    assert [r["step"] for r in metrics] == [3, 6] and min(r["segments"] for r in metrics) < 3
    carry = torch.load(tmp_path / "mb0" / "checkpoint.pt", weights_only=True)["carry"]
    for mb in (2, 4):
        _, model = runs[mb]
        for (k, a), b in zip(whole.state_dict().items(), model.state_dict().values()):
            assert (a - b).abs().max() < 1e-10, (mb, k)
        for ra, rb in zip(metrics, read_metrics(tmp_path / f"mb{mb}" / "metrics.jsonl"), strict=True):
            assert ra.keys() == rb.keys() and ra["step"] == rb["step"]
            for k in ra:  # connection_stats computes in float32
                tol = 1e-10 if k in ("loss", "lm_loss", "q_loss", "cell_acc", "exact_acc", "segments") else 1e-5
                if k != "elapsed_s" and ra[k] is not None:
                    assert rb[k] == pytest.approx(ra[k], rel=tol, abs=tol), (mb, ra["step"], k)
        other = torch.load(tmp_path / f"mb{mb}" / "checkpoint.pt", weights_only=True)["carry"]
        for axis, st in carry.items():
            for k, v in st.items():
                assert v.shape == other[axis][k].shape
                if v.is_floating_point():
                    assert (v - other[axis][k]).abs().max() < 1e-10, (mb, axis, k)
                else:
                    assert torch.equal(v, other[axis][k]), (mb, axis, k)


def test_out_of_memory_halves_twice_then_is_one_line_naming_the_setting(smoke, tmp_path, monkeypatch, capfd):
    def oom(self, *a, **kw):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore text")

    monkeypatch.setattr(training.LoopedReasoner, "forward", oom)
    with pytest.raises(UsageError) as err:
        _train(smoke, tmp_path / "a")
    text = message(err.value)
    assert text == ("a: cpu out of memory at train.batch_size=8 (per process 8, micro-batch 2) on cpu: set "
                    "train.micro_batch=1 (or lower) to accumulate the same batch in smaller pieces")
    assert exit_status(err.value) == 2 and "\n" not in str(err.value)
    said = [line for line in capfd.readouterr().err.splitlines() if "out of memory" in line]
    assert said == ["warning: a: out of memory at micro-batch 8 (step 1): going on at train.micro_batch=4 (the same "
                    "update, in smaller pieces)",
                    "warning: a: out of memory at micro-batch 4 (step 1): going on at train.micro_batch=2 (the same "
                    "update, in smaller pieces)"]
    with pytest.raises(UsageError, match=r"micro-batch 1\) on cpu: one slot at a time does not fit either"):
        _train(smoke, tmp_path / "c", micro_batch=3)  # 3 -> 1, then no smaller


def test_out_of_memory_at_a_micro_batch_goes_on_at_half_of_it(smoke, tmp_path, monkeypatch, capfd):
    """A step that runs out of memory with chunks of 8 slots is redone with chunks of 4 from the same state: the run
    finishes with the weights of a run at micro-batch 4 from the start, bit for bit, and says so once."""
    _, ref = _train(smoke, tmp_path / "ref", micro_batch=4)
    forward = training.LoopedReasoner.forward

    def small_only(self, carry, inputs, *a, **kw):
        if inputs.shape[0] > 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return forward(self, carry, inputs, *a, **kw)

    monkeypatch.setattr(training.LoopedReasoner, "forward", small_only)
    summary, model = _train(smoke, tmp_path / "b")
    assert summary["complete"]
    said = [line for line in capfd.readouterr().err.splitlines() if "out of memory" in line]
    assert said == ["warning: b: out of memory at micro-batch 8 (step 1): going on at train.micro_batch=4 (the same "
                    "update, in smaller pieces)"]
    for k, v in ref.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k


class _FailingCompiled(nn.Module):
    """What ``torch.compile`` returns in the test: the module itself, whose ``fail_at``-th call computes the
    forward pass, draws random numbers and then fails as a backend compiler does (Triton missing)."""

    calls = 0

    def __init__(self, module, fail_at):
        super().__init__()
        self.module, self.fail_at = module, fail_at

    def forward(self, *args):
        type(self).calls += 1
        out = self.module(*args)
        if type(self).calls == self.fail_at:
            torch.rand(7)
            from torch._dynamo.exc import BackendCompilerFailed

            raise BackendCompilerFailed(lambda: None, RuntimeError("Cannot find a working triton installation.\n"
                                                                   "More lines"), None)
        return out


@pytest.fixture(scope="module")
def eager_run(smoke, tmp_path_factory):
    return _train(smoke, tmp_path_factory.mktemp("eager"), compile="off", micro_batch=4, halt_exploration=0.5)


@pytest.mark.parametrize("fail_at", [1, 4])  # the first call; the second chunk of the second step (a recompile)
def test_a_failed_compile_falls_back_to_eager_with_one_warning(smoke, eager_run, tmp_path, monkeypatch, capfd,
                                                               fail_at):
    """The step is redone from the same state (carry, gradients, optimiser, random numbers): the weights are
    the eager run's bit for bit, one warning line says so and DONE.json records the mode."""
    eager, eager_model = eager_run
    capfd.readouterr()
    _FailingCompiled.calls = 0
    monkeypatch.setattr(torch, "compile", lambda module: _FailingCompiled(module, fail_at))
    done, model = _train(smoke, tmp_path / "run", compile="on", micro_batch=4, halt_exploration=0.5)
    err = capfd.readouterr().err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert warnings == ["warning: torch.compile failed (BackendCompilerFailed: backend='<lambda>' raised: "
                        "RuntimeError: Cannot find a working triton installation.); training run in eager mode"]
    assert _FailingCompiled.calls == fail_at  # no compiled call after the failure
    for (k, a), b in zip(eager_model.state_dict().items(), model.state_dict().values()):
        assert torch.equal(a, b), k
    summary = json.loads((tmp_path / "run" / "DONE.json").read_text())
    assert summary["compiled"] is False  # the first compiled step's time is kept where it worked
    assert summary["compile_seconds"] is None if fail_at == 1 else summary["compile_seconds"] >= 0
    assert summary["compile_error"].startswith("BackendCompilerFailed: ")
    assert eager["compiled"] is False and eager["compile_error"] is None
    assert summary["final"]["loss"] == eager["final"]["loss"]


def test_a_compiled_run_records_its_compile_time(smoke, tmp_path, monkeypatch):
    """A compile that works: DONE.json says compiled, with the seconds of the first compiled step; an error of
    the computation itself (here a data error) is not taken for a compile failure."""
    monkeypatch.setattr(torch, "compile", lambda module: _FailingCompiled(module, 0))
    done, _ = _train(smoke, tmp_path / "run", compile="on")
    assert done["compiled"] is True and done["compile_seconds"] >= 0 and done["compile_error"] is None

    def bad_data(self, *a, **kw):
        raise DataError("a bad row")

    monkeypatch.setattr(training.LoopedReasoner, "forward", bad_data)
    with pytest.raises(DataError, match="a bad row"):
        _train(smoke, tmp_path / "bad", compile="on")


def test_progress_lines_every_interval_with_time_left():
    """A fake clock: one line once 30 s have passed, over the steps since the previous line."""
    now = [100.0]
    lines = Progress("sudoku-run", step=10, end=110, every_s=30, clock=lambda: now[0])
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        for step in range(11, 21):
            now[0] += 4.0  # 4 s per step: a line after 8 steps (32 s)
            lines.add(step, {"loss": 0.5 + step / 100, "cell_acc": 0.8, "exact_acc": 0.25})
    printed = buf.getvalue().splitlines()
    assert printed == ["# progress sudoku-run: step 18/110 loss 0.645 cell 0.800 exact 0.250 4 s/step, 7 min left"]
    m = PROGRESS_RE.fullmatch(printed[0])
    assert m and m["run"] == "sudoku-run" and int(m["step"]) == 18 and int(m["end"]) == 110
    assert float(m["s_per_step"]) == 4.0 and int(m["min_left"]) == 7  # 92 steps x 4 s = 6.13 min, rounded up


def test_a_quiet_run_prints_progress_lines(smoke, tmp_path, capfd):
    model_cfg, train_cfg, data = smoke
    cfg = TrainConfig.from_dict({**train_cfg.to_dict(), "steps": 3})
    train(model_cfg, cfg, data, tmp_path / "run", progress=False, progress_every_s=0)
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("# progress")]
    found = [PROGRESS_RE.fullmatch(ln) for ln in lines]
    assert all(found) and [(m["run"], int(m["step"]), int(m["end"])) for m in found] == [
        ("run", 1, 3), ("run", 2, 3), ("run", 3, 3)]
    assert int(found[-1]["min_left"]) == 0


class _FakeWriter:
    """A stand-in for ``torch.utils.tensorboard.SummaryWriter`` (the tensorboard package is optional)."""

    made: list = []

    def __init__(self, log_dir, purge_step=None):
        self.log_dir, self.purge_step, self.scalars, self.closed = log_dir, purge_step, [], False
        _FakeWriter.made.append(self)

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_tensorboard_events_beside_metrics(smoke, tmp_path, monkeypatch):
    """Every metrics.jsonl record as scalars at its step; a resumed run drops the events after its checkpoint."""
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=_FakeWriter))
    _FakeWriter.made = []
    run = tmp_path / "run"
    _train(smoke, run, checkpoint_every=2, steps=4, max_steps=2)
    _train(smoke, run, checkpoint_every=2, steps=4)
    first, second = _FakeWriter.made
    assert first.log_dir == str(run / "tensorboard") and first.purge_step is None and first.closed
    assert second.purge_step == 3 and second.closed  # the events after the checkpoint at step 2 are hidden
    records = read_metrics(run / "metrics.jsonl")
    got = {(tag, step): v for w in (first, second) for tag, v, step in w.scalars}
    assert {step for _, step in got} == {2, 4}
    for rec in records:
        for k, v in rec.items():
            if k != "step" and v is not None:
                assert got[(f"train/{k}", rec["step"])] == v


def test_tensorboard_is_optional_and_never_fails_a_run(smoke, tmp_path, monkeypatch, capfd):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # not installed: the import fails
    done, _ = _train(smoke, tmp_path / "a")
    assert done["complete"] and not (tmp_path / "a" / "tensorboard").exists()

    class Broken(_FakeWriter):
        def add_scalar(self, *a):
            raise OSError("No space left on device")

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=Broken))
    capfd.readouterr()
    done, _ = _train(smoke, tmp_path / "b")
    assert done["complete"]
    warnings = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "could not write TensorBoard events (OSError: No space left on device)" in warnings[0]


class _Remembered:
    """Weak references to a large tensor that each failing attempt allocated, and whether it was still alive when the
    next attempt began."""

    def __init__(self):
        self.refs, self.alive_at_retry = [], []

    def attempt(self):
        self.alive_at_retry.extend(ref() is not None for ref in self.refs)
        activations = torch.ones(256, 1024)  # what a failed chunk holds: its activations (1 MB here)
        self.refs.append(weakref.ref(activations))
        return activations


def test_an_out_of_memory_retry_frees_the_failed_attempt_first(smoke, tmp_path, monkeypatch):
    """The retry at half the micro-batch starts after the failed attempt's tensors are gone: a retry inside the
    ``except`` block keeps them alive through the traceback, and then ``empty_cache`` frees nothing."""
    seen, forward = _Remembered(), training.LoopedReasoner.forward

    def small_only(self, carry, inputs, *a, **kw):
        held = seen.attempt()
        if inputs.shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        del held
        return forward(self, carry, inputs, *a, **kw)

    monkeypatch.setattr(training.LoopedReasoner, "forward", small_only)
    summary, _ = _train(smoke, tmp_path / "run", steps=1)
    assert summary["complete"] and len(seen.refs) >= 4  # 8 slots fail, 4 fail, then chunks of 2
    assert not any(seen.alive_at_retry), "a failed attempt's tensors were alive when the next attempt began"


def test_a_compile_fallback_frees_the_failed_attempt_first(smoke, tmp_path, monkeypatch):
    """The same for the step redone in eager mode after a compile failure."""
    seen = _Remembered()

    class Failing(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args):
            held = seen.attempt()  # noqa: F841 - alive in this frame when the compile fails
            from torch._dynamo.exc import BackendCompilerFailed

            raise BackendCompilerFailed(lambda: None, RuntimeError("no working triton"), None)

    forward = training.LoopedReasoner.forward

    def eager(self, *a, **kw):
        seen.attempt()
        return forward(self, *a, **kw)

    monkeypatch.setattr(torch, "compile", Failing)
    monkeypatch.setattr(training.LoopedReasoner, "forward", eager)
    summary, _ = _train(smoke, tmp_path / "run", compile="on", steps=1)
    assert summary["compiled"] is False and seen.alive_at_retry[:1] == [False]
