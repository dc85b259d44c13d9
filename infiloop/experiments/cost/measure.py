"""The timer that measures (:class:`MeasuredTimer`): a few training steps and evaluation updates of a model shape,
and a looped decoder's, timed on this device by ``training.train`` and ``evaluation.evaluate`` themselves; the
timings of whole processes (a job's start, warm workers, the slow-down beside other jobs) through ``processes.py``.
``calibration.Calibration`` caches what it measures.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from ... import numeric
from . import processes
from .flops import answer_length, flops_per_step, flops_per_update, forward_blocks
from .timer import Timing, test_set_config

TRAIN_WARM, TRAIN_TIMED = 2, 4  # training steps run before timing (allocation, compilation), then timed
EVAL_WARM, EVAL_TIMED, EVAL_REPEATS = 1, 3, 3  # evaluation updates: warm-up, then 3 timings of (at least) 4 and 3 of 1
# Steps too short to time a few are timed by as many as take 1.5 s (one timing: at 7 steps of quick's 0.045 s, the
# shapes' timings ranged over +-15 % on a quiet machine, 2026-12-04), at most MOST_TIMED; an evaluation's updates by
# as many as take 0.3 s (the median of three timings)
TRAIN_MIN_TIMED_S, MOST_TIMED = 1.5, 120
MAX_STEP_S = 1.0  # a calibration step or update longer than this is timed at a smaller batch and scaled
# Assumed speeds, only to choose the calibration batch (never part of an estimate): FLOP/s.
GUESS_FLOPS = {"cpu": 2e10, "cuda": 5e13, "mps": 1e12}


class MeasuredTimer:
    """Times ``training.train`` and ``evaluation.evaluate`` on this device (a few steps each)."""

    def train_step(self, run, batch, threads, device):
        b = _calibration_batch(flops_per_step(run.model_config(), batch), batch, device)
        per, startup = self._train(run, b, threads, device)
        if b < batch and per * 4 < MAX_STEP_S:  # the guess was cautious: once more at a larger batch
            b = min(batch, b * 4)
            per, startup = self._train(run, b, threads, device)
        elif per * TRAIN_TIMED < TRAIN_MIN_TIMED_S:  # steps too short to time a few: once more with more of them
            per, startup = self._train(run, b, threads, device, _enough(per, TRAIN_TIMED, TRAIN_MIN_TIMED_S))
        return Timing(per * batch / b, startup, b)

    def _train(self, run, b, threads, device, timed=TRAIN_TIMED):
        import torch

        from ...training import METRICS, train

        cfg = copy.copy(run.train_config())
        cfg.batch_size, cfg.log_every, cfg.checkpoint_every = b, 1, 10**9
        # a CPU training in the reproducible numeric mode runs on its mode's threads whatever the slot has: time that
        fixed = numeric.MODES[cfg.numeric].training_threads if device == "cpu" else None
        cfg.steps, cfg.threads = max(cfg.steps, TRAIN_WARM + timed + 1), fixed or threads
        old = torch.get_num_threads()
        try:
            with tempfile.TemporaryDirectory(prefix="infiloop-plan-") as d:
                train(run.model_config(), cfg, run.train_data(), d, device, TRAIN_WARM + timed, progress=False)
                lines = [json.loads(ln) for ln in (Path(d) / METRICS).read_text().splitlines() if ln.strip()]
        finally:
            torch.set_num_threads(old)
        t = [ln["elapsed_s"] for ln in lines]
        per = max(t[-1] - t[TRAIN_WARM - 1], 1e-3) / timed
        return per, max(0.0, t[TRAIN_WARM - 1] - TRAIN_WARM * per)

    def job_start(self, run, device):
        """Seconds to start a job in a new process (``processes.job_start``)."""
        return Timing(processes.job_start(run, device), 0.0, 0)

    def process_start(self, device):
        """Seconds of a new process's own start (``processes.process_start``)."""
        return Timing(processes.process_start(device), 0.0, 0)

    def warm_jobs(self, run, overrides, device, jobs, threads):
        """Real jobs in real warm workers, each training ``TRAIN_WARM`` steps (``processes.warm_jobs``)."""
        timed = processes.warm_jobs(run, overrides, device, jobs, threads, TRAIN_WARM)
        return {kind: Timing(s, 0.0, 0) for kind, s in timed.items()}

    def contention(self, run, device, jobs):
        """The slow-down of a CPU job beside ``jobs - 1`` others (``processes.contention``)."""
        return Timing(processes.contention(run, jobs), 0.0, 0)

    def eval_update(self, run, batch, device, test_set="test"):
        from ...evaluation import evaluate
        from ...model.reasoner import LoopedReasoner

        cfg = test_set_config(run, test_set)
        b = _calibration_batch(flops_per_update(cfg, batch), batch, device)
        data = run.test_data(test_set)
        data = data.subset(np.arange(b) % len(data))
        model = LoopedReasoner(cfg).to(device).eval()
        evaluate(model, data, updates=EVAL_WARM, every=1, batch_size=b, device=device, progress=False)

        def timed(updates: int) -> float:
            t0 = time.perf_counter()
            evaluate(model, data, updates=updates, every=1, batch_size=b, device=device, progress=False)
            _sync(device)
            return time.perf_counter() - t0

        # an update's own cost: the call's fixed part (its batches set up, its result gathered) cancels in the
        # difference of a long and a short call (a job's is in its bookkeeping, plan.Plan.eval_start), the long
        # one long enough to time; the medians of a few timings each: robust to a busy machine
        n = _enough(timed(2) - timed(1), EVAL_TIMED, 0.3)
        long = float(np.median([timed(n + 1) for _ in range(EVAL_REPEATS)]))
        short = float(np.median([timed(1) for _ in range(EVAL_REPEATS)]))
        per = max(long - short, 1e-6) / n
        return Timing(per * batch / b, 0.0, b)


    def looplm_step(self, probe, device):
        """Seconds of one training step of the probe's model at its batch (``TRAIN_WARM`` steps first)."""
        from dataclasses import replace

        from ...model.looplm import LoopLM
        from ...training.looplm import data_of, model_config, train

        data = data_of(probe)
        model = LoopLM(model_config(probe, data)).to(device)
        train(model, data.train, replace(probe.train, steps=TRAIN_WARM))
        per = train(model, data.train, replace(probe.train, steps=TRAIN_TIMED))["seconds"] / TRAIN_TIMED
        return Timing(per, 0.0, probe.train.batch_size)

    def looplm_block(self, probe, device):
        """Seconds per token-block of the evaluation forward (``correct`` on a batch of the deepest test split at
        the probe's loops, :func:`flops.forward_blocks`), the median of ``EVAL_REPEATS`` timings."""
        from ...model.looplm import LoopLM
        from ...tasks.language import Split
        from ...training.looplm import correct, data_of, model_config

        data = data_of(probe)
        cfg = model_config(probe, data)
        model = LoopLM(cfg).to(device)
        split = data.test[max(data.test)]
        n = min(len(split), probe.train.eval_batch)
        part, loops = Split(split.tokens[:n], split.answer[:n], split.depth[:n]), probe.budgets()
        correct(model, part, loops[:1], n)
        times = []
        for _ in range(EVAL_REPEATS):
            t0 = time.perf_counter()
            correct(model, part, loops, n)
            _sync(device)
            times.append(time.perf_counter() - t0)
        blocks = forward_blocks(cfg, n, answer_length(part), loops)
        return Timing(float(np.median(times)) / blocks, 0.0, probe.train.eval_batch)

    def looplm_start(self, probe, device):
        """Seconds to start a looped decoder's job in a new process, with (``startup``) the seconds of its task's
        generation and its model's build (``processes.looplm_start``)."""
        from dataclasses import asdict

        return Timing(*processes.looplm_start(asdict(probe), device), 0)



def _enough(per: float, least: int, seconds: float = 0.3) -> int:
    """How many steps or updates of ``per`` seconds each take ``seconds`` together (``least`` at the least, at
    most ``MOST_TIMED``): fewer, and the timing's own resolution and the machine's jitter would be a large part."""
    return int(min(MOST_TIMED, max(least, math.ceil(seconds / max(per, 1e-4)))))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _calibration_batch(flops_full: float, batch: int, device: str) -> int:
    """The largest batch (a power-of-4 fraction of ``batch``) whose step the guessed speed puts under a second."""
    guess = GUESS_FLOPS.get(device.split(":")[0], GUESS_FLOPS["cpu"])
    b = batch
    while b > 1 and flops_full * b / batch / guess > MAX_STEP_S:
        b = max(1, b // 4)
    return b
