"""The experiment plan as data: for each notebook, the runs it reads and the evaluations it computes.

A notebook's needs are declared once, here, as a function of its papermill parameters (the cell tagged
``parameters``; ``0`` or ``""`` means "derived from the run", e.g. 3/4 of the training depth):

- a **run** is (task, recipe, overrides incl. ``train.seed``) with a stable id such as ``main/infiloop``,
  ``ablation/beta0_0.10`` or ``conditioning/loop_gating``; a notebook with a ``seeds`` parameter declares
  each run once per training seed (the first seed under the plain id, the others as ``id@seed``), and each
  of its evaluations once per seed;
- an **evaluation** is (run, kind, arguments) with a stable id such as ``depth/carry_last``; ``kind`` is
  the :class:`~infiloop.experiments.store.runs.Run` method that computes and caches it (``evaluate``, ``perturb``,
  ``budgets``);
- a **model** is one looped decoder of notebook 08 (a :class:`~infiloop.experiments.looplm.Probe`, id such as
  ``kinship/1+1x4+1/infiloop@2``), trained and evaluated in one job, its record cached in
  ``runs/looplm/<task>-<key>.json``.

Three readers use the same declaration, so they cannot disagree:

- ``./reproduce.sh`` (:func:`jobs`) computes every run and evaluation of the selected notebooks once,
  shared ones deduplicated by their cache key, on every core or GPU (:mod:`infiloop.experiments.compute.scheduler`);
- the notebooks (:func:`needs`) only read them: ``need.run(id)``, ``need.result(id)``; opened
  interactively with new parameters, a notebook computes what is missing (same code path);
- ``python -m infiloop plan`` (:mod:`infiloop.experiments.compute.plan`) lists and times them before anything runs.

    python -m infiloop manifest --profile tiny            # every job of every notebook, as JSON lines
    python -m infiloop manifest --profile smoke 02 -p max_updates 48
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ... import paths
from ...errors import UsageError
from .. import looplm
from ..settings import profiles
from ..settings.recipes import ABLATIONS, CONDITIONING_RECIPES, MAIN_RECIPES
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
        seeds = _ints(text, "seeds") if text else profiles.seeds(self.profile)
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


def _ints(text: str, name: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError as e:
        raise UsageError(f"parameter {name}={text!r}: expected integers separated by commas") from e


def main_table(n: Needs, p: dict) -> None:
    """Notebook 01: each main connection on each task at its training depth (ARC: every test input, with
    a snapshot of the predictions for pass@2 voting)."""
    tasks = [t.strip() for t in p["tasks"].split(",") if t.strip()] or profiles.main_tasks(n.profile)
    for task in tasks:
        for r in MAIN_RECIPES:
            run = n.add_run(f"{task}/{r}", task, r)
            depth = run.run.training_depth
            if task.startswith("arc"):
                n.add_eval(f"{task}/{r}", run, "evaluate", updates=depth, every=depth,
                           limit=len(run.run.test_data()), snapshots=(depth,))
            else:
                n.add_eval(f"{task}/{r}", run, "evaluate", updates=depth, every=depth, limit=p["limit"] or None)
    n.derived["tasks"] = tasks


def _depth_snapshots(n: Needs, p: dict) -> tuple[int, int]:
    a = p["change_from"] or n.runs["infiloop"].run.standard_snapshots()[0]
    return a, p["change_to"] or 2 * a


def depth_scaling(n: Needs, p: dict) -> None:
    """Notebook 02: the three main models to ``max_updates``, every update, with prediction snapshots at
    the two depths of "predictions changed"."""
    for r in MAIN_RECIPES:
        n.add_run(r, p["task"], r)
    a, b = _depth_snapshots(n, p)
    for r in MAIN_RECIPES:
        n.add_eval(f"depth/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                   limit=p["limit"] or None, snapshots=(a, b))
    n.derived.update(change_from=a, change_to=b)


def gamma_dynamics(n: Needs, p: dict) -> None:
    """Notebook 03: InfiLoop's trajectory (γ, content score, wrong cells), notebook 02's by default."""
    run = n.add_run("infiloop", profiles.task(n.profile), "infiloop")
    n.add_eval("depth/infiloop", run, "evaluate", updates=p["max_updates"], every=1, limit=p["limit"] or None,
               snapshots=run.run.standard_snapshots())


def perturbation(n: Needs, p: dict) -> None:
    """Notebook 04: a relative perturbation of the state at ``perturb_at``, each size, every main model."""
    for r in MAIN_RECIPES:
        n.add_run(r, profiles.task(n.profile), r)
    try:
        eps = tuple(float(e) for e in p["eps"].split(",") if e.strip())
    except ValueError as e:
        raise UsageError(f"parameter eps={p['eps']!r}: expected numbers separated by commas") from e
    at = p["perturb_at"] or n.runs["infiloop"].run.standard_snapshots()[0]
    after = p["updates_after"] or at
    for r in MAIN_RECIPES:
        n.add_eval(f"perturb/{r}", n.runs[r], "perturb", at=at, eps=eps, updates_after=after, every=1,
                   limit=p["limit"] or None, seed=p["perturbation_seed"])
    n.derived.update(eps=eps, at=at, after=after)


def beta0_ablation(n: Needs, p: dict) -> None:
    """Notebook 05: every ablation variant of InfiLoop (``recipes.ABLATIONS``) to the long budget."""
    for key, abl in ABLATIONS.items():
        n.add_run(f"ablation/{key}", profiles.task(n.profile), "infiloop", abl["overrides"])
    short = p["budget_short"] or n.runs[f"ablation/{next(iter(ABLATIONS))}"].run.training_depth
    long = p["budget_long"] or round(short * 32 / 3)
    if long <= short:
        raise UsageError(f"parameter budget_long={long}: expected more than budget_short={short}")
    for key in ABLATIONS:
        n.add_eval(f"ablation/{key}", n.runs[f"ablation/{key}"], "evaluate", updates=long, every=1,
                   limit=p["limit"] or None)
    n.derived.update(short=short, long=long)


def conditioning(n: Needs, p: dict) -> None:
    """Notebook 06: the conditioners of the looped-LM study, exact accuracy after exactly N updates."""
    for r in CONDITIONING_RECIPES:
        over = {"model.cond.history": p["history_map"]} if r.startswith("history") else {}
        n.add_run(r, profiles.task(n.profile), r, over)
    depth = n.runs["carry_last"].run.training_depth
    if p["budgets"].strip():
        grid = _ints(p["budgets"], "budgets")
        if not grid or grid[0] < 1:
            raise UsageError(f"parameter budgets={p['budgets']!r}: expected outer-update counts >= 1")
    else:
        grid = [max(1, depth // 2)] + [depth * 2 ** k for k in range(16) if depth * 2 ** k <= p["max_budget"]]
        grid = sorted(set(grid) | {p["max_budget"]})
    for r in CONDITIONING_RECIPES:
        n.add_eval(f"budgets/{r}", n.runs[r], "budgets", budgets=tuple(grid), limit=p["limit"] or None)
    n.derived.update(depth=depth, grid=grid)


def watch_the_loop(n: Needs, p: dict) -> None:
    """Notebook 07: the main models' trajectories (notebook 02's when the parameters agree). The single
    puzzle recorded for the animation is chosen from these, so it is computed by the notebook itself."""
    for r in MAIN_RECIPES:
        n.add_run(r, p["task"], r)
    snaps = n.runs["infiloop"].run.standard_snapshots()
    for r in MAIN_RECIPES:
        n.add_eval(f"depth/{r}", n.runs[r], "evaluate", updates=p["max_updates"], every=1,
                   limit=p["limit"] or None, snapshots=snaps if snaps[1] <= p["max_updates"] else ())


def looped_lm(n: Needs, p: dict) -> None:
    g = looplm.grid(n.profile, p["seeds"], p["connections"], p["allocations"])
    n.derived["grid"] = g
    for cell in g.cells:
        n.add_model(looplm.cell_id(cell), g.probe(cell))


DECLARATIONS: dict[str, Callable[[Needs, dict], None]] = {
    "01_main_table": main_table,
    "02_depth_scaling": depth_scaling,
    "03_gamma_dynamics": gamma_dynamics,
    "04_perturbation": perturbation,
    "05_beta0_ablation": beta0_ablation,
    "06_conditioning": conditioning,
    "07_watch_the_loop": watch_the_loop,
    "08_looped_lm": looped_lm,
}


# ------------------------------------------------------------------------------------------ reading the plan


def notebook_name(name: str) -> str:
    """``"02"``, ``"depth_scaling"`` or ``"02_depth_scaling"`` -> ``"02_depth_scaling"``."""
    for full in DECLARATIONS:
        if name in (full, full[:2], full[3:]):
            return full
    raise UsageError(f"unknown notebook {name!r}; valid: {', '.join(DECLARATIONS)} (or their number)")


def notebook_defaults(name: str) -> dict:
    """The default values of the cell tagged ``parameters`` of ``notebooks/<name>.py``."""
    path = paths.NOTEBOOKS / f"{notebook_name(name)}.py"
    text = path.read_text(encoding="utf-8")
    m = re.search(r'^# %% tags=\["parameters"\]\n(.*?)^# %%', text, re.S | re.M)
    if m is None:
        raise ValueError(f"{path}: no cell tagged parameters")
    out = {}
    for node in ast.parse(m.group(1)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def profile_notebooks(profile: str) -> list[str]:
    """The notebooks a profile runs by default: its ``notebooks`` list (numbers or names), else every one."""
    wanted = profiles.notebooks(profile)
    return [notebook_name(str(x)) for x in wanted] if wanted else sorted(DECLARATIONS)


def undeclared_notebooks() -> list[str]:
    """Notebooks in notebooks/ not declared here: their runs and evaluations are not planned."""
    return [p.stem for p in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.py")) if p.stem not in DECLARATIONS]


def read_parameters(pairs) -> dict:
    """``-p KEY VALUE`` pairs of the command line, each value read as YAML (``-p seeds 0,1,2`` is a text,
    ``-p limit 64`` a number); a value YAML cannot read is refused in one line naming it."""
    import yaml

    out = {}
    for key, text in pairs or []:
        try:
            out[key] = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise UsageError(f"-p {key} {text!r}: not a YAML value ({' '.join(str(e).split())[:80]}); a text can be "
                             f"given in double quotes inside single ones, -p {key} '\"...\"'") from None
    return out


def _typed_parameter(key: str, value, default):
    """A notebook parameter given to the plan (``-p KEY VALUE``, read as YAML) as the type of the notebook's default:
    a number is accepted for a float, and for a text (``-p eps 0.1``, ``-p seeds 1``); anything else is refused in
    one line naming it. The notebook checks the value's range itself."""
    if isinstance(value, bool) != isinstance(default, bool):
        ok = False
    elif isinstance(default, str) and isinstance(value, (int, float)):
        return str(value)
    else:
        ok = isinstance(value, type(default)) or (isinstance(default, float) and isinstance(value, int))
    if not ok:
        raise UsageError(f"parameter {key}={value!r}: expected {type(default).__name__} (the notebook's default is "
                         f"{default!r})")
    return value


