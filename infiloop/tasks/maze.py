"""Maze-Hard: public CSV, validation, offline generator, tokens (the paper's benchmarks; TRM's format).

A maze of side K is K*K characters: ``#`` wall, space open, ``S`` start, ``G`` goal; the answer
adds ``o`` on the cells of a shortest S->G path (4-neighbour moves). Path length = number of moves
from S to G (so the answer holds ``length - 1`` ``o`` cells). Maze-Hard is 30x30 with paths longer
than 110. Tokens: TRM's charset ``"# SGo"`` -> 1..5, 0 pad; labels are the answer grid.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ..machine import progress_bar
from .base import DataError, TaskData, dihedral, where
from .csvio import read_puzzle_csv, write_puzzle_csv

tqdm = progress_bar()
CHARSET = "# SGo"
HUB_REPO = "sapientinc/maze-30x30-hard-1k"
WALL, OPEN, START, GOAL, PATH = (ord(c) for c in CHARSET)


@dataclass
class MazeSet:
    size: int
    questions: list[str]
    answers: list[str]
    path_length: np.ndarray
    source: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.questions)

    def take(self, idx) -> MazeSet:
        """The mazes at ``idx``, in that order."""
        idx = [int(i) for i in idx]
        return MazeSet(self.size, [self.questions[i] for i in idx], [self.answers[i] for i in idx],
                       self.path_length[idx], [self.source[i] for i in idx] if self.source else [])


@cache
def _neighbours(size: int):
    nb = []
    for i in range(size * size):
        r, c = divmod(i, size)
        nb.append([j for j, ok in ((i - size, r > 0), (i + size, r < size - 1), (i - 1, c > 0),
                                   (i + 1, c < size - 1)) if ok])
    return nb


def bfs(open_cells, start: int, nb) -> tuple[list[int], list[int]]:
    """Distances from ``start`` over cells where ``open_cells[i]`` is true (-1 = unreachable) and the
    number of shortest paths to each cell, capped at 2."""
    dist = [-1] * len(open_cells)
    count = [0] * len(open_cells)
    dist[start], count[start] = 0, 1
    q = deque([start])
    while q:
        u = q.popleft()
        du = dist[u] + 1
        for v in nb[u]:
            if not open_cells[v]:
                continue
            if dist[v] < 0:
                dist[v] = du
                count[v] = count[u]
                q.append(v)
            elif dist[v] == du and count[v] < 2:
                count[v] = min(2, count[v] + count[u])
    return dist, count


def check_row(q: str, a: str) -> tuple[str, int]:
    """(fault or ``""``, path length) for one question/answer pair."""
    size = int(round(len(q) ** 0.5))
    if set(q) - set("# SG"):
        return f"question has character {sorted(set(q) - set('# SG'))[0]!r}; allowed: '#', ' ', 'S', 'G'", 0
    if set(a) - set(CHARSET):
        return f"answer has character {sorted(set(a) - set(CHARSET))[0]!r}; allowed: '#', ' ', 'S', 'G', 'o'", 0
    if q.count("S") != 1 or q.count("G") != 1:
        return f"question needs exactly one S and one G (has {q.count('S')} S, {q.count('G')} G)", 0
    diff = [i for i, (x, y) in enumerate(zip(q, a)) if x != y and not (x == " " and y == "o")]
    if diff:
        i = diff[0]
        return (f"answer differs from the question at row {i // size + 1}, column {i % size + 1} "
                f"({q[i]!r} -> {a[i]!r}); only open cells may become 'o'"), 0
    nb = _neighbours(size)
    s, g = q.index("S"), q.index("G")
    dist, _ = bfs([ch != "#" for ch in q], s, nb)
    d = dist[g]
    if d < 0:
        return "G is not reachable from S", 0
    n_o = a.count("o")
    if n_o != d - 1:
        return f"labelled path has {n_o} 'o' cells, a shortest path has {d - 1} (length {d})", d
    pd, _ = bfs([ch in "SGo" for ch in a], s, nb)
    if pd[g] != d:
        return "labelled 'o' cells do not form a path from S to G", d
    return "", d


def validate(s: MazeSet, path=None, lines=None) -> None:
    for i, (q, a) in enumerate(zip(s.questions, s.answers)):
        fault, d = check_row(q, a)
        if fault:
            raise DataError(f"{where(path, lines[i] if lines else i + 1)}{fault}")
        s.path_length[i] = d


def read_csv(path) -> MazeSet:
    """Read and validate a Maze CSV (public format); raise :class:`DataError` on any bad row."""
    rows = read_puzzle_csv(path)
    size = int(round(len(rows.question[0]) ** 0.5))
    s = MazeSet(size, rows.question, rows.answer, np.zeros(len(rows), np.int32), rows.source)
    validate(s, path, rows.line)
    return s


def write_csv(path, s: MazeSet) -> None:
    """Public format; the rating column holds the path length."""
    write_puzzle_csv(path, s.source or ["infiloop-generator"] * len(s), s.questions, s.answers, s.path_length)


def dead_ends(q: str) -> int:
    """Dead ends of a maze: open cells other than S and G with exactly one open neighbour."""
    nb = _neighbours(int(round(len(q) ** 0.5)))
    return sum(1 for i, ch in enumerate(q) if ch == " " and sum(q[j] != "#" for j in nb[i]) == 1)


def difficulty(s: MazeSet) -> dict:
    """The difficulty distribution of a set: quantiles (0, 0.5, 0.9, 1) of the shortest-path length,
    of the number of dead ends and of the fraction of open cells on the path."""
    q = (0.0, 0.5, 0.9, 1.0)
    ends = [dead_ends(x) for x in s.questions]
    on_path = [(d + 1) / sum(ch != "#" for ch in x) for x, d in zip(s.questions, s.path_length)]
    return {"mazes": len(s), "path_length": [int(v) for v in np.quantile(s.path_length, q, method="lower")],
            "dead_ends": [int(v) for v in np.quantile(ends, q, method="lower")],
            "path_share": [round(float(v), 3) for v in np.quantile(on_path, q)]}


# ----------------------------------------------------------------------------- generator


def _carve(size: int, rng: random.Random, loops: float) -> bytearray:
    """Perfect maze by randomised depth-first search on the lattice of even coordinates, then a
    fraction ``loops`` of the remaining inner walls between lattice cells opened (cycles)."""
    grid = bytearray(b"#" * (size * size))
    m = (size + 1) // 2  # lattice cells per side
    seen = [False] * (m * m)
    start = rng.randrange(m * m)
    seen[start] = True
    grid[(start // m) * 2 * size + (start % m) * 2] = OPEN
    stack = [start]
    while stack:
        u = stack[-1]
        ur, uc = divmod(u, m)
        opts = [(ur + dr, uc + dc) for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1))
                if 0 <= ur + dr < m and 0 <= uc + dc < m and not seen[(ur + dr) * m + uc + dc]]
        if not opts:
            stack.pop()
            continue
        vr, vc = opts[rng.randrange(len(opts))]
        seen[vr * m + vc] = True
        grid[(ur + vr) * size + (uc + vc)] = OPEN  # wall between (2ur,2uc) and (2vr,2vc)
        grid[2 * vr * size + 2 * vc] = OPEN
        stack.append(vr * m + vc)
    if loops > 0:
        walls = [r * size + c for r in range(size) for c in range(size)
                 if (r % 2) != (c % 2) and grid[r * size + c] == WALL
                 and (r + 1 < size if r % 2 else c + 1 < size)]
        for w in rng.sample(walls, int(loops * len(walls))):
            grid[w] = OPEN
    return grid


def generate_one(size: int, min_path: int, rng: random.Random, loops: float = 0.05, max_tries: int = 200,
                 min_dead_ends: int = 0):
    """One maze with a *unique* shortest path of at least ``min_path`` moves and at least
    ``min_dead_ends`` dead ends: (question, answer, length)."""
    nb = _neighbours(size)
    for _ in range(max_tries):
        grid = _carve(size, rng, loops)
        cells = [i for i, ch in enumerate(grid) if ch == OPEN]
        is_open = [ch == OPEN for ch in grid]
        d0, _ = bfs(is_open, rng.choice(cells), nb)
        far = max(d0)
        s = rng.choice([i for i in cells if d0[i] >= far - 2])  # near one end of the longest route
        dist, count = bfs(is_open, s, nb)
        goals = [i for i in cells if dist[i] >= min_path and count[i] == 1]
        if not goals:
            continue
        g = rng.choice(goals)
        q = bytearray(grid)
        q[s], q[g] = START, GOAL
        if min_dead_ends and dead_ends(q.decode()) < min_dead_ends:
            continue
        a = bytearray(q)
        v = g
        while dist[v] > 1:
            v = next(u for u in nb[v] if dist[u] == dist[v] - 1)
            a[v] = PATH
        return q.decode(), a.decode(), dist[g]
    raise RuntimeError(f"no {size}x{size} maze with a unique path of >= {min_path} moves"
                       + (f" and >= {min_dead_ends} dead ends" if min_dead_ends else "") + f" in {max_tries} tries")


def generate(n: int, size: int, min_path: int, seed: int | str = 0, loops: float = 0.05,
             progress: bool = True, min_dead_ends: int = 0) -> MazeSet:
    """``n`` mazes; maze ``i`` depends only on ``(size, min_path, loops, seed, i)`` and
    ``min_dead_ends`` (rejection sampling from maze ``i``'s random stream)."""
    if size < 3:
        raise ValueError(f"maze size {size} is too small (need >= 3)")
    qs, ans, lens = [], [], []
    for i in tqdm(range(n), desc=f"maze {size}x{size}", unit="maze", disable=not progress):
        rng = random.Random(f"maze/{size}/{min_path}/{loops}/{seed}/{i}")
        q, a, d = generate_one(size, min_path, rng, loops, min_dead_ends=min_dead_ends)
        qs.append(q)
        ans.append(a)
        lens.append(d)
    return MazeSet(size, qs, ans, np.asarray(lens, np.int32), ["infiloop-generator"] * n)


# ----------------------------------------------------------------------------- tokens


def encode(strings: list[str]) -> np.ndarray:
    """Characters ``# SGo`` -> tokens 1..5 (``[N, K*K]`` int32)."""
    table = np.zeros(256, np.int32)
    table[[ord(c) for c in CHARSET]] = np.arange(1, len(CHARSET) + 1)
    return table[np.frombuffer("".join(strings).encode("ascii"), np.uint8)].reshape(len(strings), -1)


def decode(tokens: np.ndarray) -> list[str]:
    chars = np.array(list("?" + CHARSET))
    return ["".join(r) for r in chars[np.clip(np.asarray(tokens), 0, len(CHARSET))]]


def from_taskdata(d: TaskData) -> MazeSet:
    """The mazes of a token record (:func:`to_taskdata`, first dihedral view) as a :class:`MazeSet`."""
    rows = np.flatnonzero(d.meta["view"] == 0) if "view" in d.meta else np.arange(len(d))
    return MazeSet(d.grid[0], decode(d.inputs[rows]), decode(d.labels[rows]), d.meta["path_length"][rows])


def to_taskdata(name: str, s: MazeSet, dihedral_views: bool = False, info: dict | None = None,
                record_dead_ends: bool = False) -> TaskData:
    """Token record; with ``dihedral_views`` each maze appears in all 8 dihedral transforms (TRM's
    optional maze augmentation), recorded in ``meta['view']``; with ``record_dead_ends`` each maze's dead
    ends are recorded in ``meta['dead_ends']``."""
    x, y = encode(s.questions), encode(s.answers)
    views = range(8) if dihedral_views else range(1)
    xs, ys, vs, base = [], [], [], []
    for t in views:
        xs.append(dihedral(x.reshape(-1, s.size, s.size), t).reshape(len(x), -1))
        ys.append(dihedral(y.reshape(-1, s.size, s.size), t).reshape(len(y), -1))
        vs.append(np.full(len(x), t, np.int16))
        base.append(np.arange(len(x)))
    base = np.concatenate(base)
    meta = {"path_length": s.path_length[base].astype(np.int32), "view": np.concatenate(vs), "base": base}
    if record_dead_ends:
        meta["dead_ends"] = np.array([dead_ends(q) for q in s.questions], np.int16)[base]
    return TaskData(name=name, inputs=np.concatenate(xs), labels=np.concatenate(ys), grid=(s.size, s.size),
                    vocab_size=len(CHARSET) + 1, meta=meta, n_puzzles=1, info=info or {})
