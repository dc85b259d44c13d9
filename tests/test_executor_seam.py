"""A new executor is one module: a class of ``executors.Executor``'s protocol and one ``register`` call. Here a toy one
that runs every job in the test's own process, one after another, reaches ``reproduce`` through ``--executor``
(its own option included) and computes a real evaluation by the same call every executor makes (``JobRun.run``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from infiloop import paths
from infiloop.experiments import pipeline
from infiloop.experiments.compute import executors
from infiloop.experiments.compute.job import JobRun
from infiloop.experiments.notebooks import needs
from infiloop.experiments.notebooks.manifest import Job


@dataclass(frozen=True)
class Inline:
    """Every job in this process, the costliest ready one first."""

    name: str = "inline"
    help: str = "every job in this process, one after another"
    here: bool = True
    warm: bool = True
    priced_by: str = "flops"

    def add_options(self, ap) -> None:
        ap.add_argument("--inline-threads", type=int, default=1, help="with --executor inline: torch threads")

    def check(self, args, submitting: bool = True) -> dict:
        return {"threads": args.inline_threads}

    def compute(self, planned: list, args, settings: dict, cost) -> dict:
        todo, done = [j for j in planned if not j.done], {j.id for j in planned if j.done}
        costs = cost(todo)
        while todo:
            job = max((j for j in todo if set(j.after) <= done), key=lambda j: costs[j.id])
            JobRun.of(job, args.profile, args.device, settings["threads"]).run()
            done.add(job.id)
            todo.remove(job)
        return {"jobs": len(done), "threads": settings["threads"]}


@pytest.fixture
def inline(monkeypatch):
    monkeypatch.setattr(executors, "EXECUTORS", dict(executors.registered()))  # the registry as it was, after
    return executors.register(Inline())


def _plan(smoke_run) -> list[Job]:
    """The session's trained smoke run and a new evaluation of it."""
    need = needs.Needs("seam", "smoke", {"seed": 0})
    run = needs.RunSpec("m", "sudoku", "infiloop", {}, smoke_run)
    need.runs["m"] = run
    e = need.add_eval("traj", run, "evaluate", updates=3, every=1, limit=6)
    Path(e.key).unlink(missing_ok=True)
    train = Job(f"train {smoke_run.dir.name}", "train", run, done=True)
    return [train, Job(f"eval {smoke_run.dir.name} {Path(e.key).name}", "eval", run, e, after=[train.id])]


def test_a_registered_executor_runs_the_compute_stage(inline, smoke_run, monkeypatch, tmp_path):
    planned = _plan(smoke_run)
    monkeypatch.setattr(paths, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(pipeline.manifest, "jobs", lambda selected, profile, params: planned)
    monkeypatch.setattr(pipeline, "_build_data", lambda plan: None)
    monkeypatch.setattr(pipeline, "_run_notebooks", lambda *a: None)
    monkeypatch.setattr("infiloop.experiments.report.build.build_report", lambda profile: tmp_path / "report.html")
    assert "inline" in pipeline._parser().format_help()
    assert pipeline.main(["--profile", "smoke", "--only", "01", "--device", "cpu", "--executor", "inline",
                          "--inline-threads", "2"]) == 0
    assert Path(planned[1].eval.key).is_file()  # computed by the toy executor, through JobRun.run
    stages = (tmp_path / "results" / "smoke" / "stages.json").read_text()
    assert '"jobs": 2' in stages and '"threads": 2' in stages


def test_an_unknown_executor_is_one_line(capsys):
    from infiloop.cli import main

    assert main(["reproduce", "--profile", "smoke", "--executor", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "invalid choice: 'nowhere'" in err[0], err
    assert "'local', 'process', 'slurm'" in err[0]


def test_every_executor_keeps_the_protocol():
    for name, ex in executors.registered().items():
        assert ex.name == name and isinstance(ex.here, bool) and isinstance(ex.warm, bool) and ex.help
        assert ex.priced_by in ("flops", "seconds")
        for method in ("add_options", "check", "compute"):
            assert callable(getattr(ex, method)), (name, method)
    assert {n: (e.here, e.warm) for n, e in executors.registered().items()} == {
        "local": (True, True), "process": (True, False), "slurm": (False, False)}


def test_a_job_reaches_no_command_line_module():
    """The warm worker and the job it runs import no command-line module, even inside a function (the whole import
    graph from them), and nothing on the run path writes ``--set`` text for another parser to read."""
    from test_structure import PACKAGE, import_graph

    graph, seen = import_graph(), set()
    todo = ["infiloop.experiments.compute.worker", "infiloop.experiments.compute.job"]
    while todo:
        mod = todo.pop()
        if mod not in seen:
            seen.add(mod)
            todo += graph.get(mod, ())
    assert "infiloop.experiments.compute.job" in seen and "infiloop.experiments.store.runs" in seen
    assert not [m for m in seen if m == "infiloop.cli" or m.startswith("infiloop.cli.") or m.endswith(".cli")]
    run_path = ("job", "worker", "scheduler", "executors", "local", "slurm", "cluster", "cluster_jobs", "slots")
    for name in run_path:
        text = (PACKAGE / "experiments" / "compute" / f"{name}.py").read_text()
        assert '"--set"' not in text and "--set {" not in text and "--set=" not in text, name


def test_a_job_that_is_not_a_job_is_one_line(capsys):
    """``python -m infiloop.experiments.compute.job`` given anything but a job's JSON says so in one line."""
    from infiloop.experiments.compute import job

    for argv in (["{not json"], ['{"kind": "train", "colour": "red"}'], ['{"kind": "bake"}'], []):
        assert job.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), (argv, err)
    assert JobRun.from_json(JobRun("eval", "cpu", 1, "sudoku", "infiloop", "smoke", {"train.seed": 2}, "/r",
                                   "evaluate", {"updates": 4}).to_json()).overrides == {"train.seed": 2}
