"""What a timer of the plan answers: a :class:`Timing` (seconds per step or update, a run's start-up, the batch it
was taken at), the :class:`Timer` protocol that ``measure.MeasuredTimer`` (this device) and ``arithmetic.FlopTimer``
(FLOPs at a rate) implement, and the model configuration an evaluation on a named test set runs
(:func:`test_set_config`), which both time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..store import runs as cache


@dataclass
class Timing:
    seconds: float  # per training step at the run's batch, or per evaluation update of one batch
    startup: float = 0.0  # a run's extra time before its steady steps (allocation, compilation)
    measured_batch: int = 0  # the batch the timing was taken at (scaled linearly to the real one)


class Timer(Protocol):
    def train_step(self, run: cache.Run, batch: int, threads: int, device: str) -> Timing: ...

    def eval_update(self, run: cache.Run, batch: int, device: str, test_set: str = "test") -> Timing: ...

    def looplm_step(self, probe, device: str) -> Timing: ...

    def looplm_block(self, probe, device: str) -> Timing: ...



def test_set_config(run: cache.Run, test_set: str):
    """The model configuration an evaluation on ``test_set`` runs (a named test set at another size runs the same
    weights on its own grid, ``LoopedReasoner.resized``)."""
    from ...tasks.extrapolation import size_set_grid

    cfg = run.model_config()
    grid = size_set_grid(run.config["task"], test_set)
    return cfg if grid is None else cfg.at_grid(grid)
