"""The calibration harness (experiments/studies/contrasts.py): the candidate rows cover the search's axes, and a
row at the smoke profile runs end to end (both connections trained, evaluated to 60x the training
depth, results written, the table rendered) in temporary folders only."""

import json

import numpy as np
import pytest

from infiloop import paths
from infiloop.analysis import trajectories as analysis
from infiloop.experiments.settings import profiles
from infiloop.experiments.studies import contrast_drift, contrast_rows
from infiloop.experiments.studies import contrasts as calibration

ROW = {"profile": "smoke", "data": {"needs_search": False, "n_train": 40, "n_test": 12}, "steps": 6,
       "max_segments": 2, "limit": 12}


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    return tmp_path / "data"


def test_rows_cover_the_axes_of_the_search():
    rows = contrast_rows.ROWS
    assert len(rows) >= 14
    for name, row in rows.items():
        contrast_rows.check_row(name, row)
    data = [contrast_rows.row_data(r) for r in rows.values()]
    assert {d.get("needs_search") for d in data} >= {True, None}
    assert {d.get("side", 6) for d in data} == {6, 9}
    assert len({tuple(d.get("blanks", [14, 22])) for d in data}) >= 3
    assert any(d.get("min_rating") for d in data)
    for key, base, values in (("H", 2, {3}), ("L", 3, {1, 6}), ("max_segments", 8, {4, 16}),
                              ("d_model", 64, {128}), ("mixer", "mlp", {"attention"}), ("steps", 700, {2500, 6000})):
        assert {r.get(key, base) for r in rows.values()} >= values | {base}, key
    costs = [sum(contrast_rows.estimated_seconds(r)) for r in rows.values()]
    assert costs[0] == min(costs) and all(c > 0 for c in costs)
    mazes = {n: contrast_rows.row_data(r) for n, r in rows.items() if contrast_rows.row_task(r) == "maze"}
    assert len(mazes) >= 4 and {d["size"] for d in mazes.values()} >= {8, 10, 12}
    assert all(d["min_path"] >= 2 * d["size"] for d in mazes.values())  # long paths, as Maze-Hard's
    assert {rows[n].get("mixer", "mlp") for n in mazes} == {"attention", "mlp"}


@pytest.mark.slow  # 18 s; the smoke row covers the harness in the default suite
def test_a_maze_row_trains_and_renders(tmp_path, data_root):
    rows = {"maze-test": {"profile": "smoke", "task": "maze", "data": {"n_train": 40, "n_test": 12}, "steps": 6,
                          "max_segments": 2, "limit": 12}}
    results, doc = tmp_path / "results", tmp_path / "calibration.md"
    calibration.run_rows(["maze-test"], rows, root=tmp_path / "runs", results=results, progress=False)
    saved = json.loads((results / "maze-test.json").read_text())
    assert saved["task"] == "maze" and (data_root / "maze").is_dir() and not (data_root / "sudoku").exists()
    assert saved["results"]["infiloop"]["0"]["run"].split("/")[-2] == "maze"
    calibration.render(results, doc, rows)
    size, path = saved["data"]["size"], saved["data"]["min_path"]
    assert doc.read_text().count(f"| maze-test | maze {size}x{size}, shortest path >= {path} |") == 2


def test_row_overrides_and_depths():
    ov = contrast_rows.row_overrides({"data": {"blanks": [22, 28]}, "H": 3, "max_segments": 4, "steps": 50,
                                    "overrides": {"train.lr": 1e-3}}, seed=2)
    assert ov == {"data.blanks": [22, 28], "model.H": 3, "train.max_segments": 4, "train.steps": 50,
                  "train.lr": 1e-3, "train.seed": 2}
    assert contrast_rows.depths(16) == {"0.5": 8, "1": 16, "4": 64, "60": 960}
    assert contrast_rows.depths(3)["0.5"] == 2
    with pytest.raises(ValueError, match="unknown settings"):
        contrast_rows.check_row("x", {"width": 3})
    with pytest.raises(ValueError, match="unknown data set 'hard'"):
        contrast_rows.check_row("x", {"data": "hard"})
    assert contrast_rows.row_overrides({"data": "search6"})["data.needs_search"] is True


def test_state_change_after_solve():
    traj = {"updates": np.arange(1, 5), "first_solve": np.array([2, -1, 4, 1]),
            "state_change": np.array([[9, 9, 9, 9], [9, 9, 9, 0.5], [0.1, 9, 9, 0.5], [0.3, 9, 9, 0.5]])}
    # puzzle 0: updates 3, 4 -> 0.2; puzzle 3: updates 2..4 -> 0.5; puzzle 2 solved at the last update: none
    assert analysis.state_change_after_solve(traj) == pytest.approx(0.35)


