"""Tasks that extrapolate in size (issue 47; Bansal et al. 2022, arXiv 2202.05826): prefix sums and mazes trained at
one size with a named test set per size, their oracles, the leakage check, and run hashes the test sizes leave alone."""

import numpy as np
import pytest

from infiloop.experiments.settings.profiles import data_profile
from infiloop.experiments.settings.recipes import config_hash, resolve_config
from infiloop.tasks import DataError, TaskData, build, cells_to_fill, load, maze, prefix_sums, registry
from infiloop.tasks.datasets import audit_folder
from infiloop.tasks.extrapolation import leaking_test_sets, maze_min_path, named_sizes, size_set_name


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return root, {t: build(t, data_profile("smoke"), root=root, verbose=False) for t in ("prefix_sums", "maze")}


def test_prefix_sums_has_a_named_test_set_per_length_and_its_oracle(built):
    root, files = built
    cfg = data_profile("smoke").tasks["prefix_sums"]
    train = TaskData.load(files["prefix_sums"]["train"])
    assert train.grid == (1, cfg["train_length"]) and len(train) == cfg["n_train"]
    for n in cfg["test_lengths"]:
        d = load("prefix_sums", data_profile("smoke"), size_set_name(n), root=root)
        assert d.grid == (1, n) and len(d) == cfg["n_test"] and d.vocab_size == 3
        bits = d.inputs.astype(np.int64) - 1
        slow = np.array([[sum(row[: i + 1]) % 2 for i in range(n)] for row in bits])
        assert np.array_equal(d.labels - 1, slow)  # the running parity, by hand
        assert cells_to_fill("prefix_sums", d.inputs).all()  # every position is decided and scored
    same = load("prefix_sums", data_profile("smoke"), size_set_name(cfg["train_length"]), root=root)
    assert np.array_equal(same.inputs, load("prefix_sums", data_profile("smoke"), "test", root=root).inputs)
    with pytest.raises(DataError, match="no test set 'test_99'; its named test sets: test_10, test_20, test_40"):
        load("prefix_sums", data_profile("smoke"), "test_99", root=root)


def test_maze_test_sets_at_larger_sizes_are_valid_mazes_with_scaled_paths(built):
    root, files = built
    cfg = data_profile("smoke").tasks["maze"]
    assert named_sizes("maze", cfg, registry.REGISTRY["maze"].size_setting) == [8, 12]
    assert maze_min_path(cfg, 12) == 18 and maze_min_path(cfg, 8) == 12
    for k in cfg["test_sizes"]:
        d = load("maze", data_profile("smoke"), size_set_name(k), root=root)
        assert d.grid == (k, k) and len(d) == cfg["n_test"]
        s = maze.from_taskdata(d)
        for q, a in zip(s.questions, s.answers):
            fault, length = maze.check_row(q, a)  # the oracle: the labelled path is a unique shortest path
            assert not fault and length >= maze_min_path(cfg, k)
    assert np.array_equal(load("maze", data_profile("smoke"), "test_8", root=root).inputs,
                          load("maze", data_profile("smoke"), "test", root=root).inputs)


def test_no_test_string_or_maze_is_a_training_one(built):
    root, files = built
    for task, f in files.items():
        train = TaskData.load(f["train"])
        named = {k: TaskData.load(p) for k, p in f.items() if k.startswith("test_") and k != "test_csv"}
        assert named and not any(leaking_test_sets(train, named, registry.task(task).audit).values())
        assert audit_folder(f["train"].parent).ok
    # the check finds a planted leak: two training strings copied into the held-out set
    train = TaskData.load(files["prefix_sums"]["train"])
    test = TaskData.load(files["prefix_sums"]["test"])
    planted = TaskData("t", np.concatenate([test.inputs, train.inputs[[3, 7]]]),
                       np.concatenate([test.labels, train.labels[[3, 7]]]), test.grid, 3)
    res = registry.task("prefix_sums").audit(train, planted)
    assert res.test_rows == [len(test), len(test) + 1] and res.train_rows == [3, 7]


def test_held_out_strings_skip_training_strings_when_drawn_at_random():
    train, tests = prefix_sums.split(300, 50, 24, (24, 48), seed=1)  # 24 bits: drawn with replacement
    seen = {r.tobytes() for r in train.inputs}
    assert len(tests[24]) == 50 and not any(r.tobytes() in seen for r in tests[24].inputs)
    with pytest.raises(ValueError, match="do not exist"):
        prefix_sums.split(250, 10, 8, (8,))


@pytest.mark.usefixtures("native_mode")  # pinned before the numeric mode (conftest.py)
def test_test_sizes_change_no_run_hash():
    # smoke's maze runs as they were before their data had test_sizes (commit 6e6e980)
    before = {"carry_last": "28c40064dd", "infiloop": "9708ce6698", "fprm": "6282376ade"}
    assert {r: config_hash(resolve_config("maze", r, "smoke")) for r in before} == before
    base = resolve_config("prefix_sums", "carry_last_no_recall", "smoke")
    other = resolve_config("prefix_sums", "carry_last_no_recall", "smoke", {"data.test_lengths": [10, 80]})
    assert other["data"]["test_lengths"] == [10, 80] and config_hash(other) == config_hash(base)
    assert config_hash(resolve_config("prefix_sums", "carry_last_no_recall", "smoke", {"data.n_train": 100})) \
        != config_hash(base)
    with pytest.raises(DataError, match="test_lengths must be distinct whole numbers"):
        named_sizes("prefix_sums", {"test_lengths": [10, 10]}, "test_lengths")
