"""The package's shape: wings that import downwards only, no import cycles, a short top level, short functions,
each profile defined in one place, and the run hashes the restructuring must not move."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "infiloop"
BASE = {"paths", "io", "errors", "config", "machine"}
TRAINING = {"optim", "training", "evaluation", "training_looplm"}
# wing -> the wings it may import (besides itself); the method and the tasks stand on the base alone
ALLOWED = {
    "base": set(),
    "model": {"base"},
    "tasks": {"base"},
    "analysis": {"base", "tasks"},
    "training": {"base", "model", "tasks", "analysis"},
    "experiments": {"base", "model", "tasks", "analysis", "training"},
    "cli": {"base", "model", "tasks", "analysis", "training", "experiments"},
}


def wing(module: str) -> str:
    """``infiloop.model.connections`` -> ``model``; top-level modules by their role."""
    parts = module.split(".")[1:]
    if not parts:
        return "cli"  # the package's __init__ sits above everything it re-exports
    if parts[0] in ("model", "tasks", "analysis", "experiments"):
        return parts[0]
    if parts[0] in BASE:
        return "base"
    if parts[0] in TRAINING:
        return "training"
    if parts[0] in ("cli", "__main__"):
        return "cli"
    raise AssertionError(f"{module}: a top-level module in no wing (add it to BASE, TRAINING or a folder)")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The infiloop modules ``path`` imports (relative imports resolved; ``from . import x`` gives ``x``)."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("infiloop")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("infiloop"):
                continue
            for a in node.names:  # `from . import paths`: the module infiloop.paths, not the package
                sub = PACKAGE.parent / Path(*f"{target}.{a.name}".split("."))
                out.add(f"{target}.{a.name}" if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                        else target)
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_import_goes_down_a_wing():
    wrong = []
    for path in MODULES:
        mod = module_name(path)
        here = wing(mod)
        for target in imports(path):
            there = wing(target)
            if there != here and there not in ALLOWED[here]:
                wrong.append(f"{mod} ({here}) imports {target} ({there})")
    assert not wrong, "imports that climb into a higher wing:\n" + "\n".join(wrong)


def test_the_wing_test_sees_a_climbing_import(tmp_path):
    """The check above would catch the method importing the experiments."""
    assert wing("infiloop.model.connections") == "model" and wing("infiloop.experiments.store.runs") == "experiments"
    assert "experiments" not in ALLOWED["model"] and "analysis" not in ALLOWED["model"]
    assert "experiments" not in ALLOWED["analysis"] and "training" not in ALLOWED["tasks"]


def import_graph(top_level_only: bool = False) -> dict[str, set[str]]:
    """Module -> the infiloop modules it imports: every import by default, those inside functions and under
    ``TYPE_CHECKING`` too (a module's own package ``__init__`` runs before it: not an edge)."""
    graph = {module_name(p): {t for t in imports(p, top_level_only) if t != module_name(p)} for p in MODULES}
    return {mod: {t for t in targets if not mod.startswith(t + ".")} for mod, targets in graph.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> list[str] | None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [m, t] if t in stack else [m, t]
            if t in graph and not state.get(t):
                found = visit(t, stack + [m])
                if found:
                    return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if not state.get(m):
            found = visit(m, [])
            if found:
                return found
    return None


def test_no_import_cycles():
    """No circle through any import: not at the top of a file, not inside a function, not for a type hint."""
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_test_sees_an_import_inside_a_function(tmp_path):
    """The graph counts the imports inside functions and under TYPE_CHECKING, which the top-level view misses (as
    ``cost`` <-> ``cluster`` <-> ``scheduler`` and ``optim`` -> ``training`` once were)."""
    path = PACKAGE / "experiments" / "compute" / "scheduler.py"
    inner = imports(path) - imports(path, top_level_only=True)
    assert "infiloop.experiments.compute.planning" in inner
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


MAX_MODULE_LINES = 500
# Modules outside experiments/ that were longer before the rooms (issue 43), held at their length until split.
LONGER = {"infiloop.training": 838}


def test_no_module_is_longer_than_500_lines():
    long = []
    for path in MODULES:
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > LONGER.get(module_name(path), MAX_MODULE_LINES):
            long.append(f"{module_name(path)}: {n} lines")
    assert not long, long


def test_the_top_level_is_short():
    """Twelve modules at most: the base and the training wing (the reasoner's training and evaluation, the
    optimiser, and the looped decoder's training and evaluation, ``training_looplm.py``); the command line is a
    folder of its own (``cli/``)."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} == {
        "model", "tasks", "analysis", "experiments", "cli"}


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{module_name(path)}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long, long


def test_profiles_are_defined_and_checked_in_one_place():
    """Outside ``settings/profiles.py`` no module compares a value with a profile's name, tests membership in
    a list of them, or reads ``PROFILES``/``DATA_PROFILES`` directly (the CLI lists the data profiles' names)."""
    from infiloop.experiments.settings.profiles import PROFILES

    names = set(PROFILES)
    found = []
    for path in MODULES:
        if path.name == "profiles.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                consts = [c for c in [node.left, *node.comparators] for c in ast.walk(c)
                          if isinstance(c, ast.Constant) and c.value in names]
                if consts:
                    found.append(f"{module_name(path)}:{node.lineno} compares with {consts[0].value!r}")
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                    node.value.id in ("PROFILES", "DATA_PROFILES"):
                found.append(f"{module_name(path)}:{node.lineno} reads {node.value.id}[...]")
    assert not found, found


# Run hashes before the package moved into wings (commit edde66e), for runs of every kind the notebooks train:
# the same runs resolve to the same run folders, so no cached run is trained again.
HASHES = {
    ("sudoku", "carry_last", "smoke", ()): "9cdc6a919b",
    ("sudoku", "infiloop", "smoke", ()): "c944e0a4d4",
    ("sudoku", "fprm", "smoke", ()): "8f7bc05cb8",
    ("sudoku", "carry_last", "tiny", ()): "649c294a1d",
    ("sudoku", "infiloop", "tiny", ()): "52a67c947e",
    ("sudoku", "fprm", "tiny", ()): "5cb82aab41",
    ("sudoku", "carry_last", "search", ()): "b42f67c9b6",
    ("sudoku", "infiloop", "search", ()): "dfa419059c",
    ("sudoku", "fprm", "search", ()): "928ae6f08e",
    ("maze", "infiloop", "tiny", ()): "4fc614d866",
    ("maze", "carry_last", "tiny", ()): "839fbf6b0c",
    ("sudoku", "infiloop", "tiny", (("model.inner.decay", "uniform"), ("model.outer.decay", "uniform"))):
        "ea4710807d",
    ("sudoku", "history_w1", "tiny", ()): "de69ec455b",
    ("sudoku", "loop_gating", "search", (("train.seed", 1),)): "d265491311",
    ("sudoku", "infiloop", "search", (("train.seed", 2),)): "7395125d75",
    ("sudoku", "infiloop", "tiny", (("data.n_train", 500),)): "feb460842d",
}


@pytest.mark.parametrize("run", list(HASHES), ids=lambda r: "-".join(map(str, r[:3])) + ("+" if r[3] else ""))
def test_runs_keep_their_hashes(run):
    from infiloop.experiments.settings.recipes import config_hash, resolve_config

    task, recipe, profile, over = run
    assert config_hash(resolve_config(task, recipe, profile, dict(over))) == HASHES[run]


def test_resolving_a_run_builds_no_data(tmp_path, monkeypatch):
    """Sudoku's and Maze's model settings come from the data settings (``tasks.header``), so resolving even the
    paper's runs builds nothing; the header agrees with the one a built set carries."""
    from infiloop import tasks
    from infiloop.experiments.settings import profiles, recipes
    from infiloop.io import load_npz

    def refuse(*a, **k):
        raise AssertionError("resolve_config built a data set")

    monkeypatch.setattr(tasks, "build", refuse)
    for profile in profiles.PROFILES:
        recipes.resolve_config("sudoku", "infiloop", profile)
    recipes.resolve_config("maze", "carry_last", "paper")
    monkeypatch.undo()
    for task in ("sudoku", "maze"):
        data = profiles.data_profile("smoke")
        built = tasks.build(task, data, root=tmp_path, verbose=False)
        head = json.loads(str(load_npz(built["train"], ["header"])["header"]))
        assert tasks.header(task, tasks.profile_config(task, data)) == {k: head[k] for k in
                                                                        ("grid", "box", "vocab_size", "n_puzzles")}
