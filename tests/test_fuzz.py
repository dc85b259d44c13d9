"""Property-based fuzzing (hypothesis) of every reader of user input: Sudoku and Maze CSV files, ARC task JSON,
``--set`` values, notebook parameters, run archives, and a run folder's ``config.json`` and ``metrics.jsonl``.

Each property: the reader either accepts the input, and then an independent check written here agrees that
the input is valid, or refuses it with one ``error:`` line (a ``DataError``/``UsageError``); never a traceback,
a hang or a wrong dataset accepted in silence. The default suite runs a small budget of examples per reader
(``FUZZ_EXAMPLES``, about a minute in all); ``pytest -m slow tests/test_fuzz.py`` runs the deep budget.
"""

from __future__ import annotations

import io
import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infiloop.cli import main
from infiloop.errors import DataError, UsageError
from infiloop.tasks import arc, maze, sudoku

FUZZ_EXAMPLES = int(os.environ.get("INFILOOP_FUZZ_EXAMPLES", "100"))
DEEP_EXAMPLES = 1000
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
DEEP = settings(FUZZ, max_examples=DEEP_EXAMPLES)


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


# ------------------------------------------------------------------------------------------ mutations of a text

# characters that matter to the formats (separators, quotes, digits, blanks, maze cells), and hostile ones
ALPHABET = st.sampled_from(list(",\n\r\"'.0123456789# SGo\t") + ["\x00", "é", "\ufeff", "\u2028", "x", "-", ";"])


@st.composite
def mutated(draw, text: str) -> str:
    """``text`` after 1-4 random edits: replace, insert or delete a character, or duplicate or drop a line."""
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "insert", "delete", "dup_line", "drop_line"]))
        if op in ("dup_line", "drop_line"):
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = [lines[i]] * 2 if op == "dup_line" else []
            text = "\n".join(lines)
            continue
        i = draw(st.integers(0, max(0, len(text) - 1)))
        if op == "insert" or not text:
            text = text[:i] + draw(ALPHABET) + text[i:]
        elif op == "replace":
            text = text[:i] + draw(ALPHABET) + text[i + 1:]
        else:
            text = text[:i] + text[i + 1:]
    return text


def csv_rows(text: str) -> list[tuple[str, str]]:
    """(question, answer) of each data row of a public-format CSV, by the csv module (the independent reading)."""
    import csv

    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"), newline="")))
    return [(r[1], r[2]) for r in rows[1:] if r]


# ------------------------------------------------------------------------------------------ Sudoku and Maze CSV

def valid_sudoku_row(q: str, a: str, box: tuple[int, int]) -> bool:
    """Written here from the rules: the answer a complete grid whose rows, columns and boxes hold 1..n once;
    every given of the question (not '0' or '.') equal to the answer's digit."""
    n = box[0] * box[1]
    if len(q) != n * n or len(a) != n * n:
        return False
    digits = {str(d) for d in range(1, n + 1)}
    if any(ch not in digits for ch in a) or any(ch not in digits | {"0", "."} for ch in q):
        return False
    g = [a[r * n:(r + 1) * n] for r in range(n)]
    units = [set(row) for row in g] + [{g[r][c] for r in range(n)} for c in range(n)]
    units += [{g[r][c] for r in range(br, br + box[0]) for c in range(bc, bc + box[1])}
              for br in range(0, n, box[0]) for bc in range(0, n, box[1])]
    return all(len(u) == n for u in units) and all(x in ".0" or x == y for x, y in zip(q, a))


@pytest.fixture(scope="module")
def sudoku_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "sudoku.csv"
    sudoku.write_csv(path, sudoku.generate(3, sudoku.geometry(4, None), (6, 9), 0, progress=False))
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def maze_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "maze.csv"
    maze.write_csv(path, maze.generate(3, 6, 6, 0, 0.05, progress=False))
    return path.read_text(encoding="utf-8")


def check_csv(text: str, tmp_path, read, valid) -> None:
    """``read`` the CSV ``text``: refused in one line, or every row is ``valid(question, answer, what_was_read)``
    by the check written here."""
    path = tmp_path / "fuzzed.csv"
    path.write_text(text, encoding="utf-8", newline="")
    try:
        got = read(path)
    except DataError as e:
        assert str(e) and "\n" not in str(e)
        return
    rows = csv_rows(text)
    assert len(got) == len(rows) and all(valid(q, a, got) for q, a in rows), text


