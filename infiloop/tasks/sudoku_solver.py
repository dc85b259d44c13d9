"""The project's Sudoku solver and puzzle generator (the offline path to a Sudoku-Extreme-like set).

Grids are flat lists of ``n * n`` ints (0 = blank, 1..n digits) with rectangular boxes of
``br x bc`` cells (``n = br * bc``): 4x4 with 2x2, 6x6 with 2x3, 9x9 with 3x3.

Solver: depth-first search on bitmasks (row, column, box), always branching on the blank cell
with the fewest candidates (a cell with one candidate is filled without branching). It counts
solutions up to a cap (2 decides uniqueness) and reports its *backtracks* (dead ends reached), the
project's difficulty rating, in the spirit of the dataset's tdoku backtrack count.

Generator: a random full grid (randomised search), then cells are blanked in random order, each
removal kept only if the solution stays unique; it stops at a target number of blanks drawn from
the requested range.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Geometry:
    n: int
    br: int
    bc: int

    def __post_init__(self):
        if self.br * self.bc != self.n or self.n < 1 or self.n > 9:
            raise ValueError(f"bad Sudoku geometry n={self.n}, box {self.br}x{self.bc} (need n = br*bc <= 9)")

    @property
    def cells(self) -> int:
        return self.n * self.n


DEFAULT_BOX = {1: (1, 1), 4: (2, 2), 6: (2, 3), 8: (2, 4), 9: (3, 3)}


def geometry(n: int, box: tuple[int, int] | None = None) -> Geometry:
    """Geometry of side ``n``; the box shape defaults to the usual one (6 -> 2x3, 8 -> 2x4)."""
    if box is None:
        if n not in DEFAULT_BOX:
            raise ValueError(f"no default box shape for a {n}x{n} Sudoku; give box=(rows, cols)")
        box = DEFAULT_BOX[n]
    return Geometry(n, int(box[0]), int(box[1]))


@cache
def _tables(g: Geometry):
    n = g.n
    R = [i // n for i in range(g.cells)]
    C = [i % n for i in range(g.cells)]
    B = [(r // g.br) * (n // g.bc) + c // g.bc for r, c in zip(R, C)]
    popcount = [bin(m).count("1") for m in range(1 << n)]
    value = {1 << (v - 1): v for v in range(1, n + 1)}
    return R, C, B, popcount, value, (1 << n) - 1


class Search:
    """One solver run: ``count`` solutions of ``grid`` up to ``limit``; first solution in ``solution``."""

    def __init__(self, grid, g: Geometry, limit: int = 2, rng: random.Random | None = None):
        self.g, self.limit, self.rng = g, limit, rng
        self.R, self.C, self.B, self.pc, self.val, self.full = _tables(g)
        self.backtracks = 0
        self.nodes = 0
        self.count = 0
        self.solution: list[int] | None = None
        self.sol = list(grid)
        n = g.n
        rows, cols, boxes = [0] * n, [0] * n, [0] * n
        self.empties = []
        for i, v in enumerate(grid):
            if v == 0:
                self.empties.append(i)
                continue
            bit = 1 << (v - 1)
            r, c, b = self.R[i], self.C[i], self.B[i]
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return  # contradictory givens: no solution
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
        self.rows, self.cols, self.boxes = rows, cols, boxes
        self._rec(0)

    def _rec(self, k: int) -> bool:
        empties = self.empties
        if k == len(empties):
            self.count += 1
            if self.solution is None:
                self.solution = list(self.sol)
            return self.count >= self.limit
        self.nodes += 1
        rows, cols, boxes, R, C, B, pc, full = (
            self.rows, self.cols, self.boxes, self.R, self.C, self.B, self.pc, self.full)
        best_j, best_m, best_c = -1, 0, 99
        for j in range(k, len(empties)):
            c = empties[j]
            m = full & ~(rows[R[c]] | cols[C[c]] | boxes[B[c]])
            cnt = pc[m]
            if cnt < best_c:
                if cnt == 0:
                    self.backtracks += 1
                    return False
                best_j, best_m, best_c = j, m, cnt
                if cnt == 1:
                    break
        empties[k], empties[best_j] = empties[best_j], empties[k]
        cell = empties[k]
        r, c, b = R[cell], C[cell], B[cell]
        bits = []
        m = best_m
        while m:
            bit = m & -m
            bits.append(bit)
            m ^= bit
        if self.rng is not None and len(bits) > 1:
            self.rng.shuffle(bits)
        for bit in bits:
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            self.sol[cell] = self.val[bit]
            if self._rec(k + 1):
                return True
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
        self.sol[cell] = 0
        return False


def count_solutions(grid, g: Geometry, limit: int = 2) -> tuple[int, list[int] | None, int]:
    """(number of solutions capped at ``limit``, first solution or None, backtracks)."""
    s = Search(grid, g, limit)
    return s.count, s.solution, s.backtracks


def rating(grid, g: Geometry) -> int:
    """Difficulty: backtracks of the solver while solving and proving uniqueness (0 = no guessing)."""
    return Search(grid, g, 2).backtracks


def random_solution(g: Geometry, rng: random.Random) -> list[int]:
    """A uniformly shuffled search's first full grid (random candidate order)."""
    s = Search([0] * g.cells, g, 1, rng)
    assert s.solution is not None
    return s.solution


