"""Depth-fair tables (issue 45, item 1): a validation split of held-out training-distribution puzzles, disjoint from
the training and the test set; each connection read at its training depth, at matched compute (the same block
applications) and at its best depth chosen on the validation split, never on the test set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from infiloop.analysis import depth_fair
from infiloop.experiments.settings import profiles
from infiloop.tasks import validation
from infiloop.tasks.base import DataError, TaskData


@pytest.mark.parametrize("task", ["sudoku", "maze", "prefix_sums"])
def test_the_validation_split_is_disjoint_from_training_and_test(task, tmp_path):
    data = profiles.data_profile("smoke")
    path = validation.build_validation(task, data, tmp_path)
    folder = path.parent
    train, test, valid = (TaskData.load(folder / f"{s}.npz") for s in ("train", "test", "valid"))
    assert len(valid) == data.tasks[task]["n_test"] and valid.grid == train.grid
    checked = validation.audit_validation(task, train, test, valid)
    assert checked["train"].ok and checked["test"].ok  # up to the task's symmetries (tasks/audit.py)
    rows = {r.tobytes() for d in (train, test) for r in d.inputs}
    assert not any(r.tobytes() in rows for r in valid.inputs)  # and not one identical row
    record = json.loads((folder / "valid.json").read_text())
    assert record["rows"] == len(valid) and "valid" in record["stream"]
    assert "valid" not in json.loads((folder / "build.json").read_text())["files"]  # no part of the data's build
    again = validation.build_validation(task, data, tmp_path)  # reused, not drawn again
    assert again == path and np.array_equal(TaskData.load(again).inputs, valid.inputs)


def test_a_planted_overlap_with_the_test_set_is_caught(tmp_path):
    data = profiles.data_profile("smoke")
    folder = validation.build_validation("sudoku", data, tmp_path).parent
    train, test, valid = (TaskData.load(folder / f"{s}.npz") for s in ("train", "test", "valid"))
    planted = valid.subset(np.arange(len(valid)))
    planted.inputs[5], planted.labels[5] = test.inputs[3], test.labels[3]
    checked = validation.audit_validation("sudoku", train, test, planted)
    assert checked["train"].ok and checked["test"].test_rows == [5]
    with pytest.raises(DataError, match="1 validation sudoku puzzles equal test puzzles .*must be disjoint"):
        validation._refuse_leaks("sudoku", folder, checked)
    # a transformed copy (a relabelling of the digits) is caught as well: the audit works up to the group
    relabel = np.array([0, 1, 3, 2, 5, 4])  # tokens: 0 pad, 1 blank, digits 2..5
    planted.inputs[6], planted.labels[6] = relabel[test.inputs[4]], relabel[test.labels[4]]
    assert validation.audit_validation("sudoku", train, test, planted)["test"].test_rows == [5, 6]


def test_tasks_without_a_validation_split_say_why(tmp_path):
    with pytest.raises(DataError, match="no validation split: arc1: every training task .* trained on"):
        validation.build_validation("arc1", profiles.data_profile("smoke"), tmp_path)
    assert "published training set is trained on whole" in validation.unavailable(
        "maze", {"source": "hub", "repo": "x/y", "size": 30})
    assert validation.unavailable("sudoku", {"source": "hub", "repo": "x/y"}) == ""


def test_matched_compute_counts_block_applications():
    # the same H, L and segments: matched compute is the training depth (L + 1 = 3 block applications per update)
    assert depth_fair.matched_depths({"a": (16, 2), "b": (16, 2)}) == (48, {"a": 16, "b": 16})
    # a connection with more inner updates per outer update gets fewer outer updates for the same block applications
    assert depth_fair.matched_depths({"a": (16, 2), "b": (16, 5)}) == (96, {"a": 32, "b": 16})
    assert depth_fair.matched_depths({"a": (16, 2), "b": (16, 5)}, budget=60) == (60, {"a": 20, "b": 10})
    with pytest.raises(ValueError, match="less than one outer update of b"):
        depth_fair.matched_depths({"a": (16, 2), "b": (16, 5)}, budget=4)


def _traj(acc_by_update: list[float], n: int = 40, seed: int = 0) -> dict:
    """A trajectory with recorded updates 1..K whose exact accuracy at update k is ``acc_by_update[k - 1]``."""
    rng = np.random.default_rng(seed)
    correct = np.zeros((len(acc_by_update), n), bool)
    for k, a in enumerate(acc_by_update):
        correct[k, rng.permutation(n)[:round(a * n)]] = True
    return {"updates": np.arange(1, len(acc_by_update) + 1), "correct": correct}


def test_the_best_depth_is_chosen_on_validation_not_on_test():
    valid_curve = [0.1, 0.3, 0.5, 0.5, 0.9, 0.6, 0.6, 0.4]  # best at update 5
    test_curve = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.95]  # the test set would choose update 8
    valid = [_traj(valid_curve, seed=s) for s in range(3)]
    test = [_traj(test_curve, seed=10 + s) for s in range(3)]
    assert depth_fair.best_on_validation(valid) == (5, pytest.approx(0.9))
    assert depth_fair.best_on_validation(valid, max_depth=4) == (3, pytest.approx(0.5))  # ties: the shallowest
    cells = depth_fair.fair_cells(test, valid, training_depth=2, matched=4, budget=12)
    assert [cells[c].depth for c in depth_fair.COLUMNS] == [2, 4, 5]
    assert cells["best on validation"].score.value == pytest.approx(0.5)  # the test accuracy at update 5
    assert cells["best on validation"].text().startswith("50.0 % [") and "@ 5 (validation 90.0 %)" in \
        cells["best on validation"].text()
    assert "12 block applications" in cells["matched compute"].text()
    none = depth_fair.fair_cells(test, None, 2, 4, 12, "arc1: no held-out puzzles")
    assert none["best on validation"].text() == "not available: arc1: no held-out puzzles"


def test_column_effects_pair_the_same_puzzles_at_each_columns_depths():
    a = depth_fair.fair_cells([_traj([0.2, 0.8, 0.8], seed=1)], [_traj([0.1, 0.9, 0.2], seed=2)], 1, 1, 3)
    b = depth_fair.fair_cells([_traj([0.2, 0.4, 0.6], seed=3)], [_traj([0.1, 0.2, 0.7], seed=4)], 1, 1, 3)
    eff = depth_fair.column_effects(a, b)
    assert eff["training depth"].value == pytest.approx(0.0)
    assert eff["best on validation"].value == pytest.approx(0.8 - 0.6)  # a at its update 2, b at its update 3
    cols, rows = depth_fair.fair_table({("sudoku", "x"): a}, {"x": "X"})
    assert cols == ["task", "model", *depth_fair.COLUMNS] and rows[0][:2] == ["sudoku", "X"]
    assert depth_fair.effects_text(eff).startswith("at matched compute: +0.0 [") and " points points" not in \
        depth_fair.effects_text(eff)


def test_a_run_evaluates_its_validation_split_apart(smoke_run):
    valid = smoke_run.test_data("valid")
    assert valid.name == "sudoku-valid" and smoke_run.validation_unavailable() == ""
    traj, path = smoke_run.evaluate(updates=3, every=1, limit=8, test_set="valid", progress=False)
    _, test_path = smoke_run.evaluate(updates=3, every=1, limit=8, progress=False)
    assert path != test_path and json.loads(str(traj["info"]))["data"] == "sudoku-valid"
