"""Where the data comes from, said and recorded: the hub through huggingface_hub (faked, or a local hub cache read
offline: these tests never touch the network), your own CSV files (data.path=DIR), or generated puzzles asked
for by name (data.source=generate); without the hub a hub set stops with one line naming the three ways on, and
generated, hub and own-file data never share a data folder or a run hash."""

import hashlib
import json

import pytest

from infiloop import paths
from infiloop.cli import main
from infiloop.experiments.settings.profiles import DATA_PROFILES, data_profile
from infiloop.tasks import DataError, TaskData, build, info, maze, sudoku
from infiloop.tasks.datasets import build_dir

REPO = DATA_PROFILES["gpu"]["sudoku"]["repo"]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SMALL = {"n_train": 3, "n_test": 2, "augment": 1}  # a small gpu set: 3 base puzzles x 2 views, 2 test puzzles


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """No network: huggingface_hub is offline unless a test fakes its download; every root is temporary."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("INFILOOP_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # huggingface_hub's own cache, read only
    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")


@pytest.fixture(scope="module")
def csv_texts(tmp_path_factory) -> dict[str, str]:
    """The text of a 9x9 train.csv (4 puzzles) and test.csv (3) in the public format."""
    folder = tmp_path_factory.mktemp("csv")
    g = sudoku.geometry(9, None)
    for split, n, seed in (("train", 4, 1), ("test", 3, 2)):
        sudoku.write_csv(folder / f"{split}.csv", sudoku.generate(n, g, (40, 45), seed, progress=False))
    return {split: (folder / f"{split}.csv").read_text() for split in ("train", "test")}


def own_files(folder, csv_texts, **replace) -> object:
    """``folder`` holding train.csv and test.csv (``replace``: a split's text instead)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        (folder / f"{split}.csv").write_text(replace.get(split, csv_texts[split]))
    return folder


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------- without the hub


def test_without_the_hub_the_gpu_data_stops_with_one_line_naming_the_three_ways(tmp_path, capsys):
    assert main(["data", "build", "--task", "sudoku", "--profile", "gpu"]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert f"{REPO}: train.csv at revision main is not available (HF_HUB_OFFLINE is set" in line
    for way in ("go online", "HTTPS_PROXY", "--set data.path=DIR", "--set data.source=generate",
                "9x9 puzzles of 50-60 blanks that naked and hidden singles do not solve"):
        assert way in line, way
    assert not list((tmp_path / "data").glob("sudoku/*/build.json"))  # nothing generated in the hub set's place
    # training the gpu profile on the CPU stops the same way, before any step
    assert main(["train", "--profile", "gpu", "--device", "cpu"]) == 1
    assert "Three ways on: go online" in one_error_line(capsys.readouterr().err)
    # the paper profile's Maze-Hard too
    assert main(["data", "build", "--task", "maze", "--profile", "paper", "--set", "n_train=2"]) == 1
    assert "generated 30x30 mazes (shortest path >= 111 moves)" in one_error_line(capsys.readouterr().err)


def test_reproduce_of_a_hub_profile_stops_at_its_data_in_one_line(tmp_path, monkeypatch, capsys):
    """The pipeline does not go on to train or run notebooks without its data: the data stage's error ends the run
    in one line (recorded as the failed data stage), nothing trained."""
    for name in ("RESULTS", "FIGURES"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())
    assert main(["reproduce", "--profile", "gpu", "--only", "01", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "Three ways on: go online" in errors[0] and err.strip().endswith(errors[0][-40:])
    assert "Traceback" not in err and "=== compute ===" not in err
    assert not list((tmp_path / "runs").rglob("config.json"))


def test_a_generated_set_under_the_hub_set_name_is_not_reused(tmp_path):
    """A build the old fallback generated in the hub set's folder is made again from the hub, not reused."""
    gpu = data_profile("gpu")
    out = build_dir("sudoku", gpu, SMALL, tmp_path / "data")
    out.mkdir(parents=True)
    for name in ("train.npz", "test.npz"):
        (out / name).write_bytes(b"old")
    cfg = {**DATA_PROFILES["gpu"]["sudoku"], **SMALL}
    (out / "build.json").write_text(json.dumps({"config": cfg, "source": "generated offline (9x9, blanks 50-60); "
                                                "HF_HUB_OFFLINE is set", "files": {"train": "train.npz",
                                                                                  "test": "test.npz"}}))
    with pytest.raises(DataError, match="Three ways on"):
        build("sudoku", gpu, overrides=SMALL, verbose=False)


# ------------------------------------------------------------------------------------------- data.path=DIR


def test_a_missing_data_path_is_one_line_naming_it(tmp_path, csv_texts, capsys):
    missing = tmp_path / "nope"
    assert main(["data", "build", "--task", "sudoku", "--profile", "gpu", "--set", f"data.path={missing}"]) == 1
    assert f"data.path {missing}: no such folder" in one_error_line(capsys.readouterr().err)
    assert main(["train", "--profile", "gpu", "--device", "cpu", "--set", f"data.path={missing}"]) == 1
    assert f"data.path {missing}: no such folder" in one_error_line(capsys.readouterr().err)
    half = own_files(tmp_path / "half", csv_texts)
    (half / "test.csv").unlink()
    assert main(["data", "build", "--task", "sudoku", "--profile", "gpu", "--set", f"path={half}"]) == 1
    assert f"data.path {half}: no test.csv in it" in one_error_line(capsys.readouterr().err)


def test_data_path_builds_from_the_files_and_records_their_sha256(tmp_path, csv_texts):
    folder = own_files(tmp_path / "mine", csv_texts)
    gpu, over = data_profile("gpu"), {**SMALL, "n_train": 1000, "n_test": None, "path": str(folder)}
    files = build("sudoku", gpu, overrides=over, verbose=False)
    m = info("sudoku", gpu, overrides=over)
    assert m["source"].startswith(f"read from {folder} (train subsample 4 of 4, test 3)")
    assert {s: m["inputs"][s]["sha256"] for s in ("train", "test")} == \
        {s: sha(folder / f"{s}.csv") for s in ("train", "test")}
    assert m["inputs"]["test"]["path"] == str(folder / "test.csv") and m["inputs"]["test"]["origin"] == "path"
    te = TaskData.load(files["test"])
    assert len(te) == 3 and te.grid == (9, 9)
    assert (sudoku.from_taskdata(te).puzzles == sudoku.read_csv(folder / "test.csv").puzzles).all()
    assert len(TaskData.load(files["train"])) == 4 * 2
    # the data are named by the folder: a changed file is refused, not taken for the cached set
    (folder / "test.csv").write_text("\n".join(csv_texts["test"].splitlines()[:3]) + "\n")
    with pytest.raises(DataError, match="test.csv: changed since the data set .* was built from it"):
        build("sudoku", gpu, overrides=over, verbose=False)
    assert len(TaskData.load(build("sudoku", gpu, overrides=over, force=True, verbose=False)["test"])) == 2


def test_a_bad_row_of_data_path_is_named_by_file_and_line(tmp_path, csv_texts, capsys):
    rows = csv_texts["train"].splitlines()
    source, question, answer, rating = rows[2].split(",")
    rows[2] = ",".join([source, question, answer[:-1] + ("1" if answer[-1] != "1" else "2"), rating])  # line 3
    folder = own_files(tmp_path / "bad", csv_texts, train="\n".join(rows) + "\n")
    assert main(["data", "build", "--task", "sudoku", "--profile", "gpu", "--set", f"data.path={folder}"]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {folder / 'train.csv'}:3: answer "), line
    small = own_files(tmp_path / "small", csv_texts, test=_four_by_four_csv(tmp_path / "four.csv"))
    with pytest.raises(DataError, match=r"test.csv: holds 4x4 puzzles, but these data settings are 9x9"):
        build("sudoku", data_profile("gpu"), overrides={"path": str(small)}, verbose=False)


def _four_by_four_csv(path) -> str:
    """The text of a public-format CSV of two 4x4 puzzles (written at ``path``)."""
    sudoku.write_csv(path, sudoku.generate(2, sudoku.geometry(4, None), (6, 8), 0, progress=False))
    return path.read_text()


def test_data_path_for_maze(tmp_path):
    folder = tmp_path / "mazes"
    folder.mkdir()
    for split, seed in (("train", 1), ("test", 2)):
        maze.write_csv(folder / f"{split}.csv", maze.generate(3, 8, 12, seed, progress=False))
    smoke = data_profile("smoke")
    files = build("maze", smoke, overrides={"path": str(folder)}, verbose=False)
    m = info("maze", smoke, overrides={"path": str(folder)})
    assert m["source"] == f"read from {folder} (train 3, test 3)"
    assert m["inputs"]["train"]["sha256"] == sha(folder / "train.csv")
    assert files["test"].parent != build("maze", smoke, overrides={"n_train": 3}, verbose=False)["test"].parent


# ------------------------------------------------------------------------------------------- source=generate


def test_generated_gpu_data_need_search_and_sit_apart_from_the_hub_set(tmp_path):
    gpu, over = data_profile("gpu"), {"source": "generate", "n_train": 2, "n_test": 2, "augment": 0}
    files = build("sudoku", gpu, overrides=over, verbose=False)
    for split in ("train", "test"):
        d = TaskData.load(files[split])
        assert len(d) == 2 and d.grid == (9, 9) and not d.meta["singles"].any()  # singles solve none of them
    m = info("sudoku", gpu, overrides=over)
    assert m["source"] == f"generated offline (9x9, blanks 50-60, singles do not solve); source=generate: not {REPO}"
    assert "hub" not in m and "inputs" not in m
    hub_folder = build_dir("sudoku", gpu, {k: v for k, v in over.items() if k != "source"}, tmp_path / "data")
    assert files["test"].parent != hub_folder and files["test"].parent.parent == hub_folder.parent


def test_run_hashes_keep_hub_generated_and_own_file_data_apart(tmp_path, csv_texts):
    from infiloop.experiments.settings.recipes import resolve_config
    from infiloop.experiments.store.runs import run_dir_for

    folder = own_files(tmp_path / "mine", csv_texts)
    runs = {}
    for label, over in (("hub", {}), ("generate", {"data.source": "generate"}), ("path", {"data.path": str(folder)})):
        cfg = resolve_config("sudoku", "infiloop", "gpu", {"data.augment": 0, **over})
        runs[label] = run_dir_for(cfg)
    assert len(set(runs.values())) == 3, runs
    assert run_dir_for(resolve_config("sudoku", "infiloop", "gpu")) != \
        run_dir_for(resolve_config("sudoku", "infiloop", "gpu", ["data.source=generate"]))


# ------------------------------------------------------------------------------------------- the hub, faked


def _snapshot(cache, repo: str, commit: str, texts: dict[str, str]):
    """Files of a dataset repository at ``commit`` in a hub cache's layout (refs/main naming that commit)."""
    repo_dir = cache / ("datasets--" + repo.replace("/", "--"))
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    for split, text in texts.items():
        (snap / f"{split}.csv").write_text(text)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    return snap


def test_a_hub_download_records_revision_commit_and_sha256(tmp_path, csv_texts, monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.mirror.example")
    asked = []

    def fake_download(repo_id, filename, *, repo_type, revision, cache_dir, local_files_only, etag_timeout, endpoint):
        asked.append((repo_id, filename, repo_type, revision, local_files_only, endpoint))
        assert str(cache_dir) == str(tmp_path / "data" / "hub")
        split = filename.removesuffix(".csv")
        return str(_snapshot(tmp_path / "data" / "hub", repo_id, COMMIT, {split: csv_texts[split]}) / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    gpu, over = data_profile("gpu"), {**SMALL, "revision": "v1"}
    files = build("sudoku", gpu, overrides=over, verbose=False)
    assert asked == [(REPO, f"{split}.csv", "dataset", "v1", False, "https://hub.mirror.example")
                     for split in ("train", "test")]
    m = info("sudoku", gpu, overrides=over)
    assert m["hub"] == {"repo": REPO, "revision": "v1", "commit": COMMIT}
    assert m["source"] == f"downloaded {REPO} at commit {COMMIT} (train subsample 3 of 4, test 2)"
    snap = tmp_path / "data" / "hub" / ("datasets--" + REPO.replace("/", "--")) / "snapshots" / COMMIT
    assert {s: (m["inputs"][s]["sha256"], m["inputs"][s]["origin"]) for s in ("train", "test")} == \
        {s: (sha(snap / f"{s}.csv"), "hub") for s in ("train", "test")}
    assert len(TaskData.load(files["train"])) == 3 * 2
    assert "singles" not in TaskData.load(files["test"]).meta  # the hub's set is used as published


@pytest.mark.parametrize("cache", ["data/hub", "hf-cache"])
def test_a_file_in_the_hub_cache_is_used_offline(tmp_path, csv_texts, cache):
    """huggingface_hub itself, offline, reads a dataset already in a hub cache at its revision: the project's
    (data/hub) or huggingface_hub's own (HF_HUB_CACHE), where `huggingface-cli download` puts it."""
    _snapshot(tmp_path / cache, REPO, COMMIT, csv_texts)
    gpu = data_profile("gpu")
    files = build("sudoku", gpu, overrides=SMALL, verbose=False)
    m = info("sudoku", gpu, overrides=SMALL)
    assert m["hub"] == {"repo": REPO, "revision": "main", "commit": COMMIT}
    assert m["inputs"]["test"]["path"].startswith(str(tmp_path / cache))
    assert len(TaskData.load(files["test"])) == 2
    with pytest.raises(DataError, match=f"{REPO}: train.csv at revision v2 is not available"):
        build("sudoku", gpu, overrides={**SMALL, "revision": "v2"}, verbose=False)