# Notebook parameters whose 0 means the profile's depth (profiles.depth): the longest test depth.
DEPTH_PARAMETERS = ("max_updates", "max_budget")


def needs(notebook: str, profile: str | None = None, **params) -> Needs:
    """What ``notebook`` reads with these parameters (the others at the notebook's defaults). Parameters
    the notebook does not declare are ignored, so one parameter set can serve several notebooks."""
    name = notebook_name(notebook)
    p = notebook_defaults(name)
    p.update({k: _typed_parameter(k, v, p[k]) for k, v in params.items() if k in p})
    if profile is not None:
        p["profile"] = profile
    profiles.check(p["profile"])
    for key in DEPTH_PARAMETERS:  # 0: the profile's depth
        if p.get(key) == 0:
            p[key] = profiles.depth(p["profile"])
    n = Needs(name, p["profile"], p)
    DECLARATIONS[name](n, p)
    return n


@dataclass
class Job:
    """One unit of work for the scheduler: train a run, compute one evaluation of a trained run, or train and
    evaluate one looped decoder (a model)."""

    id: str  # "train <run folder>", "eval <run folder> <cache file>" or "looplm <record>"
    kind: str  # "train", "eval" or "looplm"
    spec: RunSpec | None  # the run (None for a model)
    eval: EvalSpec | None = None
    model: ModelSpec | None = None
    after: list[str] = field(default_factory=list)  # ids of jobs that must finish first
    notebooks: list[str] = field(default_factory=list)  # who reads it
    done: bool = False  # already cached

    @property
    def home(self) -> str:
        """The name of what it computes: the run folder's, or the model record's."""
        return self.model.path.stem if self.model is not None else self.spec.run.dir.name

    @property
    def log_dir(self) -> Path:
        """Where its logs go: ``<run folder>/logs/``, or ``<runs>/looplm/logs/<record>/`` for a model."""
        if self.model is not None:
            return self.model.path.parent / "logs" / self.model.path.stem
        return self.spec.run.dir / "logs"

    def finished(self) -> bool:
        """Whether its result is in the run cache now."""
        if self.kind == "looplm":
            return self.model.path.is_file()
        return self.spec.run.done if self.kind == "train" else Path(self.eval.key).is_file()

    def to_json(self, profile: str) -> dict:
        """What ``scheduler.run_one`` needs: the run (its own profile where it has one, and its folder, which
        may lie in another run cache than the default) and the evaluation; or the model and its record's folder."""
        if self.model is not None:
            return {"kind": "looplm", "probe": asdict(self.model.probe), "root": str(self.model.path.parent)}
        profile = getattr(self.spec.run, "config", {}).get("profile", profile)
        d = {"kind": self.kind, "task": self.spec.task, "recipe": self.spec.recipe, "profile": profile,
             "overrides": self.spec.overrides, "run_dir": str(self.spec.run.dir)}
        if self.eval is not None:
            d.update(method=self.eval.kind, args=self.eval.args)
        return d


