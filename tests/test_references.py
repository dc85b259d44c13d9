"""Names of the project's own code in its prose point somewhere: every ``infiloop/...`` path and every
``infiloop.x.y`` module or attribute named in README.md, docs/*.md and the package's docstrings and comments exists.
A module moved or renamed without its mentions fails here, naming the file that still points to the old place."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "infiloop"
PATH = re.compile(r"(?<![\w/.-])infiloop/[\w/.-]*")
DOTTED = re.compile(r"(?<![\w/.-])infiloop(?:\.\w+)+")
PLACEHOLDER = re.compile(r"NN|<|\*|\{")  # a pattern such as nbNN_name.py or <task>/, not a name


def _texts() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(PACKAGE.rglob("*.py"))]


def _path_exists(name: str) -> bool:
    name = name.rstrip(".")
    return (ROOT / name).exists()


def _module_and_attributes(name: str) -> bool:
    """``infiloop.a.b.C.d``: the longest prefix that is a module of the package, the rest attributes of it (a
    dataclass's field counts)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            break
    else:
        return False
    rest = parts[i:]
    if not rest:
        return True
    obj = importlib.import_module(".".join(parts[:i]))
    for attr in rest:
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
        elif attr in getattr(obj, "__dataclass_fields__", {}):
            obj = None  # a field without a class-level default: nothing further to follow
        else:
            return False
    return True


def stale(paths: list[Path]) -> set[tuple[str, str]]:
    """(file, name) for every name of the project's code in ``paths`` that points nowhere."""
    out = set()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        for m in PATH.finditer(text):
            name = m.group(0).rstrip(".,;:)")
            if not PLACEHOLDER.search(name) and not _path_exists(name):
                out.add((where, name))
        for m in DOTTED.finditer(text):
            name = m.group(0).rstrip(".")
            if not PLACEHOLDER.search(name) and not _module_and_attributes(name):
                out.add((where, name))
    return out


def test_every_named_module_and_path_exists():
    found = stale(_texts())
    assert found == set(), sorted(found)


@pytest.mark.parametrize("mention, fine", [
    ("see ``infiloop/training/looplm.py``", True), ("see ``infiloop/training_looplm.py``", False),
    ("``infiloop/cli/``", True), ("``infiloop/cli.py``", False),
    ("``infiloop.evaluation.EvalRequest.cache_args``", True), ("``infiloop.evaluation.EvalRequest.updates``", True),
    ("``infiloop.evaluation.Request``", False), ("``infiloop.training_looplm.run``", False),
    ("python -m infiloop.experiments.looplm --task kinship", True), ("``infiloop.aggregate``", True),
    ("the spec module `infiloop/experiments/notebooks/experiments/nbNN_name.py`", True),
])
def test_a_stale_mention_is_found(tmp_path, mention, fine):
    page = tmp_path / "page.md"
    page.write_text(f"A page that mentions {mention}.\n")
    assert (stale([page]) == set()) is fine
