"""One job of the plan as every executor runs it: a training, an evaluation or a looped decoder, with its resolved,
typed settings, run in this process by one call (:meth:`JobRun.run`).

The plan's jobs (``notebooks/manifest.Job``) name what to compute; a :class:`JobRun` adds where (device, torch
threads) and is what travels to the process that computes it, as JSON and back into the same typed values:

- a warm worker of the local executor (``worker.py``) receives it on its stdin and calls :meth:`JobRun.run`;
- a new process (``--executor process``, and every multi-GPU training, one process per device under ``torchrun``)
  runs :meth:`JobRun.command`: ``python -m infiloop.experiments.compute.job '<JSON>'``;
- a Slurm job calls :class:`PlanJob` on its node, which calls :meth:`JobRun.run` (as one task of a DDP training
  where the job has several).

No command line is parsed on the way: a training's overrides reach the run cache (``store/runs.get_run``) as the
typed values the notebook's spec declared.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field

KINDS = ("train", "eval", "looplm")
MODULE = "infiloop.experiments.compute.job"  # python -m MODULE JSON runs one job in a new process


@dataclass(frozen=True)
class JobRun:
    """One job and where it runs. A training or an evaluation names its run (task, recipe, profile, the typed
    ``overrides`` and the run folder, which may lie in another run cache than the default); an evaluation also the
    :class:`~infiloop.experiments.store.runs.Run` method that computes and caches it and its arguments; a looped
    decoder its probe (``looplm.Probe`` as a dict) and the folder of its record."""

    kind: str
    device: str = "cpu"
    threads: int = 0  # torch threads (0: leave torch's own)
    task: str = ""
    recipe: str = ""
    profile: str = ""
    overrides: dict = field(default_factory=dict)
    run_dir: str = ""
    method: str = ""
    args: dict = field(default_factory=dict)
    probe: dict | None = None
    root: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"job kind {self.kind!r}: expected one of {', '.join(KINDS)}")

    @classmethod
    def of(cls, job, profile: str, device: str = "cpu", threads: int = 0) -> JobRun:
        """The plan's ``job`` (``manifest.Job``) run on ``device`` with ``threads`` torch threads."""
        return cls.from_spec(job.to_json(profile), device, threads)

    @classmethod
    def from_spec(cls, spec: dict, device: str = "cpu", threads: int = 0) -> JobRun:
        """A job description (``manifest.Job.to_json``, as ``python -m infiloop manifest`` prints it) run on
        ``device``."""
        known = {k: v for k, v in spec.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "device": device, "threads": threads})

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=list)

    @classmethod
    def from_json(cls, text: str) -> JobRun:
        return cls(**json.loads(text))

    @property
    def home(self) -> str:
        """The folder of what it computes: the run folder, or the looped decoder's record folder."""
        return self.root if self.kind == "looplm" else self.run_dir

    def command(self, processes: int = 1) -> list[str]:
        """The command line that runs this job in a new process; with ``processes`` > 1 a training under
        ``torchrun``, one process per device (DDP)."""
        if processes > 1:  # torchrun's own -m runs the module as python -m does
            return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                    "-m", MODULE, self.to_json()]
        return [sys.executable, "-m", MODULE, self.to_json()]

    def run(self) -> None:
        """Compute the job in this process: train the run (resuming from its last checkpoint; under ``torchrun``
        or a multi-task Slurm job as one process of a DDP training), compute and cache the evaluation, or train and
        evaluate the looped decoder and write its record."""
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        if self.kind == "looplm":
            from .. import looplm

            looplm.record(looplm.Probe.from_dict(self.probe), self.root, self.device)
        elif self.kind == "train":
            self._train()
        else:
            self._evaluate()

    def _train(self) -> None:
        import torch.distributed as dist

        from ...machine import init_distributed, leave_process_group
        from ..store.runs import get_run

        device, joined = self.device, False
        if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():  # torchrun's processes
            device, joined = init_distributed(self.device), True
        run = get_run(self.task, self.recipe, self.profile, self.overrides, run_dir=self.run_dir or None,
                      device=device, progress=False)
        if joined:
            leave_process_group()
        if int(os.environ.get("RANK", "0")) == 0:
            s = run.summary()
            final = s.get("final", {})
            print(f"# done ({'trained now' if run.trained_here else 'from the run cache'}): {s['step']} steps, "
                  f"loss {final.get('loss', float('nan')):.4f}, cell accuracy {final.get('cell_acc', float('nan')):.4f}"
                  f"\n{run.dir}", flush=True)

    def _evaluate(self) -> None:
        from ..store import runs as cache

        run = cache.resolve(self.task, self.recipe, self.profile, self.overrides, run_dir=self.run_dir or None)
        t0 = time.time()
        _, path = getattr(run, self.method)(**self.args, device=self.device, progress=False)
        print(f"{path} in {time.time() - t0:.1f} s", flush=True)


