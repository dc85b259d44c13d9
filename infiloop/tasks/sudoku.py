"""Sudoku-Extreme: public CSV, validation, offline generator, augmentations, tokens (TRM's format).

Grids are ``[N, n*n]`` int8 arrays, 0 = blank, digits 1..n, boxes ``br x bc`` (``n = br * bc``;
4x4 with 2x2, 6x6 with 2x3, 9x9 with 3x3). In the CSV a grid of side n is n^2 characters, ``.`` or
``0`` for a blank. Tokens (TRM's): 0 pad, 1 blank, digit ``v`` -> ``v + 1``; vocabulary ``n + 2``.
Augmentations (TRM's): digit permutation, transpose (square boxes only), band/stack
permutation and row/column permutation within bands/stacks; each maps valid puzzles to valid ones.
"""

from __future__ import annotations

import random
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..machine import progress_bar, usable_cpus
from . import sudoku_solver as solver
from .base import DataError, TaskData, where
from .csvio import read_puzzle_csv, write_puzzle_csv
from .sudoku_solver import Geometry, geometry

tqdm = progress_bar()
HUB_REPO = "sapientinc/sudoku-extreme"


@dataclass
class SudokuSet:
    """Puzzles and their solutions (``[N, n*n]`` int8, 0 = blank) with per-row facts."""

    g: Geometry
    puzzles: np.ndarray
    solutions: np.ndarray
    rating: np.ndarray
    source: list[str] = field(default_factory=list)
    drawn: np.ndarray | None = None  # generator candidates drawn per puzzle (with a Selection)

    def __len__(self) -> int:
        return len(self.puzzles)

    @property
    def blanks(self) -> np.ndarray:
        return (self.puzzles == 0).sum(axis=1).astype(np.int16)

    def take(self, idx) -> SudokuSet:
        idx = np.asarray(idx)
        src = [self.source[i] for i in idx] if self.source else []
        drawn = None if self.drawn is None else self.drawn[idx]
        return SudokuSet(self.g, self.puzzles[idx], self.solutions[idx], self.rating[idx], src, drawn)


# ----------------------------------------------------------------------------- validation


