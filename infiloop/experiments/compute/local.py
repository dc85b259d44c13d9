"""The executors that run the jobs on this machine's slots (``executors.py``): ``local``, a warm worker per slot
(``worker.py``), and ``process``, a new Python process per job (``job.JobRun.command``); both through the
scheduler's order (``scheduler.run_jobs``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ... import numeric
from ...errors import UsageError
from .executors import register, say
from .scheduler import run_jobs
from .slots import check_gpus_per_run, stage_slots


@dataclass(frozen=True)
class Local:
    """The jobs on this machine's slots: CPU workers, or slots on each visible GPU; in a warm worker per slot, or
    (``warm`` False) a new process per job."""

    name: str = "local"
    help: str = "this machine's cores or GPUs, a warm worker per slot (default)"
    here: bool = True
    warm: bool = True
    priced_by: str = "flops"  # the order and the time left only: nothing measured before the stage

    def add_options(self, ap) -> None:  # --jobs, --jobs-per-gpu and --gpus-per-run are the command's own
        pass

    def check(self, args, submitting: bool = True):
        if submitting and not getattr(args, "no_compute", False):
            try:
                check_gpus_per_run(self.slots(args), args.gpus_per_run)
            except RuntimeError as e:
                raise UsageError(str(e)) from None
        return None

    @staticmethod
    def slots(args) -> list:
        return stage_slots(args.profile, args.device, args.jobs, getattr(args, "jobs_per_gpu", None))

    def compute(self, planned: list, args, settings, cost: Callable[[list], dict[str, float]]) -> dict:
        slots = self.slots(args)
        todo = [j for j in planned if not j.done]
        models = sum(j.kind == "looplm" for j in todo)
        shared = len(slots) // max(1, len({s.gpu for s in slots})) if slots[0].gpu is not None else 1
        say(f"{sum(j.kind == 'train' for j in todo)} runs to train and {sum(j.kind == 'eval' for j in todo)} "
            "evaluations to compute" + (f", {models} looped decoders to train and evaluate" if models else "")
            + f" ({len(planned) - len(todo)} cached) on {len(slots)} slot(s) ({slots[0].device}"
            + (f", {shared} jobs per GPU" if shared > 1 else "") + f", {slots[0].threads} thread(s) each; "
            + ("a warm worker per slot)" if self.warm else "a new process per job)"))
        if slots[0].device == "cpu":
            say(numeric.describe() + " (docs/setup.md, 'Numeric mode')")
        if todo and hasattr(cost, "estimate_line"):  # the caller's estimate of the stage, before it starts
            say(cost.estimate_line(planned, len(slots)))
        costs = cost(todo)
        report = run_jobs(planned, args.profile, slots, lambda j: costs.get(j.id, 0.0), args.gpus_per_run,
                          fresh_process=not self.warm)
        if report.failed or report.skipped:
            raise RuntimeError(f"{len(report.failed)} jobs failed ({'; '.join(report.failed)}), {len(report.skipped)} "
                               "not started; each failed job's log is in <run folder>/logs/ "
                               "(a looped decoder's in runs/looplm/logs/<record>/)")
        return {"slots": len(slots), "threads": slots[0].threads, "jobs": len(report.done),
                "job_seconds": round(sum(report.cpu_seconds.values()), 1),
                "floor_seconds": round(sum(report.cpu_seconds.values()) / len(slots), 1),
                "wall_seconds": round(report.seconds, 1)}


register(Local())
register(Local(name="process", help="this machine's slots, a new Python process per job", warm=False))
