"""The cost model is a leaf (issue 62): the run path (``experiments/compute/``, ``experiments/store/``,
``training/``, ``evaluation.py`` and the model) imports nothing of ``experiments/cost/``, not even inside a function;
its callers price the jobs there and pass the prices in. And both rooms stay small: ``compute/`` at most 2,500
lines in all, no module of ``compute/`` or ``cost/`` over 400."""

from __future__ import annotations

from test_structure import PACKAGE, import_graph, imports, module_name

RUN_PATH = ("infiloop.experiments.compute", "infiloop.experiments.store", "infiloop.training", "infiloop.evaluation",
            "infiloop.model")
COST = "infiloop.experiments.cost"
COMPUTE_LINES, ROOM_MODULE_LINES = 2500, 400
LONGER: dict[str, int] = {}  # modules allowed over the limit (none now)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_run_path_does_not_import_the_cost_model():
    graph = import_graph()
    assert any(_within(m, RUN_PATH) for m in graph) and any(_within(m, (COST,)) for m in graph)
    wrong = sorted(f"{m} imports {t}" for m, targets in graph.items() if _within(m, RUN_PATH)
                   for t in targets if _within(t, (COST,)))
    assert not wrong, "the run path asks the cost model itself; let its caller pass the prices in:\n" + "\n".join(wrong)


def test_the_leaf_test_sees_an_import_inside_a_function():
    """``studies/contrast_rows.py`` imports the cost model inside a function only: the graph above counts it."""
    path = PACKAGE / "experiments" / "studies" / "contrast_rows.py"
    inner = imports(path) - imports(path, top_level_only=True)
    assert "infiloop.experiments.cost.arithmetic" in inner
    assert _within("infiloop.experiments.cost.plan", (COST,)) and not _within("infiloop.experiments.costs", (COST,))


def _lines(folder: str) -> dict[str, int]:
    return {module_name(p): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted((PACKAGE / "experiments" / folder).glob("*.py"))}


def test_compute_and_cost_are_short():
    compute, cost = _lines("compute"), _lines("cost")
    assert sum(compute.values()) <= COMPUTE_LINES, f"compute/: {sum(compute.values())} lines"
    long = [f"{m}: {n} lines" for m, n in {**compute, **cost}.items() if n > LONGER.get(m, ROOM_MODULE_LINES)]
    assert not long, long