def jobs(notebooks: list[str], profile: str, params: dict | None = None) -> list[Job]:
    """Every run and evaluation the notebooks read, each once: runs keyed by their folder, evaluations by
    their cache file. An evaluation waits for its run's training; a ``budgets`` evaluation of a model
    without a horizon also waits for the run's trajectories, from which it may be read."""
    out: dict[str, Job] = {}
    for nb in notebooks:
        n = needs(nb, profile, **(params or {}))
        for s in n.runs.values():
            job = out.setdefault(f"train {s.run.dir.name}", Job(f"train {s.run.dir.name}", "train", s,
                                                                  done=s.run.done))
            job.notebooks.append(n.notebook)
        for e in n.evals.values():
            key = f"eval {e.run.run.dir.name} {Path(e.key).name}"
            job = out.setdefault(key, Job(key, "eval", e.run, e, after=[f"train {e.run.run.dir.name}"],
                                          done=Path(e.key).is_file()))
            job.notebooks.append(n.notebook)
        for m in n.models.values():
            key = f"looplm {m.path.stem}"
            job = out.setdefault(key, Job(key, "looplm", None, model=m, done=m.path.is_file()))
            job.notebooks.append(n.notebook)
    for job in out.values():
        if job.kind == "eval" and job.eval.kind == "budgets" and not job.spec.run.model_config().cond.uses_horizon:
            job.after += [j.id for j in out.values() if j.kind == "eval" and j.eval.kind == "evaluate"
                          and j.spec.run.dir == job.spec.run.dir]
    return list(out.values())


