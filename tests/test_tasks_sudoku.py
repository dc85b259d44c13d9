"""Sudoku data layer: generator validity and uniqueness (checked by an independent exact-cover
solver), augmentations, tokens, CSV validation errors, TaskData files, scoring (TRM's format)."""

import random

import numpy as np
import pytest

from infiloop.cli import cmd_data as main
from infiloop.tasks import DataError, TaskData, exact_accuracy, wrong_cells
from infiloop.tasks import sudoku as S
from infiloop.tasks.sudoku_solver import count_solutions, geometry, propagate, rating, singles_solve


def exact_cover_count(puzzle, n, br, bc, limit=2):
    """Independent checker: Knuth's Algorithm X on dict-of-sets (not the generator's bitmask DFS)."""
    def constraints(r, c, d):
        b = (r // br) * (n // bc) + c // bc
        return [("cell", r, c), ("row", r, d), ("col", c, d), ("box", b, d)]

    rows = {(r, c, d): constraints(r, c, d) for r in range(n) for c in range(n) for d in range(1, n + 1)}
    cols = {}
    for key, cs in rows.items():
        for x in cs:
            cols.setdefault(x, set()).add(key)

    def select(key):
        removed = []
        for j in rows[key]:
            for i in cols[j]:
                for k in rows[i]:
                    if k != j:
                        cols[k].remove(i)
            removed.append(cols.pop(j))
        return removed

    def deselect(key, removed):
        for j in reversed(rows[key]):
            cols[j] = removed.pop()
            for i in cols[j]:
                for k in rows[i]:
                    if k != j:
                        cols[k].add(i)

    for idx, v in enumerate(puzzle):
        if v:
            select((idx // n, idx % n, int(v)))
    found = []

    def solve(partial):
        if not cols:
            found.append(list(partial))
            return len(found) >= limit
        col = min(cols, key=lambda x: len(cols[x]))
        for key in sorted(cols[col]):
            partial.append(key)
            saved = select(key)
            if solve(partial):
                return True
            deselect(key, saved)
            partial.pop()
        return False

    solve([])
    sols = []
    for f in found:
        grid = list(puzzle)
        for r, c, d in f:
            grid[r * n + c] = d
        sols.append(grid)
    return sols


@pytest.mark.parametrize("n,box,blanks,count", [(4, (2, 2), (6, 11), 30), (6, (2, 3), (16, 26), 20),
                                                (9, (3, 3), (45, 56), 4)])
def test_generator_valid_and_unique(n, box, blanks, count):
    g = geometry(n, box)
    s = S.generate(count, g, blanks, seed=7, progress=False)
    assert s.puzzles.shape == (count, n * n)
    assert ((s.blanks >= blanks[0]) & (s.blanks <= blanks[1])).all()
    S.validate(s)  # answers are solutions and agree with the givens
    for p, sol in zip(s.puzzles, s.solutions):
        sols = exact_cover_count(p.tolist(), n, *box)
        assert len(sols) == 1, "generated puzzle must have exactly one solution"
        assert sols[0] == sol.tolist()


def test_generator_is_deterministic_and_independent_of_workers():
    g = geometry(6)
    a = S.generate(12, g, (16, 24), seed=3, workers=1, progress=False)
    b = S.generate(12, g, (16, 24), seed=3, workers=2, progress=False)
    c = S.generate(12, g, (16, 24), seed=4, workers=1, progress=False)
    assert np.array_equal(a.puzzles, b.puzzles) and np.array_equal(a.rating, b.rating)
    assert not np.array_equal(a.puzzles, c.puzzles)


def test_solver_counts_and_rating():
    g = geometry(4)
    assert count_solutions([0] * 16, g, limit=2)[0] == 2
    full = S.generate(1, g, (0, 0), progress=False).solutions[0].tolist()
    assert count_solutions(full, g)[0] == 1 and rating(full, g) == 0
    bad = list(full)
    bad[1] = bad[0]  # two equal digits in row 1: no solution
    assert count_solutions(bad, g)[0] == 0


@pytest.mark.parametrize("n,box", [(9, (3, 3)), (6, (2, 3)), (4, (2, 2))])
def test_augmentations_keep_validity_and_uniqueness(n, box):
    g = geometry(n, box)
    s = S.generate(3, g, (n * n // 2, n * n // 2 + 2), seed=1, progress=False)
    aug, base, k = S.augment(s, 5, np.random.default_rng(0))
    assert len(aug) == 18 and (k[base == 0] == np.arange(6)).all()
    assert np.array_equal(aug.puzzles[k == 0], s.puzzles)
    S.validate(aug)
    assert (aug.blanks == s.blanks[base]).all()
    assert not np.array_equal(aug.puzzles[k > 0], s.puzzles[base[k > 0]])
    for p, sol in zip(aug.puzzles[:4], aug.solutions[:4]):
        assert exact_cover_count(p.tolist(), n, *box) == [sol.tolist()]


def test_non_square_boxes_never_transpose():
    g = geometry(6)
    perm, dmap = S.random_transforms(200, g, np.random.default_rng(0))
    rows_of_src = perm.reshape(200, 6, 6) // 6
    # every output row takes all its cells from one input row: no transposition for 2x3 boxes
    assert (rows_of_src == rows_of_src[:, :, :1]).all()
    assert (dmap[:, 0] == 0).all() and (np.sort(dmap[:, 1:], axis=1) == np.arange(1, 7)).all()


def test_tokens_and_taskdata_roundtrip(tmp_path):
    g = geometry(9)
    s = S.generate(3, g, (45, 50), progress=False)
    d = S.to_taskdata("sudoku-test", s)
    assert d.vocab_size == 11 and d.grid == (9, 9) and d.box == (3, 3)
    assert set(np.unique(d.inputs)) <= set(range(1, 11)) and d.labels.min() >= 2
    assert ((d.inputs == 1) == (s.puzzles == 0)).all()
    assert np.array_equal(S.decode(d.labels), s.solutions)
    p = d.save(tmp_path / "x.npz")
    with np.load(p, allow_pickle=False) as z:
        assert "header" in z.files
    e = TaskData.load(p)
    assert np.array_equal(e.inputs, d.inputs) and e.inputs.dtype == np.int32
    assert np.array_equal(e.meta["blanks"], d.meta["blanks"]) and e.box == (3, 3)
    sub = e.subset([2, 0])
    assert np.array_equal(sub.labels[1], d.labels[0]) and len(sub.meta["rating"]) == 2
    x, y = S.augment_tokens(d.inputs, d.labels, (3, 3), np.random.default_rng(1))
    assert S.is_valid_solution(y, x, g).all()
    # a view moves cells but keeps each puzzle's number of blanks and the givens' consistency with y
    assert np.array_equal((x == 1).sum(1), (d.inputs == 1).sum(1))
    assert ((x == y) | (x == 1)).all() and not np.array_equal(x, d.inputs)


def test_scoring():
    labels = np.array([[2, 3, 4], [2, 3, 4], [0, 3, 4]])
    pred = np.array([[2, 3, 4], [2, 9, 9], [7, 3, 4]])
    assert exact_accuracy(pred, labels).tolist() == [True, False, True]  # label 0 is ignored
    assert wrong_cells(pred, labels).tolist() == [0, 2, 0]
    assert wrong_cells(pred, labels, mask=np.array([[1, 1, 1], [0, 1, 0], [1, 1, 1]])).tolist() == [0, 1, 0]
    # the torch path (evaluation, training) counts the same cells, on the tensors' device
    import torch

    from infiloop.tasks.scoring import count_wrong

    counted = count_wrong(torch.from_numpy(pred), torch.from_numpy(labels))
    assert isinstance(counted, torch.Tensor) and counted.tolist() == [0, 2, 0]


def test_plain_names():
    from infiloop.paths import is_plain_name

    assert all(is_plain_name(n) for n in ("tiny", "02_depth_scaling", "fig-a.png", "traj-0123abcd.npz"))
    assert not any(is_plain_name(n) for n in ("", ".hidden", "-x", "../escape", "a/b", "tiny\n", "a b"))


GOOD_Q = "..3.3..2" + "." * 8
GOOD_A = "1234341221434321"


def _csv(tmp_path, rows, header="source,question,answer,rating"):
    p = tmp_path / "s.csv"
    p.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return p


@pytest.mark.parametrize("row,fault", [
    (f"x,{GOOD_Q[:-1]},{GOOD_A},0", "question has 15 characters"),
    (f"x,{GOOD_Q},{GOOD_A[:-1]}5,0", "answer has character '5'"),
    (f"x,{GOOD_Q[:-1]}x,{GOOD_A},0", "question has character 'x' at position 16"),
    (f"x,{GOOD_Q},1234341221434312,0", "not a permutation"),
    (f"x,4{GOOD_Q[1:]},{GOOD_A},0", "given 4 at row 1, column 1 disagrees"),
    (f"x,{GOOD_Q},{GOOD_A},hard", "rating 'hard' is not an integer"),
    (f"x,{GOOD_Q},{GOOD_A}", "3 fields, expected 4"),
])
def test_bad_rows_name_file_line_and_fault(tmp_path, row, fault):
    p = _csv(tmp_path, [f"ok,{GOOD_Q},{GOOD_A},1", row])
    with pytest.raises(DataError) as e:
        S.read_csv(p)
    assert str(e.value).startswith(f"{p}:3: ") and fault in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(DataError, match="header"):
        S.read_csv(_csv(tmp_path, [f"x,{GOOD_Q},{GOOD_A},0"], header="a,b,c,d"))
    with pytest.raises(DataError, match="no puzzle rows"):
        S.read_csv(_csv(tmp_path, []))
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(DataError, match="empty file"):
        S.read_csv(tmp_path / "e.csv")
    with pytest.raises(DataError, match="no such file"):
        S.read_csv(tmp_path / "missing.csv")
    ok = S.read_csv(_csv(tmp_path, [f"x,{GOOD_Q},{GOOD_A},3", f"y,{GOOD_Q.replace('.', '0')},{GOOD_A},0"]))
    assert len(ok) == 2 and ok.rating.tolist() == [3, 0] and (ok.puzzles[0] == ok.puzzles[1]).all()


def test_cli_generate_validate(tmp_path, capsys):
    out1, out2 = tmp_path / "a.csv", tmp_path / "b.csv"
    for out in (out1, out2):
        assert main(["generate", "sudoku", "--n", "20", "--side", "6", "--blanks", "18-24", "--seed", "5",
                     "--out", str(out), "--quiet"]) == 0
    assert out1.read_bytes() == out2.read_bytes()
    assert main(["validate", "sudoku", str(out1)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "20 rows" in line and "6x6" in line and "blanks 18-" in line
    text = out1.read_text().splitlines()
    text[5] = text[5][:-3] + "9,0"  # corrupt the answer's last cell
    out1.write_text("\n".join(text) + "\n")
    assert main(["validate", "sudoku", str(out1)]) == 1
    assert f"{out1}:6:" in capsys.readouterr().err


def test_python_random_seed_strings_are_stable():
    assert random.Random("sudoku/1").random() == random.Random("sudoku/1").random()


# ----------------------------------------------------------------------------- puzzles that need search

# Naked singles alone fill no cell of this puzzle; with hidden singles, propagation solves it.
HIDDEN_SINGLES = "000010039001607000004280500080000040000030200023001000008052100045068070206900000"
# A. Inkala's "world's hardest Sudoku" (2012): singles fill nothing, search is needed.
INKALA = "800000000003600000070090200050007000000045700000100030001000068008500010090000400"


def naked_singles_only(grid, g):
    """Independent check: fill cells with one candidate (sets, not bitmasks) until none is left."""
    n, cells = g.n, list(grid)

    def peers(i):
        r, c = divmod(i, n)
        box = (r // g.br, c // g.bc)
        return [j for j in range(n * n) if j != i and (j // n == r or j % n == c
                                                    or ((j // n) // g.br, (j % n) // g.bc) == box)]

    changed = True
    while changed:
        changed = False
        for i in range(n * n):
            if not cells[i]:
                left = set(range(1, n + 1)) - {cells[j] for j in peers(i)}
                if len(left) == 1:
                    cells[i], changed = left.pop(), True
    return cells


def test_propagation_needs_hidden_singles_for_this_puzzle():
    g = geometry(9)
    p = [int(c) for c in HIDDEN_SINGLES]
    assert naked_singles_only(p, g) == p  # naked singles make no progress
    out, solved = propagate(p, g)
    assert solved and out == exact_cover_count(p, 9, 3, 3)[0]
    assert singles_solve(p, g)


def test_propagation_fills_nothing_in_a_hard_puzzle():
    g = geometry(9)
    p = [int(c) for c in INKALA]
    out, solved = propagate(p, g)
    assert not solved and out == p and not singles_solve(p, g)
    assert rating(p, g) > 0


def test_propagation_of_solved_and_contradictory_grids():
    g = geometry(6)
    full = S.generate(1, g, (0, 0), progress=False).solutions[0].tolist()
    assert propagate(full, g) == (full, True)
    bad = list(full)
    bad[1] = bad[0]
    assert not singles_solve(bad, g)
    assert not singles_solve([1, 1] + [0] * 34, g)


def test_propagation_result_is_the_unique_solution_when_it_solves():
    g = geometry(6)
    s = S.generate(30, g, (16, 26), seed=5, progress=False)
    for p, sol in zip(s.puzzles.tolist(), s.solutions.tolist()):
        out, solved = propagate(p, g)
        assert all(a in (0, b) for a, b in zip(out, sol))  # every filled cell is right
        assert solved == (0 not in out) and (not solved or out == sol)


def test_selection_keeps_puzzles_that_need_search():
    g = geometry(6)
    plain = S.generate(4, g, (22, 28), seed=2, progress=False)
    hard = S.generate(4, g, (22, 28), seed=2, progress=False, select=S.Selection(needs_search=True))
    assert plain.drawn.tolist() == [1, 1, 1, 1] and (hard.drawn >= 1).all()
    assert not S.singles_solvable(hard).any()
    S.validate(hard)
    for i, (p, sol) in enumerate(zip(hard.puzzles, hard.solutions)):
        assert exact_cover_count(p.tolist(), 6, 2, 3) == [sol.tolist()]
        if hard.drawn[i] == 1:  # the first candidate of puzzle i's stream is the unselected puzzle i
            assert np.array_equal(p, plain.puzzles[i])
    rated = S.generate(3, g, (22, 28), seed=2, progress=False, select=S.Selection(min_rating=2))
    assert (rated.rating >= 2).all()
    easy = S.generate(3, g, (22, 28), seed=2, progress=False, select=S.Selection(needs_search=False))
    assert S.singles_solvable(easy).all()
    again = S.generate(4, g, (22, 28), seed=2, workers=2, progress=False, select=S.Selection(needs_search=True))
    assert np.array_equal(again.puzzles, hard.puzzles)


def test_selection_that_nothing_passes_says_so():
    with pytest.raises(ValueError, match="relax the selection"):
        S.generate(1, geometry(4), (0, 0), progress=False, select=S.Selection(needs_search=True), max_candidates=5)


def test_difficulty_summary():
    g = geometry(9)
    s = S.SudokuSet(g, np.array([[int(c) for c in INKALA], [int(c) for c in HIDDEN_SINGLES]], np.int8),
                    np.zeros((2, 81), np.int8), np.array([40, 0], np.int32))
    d = S.difficulty(s)
    assert d["puzzles"] == 2 and d["singles"] == 0.5 and d["blanks"] == [52, 52, 52, 60] and d["rating"][-1] == 40
    assert S.from_taskdata(S.to_taskdata("x", s)).puzzles.tolist() == s.puzzles.tolist()