# slow (34 s): a contrast row trained and evaluated end to end; the row's pieces are tested above
@pytest.mark.slow
def test_a_smoke_row_end_to_end(tmp_path, data_root):
    rows = {"smoke-test": ROW}
    runs, results, doc = tmp_path / "runs", tmp_path / "results", tmp_path / "calibration.md"
    out = calibration.run_rows(["smoke-test"], rows, root=runs, results=results, progress=False)
    saved = json.loads((results / "smoke-test.json").read_text())
    assert out["smoke-test"] == saved and saved["data"]["needs_search"] is False
    assert set(saved["results"]) == set(contrast_rows.CONNECTIONS)
    for recipe in contrast_rows.CONNECTIONS:
        rec = saved["results"][recipe]["0"]
        assert rec["training_depth"] == 4 and rec["depths"] == {"0.5": 2, "1": 4, "4": 16, "60": 240}
        assert set(rec["exact"]) == {"0.5", "1", "4", "60"} and 0 <= rec["peak"] <= 1 and rec["puzzles"] == 12
        assert 1 <= rec["peak_update"] <= 240 and rec["train_seconds"] > 0 and not rec["eval_cached"]
        assert rec["run"].startswith(str(runs))
    assert (data_root / "sudoku").is_dir()

    doc.write_text("# Calibration\n\nHand-written text.\n")
    calibration.render(results, doc, rows)
    text = doc.read_text()
    assert text.startswith("# Calibration\n\nHand-written text.\n") and text.count("| smoke-test | 4x4") == 2
    assert "4x4, blanks 6-10, singles solve" in text and "| carry_last | 1 |" in text
    calibration.render(results, doc, rows)  # replaces its table, keeps the text
    assert doc.read_text() == text

    # run again with a second seed, two at a time: seed 0 comes from the caches, seed 1 trains
    before = saved["results"]["infiloop"]["0"]["eval_seconds"]
    calibration.run_rows(["smoke-test"], rows, seeds=[0, 1], jobs=2, root=runs, results=results, progress=False)
    again = json.loads((results / "smoke-test.json").read_text())
    assert set(again["results"]["infiloop"]) == {"0", "1"}
    assert again["results"]["infiloop"]["0"]["eval_cached"]
    assert again["results"]["infiloop"]["0"]["eval_seconds"] == before
    assert again["results"]["infiloop"]["0"]["exact"] == saved["results"]["infiloop"]["0"]["exact"]
    calibration.render(results, doc, rows)
    assert "| carry_last | 2 |" in doc.read_text()


def test_a_failing_model_is_reported_after_the_others(tmp_path, data_root):
    rows = {"bad": {"profile": "smoke", "H": 0}}
    with pytest.raises(RuntimeError, match="2 of 2 models failed:\nbad carry_last seed 0: ValueError: model.H"):
        calibration.run_rows(["bad"], rows, root=tmp_path / "runs", results=tmp_path / "results", progress=False)
    assert not (tmp_path / "results").exists()


def test_command_line(tmp_path, data_root, capsys):
    assert calibration.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"| {name} |" in out for name in contrast_rows.ROWS) and "min per model" in out
    doc = tmp_path / "doc.md"
    assert calibration.main(["--render", "--results", str(tmp_path / "none"), "--doc", str(doc)]) == 0
    assert calibration.START in doc.read_text()
    assert calibration.main(["nope", "--root", str(tmp_path), "--results", str(tmp_path), "--doc", str(doc)]) == 1
    assert "unknown calibration row 'nope'" in capsys.readouterr().err


def test_a_profile_row_reads_the_profiles_own_runs_and_depth_trajectories(data_root, monkeypatch, tmp_path):
    """A row that names a profile (``search-profile``) resolves to the runs its notebooks train, and its
    evaluation is notebook 02's depth trajectory (same cache file) when the depths agree."""
    from infiloop.experiments.notebooks import manifest
    from infiloop.experiments.settings.profiles import PROFILES
    from infiloop.experiments.store.runs import get_run

    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")
    row = {"profile": "smoke"}
    n = manifest.needs("02", "smoke", max_updates=60 * 8)  # smoke: training depth H x segments = 8
    for recipe in contrast_rows.CONNECTIONS:
        run = get_run("sudoku", recipe, "smoke", contrast_rows.row_overrides(row, 0), progress=False)
        assert run.dir == n.runs[recipe].run.dir
        _, _, path = run._evaluate_key(**calibration.eval_args(run, row))
        assert str(path) == n.evals[f"depth/{recipe}"].key
    # the estimate of a profile row takes that profile's steps
    assert contrast_rows.ROWS["search-profile"] == {"profile": "search", "seeds": [0, 1, 2]}
    ratio = PROFILES["search"]["train"]["steps"] / PROFILES["tiny"]["train"]["steps"]
    train, _ = contrast_rows.estimated_seconds({"profile": "search"})
    assert train == pytest.approx(ratio * contrast_rows.estimated_seconds({"data": "search6"})[0])