def jobs_for(evals: list[EvalSpec], who: str) -> dict[str, Job]:
    """The jobs of evaluations declared outside the notebooks (the contrast search, the connection study): each
    evaluation and its run's training, each once, keyed by id as :func:`jobs` keys them."""
    out: dict[str, Job] = {}
    for e in evals:
        run = e.run.run
        train_id, eval_id = f"train {run.dir.name}", f"eval {run.dir.name} {Path(e.key).name}"
        out.setdefault(train_id, Job(train_id, "train", e.run, done=run.done, notebooks=[who]))
        out.setdefault(eval_id, Job(eval_id, "eval", e.run, e, after=[train_id], done=Path(e.key).is_file(),
                                    notebooks=[who]))
    return out


def main(argv: list[str] | None = None) -> int:
    from ...errors import Parser

    ap = Parser(prog="python -m infiloop manifest", description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", help="notebooks (default: all)")
    ap.add_argument("--profile", default=profiles.DEFAULT, help=profiles.choices())
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                    help="a notebook parameter (value read as YAML)")
    args = ap.parse_args(argv)

    names = [notebook_name(x) for x in args.notebooks] or profile_notebooks(args.profile)
    for job in jobs(names, args.profile, read_parameters(args.p)):
        print(json.dumps({"id": job.id, "after": job.after, "cached": job.done, "notebooks": job.notebooks,
                          **job.to_json(args.profile)}, default=list))
    return 0


if __name__ == "__main__":
    from ...errors import run_command

    sys.exit(run_command(main, sys.argv[1:]))