def _other_solution_exists(puzzle: list[int], cell: int, value: int, g: Geometry) -> bool:
    """Whether ``puzzle`` (with ``cell`` blank) has a solution where ``cell`` is not ``value``."""
    R, C, B, _, _, _ = _tables(g)
    r, c, b = R[cell], C[cell], B[cell]
    used = 0
    n = g.n
    for i, v in enumerate(puzzle):
        if v and (R[i] == r or C[i] == c or B[i] == b):
            used |= 1 << (v - 1)
    for d in range(1, n + 1):
        if d == value or used & (1 << (d - 1)):
            continue
        puzzle[cell] = d
        found = Search(puzzle, g, 1).count > 0
        puzzle[cell] = 0
        if found:
            return True
    return False


def dig(solution: list[int], g: Geometry, target: int, rng: random.Random) -> list[int]:
    """Blank cells of ``solution`` in random order while the solution stays unique, up to ``target``.

    The first ``0.4 n^2`` removals are made at once and checked once (almost always unique); if
    not, the removals are redone one at a time. Returns the puzzle (it may have fewer blanks than
    ``target`` when no further cell can be removed).
    """
    order = list(range(g.cells))
    rng.shuffle(order)
    puzzle = list(solution)
    bulk = min(target, int(0.4 * g.cells))
    for i in order[:bulk]:
        puzzle[i] = 0
    start = bulk
    if bulk and Search(puzzle, g, 2).count != 1:
        puzzle, start = list(solution), 0
    blanks = start
    for i in order[start:]:
        if blanks >= target:
            break
        v = puzzle[i]
        puzzle[i] = 0
        if _other_solution_exists(puzzle, i, v, g):
            puzzle[i] = v
        else:
            blanks += 1
    return puzzle


def generate_one(g: Geometry, blanks: tuple[int, int], rng: random.Random, max_tries: int = 1000):
    """One puzzle with a unique solution and ``blanks[0] <= #blanks <= blanks[1]``.

    Returns ``(puzzle, solution, rating)``. The target is drawn uniformly from the range; a dig
    that stops short of the range's lower end is thrown away and a new grid is drawn.
    """
    lo, hi = blanks
    for _ in range(max_tries):
        sol = random_solution(g, rng)
        puzzle = dig(sol, g, rng.randint(lo, hi), rng)
        if puzzle.count(0) >= lo:
            return puzzle, sol, rating(puzzle, g)
    raise RuntimeError(
        f"could not reach {lo} blanks on a {g.n}x{g.n} grid in {max_tries} tries; lower the blank range"
    )


@cache
def _units(g: Geometry) -> list[list[int]]:
    """The cells of every row, column and box."""
    R, C, B, _, _, _ = _tables(g)
    return [[i for i in range(g.cells) if key[i] == k] for key in (R, C, B) for k in range(g.n)]


def propagate(grid, g: Geometry) -> tuple[list[int], bool]:
    """Constraint propagation alone: naked singles (a cell with one candidate) and hidden singles (a
    digit with one possible cell in a row, column or box), repeated until nothing changes; no guessing.

    Returns ``(grid with every cell it could fill, solved)``; ``solved`` is true when no blank is
    left. A contradiction (clashing givens, a cell without candidates, two digits forced into one
    cell) stops it unsolved.
    """
    R, C, B, pc, value, full = _tables(g)
    n = g.n
    cells = list(grid)
    rows, cols, boxes = [0] * n, [0] * n, [0] * n

    def place(i: int, bit: int) -> None:
        cells[i] = value[bit]
        rows[R[i]] |= bit
        cols[C[i]] |= bit
        boxes[B[i]] |= bit

    for i, v in enumerate(cells):
        if v:
            if (rows[R[i]] | cols[C[i]] | boxes[B[i]]) & (1 << (v - 1)):
                return cells, False  # contradictory givens
            place(i, 1 << (v - 1))
    units = _units(g)

    def candidates(i: int) -> int:
        return 0 if cells[i] else full & ~(rows[R[i]] | cols[C[i]] | boxes[B[i]])

    progress = True
    while progress:
        progress = False
        for i in range(g.cells):  # naked singles
            if not cells[i]:
                m = candidates(i)
                if m == 0:
                    return cells, False
                if pc[m] == 1:
                    place(i, m)
                    progress = True
        if progress:
            continue
        for unit in units:  # hidden singles: a digit that is a candidate of exactly one cell of the unit
            cand = [candidates(i) for i in unit]
            once = twice = 0
            for m in cand:
                twice |= once & m
                once |= m
            hidden = once & ~twice
            for i, m in zip(unit, cand):
                m &= hidden
                if m:
                    if pc[m] > 1:
                        return cells, False  # two digits need the same cell
                    place(i, m)
                    progress = True
    return cells, 0 not in cells


def singles_solve(grid, g: Geometry) -> bool:
    """Whether naked and hidden singles alone solve ``grid`` (:func:`propagate`)."""
    return propagate(grid, g)[1]
