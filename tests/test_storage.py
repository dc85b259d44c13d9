"""A full disk, a quota, a read-only folder: one line naming the file and what was kept, the previous file intact,
and a training run that resumes once there is room."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import uuid

import pytest

from infiloop.errors import StorageError, exit_status, message
from infiloop.io import atomic_write, atomic_write_text


def failing(exc: BaseException):
    def write(tmp):
        with open(tmp, "w") as f:
            f.write("partial")
        raise exc
    return write


@pytest.mark.parametrize("exc,phrase", [
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "over the disk quota"),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 257344 vs 257264"),
     "no space left on the device"),
    (OSError(errno.EROFS, "Read-only file system"), "the folder is read-only"),
    (OSError(errno.EACCES, "Permission denied"), "permission denied"),
])
def test_a_failed_write_keeps_the_previous_file_and_says_why(tmp_path, exc, phrase):
    target = atomic_write_text(tmp_path / "checkpoint.pt", "the complete previous file")
    with pytest.raises(StorageError) as info:
        atomic_write(target, failing(exc))
    line = message(info.value)
    assert line.startswith(f"{target}: could not write it: {phrase}") and "\n" not in line
    assert line.endswith("the previous checkpoint.pt is kept unchanged") and exit_status(info.value) == 1
    if "space" in phrase or "quota" in phrase:
        assert "free there" in line and "the previous checkpoint.pt took 26 B" in line
    assert target.read_text() == "the complete previous file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # no temporary file left


def test_a_first_write_that_fails_leaves_nothing(tmp_path):
    with pytest.raises(StorageError, match="nothing of it was written"):
        atomic_write(tmp_path / "new" / "eval.npz", failing(OSError(errno.ENOSPC, "No space left on device")))
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_other_errors_of_a_writer_stand(tmp_path):
    with pytest.raises(ValueError, match="not a storage problem"):
        atomic_write(tmp_path / "x", failing(ValueError("not a storage problem")))


def _mount_tmpfs(where, size: str) -> bool:
    if shutil.which("mount") is None or os.geteuid() != 0:
        return False
    where.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.mark.slow  # two command-line trainings, about 50 s (the injected faults of this file run by default)
def test_training_into_a_full_filesystem_stops_cleanly_and_resumes(tmp_path):
    """On a real 300 kB filesystem (root only; skipped elsewhere): one line, no partial file, and the same
    command finishes the run once the filesystem has room."""
    mnt = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    if not _mount_tmpfs(mnt, "300k"):
        pytest.skip("needs root and tmpfs to mount a small filesystem")
    try:
        cmd = [sys.executable, "-m", "infiloop", "train", "--profile", "smoke", "--run-dir", str(mnt / "run"),
               "--quiet"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert res.returncode == 1 and len(lines) == 1, res.stderr[-2000:]
        assert "could not write it: no space left on the device" in lines[0] and str(mnt / "run") in lines[0]
        assert "Traceback" not in res.stderr
        assert not [p for p in (mnt / "run").rglob(".*") if p.is_file() and p.name != ".lock"]  # no temporary file
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
        assert (mnt / "run" / "DONE.json").is_file() and "# done (trained now): 30 steps" in res.stderr
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# ------------------------------------------------------------------------------------------ NaN and Inf


def test_weights_with_nan_or_inf_are_refused_at_load(tmp_path):
    import torch

    from infiloop.errors import DataError
    from infiloop.io import load_weights, save_weights

    good = {"a": torch.ones(3), "b": torch.zeros(2, 2), "ids": torch.arange(3)}
    path = save_weights(tmp_path / "model.safetensors", good)
    assert set(load_weights(path)) == {"a", "b", "ids"}
    for bad in (float("nan"), float("inf")):
        save_weights(path, {**good, "b": torch.tensor([[0.0, bad], [0.0, 0.0]])})
        with pytest.raises(DataError, match=r"model.safetensors: the weights hold NaN or Inf \(b\)"):
            load_weights(path)


def test_a_diverged_checkpoint_is_set_aside_for_the_previous_one(tmp_path):
    import torch

    from infiloop.training import CHECKPOINT, CHECKPOINT_PREV, read_checkpoint

    torch.save({"step": 10, "model": {"w": torch.ones(2)}}, tmp_path / CHECKPOINT_PREV)
    torch.save({"step": 20, "model": {"w": torch.tensor([1.0, float("nan")])}}, tmp_path / CHECKPOINT)
    assert read_checkpoint(tmp_path)["step"] == 10
    assert (tmp_path / "checkpoint.damaged.pt").is_file()


def test_an_evaluation_that_meets_a_non_finite_state_names_the_update_and_the_puzzle(smoke_run, monkeypatch):
    from infiloop.errors import DataError
    from infiloop.evaluation import evaluate

    model = smoke_run.load_model()
    data = smoke_run.test_data().subset(list(range(6)))
    iterate, calls = model.iterate, []

    def diverging(*args, **kwargs):  # the second batch (rows 4 and 5): row 5's state turns NaN at update 2
        calls.append(1)
        for k, carry, diag in iterate(*args, **kwargs):
            if len(calls) == 2 and k == 2:
                carry["y"]["h"][1] = float("nan")
            yield k, carry, diag

    monkeypatch.setattr(model, "iterate", diverging)
    with pytest.raises(DataError, match=r"not finite \(NaN or Inf\) at outer update 2 for puzzle\(s\) 5:"):
        evaluate(model, data, updates=3, batch_size=4, progress=False)
