"""Connection recipes and the configuration of a run.

A *recipe* names the loop connections (and conditioners) of a model: InfiLoop and the paper's baselines (its
§6 comparison: carry-last as in TRM, FPRM, full attention residuals: each connection's recipe is registered with
its class, ``model/connections.py``) and the conditioners of the looped-LM study;
a *profile* (``profiles.py``) is the data, model, training and evaluation settings. A run's configuration is
(task, recipe, profile, overrides) resolved to plain data by :func:`resolve_config`; its hash names the run's
folder in the run cache (``store/runs.py``).

Overrides are dotted keys: ``model.outer.beta=0.1``, ``train.lr=3e-4``, ``data.n_train=500``,
``eval.updates=960``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from ... import tasks
from ...config import coerce, field_type, hashed_settings, parse_setting, type_of_default
from ...errors import UsageError
from ...io import load_npz
from ...model.reasoner import ModelConfig
from ...model.registry import CONNECTION_REGISTRY
from ...tasks.registry import REGISTRY as TASK_ENTRIES
from ...training import TrainConfig
from . import profiles


class _Recipes(Mapping):
    """The recipes by name: each registered connection's own (``model/registry.py``: registered with its
    class, ``model/connections.py``), as registered now, then the recipes made of them (``derived``)."""

    def __init__(self, derived: dict[str, dict]):
        self.derived = derived

    def __getitem__(self, name: str) -> dict:
        entry = CONNECTION_REGISTRY.get(name)
        if entry is not None and entry.recipe is not None:
            return entry.recipe
        return self.derived[name]

    def __iter__(self) -> Iterator[str]:
        own = [name for name, entry in CONNECTION_REGISTRY.items() if entry.recipe is not None]
        yield from own
        yield from (name for name in self.derived if name not in own)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# Conditioners of the looped-LM study (test-time recurrence in looped language models) on the carry-last model:
# its rescue setting for history injection (dense B_j, w = 1; w = 2 for the window study), loop gating, their
# pair, and the dense initial-state injection that the study finds to collapse.
_CARRY_LAST = CONNECTION_REGISTRY["carry_last"].recipe
_DERIVED: dict[str, dict] = {
    "history_w1": {**_CARRY_LAST, "cond": {"history": "dense", "window": 1}},
    "history_w2": {**_CARRY_LAST, "cond": {"history": "dense", "window": 2}},
    "loop_gating": {**_CARRY_LAST, "cond": {"timestep": "loop_gating"}},
    "history_lg": {**_CARRY_LAST, "cond": {"history": "dense", "window": 1, "timestep": "loop_gating"}},
    "inject_dense": {**_CARRY_LAST, "cond": {"inject": "dense"}},
}
# Connection recipes: the experiment-level names of the compared connections, as model settings: a connection's
# recipe is registered with its class; the conditioners and the overthinking setting's recipes are made of them.
RECIPES: Mapping[str, dict] = _Recipes(_DERIVED)

# The overthinking setting (Bansal et al. 2022, arXiv 2202.05826; notebook 09): the three main connections on a block
# whose weights do not depend on the grid's size (attention without positions plus the depthwise 3x3 convolution,
# ModelConfig.size_agnostic), so that a model trained on short strings or small mazes runs on longer and larger ones;
# each with recall (the input fed to every inner update, TRM's rule) and without it (the input only in the initial
# states). Every setting but the connection and the recall switch is the profile's, the same for the six models.
MAIN_RECIPES = ("carry_last", "fprm", "infiloop")  # the paper's comparison (notebooks 01-04, 07)
SIZE_AGNOSTIC_BLOCK = {"mixer": "attention", "pos": "none", "conv": True}
RECALL = {"recall": True, "no_recall": False}  # the recipes' suffixes
OVERTHINK_RECIPES = tuple(f"{r}_{k}" for r in MAIN_RECIPES for k in RECALL)
for _base in MAIN_RECIPES:
    for _suffix, _recall in RECALL.items():
        _DERIVED[f"{_base}_{_suffix}"] = {**RECIPES[_base], **SIZE_AGNOSTIC_BLOCK, "recall": _recall}
# Two more arms of the setting, each a recipe above with settings over it (notebook 09):
# - ``average_no_recall``: InfiLoop without recall, without its content score and with its decay fixed at
#   beta_0 = 0.55 on both axes: eq. 2's weights beta^(t-i) / sum without s_i, a content-free fixed-beta average (the
#   exact ablation of InfiLoop; notebook 08's ``ema`` is its limit after the first loops), so that what the content
#   score does in overthinking is read against the same model without it;
# - ``carry_last_progressive``: carry-last with recall and the literature's progressive loss, its remedy for
#   overthinking, at alpha = 1, the default of aks2203/deep-thinking's prefix sums
#   (config/problem/hyp/prefix_sums_default.yaml: ``alpha: 1``; the loss is then the progressive term alone).
OVERTHINK_ARMS: dict[str, tuple[str, dict]] = {
    "average_no_recall": ("infiloop_no_recall", {f"model.{axis}.{k}": v for axis in ("inner", "outer")
                                                 for k, v in (("content_score", False), ("decay", "fixed"))}),
    "carry_last_progressive": ("carry_last_recall", {"train.progressive": 1.0}),
}

SECTIONS = ("data", "model", "train", "eval")
# Version of the code and formats that produce a run: part of every run's hash, so a run trained by an
# older model or training code is never reused silently. Raise it when a change alters trained weights.
CODE_VERSION = 2


def parse_overrides(items: list[str] | dict | None) -> dict[str, Any]:
    """``["model.outer.beta=0.1", ...]`` -> ``{"model.outer.beta": "0.1"}``: the values stay text until
    :func:`resolve_config` reads each by the type of its setting (``config.coerce``)."""
    if items is None:
        return {}
    if isinstance(items, dict):
        return dict(items)
    return dict(parse_setting(item) for item in items)


def _typed(key: str, value: Any, data_defaults: dict, eval_defaults: dict) -> Any:
    """An override's value as the type of its setting (a dataclass field, or the default's type)."""
    section, *rest = key.split(".")
    if section == "model":
        hint = field_type(ModelConfig, rest)
    elif section == "train":
        hint = field_type(TrainConfig, rest)
    elif section == "data" and rest:
        hint = str if rest == ["path"] else type_of_default(data_defaults.get(".".join(rest)))
    elif section == "eval" and rest:
        hint = type_of_default(eval_defaults.get(".".join(rest)))
    else:
        hint = Any
    return coerce(key, value, hint)


def _set(tree: dict, dotted: str, value: Any, valid: dict) -> None:
    keys = dotted.split(".")
    if keys[0] not in SECTIONS:
        raise UsageError(f"override {dotted!r}: the first part must be one of {', '.join(SECTIONS)}")
    node, ref = tree, valid
    for i, k in enumerate(keys):
        if not isinstance(ref, dict) or k not in ref:
            choices = sorted(ref) if isinstance(ref, dict) else []
            raise UsageError(f"override {dotted!r}: unknown key {'.'.join(keys[:i + 1])!r}; valid: {choices}")
        if i == len(keys) - 1:
            node[k] = value
        else:
            node = node.setdefault(k, {})
            ref = ref[k]


def resolve_config(task: str, recipe: str, profile: str, overrides: dict | list | None = None) -> dict:
    """The full configuration of a run, as plain data (this is what the run's hash covers)."""
    prof = profiles.profile(profile)
    if recipe not in RECIPES:
        raise UsageError(f"unknown connection recipe {recipe!r}; valid choices: {', '.join(RECIPES)}")
    if task not in tasks.TASKS:
        raise UsageError(f"unknown task {task!r}; valid choices: {', '.join(tasks.TASKS)}")
    data = profiles.data_profile(prof["data"])
    overrides = {**prof.get("task_overrides", {}).get(task, {}), **parse_overrides(overrides)}
    data_defaults = tasks.profile_config(task, data)
    overrides = {k: _typed(k, v, data_defaults, prof["eval"]) for k, v in overrides.items()}
    data_over = tasks.changed_settings(task, data, {k.split(".", 1)[1]: v for k, v in overrides.items()
                                                    if k.startswith("data.")})
    data_cfg = tasks.profile_config(task, data, data_over)
    model = with_recipe(_model_settings(_data_header(task, data, data_over), prof["model"]), recipe)
    cfg = {"code_version": CODE_VERSION, "task": task, "recipe": recipe, "profile": profile, "data": data_cfg,
           "data_profile": prof["data"],
           "data_overrides": data_over, "model": model, "train": {**TrainConfig().to_dict(), **prof["train"]},
           "eval": prof["eval"]}
    valid = {"data": data_cfg, "model": model, "train": cfg["train"], "eval": cfg["eval"]}
    for k, v in overrides.items():
        if not k.startswith("data."):
            _set(cfg, k, v, valid)
    cond = cfg["model"]["cond"]
    if cond["timestep"] != "none" and not cond["horizon"]:  # L_infer in training: the training depth
        cond["horizon"] = cfg["model"]["H"] * cfg["train"]["max_segments"]
    ModelConfig.from_dict(cfg["model"]).validate()
    TrainConfig.from_dict(cfg["train"]).validate()
    return json.loads(json.dumps(cfg))  # tuples -> lists: the same form as config.json


def _model_settings(header: dict, profile_model: dict) -> dict:
    """A model's settings as plain data: ``ModelConfig``'s defaults, the task's fields from a data set's header
    (vocabulary, grid, box, puzzle identifiers), then a profile's model settings."""
    model = ModelConfig().to_dict()
    model.update(vocab_size=header["vocab_size"], seq_len=header["grid"][0] * header["grid"][1],
                 grid=list(header["grid"]), box=header["box"],
                 n_puzzles=header["n_puzzles"])
    for k, v in profile_model.items():
        model[k] = v
    return model


def profile_model(profile: str) -> ModelConfig:
    """The model of ``profile`` on its Sudoku data (InfiLoop on both axes, no overrides), without building any
    data: the grid and box come from the data profile's settings. What ``python -m infiloop info --preset``
    describes; equal to the model of ``resolve_config("sudoku", "infiloop", profile)``."""
    data = tasks.profile_config("sudoku", profiles.data_of(profile))
    side = data["side"]
    header = {"vocab_size": tasks.VOCAB["sudoku"](side), "grid": [side, side], "box": data["box"],
              "n_puzzles": 1}  # Sudoku has one puzzle identifier (tasks/sudoku.py)
    return ModelConfig.from_dict(with_recipe(_model_settings(header, profiles.profile(profile)["model"]), "infiloop"))


def with_recipe(model: dict, recipe: str) -> dict:
    """Model settings (plain data, every field present) with a connection recipe's settings applied."""
    for k, v in RECIPES[recipe].items():
        model[k] = {**model[k], **v} if isinstance(v, dict) else v
    return model


def _data_header(task: str, data: tasks.DataProfile, data_over: dict) -> dict:
    """Grid, box, vocabulary and puzzle count of a training set: from its settings where they tell
    (``tasks.header``), else from the built set (ARC, your own files; built here if needed)."""
    known = tasks.header(task, tasks.profile_config(task, data, data_over))
    if known is not None:
        return known
    files = tasks.build(task, data, overrides=data_over or None, verbose=False)
    return json.loads(str(load_npz(files["train"], ["header"])["header"]))


def config_hash(cfg: dict) -> str:
    """Hash of everything that defines the trained model, ``code_version`` included: not the evaluation settings, not
    the sizes of the named test sets (each task's ``size_setting``), and each model and training setting as its field's
    hash rule says (``config.hash_rule``, declared on the field of ``ModelConfig``, ``ConnectionConfig`` or
    ``TrainConfig``): not the CPU threads or the micro-batch, ``torch.compile`` at its default whatever its value, a
    later-added setting not at its neutral value, nor where it does nothing (InfiLoop's switches on another
    connection, the candidate loss of carry-last)."""
    keyed = copy.deepcopy({k: v for k, v in cfg.items() if k != "eval"})
    for setting in {t.size_setting for t in TASK_ENTRIES.values() if t.size_setting}:  # the training set is the same
        keyed.get("data", {}).pop(setting, None)
        keyed.get("data_overrides", {}).pop(setting, None)
    outer = keyed.get("model", {}).get("outer", {}).get("name")
    hashed_settings(keyed.get("model", {}), ModelConfig, outer)
    hashed_settings(keyed.get("train", {}), TrainConfig, outer)
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:10]


