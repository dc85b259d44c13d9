"""Maze data layer: generated mazes have a unique shortest path of the requested length (checked
by an independent numpy distance relaxation), CSV validation errors, tokens (the paper's benchmarks; TRM's format)."""

import numpy as np
import pytest

from infiloop.cli import cmd_data as main
from infiloop.tasks import DataError
from infiloop.tasks import maze as M


def relax_distances(open_mask: np.ndarray, src: tuple[int, int]) -> np.ndarray:
    """Independent checker: Bellman-Ford style relaxation on the whole grid until a fixed point."""
    inf = 10**6
    d = np.full(open_mask.shape, inf, dtype=np.int64)
    d[src] = 0
    while True:
        p = np.pad(d, 1, constant_values=inf)
        nb = np.minimum.reduce([p[:-2, 1:-1], p[2:, 1:-1], p[1:-1, :-2], p[1:-1, 2:]]) + 1
        new = np.where(open_mask, np.minimum(d, nb), inf)
        if np.array_equal(new, d):
            return d
        d = new


def independent_check(q: str, a: str, size: int) -> int:
    Q = np.array(list(q)).reshape(size, size)
    A = np.array(list(a)).reshape(size, size)
    open_mask = Q != "#"
    s, g = tuple(np.argwhere(Q == "S")[0]), tuple(np.argwhere(Q == "G")[0])
    ds, dg = relax_distances(open_mask, s), relax_distances(open_mask, g)
    d = int(ds[g])
    on_some_shortest = open_mask & (ds + dg == d)
    assert on_some_shortest.sum() == d + 1, "shortest path must be unique"
    labelled = (A == "o") | (A == "S") | (A == "G")
    assert np.array_equal(labelled, on_some_shortest), "label must be the shortest path"
    assert ((A == Q) | ((Q == " ") & (A == "o"))).all()
    return d


@pytest.mark.parametrize("size,min_path,count", [(30, 111, 6), (12, 24, 30), (9, 10, 30), (7, 6, 20)])
def test_generated_mazes_are_valid(size, min_path, count):
    s = M.generate(count, size, min_path, seed=2, progress=False)
    for q, a, pl in zip(s.questions, s.answers, s.path_length):
        assert len(q) == size * size and q.count("S") == 1 and q.count("G") == 1 and "o" not in q
        assert independent_check(q, a, size) == pl >= min_path
    M.validate(s)


def test_generator_deterministic_and_csv_roundtrip(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for out in (a, b):
        assert main(["generate", "maze", "--n", "10", "--size", "12", "--min-path", "24", "--seed", "1",
                     "--out", str(out), "--quiet"]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert main(["validate", "maze", str(a)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "10 rows" in line and "12x12" in line and "path length" in line
    s = M.read_csv(a)
    assert (s.path_length >= 24).all()


def test_tokens():
    s = M.generate(4, 10, 12, progress=False)
    d = M.to_taskdata("maze", s)
    assert d.vocab_size == 6 and d.grid == (10, 10)
    assert M.decode(d.inputs) == s.questions and M.decode(d.labels) == s.answers
    assert set(np.unique(d.labels)) <= {1, 2, 3, 4, 5}
    assert (d.labels == 5).sum(1).tolist() == (s.path_length - 1).tolist()
    v = M.to_taskdata("maze", s, dihedral_views=True)
    assert len(v) == 32 and (v.meta["path_length"] == np.tile(s.path_length, 8)).all()


Q = ("S  #"
     " # #"
     " #  "
     "   G")


def _row(q, a):
    return f"m,{q},{a},0"


def _csv(tmp_path, *rows):
    p = tmp_path / "m.csv"
    p.write_text("source,question,answer,rating\n" + "\n".join(rows) + "\n")
    return p


GOOD_A = ("S  #"
          "o# #"
          "o#  "
          "oooG")


def test_good_small_maze(tmp_path):
    other_shortest = "Soo#" " #o#" " #o " "  oG"  # any shortest path is a valid label
    s = M.read_csv(_csv(tmp_path, _row(Q, GOOD_A), _row(Q, other_shortest)))
    assert s.path_length.tolist() == [6, 6]


@pytest.mark.parametrize("a,fault", [
    ("S  #" "o# #" "o#  " "ooxG", "answer has character 'x'"),
    ("So #" "o# #" "o#  " "oooG", "has 6 'o' cells, a shortest path has 5"),
    ("S  #" "o# #" "o#oo" " o G", "do not form a path"),
    ("S  o" "o# #" "o#  " "o oG", "answer differs from the question at row 1, column 4"),
])
def test_bad_answers(tmp_path, a, fault):
    p = _csv(tmp_path, _row(Q, GOOD_A), _row(Q, a))
    with pytest.raises(DataError) as e:
        M.read_csv(p)
    assert str(e.value).startswith(f"{p}:3: ") and fault in str(e.value)


def test_bad_questions(tmp_path):
    with pytest.raises(DataError, match="exactly one S and one G"):
        M.read_csv(_csv(tmp_path, _row(Q.replace("G", " "), GOOD_A.replace("G", " "))))
    walled = "S  #" " # #" " ###" "  #G"
    with pytest.raises(DataError, match="not reachable"):
        M.read_csv(_csv(tmp_path, _row(walled, walled)))
    with pytest.raises(DataError, match=r"m.csv:2: question has 15 characters"):
        M.read_csv(_csv(tmp_path, _row(Q[:-1], GOOD_A)))


def test_dead_ends_and_selection_by_them():
    # open cells with one open neighbour, S and G not counted: (0,0), (0,3), (2,3) and (3,1)
    assert M.dead_ends(" S  "
                       "## #"
                       "G   "
                       "# ##") == 4
    plain = M.generate(20, 12, 24, seed=3, progress=False)
    counts = [M.dead_ends(q) for q in plain.questions]
    k = int(np.quantile(counts, 0.75))
    hard = M.generate(20, 12, 24, seed=3, progress=False, min_dead_ends=k)
    assert min(M.dead_ends(q) for q in hard.questions) >= k
    for i, q in enumerate(hard.questions):  # mazes that already passed are the unselected ones
        if counts[i] >= k:
            assert q == plain.questions[i]
    M.validate(hard)
    d = M.difficulty(hard)
    assert d["mazes"] == 20 and d["dead_ends"][0] >= k and d["path_length"][0] >= 24 and 0 < d["path_share"][1] < 1
    back = M.from_taskdata(M.to_taskdata("m", hard, dihedral_views=True, record_dead_ends=True))
    assert back.questions == hard.questions and (back.path_length == hard.path_length).all()