def check_sudoku(text: str, tmp_path) -> None:
    check_csv(text, tmp_path, sudoku.read_csv, lambda q, a, s: valid_sudoku_row(q, a, (s.g.br, s.g.bc)))


def test_the_unmutated_files_are_accepted(sudoku_text, maze_text, tmp_path):
    """The properties below would pass trivially if the starting files were refused."""
    (tmp_path / "s.csv").write_text(sudoku_text, encoding="utf-8")
    (tmp_path / "m.csv").write_text(maze_text, encoding="utf-8")
    assert len(sudoku.read_csv(tmp_path / "s.csv")) == 3 and len(maze.read_csv(tmp_path / "m.csv")) == 3
    assert all(valid_sudoku_row(q, a, (2, 2)) for q, a in csv_rows(sudoku_text))
    assert all(valid_maze_row(q, a) for q, a in csv_rows(maze_text))


@FUZZ
@given(data=st.data())
def test_a_mutated_sudoku_csv_is_read_only_if_every_row_is_a_valid_puzzle(sudoku_text, tmp_path, data):
    check_sudoku(data.draw(mutated(sudoku_text)), tmp_path)


def valid_maze_row(q: str, a: str) -> bool:
    """Written here: one S and one G; the answer marks with 'o' exactly the inner cells of one shortest S-G
    path through open cells, and agrees with the question elsewhere."""
    from collections import deque

    n = int(round(len(q) ** 0.5))
    if n * n != len(q) or len(a) != len(q) or set(q) - set("# SG") or set(a) - set("# SGo"):
        return False
    if q.count("S") != 1 or q.count("G") != 1:
        return False
    if any(x != y and not (x == " " and y == "o") for x, y in zip(q, a)):
        return False

    def dist(open_cell):
        d = {q.index("S"): 0}
        todo = deque(d)
        while todo:
            i = todo.popleft()
            r, c = divmod(i, n)
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                j = rr * n + cc
                if 0 <= rr < n and 0 <= cc < n and j not in d and open_cell(j):
                    d[j] = d[i] + 1
                    todo.append(j)
        return d.get(q.index("G"))

    shortest = dist(lambda j: q[j] != "#")
    return shortest is not None and a.count("o") == shortest - 1 and dist(lambda j: a[j] in "SGo") == shortest


@FUZZ
@given(data=st.data())
def test_a_mutated_maze_csv_is_read_only_if_every_row_is_a_solved_maze(maze_text, tmp_path, data):
    check_csv(data.draw(mutated(maze_text)), tmp_path, maze.read_csv, lambda q, a, m: valid_maze_row(q, a))


@FUZZ
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_as_a_csv_get_one_line(tmp_path, capsys, data):
    path = tmp_path / "bytes.csv"
    path.write_bytes(b"source,question,answer,rating\n" + data)
    for task in ("sudoku", "maze"):
        code, _, err = cli(capsys, "data", "validate", task, path)
        assert code == 0 or (code == 1 and "bytes.csv" in one_error_line(err))


# ------------------------------------------------------------------------------------------ ARC task JSON

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=True), st.text(max_size=3))
JSON = st.recursive(JSON_LEAF, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
    st.sampled_from(["train", "test", "input", "output", "x"]), kids, max_size=3), max_leaves=30)
GRID = st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=4), min_size=1, max_size=4)
PAIR = st.fixed_dictionaries({"input": GRID, "output": GRID})
TASKISH = st.fixed_dictionaries({"train": st.lists(PAIR | JSON, max_size=3), "test": st.lists(PAIR | JSON, max_size=2)})


def valid_grid(g) -> bool:
    return (isinstance(g, list) and 1 <= len(g) <= 30 and all(isinstance(r, list) for r in g)
            and 1 <= len(g[0]) <= 30 and all(len(r) == len(g[0]) for r in g)
            and all(type(v) is int and 0 <= v <= 9 for r in g for v in r))


