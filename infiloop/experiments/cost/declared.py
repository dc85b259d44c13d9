"""A plan from the declarations alone (:func:`declared_plan`): the runs, evaluations and looped decoders of a
profile's notebooks as ``plan.plan_of`` counts them, but from their spec modules and the data settings, no data
built, read or downloaded, so that a FLOP estimate can price a GPU profile on any machine (``command.gpu_offer``,
``plan --device cuda`` without CUDA).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..notebooks import declarations, manifest, needs
from ..store import runs as cache
from .flops import looplm_counts
from .plan import EvalItem, ModelItem, Plan, TrainItem, eval_note


def declared_plan(profile: str, device: str, jobs: int, notebooks: list[str] | None = None,
                  params: dict | None = None) -> Plan:
    """The plan of ``profile``'s notebooks from their declarations alone (``jobs.needs``): no data is built, read
    or downloaded (the GPU profiles' Sudoku-Extreme comes from the hub), so a FLOP estimate can price a profile
    anywhere. Runs are deduplicated by folder and evaluations by their arguments with the run's defaults filled in,
    as the run cache does; an evaluation runs on its limit of puzzles, at most the data settings' test size; a
    budgets evaluation that a trajectory of the same run answers costs nothing (as in ``plan.plan_of``)."""
    runs: dict[str, needs.RunSpec] = {}
    evals: dict[str, tuple[str, needs.EvalSpec, dict]] = {}
    models: dict[str, tuple[str, needs.ModelSpec]] = {}
    for nb in notebooks or declarations.profile_notebooks(profile):
        need = manifest.needs(nb, profile, **(params or {}))
        for spec in need.runs.values():
            runs.setdefault(str(spec.run.dir), spec)
        for e in need.evals.values():
            resolved = _declared_eval(e)
            key = json.dumps([str(e.run.run.dir), e.kind, resolved["args"]], sort_keys=True)
            evals.setdefault(key, (need.notebook, e, resolved))
        for m in need.models.values():
            models.setdefault(m.key, (need.notebook, m))
    plan = Plan(profile, device, jobs)
    for spec in runs.values():
        cfg = spec.run.train_config()
        plan.runs.append(TrainItem(spec.task, spec.recipe, spec.overrides, spec.run, cfg.steps, cfg.batch_size,
                                   spec.run.done))
    for key, (nb, e, resolved) in evals.items():
        if not _answered_by_trajectory(e, resolved, [(o, r) for _, o, r in evals.values()]):
            plan.evals.append(_declared_eval_item(nb, e, resolved, key))
    for nb, m in models.values():
        done = m.path.is_file()
        plan.models.append(ModelItem(nb[:2], m.id, m.probe, m.key, done, m.probe.train.steps,
                                     0.0 if done else looplm_counts(m.probe)["eval"]))
    return plan


def _given(args: dict, name: str, default):
    """``args[name]`` where it is given and not None (a run's default otherwise), as the run cache reads it."""
    value = args.get(name)
    return default if value is None else value


def _declared_eval(e: needs.EvalSpec) -> dict:
    """An evaluation's arguments with its run's defaults filled in (as ``Run.eval_key`` resolves them), its puzzle
    count and the outer updates each puzzle goes through, from the declaration and the data settings alone."""
    run, a = e.run.run, e.args
    ev = run.config["eval"]
    limit = _given(a, "limit", ev["limit"])
    puzzles = len(a["puzzles"]) if a.get("puzzles") else _test_puzzles(run, limit)
    if e.kind == "evaluate":
        args = {"updates": _given(a, "updates", ev["updates"]), "every": _given(a, "every", ev["every"]),
                "limit": limit, "per_token": bool(a.get("per_token")),
                "snapshots": sorted(int(x) for x in a.get("snapshots", ())),
                "puzzles": [int(x) for x in a.get("puzzles", ())]}
    elif e.kind == "perturb":
        args = {"at": a["at"], "eps": [float(x) for x in a["eps"]], "after": _given(a, "updates_after", ev["updates"]),
                "every": _given(a, "every", ev["every"]) if "every" in a else 1, "limit": limit,
                "seed": a.get("seed", 0)}
    else:
        args = {"budgets": sorted(int(b) for b in a["budgets"]), "limit": limit}
    for name, default in (("precision", "auto"), ("weights", "auto"), ("puzzle_ids", "own"), ("test_set", "test")):
        if a.get(name, default) != default:  # cached apart from the default's (``Run.eval_key``)
            args[name] = a[name]
    return {"args": args, "puzzles": puzzles, "updates": run.eval_updates(e.kind, args)}


def _test_puzzles(run: cache.Run, limit: int | None) -> int:
    """Puzzles of the profile's test set an evaluation with ``limit`` runs on, from the data settings (their
    ``n_test``; a hub set's whole test set is taken as at least the limit)."""
    sizes = [n for n in (limit, run.data_settings().get("n_test")) if isinstance(n, int)]
    if not sizes:
        raise ValueError(f"{run.name}: neither an evaluation limit nor the data settings tell how many test "
                         "puzzles it has; plan it where its data is (--device cpu, or with CUDA)")
    return min(sizes)


def _answered_by_trajectory(e: needs.EvalSpec, resolved: dict, others: list[tuple[needs.EvalSpec, dict]]
                            ) -> bool:
    """``plan._read_from_trajectory`` for declared evaluations: a budgets evaluation of a model without a horizon,
    with a trajectory of the same run over as many puzzles that reaches every budget."""
    if e.kind != "budgets" or "precision" in resolved["args"] or e.run.run.model_config().cond.uses_horizon:
        return False
    grid = resolved["args"]["budgets"]
    return any(o.kind == "evaluate" and o.run.run.dir == e.run.run.dir and r["puzzles"] == resolved["puzzles"]
               and r["args"]["updates"] >= grid[-1] and all(b % r["args"]["every"] == 0 for b in grid)
               for o, r in others)


def _declared_eval_item(notebook: str, e: needs.EvalSpec, resolved: dict, key: str) -> EvalItem:
    """The :class:`EvalItem` of a declared evaluation (``plan._eval_item`` without the data). It counts as computed
    only where its run is trained here and its cache file exists."""
    run = e.run.run
    kind, note = eval_note(e.kind, resolved["args"], run)
    cached = False
    if run.done:
        try:  # the data of a run trained here is here
            cached = Path(e.key).is_file()
        except (ValueError, OSError):
            cached = False
    batch = min(run.config["eval"]["batch_size"], resolved["puzzles"])
    return EvalItem(notebook[:2], run, e.run.overrides, kind, resolved["puzzles"], batch, resolved["updates"], note,
                    cached, key, test_set=resolved["args"].get("test_set", "test"))
