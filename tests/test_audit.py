"""Leakage audits (infiloop/tasks/audit.py, `data audit`): the canonical forms are invariant over the augmentation
groups and tell orbits apart (checked against brute force over the whole group), a planted symmetric copy of a
training puzzle is found and its rows named, the generated profiles are clean, and build.json records the
seeds of every draw."""

import itertools
import json
import random
import re

import numpy as np
import pytest

from infiloop.cli import cmd_data as main
from infiloop.experiments.settings.profiles import data_profile
from infiloop.tasks import TaskData, arc, build, maze, sudoku
from infiloop.tasks import audit as A
from infiloop.tasks import sudoku_canonical as C
from infiloop.tasks import sudoku_solver as solver
from infiloop.tasks.base import dihedral
from infiloop.tasks.datasets import audit_folder


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _relabel(x: np.ndarray) -> np.ndarray:
    lut, nxt = np.zeros(10, np.int8), 1
    for v in x:
        if v and not lut[v]:
            lut[v], nxt = nxt, nxt + 1
    return lut[x]


def _brute_canonical(grid: np.ndarray, g) -> bytes:
    """The least relabelled grid over every spatial transform of the group, enumerated one by one."""
    n = g.n
    x = grid.reshape(n, n)
    rows, cols = C.axis_perms(n // g.br, g.br), C.axis_perms(n // g.bc, g.bc)
    return min(_relabel(src[rp][:, cp].reshape(-1)).tobytes()
               for src in ([x, x.T] if g.br == g.bc else [x]) for rp in rows for cp in cols)


def _set(n, box, blanks, count, seed):
    return sudoku.generate(count, sudoku.geometry(n, box), blanks, seed, workers=1, progress=False)


def test_group_sizes():
    assert A.sudoku_group_size(sudoku.geometry(4)) == 128
    assert A.sudoku_group_size(sudoku.geometry(6)) == 3456  # 2x3 boxes: no transposition
    assert A.sudoku_group_size(sudoku.geometry(9)) == 2 * 6 ** 8 == 3_359_232
    assert len(C.axis_perms(3, 3)) == 6 ** 4 and len(set(map(tuple, C.axis_perms(2, 3)))) == 72


@pytest.mark.parametrize("n,box,blanks,count", [(4, (2, 2), (4, 12), 40), (6, (2, 3), (8, 28), 6)])
def test_sudoku_canonical_is_the_least_grid_of_the_orbit(n, box, blanks, count):
    """Exact: equal to brute force over the whole group (128 and 3,456 transforms), for puzzles and solutions."""
    s = _set(n, box, blanks, count, 3)
    for grids in (s.puzzles, s.solutions):
        canon = A.sudoku_canonical(grids, s.g)
        assert [c.tobytes() for c in canon] == [_brute_canonical(x, s.g) for x in grids]


@pytest.mark.parametrize("n,box,count", [(4, (2, 2), 60), (6, (2, 3), 60), (9, (3, 3), 3)])
def test_sudoku_canonical_and_invariants_are_invariant(n, box, count):
    """The same canonical form and invariant for random members of the augmentation group (sudoku.random_transforms,
    which augment and augment_tokens apply), and different ones for puzzles of different orbits."""
    g = sudoku.geometry(n, box)
    blanks = {4: (5, 10), 6: (14, 24), 9: (45, 55)}[n]
    s = _set(n, box, blanks, count, 1)
    rng = np.random.default_rng(7)
    for grids in (s.puzzles, s.solutions):
        canon, inv = A.sudoku_canonical(grids, g), A.sudoku_invariants(grids, g)
        for _ in range(2 if n == 9 else 4):
            perm, dmap = sudoku.random_transforms(len(grids), g, rng)
            moved = sudoku.apply_transforms(grids, perm, dmap)
            assert not np.array_equal(moved, grids)
            assert np.array_equal(A.sudoku_canonical(moved, g), canon)
            assert A.sudoku_invariants(moved, g) == inv
    # different orbits, different forms: the puzzles of a set are distinct orbits unless brute force says otherwise
    if n < 9:
        canon = [c.tobytes() for c in A.sudoku_canonical(s.puzzles, g)]
        brute = [_brute_canonical(x, g) for x in s.puzzles[:8]]
        for i, j in itertools.combinations(range(8), 2):
            assert (canon[i] == canon[j]) == (brute[i] == brute[j])
    one_more = s.puzzles[:1].copy()
    cell = int(np.flatnonzero(one_more[0] == 0)[0])
    one_more[0, cell] = s.solutions[0, cell]  # one more given: another orbit
    assert A.sudoku_canonical(one_more, g)[0].tobytes() != A.sudoku_canonical(s.puzzles[:1], g)[0].tobytes()


def test_six_by_six_has_49_solution_classes():
    """The canonical form counts the 49 essentially different 6x6 grids (2x3 boxes) that the audit's note cites."""
    s = _set(6, (2, 3), (0, 0), 4000, 7)
    assert len({c.tobytes() for c in A.sudoku_canonical(s.solutions, s.g)}) == 49


def _planted(n=6, box=(2, 3), seed=5):
    """A training set and a test set with test row 7 a random group member of training puzzle 13."""
    train, test = _set(n, box, (14, 22), 50, f"{seed}-train"), _set(n, box, (14, 22), 20, f"{seed}-test")
    perm, dmap = sudoku.random_transforms(1, train.g, np.random.default_rng(seed))
    test.puzzles[7] = sudoku.apply_transforms(train.puzzles[13:14], perm, dmap)[0]
    test.solutions[7] = sudoku.apply_transforms(train.solutions[13:14], perm, dmap)[0]
    assert not np.array_equal(test.puzzles[7], train.puzzles[13])
    return train, test


def test_planted_duplicate_is_found_and_named():
    train, test = _planted()
    res = A.audit_sudoku_grids(train.puzzles, test.puzzles, train.g, train.solutions, test.solutions)
    assert not res.ok and res.test_rows == [7] and res.train_rows == [13] and not res.leaks[0].exact
    assert res.counts()["leaks"] == 1
    assert all(m.test_row != 7 for m in res.facts["solution"])  # a leaked puzzle is not counted twice
    line = res.lines("data/sudoku/x")[0]
    assert line == "error: data/sudoku/x: test row 7 equals training row 13 up to symmetry"
    # an identical copy is called so
    test.puzzles[3] = train.puzzles[40]
    res = A.audit_sudoku_grids(train.puzzles, test.puzzles, train.g)
    assert [(m.test_row, m.train_rows, m.exact) for m in res.leaks] == [(3, [40], True), (7, [13], False)]
    # without the plants: clean, one summary line
    clean = A.audit_sudoku_grids(train.puzzles[:13], test.puzzles[8:], train.g)
    assert clean.ok and clean.lines("d")[-1].startswith("d: clean: no test puzzle in the training set; compared 12 ")


def test_planted_duplicate_at_9x9():
    g = sudoku.geometry(9)
    rng = random.Random(0)
    grids = [solver.generate_one(g, (50, 55), rng) for _ in range(5)]
    train = np.array([p for p, _, _ in grids[:3]], np.int8)
    test = np.array([p for p, _, _ in grids[3:]], np.int8)
    perm, dmap = sudoku.random_transforms(1, g, np.random.default_rng(1))
    test[1] = sudoku.apply_transforms(train[2:3], perm, dmap)[0]
    res = A.audit_sudoku_grids(train, test, g)
    assert [(m.test_row, m.train_rows) for m in res.leaks] == [(1, [2])]
    assert "3,359,232 symmetries of 9x9 Sudoku" in res.group


def test_augmented_training_rows_are_named_by_file_row():
    """With augmentations, the originals are compared and named by their row in train.npz."""
    train, test = _planted()
    aug, base, aug_idx = sudoku.augment(train, 3, np.random.default_rng(0))
    tr = sudoku.to_taskdata("sudoku-train", aug, {"base": base, "aug": aug_idx})
    te = sudoku.to_taskdata("sudoku-test", test)
    res = A.audit_sudoku(tr, te)
    assert res.test_rows == [7] and res.train_rows == [13 * 4] and res.compared["train"] == 50
    assert "200 rows are 50 puzzles and 150 augmented copies" in res.notes[0]
    # the augmented copies are members of their originals' orbits
    canon = A.sudoku_canonical(sudoku.decode(tr.inputs), train.g)
    assert all(np.array_equal(canon[i], canon[4 * base[i]]) for i in range(len(canon)))


def test_maze_planted_rotation_and_exchanged_ends():
    ms = maze.generate(12, 8, 12, seed=3, progress=False)
    tr = maze.to_taskdata("maze-train", maze.MazeSet(8, ms.questions[:8], ms.answers[:8], ms.path_length[:8]))
    te = maze.to_taskdata("maze-test", maze.MazeSet(8, ms.questions[8:], ms.answers[8:], ms.path_length[8:]))
    assert A.audit_maze(tr, te).ok
    te.inputs[1] = dihedral(tr.inputs[5].reshape(8, 8), 3).reshape(-1)  # a rotation of training maze 5
    swapped = tr.inputs[2].copy()
    swapped[tr.inputs[2] == 3], swapped[tr.inputs[2] == 4] = 4, 3
    te.inputs[3] = dihedral(swapped.reshape(8, 8), 5).reshape(-1)  # training maze 2 flipped, S and G exchanged
    res = A.audit_maze(tr, te)
    assert [(m.test_row, m.train_rows) for m in res.leaks] == [(1, [5])]
    assert [(m.test_row, m.train_rows) for m in res.facts["start and goal exchanged"]] == [(3, [2])]
    keys = A.maze_canonical(tr.inputs[:1], 8)
    assert all(A.maze_canonical(dihedral(tr.inputs[:1].reshape(1, 8, 8), t).reshape(1, -1), 8) == keys
               for t in range(8))


def test_arc_canonical_under_views():
    rng = np.random.default_rng(0)
    grid = rng.integers(0, 10, (3, 5)).astype(np.int8)
    out = rng.integers(0, 10, (2, 4)).astype(np.int8)
    for tid, cmap in arc.random_views(12, rng):
        assert A.arc_canonical(arc.apply_view(grid, tid, cmap)) == A.arc_canonical(grid)
        assert A.arc_pair_canonical(arc.apply_view(grid, tid, cmap), arc.apply_view(out, tid, cmap)) == \
            A.arc_pair_canonical(grid, out)
    a, b = np.array([[1, 2], [3, 4]], np.int8), np.array([[1, 1], [3, 4]], np.int8)
    assert A.arc_canonical(a) != A.arc_canonical(b) != A.arc_canonical(np.zeros((2, 2), np.int8))
    assert A.arc_canonical(a) == A.arc_canonical(np.array([[5, 2], [9, 7]], np.int8))
    # the pair's view is one view: a rotated output with an unrotated input is another pair
    assert A.arc_pair_canonical(grid, np.rot90(out).copy()) != A.arc_pair_canonical(grid, out)


def _arc_task(tid, split, pairs):
    g = [np.array(p, np.int8) for p in pairs]
    return arc.ArcTask(tid, [(g[0], g[1]), (g[2], g[3])], [(g[4], g[5])], split)


def test_arc_planted_test_pair_in_another_task():
    tr1 = _arc_task("t1", "training", [[[1, 2]], [[2, 1]], [[3, 3]], [[4]], [[1, 1, 2]], [[2]]])
    ev1 = _arc_task("e1", "evaluation", [[[5, 0], [0, 5]], [[5]], [[6, 6]], [[7, 7]], [[8, 0, 8]], [[8, 8, 8]]])
    tr, te = arc.build_sets([tr1], [ev1], 3, 0, canvas=4, name="arc1")
    res = A.audit_arc(tr, te)
    assert res.ok and any("demonstration pairs of 1 of the 1 evaluation tasks" in n for n in res.notes)
    # the evaluation task's test pair, recoloured and flipped, as a training task's demonstration
    leak = arc.apply_view(np.array([[8, 0, 8]], np.int8), 4, np.array([0, 2, 3, 4, 5, 6, 7, 8, 9, 1], np.int8))
    out = arc.apply_view(np.array([[8, 8, 8]], np.int8), 4, np.array([0, 2, 3, 4, 5, 6, 7, 8, 9, 1], np.int8))
    tr2 = arc.ArcTask("t2", [(leak, out), (np.array([[1]], np.int8), np.array([[2]], np.int8))],
                      [(np.array([[3]], np.int8), np.array([[3]], np.int8))], "training")
    tr, te = arc.build_sets([tr1, tr2], [ev1], 3, 0, canvas=4, name="arc1")
    res = A.audit_arc(tr, te)
    t2_demo0 = int(np.flatnonzero((tr.meta["task"] == 1) & (tr.meta["view"] == 0) & (tr.meta["example"] == 0)
                                  & (tr.meta["is_test"] == 0))[0])
    assert [(m.test_row, m.train_rows) for m in res.leaks] == [(0, [t2_demo0])]
    assert res.lines("d")[0] == (f"error: d: test row 0 equals training row {t2_demo0} (input and output) up to "
                                 f"symmetry: evaluation task e1 test pair 0 ~ training task t2 demonstration pair 0")


def test_generated_profiles_are_clean(tmp_path):
    """The smoke profile and a small `tiny` set, as the builder makes them: every task clean (ARC's evaluation
    demonstrations stated as TRM's protocol). The builder replaces a generated test puzzle equal to a training one up
    to symmetry by the next puzzle of the same stream and records how many (4x4 Sudoku is small: 4 of smoke's 64
    test puzzles were such, test rows 23, 24, 41 and 42 before; `tiny`'s 8x8 mazes 4 of 256)."""
    smoke = data_profile("smoke")
    results = {}
    for task in ("sudoku", "maze", "arc1", "arc2"):
        files = build(task, smoke, root=tmp_path, verbose=False)
        results[task] = audit_folder(files["train"].parent)
        assert results[task].ok, results[task].lines(task)
        summary = json.loads(files["manifest"].read_text())["summary"]
        if task in ("sudoku", "maze"):
            assert summary["test_leaks_replaced"] == (4 if task == "sudoku" else 0)
    for t in ("arc1", "arc2"):
        assert any("as TRM's and HRM's do (their protocol, not a leak)" in n for n in results[t].notes)
    for task, over in (("sudoku", {"n_train": 300, "n_test": 200}), ("maze", {"n_train": 300, "n_test": 120})):
        files = build(task, data_profile("tiny"), root=tmp_path, overrides=over, verbose=False)
        assert audit_folder(files["train"].parent).ok


def test_a_leaking_generated_item_is_replaced_by_the_next_of_its_stream():
    """without_leaks keeps the clean items in their order and takes the next items of the same streams for the
    leaking ones, drawing further when the new ones leak too."""
    class Items(list):
        def take(self, idx):
            return Items(self[i] for i in idx)

    def make(n):
        return Items(range(n))  # item i depends on i only, as a generated set's

    leaking = lambda s: [i for i, v in enumerate(s) if v in (1, 3, 4, 5)]  # noqa: E731
    got, replaced = A.without_leaks(make, make(5), 5, leaking)
    assert got == [0, 2, 6, 7, 8] and replaced == 3
    assert A.without_leaks(make, make(3), 3, lambda s: []) == ([0, 1, 2], 0)


def test_command_names_the_row_and_exits_1(tmp_path, capsys):
    train, test = _planted()
    folder = tmp_path / "mine"
    sudoku.to_taskdata("sudoku-train", train).save(folder / "train.npz")
    sudoku.to_taskdata("sudoku-test", test).save(folder / "test.npz")
    assert main(["audit", "--folder", str(folder)]) == 1
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert lines == [f"error: {folder.resolve()}: test row 7 equals training row 13 up to symmetry"]
    assert "LEAKS: 1 of 20 test puzzles" in out
    # clean: exit 0 and a one-line summary naming the counts and the group
    test.puzzles[7] = test.puzzles[6]
    sudoku.to_taskdata("sudoku-test", test).save(folder / "test.npz")
    assert main(["audit", "--folder", str(folder), "--task", "sudoku"]) == 0
    out, err = capsys.readouterr()
    summary = [x for x in out.splitlines() if not x.startswith("note: ")]
    assert not err and len(summary) == 1 and re.search(r"clean: .* compared 20 test against 50 training puzzles up "
                                                       r"to the 3,456 symmetries of 6x6 Sudoku", summary[0])
    # a profile, built first into --root
    assert main(["audit", "smoke", "--task", "maze", "--root", str(tmp_path / "data")]) == 0
    assert "maze/smoke: clean: no test maze in the training set; compared 64 test against 200" in \
        capsys.readouterr().out
    # mistakes: one line each
    assert main(["audit"]) == 2 and capsys.readouterr().err.startswith("error: data audit: give a data profile")
    assert main(["audit", "quick"]) == 2 and "unknown data profile 'quick'" in capsys.readouterr().err
    assert main(["audit", "--folder", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'none'}: no such data folder"


def test_manifest_records_the_seeds_of_every_draw(tmp_path):
    smoke = data_profile("smoke")
    files = build("sudoku", smoke, root=tmp_path, verbose=False)
    seeds = json.loads(files["manifest"].read_text())["seeds"]
    assert seeds["seed"] == 0 and seeds["augment"]["rng"] == "numpy.random.default_rng(0)"
    # the recorded stream makes test puzzle 5 again
    stream = re.fullmatch(r"random\.Random\('(.*)/<i>'\)", seeds["test"]["rng"]).group(1)
    puzzle, _, _ = solver.generate_one(sudoku.geometry(4), (6, 10), random.Random(f"{stream}/5"))
    assert np.array_equal(sudoku.decode(TaskData.load(files["test"]).inputs[5]), puzzle)
    for task in ("maze", "arc1"):
        m = json.loads(build(task, smoke, root=tmp_path, verbose=False)["manifest"].read_text())
        assert m["seeds"]["seed"] == 0
    # your own files: the subsample draw
    own = tmp_path / "own"
    own.mkdir()
    sudoku.write_csv(own / "train.csv", _set(4, (2, 2), (6, 10), 9, "a"))
    sudoku.write_csv(own / "test.csv", _set(4, (2, 2), (6, 10), 7, "b"))
    files = build("sudoku", smoke, root=tmp_path, overrides={"path": str(own), "n_train": 4, "n_test": 3},
                  verbose=False)
    seeds = json.loads(files["manifest"].read_text())["seeds"]
    assert seeds["subsample"] == {"rng": "numpy.random.default_rng(0)",
                                  "train": "4 of 9 rows without replacement, kept in file order",
                                  "test": "then 3 of 7 rows from the same generator, the same way"}
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(9, 4, replace=False))
    assert np.array_equal(sudoku.decode(TaskData.load(files["train"]).inputs),
                          sudoku.read_csv(own / "train.csv").puzzles[rows])