def test_a_cached_evaluation_keeps_the_time_its_job_logged(tmp_path):
    log = tmp_path / "eval-traj-abc.log"
    assert calibration._logged_seconds(log) is None  # no log: the caller keeps its own measurement
    log.write_text("progress ...\n/runs/sudoku/x/eval/traj-abc.npz in 736.6 s\n")
    assert calibration._logged_seconds(log) == 736.6
    log.write_text("progress ...\nTraceback (most recent call last):\n")
    assert calibration._logged_seconds(log) is None


def _record(recipe: str, seed: int, at1: float, at60: float, peak: float, lost: float | None) -> dict:
    return {"recipe": recipe, "seed": seed, "training_depth": 16,
            "exact": {"0.5": at1, "1": at1, "4": at60, "60": at60},
            "peak": peak, "peak_update": 40, "lost_after_solve": lost, "state_change_after_solve": 0.001,
            "train_seconds": 1.0, "eval_seconds": 1.0}


def test_drift_summary_reads_every_recorded_row(tmp_path):
    def write(name, settings, results):
        (tmp_path / f"{name}.json").write_text(json.dumps({"row": name, "settings": settings, "results": results}))

    # two seeds: carry-last falls 5 and 1 points from its peak; InfiLoop never
    write("search6-2500", {"data": "search6", "steps": 2500},
          {"carry_last": {"0": _record("carry_last", 0, 0.80, 0.85, 0.90, 0.10),
                          "1": _record("carry_last", 1, 0.70, 0.79, 0.80, 0.0)},
           "infiloop": {"0": _record("infiloop", 0, 0.90, 0.95, 0.95, 0.0),
                        "1": _record("infiloop", 1, 0.88, 0.93, 0.93, 0.0)}})
    write("easy-700", {}, {"carry_last": {"0": _record("carry_last", 0, 0.99, 0.99, 0.995, None)},
                           "infiloop": {"0": _record("infiloop", 0, 0.9, 0.93, 0.94, 0.02)}})
    write("search6-H3", {"data": "search6", "H": 3}, {"carry_last": {"0": _record("carry_last", 0, 0.5, 0.5, 0.5, 0)}})
    cols, rows, facts = contrast_drift.drift_summary(tmp_path)
    assert [r[0] for r in rows] == ["easy-700", "search6-2500"]  # the order of ROWS; a row without InfiLoop is left out
    assert all(len(r) == len(cols) for r in rows)
    easy, search = rows
    assert easy[1] == "none" and search[1] == "data=search6, steps=2500" and search[2] == "2"
    assert search[cols.index("carry-last peak − @60x (points)")] == "3.0 (5.0)"  # mean of 5 and 1, worst seed 5
    assert search[cols.index("carry-last @1x (%)")] == "75.0 (70.0–80.0)"
    assert search[cols.index("carry-last solved, then lost (%)")] == "5.0 (0.0–10.0)"
    assert easy[cols.index("carry-last solved, then lost (%)")] == "–"  # nothing solved: no share to lose
    assert easy[cols.index("InfiLoop peak − @60x (points)")] == "1.0"
    assert search[cols.index("carry-last state change per update after the solve (%)")] == "0.1 (0.1–0.1)"
    assert facts["rows"] == 2 and facts["seeds"] == 3
    assert facts["carry_last"]["row"] == "search6-2500" and facts["carry_last"]["max_drop"] == pytest.approx(5.0)
    assert facts["infiloop"]["row"] == "easy-700" and facts["infiloop"]["max_drop"] == pytest.approx(1.0)
    assert facts["carry_last"]["lost_row"] == "search6-2500" and facts["carry_last"]["max_lost"] == pytest.approx(10.0)
    assert facts["infiloop"]["lost_row"] == "easy-700" and facts["infiloop"]["max_lost"] == pytest.approx(2.0)
    assert facts["carry_last"]["max_change"] == pytest.approx(0.1)
    # the statement: carry-last's 5-point fall reaches the paper's 4.1, so no verdict of absence
    said = contrast_drift.drift_statement(facts)
    assert "at most 5.0 points below its own peak" in said and "row `search6-2500`" in said
    assert "did not appear" not in said and not contrast_drift.contrast_absent(facts)
    small = {**facts, "carry_last": {**facts["carry_last"], "max_drop": 1.0, "max_lost": 10.0}}
    assert contrast_drift.contrast_absent(small) and "did not appear" in contrast_drift.drift_statement(small)
    lossy = {**facts, "carry_last": {**facts["carry_last"], "max_drop": 1.0, "max_lost": 19.7}}
    assert not contrast_drift.contrast_absent(lossy)
    empty = {"max_drop": 0.0, "row": None, "max_lost": 0.0, "lost_row": None, "max_change": 0.0, "change_row": None}
    assert contrast_drift.drift_summary(tmp_path / "none")[1:] == ([], {"rows": 0, "seeds": 0, "as_built": 0, **{
        r: empty for r in contrast_rows.CONNECTIONS}})