def check_arc(obj) -> None:
    try:
        task = arc.task_from_dict("fuzz", obj, "fuzz.json")
    except DataError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert isinstance(obj, dict) and obj.get("train") and obj.get("test")
    pairs = obj["train"] + obj["test"]
    assert all(isinstance(p, dict) and valid_grid(p.get("input")) and valid_grid(p.get("output")) for p in pairs)
    assert len(task.train) == len(obj["train"]) and len(task.test) == len(obj["test"])


@FUZZ
@given(obj=TASKISH | JSON)
def test_an_arc_task_is_read_only_if_every_grid_is_valid(obj):
    check_arc(obj)


# ------------------------------------------------------------------------------------------ settings and parameters

SET_KEYS = ["train.lr", "train.steps", "train.betas", "train.compile", "model.conv", "model.outer.beta",
            "model.outer.score_clip", "model.outer.decay", "model.cond.history", "eval.limit", "data.n_train",
            "data.blanks", "model.d_model", "train.nope", "nope"]
VALUE_TEXT = st.one_of(st.text(max_size=12), st.sampled_from(
    ["1e400", "-0", "nan", "inf", "[", "[1,", "{a: 1}", "'x'", '"fixed"', "0x10", "1_0", "true", "null", "~", "[0.9]",
     "[0.9, 0.95, 1]", "[[1]]", "-1", "0", "1e-3", "2.5", "10_000_000_000_000_000_000"]))


@FUZZ
@given(key=st.sampled_from(SET_KEYS), text=VALUE_TEXT)
def test_a_set_value_is_typed_or_refused_in_one_line(key, text):
    from infiloop.experiments.settings import recipes

    try:
        cfg = recipes.resolve_config("sudoku", "infiloop", "smoke", [f"{key}={text}"])
    except (UsageError, ValueError) as e:  # ValueError: a setting's own check (TrainConfig.validate, ...)
        assert str(e) and "\n" not in str(e).strip()
        return
    section, _, name = key.partition(".")
    node = cfg["data"] if section == "data" else cfg[section]
    for part in name.split("."):
        node = node[part]
    assert node is None or isinstance(node, (bool, int, float, str, list))  # typed, and the config is complete
    json.dumps(cfg, allow_nan=False)  # a config that could not be written as JSON would be a defect


PARAMS = {"02": ["max_updates", "limit", "change_from", "change_to", "seeds"], "05": ["budget_short", "budget_long"],
          "06": ["max_budget", "budgets", "history_map"], "04": ["eps", "perturb_at", "updates_after"],
          "01": ["tasks", "limit"]}


@FUZZ
@given(nb=st.sampled_from(sorted(PARAMS)), data=st.data(), value=VALUE_TEXT)
def test_a_notebook_parameter_is_planned_or_refused_in_one_line(capsys, nb, data, value):
    """``-p KEY VALUE`` as ``./reproduce.sh`` reads it (YAML), through the plan of the notebook's jobs."""
    key = data.draw(st.sampled_from(PARAMS[nb]))
    code, out, err = cli(capsys, "manifest", "--profile", "smoke", nb, "-p", key, value)
    if code == 0:
        assert out.strip() and all(json.loads(ln) for ln in out.splitlines())
    else:
        assert code == 2, err
        one_error_line(err)


# ------------------------------------------------------------------------------------------ run folders and archives

@pytest.fixture(scope="module")
def archive_bytes(smoke_run, tmp_path_factory):
    from infiloop.experiments.store import archives

    path, _ = archives.export_runs([smoke_run.dir], tmp_path_factory.mktemp("fuzz") / "run.tar")
    return path.read_bytes()


def test_the_unmutated_archive_imports(archive_bytes, tmp_path, capsys):
    (tmp_path / "run.tar").write_bytes(archive_bytes)
    assert cli(capsys, "runs", "import", tmp_path / "run.tar", "--root", tmp_path / "root")[0] == 0


