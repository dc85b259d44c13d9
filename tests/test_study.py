"""The studies' one mechanism (experiments/studies/study.py): both studies' docs blocks are their recorded results
rendered, byte for byte; a study records each model the moment it is read, so a study killed midway keeps what it
recorded and a second run completes it; a failed job is named with its log while the other models are recorded;
a docs page gets the block between its markers."""

import dataclasses
import json
import shutil

import pytest

from infiloop import paths, tasks
from infiloop.experiments.compute import scheduler
from infiloop.experiments.settings import profiles
from infiloop.experiments.studies import connection_study, contrasts, study
from infiloop.experiments.studies.study import Model, Study

STUDIES = {"contrasts": contrasts.STUDY, "connection-study": connection_study.STUDY}


@pytest.mark.parametrize("name", list(STUDIES))
def test_the_docs_blocks_are_the_recorded_results(name, tmp_path):
    """docs/calibration.md and docs/connection-study.md hold their study's block rendered from the results recorded
    in docs/ (re-render after recording a row: ``--render --results docs/...-results``), and rendering it again
    into a copy of the page leaves the page as it is."""
    declared = STUDIES[name]
    text = declared.doc.read_text()
    start, end = declared.markers
    assert text[text.index(start):text.index(end) + len(end)] == study.block(declared, declared.recorded), (
        f"{declared.doc.name} is stale: python -m infiloop {name} --render --results {declared.recorded}")
    copy = tmp_path / declared.doc.name
    shutil.copy(declared.doc, copy)
    assert study.render(declared, declared.recorded, copy) == copy and copy.read_text() == text


def _toy(calls: list, fail_at: int | None = None) -> Study:
    """A study of two rows of smoke-profile models whose record is the model itself (nothing is read from the runs);
    the ``fail_at``-th record is interrupted as a killed study is."""

    def record(m, job):
        calls.append(str(m))
        if len(calls) == fail_at:
            raise KeyboardInterrupt
        return {"recipe": m.recipe, "seed": m.seed, "run": job.spec.run.dir.name}

    def merge(row, old, rec):
        return {"row": row, "records": {**old.get("records", {}), f"{rec['recipe']}@{rec['seed']}": rec}}

    def models(names, seeds):
        return [Model(n, "sudoku", r, "smoke", {"train.seed": s, "train.steps": 2 + i}, s)
                for i, n in enumerate(names) for s in seeds or [0] for r in ("carry_last", "infiloop")]

    def prepare(names, progress):
        tasks.build("sudoku", profiles.data_of("smoke"), verbose=False)

    return Study(name="toy", models=models, evaluation=lambda m, run: {"updates": 4, "every": 1}, record=record,
                 merge=merge, results="toy", recorded=paths.DOCS, doc=paths.DOCS / "toy.md", markers=("<a>", "<b>"),
                 block=lambda results: "".join(f"{p.stem}\n" for p in sorted(results.glob("*.json"))),
                 prepare=prepare)


@pytest.fixture
def scheduled(tmp_path, monkeypatch):
    """Temporary data and results; the scheduler reports every job done (or the jobs named in ``failed``) without
    running it."""
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    monkeypatch.setattr(paths, "RESULTS", tmp_path / "results")
    failed: list[str] = []

    def run_planned(jobs, workers, progress=True, estimate=None):
        lost = [j.id for j in jobs if j.id in failed]
        skipped = [j.id for j in jobs if any(a in lost for a in j.after)]
        return scheduler.Report(done=[j.id for j in jobs if j.id not in lost + skipped], failed=lost, skipped=skipped)

    monkeypatch.setattr(study, "run_planned", run_planned)
    return failed


def test_a_killed_study_keeps_its_recorded_models_and_resumes(scheduled, tmp_path):
    calls: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        study.run(_toy(calls, fail_at=3), ["a", "b"], [0], root=tmp_path / "runs", progress=False)
    results = tmp_path / "results" / "toy"
    assert calls == ["a carry_last seed 0", "a infiloop seed 0", "b carry_last seed 0"]
    assert sorted(p.name for p in results.iterdir()) == ["a.json"]  # row a finished; nothing half-written
    assert set(json.loads((results / "a.json").read_text())["records"]) == {"carry_last@0", "infiloop@0"}
    records, files = study.run(_toy(calls), ["a", "b"], [0, 1], root=tmp_path / "runs", progress=False)
    assert len(records) == 8 and set(files) == {"a", "b"}
    for row in ("a", "b"):
        saved = json.loads((results / f"{row}.json").read_text())
        assert saved == files[row] and set(saved["records"]) == {"carry_last@0", "infiloop@0", "carry_last@1",
                                                                 "infiloop@1"}
    assert study.block(_toy([]), results) == "<a>\na\nb\n<b>"


def test_a_failed_job_is_named_and_the_other_models_recorded(scheduled, tmp_path):
    toy = _toy([])
    planned, models, failed = study.plan(toy, ["a"], [0], tmp_path / "runs")
    assert not failed and len(planned) == 4 and [str(m) for m, _ in models] == ["a carry_last seed 0",
                                                                                  "a infiloop seed 0"]
    scheduled.append(models[1][1].after[0])  # InfiLoop's training fails: its evaluation is skipped
    with pytest.raises(RuntimeError, match=r"1 of 2 models failed:\na infiloop seed 0: see .*/logs/train\.log$"):
        study.run(toy, ["a"], [0], root=tmp_path / "runs", progress=False)
    saved = json.loads((tmp_path / "results" / "toy" / "a.json").read_text())
    assert set(saved["records"]) == {"carry_last@0"}
    # only the recipes asked for are planned
    assert [m.recipe for m, _ in study.plan(toy, ["a"], [0], tmp_path / "runs", recipes=("infiloop",))[1]] == [
        "infiloop"]


def test_render_fills_the_block_between_the_markers(tmp_path):
    toy = _toy([])
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x.json").write_text("{}")
    page = tmp_path / "page.md"
    page.write_text("head\n<a>\nold\n<b>\ntail\n")
    study.render(toy, tmp_path / "r", page)
    assert page.read_text() == "head\n<a>\nx\n<b>\ntail\n"
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    with pytest.raises(ValueError, match="the markers <a> and <b> are missing"):
        study.render(toy, tmp_path / "r", bare)
    assert bare.read_text() == "no markers\n"
    with_section = dataclasses.replace(toy, section="## Toy\n")
    study.render(with_section, tmp_path / "r", bare)
    assert bare.read_text() == "no markers\n\n## Toy\n\n<a>\nx\n<b>\n"
