"""The pilot (``python -m infiloop pilot``): the GPU profile's first minutes, measured, and go or no-go.

On the CPU at ``smoke``: the three Table-1 connections train for a share of a small budget; the report, its
criteria and its verdict are checked, and the decision rule on planted measurements."""

from __future__ import annotations

import json
import math

import pytest
import torch

from infiloop import paths
from infiloop.experiments.cost import pilot
from infiloop.experiments.cost.pilot import PilotRun, decide


def test_pilot_at_smoke_prints_its_measurements_and_a_verdict(capsys):
    status = pilot.main(["--profile", "smoke", "--minutes", "0.15"])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[-1] in ("go", "no-go") and status == (0 if lines[-1] == "go" else 1)
    for name in ("carry_last", "fprm", "infiloop"):
        assert f"| {name} | " in out and f"{name}: finite loss that falls" in out
    assert "|q|" in out and "at clip" in out  # InfiLoop's statistics by step
    report = json.loads((paths.RESULTS / "smoke" / "pilot.json").read_text())
    assert report["go"] == (lines[-1] == "go") and len(report["runs"]) == 3
    assert "[n/a] infiloop: step time" in out  # on the CPU the plan is itself measured
    for r in report["runs"]:
        assert r["steps"] >= 2 and all(math.isfinite(c["loss"]) for c in r["curve"])
        assert r["curve"] == sorted(r["curve"], key=lambda c: c["step"])


def _run(name, losses, cells, s_per_step=0.1, steps=100):
    curve = [{"step": 10 * (i + 1), "loss": lo, "cell_acc": c} for i, (lo, c) in enumerate(zip(losses, cells))]
    return PilotRun(name, 10 * len(losses), steps, 1.0, s_per_step, None, False, None, None, {}, curve)


PLAN = {"carry_last": 0.1, "fprm": 0.1, "infiloop": 0.1}
GOOD = [_run("carry_last", [2.0, 1.5, 1.2], [0.3, 0.5, 0.6]), _run("fprm", [2.0, 1.6, 1.3], [0.3, 0.4, 0.5]),
        _run("infiloop", [2.0, 1.4, 1.1], [0.3, 0.5, 0.58])]


@pytest.mark.parametrize("change,failed", [
    (None, None),
    (lambda rs: rs[2].curve[-1].update(loss=float("nan")), "infiloop: finite loss"),
    (lambda rs: rs[1].curve[-1].update(loss=1.95), "fprm: finite loss"),
    (lambda rs: rs[2].curve[-1].update(cell_acc=0.5), "InfiLoop's cell accuracy"),
    (lambda rs: setattr(rs[0], "s_per_step", 0.2), "carry_last: step time"),
    (lambda rs: setattr(rs[2], "s_per_step", None), "infiloop: step time"),
])
def test_go_and_no_go_by_the_stated_criteria(change, failed):
    import copy

    runs = copy.deepcopy(GOOD)
    if change is not None:
        change(runs)
    verdict = decide(runs, PLAN)
    unmet = [name for name, ok, _ in verdict.criteria if not ok]
    assert verdict.go == (failed is None)
    assert [n for n in unmet if n.startswith(failed or "-")] == unmet


def test_the_pilot_reports_a_compile_that_fell_back(monkeypatch, tmp_path):
    """A compile failure does not end the pilot: the run trains in eager mode and the report names the failure."""
    import torch._dynamo.exc as exc

    class Broken(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args, **kwargs):
            raise exc.BackendCompilerFailed(lambda *x: None, RuntimeError("no C++ compiler"), None)

    monkeypatch.setattr(torch, "compile", lambda module, *a, **k: Broken(module))
    r = pilot.pilot_run("infiloop", "smoke", "cpu", 2.0, tmp_path, "on", [])
    assert not r.compiled and "BackendCompilerFailed" in r.compile_error and r.steps >= 1
    text = pilot.render("smoke", "cpu", [r], decide([r], {"infiloop": 1.0}))
    assert "no (fell back: BackendCompilerFailed" in text


def test_bad_arguments_are_one_line(capsys):
    from infiloop.errors import UsageError

    for argv, match in ((["--profile", "nope"], "unknown profile"), (["--connections", "trm"], "unknown recipe"),
                        (["--minutes", "0"], "must be positive")):
        with pytest.raises(UsageError, match=match):
            pilot.parse(argv)