# ---------------------------------------------------------------------------------------- the notebooks' runs

# The paper's ablations of InfiLoop (decay and axes; both axes unless stated), under stable ids: ``label`` is what the
# notebook prints, ``overrides`` the model settings over the InfiLoop recipe, ``paper`` the row of the paper's
# ablation tables it corresponds to (infiloop/analysis/paper.py: ("decay", decay, beta0) in ABLATION_DECAY,
# ("axes", axis) in ABLATION_AXES; None where the paper has no such row).
ABLATIONS: dict[str, dict] = {
    "beta0_0.55": {"label": "learned β₀=0.55", "overrides": {}, "paper": ("decay", "learned", 0.55)},
    "beta0_0.10": {"label": "learned β₀=0.10", "overrides": {"model.inner.beta": 0.10, "model.outer.beta": 0.10},
                   "paper": ("decay", "learned", 0.10)},
    "beta0_0.90": {"label": "learned β₀=0.90", "overrides": {"model.inner.beta": 0.90, "model.outer.beta": 0.90},
                   "paper": ("decay", "learned", 0.90)},
    "fixed_0.55": {"label": "fixed β=0.55", "overrides": {"model.inner.decay": "fixed", "model.outer.decay": "fixed"},
                   "paper": ("decay", "fixed", 0.55)},
    "uniform": {"label": "uniform β=1", "overrides": {"model.inner.decay": "uniform", "model.outer.decay": "uniform"},
                "paper": ("decay", "uniform", 1.0)},
    "reverse_1.82": {"label": "reverse β=1.82",
                     "overrides": {"model.inner.decay": "reverse", "model.outer.decay": "reverse",
                                   "model.inner.beta": 1.82, "model.outer.beta": 1.82},
                     "paper": ("decay", "reverse", 1.82)},
    "inner_only": {"label": "inner axis only", "overrides": {"model.outer.name": "carry_last"},
                   "paper": ("axes", "inner")},
    "outer_only": {"label": "outer axis only", "overrides": {"model.inner.name": "carry_last"},
                   "paper": ("axes", "outer")},
    "no_content_score": {"label": "no content score",
                         "overrides": {"model.inner.content_score": False, "model.outer.content_score": False},
                         "paper": None},
}


# Notebook 06: the conditioners of the looped-LM study beside the unconditioned baseline and InfiLoop.
CONDITIONING_RECIPES = ("carry_last", "history_w1", "history_w2", "loop_gating", "history_lg", "inject_dense",
                        "infiloop")
