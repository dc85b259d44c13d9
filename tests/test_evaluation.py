"""Evaluation to depth, perturbation, the evaluation cache and the command line."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from infiloop.evaluation import accuracy_by_depth, evaluate, load_trajectory, perturb
from infiloop.experiments.store.runs import load_run
from infiloop.paths import ROOT


@pytest.fixture(scope="module")
def run(smoke_run):
    return smoke_run


def test_trajectory_schema_and_consistency(run):
    model, data = run.load_model(), run.test_data().subset(slice(0, 20))
    traj = evaluate(model, data, updates=12, every=3, batch_size=8, snapshots=(3, 9), per_token=True,
                    progress=False)
    P, K, S = 20, 4, data.seq_len
    assert traj["updates"].tolist() == [3, 6, 9, 12]
    for k in ("correct", "wrong_cells", "state_change", "gamma_outer", "score_outer", "gamma_inner", "score_inner"):
        assert traj[k].shape == (K, P), k
    assert traj["gamma_outer_tok"].shape == (K, P, S)
    assert traj["pred_snapshots"].shape == (2, P, S) and traj["flipped"].shape == (P, S)
    assert np.array_equal(traj["correct"], traj["wrong_cells"] == 0)
    assert ((traj["gamma_outer"] > 0) & (traj["gamma_outer"] < 1)).all()
    # first_solve is checked at every update, so it is at most the first recorded correct update
    for p in range(P):
        hits = np.flatnonzero(traj["correct"][:, p])
        if len(hits):
            assert 1 <= traj["first_solve"][p] <= traj["updates"][hits[0]]
    # cells flipped between the snapshots include every cell that differs between the snapshots
    changed = traj["pred_snapshots"][0] != traj["pred_snapshots"][1]
    assert (traj["flipped"] | ~changed).all()
    info = json.loads(str(traj["info"]))
    assert info["layers_per_update"] == model.cfg.layers_per_outer_update


def test_candidate_wrong_cells_and_changes_summed_over_updates(run):
    """Fig. 3b pairs the content score s_t with the candidate z_t it scores: its wrong cells are those of
    the lm head on z_t, not on the aggregated state h_t. "Predictions changed" between two snapshots a < b
    sums the cells that change at every update in (a, b] (the paper's 24.0 / 77.0), not the net difference."""
    model, data = run.load_model(), run.test_data().subset(slice(0, 12))
    a, b = 3, 10
    traj = evaluate(model, data, updates=10, every=1, snapshots=(a, b), progress=False)
    inputs = torch.from_numpy(data.inputs.astype(np.int64))
    labels = torch.from_numpy(data.labels.astype(np.int64))
    x = model.embed(inputs)
    carry = model.initial_carry(12)
    preds, differs = [], False
    with torch.no_grad():
        for k in range(1, 11):
            y_before = carry["y"]["h"]
            carry, diag = model.outer_update(carry, x)
            cand = diag["candidate_outer"]
            # the candidate is f(y + z) before the connection: recompute it from the block
            assert torch.allclose(cand, model.block(y_before + carry["z"]["h"]), atol=1e-6)
            wrong_cand = ((model.logits(cand).argmax(-1) != labels) & (labels != 0)).sum(-1).numpy()
            assert np.array_equal(traj["wrong_cells_candidate"][k - 1], wrong_cand)
            differs |= not np.array_equal(wrong_cand, traj["wrong_cells"][k - 1])
            preds.append(model.readout(carry)[0].argmax(-1).numpy())
    assert differs  # InfiLoop's state is not its candidate: the two readouts differ somewhere
    summed = sum((preds[k] != preds[k - 1]).sum(-1) for k in range(a, b))  # updates a+1 .. b
    assert np.array_equal(traj["changes"], summed)
    from infiloop.analysis import diagnosis

    n, d = diagnosis.changed_terms(traj)
    assert n.sum() / d.sum() == pytest.approx(summed.mean())
    net = (traj["pred_snapshots"][1] != traj["pred_snapshots"][0]).sum(-1)
    assert np.array_equal(net, (preds[b - 1] != preds[a - 1]).sum(-1)) and (summed >= net).all()


def test_score_is_paired_with_the_candidates_wrong_cells():
    from infiloop.analysis import trajectories as analysis

    traj = {"score_outer": np.array([[7.0, -1.0]]), "wrong_cells": np.array([[0, 0]]),
            "wrong_cells_candidate": np.array([[0, 9]])}
    assert analysis.score_by_wrong_cells(traj) == {0: (7.0, 1), 9: (-1.0, 1)}  # the rejected wrong candidate
    assert analysis.score_by_wrong_cells(traj, of="state") == {0: (3.0, 2)}  # paired with the older board


def test_trajectory_matches_a_direct_run(run):
    model, data = run.load_model(), run.test_data().subset(slice(0, 10))
    traj = evaluate(model, data, updates=6, every=1, progress=False)
    inputs = torch.from_numpy(data.inputs.astype(np.int64))
    labels = torch.from_numpy(data.labels.astype(np.int64))
    prev = model.initial_carry(10)["y"]["h"]
    for k, carry, _ in model.iterate(inputs, 6):
        pred = model.readout(carry)[0].argmax(-1)
        wrong = ((pred != labels) & (labels != 0)).sum(-1).numpy()
        assert np.array_equal(traj["wrong_cells"][k - 1], wrong)
        y = carry["y"]["h"]
        change = (torch.linalg.vector_norm((y - prev).flatten(1), dim=1) /
                  torch.linalg.vector_norm(prev.flatten(1), dim=1)).numpy()
        assert np.allclose(traj["state_change"][k - 1], change, rtol=1e-5)
        prev = y


def test_batching_does_not_change_the_result(run):
    model, data = run.load_model(), run.test_data().subset(slice(0, 12))
    a = evaluate(model, data, updates=4, batch_size=12, progress=False)
    b = evaluate(model, data, updates=4, batch_size=5, progress=False)
    for k in ("correct", "wrong_cells", "first_solve"):
        assert np.array_equal(a[k], b[k])
    assert np.allclose(a["gamma_outer"], b["gamma_outer"], atol=1e-5)


def test_perturbation(run):
    model, data = run.load_model(), run.test_data().subset(slice(0, 16))
    out = perturb(model, data, at=4, eps=(0.0, 1e-3, 0.3), updates_after=6, every=2, batch_size=16,
                  progress=False)
    assert out["updates"].tolist() == [6, 8, 10]
    assert out["distance"].shape == (3, 3, 16)
    assert np.all(out["distance"][0] == 0)  # eps = 0 is the unperturbed run
    assert np.all(out["distance"][1, 0] > 0)
    assert out["distance"][2, 0].mean() > out["distance"][1, 0].mean()
    # the control run equals the plain trajectory
    traj = evaluate(model, data, updates=10, every=2, progress=False)
    assert np.array_equal(out["correct"][0], traj["correct"][2:])
    assert np.array_equal(out["solved_at"], traj["correct"][1])


def test_bad_evaluation_arguments(run):
    model, data = run.load_model(), run.test_data().subset(slice(0, 2))
    with pytest.raises(ValueError, match=r"every=5 must be a positive divisor of updates=12"):
        evaluate(model, data, updates=12, every=5, progress=False)
    with pytest.raises(ValueError, match=r"snapshots \(20,\) must lie in \[1, updates=12\]"):
        evaluate(model, data, updates=12, snapshots=(20,), progress=False)


def test_evaluation_is_cached(run, monkeypatch):
    traj, path = run.evaluate(updates=6, every=2, limit=8, progress=False)
    assert path.is_file() and path.parent == run.dir / "eval"
    import infiloop.experiments.store.eval_cache as ex

    monkeypatch.setattr(ex, "evaluate", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    again, path2 = run.evaluate(updates=6, every=2, limit=8, progress=False)
    assert path2 == path and np.array_equal(again["correct"], traj["correct"])
    assert load_run(run.dir).config == run.config


def test_cli_train_and_eval_on_a_public_format_file(tmp_path, run):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    csv = tmp_path / "mine.csv"
    gen = subprocess.run([sys.executable, "-m", "infiloop", "data", "generate", "sudoku", "--n", "10", "--side", "4",
                          "--blanks", "6-9", "--seed", "3", "--out", str(csv)], env=env, capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    out = subprocess.run([sys.executable, "-m", "infiloop", "eval", str(run.dir), "--updates", "8", "--every", "4",
                          "--data", str(csv), "--quiet"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[1].split() == ["update", "layers", "exact_acc"]
    assert [int(ln.split()[0]) for ln in lines[2:4]] == [4, 8]
    traj = load_trajectory(lines[-1])
    assert traj["correct"].shape == (2, 10)
    assert accuracy_by_depth(traj)[0][0] == 4
    budgets = subprocess.run([sys.executable, "-m", "infiloop", "eval", str(run.dir), "--budgets", "8,4",
                              "--data", str(csv), "--quiet"], env=env, capture_output=True, text=True)
    assert budgets.returncode == 0, budgets.stderr
    rows = budgets.stdout.strip().splitlines()
    assert rows[1].split() == ["budget", "layers", "exact_acc"] and [int(r.split()[0]) for r in rows[2:4]] == [4, 8]
    for r in rows[2:4]:  # the budget's accuracy is the trajectory's at that update (no timestep conditioning)
        k, acc = int(r.split()[0]), float(r.split()[2])
        assert acc == pytest.approx(dict(accuracy_by_depth(traj))[k], abs=1e-4)


def test_budgets_reuse_a_cached_trajectory_and_agree_with_a_direct_run(run, monkeypatch):
    traj, _ = run.evaluate(updates=12, every=2, limit=10, snapshots=(4, 8), progress=False)
    import infiloop.experiments.store.eval_cache as ex

    monkeypatch.setattr(ex, "evaluate_budgets", lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
    out, path = run.budgets((4, 12, 6), limit=10)
    assert out["budgets"].tolist() == [4, 6, 12] and "traj-" in json.loads(str(out["info"]))["from_trajectory"]
    np.testing.assert_array_equal(out["correct"], traj["correct"][[1, 2, 5]])
    monkeypatch.undo()
    direct = ex.evaluate_budgets(run.load_model(), run.test_data().subset(slice(0, 10)), (4, 6, 12), progress=False)
    np.testing.assert_array_equal(direct["wrong_cells"], out["wrong_cells"])
    with pytest.raises(AssertionError, match="recomputed"):  # a budget the trajectory lacks is computed
        monkeypatch.setattr(ex, "evaluate_budgets",
                            lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed")))
        run.budgets((5,), limit=10)


def test_difficulty_breakdown_by_given_values_and_in_ranges():
    from infiloop.analysis import trajectories as analysis

    rng = np.random.default_rng(0)
    values = np.repeat(np.arange(20, 40), 5)  # 20 distinct path lengths, 5 puzzles each
    correct = rng.random(100) < 0.6
    traj = {"updates": np.array([4]), "correct": correct[None], "blanks": np.zeros(100, np.int16)}
    exact = analysis.difficulty_breakdown(traj, 4, values)
    assert list(exact) == list(range(20, 40)) and all(n == 5 for _, n in exact.values())
    grouped = analysis.difficulty_breakdown(traj, 4, values, groups=4)
    assert list(grouped) == ["20–24", "25–29", "30–34", "35–39"]
    for key, (acc, n) in grouped.items():
        lo, hi = (int(x) for x in key.split("–"))
        sel = (values >= lo) & (values <= hi)
        assert n == sel.sum() == 25 and acc == pytest.approx(correct[sel].mean())
    assert analysis.difficulty_breakdown(traj, 4) == {0: (pytest.approx(correct.mean()), 100)}  # default: blanks
    with pytest.raises(ValueError, match="difficulty values"):
        analysis.difficulty_breakdown(traj, 4, values[:10])


def test_cells_to_fill_are_sudoku_blanks_and_maze_open_cells():
    from infiloop import tasks
    from infiloop.tasks import maze, sudoku

    grid = np.array([[0, 1, 2, 0]])
    assert tasks.cells_to_fill("sudoku", sudoku.encode(grid)).tolist() == [[True, False, False, True]]
    assert tasks.cells_to_fill("maze", maze.encode(["#S G"])).tolist() == [[False, False, True, False]]
    with pytest.raises(ValueError, match="unknown task"):
        tasks.cells_to_fill("chess", grid)


@pytest.mark.parametrize("connection", ["infiloop", "carry_last"])
def test_bf16_evaluation_matches_fp32(connection, smoke_run):
    """Evaluation in bf16 autocast (the default on CUDA) against float32, on the CPU, to the profile's depth: the
    same exact accuracy at every update, the predictions of at least 97 % of the cells the same at every snapshot,
    wrong cells within one on at least 98 % of (update, puzzle) pairs (never more than 3 apart), gamma within 1e-3
    and the content score within 1e-2, every recorded state finite. bf16 must change something (else the test
    would pass with autocast silently off). Carry-last (whose state is the block's bf16 output) runs the trained
    InfiLoop model's block with carry-last on both axes."""
    from infiloop.model import LoopedReasoner
    from infiloop.model.connections import ConnectionConfig

    run = smoke_run
    model, data = run.load_model(), run.test_data()
    if connection != "infiloop":
        conn = ConnectionConfig(name=connection)
        block = model.state_dict()
        model = LoopedReasoner(model.cfg.replace(inner=conn, outer=conn))
        model.load_state_dict({k: v for k, v in block.items() if k in model.state_dict()})
    depth, snaps = run.config["eval"]["updates"], (1, 6, 12, run.config["eval"]["updates"])
    fp32 = evaluate(model, data, updates=depth, snapshots=snaps, progress=False, precision="fp32")
    bf16 = evaluate(model, data, updates=depth, snapshots=snaps, progress=False, precision="bf16")
    assert json.loads(str(bf16["info"]))["precision"] == "bf16"
    assert np.array_equal(fp32["correct"].mean(1), bf16["correct"].mean(1))
    assert (fp32["pred_snapshots"] == bf16["pred_snapshots"]).mean(axis=(1, 2)).min() >= 0.97
    apart = np.abs(fp32["wrong_cells"].astype(int) - bf16["wrong_cells"])
    assert (apart <= 1).mean() >= 0.98 and apart.max() <= 3
    assert np.abs(fp32["gamma_outer"] - bf16["gamma_outer"]).max() <= 1e-3
    assert np.abs(fp32["score_outer"] - bf16["score_outer"]).max() <= 1e-2
    assert np.isfinite(bf16["state_change"]).all()
    assert (fp32["pred_snapshots"] != bf16["pred_snapshots"]).any() or \
        (fp32["state_change"] != bf16["state_change"]).any()


def test_precision_on_cuda_is_bf16_with_tf32_and_restored():
    """``auto`` on CUDA is bf16 autocast with TF32 for the float32 products left; fp32 on request, with TF32 off for
    matrix products and cuDNN's convolutions alike; the global settings are restored afterwards. (The CUDA device is
    only named: nothing runs on it.)"""
    import warnings

    from infiloop.evaluation import precision_context, resolve_precision

    assert resolve_precision("auto", "cpu") == "fp32" and resolve_precision("auto", "cuda:1") == "bf16"
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp16", "cpu")
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    assert before[1], "cuDNN allows TF32 by default: the fp32 case below must turn it off"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # autocast warns that CUDA is not available here
        for asked, want, matmul, cudnn in (("auto", "bf16", "high", True), ("tf32", "tf32", "high", True),
                                           ("fp32", "fp32", "highest", False)):
            with precision_context(asked, "cuda") as resolved:
                assert resolved == want and torch.get_float32_matmul_precision() == matmul
                assert torch.backends.cudnn.allow_tf32 is cudnn, asked  # convolutions: TF32 off in fp32
            assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before
        torch.set_float32_matmul_precision("high")  # a caller's own TF32 setting: fp32 overrides it, then restores it
        try:
            with precision_context("fp32", "cuda"):
                assert torch.get_float32_matmul_precision() == "highest"
            assert torch.get_float32_matmul_precision() == "high"
        finally:
            torch.set_float32_matmul_precision(before[0])
    with precision_context("auto", "cpu") as resolved:
        assert resolved == "fp32" and not torch.is_autocast_enabled("cpu")
        assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before  # CPU: untouched


def test_an_explicit_precision_is_cached_apart(run):
    """``auto`` keeps every evaluation's cache file as it was before precisions existed; an explicit precision
    (``eval --precision fp32`` on a GPU box, whose default is bf16) is cached in a file of its own."""
    from infiloop.errors import UsageError

    auto = run.eval_cache_path("evaluate", {"updates": 4})
    assert "precision" not in run.eval_key("evaluate", {"updates": 4})[0]
    paths = {p: run.eval_cache_path(kind, {**args, "precision": p}) for p in ("fp32", "bf16")
             for kind, args in [("evaluate", {"updates": 4})]}
    assert len({auto, *paths.values()}) == 3
    traj, path = run.evaluate(updates=4, precision="bf16", progress=False)
    assert path == paths["bf16"] and json.loads(str(traj["info"]))["precision"] == "bf16"
    with pytest.raises(UsageError, match="precision must be one of"):
        run.eval_cache_path("budgets", {"budgets": [2], "precision": "half"})
