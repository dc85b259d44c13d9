"""The one mechanism of the studies run beside the notebooks (the search for the paper's contrast, the study of the
learned connection): a study is declared as data (:class:`Study`) and run here.

Its named rows give the models they need (:class:`Model`); each model's training and its evaluation are jobs of the
pipeline's plan (``notebooks.manifest.jobs_for``: a run two rows share is one job), run by the scheduler of
``./reproduce.sh`` (``compute.scheduler.run_planned``, the costliest first by ``cost.estimates``). Each model's
measured record is merged into its row's results file ``<results>/<row>.json`` as soon as it is read and written
atomically (``io.atomic_write_text``): a study killed midway keeps every model recorded so far, and run again reads
its finished runs and evaluations from the caches. The docs block is rendered from a results folder between the
page's markers (:func:`render`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ... import paths
from ...io import atomic_write_text, fill_block
from ..compute.scheduler import log_path, run_planned
from ..cost import estimates
from ..notebooks.manifest import Job, jobs_for
from ..notebooks.needs import EvalSpec, RunSpec
from ..store.runs import Run, resolve


@dataclass(frozen=True)
class Model:
    """One model a study's row needs: the run to train (task, recipe, profile, and overrides that hold its training
    seed) and the row whose results file records it (a row may read a model that another row records)."""

    row: str
    task: str
    recipe: str
    profile: str
    overrides: dict
    seed: int

    def __str__(self) -> str:
        return f"{self.row} {self.recipe} seed {self.seed}"


def _nothing_to_prepare(names: list[str], progress: bool) -> None:
    """A study whose rows need nothing checked or built before their jobs."""


@dataclass(frozen=True)
class Study:
    """A study as data: its grid (the models its named rows need, in the order they are run), each trained model's
    evaluation, how a model's record is measured and merged into its row's results file, where the results files
    and the docs block live, and how the block renders."""

    name: str  # its command; its jobs in the plan are the study's
    models: Callable[[list[str], list[int] | None], list[Model]]  # (rows, seeds or None: the rows' own) -> models
    evaluation: Callable[[Model, Run], dict]  # the arguments of a model's ``evaluate`` job, from its resolved run
    record: Callable[[Model, Job], dict]  # a model's measured record, read once its jobs are done
    merge: Callable[[str, dict, dict], dict]  # (row, its results file's content or {}, a record) -> the new content
    results: str  # the folder of the rows' results files under ``paths.RESULTS`` (the default of --results)
    recorded: Path  # the rows recorded with the code, whose rendering the docs page shows
    doc: Path  # the docs page with the study's block
    markers: tuple[str, str]  # the block's first and last line on the page
    block: Callable[[Path], str]  # the text between the markers, from a results folder
    section: str = ""  # written above the block on a page without the markers ("": such a page is an error)
    prepare: Callable[[list[str], bool], None] = _nothing_to_prepare  # check the rows (ValueError) and build data


def folder(study: Study, results: Path | None = None) -> Path:
    """The results folder: ``results``, else ``paths.RESULTS / study.results`` (read at call time)."""
    return paths.RESULTS / study.results if results is None else Path(results)


def result_path(study: Study, row: str, results: Path | None = None) -> Path:
    """A row's results file: ``<results>/<row>.json``."""
    return folder(study, results) / f"{row}.json"


def plan(study: Study, names: list[str], seeds: list[int] | None, root: Path,
         recipes: tuple[str, ...] | None = None) -> tuple[list[Job], list[tuple[Model, Job]], list[str]]:
    """The named rows as declarations of the plan: each model (of ``recipes`` only, if given; each once) resolved in
    the run cache ``root``, its training and evaluation jobs made by ``jobs_for``. Returns the jobs, each model with
    its evaluation job, and the models whose settings do not resolve (``"row recipe seed s: error"``)."""
    declared, failed, seen = [], [], set()
    for m in study.models(names, seeds):
        if (recipes is not None and m.recipe not in recipes) or (m.row, m.recipe, m.seed) in seen:
            continue
        seen.add((m.row, m.recipe, m.seed))
        try:
            run = resolve(m.task, m.recipe, m.profile, m.overrides, root=root)
        except ValueError as e:
            failed.append(f"{m}: {type(e).__name__}: {e}")
            continue
        spec = RunSpec(f"{m.row}/{m.recipe}", m.task, m.recipe, m.overrides, run, m.seed)
        declared.append((m, EvalSpec(spec.id, spec, "evaluate", study.evaluation(m, run))))
    planned = jobs_for([e for _, e in declared], study.name)
    models = [(m, planned[f"eval {e.run.run.dir.name} {Path(e.key).name}"]) for m, e in declared]
    return list(planned.values()), models, failed


def save(study: Study, row: str, record: dict, results: Path | None = None) -> dict:
    """Merge one model's record into its row's results file (``study.merge``), written atomically; returns the
    file's new content."""
    path = result_path(study, row, results)
    old = json.loads(path.read_text()) if path.is_file() else {}
    out = study.merge(row, old, record)
    atomic_write_text(path, json.dumps(out, indent=1))
    return out


def run(study: Study, names: list[str], seeds: list[int] | None = None, jobs: int = 1, root: Path | None = None,
        results: Path | None = None, progress: bool = True, recipes: tuple[str, ...] | None = None
        ) -> tuple[list[dict], dict[str, dict]]:
    """Run the named rows: their models' training and evaluation as jobs of the plan, ``jobs`` at a time with one
    torch thread each, ordered and weighed by the plan's cost model; then each model's record, merged into its
    row's results file at once. A model that fails is reported and the others are recorded (RuntimeError at the
    end naming the failures). ``root``: the run cache (default ``paths.RUNS``); ``results``: the results folder
    (default :func:`folder`). Returns the records in the order of the grid and {row: its results file's content}."""
    study.prepare(names, progress)
    root = paths.RUNS if root is None else Path(root)
    planned, models, failed = plan(study, names, seeds, root, recipes)
    total = len(models) + len(failed)
    report = run_planned(planned, jobs, progress, estimate=lambda todo, slots: estimates(todo, "cpu", slots)[0])
    lost = set(report.failed) | set(report.skipped)
    records, files = [], {}
    for m, job in models:
        if job.id in lost or job.after[0] in lost:
            why = job.after[0] if job.after[0] in report.failed else job.id
            failed.append(f"{m}: see {log_path(next(j for j in planned if j.id == why))}")
            continue
        record = study.record(m, job)
        files[m.row] = save(study, m.row, record, results)
        records.append(record)
    if failed:
        raise RuntimeError(f"{len(failed)} of {total} models failed:\n" + "\n".join(failed))
    return records, files


def block(study: Study, results: Path | None = None) -> str:
    """The study's docs block, markers included, rendered from ``results`` (default :func:`folder`)."""
    start, end = study.markers
    return f"{start}\n{study.block(folder(study, results))}{end}"


def render(study: Study, results: Path | None = None, doc: Path | None = None) -> Path:
    """Write the study's block into ``doc`` (default ``study.doc``) between its markers, the rest of the page kept as
    it is; a page without the markers gets ``study.section`` and the block at its end, or is refused (ValueError)
    when the study has no section."""
    doc = study.doc if doc is None else Path(doc)
    start, end = study.markers
    text = doc.read_text() if doc.is_file() else ""
    filled = fill_block(text, start, end, block(study, results))
    if filled is None:
        if not study.section:
            raise ValueError(f"{doc}: the markers {start} and {end} are missing")
        filled = text.rstrip("\n") + "\n\n" + study.section + "\n" + block(study, results) + "\n"
    return atomic_write_text(doc, filled)
