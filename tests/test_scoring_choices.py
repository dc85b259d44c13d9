"""Which checkpoint was scored and how much is recall of a puzzle's identity (issue 45, items 3 and 4): an evaluation
records the weights it used (the final EMA or the last step's, with the step) and the puzzle ids it gave the
prefix (own, blank or another's); each choice other than the default is cached apart, the default keeps its file."""

import json
import shutil

import numpy as np
import pytest

from infiloop.errors import UsageError
from infiloop.evaluation import PUZZLE_IDS, replaced_puzzle_ids
from infiloop.tasks.base import DataError, TaskData


def _data(ids, n_puzzles):
    n = len(ids)
    return TaskData("t", np.ones((n, 4), np.uint8), np.ones((n, 4), np.uint8), (2, 2), 3,
                    puzzle_ids=np.asarray(ids, np.int32), n_puzzles=n_puzzles)


def test_puzzle_ids_replaced_blank_or_by_another_puzzles():
    d = _data(np.arange(1, 10).repeat(3), 10)
    assert replaced_puzzle_ids(d, "own") is d
    assert (replaced_puzzle_ids(d, "blank").puzzle_ids == 0).all()
    r = replaced_puzzle_ids(d, "random")
    assert (r.puzzle_ids != d.puzzle_ids).all() and ((r.puzzle_ids >= 1) & (r.puzzle_ids <= 9)).all()
    assert np.array_equal(r.puzzle_ids, replaced_puzzle_ids(d, "random").puzzle_ids)  # seeded
    assert len(np.unique(r.puzzle_ids)) > 3 and np.array_equal(d.inputs, r.inputs)
    one = _data([1, 1], 2)  # one puzzle id (Sudoku, Maze): no other to give
    assert (replaced_puzzle_ids(one, "random").puzzle_ids == 1).all()
    with pytest.raises(ValueError, match="puzzle_ids must be one of own, blank, random"):
        replaced_puzzle_ids(d, "shuffled")
    assert PUZZLE_IDS == ("own", "blank", "random")


def test_an_evaluation_records_and_caches_its_weights_and_ids(smoke_run):
    run = smoke_run
    default, path = run.evaluate(updates=4, every=1, limit=8, progress=False)
    again = run._evaluate_key(updates=4, every=1, limit=8, weights="auto", puzzle_ids="own")[2]
    assert again == path  # the defaults keep the file every evaluation cached before had
    info = json.loads(str(default["info"]))
    assert info["weights"] == {"kind": "ema", "step": run.summary()["step"], "file": "model.safetensors"}
    assert info["puzzle_ids"] == "own"
    last, last_path = run.evaluate(updates=4, every=1, limit=8, progress=False, weights="last")
    assert last_path != path and json.loads(str(last["info"]))["weights"]["kind"] == "last"
    # the EMA and the last step's weights are different weights (smoke's EMA rate is below 1)
    a, b = run.load_model(), run.load_model(weights="last")
    assert any(not np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.state_dict().values(),
                                                                         b.state_dict().values()))
    blank, blank_path = run.evaluate(updates=4, every=1, limit=8, progress=False, puzzle_ids="blank")
    assert blank_path not in (path, last_path)
    # 4x4 Sudoku at smoke has no puzzle prefix: its ids carry nothing, so the ablation changes nothing
    assert np.array_equal(blank["correct"], default["correct"])
    assert np.array_equal(blank["state_change"], default["state_change"])
    with pytest.raises(UsageError, match="weights must be one of auto, ema, last, best"):
        run.evaluate(updates=4, limit=8, weights="worst")


def test_the_last_steps_weights_need_the_checkpoint(smoke_run, tmp_path):
    from infiloop.experiments.store.runs import load_run

    copy = tmp_path / smoke_run.dir.name
    shutil.copytree(smoke_run.dir, copy)
    for f in copy.glob("checkpoint*.pt"):
        f.unlink()
    run = load_run(copy)
    with pytest.raises(DataError, match="no checkpoint.pt .*--weights auto scores the final weights"):
        run.load_model(weights="last")
    run.load_model()  # the final weights are still there
    run.config["train"]["ema"] = 0.0
    with pytest.raises(UsageError, match="trained without a weight EMA"):
        run.weights_used("ema")
    assert run.weights_used() == {"kind": "last", "step": run.summary()["step"], "file": "model.safetensors"}
