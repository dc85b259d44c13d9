"""ARC grids up to the project's views (the 8 rotations and reflections, any permutation of the colours 1..9): their
canonical forms, and the decoded grids of a token set's rows, for the leakage audit (``audit.py``)."""

from __future__ import annotations

import numpy as np

from .arc import decode_grid
from .base import DataError, TaskData, dihedral


def _relabel(colours: np.ndarray) -> np.ndarray:
    """Colours 1..9 renamed 1, 2, ... in order of first appearance (0 stays): the same for every colour map."""
    flat = colours.reshape(-1)
    lut = np.zeros(10, np.int8)
    seen = [c for c in dict.fromkeys(flat.tolist()) if c != 0]
    lut[seen] = np.arange(1, len(seen) + 1)
    return lut[colours]


def arc_canonical(grid: np.ndarray) -> bytes:
    """The canonical form of an ARC grid under the project's views (8 dihedral transforms, any permutation of the
    colours 1..9, 0 fixed): the least of the 8 transforms, each with its colours relabelled by first appearance,
    with its shape; equal for two grids exactly when one is a view of the other."""
    grid = np.asarray(grid, np.int8)
    keys = []
    for t in range(8):
        v = np.ascontiguousarray(dihedral(grid, t))
        keys.append(bytes(v.shape) + _relabel(v).tobytes())
    return min(keys)


def arc_pair_canonical(inp: np.ndarray, out: np.ndarray) -> bytes:
    """The canonical form of an (input, output) pair under one view applied to both (colours relabelled by
    first appearance in the input, then the output)."""
    inp, out = np.asarray(inp, np.int8), np.asarray(out, np.int8)
    keys = []
    for t in range(8):
        a, b = np.ascontiguousarray(dihedral(inp, t)), np.ascontiguousarray(dihedral(out, t))
        both = _relabel(np.concatenate([a.reshape(-1), b.reshape(-1)]))
        keys.append(bytes(a.shape) + bytes(b.shape) + both.tobytes())
    return min(keys)


def arc_grids(d: TaskData, rows, canvas: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (input, output) grids of ``rows``, decoded from their canvases (DataError naming a row that does not)."""
    out = []
    for r in rows:
        a, b = decode_grid(d.inputs[r], canvas), decode_grid(d.labels[r], canvas)
        if a is None or b is None:
            raise DataError(f"{d.name}: row {r} does not decode to an ARC grid")
        out.append((a, b))
    return out


def exact_keys(grids: list[tuple[np.ndarray, np.ndarray]], outputs_only: bool = False) -> list[bytes]:
    """Byte keys under which two grids (or pairs) are identical, not merely equal under a view."""
    if outputs_only:
        return [b.tobytes() + bytes(b.shape) for _, b in grids]
    return [bytes(a.shape) + a.tobytes() + bytes(b.shape) + b.tobytes() for a, b in grids]

