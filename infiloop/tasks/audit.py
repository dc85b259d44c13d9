"""Leakage audits: does a test puzzle appear in the training set, up to the symmetries the project trains under?

Each audit compares every test row with the training set through an *exact canonical form*: a function of a
puzzle that is the same for every member of its orbit under a group of symmetries and differs between orbits, so
that two puzzles are equivalent exactly when their canonical forms are equal. The groups are those of the
project's augmentations, so that a test puzzle found here is one the model may have been trained on as it is or
as one of its augmented views.

- **Sudoku** (:func:`audit_sudoku`): the group of :func:`.sudoku.random_transforms` (which ``augment`` and
  ``augment_tokens`` apply): permutations of the bands (of ``br`` rows) and of the rows within each band,
  permutations of the stacks (of ``bc`` columns) and of the columns within each stack, transposition where the box
  is square (``br == bc``: 4x4, 9x9; a 2x3 box becomes 3x2 under transposition, so 6x6 has none), and any
  relabelling of the digits. Sizes without the digits: 128 (4x4), 3,456 (6x6 with 2x3 boxes), 3,359,232 (9x9). The
  canonical form (:func:`sudoku_canonical`) is the least grid, row-major and lexicographic with blank (0) first,
  over the spatial transforms, of the transformed grid with its digits relabelled 1, 2, ... in order of first
  appearance (which makes it independent of the digit relabelling). It is computed exactly by branch and bound:
  every column arrangement is enumerated, rows are chosen one at a time (bands kept whole), and only the
  partial grids whose rows so far are the least are extended; about 0.1 ms a 4x4 grid, 0.5-1 ms a 6x6 grid,
  25-150 ms a 9x9 grid. An exact-invariant prefilter (:func:`sudoku_invariants`: given counts per row by band
  and per column by stack, digit counts, and for every pair of rows and of columns the shape of the partial
  digit permutation from one to the other) decides first which rows can be equivalent at all; only rows whose
  invariant occurs in both sets are canonicalised, so a set of thousands of 9x9 puzzles audits in seconds too.
  The givens are audited (a test puzzle equivalent to a training puzzle is a leak); the solution grids too,
  reported as a fact: small Sudoku have few essentially different solution grids (2 at 4x4), so test and
  training puzzles share them as a matter of course.
- **Maze** (:func:`audit_maze`): the 8 symmetries of the square (rotations and reflections, ``base.dihedral``,
  the project's optional maze augmentation ``maze.to_taskdata(dihedral_views=True)``) of the whole token grid,
  so that walls, start and goal move together; the canonical form is the least of the 8 transformed grids. A
  maze equal to a training maze with start and goal exchanged (the same path) is reported as a fact.
- **ARC** (:func:`audit_arc`): the project's views (``arc.random_views``): the 8 dihedral transforms with any
  permutation of the colours 1..9 (0 stays). A test pair whose input and output are, under one view, a pair of
  the training set is a leak; a test output grid equal under a view to a training target of another pair is
  reported with its rows; and whether the training set holds the evaluation tasks' demonstration pairs (as TRM's
  and HRM's do: their protocol, not an error) is stated as a fact.

Training sets hold augmented copies (Sudoku's ``meta.aug > 0``, the views of Maze and ARC, ``meta.view > 0``),
which are members of their originals' orbits by construction; the audits compare the originals (the rows the
copies were made from) and name training rows by their index in ``train.npz``.

Each task's record names its audit (``Task.audit``, registry.py); ``python -m infiloop data audit PROFILE``
(``datasets.audit_folder``) audits a built data folder (data/README.md).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .arc_canonical import arc_canonical, arc_grids, arc_pair_canonical, exact_keys
from .base import DataError, TaskData, dihedral
from .sudoku_canonical import (
    canonical_keys,
    sudoku_canonical,
    sudoku_group_size,
    sudoku_group_words,
    sudoku_invariants,
)
from .sudoku_solver import Geometry, geometry

__all__ = ["AuditResult", "Match", "arc_canonical", "arc_pair_canonical", "audit_arc", "audit_maze",
           "audit_prefix_sums", "audit_sudoku", "audit_sudoku_grids", "maze_canonical", "sudoku_canonical",
           "sudoku_group_size", "sudoku_invariants"]


@dataclass
class Match:
    """A test row equal, up to the group, to one or more training rows (indices into ``test.npz`` and
    ``train.npz``); ``exact``: identical to at least one of them without any transform."""

    test_row: int
    train_rows: list[int]
    exact: bool
    kind: str = "puzzle"
    detail: str = ""


@dataclass
class AuditResult:
    """What an audit found. ``leaks``: test rows that are in the training set up to the group (the audit fails);
    ``facts``: matches that are reported but are no error (Sudoku solution grids, Maze start and goal exchanged,
    ARC output grids), by kind; ``notes``: facts in words; ``compared``: how many rows of each set were compared."""

    task: str
    group: str
    compared: dict
    leaks: list[Match] = field(default_factory=list)
    facts: dict[str, list[Match]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.leaks

    @property
    def test_rows(self) -> list[int]:
        """The test rows that leak."""
        return [m.test_row for m in self.leaks]

    @property
    def train_rows(self) -> list[int]:
        """The training rows that test rows leak from."""
        return sorted({r for m in self.leaks for r in m.train_rows})

    def counts(self) -> dict:
        return {"leaks": len(self.leaks), "exact": sum(m.exact for m in self.leaks),
                **{k: len(v) for k, v in self.facts.items()}, "train": self.compared["train"],
                "test": self.compared["test"]}

    def lines(self, where: str) -> list[str]:
        """One ``error: ...`` line per leak, then ``note: ...`` lines, then a one-line summary."""
        out = [f"error: {where}: test row {m.test_row} {_equals(m)}" for m in self.leaks]
        out += [f"note: {where}: {n}" for n in self.notes]
        c = self.compared
        what = f"{c['test']:,} test against {c['train']:,} training {c['unit']}"
        if self.leaks:
            out.append(f"{where}: LEAKS: {len(self.leaks)} of {c['test']:,} test {c['unit']} are in the training "
                       f"set ({sum(m.exact for m in self.leaks)} identical), compared {what} up to {self.group}")
        else:
            out.append(f"{where}: clean: no test {c['unit'][:-1] if c['unit'].endswith('s') else c['unit']} in the "
                       f"training set; compared {what} up to {self.group}")
        return out


def _rows(rows: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def _equals(m: Match) -> str:
    s = "s" if len(m.train_rows) > 1 else ""
    how = "(identical)" if m.exact and len(m.train_rows) == 1 else \
        "up to symmetry" + (" (identical to one of them)" if m.exact else "")
    what = {"puzzle": "", "pair": " (input and output)"}.get(m.kind, f" ({m.kind})")
    return f"equals training row{s} {_rows(m.train_rows)}{what} {how}" + (f": {m.detail}" if m.detail else "")


def _match(train_keys: list, test_keys: list, train_rows: np.ndarray, test_rows: np.ndarray,
           train_exact: list | None = None, test_exact: list | None = None, kind: str = "puzzle") -> list[Match]:
    """Test rows whose key is a training key, with every training row of that key; ``*_exact``: keys of the
    grids themselves, to tell an identical copy from a transformed one."""
    where = defaultdict(list)
    for i, k in enumerate(train_keys):
        if k is not None:
            where[k].append(i)
    out = []
    for j, k in enumerate(test_keys):
        if k is None or k not in where:
            continue
        idx = where[k]
        exact = train_exact is not None and any(train_exact[i] == test_exact[j] for i in idx)
        out.append(Match(int(test_rows[j]), sorted(int(train_rows[i]) for i in idx), exact, kind))
    return out


# ----------------------------------------------------------------------------------------------------- Sudoku

def _grid_matches(train: np.ndarray, test: np.ndarray, g: Geometry, train_rows, test_rows, kind: str
                  ) -> tuple[list[Match], list[bytes | None]]:
    inv_tr, inv_te = sudoku_invariants(train, g), sudoku_invariants(test, g)
    shared = set(inv_tr) & set(inv_te)
    key_tr = canonical_keys(train, g, inv_tr, shared)
    key_te = canonical_keys(test, g, inv_te, shared)
    exact_tr = [r.tobytes() for r in np.asarray(train, np.int8)]
    exact_te = [r.tobytes() for r in np.asarray(test, np.int8)]
    return _match(key_tr, key_te, train_rows, test_rows, exact_tr, exact_te, kind), key_tr


def audit_sudoku_grids(train_puzzles: np.ndarray, test_puzzles: np.ndarray, g: Geometry,
                       train_solutions: np.ndarray | None = None, test_solutions: np.ndarray | None = None,
                       train_rows=None, test_rows=None) -> AuditResult:
    """Audit Sudoku grids (``[N, n*n]`` values, 0 blank): a test puzzle whose givens equal a training puzzle's
    up to the group is a leak; solution grids equal up to the group are a fact (``facts["solution"]``).
    ``train_rows``/``test_rows`` name the rows in the reports (default 0..N-1)."""
    tr_rows = np.arange(len(train_puzzles)) if train_rows is None else np.asarray(train_rows)
    te_rows = np.arange(len(test_puzzles)) if test_rows is None else np.asarray(test_rows)
    for name, grids in (("training", train_puzzles), ("test", test_puzzles), ("training", train_solutions),
                        ("test", test_solutions)):
        if grids is not None and len(grids) and not (np.asarray(grids).shape[1:] == (g.cells,)
                                                     and 0 <= np.min(grids) and np.max(grids) <= g.n):
            raise DataError(f"sudoku: the {name} grids are not {g.n}x{g.n} grids of 0 (blank) and digits 1..{g.n}")
    leaks, _ = _grid_matches(train_puzzles, test_puzzles, g, tr_rows, te_rows, "puzzle")
    res = AuditResult("sudoku", sudoku_group_words(g),
                      {"train": len(train_puzzles), "test": len(test_puzzles), "unit": "puzzles"}, leaks)
    if train_solutions is not None and test_solutions is not None:
        sol, keys = _grid_matches(train_solutions, test_solutions, g, tr_rows, te_rows, "solution grid")
        leaked = set(res.test_rows)
        sol = [m for m in sol if m.test_row not in leaked]  # a leaked puzzle's solution says nothing more
        res.facts["solution"] = sol
        if sol:
            classes = len({k for k in keys if k is not None})
            res.notes.append(
                f"{len(sol)} of {len(test_puzzles):,} test puzzles have other givens than any training puzzle but a "
                f"solution grid equal up to symmetry to a training puzzle's ({sum(m.exact for m in sol)} identical): "
                f"expected at small sizes, not a leak (4x4 Sudoku has 2 essentially different solution grids, 6x6 "
                f"with 2x3 boxes 49, 9x9 5,472,730,538; the training set's fall in {classes:,}); test rows "
                f"{_rows([m.test_row for m in sol])}")
    return res


def audit_sudoku(train: TaskData, test: TaskData) -> AuditResult:
    """Audit a Sudoku training set against its test set (:class:`TaskData` of ``data build``): the training
    rows compared are the original puzzles (``meta.aug == 0`` where the set records augmentations: the others
    are transforms of them); rows are named by their index in the files."""
    from .sudoku import decode

    g = geometry(train.grid[0], tuple(train.box) if train.box else None)
    if test.grid != train.grid or (test.box and tuple(test.box) != (g.br, g.bc)):
        raise DataError(f"sudoku: training grids {train.grid} (box {train.box}) and test grids {test.grid} "
                        f"(box {test.box}) differ")
    tr_rows = np.flatnonzero(train.meta["aug"] == 0) if "aug" in train.meta else np.arange(len(train))
    te_rows = np.arange(len(test))
    res = audit_sudoku_grids(decode(train.inputs[tr_rows]), decode(test.inputs), g, decode(train.labels[tr_rows]),
                             decode(test.labels), tr_rows, te_rows)
    if len(tr_rows) < len(train):
        res.compared["train"] = len(tr_rows)
        res.notes.insert(0, f"the training set's {len(train):,} rows are {len(tr_rows):,} puzzles and "
                            f"{len(train) - len(tr_rows):,} augmented copies of them (transforms of the group); "
                            f"the puzzles were compared")
    return res


# ------------------------------------------------------------------------------------------------------- Maze


def maze_canonical(tokens: np.ndarray, size: int) -> list[bytes]:
    """The canonical form of each maze (token grids ``[N, size*size]``): the least, as bytes, of its 8 dihedral
    transforms (walls, start and goal move together), equal for two mazes exactly when one is a rotation or
    reflection of the other."""
    x = np.asarray(tokens).astype(np.int8).reshape(-1, size, size)
    views = [np.ascontiguousarray(dihedral(x, t)).reshape(len(x), -1) for t in range(8)]
    return [min(v[i].tobytes() for v in views) for i in range(len(x))]


def audit_maze(train: TaskData, test: TaskData) -> AuditResult:
    """Audit a Maze training set against its test set: a test maze equal to a training maze under a rotation or
    reflection of the square is a leak; equal with start and goal exchanged (the same path), a fact
    (``facts["start and goal exchanged"]``). Only the first view of each maze is compared where the sets
    hold the 8 views (``meta.view``)."""
    if train.grid != test.grid:
        raise DataError(f"maze: training grids {train.grid} and test grids {test.grid} differ")
    k = train.grid[0]
    tr_rows = np.flatnonzero(train.meta["view"] == 0) if "view" in train.meta else np.arange(len(train))
    te_rows = np.flatnonzero(test.meta["view"] == 0) if "view" in test.meta else np.arange(len(test))
    x_tr, x_te = train.inputs[tr_rows], test.inputs[te_rows]
    key_tr, key_te = maze_canonical(x_tr, k), maze_canonical(x_te, k)
    exact_tr = [r.astype(np.int8).tobytes() for r in x_tr]
    exact_te = [r.astype(np.int8).tobytes() for r in x_te]
    leaks = _match(key_tr, key_te, tr_rows, te_rows, exact_tr, exact_te)
    res = AuditResult("maze", "the 8 rotations and reflections of the square",
                      {"train": len(tr_rows), "test": len(te_rows), "unit": "mazes"}, leaks)
    swapped = np.asarray(x_te).copy()
    start, goal = swapped == 3, swapped == 4  # tokens of S and G (CHARSET "# SGo" -> 1..5)
    swapped[start], swapped[goal] = 4, 3
    leaked = set(res.test_rows)
    sg = [m for m in _match(key_tr, maze_canonical(swapped, k), tr_rows, te_rows) if m.test_row not in leaked]
    for m in sg:
        m.kind = "start and goal exchanged"
    res.facts["start and goal exchanged"] = sg
    if sg:
        res.notes.append(f"{len(sg)} test mazes equal a training maze up to symmetry with start and goal "
                         f"exchanged (the same shortest path, outside the project's augmentation group): test rows "
                         f"{_rows([m.test_row for m in sg])}")
    return res


def audit_prefix_sums(train: TaskData, test: TaskData) -> AuditResult:
    """Audit a prefix-sums training set against a test set (``prefix_sums.py``): no symmetry is trained under, so a
    test string is a leak exactly when it equals a training string; strings of another length cannot."""
    keys = [[r.astype(np.int8).tobytes() for r in d.inputs] for d in (train, test)]
    leaks = _match(keys[0], keys[1], np.arange(len(train)), np.arange(len(test)), *keys) \
        if train.grid == test.grid else []
    return AuditResult("prefix_sums", "identity (no augmentation)", {"train": len(train), "test": len(test),
                                                                      "unit": "strings"}, leaks)


# -------------------------------------------------------------------------------------------------------- ARC


def _arc_protocol(train: TaskData, test: TaskData, te_rows: np.ndarray, res: AuditResult) -> None:
    """Add to ``res`` whether the training set holds the evaluation tasks' demonstration pairs (TRM's and HRM's
    protocol: a note) and, as leaks, any evaluation task's test pair that the set's own records place in training."""
    names, splits = train.info.get("tasks"), train.info.get("task_split")
    if not (names and splits and "task" in train.meta and "is_test" in train.meta):
        return
    is_eval = np.array([s == "evaluation" for s in splits])
    task = train.meta["task"].astype(np.int64)
    ev_rows = is_eval[task]
    demo = ev_rows & (train.meta["is_test"] == 0)
    wrong = np.flatnonzero(ev_rows & (train.meta["is_test"] == 1))
    known = {m.test_row for m in res.leaks}
    for r in wrong:  # the set's own record says an evaluation task's test pair is in training
        if "view" in train.meta and train.meta["view"][r] != 0:
            continue
        match = [j for j in te_rows if test.meta["task"][j] == task[r] and
                 test.meta["example"][j] == train.meta["example"][r]]
        if match and match[0] not in known:
            res.leaks.append(Match(int(match[0]), [int(r)], True, "pair"))
    n_ev = int(is_eval.sum())
    with_demo = len(set(task[demo].tolist()))
    res.notes.append(
        f"the training set holds the demonstration pairs of {with_demo} of the {n_ev} evaluation tasks "
        f"({int(demo.sum()):,} rows, all views), as TRM's and HRM's do (their protocol, not a leak); their test "
        f"pairs are {'in the training set: ' + str(len(wrong)) + ' rows' if len(wrong) else 'not'}")


class _ArcNames:
    """Names an ARC row by its task and pair, as the sets' own records give them (``info["tasks"]``, the meta)."""

    def __init__(self, train: TaskData, test: TaskData):
        self.train, self.test = train, test
        self.names, self.splits = train.info.get("tasks"), train.info.get("task_split")

    def task(self, row: int, d: TaskData) -> str:
        return self.names[int(d.meta["task"][row])] if self.names and "task" in d.meta else "?"

    def pair(self, row: int, d: TaskData) -> str:
        if not self.names or any(k not in d.meta for k in ("task", "is_test", "example")):
            return f"row {row}"
        kind = "test" if d.meta["is_test"][row] else "demonstration"
        split = f"{self.splits[int(d.meta['task'][row])]} " if self.splits else ""
        return f"{split}task {self.task(row, d)} {kind} pair {int(d.meta['example'][row])}"

    def own_demonstration(self, row: int, m: Match) -> bool:
        """Training row ``row`` is a demonstration pair of the test pair's own task."""
        meta = self.train.meta
        return ("task" in meta and "is_test" in meta and meta["is_test"][row] == 0
                and meta["task"][row] == self.test.meta["task"][m.test_row])

    def matches(self, found: list[Match], n: int = 5, tasks: bool = False) -> str:
        """The first ``n`` matches in words (with the training rows' tasks where ``tasks``)."""
        text = "; ".join(f"test row {m.test_row} ({self.task(m.test_row, self.test)}) ~ training row"
                         f"{'s' if len(m.train_rows) > 1 else ''} {_rows(m.train_rows, 3)}"
                         + (f" ({', '.join(sorted({self.task(r, self.train) for r in m.train_rows}))})" if tasks
                            else f"{' (identical)' if m.exact else ''}") for m in found[:n])
        return text + (f"; and {len(found) - n} more" if len(found) > n else "")