def _units(g: Geometry, a: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Rows, columns and boxes of ``a`` ([N, n*n]) as ([N, n, n]) arrays of units."""
    n, br, bc = g.n, g.br, g.bc
    grid = a.reshape(len(a), n, n)
    boxes = grid.reshape(len(a), n // br, br, n // bc, bc).transpose(0, 1, 3, 2, 4).reshape(len(a), n, n)
    return [("row", grid), ("column", grid.transpose(0, 2, 1)), ("box", boxes)]


def check_solutions(g: Geometry, a: np.ndarray) -> np.ndarray:
    """Per row, the first fault of a claimed full solution, or ``""`` (vectorised)."""
    faults = np.full(len(a), "", dtype=object)
    target = np.arange(1, g.n + 1)
    for unit, u in _units(g, a):
        bad = ~(np.sort(u, axis=2) == target).all(axis=2)  # [N, n]
        for i in np.flatnonzero(bad.any(axis=1)):
            if not faults[i]:
                k = int(np.argmax(bad[i]))
                faults[i] = f"answer {unit} {k + 1} is not a permutation of 1..{g.n}: {u[i, k].tolist()}"
    return faults


def validate(s: SudokuSet, path=None, lines=None) -> None:
    """Raise :class:`DataError` at the first row whose answer is not a valid solution or disagrees
    with a given. ``lines`` maps rows to file line numbers for the message."""
    faults = check_solutions(s.g, s.solutions)
    given = s.puzzles != 0
    clash = given & (s.puzzles != s.solutions)
    for i in np.flatnonzero(clash.any(axis=1)):
        if not faults[i]:
            c = int(np.argmax(clash[i]))
            faults[i] = (f"given {s.puzzles[i, c]} at row {c // s.g.n + 1}, column {c % s.g.n + 1} "
                         f"disagrees with the answer's {s.solutions[i, c]}")
    bad = [i for i in range(len(s)) if faults[i]]
    if bad:
        i = bad[0]
        line = lines[i] if lines is not None else i + 1
        more = f" ({len(bad) - 1} more bad rows)" if len(bad) > 1 else ""
        raise DataError(f"{where(path, line)}{faults[i]}{more}")


def _to_array(strings: list[str], allowed: str, col: str, path, lines) -> np.ndarray:
    """Characters -> ints: position in ``allowed``; '.' counts as 0. Names the first bad character."""
    table = np.full(256, -1, dtype=np.int16)
    for k, ch in enumerate(allowed):
        table[ord(ch)] = k
    if "0" in allowed:
        table[ord(".")] = 0
    joined = "".join(strings)
    if joined.isascii():
        arr = table[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)].reshape(len(strings), -1)
    else:
        arr = np.array([[table[ord(ch)] if ord(ch) < 256 else -1 for ch in s] for s in strings], np.int16)
    bad = arr < 0
    if bad.any():
        i = int(np.argmax(bad.any(axis=1)))
        j = int(np.argmax(bad[i]))
        ok = "'.', " + ", ".join(repr(c) for c in allowed) if "0" in allowed else ", ".join(allowed)
        raise DataError(f"{where(path, lines[i])}{col} has character {strings[i][j]!r} at position {j + 1}; "
                        f"allowed: {ok}")
    return arr.astype(np.int8)


def read_csv(path, box: tuple[int, int] | None = None) -> SudokuSet:
    """Read and validate a Sudoku CSV (public format); raise :class:`DataError` on any bad row."""
    rows = read_puzzle_csv(path)
    n = int(round(len(rows.question[0]) ** 0.5))
    try:
        g = geometry(n, box)
    except ValueError as e:
        raise DataError(f"{where(path, rows.line[0])}{e}") from None
    digits = "0123456789"[: n + 1]
    q = _to_array(rows.question, digits, "question", path, rows.line)
    a = _to_array(rows.answer, digits[1:], "answer", path, rows.line) + 1
    s = SudokuSet(g, q, a.astype(np.int8), np.asarray(rows.rating, dtype=np.int32), rows.source)
    validate(s, path, rows.line)
    return s


def write_csv(path, s: SudokuSet) -> None:
    """Write in the public format ('.' for a blank)."""
    chars = np.array(list(".123456789"))
    q = ["".join(r) for r in chars[s.puzzles]]
    a = ["".join(r) for r in chars[s.solutions]]
    src = s.source or ["infiloop-generator"] * len(s)
    write_puzzle_csv(path, src, q, a, s.rating)


# ----------------------------------------------------------------------------- generator


@dataclass(frozen=True)
class Selection:
    """Which generated puzzles to keep (rejection sampling): a scaled-down analogue of Sudoku-Extreme,
    a set kept for puzzles that need search.

    ``needs_search``: ``True`` keeps only puzzles that naked and hidden singles alone do not solve
    (:func:`~infiloop.tasks.sudoku_solver.singles_solve`), ``False`` only those they solve, ``None``
    either. ``min_rating``: the least solver backtrack count (:func:`~infiloop.tasks.sudoku_solver.rating`).
    """

    needs_search: bool | None = None
    min_rating: int = 0

    @property
    def active(self) -> bool:
        return self.needs_search is not None or self.min_rating > 0

    def accepts(self, puzzle: list[int], rating: int, g: Geometry) -> bool:
        if rating < self.min_rating:
            return False
        return self.needs_search is None or self.needs_search != solver.singles_solve(puzzle, g)


def _gen_chunk(args):
    n, br, bc, blanks, seed, start, stop, select, max_candidates = args
    g = Geometry(n, br, bc)
    out = []
    for i in range(start, stop):
        rng = random.Random(f"sudoku/{n}/{br}x{bc}/{blanks[0]}-{blanks[1]}/{seed}/{i}")
        puzzle, sol, rating = solver.generate_one(g, blanks, rng)
        drawn = 1
        while select.active and not select.accepts(puzzle, rating, g):
            if drawn == max_candidates:
                raise ValueError(f"no {n}x{n} puzzle with blanks {blanks[0]}-{blanks[1]} passed {select} in "
                                 f"{max_candidates} candidates; relax the selection")
            puzzle, sol, rating = solver.generate_one(g, blanks, rng)
            drawn += 1
        out.append((puzzle, sol, rating, drawn))
    return out


def generate(n_puzzles: int, g: Geometry, blanks: tuple[int, int], seed: int | str = 0,
             workers: int | None = None, progress: bool = True, select: Selection = Selection(),
             max_candidates: int = 100_000) -> SudokuSet:
    """``n_puzzles`` puzzles with unique solutions and blanks in ``blanks`` (inclusive).

    Puzzle ``i`` depends only on ``(g, blanks, seed, i)`` and ``select``: the same seed gives the
    same set whatever the number of ``workers`` (default: all CPUs for large sets). ``rating`` is the
    solver's backtrack count. With an active ``select``, candidates are drawn from puzzle ``i``'s
    random stream until one passes (at most ``max_candidates``); ``drawn`` records how many it took.
    """
    lo, hi = int(blanks[0]), int(blanks[1])
    if not 0 <= lo <= hi < g.cells:
        raise ValueError(f"blank range {lo}-{hi} is not within 0..{g.cells - 1}")
    work = n_puzzles * g.cells * (10 if select.active else 1)
    if workers is None:
        workers = min(usable_cpus(), 16) if work >= 200_000 else 1
    chunk = max(1, min(500, n_puzzles // (4 * max(workers, 1)) or 1))
    jobs = [(g.n, g.br, g.bc, (lo, hi), seed, s, min(s + chunk, n_puzzles), select, max_candidates)
            for s in range(0, n_puzzles, chunk)]
    results = []
    bar = tqdm(total=n_puzzles, desc=f"sudoku {g.n}x{g.n}", unit="puzzle", disable=not progress)
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(workers) as ex:
            for part in ex.map(_gen_chunk, jobs):
                results.extend(part)
                bar.update(len(part))
    else:
        for job in jobs:
            part = _gen_chunk(job)
            results.extend(part)
            bar.update(len(part))
    bar.close()
    puzzles = np.array([r[0] for r in results], dtype=np.int8).reshape(n_puzzles, g.cells)
    sols = np.array([r[1] for r in results], dtype=np.int8).reshape(n_puzzles, g.cells)
    rating = np.array([r[2] for r in results], dtype=np.int32)
    drawn = np.array([r[3] for r in results], dtype=np.int32)
    return SudokuSet(g, puzzles, sols, rating, ["infiloop-generator"] * n_puzzles, drawn)


def singles_solvable(s: SudokuSet) -> np.ndarray:
    """Per puzzle: whether naked and hidden singles alone solve it (bool ``[N]``)."""
    return np.array([solver.singles_solve(p.tolist(), s.g) for p in s.puzzles], dtype=bool)


def difficulty(s: SudokuSet) -> dict:
    """The difficulty distribution of a set: blanks and rating quantiles, fraction singles-solvable."""
    q = (0.0, 0.5, 0.9, 1.0)
    return {"puzzles": len(s), "blanks": [int(v) for v in np.quantile(s.blanks, q, method="lower")],
            "rating": [int(v) for v in np.quantile(s.rating, q, method="lower")],
            "rating_mean": float(s.rating.mean()), "singles": float(singles_solvable(s).mean())}


# ----------------------------------------------------------------------------- augmentation


def random_transforms(count: int, g: Geometry, rng: np.random.Generator):
    """``count`` random validity-preserving transforms: (cell source index [count, n*n],
    digit map [count, n+1] with 0 fixed). ``new[c] = digit_map[old[perm[c]]]``."""
    n, br, bc = g.n, g.br, g.bc
    nb, ns = n // br, n // bc  # bands (of br rows), stacks (of bc columns)

    def axis_perm(groups, size):
        order = np.argsort(rng.random((count, groups)), axis=1)
        inner = np.argsort(rng.random((count, groups, size)), axis=2)
        return (order[:, :, None] * size + inner).reshape(count, groups * size)

    row_p, col_p = axis_perm(nb, br), axis_perm(ns, bc)
    src = row_p[:, :, None] * n + col_p[:, None, :]  # [count, n, n]
    if br == bc:  # transposing keeps a square box shape only
        flip = rng.random(count) < 0.5
        src_t = col_p[:, None, :] * n + row_p[:, :, None]
        src = np.where(flip[:, None, None], src_t, src)
    digits = np.argsort(rng.random((count, n)), axis=1) + 1
    dmap = np.concatenate([np.zeros((count, 1), dtype=np.int64), digits], axis=1)
    return src.reshape(count, n * n), dmap


def apply_transforms(grids: np.ndarray, perm: np.ndarray, dmap: np.ndarray) -> np.ndarray:
    """Apply per-row transforms from :func:`random_transforms` to ``[count, n*n]`` grids (0 blank)."""
    moved = np.take_along_axis(grids.astype(np.int64), perm, axis=1)
    return np.take_along_axis(dmap, moved, axis=1).astype(grids.dtype)


def augment(s: SudokuSet, copies: int, rng: np.random.Generator, keep_original: bool = True):
    """TRM's training augmentation: each puzzle followed by ``copies`` random transforms of it.

    Returns ``(SudokuSet, base_index [M], aug_index [M])``; ``aug_index`` 0 is the original.
    """
    reps = copies + (1 if keep_original else 0)
    base = np.repeat(np.arange(len(s)), reps)
    aug = np.tile(np.arange(reps) + (0 if keep_original else 1), len(s))
    p, q = s.puzzles[base], s.solutions[base]
    moved = aug > 0
    if moved.any():
        perm, dmap = random_transforms(int(moved.sum()), s.g, rng)
        p[moved] = apply_transforms(p[moved], perm, dmap)
        q[moved] = apply_transforms(q[moved], perm, dmap)
    src = [s.source[i] for i in base] if s.source else []
    return SudokuSet(s.g, p, q, s.rating[base], src), base, aug


def augment_tokens(inputs: np.ndarray, labels: np.ndarray, box: tuple[int, int], rng: np.random.Generator):
    """On-the-fly augmentation of a token batch (``[B, n*n]``): one random transform per row,
    applied alike to puzzle and solution. Returns new ``(inputs, labels)`` arrays."""
    g = geometry(int(box[0]) * int(box[1]), box)
    perm, dmap = random_transforms(len(inputs), g, rng)
    x = apply_transforms(np.asarray(inputs).astype(np.int64) - 1, perm, dmap) + 1
    y = apply_transforms(np.asarray(labels).astype(np.int64) - 1, perm, dmap) + 1
    return x.astype(np.asarray(inputs).dtype), y.astype(np.asarray(labels).dtype)


# ----------------------------------------------------------------------------- tokens


def encode(grids: np.ndarray) -> np.ndarray:
    """Values (0 blank, 1..n) -> tokens (1 blank, v + 1), as TRM encodes them."""
    return grids.astype(np.int32) + 1


def decode(tokens: np.ndarray) -> np.ndarray:
    """Tokens -> values; pad (0) becomes -1 so that it never counts as a digit."""
    return np.asarray(tokens).astype(np.int32) - 1


def to_taskdata(name: str, s: SudokuSet, meta: dict | None = None, info: dict | None = None) -> TaskData:
    """Token record: inputs = puzzle tokens, labels = full solution tokens (every cell scored)."""
    m = {"blanks": s.blanks, "rating": s.rating.astype(np.int32)}
    m.update(meta or {})
    return TaskData(name=name, inputs=encode(s.puzzles), labels=encode(s.solutions), grid=(s.g.n, s.g.n),
                    vocab_size=s.g.n + 2, meta=m, box=(s.g.br, s.g.bc), n_puzzles=1, info=info or {})


def from_taskdata(d: TaskData) -> SudokuSet:
    """The puzzles of a token record (:func:`to_taskdata`) as a :class:`SudokuSet`."""
    g = geometry(d.grid[0], tuple(d.box) if d.box else None)
    rating = d.meta.get("rating", np.zeros(len(d), np.int32))
    return SudokuSet(g, decode(d.inputs).astype(np.int8), decode(d.labels).astype(np.int8), rating)


def is_valid_solution(tokens: np.ndarray, inputs: np.ndarray, g: Geometry) -> np.ndarray:
    """Per row: predicted tokens form a valid grid that keeps every given (any valid solution)."""
    vals = decode(tokens).reshape(len(tokens), -1)
    ok = check_solutions(g, vals) == ""
    given = np.asarray(inputs) > 1
    return ok & ~((given & (np.asarray(inputs) != np.asarray(tokens))).any(axis=1))
