"""The exact canonical form of a Sudoku grid under the augmentation group (the leakage audit, ``audit.py``).

The group is :func:`.sudoku.random_transforms`' (band and stack permutations, row and column permutations within
them, transposition where the box is square, any relabelling of the digits). :func:`sudoku_canonical` is the least
grid, row-major with blank (0) first, over the spatial transforms, of the transformed grid with its digits relabelled
1, 2, ... in order of first appearance; it is computed exactly by branch and bound. :func:`sudoku_invariants` are
exact invariants that decide first which grids can be equivalent at all.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np

from .sudoku_solver import Geometry


@cache
def axis_perms(groups: int, size: int) -> np.ndarray:
    """Every arrangement of ``groups`` blocks of ``size`` lines that keeps blocks whole: ``[groups! size!^groups,
    groups * size]``, output line -> source line."""
    out = []
    for order in itertools.permutations(range(groups)):
        for inner in itertools.product(itertools.permutations(range(size)), repeat=groups):
            out.append([order[s] * size + inner[s][k] for s in range(groups) for k in range(size)])
    return np.array(out, dtype=np.int64)


def sudoku_group_size(g: Geometry) -> int:
    """The number of spatial transforms of the Sudoku group (digit relabelling apart)."""
    nb, ns = g.n // g.br, g.n // g.bc
    rows = math.factorial(nb) * math.factorial(g.br) ** nb
    cols = math.factorial(ns) * math.factorial(g.bc) ** ns
    return rows * cols * (2 if g.br == g.bc else 1)


def sudoku_group_words(g: Geometry) -> str:
    t = ", transposition" if g.br == g.bc else ""
    return (f"the {sudoku_group_size(g):,} symmetries of {g.n}x{g.n} Sudoku with {g.br}x{g.bc} boxes (band, stack, "
            f"row and column permutations{t}) and digit relabelling")


def sudoku_canonical(grids: np.ndarray, g: Geometry, states: int = 400_000) -> np.ndarray:
    """The exact canonical form of each grid (``[N, n*n]``, 0 blank, digits 1..n; puzzles or solutions) under the
    Sudoku group of :func:`.sudoku.random_transforms` with digit relabelling: ``[N, n*n]`` int8, equal for two grids
    exactly when one is a transform of the other.

    The least over the spatial transforms (row-major, lexicographic, 0 first) of the transformed grid relabelled
    1, 2, ... in order of first appearance. Branch and bound: a state is (orientation and column arrangement,
    the rows chosen so far, the digit relabelling so far); every column arrangement starts, each step appends
    each row allowed next (an unused band's row at a band's start, else an unused row of the current band), and
    only the states whose new row is the least for their grid survive (a larger prefix cannot become the least
    grid). States with the same arrangement, the same rows used and the same relabelling have the same future
    and are merged. ``states`` bounds the work of one batch of grids."""
    n, br, bc = g.n, g.br, g.bc
    grids = np.asarray(grids)
    if grids.ndim != 2 or grids.shape[1] != n * n:
        raise ValueError(f"grids must be [N, {n * n}], got {grids.shape}")
    cols = axis_perms(n // bc, bc)
    per_grid = (2 if br == bc else 1) * len(cols) * n
    step = max(1, states // per_grid)
    out = np.zeros((len(grids), n * n), np.int8)
    for a in range(0, len(grids), step):
        out[a:a + step] = _canonical_batch(grids[a:a + step].reshape(-1, n, n), g, cols)
    return out


def _canonical_batch(grids: np.ndarray, g: Geometry, cols: np.ndarray) -> np.ndarray:
    n, br = g.n, g.br
    n_grids, n_cols = len(grids), len(cols)
    sources = [grids] + ([grids.transpose(0, 2, 1)] if g.br == g.bc else [])
    n_t = len(sources)
    # arrangements: arr = (grid * n_t + t) * n_cols + c holds source t of the grid with its columns in order cols[c]
    arrange = np.stack([s[:, :, cols].astype(np.int8) for s in sources], axis=1)  # [G, T, n, C, n]
    arrange = arrange.transpose(0, 1, 3, 2, 4).reshape(n_grids * n_t * n_cols, n, n)
    arr = np.arange(len(arrange))
    gid = arr // (n_t * n_cols)
    lut = np.zeros((len(arr), n + 1), np.int64)  # digit -> label (0 while unseen; 0 stays 0)
    nxt = np.ones(len(arr), np.int64)
    used = np.zeros((len(arr), n), bool)
    band_of = np.arange(n) // br
    powers = (n + 1) ** np.arange(n - 1, -1, -1, dtype=np.int64)
    bits = 1 << np.arange(n, dtype=np.int64)
    lut_powers = (n + 1) ** np.arange(n + 1, dtype=np.int64)
    out = np.zeros((n_grids, n, n), np.int8)
    last = np.zeros(len(arr), np.int64)
    for i in range(n):
        if i % br == 0:
            allowed = ~used.reshape(len(arr), n // br, br).any(axis=2)[:, band_of]
        else:
            allowed = (band_of[None, :] == band_of[last][:, None]) & ~used
        si, r = np.nonzero(allowed)
        vals = arrange[arr[si], r].astype(np.int64)
        lu, nx = lut[si], nxt[si]
        e = np.arange(len(si))
        row = np.zeros_like(vals)
        for k in range(n):
            v = vals[:, k]
            new = (v != 0) & (lu[e, v] == 0)
            lu[e[new], v[new]] = nx[new]
            nx = nx + new
            row[:, k] = lu[e, v]
        key = row @ powers
        gs = gid[si]  # non-decreasing: states stay ordered by grid
        starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
        best = np.minimum.reduceat(key, starts)
        keep = key == np.repeat(best, np.diff(np.r_[starts, len(gs)]))
        kept = np.flatnonzero(keep)
        lead = kept[np.r_[True, gs[kept][1:] != gs[kept][:-1]]]  # one least state of each grid
        out[gs[lead], i] = row[lead]
        si, r = si[keep], r[keep]
        arr, gid, lut, nxt, last = arr[si], gid[si], lu[keep], nx[keep], r
        used = used[si]
        used[np.arange(len(si)), r] = True
        # merge states with the same future: same arrangement, same rows used, same relabelling
        ident, labels = arr * (1 << n) + used @ bits, lut @ lut_powers
        order = np.lexsort((labels, ident))
        idk, lk = ident[order], labels[order]
        uniq = order[np.r_[True, (idk[1:] != idk[:-1]) | (lk[1:] != lk[:-1])]]
        uniq.sort()
        arr, gid, lut, nxt, last, used = arr[uniq], gid[uniq], lut[uniq], nxt[uniq], last[uniq], used[uniq]
    return out.reshape(n_grids, n * n)


def _pair_shapes(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """For rows (or columns) ``a`` and ``b`` (``[N, n]``): the partial digit permutation a[c] -> b[c] over the
    positions where both are given, as a code per grid that depends only on its shape (the lengths of its cycles
    and paths), so it is unchanged by digit relabelling, by moving positions, and by exchanging ``a`` and ``b``."""
    N = len(a)
    gi = np.arange(N)[:, None]
    both = (a > 0) & (b > 0)
    fwd_map = np.zeros((N, n + 1), np.int64)
    bwd_map = np.zeros((N, n + 1), np.int64)
    fwd_map[gi, np.where(both, a, 0)] = np.where(both, b, 0)
    bwd_map[gi, np.where(both, b, 0)] = np.where(both, a, 0)
    fwd_map[:, 0] = bwd_map[:, 0] = 0
    start = np.broadcast_to(np.arange(1, n + 1), (N, n))
    involved = (fwd_map[:, 1:] > 0) | (bwd_map[:, 1:] > 0)

    def walk(m):
        cur, steps, cycle = start.copy(), np.zeros((N, n), np.int64), np.zeros((N, n), np.int64)
        for k in range(1, n + 1):
            cur = m[gi, cur]
            alive = cur > 0
            steps += alive & (cycle == 0)
            cycle = np.where((cycle == 0) & (cur == start), k, cycle)
        return steps, cycle

    f_steps, cycle = walk(fwd_map)
    b_steps, _ = walk(bwd_map)
    code = np.where(cycle > 0, cycle, np.where(involved, n + f_steps + b_steps + 1, 0))
    code.sort(axis=1)
    return code @ ((2 * n + 2) ** np.arange(n - 1, -1, -1, dtype=np.int64))


def _orientation_invariant(x: np.ndarray, block: int, n: int) -> np.ndarray:
    """Invariant of the rows of ``x`` ([N, n, n]) grouped in blocks of ``block`` lines under permutations of the
    blocks, of the lines within blocks and of the positions along them: given counts by block, and the pair
    shapes of lines in the same block and in different blocks, each sorted."""
    N = len(x)
    counts = (x > 0).sum(axis=2).reshape(N, n // block, block)
    counts.sort(axis=2)
    block_codes = np.sort(counts @ ((n + 1) ** np.arange(block - 1, -1, -1)), axis=1)
    same, cross = [], []
    for i, j in itertools.combinations(range(n), 2):
        (same if i // block == j // block else cross).append(_pair_shapes(x[:, i], x[:, j], n))
    parts = [block_codes, np.sort(np.stack(same, axis=1), axis=1)]
    if cross:
        parts.append(np.sort(np.stack(cross, axis=1), axis=1))
    return np.concatenate(parts, axis=1)


def sudoku_invariants(grids: np.ndarray, g: Geometry) -> list[bytes]:
    """A key per grid that is unchanged by the Sudoku group (so equivalent grids share it; grids that share it
    need not be equivalent): digit counts, and for rows by band and columns by stack the given counts and the
    shapes of the partial digit permutations between pairs of lines (rows and columns unordered where the box is
    square, since transposition exchanges them)."""
    n = g.n
    x = np.asarray(grids).reshape(-1, n, n).astype(np.int64)
    digits = np.sort(np.stack([(x == d).sum(axis=(1, 2)) for d in range(1, n + 1)], axis=1), axis=1)
    rows = _orientation_invariant(x, g.br, n)
    cols = _orientation_invariant(x.transpose(0, 2, 1), g.bc, n)
    keys = []
    for k in range(len(x)):
        r, c = rows[k].tobytes(), cols[k].tobytes()
        if g.br == g.bc and c < r:
            r, c = c, r
        keys.append(digits[k].tobytes() + b"|" + r + b"|" + c)
    return keys


def canonical_keys(grids: np.ndarray, g: Geometry, invariants: list[bytes], wanted: set) -> list[bytes | None]:
    """Canonical forms (as bytes) of the grids whose invariant is in ``wanted``; None for the others."""
    rows = [i for i, k in enumerate(invariants) if k in wanted]
    out: list[bytes | None] = [None] * len(grids)
    if rows:
        canon = sudoku_canonical(np.asarray(grids)[rows], g)
        for i, c in zip(rows, canon):
            out[i] = c.tobytes()
    return out
