"""The specs of what one notebook reads: the runs (:class:`RunSpec`), the cached evaluations (:class:`EvalSpec`) and
the looped decoders (:class:`ModelSpec`) of one notebook at one set of parameters (:class:`Needs`), declared by
each notebook's spec module (``experiments/``) and read back by the notebooks (``need.run(id)``, ``need.result(id)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UsageError
from .. import looplm
from ..settings import profiles
from ..store import runs as cache
from ..store.runs import Run

KINDS = ("evaluate", "perturb", "budgets")


@dataclass
class RunSpec:
    """One trained model a notebook reads."""

    id: str
    task: str
    recipe: str
    overrides: dict
    run: Run  # resolved (configuration and folder), not necessarily trained
    seed: int = 0  # the training seed (``train.seed`` in ``overrides``)

    @property
    def key(self) -> str:
        return str(self.run.dir)


@dataclass
class EvalSpec:
    """One cached evaluation of a run: ``getattr(run, kind)(**args)``."""

    id: str
    run: RunSpec
    kind: str
    args: dict

    @property
    def key(self) -> str:
        """The evaluation's cache file: two notebooks asking for the same evaluation share it."""
        return str(self.run.run.eval_cache_path(self.kind, self.args))

    def compute(self, device: str = "cpu", progress: bool = True) -> dict:
        """The result, from the cache or computed now (the run must be trained)."""
        return getattr(self.run.run, self.kind)(**self.args, device=device, progress=progress)[0]


@dataclass
class ModelSpec:
    """One looped decoder notebook 08 reads: trained and evaluated in one job (``looplm.record``)."""

    id: str
    probe: looplm.Probe
    path: Path  # its record, resolved when declared (``looplm.record_path``)

    @property
    def key(self) -> str:
        return str(self.path)

    def compute(self, device: str = "cpu") -> dict:
        """The record, from the cache or computed now."""
        return looplm.record(self.probe, self.path.parent, device)


@dataclass
class Needs:
    """What one notebook reads at one set of parameters (:func:`needs`)."""

    notebook: str
    profile: str
    params: dict
    runs: dict[str, RunSpec] = field(default_factory=dict)
    evals: dict[str, EvalSpec] = field(default_factory=dict)
    models: dict[str, ModelSpec] = field(default_factory=dict)
    derived: dict = field(default_factory=dict)  # values the declaration derived (depths, budgets, ...)

    @property
    def seeds(self) -> list[int]:
        """The training seeds: the ``seeds`` parameter ("0,1,2"; "" for the profile's), else ``seed``."""
        if "seeds" not in self.params:
            return [int(self.params["seed"])]
        text = str(self.params["seeds"]).strip()
        seeds = parse_ints(text, "seeds") if text else profiles.seeds(self.profile)
        if not seeds or min(seeds) < 0:
            raise UsageError(f"parameter seeds={text!r}: expected training seeds >= 0 separated by commas")
        return seeds

    def key(self, id: str, seed: int | None = None) -> str:
        """Where run or evaluation ``id`` of ``seed`` is kept: the plain id for the first seed, else id@seed."""
        seeds = self.seeds
        seed = seeds[0] if seed is None else seed
        if seed not in seeds:
            raise KeyError(f"{id}: seed {seed} is not among this notebook's seeds {seeds}")
        return id if seed == seeds[0] else f"{id}@{seed}"

    # ---------------------------------------------------------------- declaring
    def add_run(self, id: str, task: str, recipe: str, overrides: dict | None = None) -> RunSpec:
        """Run ``id`` for every training seed; returns the first seed's (its settings derive depths)."""
        for seed in self.seeds:
            over = {"train.seed": seed, **(overrides or {})}
            self.runs[self.key(id, seed)] = RunSpec(id, task, recipe, over,
                                                    cache.resolve(task, recipe, self.profile, over), seed)
        return self.runs[self.key(id)]

    def add_eval(self, id: str, run: RunSpec, kind: str, **args) -> EvalSpec:
        """Evaluation ``id`` of run ``run`` for every training seed; returns the first seed's."""
        if kind not in KINDS:
            raise ValueError(f"evaluation kind {kind!r}: expected one of {', '.join(KINDS)}")
        for seed in self.seeds:
            self.evals[self.key(id, seed)] = EvalSpec(id, self.runs[self.key(run.id, seed)], kind, args)
        return self.evals[self.key(id)]

    def add_model(self, id: str, probe: looplm.Probe) -> ModelSpec:
        """Model ``id``: one looped decoder, its own training seed in ``probe``."""
        self.models[id] = ModelSpec(id, probe, looplm.record_path(probe))
        return self.models[id]

    # ---------------------------------------------------------------- reading (the notebooks)
    def run(self, id: str, device: str = "cpu", progress: bool = True, seed: int | None = None) -> Run:
        """The trained run ``id`` (of ``seed``, default the first): from the cache, or trained now (a
        notebook opened with new parameters)."""
        s = self.runs[self.key(id, seed)]
        return cache.get_run(s.task, s.recipe, self.profile, s.overrides, device=device, progress=progress)

    def result(self, id: str, device: str = "cpu", progress: bool = True, seed: int | None = None) -> dict:
        """The evaluation ``id`` (of ``seed``, default the first): from the cache, or computed now (training
        its run first if need be)."""
        s = self.evals[self.key(id, seed)]
        self.run(s.run.id, device, progress, s.run.seed)
        return s.compute(device, progress)

    def results(self, id: str, device: str = "cpu", progress: bool = True) -> dict[int, dict]:
        """Evaluation ``id`` of every training seed: ``{seed: result}``."""
        return {seed: self.result(id, device, progress, seed) for seed in self.seeds}

    def records(self, workers: int = 1, device: str = "cpu", progress: bool = True) -> dict[str, dict]:
        """Every model's record, ``{id: record}``: from the cache, or computed now ``workers`` at a time (a notebook
        opened with new parameters)."""
        specs = list(self.models.values())
        recs = looplm.results([m.probe for m in specs], workers, specs[0].path.parent if specs else None, progress,
                              device)
        return {m.id: r for m, r in zip(specs, recs)}


# ------------------------------------------------------------------------------------------ declarations


def parse_ints(text: str, name: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError as e:
        raise UsageError(f"parameter {name}={text!r}: expected integers separated by commas") from e
