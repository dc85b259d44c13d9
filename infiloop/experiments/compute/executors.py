"""Where the compute stage's jobs run: one :class:`Executor` protocol, one registry (:data:`EXECUTORS`).

    ./reproduce.sh                                  # local: this machine's slots, a warm worker each (default)
    ./reproduce.sh --executor process               # local, a new Python process per job
    ./reproduce.sh --profile paper --executor slurm --partition gpu   # a Slurm job per job, through submitit

The pipeline (``reproduce``), ``plan`` and the command line reach an executor only through this module: its options
(:func:`add_options`), its check of the settings before any data is built (:meth:`Executor.check`) and the stage
itself (:meth:`Executor.compute`). Every executor runs a job by the same call (``job.JobRun.run``), in a warm worker,
a new process or a Slurm job. A new executor is one module with a class of this protocol and a
:func:`register` call at its end, imported by :data:`MODULES`.

The cost of a job is not the run path's to compute (the cost model, ``experiments/cost/``, is a leaf the run path does
not import): the caller hands each executor ``cost``, a function of the jobs to run that gives what the executor is
``priced_by``, FLOPs or seconds by job id (``cost.estimates``), which order the jobs, weigh the progress bar and size
Slurm's time limits.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Protocol

from ...errors import UsageError


class Executor(Protocol):
    name: str
    help: str
    here: bool  # the jobs run on this machine while the command waits (the notebooks follow at once)
    warm: bool  # a job pays its process's start once per slot, not once per job (what ``plan`` prices)
    priced_by: str  # what ``cost`` gives it: "flops" (enough to order the jobs) or "seconds" (time limits; the price
    # function then also has ``memory(todo)``: each job's host memory to ask for, GB by id)

    def add_options(self, ap) -> None:
        """Its own command-line options (``reproduce`` and ``plan``), beside ``--executor``."""

    def check(self, args, submitting: bool = True):
        """Refuse in one line (:class:`UsageError`) what would make every job fail, before any data is built; its
        settings for :meth:`compute` (None where it has none). ``submitting``: ``reproduce``, not ``plan``."""

    def compute(self, planned: list, args, settings, cost: Callable[[list], dict[str, float]]) -> dict:
        """Run every job of ``planned`` not yet done (``args``: the command line's ``profile``, ``device``, ``jobs``,
        ``gpus_per_run``, ...); what the stage measured, for ``stages.json``. Raises when a job failed."""


EXECUTORS: dict[str, Executor] = {}
MODULES = ("infiloop.experiments.compute.local", "infiloop.experiments.compute.slurm")  # where they register
DEFAULT = "local"


def register(executor: Executor) -> Executor:
    """Add ``executor`` under its name (at the end of its module)."""
    EXECUTORS[executor.name] = executor
    return executor


def registered() -> dict[str, Executor]:
    """Every executor, the default first and the others by name (whichever module was imported first)."""
    for module in MODULES:
        importlib.import_module(module)
    return dict(sorted(EXECUTORS.items(), key=lambda item: (item[0] != DEFAULT, item[0])))


def executor(name: str) -> Executor:
    """The executor called ``name``."""
    found = registered()
    if name not in found:
        raise UsageError(f"--executor {name}: expected one of {', '.join(found)}")
    return found[name]


def add_options(ap) -> None:
    """``--executor`` (its choices from the registry, ``--fresh-process`` the same as ``--executor process``) and
    every executor's own options."""
    found = registered()
    ap.add_argument("--executor", choices=tuple(found), default=DEFAULT,
                    help="; ".join(f"{e.name}: {e.help}" for e in found.values()))
    ap.add_argument("--fresh-process", dest="executor", action="store_const", const="process",
                    help="the same as --executor process")
    for e in found.values():
        e.add_options(ap)


def say(text: str) -> None:
    print(f"[reproduce] {text}", file=sys.stderr, flush=True)