@FUZZ
@given(data=st.data())
def test_a_damaged_archive_is_refused_in_one_line_and_imports_nothing(archive_bytes, smoke_run, tmp_path, capsys,
                                                                       data):
    """Flipped bytes anywhere in the archive (header, manifest, weights): import succeeds only if every file it
    wrote has the digest of the exported run, else one line and no run folder."""
    raw = bytearray(archive_bytes)
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(len(raw) // 2, len(raw)))
    path, root = tmp_path / "bad.tar", tmp_path / "root"
    shutil.rmtree(root, ignore_errors=True)
    path.write_bytes(bytes(raw[:cut]))
    code, _, err = cli(capsys, "runs", "import", path, "--root", root)
    if code == 0:  # the flips fell in padding or in fields nobody reads: what was written is the exported run
        written = [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")]
        assert written
        for p in written:
            assert p.read_bytes() == (smoke_run.dir / p.relative_to(root / "sudoku" / smoke_run.dir.name)).read_bytes()
    else:
        assert code == 1, err
        one_error_line(err)
        assert not root.exists() or not any(p.name == "DONE.json" for p in root.rglob("*"))


def _tree_edit(draw, obj):
    """One edit deep inside a JSON tree: replace a value, delete a key, or add one."""
    if isinstance(obj, dict) and obj:
        key = draw(st.sampled_from(sorted(obj)))
        op = draw(st.sampled_from(["recurse", "replace", "delete", "add"]))
        if op == "recurse":
            return {**obj, key: _tree_edit(draw, obj[key])}
        if op == "delete":
            return {k: v for k, v in obj.items() if k != key}
        if op == "add":
            return {**obj, "fuzz_" + key: draw(JSON_LEAF)}
        return {**obj, key: draw(JSON)}
    return draw(JSON)


@FUZZ
@given(data=st.data())
def test_a_damaged_config_json_gets_one_line(smoke_run, tmp_path, capsys, data):
    """``eval`` of a run folder whose config.json was edited: evaluated, or one line (never a traceback)."""
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(smoke_run.dir, run, ignore=shutil.ignore_patterns("eval", "*.pt"))
    cfg = json.loads((run / "config.json").read_text())
    text = json.dumps(_tree_edit(data.draw, cfg)) if data.draw(st.booleans()) else data.draw(mutated(json.dumps(cfg)))
    (run / "config.json").write_text(text, encoding="utf-8")
    code, _, err = cli(capsys, "eval", run, "--updates", "2", "--every", "2", "--limit", "2", "--quiet")
    assert code in (0, 1, 2), err
    if code:
        one_error_line(err)


@FUZZ
@given(data=st.data())
def test_a_damaged_training_log_is_named_by_file_and_line(smoke_run, tmp_path, data):
    from infiloop.experiments.store.runs import Run
    from infiloop.training import METRICS, read_metrics

    text = (smoke_run.dir / METRICS).read_text()
    bad = data.draw(mutated(text))
    path = tmp_path / METRICS
    path.write_text(bad, encoding="utf-8")
    try:
        records = Run(tmp_path, smoke_run.config).metrics()
    except DataError as e:
        assert f"{METRICS}:" in str(e)
        return
    assert all(type(r["step"]) is int for r in records)
    assert len(records) == len([ln for ln in bad.splitlines() if ln.strip()])
    assert len(read_metrics(path, strict=False)) == len(records)


def test_a_torn_last_log_line_does_not_stop_a_resume(tmp_path):
    """A kill or a full disk in the middle of a log write leaves half a line: resuming drops it."""
    from infiloop.training.records import last_metrics, truncate_metrics

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 5, "loss": 1.0}\n{"step": 10, "loss": 0.5}\n{"step": 15, "lo')
    assert last_metrics(path) == {"step": 10, "loss": 0.5}
    truncate_metrics(path, 10)
    assert path.read_text() == '{"step": 5, "loss": 1.0}\n{"step": 10, "loss": 0.5}\n'


# ------------------------------------------------------------------------------------------ the deep run

@pytest.mark.slow
@DEEP
@given(data=st.data())
def test_deep_sudoku(sudoku_text, tmp_path, data):
    check_sudoku(data.draw(mutated(sudoku_text)), tmp_path)


@pytest.mark.slow
@DEEP
@given(obj=TASKISH | JSON)
def test_deep_arc(obj):
    check_arc(obj)