# ------------------------------------------------------------------------------------------ as a Slurm job


class PlanJob:
    """What a cluster job runs: one job of the plan (``job.JobRun.run``), or several looped decoders one after
    the other (``spec`` a list; one that fails does not stop the others). Pre-empted or at its time limit, submitit
    calls :meth:`checkpoint` and requeues the same call: a training resumes from its run folder, a looped decoder
    already recorded is not run again."""

    def __call__(self, spec: dict | list, device: str, threads: int) -> str:
        from .cluster_states import leave_time_limit_to_slurm, preempt_signal

        leave_time_limit_to_slurm()  # first: the signal before a short limit may come seconds after the start
        import signal

        import submitit
        import torch

        from ...machine import end_process, init_distributed, leave_process_group, rendezvous_port
        from ...training import interrupt

        try:
            tasks, in_job = submitit.JobEnvironment().num_tasks, True
        except RuntimeError:  # the debug cluster's jobs run in the submitting process, outside any job environment
            tasks, in_job = 1, False
        if tasks > 1:  # one task per GPU of a multi-GPU training: DDP from Slurm's variables
            os.environ.setdefault("MASTER_PORT", str(rendezvous_port(submitit.JobEnvironment().job_id)))
            submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
            device = init_distributed(device)
        old = torch.get_num_threads()
        training = in_job and not isinstance(spec, list) and spec.get("kind") == "train"
        if training:  # pre-empted, requeued or at its limit: a checkpoint at the next step, then the signal's end
            interrupt.catch(preempt_signal(), signal.SIGTERM)
        try:
            failed = _run_specs(spec if isinstance(spec, list) else [spec], device, threads)
        except interrupt.Stopped as stop:
            _after_stop(stop)
            raise
        finally:
            torch.set_num_threads(old)  # the debug cluster runs jobs in the submitting process
            if training:
                interrupt.release()
        if tasks > 1:
            leave_process_group()
            end_process(0, at_exit=True)
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(spec)} looped decoders of this job failed: {'; '.join(failed)}")
        first = spec[0] if isinstance(spec, list) else spec
        return first.get("run_dir") or first["root"]

    def checkpoint(self, *args, **kwargs):
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


def _after_stop(stop) -> None:
    """What the signal that stopped the training asked, now that its checkpoint is written: before the time limit or
    pre-empted, submitit's own handling (its first task requeues the job, which resumes from the checkpoint, and ends);
    then, and after ``SIGTERM`` (a requeue, a cancel, the limit itself), nothing but waiting for Slurm's kill, which
    follows within ``KillWait`` seconds: the process writes nothing more (no result, no error)."""
    import signal

    from ...training import interrupt

    before = interrupt.previous(stop.signum)
    interrupt.release()
    if stop.signum != signal.SIGTERM and callable(before):
        before(stop.signum, None)  # submitit: the first task requeues and exits (or raises: no requeue left)
    while True:  # the other tasks, or the job going on to its limit: Slurm ends them
        signal.pause()


def _run_specs(specs: list[dict], device: str, threads: int) -> list[str]:
    """Run each job description; a single one raises its error, several say theirs and go on (returned)."""
    import traceback

    failed = []
    for spec in specs:
        try:
            JobRun.from_spec(spec, device, threads).run()  # a DDP training's processes share its lock (get_run)
        except Exception as e:
            if len(specs) == 1:
                raise
            traceback.print_exc()
            failed.append(f"{spec.get('root', spec.get('run_dir'))}: {type(e).__name__}: {e}")
    return failed


# ------------------------------------------------------------------------------------------ as a new process


def main(argv: list[str] | None = None) -> int:
    """``python -m infiloop.experiments.compute.job JSON``: run one job (:meth:`JobRun.to_json`) in this process."""
    from ...errors import UsageError, run_command

    def _main(args: list[str]) -> int:
        if len(args) != 1:
            raise UsageError("expected one argument: the job as JSON (JobRun.to_json)")
        try:
            job = JobRun.from_json(args[0])
        except (json.JSONDecodeError, TypeError) as e:
            raise UsageError(f"the job: expected JobRun.to_json's JSON ({e})") from None
        job.run()
        return 0

    return run_command(_main, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    from ...machine import end_process, tune_allocator

    tune_allocator()  # as python -m infiloop does (machine.py)
    end_process(main())

