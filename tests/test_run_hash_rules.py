"""Whether a setting enters a run's hash is declared on its field (``config.hash_rule``, issue 62): a new setting
with a neutral value moves no cached run, one without a rule moves every run it is set in, and the declared rules are
the exception lists ``config_hash`` kept before."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from infiloop.config import hash_rule
from infiloop.experiments.settings import recipes
from infiloop.model.connections import ConnectionConfig
from infiloop.model.reasoner import ModelConfig
from infiloop.training import TrainConfig

# Runs of every kind the notebooks train, with the hashes their cached folders have (tests/test_structure.py pins
# these and more); the toy settings below must not move them.
CACHED = {
    ("sudoku", "carry_last", "smoke", ()): "9cdc6a919b",
    ("sudoku", "infiloop", "smoke", ()): "c944e0a4d4",
    ("sudoku", "fprm", "smoke", ()): "8f7bc05cb8",
    ("sudoku", "infiloop", "tiny", (("model.inner.decay", "uniform"), ("model.outer.decay", "uniform"))):
        "ea4710807d",
    ("sudoku", "history_w1", "tiny", ()): "de69ec455b",
    ("sudoku", "loop_gating", "search", (("train.seed", 1),)): "d265491311",
}


@pytest.fixture(autouse=True)
def _native(native_mode):
    """The cached folders were trained before the numeric mode existed: resolved natively (tests/test_numeric.py
    checks that the reproducible mode moves them and a configuration without the mode hashes as native)."""


def hashes(extra: dict | None = None) -> dict:
    return {run: recipes.config_hash(recipes.resolve_config(run[0], run[1], run[2], {**dict(run[3]), **(extra or {})}))
            for run in CACHED}


@dataclass
class TrainWithNeutral(TrainConfig):
    toy_smoothing: float = field(default=0.0, metadata=hash_rule(neutral=0.0))


@dataclass
class TrainWithPlain(TrainConfig):
    toy_smoothing: float = 0.1  # no hash rule: hashed as it is


@dataclass
class ConnectionWithToy(ConnectionConfig):
    toy_temperature: float = field(default=1.0, metadata=hash_rule(neutral=1.0, only_for=("infiloop",)))


@dataclass
class ModelWithToy(ModelConfig):
    inner: ConnectionWithToy = field(default_factory=ConnectionWithToy)
    outer: ConnectionWithToy = field(default_factory=ConnectionWithToy)


def test_the_runs_hash_as_cached():
    assert hashes() == CACHED


def test_a_new_training_setting_at_its_neutral_value_moves_no_cached_run(monkeypatch):
    monkeypatch.setattr(recipes, "TrainConfig", TrainWithNeutral)
    cfg = recipes.resolve_config("sudoku", "infiloop", "smoke")
    assert cfg["train"]["toy_smoothing"] == 0.0  # the setting is there, in the run's configuration
    assert hashes() == CACHED
    moved = hashes({"train.toy_smoothing": 0.2})  # set away from its neutral value, it names other runs
    assert all(moved[run] != CACHED[run] for run in CACHED)


def test_a_new_setting_without_a_hash_rule_moves_every_cached_run(monkeypatch):
    monkeypatch.setattr(recipes, "TrainConfig", TrainWithPlain)
    now = hashes()
    assert all(now[run] != CACHED[run] for run in CACHED)


def test_a_new_connection_setting_enters_the_hash_only_where_it_acts(monkeypatch):
    monkeypatch.setattr(recipes, "ModelConfig", ModelWithToy)
    cfg = recipes.resolve_config("sudoku", "carry_last", "smoke")
    assert cfg["model"]["outer"]["toy_temperature"] == 1.0
    assert hashes() == CACHED
    moved = hashes({"model.outer.toy_temperature": 2.0})
    acts = {run: run[1] == "infiloop" for run in CACHED}  # only_for InfiLoop: carry-last and FPRM keep their runs
    assert {run: moved[run] != CACHED[run] for run in CACHED} == acts


def declared_rules(cls: type, prefix: str) -> dict[str, dict]:
    out = {}
    for f in dataclasses.fields(cls):
        if "hash" in f.metadata:
            out[prefix + f.name] = f.metadata["hash"]
    return out


def test_the_declared_rules_are_the_exceptions_config_hash_kept():
    """NEUTRAL_SETTINGS, INFILOOP_ONLY and the pops of threads, micro_batch, compile and carry-last's candidate loss,
    as they stood in ``config_hash`` before the rules moved onto the fields."""
    infiloop_only = {"hashed": True, "at_default": False, "only_for": ("infiloop",), "idle_with_outer": ()}
    plain = {"hashed": True, "at_default": False, "only_for": (), "idle_with_outer": ()}
    want = {
        **{f"model.{axis}.{k}": {**infiloop_only, "neutral": v} for axis in ("inner", "outer")
           for k, v in (("clip_mode", "hard"), ("z0_candidate", True), ("history_grad", False))},
        "model.recall": {**plain, "neutral": True},
        "train.candidate_loss": {**plain, "neutral": 0.0, "idle_with_outer": ("carry_last",)},
        "train.progressive": {**plain, "neutral": 0.0},
        "train.compile": {**plain, "at_default": True},
        "train.threads": {**plain, "hashed": False},
        "train.micro_batch": {**plain, "hashed": False},
        "train.numeric": {**plain, "neutral": "native"},  # added 2026-12-07 (infiloop/numeric.py)
    }
    got = {**declared_rules(ModelConfig, "model."), **declared_rules(TrainConfig, "train."),
           **declared_rules(ConnectionConfig, "model.inner."), **declared_rules(ConnectionConfig, "model.outer.")}
    assert got == want


@pytest.mark.parametrize("over,same", [
    ({"train.threads": 3}, True), ({"train.micro_batch": 8}, True), ({"train.compile": "off"}, True),
    ({"train.candidate_loss": 0.2}, False), ({"train.progressive": 0.3}, False), ({"model.recall": False}, False),
    ({"model.outer.clip_mode": "soft"}, False), ({"train.lr": 3e-4}, False), ({"train.numeric": "reproducible"}, False),
])
def test_each_rule_acts_on_infiloop(over, same):
    base = recipes.config_hash(recipes.resolve_config("sudoku", "infiloop", "smoke"))
    assert (recipes.config_hash(recipes.resolve_config("sudoku", "infiloop", "smoke", over)) == base) is same


def test_carry_last_leaves_out_what_does_nothing_for_it():
    base = recipes.config_hash(recipes.resolve_config("sudoku", "carry_last", "smoke"))
    for over in ({"train.candidate_loss": 0.2}, {"model.outer.clip_mode": "soft"}, {"model.inner.history_grad": True}):
        assert recipes.config_hash(recipes.resolve_config("sudoku", "carry_last", "smoke", over)) == base, over