def audit_arc(train: TaskData, test: TaskData) -> AuditResult:
    """Audit an ARC training set against its test set (the evaluation tasks' test pairs): a test pair equal to a
    training pair under a view is a leak, as is a training row that the set's own records name as an evaluation
    task's test pair; a test output grid equal under a view to the target of a training row is a fact
    (``facts["output"]``, named by rows); the evaluation tasks' demonstration pairs in the training set are stated
    (TRM's and HRM's protocol). Only view 0 of each pair is compared where the sets record views."""
    canvas = train.grid[0]
    tr_rows = np.flatnonzero(train.meta["view"] == 0) if "view" in train.meta else np.arange(len(train))
    te_rows = np.flatnonzero(test.meta["view"] == 0) if "view" in test.meta else np.arange(len(test))
    te_rows = np.array([r for r in te_rows if test.labels[r].any()], dtype=np.int64)  # outputs known
    g_tr, g_te = arc_grids(train, tr_rows, canvas), arc_grids(test, te_rows, canvas)
    pairs = _match([arc_pair_canonical(a, b) for a, b in g_tr], [arc_pair_canonical(a, b) for a, b in g_te],
                   tr_rows, te_rows, exact_keys(g_tr), exact_keys(g_te), "pair")
    names = _ArcNames(train, test)
    leaks, own = [], []
    for m in pairs:
        others = [r for r in m.train_rows if not names.own_demonstration(r, m)]
        if others:
            detail = f"{names.pair(m.test_row, test)} ~ " + ", ".join(names.pair(r, train) for r in others[:3])
            leaks.append(Match(m.test_row, others, m.exact, m.kind, detail))
        else:
            own.append(m)
    res = AuditResult(train.name.split("-")[0], "the views (8 rotations and reflections, any permutation of the "
                      "colours 1..9)", {"train": len(tr_rows), "test": len(te_rows), "unit": "pairs"}, leaks)
    res.facts["own demonstration"] = own
    if own:
        res.notes.append(f"{len(own)} test pairs equal, under a view, a demonstration pair of their own task (a "
                         "property of the task, whose demonstrations a solver is given; in the training set by TRM's "
                         f"and HRM's protocol): {names.matches(own)}")
    leaked = {m.test_row for m in pairs}
    outs = [m for m in _match([arc_canonical(b) for _, b in g_tr], [arc_canonical(b) for _, b in g_te], tr_rows,
                              te_rows, exact_keys(g_tr, True), exact_keys(g_te, True), "output grid")
            if m.test_row not in leaked]
    res.facts["output"] = outs
    if outs:
        same = sum(all(names.task(r, train) == names.task(m.test_row, test) for r in m.train_rows) for m in outs)
        res.notes.append(f"{len(outs)} of {len(te_rows)} test output grids equal the target of a training row "
                         f"under a view, with another input ({same} only within their own task's demonstrations): "
                         + names.matches(outs, tasks=True))
    _arc_protocol(train, test, te_rows, res)
    return res


