"""Runs that travel (`python -m infiloop runs export | import | pull | list`): an exported smoke run imported
into an empty run cache is found complete without training; damaged, foreign, incompatible or path-traversing
archives are refused with one line and nothing written; the hub path is exercised offline against a local
hub cache."""

import io
import json
import shutil
import tarfile
import zipfile

import pytest

from infiloop.cli import main
from infiloop.experiments.settings import recipes
from infiloop.experiments.store import archives as runs
from infiloop.experiments.store import eval_cache, inventory
from infiloop.experiments.store import runs as experiments


@pytest.fixture(params=["tar", "zip"])
def archive(request, smoke_run, tmp_path):
    path, entries = runs.export_runs([smoke_run.dir], tmp_path / f"smoke.{request.param}")
    assert entries[0]["path"] == f"runs/sudoku/{smoke_run.name}"
    return path


def _no_training(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("training was started for an imported run")

    monkeypatch.setattr(experiments, "train", fail)
    monkeypatch.setattr("infiloop.training.train", fail)


def _untouched(root):
    """Nothing was written: no run folder and no temporary import folder."""
    return not root.exists() or not any(p for p in root.rglob("*") if p.is_dir() and p.parent != root)


def test_export_import_gives_a_done_run_without_training(archive, smoke_run, tmp_path, monkeypatch):
    root = tmp_path / "fresh-runs"
    _no_training(monkeypatch)
    [(dest, status)] = runs.import_runs(archive, root)
    assert status == "imported" and dest == root / "sudoku" / smoke_run.name
    run = experiments.get_run("sudoku", "infiloop", "smoke", root=root, progress=False)
    assert run.done and run.dir == dest
    assert sorted(runs.run_files(dest)) == sorted(runs.run_files(smoke_run.dir))
    assert not list(dest.glob("checkpoint*")), "checkpoints (pickled) do not travel"
    for f in runs.run_files(dest):
        assert runs.sha256_file(dest / f) == runs.sha256_file(smoke_run.dir / f)
    model = run.load_model()  # safetensors, no pickle
    assert model.n_params() > 0
    # importing again is harmless
    assert runs.import_runs(archive, root) == [(dest, "already present")]


def test_imported_evaluation_cache_is_used(smoke_run, tmp_path, monkeypatch):
    traj, path = smoke_run.evaluate(updates=4, every=1, limit=8, progress=False)
    archive, _ = runs.export_runs([smoke_run.dir], tmp_path / "with-eval.tar")
    root = tmp_path / "r"
    runs.import_runs(archive, root)
    run = experiments.get_run("sudoku", "infiloop", "smoke", root=root, progress=False)
    monkeypatch.setattr(eval_cache, "evaluate", lambda *a, **k: pytest.fail("evaluated again"))
    again, again_path = run.evaluate(updates=4, every=1, limit=8, progress=False)
    assert again_path.name == path.name and (again["correct"] == traj["correct"]).all()


def _rewrite_tar(src, dst, edit):
    """Copy a tar archive member by member, letting ``edit(name, data)`` change a member's bytes."""
    with tarfile.open(src) as tin, tarfile.open(dst, "w") as tout:
        for m in tin.getmembers():
            data = edit(m.name, tin.extractfile(m).read())
            info = tarfile.TarInfo(m.name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
    return dst


def test_damaged_file_is_refused(smoke_run, tmp_path, capsys):
    good, _ = runs.export_runs([smoke_run.dir], tmp_path / "good.tar")
    bad = _rewrite_tar(good, tmp_path / "bad.tar",
                       lambda n, d: d[:-1] + bytes([d[-1] ^ 1]) if n.endswith("model.safetensors") else d)
    root = tmp_path / "r"
    assert main(["runs", "import", str(bad), "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "model.safetensors: sha256" in err[0]
    assert _untouched(root)


def test_incompatible_code_version_is_refused(archive, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(recipes, "CODE_VERSION", recipes.CODE_VERSION + 1)
    root = tmp_path / "r"
    assert main(["runs", "import", str(archive), "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert f"exported by code version {recipes.CODE_VERSION - 1}, this code is version" in err
    assert _untouched(root)


@pytest.mark.parametrize("member", ["../evil.txt", "/tmp/evil.txt", "runs/sudoku/x/../../../evil.txt",
                                    "runs/sudoku/x/checkpoint.pt", "runs/sudoku/x/eval/../../../../evil"])
def test_path_traversal_and_foreign_members_are_refused(archive, tmp_path, member, capsys):
    root = tmp_path / "r"
    if archive.suffix == ".tar":
        bad = tmp_path / "bad.tar"
        shutil.copy(archive, bad)
        with tarfile.open(bad, "a") as t:
            info = tarfile.TarInfo(member)
            info.size = 4
            t.addfile(info, io.BytesIO(b"evil"))
    else:
        bad = tmp_path / "bad.zip"
        shutil.copy(archive, bad)
        with zipfile.ZipFile(bad, "a") as z:
            z.writestr(member, b"evil")
    assert main(["runs", "import", str(bad), "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refused, nothing was imported" in err[0]
    assert _untouched(root) and not (tmp_path / "evil.txt").exists()


def test_link_member_is_refused(archive, tmp_path, capsys):
    if archive.suffix != ".tar":
        pytest.skip("links are a tar feature here")
    bad = tmp_path / "link.tar"
    shutil.copy(archive, bad)
    with tarfile.open(bad, "a") as t:
        info = tarfile.TarInfo("runs/sudoku/x/config.json")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        t.addfile(info)
    assert main(["runs", "import", str(bad), "--root", str(tmp_path / "r")]) == 1
    assert "is a link" in capsys.readouterr().err


def test_renamed_run_folder_is_refused(smoke_run, tmp_path, capsys):
    good, _ = runs.export_runs([smoke_run.dir], tmp_path / "good.tar")
    wrong = "runs/sudoku/infiloop-smoke-0000000000"

    def rename(name, data):
        if name == runs.MANIFEST:
            return data.replace(f"runs/sudoku/{smoke_run.name}".encode(), wrong.encode())
        return data

    bad = tmp_path / "renamed.tar"
    with tarfile.open(good) as tin, tarfile.open(bad, "w") as tout:
        for m in tin.getmembers():
            data = rename(m.name, tin.extractfile(m).read())
            info = tarfile.TarInfo(m.name.replace(f"runs/sudoku/{smoke_run.name}", wrong))
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
    assert main(["runs", "import", str(bad), "--root", str(tmp_path / "r")]) == 1
    assert f"describes the run runs/sudoku/{smoke_run.name}" in capsys.readouterr().err


def test_export_refuses_unfinished_run_and_bad_names(smoke_run, tmp_path, capsys):
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(smoke_run.dir / "config.json", partial / "config.json")
    assert main(["runs", "export", str(partial), "-o", str(tmp_path / "x.tar")]) == 1
    assert "not complete" in capsys.readouterr().err
    assert main(["runs", "export", str(smoke_run.dir), "-o", str(tmp_path / "x.7z")]) == 2
    assert "expected an archive name ending in .tar or .zip" in capsys.readouterr().err


def _hub_cache(cache, repo_id, archive, commit="0123456789abcdef0123456789abcdef01234567"):
    """A local Hugging Face hub cache holding ``repo_id`` at ``commit`` (refs/main), files unpacked from
    ``archive``: the layout `huggingface_hub.snapshot_download` reads when offline."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    with tarfile.open(archive) as t:
        for m in t.getmembers():
            target = snap / m.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(t.extractfile(m).read())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return commit


def test_pull_from_the_hub_offline(smoke_run, tmp_path, monkeypatch, capsys):
    archive, _ = runs.export_runs([smoke_run.dir], tmp_path / "hub.tar")
    cache = tmp_path / "hub-cache"
    commit = _hub_cache(cache, "someone/infiloop-runs", archive)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = tmp_path / "r"
    _no_training(monkeypatch)
    assert main(["runs", "pull", "someone/infiloop-runs", "--cache-dir", str(cache), "--root", str(root)]) == 0
    assert f"imported        {root / 'sudoku' / smoke_run.name}" in capsys.readouterr().out
    assert experiments.get_run("sudoku", "infiloop", "smoke", root=root, progress=False).done
    assert main(["runs", "pull", "someone/infiloop-runs", "--revision", commit, "--cache-dir", str(cache),
                 "--root", str(root)]) == 0
    assert "already present" in capsys.readouterr().out
    assert main(["runs", "pull", "someone/missing", "--cache-dir", str(cache), "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "someone/missing: could not get the runs from the hub (HF_HUB_OFFLINE is set" in err[0]


def test_runs_list(smoke_run, tmp_path, capsys):
    root = tmp_path / "r"
    archive, _ = runs.export_runs([smoke_run.dir], tmp_path / "a.zip")
    runs.import_runs(archive, root)
    (root / "sudoku" / "half-done").mkdir()
    (root / "sudoku" / "half-done" / "config.json").write_text(json.dumps(smoke_run.config))
    assert main(["runs", "list", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "# 2 run folders" in out
    line = next(ln for ln in out.splitlines() if smoke_run.name in ln)
    assert line.split()[:5] == ["sudoku", "infiloop", "smoke", str(recipes.CODE_VERSION), "yes"]
    assert "no" in next(ln for ln in out.splitlines() if "half-done" in ln).split()


def test_runs_prune_removes_only_what_this_code_can_never_use(smoke_run, tmp_path, capsys):
    root = tmp_path / "r"
    runs.import_runs(runs.export_runs([smoke_run.dir], tmp_path / "a.tar")[0], root)
    good = root / "sudoku" / smoke_run.name
    old_cfg = {**smoke_run.config, "code_version": recipes.CODE_VERSION - 1}
    old = root / "sudoku" / f"infiloop-smoke-{recipes.config_hash(old_cfg)}"
    shutil.copytree(good, old)
    (old / "config.json").write_text(json.dumps(old_cfg))
    diverged = root / "sudoku" / "diverged-copy"
    shutil.copytree(good, diverged)
    done = json.loads((diverged / "DONE.json").read_text())
    done["final"]["loss"] = float("nan")
    (diverged / "DONE.json").write_text(json.dumps(done))
    unfinished = root / "sudoku" / smoke_run.name.replace("infiloop", "resumable")
    unfinished.mkdir()  # same configuration hash, no DONE.json yet: resumable, not stale
    (unfinished / "config.json").write_text(json.dumps(smoke_run.config))
    for keep in ("looplm/logs", "pilot/gpu"):  # not runs of the reasoner: never listed, never pruned
        (root / keep).mkdir(parents=True)

    rows = {r["path"].name: r["stale"] for r in inventory.list_runs(root)}
    assert "logs" not in rows and "gpu" not in rows
    assert rows[good.name] == "" and rows[unfinished.name] == ""
    assert rows[old.name] == f"code version {recipes.CODE_VERSION - 1}, this code is {recipes.CODE_VERSION}"
    assert rows["diverged-copy"] == "its folder name does not match its configuration's hash"
    shutil.move(diverged, root / "sudoku" / good.name.replace("infiloop", "infiloop2"))  # a well-named diverged run
    # (the hash is of the configuration only, so a renamed copy with the right suffix is well named)
    assert inventory.stale_reason(root / "sudoku" / good.name.replace("infiloop", "infiloop2"),
                             smoke_run.config) == "training diverged"

    assert main(["runs", "prune", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.count("stale") == 2 and old.exists()  # a dry run by default
    assert main(["runs", "prune", "--root", str(root), "--yes"]) == 0
    assert capsys.readouterr().out.count("removed") == 2
    assert sorted(p.name for p in (root / "sudoku").iterdir()) == sorted([good.name, unfinished.name])
    assert (root / "looplm" / "logs").is_dir() and (root / "pilot" / "gpu").is_dir()
    assert main(["runs", "prune", "--root", str(root)]) == 0
    assert "# no stale runs" in capsys.readouterr().out
