"""A new task is its module and one registration (issue 62, "one seam for each extension"): a toy task defined in
this file alone, its ``Task`` record holding its builder, audit, vocabulary, validation split and smoke data settings,
is built, audited, trained at the ``smoke`` profile by the project's own entry point and evaluated, with nothing
in the package edited for it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infiloop import tasks
from infiloop.experiments.settings import profiles
from infiloop.experiments.store.runs import get_run
from infiloop.tasks import TaskData, registry, validation
from infiloop.tasks.audit import AuditResult, Match
from infiloop.tasks.datasets import audit_folder

PACKAGE = Path(__file__).resolve().parents[1] / "infiloop"

# ------------------------------------------------------------------ the toy task: flip every bit of a string
# Tokens 1 and 2 are the bits 0 and 1 (0 is padding); the answer of a string is the string with every bit flipped.

NAME = "bitflip"
VOCAB = 3


def _strings(n: int, length: int, seed: str) -> np.ndarray:
    """``n`` distinct bit strings of ``length`` ([n, length] 0/1), drawn from the stream ``seed``."""
    rng = np.random.default_rng(np.frombuffer(f"{NAME}/{length}/{seed}".encode(), np.uint8))
    codes = rng.choice(2 ** length, size=n, replace=False)
    return ((codes[:, None] >> np.arange(length)[None, :]) & 1).astype(np.uint8)


def _to_data(name: str, bits: np.ndarray) -> TaskData:
    return TaskData(name=name, inputs=bits + 1, labels=(1 - bits) + 1, grid=(1, bits.shape[1]), vocab_size=VOCAB)


def _key(row: np.ndarray) -> bytes:
    return row.astype(np.int8).tobytes()  # a saved set's tokens come back wider than the generated ones


def _header(cfg: dict) -> dict:
    return {"grid": [1, cfg["length"]], "box": None, "vocab_size": VOCAB, "n_puzzles": 1}


def _build(name: str, cfg: dict, out: Path, root: Path, verbose: bool):
    bits = _strings(cfg["n_train"] + cfg["n_test"], cfg["length"], str(cfg["seed"]))  # one draw: split apart
    train, test = _to_data(f"{name}-train", bits[:cfg["n_train"]]), _to_data(f"{name}-test", bits[cfg["n_train"]:])
    files = {"train": train.save(out / "train.npz"), "test": test.save(out / "test.npz")}
    return files, "toy strings (tests/test_task_seam.py)", {"train_rows": len(train), "test_rows": len(test)}, \
        {"seeds": {"seed": cfg["seed"]}}


def _audit(train: TaskData, test: TaskData) -> AuditResult:
    """No symmetry is trained under: a test string leaks exactly when it is a training string."""
    seen = {_key(r): i for i, r in enumerate(train.inputs)}
    leaks = [Match(j, [seen[_key(r)]], True) for j, r in enumerate(test.inputs) if _key(r) in seen]
    return AuditResult(NAME, "identity", {"train": len(train), "test": len(test), "unit": "strings"}, leaks)


def _validation(cfg: dict, out: Path, train: TaskData, test: TaskData, n: int, verbose: bool):
    """Strings of a stream of their own, those of the training or the test set left out."""
    seen = {_key(r) for d in (train, test) for r in d.inputs}
    cand = _to_data(f"{NAME}-valid", _strings(2 ** cfg["length"], cfg["length"], f"{cfg['seed']}/valid"))
    keep = [i for i, r in enumerate(cand.inputs) if _key(r) not in seen][:n]
    return cand.subset(keep), keep[-1] + 1 - len(keep), f"toy stream '{cfg['seed']}/valid'"


SMOKE = {"length": 8, "n_train": 160, "n_test": 32, "seed": 0}
TOY = registry.Task(NAME, _header, lambda inputs: inputs != 0, _build, _audit, VOCAB, validation_split=_validation,
                    data_profiles={"smoke": SMOKE})

# ------------------------------------------------------------------------------------------------------ tests


@pytest.fixture
def toy():
    with registry.registered(TOY) as task:
        yield task
    assert NAME not in registry.REGISTRY


def test_the_package_never_names_the_toy_task():
    """Nothing under infiloop/ was written for it: the record above and its registration are all there is."""
    assert not [p for p in PACKAGE.rglob("*.py") if NAME in p.read_text(encoding="utf-8")]
    assert NAME not in tasks.TASKS and NAME not in profiles.data_profile("smoke").tasks


def test_a_registered_task_is_built_audited_and_split_through_its_record(toy, tmp_path):
    data = profiles.data_profile("smoke")
    assert data.tasks[NAME] == SMOKE and NAME in tasks.TASKS  # its own smoke settings, from the record
    assert tasks.header(NAME, tasks.profile_config(NAME, data)) == _header(SMOKE)
    files = tasks.build(NAME, data, root=tmp_path, verbose=False)
    manifest = json.loads(files["manifest"].read_text())
    assert files["train"].parent == tmp_path / NAME / "smoke" and manifest["config"] == SMOKE
    assert manifest["summary"] == {"train_rows": 160, "test_rows": 32}
    train = tasks.load(NAME, data, "train", root=tmp_path)
    assert (train.labels == 3 - train.inputs).all()  # every bit flipped
    assert audit_folder(files["train"].parent).ok  # its own audit, found by the folder's task
    planted = _to_data("planted", (np.concatenate([train.inputs[:2], train.inputs[5:6]]) - 1).astype(np.uint8))
    assert validation.audit_validation(NAME, train, train, planted)["train"].test_rows == [0, 1, 2]
    valid = validation.load(NAME, data, root=tmp_path)
    assert validation.unavailable(NAME, SMOKE) == "" and len(valid) == SMOKE["n_test"]
    assert not {_key(r) for r in valid.inputs} & {_key(r) for r in train.inputs}
    assert tasks.VOCAB.get(NAME) is None and toy.vocab == VOCAB  # VOCAB: the tasks registered at import


def test_a_registered_task_trains_at_smoke_and_is_evaluated(toy, tmp_path, monkeypatch):
    from infiloop import paths

    monkeypatch.setattr(paths, "DATA", tmp_path / "data")
    run = get_run(NAME, "carry_last", "smoke", {"train.steps": 12, "train.checkpoint_every": 6},
                  root=tmp_path / "runs", progress=False)
    assert run.done and run.dir.parent == tmp_path / "runs" / NAME
    assert run.config["data"] == SMOKE and run.config["model"]["vocab_size"] == VOCAB
    assert (tmp_path / "data" / NAME / "smoke" / "build.json").is_file()
    traj, path = run.evaluate(updates=4, every=1, limit=16, progress=False)
    assert path.is_file()
    assert max(traj["updates"]) == 4 and traj["correct"].shape == (len(traj["updates"]), 16)  # exact per string
    assert tasks.cells_to_fill(NAME, run.test_data().inputs).all()  # every position of a string is scored


def test_a_tasks_size_setting_on_its_record_keeps_the_sizes_out_of_a_runs_hash():
    """A task with named test sets at other sizes names the data setting that lists them on its record
    (``size_setting``): adding a size trains nothing again, and no module of the package is edited for it."""
    from dataclasses import replace

    from infiloop.experiments.settings.recipes import config_hash

    def run_hash(sizes: list[int]) -> str:
        return config_hash({"task": "bitflip_sized", "data": {**SMOKE, "toy_lengths": sizes}})

    assert run_hash([8]) != run_hash([8, 12])  # unregistered, the setting is the data's like any other
    with registry.registered(replace(TOY, name="bitflip_sized", size_setting="toy_lengths")):
        assert run_hash([8]) == run_hash([8, 12]) == run_hash([])
