"""The public puzzle CSV format shared by Sudoku-Extreme and Maze-Hard (the paper's benchmarks; TRM's format).

Header ``source,question,answer,rating``; one puzzle per row; a grid of side ``n`` is a string of
``n * n`` characters, row-major. Files are UTF-8 text (a byte-order mark is accepted). Reading returns
every row with its line number, or raises a :class:`DataError` naming the file, the line and the fault;
nothing is half-loaded.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..io import atomic_write_text
from .base import DataError, where

HEADER = ("source", "question", "answer", "rating")


@dataclass
class CsvRows:
    path: str
    source: list[str]
    question: list[str]
    answer: list[str]
    rating: list[int]
    line: list[int]

    def __len__(self) -> int:
        return len(self.question)


def read_puzzle_csv(path: str | os.PathLike) -> CsvRows:
    """Read a public-format CSV: header check, 4 fields, integer rating, square grids of one size."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return _read(path)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not a UTF-8 text file (it holds the byte 0x{e.object[e.start]:02x}); "
                        f"expected a CSV with the header {','.join(HEADER)}") from None


def grid_side(path: str | os.PathLike) -> int | None:
    """The grid side of the first puzzle row of a public-format CSV, or ``None`` if it cannot be told
    (then :func:`read_puzzle_csv` names the fault)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            next(reader)
            for rec in reader:
                if len(rec) == 4:
                    k = math.isqrt(len(rec[1]))
                    return k if k > 0 and k * k == len(rec[1]) else None
                if rec:
                    return None
    except (OSError, UnicodeDecodeError, csv.Error, StopIteration):
        return None
    return None


def _read(path: Path) -> CsvRows:
    rows = CsvRows(str(path), [], [], [], [], [])
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError(f"{where(path, 1)}empty file (expected header {','.join(HEADER)})") from None
        except csv.Error as e:
            raise DataError(f"{where(path, reader.line_num)}malformed CSV: {e}") from None
        if tuple(h.strip() for h in header) != HEADER:
            raise DataError(f"{where(path, 1)}header is {','.join(header)!r}, expected {','.join(HEADER)!r}")
        side = None
        try:
            for rec in reader:
                ln = reader.line_num
                if not rec:
                    continue
                if len(rec) != 4:
                    raise DataError(f"{where(path, ln)}{len(rec)} fields, expected 4 ({','.join(HEADER)})")
                source, q, a, r = rec
                try:
                    rating = int(r)
                except ValueError:
                    raise DataError(f"{where(path, ln)}rating {r!r} is not an integer") from None
                for col, s in (("question", q), ("answer", a)):
                    k = math.isqrt(len(s))
                    if k * k != len(s) or k == 0:
                        raise DataError(f"{where(path, ln)}{col} has {len(s)} characters, not a square grid")
                    if side is None:
                        side = k
                    if k != side:
                        raise DataError(
                            f"{where(path, ln)}{col} has {len(s)} characters, expected {side * side} "
                            f"(grid side {side} as in the first row)"
                        )
                rows.source.append(source)
                rows.question.append(q)
                rows.answer.append(a)
                rows.rating.append(rating)
                rows.line.append(ln)
        except csv.Error as e:
            raise DataError(f"{where(path, reader.line_num)}malformed CSV: {e}") from None
    if not rows.question:
        raise DataError(f"{path}: no puzzle rows after the header")
    return rows


def write_puzzle_csv(path: str | os.PathLike, source, question, answer, rating) -> Path:
    """Write rows in the public format, atomically."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for row in zip(source, question, answer, rating):
        w.writerow([row[0], row[1], row[2], int(row[3])])
    return atomic_write_text(path, buf.getvalue())