def test_the_recorded_rows_are_read_by_notebook_02():
    cols, rows, facts = contrast_drift.drift_summary()
    recorded = sorted(p.stem for p in calibration.RECORDED.glob("*.json"))
    assert recorded and facts["rows"] == len(rows) <= len(recorded)
    assert {r[0] for r in rows} <= set(recorded)


def test_rows_recorded_before_the_connection_study_say_their_infiloop_is_as_built(tmp_path):
    """A row's InfiLoop from before the connection study is named 'as built' in the search table and counted in the
    statement; carry-last's (its runs unchanged) is not."""
    assert contrast_rows.as_built({"updated": "2026-11-30T14:03:57+00:00"})
    assert not contrast_rows.as_built({"updated": "2026-12-01T10:00:00+00:00"})
    table = calibration.render_table(calibration.RECORDED)
    assert "| infiloop (as built) |" in table and "| carry_last (as built) |" not in table
    _, _, facts = contrast_drift.drift_summary()
    assert facts["as_built"] == facts["rows"]  # every recorded row predates the study
    assert f"in {facts['rows']} of these rows are the connection as built" in contrast_drift.drift_statement(facts)


def test_the_results_page_shows_every_recorded_row(tmp_path):
    """docs/results.md's drift block is the rendering of docs/calibration-results: a row recorded without
    re-rendering (``--render --results docs/calibration-results --readme docs/results.md``) fails here."""
    readme = (paths.DOCS / "results.md").read_text()
    block = readme[readme.index(contrast_drift.README_START):readme.index(contrast_drift.README_END)
                   + len(contrast_drift.README_END)]
    assert block == contrast_drift.render_drift(calibration.RECORDED)
    copy = tmp_path / "README.md"
    copy.write_text("intro\n" + contrast_drift.README_START + "\nold\n" + contrast_drift.README_END + "\nrest\n")
    assert calibration.main(["--render", "--results", str(calibration.RECORDED), "--doc", str(tmp_path / "c.md"),
                             "--readme", str(copy)]) == 0
    text = copy.read_text()
    assert text.startswith("intro\n") and text.endswith("\nrest\n") and "old" not in text
    assert all(f"| `{name}` |" in text for name in (p.stem for p in calibration.RECORDED.glob("*.json")))
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    assert calibration.main(["--render", "--results", str(tmp_path / "none"), "--doc", str(tmp_path / "c.md"),
                             "--readme", str(bare)]) == 1
    assert bare.read_text() == "no markers\n"


@pytest.mark.usefixtures("native_mode")  # pinned before the numeric mode (conftest.py)
def test_tinys_maze_models_are_the_recorded_maze_row(tmp_path):
    """The Maze column of `tiny`'s main table trains the models of the recorded row maze8-700 (same
    configuration, so the same run folder name): carry-last's as it is; InfiLoop's row was recorded before the
    connection study's choice (docs/connection-study.md), so it is the as-built connection's model."""
    from infiloop.experiments.store.runs import resolve
    from infiloop.experiments.studies.connection_design import AS_BUILT

    row = json.loads((calibration.RECORDED / "maze8-700.json").read_text())
    assert "maze" in profiles.PROFILES["tiny"]["main_tasks"]
    for recipe in contrast_rows.CONNECTIONS:
        recorded = row["results"][recipe]["0"]["run"].rsplit("/", 1)[-1]
        now = resolve("maze", recipe, "tiny", root=tmp_path).dir.name
        assert (now == recorded) == (recipe == "carry_last")
        old = AS_BUILT if recipe == "infiloop" else {}
        assert resolve("maze", recipe, "tiny", old, root=tmp_path).dir.name == recorded