# ------------------------------------------------------------------------------------ generated sets kept clean


def sudoku_leaking_rows(train, test) -> list[int]:
    """Rows of a generated Sudoku test set (``sudoku.SudokuSet``) whose givens equal a training puzzle's up to the
    group (:func:`audit_sudoku_grids`)."""
    return audit_sudoku_grids(train.puzzles, test.puzzles, train.g).test_rows


def maze_leaking_rows(train, test) -> list[int]:
    """Rows of a generated maze test set (``maze.MazeSet``) equal to a training maze up to the square's symmetries."""
    from . import maze

    return audit_maze(maze.to_taskdata("train", train), maze.to_taskdata("test", test)).test_rows


def without_leaks(make, first, n: int, leaking) -> tuple[object, int]:
    """A generated test set of ``n`` items none of which is a training item up to symmetry: ``first`` (``make(n)``)
    when it is clean, else the first ``n`` clean items of ``make(n + extra)`` (item i of a generated set depends only
    on its seed and i, so the items kept are ``first``'s own and the leaking ones are replaced by the next items of
    the same streams). ``leaking(set)`` names the leaking rows. Returns the set and how many items were replaced."""
    bad = set(leaking(first))
    replaced, extra = len(bad), len(bad)
    while bad:
        more = make(n + extra)
        bad = set(leaking(more))
        keep = [i for i in range(len(more)) if i not in bad]
        if len(keep) >= n:
            return more.take(keep[:n]), replaced
        extra *= 2
    return first, replaced
