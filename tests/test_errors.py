"""Bad inputs get one clear line: the command line's exit statuses and messages, typed --set values, files
of the wrong size or kind, damaged run folders, and the races and leftovers of killed processes."""

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest

from infiloop.cli import main
from infiloop.paths import ROOT
from infiloop.tasks import sudoku


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``python -m infiloop ARGV`` in this process: (exit status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def one_error_line(err: str) -> str:
    """The only line of stderr, which must be ``error: ...`` (no traceback)."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def sudoku_csv(path, n: int, side: int = 4, seed: int = 0):
    """A public-format CSV of ``n`` generated puzzles of ``side`` x ``side``."""
    g = sudoku.geometry(side, None)
    blanks = {4: (6, 9), 6: (14, 18), 9: (40, 45)}[side]
    sudoku.write_csv(path, sudoku.generate(n, g, blanks, seed, progress=False))
    return path


# ----------------------------------------------------------------------------------- the command line, by table

CASES = [
    # (arguments, exit status, a phrase of the message); {run} is a trained smoke run, {tmp} an empty folder
    (["eval", "{run}", "--perturb-at", "2", "--eps", "nan"], 2, "--eps nan: expected comma-separated finite"),
    (["eval", "{run}", "--perturb-at", "2", "--eps", "0,inf"], 2, "--eps 0,inf: expected"),
    (["eval", "{run}", "--perturb-at", "2", "--eps", "0,-1"], 2, "finite sizes >= 0"),
    (["eval", "{run}", "--updates", "0"], 2, "argument --updates: expected an integer >= 1, got '0'"),
    (["eval", "{run}", "--every", "0"], 2, "argument --every: expected an integer >= 1, got '0'"),
    (["eval", "{run}", "--limit", "-3"], 2, "argument --limit: expected an integer >= 1, got '-3'"),
    (["eval", "{run}", "--limit", "0"], 2, "argument --limit: expected an integer >= 1"),
    (["eval", "{run}", "--perturb-at", "0"], 2, "argument --perturb-at: expected an integer >= 1"),
    (["eval", "{run}", "--budgets", "0,-3"], 2, "--budgets 0,-3: expected comma-separated outer-update counts >= 1"),
    (["eval", "{run}", "--budgets", "8,x"], 2, "--budgets 8,x: expected"),
    (["eval", "{run}", "--updates", "12", "--every", "5"], 2, "every=5 must be a positive divisor of updates=12"),
    (["eval", "{run}", "--threads", "-1"], 2, "argument --threads: expected an integer >= 0"),
    (["eval", "{run}", "--device", "tpu"], 2, "--device tpu: expected cpu, cuda or cuda:N"),
    (["eval", "{tmp}/missing"], 1, "missing: no such run folder"),
    (["eval", "{tmp}"], 1, "not a run folder (no config.json)"),
    (["eval", "{run}", "--data", "{tmp}/missing.csv"], 1, "missing.csv: no such file"),
    (["eval"], 2, "the following arguments are required: run_dir"),
    (["train", "--max-steps", "-5"], 2, "argument --max-steps: expected an integer >= 1, got '-5'"),
    (["train", "--max-steps", "0"], 2, "argument --max-steps: expected an integer >= 1, got '0'"),
    (["train", "--profile", "smoke", "--set", "model.outer.beta=abc"], 2,
     "--set model.outer.beta=abc: expected a number"),
    (["train", "--profile", "smoke", "--set", "train.lr=nan"], 2, "--set train.lr=nan: expected a number"),
    (["train", "--profile", "smoke", "--set", "train.steps=2.5"], 2, "--set train.steps=2.5: expected an integer"),
    (["train", "--profile", "smoke", "--set", "model.conv=maybe"], 2, "--set model.conv=maybe: expected true or false"),
    (["train", "--profile", "smoke", "--set", "train.betas=0.9"], 2, "--set train.betas=0.9: expected a list"),
    (["train", "--profile", "smoke", "--set", "eval.limit=all"], 2, "--set eval.limit=all: expected an integer"),
    (["train", "--profile", "smoke", "--set", "data.n_train=many"], 2, "--set data.n_train=many: expected an integer"),
    (["train", "--profile", "smoke", "--set", "train.lr"], 2, "--set train.lr: expected KEY=VALUE"),
    (["train", "--profile", "smoke", "--set", "train.lrr=1"], 2, "unknown key 'train.lrr'"),
    (["train", "--profile", "smoke", "--set", "train.optimizer=sgd"], 2, "train.optimizer: unknown optimizer 'sgd'"),
    (["train", "--profile", "huge"], 2, "unknown profile 'huge'"),
    (["train", "--profile", "smoke", "--recipe", "trm"], 2, "unknown connection recipe 'trm'"),
    (["train", "--profile", "smoke", "--connection", "trm"], 2, "unknown connection recipe 'trm'"),  # its alias
    (["train", "--profile", "smoke", "--threads", "x"], 2, "argument --threads: expected an integer >= 0"),
    (["info", "--profile", "huge"], 2, "unknown profile 'huge' (--profile)"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    (["data", "generate", "sudoku", "--n", "0", "--blanks", "6-9", "--side", "4", "--out", "{tmp}/n0.csv"], 2,
     "argument --n: expected an integer >= 1, got '0'"),
    (["data", "generate", "sudoku", "--n", "3", "--blanks", "6-99", "--side", "4", "--out", "{tmp}/b.csv"], 2,
     "blank range 6-99 is not within 0..15"),
    (["data", "build", "--task", "sudoku", "--profile", "smoke", "--root", "{tmp}", "--set", "n_train=abc"], 2,
     "--set n_train=abc: expected an integer"),
    (["data", "build", "--task", "sudoku", "--profile", "smoke", "--root", "{tmp}", "--set", "blanks=7"], 2,
     "--set blanks=7: expected a list"),
    (["data", "validate", "sudoku", "{tmp}/missing.csv"], 1, "missing.csv: no such file"),
]


@pytest.mark.parametrize("argv,status,phrase", CASES, ids=[" ".join(c[0][:4]) for c in CASES])
def test_command_line_table(argv, status, phrase, smoke_run, tmp_path, capsys):
    args = [a.format(run=smoke_run.dir, tmp=tmp_path) for a in argv]
    code, _, err = cli(capsys, *args)
    line = one_error_line(err)
    assert phrase in line, line
    assert code == status, line


def test_debug_shows_the_traceback(tmp_path, capsys, monkeypatch):
    code, _, err = cli(capsys, "--debug", "eval", tmp_path / "missing")
    assert code == 1 and "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'missing'}: no such run folder")
    code, _, err = cli(capsys, "data", "validate", "sudoku", tmp_path / "missing.csv", "--debug")
    assert code == 1 and "Traceback" in err
    monkeypatch.setenv("INFILOOP_DEBUG", "1")
    code, _, err = cli(capsys, "eval", tmp_path / "missing")
    assert code == 1 and "Traceback" in err


def test_a_subprocess_prints_one_line_and_the_status(tmp_path):
    """As a user sees it: ``python -m infiloop`` prints the line and exits with the status."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("INFILOOP_DEBUG", None)
    res = subprocess.run([sys.executable, "-m", "infiloop", "eval", str(tmp_path / "nope"), "--updates", "0"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 2 and one_error_line(res.stderr).startswith("error: python -m infiloop eval: argument")


def test_outside_its_environment_the_command_line_says_how_to_enter_it():
    """``python -m infiloop`` with a Python that lacks torch (here: this one without site-packages, ``-S``) prints one
    line naming the missing package and how to activate the environment, not a ModuleNotFoundError's traceback."""
    res = subprocess.run([sys.executable, "-S", "-m", "infiloop", "train"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    line = one_error_line(res.stderr)
    assert line.startswith("error: torch is not installed for ") and "source .venv/bin/activate" in line


# ----------------------------------------------------------------------------------- --set values

@pytest.mark.parametrize("text,key,expected", [
    ("3e-4", "train.lr", 3e-4), ("1E-3", "train.lr", 1e-3), (".5", "model.outer.beta", 0.5),
    ("1e3", "train.steps", 1000), ("1_000", "train.steps", 1000), ("off", "train.compile", "off"),
    ("true", "model.conv", True), ("null", "model.outer.score_clip", None), ("none", "model.outer.score_clip", None),
    ("[0.9, 9.5e-1]", "train.betas", [0.9, 0.95]), ('"fixed"', "model.outer.decay", "fixed"),
    ("dense", "model.cond.history", "dense"), ("2", "model.cond.window", 2), ("0.1", "model.outer.beta", 0.1),
])
def test_set_values_are_read_by_the_type_of_their_setting(text, key, expected):
    from infiloop.experiments.settings.recipes import resolve_config

    cfg = resolve_config("sudoku", "infiloop", "smoke", [f"{key}={text}"])
    node = cfg
    for k in key.split("."):
        node = node[k]
    assert node == expected and type(node) is type(expected)


def test_set_values_keep_the_hash_of_runs_made_before():
    """Values that were read right before (YAML) give the same configuration, hence the same run folder."""
    from infiloop.experiments.settings.recipes import resolve_config
    from infiloop.experiments.store.runs import run_dir_for

    as_text = resolve_config("sudoku", "infiloop", "smoke", ["model.outer.beta=0.1", "train.seed=3"])
    as_values = resolve_config("sudoku", "infiloop", "smoke", {"model.outer.beta": 0.1, "train.seed": 3})
    assert run_dir_for(as_text) == run_dir_for(as_values)


def test_data_build_and_train_read_set_alike(tmp_path, capsys):
    """One reader for both commands: a number in scientific notation is a number in `data build --set`."""
    code, out, err = cli(capsys, "data", "build", "--task", "sudoku", "--profile", "smoke", "--root", tmp_path,
                         "--set", "n_train=1e1", "--set", "n_test=5", "--set", "blanks=[6, 8]")
    assert code == 0, err
    man = json.loads(next(tmp_path.glob("sudoku/smoke-*/build.json")).read_text())
    assert man["config"]["n_train"] == 10 and man["config"]["blanks"] == [6, 8]


# ----------------------------------------------------------------------------------- files of the wrong size or kind

def test_a_file_of_another_size_names_both_sizes(smoke_run, tmp_path, capsys):
    big = sudoku_csv(tmp_path / "six.csv", 3, side=6)
    code, _, err = cli(capsys, "eval", smoke_run.dir, "--data", big)
    line = one_error_line(err)
    assert code == 1 and "six.csv: the file holds 6x6 Sudoku puzzles" in line
    assert "this model was trained on 4x4 (boxes 2x2)" in line


def test_a_maze_file_of_another_size_is_refused_before_the_model(tmp_path):
    from infiloop.experiments.settings.recipes import profile_model
    from infiloop.experiments.store.runs import _user_data
    from infiloop.tasks import maze

    path = tmp_path / "mazes.csv"
    maze.write_csv(path, maze.generate(2, 8, 10, 0, progress=False))
    cfg = profile_model("smoke").replace(grid=(12, 12), seq_len=144, vocab_size=6, box=None)
    with pytest.raises(ValueError, match=r"mazes.csv: the file holds 8x8 mazes, but this model was trained on "
                                         r"12x12 mazes"):
        _user_data("maze", cfg, path)
    assert len(_user_data("maze", cfg.replace(grid=(8, 8), seq_len=64), path)) == 2


def test_binary_files_are_named(tmp_path, capsys):
    from infiloop.tasks import arc

    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    (tmp_path / "image.csv").write_bytes(png)
    code, _, err = cli(capsys, "data", "validate", "sudoku", tmp_path / "image.csv")
    assert code == 1 and "image.csv: not a UTF-8 text file (it holds the byte 0x89)" in one_error_line(err)
    (tmp_path / "arc").mkdir()
    (tmp_path / "arc" / "task.json").write_bytes(png)
    with pytest.raises(ValueError, match=r"task.json: not a UTF-8 text file .*expected ARC task JSON"):
        arc.load_json_dir(tmp_path / "arc")


def test_byte_order_marks_are_accepted(tmp_path, capsys):
    from infiloop.tasks import arc

    path = sudoku_csv(tmp_path / "bom.csv", 4)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, out, err = cli(capsys, "data", "validate", "sudoku", path)
    assert code == 0 and "bom.csv: ok, 4 rows" in out, err
    (tmp_path / "arc").mkdir()
    task = {"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[3]], "output": [[4]]}]}
    (tmp_path / "arc" / "t1.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(task).encode())
    assert arc.load_json_dir(tmp_path / "arc")[0].id == "t1"


def test_generate_zero_puzzles_leaves_no_file(tmp_path, capsys):
    for task in (["sudoku", "--blanks", "6-9", "--side", "4"], ["maze", "--size", "8", "--min-path", "10"]):
        code, _, err = cli(capsys, "data", "generate", *task, "--n", "0", "--out", tmp_path / "out.csv")
        assert code == 2 and "--n: expected an integer >= 1" in one_error_line(err)
    assert list(tmp_path.iterdir()) == []


def test_a_users_file_is_never_cut_silently(smoke_run, tmp_path, capsys):
    path = sudoku_csv(tmp_path / "hundred.csv", 100, seed=1)  # more rows than the smoke profile's limit, 64
    code, out, err = cli(capsys, "eval", smoke_run.dir, "--data", path, "--updates", "2", "--quiet")
    assert code == 0, err
    assert out.startswith(f"# exact accuracy by depth on 100 puzzles of {path}")
    from infiloop.evaluation import load_trajectory

    assert load_trajectory(out.strip().splitlines()[-1])["correct"].shape == (2, 100)
    code, out, err = cli(capsys, "eval", smoke_run.dir, "--data", path, "--updates", "2", "--limit", "500", "--quiet")
    assert code == 0 and out.startswith(f"# exact accuracy by depth on 100 puzzles of {path}"), err
    code, out, err = cli(capsys, "eval", smoke_run.dir, "--data", path, "--updates", "2", "--limit", "30", "--quiet")
    assert code == 0 and out.startswith(f"# exact accuracy by depth on 30 puzzles of {path}"), err
    code, out, err = cli(capsys, "eval", smoke_run.dir, "--updates", "2", "--quiet")  # the profile's own test set
    assert code == 0 and out.startswith("# exact accuracy by depth on 64 puzzles of the profile's test set"), err


def test_perturbation_without_every_or_updates(smoke_run, capsys):
    """The README's example without --every (and without --updates) once crashed on None < int."""
    code, out, err = cli(capsys, "eval", smoke_run.dir, "--perturb-at", "2", "--eps", "0,1e-4,1e-2,0.3",
                         "--updates", "3", "--quiet")
    assert code == 0 and "retention after 3 more updates" in out and len(out.splitlines()) == 6, err
    code, out, err = cli(capsys, "eval", smoke_run.dir, "--perturb-at", "2", "--eps", "0,0.3", "--quiet")
    assert code == 0 and f"retention after {smoke_run.config['eval']['updates']} more updates" in out, err


# ----------------------------------------------------------------------------------- damaged run folders

@pytest.fixture
def run_copy(smoke_run, tmp_path):
    """A copy of the smoke run, without its evaluation caches, that a test may damage."""
    copy = shutil.copytree(smoke_run.dir, tmp_path / smoke_run.dir.name)
    shutil.rmtree(copy / "eval", ignore_errors=True)
    return copy


def test_a_finished_run_with_a_diverged_loss_is_refused(run_copy, capsys):
    """Runs finished before divergence became an error carry a NaN final loss: never evaluate them."""
    done = json.loads((run_copy / "DONE.json").read_text())
    done["final"]["loss"] = float("nan")
    (run_copy / "DONE.json").write_text(json.dumps(done))
    code, _, err = cli(capsys, "eval", run_copy, "--updates", "2")
    assert code == 1 and f"{run_copy}: training diverged (final loss nan)" in one_error_line(err)


def test_damaged_weights_name_the_file_and_the_remedy(run_copy, capsys):
    (run_copy / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    code, _, err = cli(capsys, "eval", run_copy, "--updates", "2")
    line = one_error_line(err)
    assert code == 1 and f"{run_copy / 'model.safetensors'}: damaged weights" in line
    assert "DONE.json, then run the train command of this run again" in line
    (run_copy / "model.safetensors").unlink()
    code, _, err = cli(capsys, "eval", run_copy, "--updates", "2")
    assert code == 1 and "model.safetensors: missing although DONE.json" in one_error_line(err)


@pytest.mark.parametrize("content", [b"{\"task\": \"sudo", b"\xff\xfe\x00binary", b"[1, 2]"])
def test_damaged_config_names_the_file_and_the_remedy(run_copy, capsys, content):
    (run_copy / "config.json").write_bytes(content)
    code, _, err = cli(capsys, "eval", run_copy, "--updates", "2")
    line = one_error_line(err)
    assert code == 1 and f"{run_copy / 'config.json'}: " in line and f"delete the folder {run_copy}" in line


def test_a_damaged_evaluation_cache_is_computed_again(run_copy, capsys):
    from infiloop.evaluation import load_trajectory
    from infiloop.experiments.store.runs import load_run

    run = load_run(run_copy)
    traj, path = run.evaluate(updates=2, every=1, limit=8, progress=False)
    path.write_bytes(path.read_bytes()[:100])  # a truncated archive
    again, path2 = run.evaluate(updates=2, every=1, limit=8, progress=False)
    assert path2 == path and "damaged evaluation cache" in capsys.readouterr().err
    assert np.array_equal(again["correct"], traj["correct"])
    assert np.array_equal(load_trajectory(path)["correct"], traj["correct"])  # rewritten whole


def test_a_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, capsys):
    import torch

    from infiloop.experiments.store.runs import get_run

    run = get_run("sudoku", "carry_last", "smoke", root=tmp_path, max_steps=15, progress=False)
    steps = [torch.load(run.dir / f, weights_only=True)["step"] for f in ("checkpoint.pt", "checkpoint.prev.pt")]
    assert steps == [15, 10]  # the previous checkpoint is kept
    (run.dir / "checkpoint.pt").write_bytes(b"PK\x03\x04 damaged")
    get_run("sudoku", "carry_last", "smoke", root=tmp_path, max_steps=20, progress=False)
    assert "resuming from checkpoint.prev.pt (step 10)" in capsys.readouterr().err
    assert (run.dir / "checkpoint.damaged.pt").is_file()
    assert torch.load(run.dir / "checkpoint.pt", weights_only=True)["step"] == 20
    assert [json.loads(ln)["step"] for ln in (run.dir / "metrics.jsonl").read_text().splitlines()] == [5, 10, 15, 20]
    for f in ("checkpoint.pt", "checkpoint.prev.pt"):
        (run.dir / f).write_bytes(b"damaged")
    code, _, err = cli(capsys, "train", "--profile", "smoke", "--recipe", "carry_last", "--run-dir", run.dir,
                       "--quiet")
    line = one_error_line(err)
    assert code == 1 and "checkpoint.pt: damaged checkpoint" in line
    assert "to start this run over, delete" in line and "checkpoint.prev.pt" in line


# ----------------------------------------------------------------------------------- races and leftovers

def test_two_configurations_racing_for_one_folder(tmp_path, monkeypatch):
    """The loser of the lock finds the winner's configuration in the folder and says so, instead of
    reporting the winner's run as its own."""
    import infiloop.experiments.store.runs as ex
    from infiloop.io import atomic_write_text

    folder = tmp_path / "shared"
    winner = ex.resolve_config("sudoku", "infiloop", "smoke", {"train.steps": 5})
    real_lock = ex.locked

    @contextmanager
    def lock_won_by_the_other(path):
        with real_lock(path):  # while we waited, the other process wrote its configuration and finished
            atomic_write_text(folder / "config.json", json.dumps(winner))
            atomic_write_text(folder / "DONE.json", json.dumps({"step": 5, "complete": True}))
            yield

    monkeypatch.setattr(ex, "locked", lock_won_by_the_other)
    with pytest.raises(ValueError, match="holds a run with a different configuration; choose another --run-dir"):
        ex.get_run("sudoku", "infiloop", "smoke", {"train.steps": 6}, run_dir=folder, progress=False)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_killed_writes_are_removed(run_copy):
    from infiloop.experiments.store.runs import load_run
    from infiloop.io import STALE_TEMP_AGE_S, atomic_write_text

    old = os.path.getmtime(run_copy / "config.json") - 10 * STALE_TEMP_AGE_S
    dead, alive = _dead_pid(), os.getpid()
    names = {"stale": f".model.safetensors.{dead}-abcdefgh.tmp", "stale_npz": f".traj-1.npz.{dead}-a1b2c3d4.npz",
             "old_style": ".checkpoint.pt.k2j4h5g6.tmp", "writing": f".DONE.json.{alive}-abcdefgh.tmp",
             "young": f".metrics.jsonl.{dead}-zzzzzzzz.tmp"}
    (run_copy / "eval").mkdir(exist_ok=True)
    paths = {k: (run_copy / "eval" if "npz" in k else run_copy) / n for k, n in names.items()}
    for k, p in paths.items():
        p.write_bytes(b"half")
        if k != "young":
            os.utime(p, (old, old))
    load_run(run_copy)
    assert {k for k, p in paths.items() if p.exists()} == {"writing", "young"}
    # the next write of a file removes its own stale leftovers
    other = run_copy.parent / "notes.txt"
    leftover = other.parent / f".notes.txt.{dead}-abcdefgh.tmp"
    leftover.write_bytes(b"half")
    os.utime(leftover, (old, old))
    atomic_write_text(other, "done")
    assert not leftover.exists() and other.read_text() == "done"


def test_written_files_have_the_usual_mode(tmp_path):
    import torch

    from infiloop.io import atomic_write_text, save_weights

    umask = os.umask(0o022)
    try:
        save_weights(tmp_path / "model.safetensors", {"w": torch.zeros(2)})
        atomic_write_text(tmp_path / "config.json", "{}")
    finally:
        os.umask(umask)
    assert oct(os.stat(tmp_path / "model.safetensors").st_mode & 0o777) == oct(0o644)
    assert oct(os.stat(tmp_path / "config.json").st_mode & 0o777) == oct(0o644)
