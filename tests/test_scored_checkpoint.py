"""The checkpoint that was scored (issue 45, item 4): training keeps the checkpoint chosen on the validation split
(``training/selection.py``) without changing what it trains; every evaluation records the weights it used (last,
EMA or best on validation, with the step); an imported archive loads and reproduces its recorded accuracy on a few
puzzles before use, or says plainly that it was not checked and why (``experiments/store/verify.py``)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from infiloop.cli import main
from infiloop.errors import UsageError
from infiloop.experiments.store import archives, verify
from infiloop.experiments.store.runs import load_run
from infiloop.io import load_weights, save_weights
from infiloop.tasks.base import DataError
from infiloop.training import selection


def test_the_best_checkpoint_on_validation_is_kept(tmp_path, monkeypatch):
    """Planted validation accuracies 0.25, 0.75, 0.75, 0.5 at steps 10-40: step 20 is kept (ties keep the earlier),
    with its weights; a resumed run checking step 30 again keeps it."""
    planted = {10: 0.25, 20: 0.75, 30: 0.75, 40: 0.5}
    calls = []

    def fake_evaluate(model, data, request):
        step = calls[-1]
        n = len(data)
        return {"correct": np.array([np.arange(n) < round(planted[step] * n)])}

    monkeypatch.setattr(selection, "evaluate", fake_evaluate)
    from infiloop.experiments.settings import profiles
    from infiloop.experiments.store.runs import resolve
    from infiloop.model.reasoner import LoopedReasoner
    from infiloop.tasks import validation

    run = resolve("sudoku", "carry_last", "smoke")
    valid = validation.load("sudoku", profiles.data_profile("smoke"), tmp_path / "data")
    keep = selection.BestOnValidation(tmp_path, run.model_config(), valid, 8, 64, "cpu", "ema")
    models = {}
    for step in planted:
        calls.append(step)
        torch.manual_seed(step)
        models[step] = LoopedReasoner(run.model_config()).state_dict()
        assert keep.check(step, models[step]) == pytest.approx(planted[step])
    rec = json.loads((tmp_path / selection.BEST_RECORD).read_text())
    assert rec["step"] == 20 and rec["valid_exact"] == pytest.approx(0.75) and rec["kind"] == "ema"
    assert list(rec["checked"]) == ["10", "20", "30", "40"] and rec["puzzles"] == len(valid)
    kept = load_weights(tmp_path / selection.BEST)
    assert all(torch.equal(kept[k], models[20][k]) for k in kept)
    calls.append(30)
    keep.check(30, models[30])  # resumed from step 20: step 30 is checked again, 40 forgotten
    rec = json.loads((tmp_path / selection.BEST_RECORD).read_text())
    assert rec["step"] == 20 and list(rec["checked"]) == ["10", "20", "30"]


def test_choosing_the_checkpoint_changes_nothing_that_is_trained(smoke_run, tmp_path):
    """smoke_run was trained with the check at every checkpoint; trained without it the weights are the same bytes."""
    from infiloop.training import train

    assert (smoke_run.dir / selection.BEST).is_file()
    train(smoke_run.model_config(), smoke_run.train_config(), smoke_run.train_data(), tmp_path, progress=False)
    assert (tmp_path / "model.safetensors").read_bytes() == (smoke_run.dir / "model.safetensors").read_bytes()
    assert not (tmp_path / selection.BEST).exists()


def test_every_evaluation_records_the_weights_it_scored(smoke_run):
    best = smoke_run.weights_used("best")
    rec = json.loads((smoke_run.dir / selection.BEST_RECORD).read_text())
    assert best == {"kind": "best", "step": rec["step"], "file": "best.safetensors", "selected_on": "validation",
                    "of": "ema", "valid_exact": rec["valid_exact"], "depth": smoke_run.training_depth}
    traj, path = smoke_run.evaluate(updates=4, every=1, limit=8, weights="best", progress=False)
    assert json.loads(str(traj["info"]))["weights"] == best
    assert path != smoke_run.evaluate(updates=4, every=1, limit=8, progress=False)[1]
    # the step chosen is the one whose validation accuracy was the highest (the first on ties)
    checked = {int(k): v for k, v in rec["checked"].items()}
    assert rec["step"] == min(s for s, v in checked.items() if v == max(checked.values()))
    out, _ = smoke_run.perturb(2, (0.0, 0.1), updates_after=2, limit=4, progress=False)
    assert json.loads(str(out["info"]))["weights"] == smoke_run.weights_used()
    out, _ = smoke_run.budgets((2, 4), limit=4, data=smoke_run.test_data().subset(slice(0, 4)), progress=False)
    assert json.loads(str(out["info"]))["weights"] == smoke_run.weights_used()


def test_best_weights_that_are_not_there_are_one_clear_error(smoke_run, tmp_path):
    copy = tmp_path / smoke_run.dir.name
    shutil.copytree(smoke_run.dir, copy)
    run = load_run(copy)
    (copy / selection.BEST_RECORD).write_text(json.dumps({"kind": None, "why": "arc1: no held-out puzzles"}))
    with pytest.raises(UsageError, match="no checkpoint chosen on validation: arc1: no held-out puzzles"):
        run.load_model(weights="best")
    (copy / selection.BEST_RECORD).unlink()
    with pytest.raises(DataError, match="no best.json: trained before the checkpoint chosen on validation"):
        run.weights_used("best")


def test_an_imported_archive_reproduces_its_recorded_accuracy(smoke_run, tmp_path, capsys):
    # a copy without the evaluations other tests add to the session's run: the check reads the largest one
    own = tmp_path / "own" / smoke_run.dir.name
    shutil.copytree(smoke_run.dir, own, ignore=shutil.ignore_patterns("eval"))
    load_run(own).evaluate(updates=8, every=1, limit=16, progress=False)
    archive, _ = archives.export_runs([own], tmp_path / "good.tar")
    root = tmp_path / "r"
    assert main(["runs", "import", str(archive), "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "reproduced: traj-" in out and "8 puzzles at update 8: 8 of 8 the same (at most 1 may differ)" in out
    rec = json.loads((root / "sudoku" / smoke_run.name / verify.IMPORTED).read_text())
    assert rec["reproduction"]["status"] == "reproduced" and rec["reproduction"]["differing"] == 0


def _tampered(smoke_run, tmp_path):
    """A copy whose weights were replaced after its evaluations were cached, exported with correct hashes."""
    copy = tmp_path / "tampered" / smoke_run.dir.name
    shutil.copytree(smoke_run.dir, copy)
    gen = torch.Generator().manual_seed(7)
    w = load_weights(copy / "model.safetensors")
    save_weights(copy / "model.safetensors", {k: v + 0.5 * torch.randn(v.shape, generator=gen)
                                              if v.is_floating_point() else v for k, v in w.items()})
    return copy


def test_an_archive_whose_accuracy_does_not_reproduce_is_refused(smoke_run, tmp_path, capsys):
    smoke_run.evaluate(updates=8, every=1, limit=16, progress=False)
    archive, _ = archives.export_runs([_tampered(smoke_run, tmp_path)], tmp_path / "tampered.zip")
    root = tmp_path / "r"
    assert main(["runs", "import", str(archive), "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "does not reproduce its recorded evaluation" in err[0]
    assert "the weights are not those that were evaluated; refused, nothing was imported" in err[0]
    assert not (root / "sudoku" / smoke_run.name).exists()
    assert not any(p.name.startswith(".import-") for p in (root / "sudoku").iterdir())


def test_a_check_that_cannot_be_made_says_not_checked(smoke_run, tmp_path, monkeypatch, capsys):
    copy = tmp_path / "bare" / smoke_run.dir.name
    shutil.copytree(smoke_run.dir, copy)
    shutil.rmtree(copy / "eval")
    archive, _ = archives.export_runs([copy], tmp_path / "bare.tar")
    assert main(["runs", "import", str(archive), "--root", str(tmp_path / "r1")]) == 0
    assert "not checked: the archive records no evaluation of this run to compare with" in capsys.readouterr().out
    smoke_run.evaluate(updates=8, every=1, limit=16, progress=False)
    archive, _ = archives.export_runs([smoke_run.dir], tmp_path / "offline.tar")

    def offline(self, test_set="test"):
        raise DataError("sudoku: the hub is not reachable (HF_HUB_OFFLINE is set)")

    monkeypatch.setattr("infiloop.experiments.store.runs.Run.test_data", offline)
    assert main(["runs", "import", str(archive), "--root", str(tmp_path / "r2")]) == 0
    assert ("not checked: its test data cannot be built here (sudoku: the hub is not reachable (HF_HUB_OFFLINE is "
            "set))") in capsys.readouterr().out


def test_the_reproduction_rule():
    assert verify.allowed_differences(8, "fp32") == 1 and verify.allowed_differences(8, "bf16") == 2
    assert verify.allowed_differences(16, "fp32") == 2 and verify.allowed_differences(3, "tf32") == 1
