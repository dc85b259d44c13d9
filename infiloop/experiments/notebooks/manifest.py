"""The experiment plan as data: for each notebook, the runs it reads and the evaluations it computes.

A notebook's needs are declared once, in its spec module (``experiments/nbNN_name.py``), as a function of its
papermill parameters (the cell tagged ``parameters``; ``0`` or ``""`` means "derived from the run", e.g. the
training depth):

- a **run** is (task, recipe, overrides incl. ``train.seed``) with a stable id such as ``main/infiloop``,
  ``ablation/beta0_0.10`` or ``conditioning/loop_gating``; a notebook with a ``seeds`` parameter declares
  each run once per training seed (the first seed under the plain id, the others as ``id@seed``), and each
  of its evaluations once per seed;
- an **evaluation** is (run, kind, arguments) with a stable id such as ``depth/carry_last``; ``kind`` is
  the :class:`~infiloop.experiments.store.runs.Run` method that computes and caches it (``evaluate``, ``perturb``,
  ``budgets``);
- a **model** is one looped decoder of notebook 08 (a :class:`~infiloop.experiments.looplm.Probe`, id such as
  ``0+2x4+0/infiloop@2``), trained and evaluated in one job, its record cached in
  ``runs/looplm/<task>-<key>.json``.

Three readers use the same declaration, so they cannot disagree:

- ``./reproduce.sh`` (:func:`jobs`) computes every run and evaluation of the selected notebooks once,
  shared ones deduplicated by their cache key, on every core or GPU (:mod:`infiloop.experiments.compute.scheduler`);
- the notebooks (:func:`needs`) only read them: ``need.run(id)``, ``need.result(id)``; opened
  interactively with new parameters, a notebook computes what is missing (same code path);
- ``python -m infiloop plan`` (:mod:`infiloop.experiments.cost.command`) lists and times them before anything runs.

    python -m infiloop manifest --profile tiny            # every job of every notebook, as JSON lines
    python -m infiloop manifest --profile smoke 02 -p max_updates 48
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...errors import UsageError
from ..settings import profiles
from .declarations import experiment, notebook_name, profile_notebooks
from .needs import EvalSpec, ModelSpec, Needs, RunSpec
from .parameters import DEPTH_PARAMETERS, notebook_defaults, read_parameters, typed_parameter


def needs(notebook: str, profile: str | None = None, **params) -> Needs:
    """What ``notebook`` reads with these parameters (the others at the notebook's defaults). Parameters
    the notebook does not declare are ignored, so one parameter set can serve several notebooks."""
    name = notebook_name(notebook)
    p = notebook_defaults(name)
    p.update({k: typed_parameter(k, v, p[k]) for k, v in params.items() if k in p})
    if profile is not None:
        p["profile"] = profile
    profiles.check(p["profile"])
    for key in DEPTH_PARAMETERS:  # 0: the profile's depth
        if key in p and p[key] < 0:  # refused here, before a value derived from it (matched_blocks) names it
            raise UsageError(f"parameter {key}={p[key]!r}: expected an integer >= 0 (0: the profile's depth)")
        if p.get(key) == 0:
            p[key] = profiles.depth(p["profile"])
    n = Needs(name, p["profile"], p)
    experiment(name).declare(n, p)
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
        """What a job runs from (``compute.job.JobRun.from_spec``): the run (its own profile where it has one, and its
        folder, which may lie in another run cache than the default) and the evaluation; or the model and its record's
        folder."""
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
