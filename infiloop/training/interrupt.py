"""A training stopped by a signal at its next step boundary, after a checkpoint, so that a job pre-empted, requeued or
at its time limit loses no step (a checkpoint is otherwise written every ``train.checkpoint_every`` steps: up to two
hours of a paper training).

A Slurm job (``experiments/compute/job.PlanJob``) installs :func:`catch` for the signal submitit uses before the time
limit and for pre-emption (``USR2``) and for ``SIGTERM`` (a requeue, a cancel, the limit itself). The handler only
records the signal while :func:`train <.trainer.train>` runs its steps; the training checks it after each step (every
process of a DDP training agrees, by one all-reduce), writes its checkpoint and raises :class:`Stopped`, and the job
then does what the signal asked (``PlanJob``: submitit's requeue, or waiting for Slurm's kill). Outside the steps (data,
selection) the signal goes to the handler that was there before, at once."""

from __future__ import annotations

import signal
from collections.abc import Callable

import torch
import torch.distributed as dist

_asked: int = 0  # the signal received while the steps ran (0: none)
_running = False  # train() is in its step loop
_before: dict[int, Callable | int | None] = {}


class Stopped(Exception):  # noqa: N818 - not an error: the training did what the signal asked
    """The training stopped at a step boundary after ``signum``, its checkpoint written at ``step``."""

    def __init__(self, run: str, step: int, signum: int):
        self.run, self.step, self.signum = run, step, signum
        super().__init__(f"{run}: stopped by {signal.Signals(signum).name} at step {step}, its checkpoint written "
                         "(it resumes from there)")


def catch(*signums: int) -> None:
    """Record ``signums`` for the training's next step boundary (see the module docstring)."""
    for s in signums:
        if s not in _before:
            _before[s] = signal.getsignal(s)
        signal.signal(s, _record)


def release() -> None:
    """Give every signal of :func:`catch` back to its handler before, and forget any recorded one."""
    global _asked
    for s, h in _before.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)
    _before.clear()
    _asked = 0


def previous(signum: int) -> Callable | int | None:
    """The handler ``signum`` had before :func:`catch`."""
    return _before.get(signum, signal.getsignal(signum))


def _record(signum, frame) -> None:
    global _asked
    if _running:
        _asked = _asked or signum
        return
    handler = previous(signum)  # not training now: what the signal did before, at once
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


class steps:  # noqa: N801 - used as ``with interrupt.steps():``
    """The span in which a signal waits for the next step boundary (the training's step loop)."""

    def __enter__(self):
        global _running
        _running = True
        return self

    def __exit__(self, *exc):
        global _running
        _running = False
        return False


def asked(world: int = 1, device: torch.device | str = "cpu") -> int:
    """The signal that asks this training to stop now (0: none): every process of a DDP training gets the same answer
    (the largest signal number any of them received), so that all stop at the same step. Nothing to ask where no
    signal is caught (every process of a job catches the same ones)."""
    if not _before:
        return 0
    if world == 1:
        return _asked
    flag = torch.tensor([_asked], dtype=torch.int64, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item())
