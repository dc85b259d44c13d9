"""Peak device memory of a training run and of an evaluation, known before the hours: what ``plan`` prints beside
each GPU job, and how a ``train.micro_batch`` that fits is chosen.

A training process holds, at the peak of a step (the backward pass of its last micro-batch):

- **the state**: float32 weights, the main optimiser's two moments (AdamW, Adam-atan2; TRM's sign-SGD of the puzzle
  embedding keeps none), the EMA's copy (without the puzzle embedding when sign-SGD trains it) and the gradients;
  with several processes, DDP's buckets: a second copy of the gradients it all-reduces, which leave out the puzzle
  embedding sign-SGD trains (``training/ddp.py`` reduces the rows of the step's puzzles alone);
- **the carried states** of the process's slots, twice: the step reads the old ones while it writes the new
  (``initial_carry``'s exact bytes per sample);
- **the step itself**: the activations autograd saves for one micro-batch, and the backward pass's transients.

The step is measured, not guessed: one segment's forward and backward on the CPU (at the precision the run uses:
bf16 autocast where it trains on CUDA), at micro-batches of 1 and 2, with the allocator's events recorded by
``torch.profiler`` (``profile_memory``): its peak above what was allocated before it. The outer updates without
gradients save nothing and free their transients, so the measured model runs only the updates with gradients
(``H = grad_outer``); the puzzle embedding is measured with one row and its other rows' gradients are added. The
step's peak is then ``fixed + per_sample x micro_batch``, a straight line through the two measurements. An
evaluation (no gradients) is measured the same way: one outer update from a fresh carry, at 1 and 2 puzzles.

What the CPU's measurement does not see (docs/gpu.md): the CUDA caching allocator's rounding and fragmentation, CUDA
kernels' workspaces, and how Inductor's compiled step differs from the eager one (it usually saves less, recomputing
cheap operations in the backward pass). :data:`HEADROOM` keeps that share of the device free.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import torch

from .. import numeric
from ..model.connections import choose_kernels
from ..model.reasoner import LoopedReasoner, ModelConfig
from .config import TrainConfig

HEADROOM = 0.85  # the share of the device's memory a job's estimate may take (allocator, workspaces, the context)
GB = 1e9


@dataclass(frozen=True)
class StepCost:
    """Bytes of a step measured at micro-batches 1 and 2: ``fixed + per_sample x m`` at micro-batch ``m``."""

    fixed: int
    per_sample: int

    def at(self, m: int) -> int:
        return self.fixed + self.per_sample * m


@dataclass(frozen=True)
class TrainMemory:
    """The peak bytes of one training process (module docstring), by part."""

    weights: int
    optimizer: int
    ema: int
    extra_grads: int  # the puzzle embedding's rows beyond the measured one
    carry_per_sample: int
    step: StepCost
    batch: int  # slots per process
    buckets: int = 0  # DDP's copy of the gradients it all-reduces (several processes; not the puzzle embedding's)

    @property
    def state(self) -> int:
        return self.weights + self.optimizer + self.ema + self.extra_grads + self.buckets

    def peak(self, micro_batch: int = 0) -> int:
        m = min(micro_batch or self.batch, self.batch)
        return self.state + 2 * self.carry_per_sample * self.batch + self.step.at(m)

    def fitting_micro_batch(self, device_bytes: float, headroom: float = HEADROOM) -> int | None:
        """The largest micro-batch whose peak fits ``headroom`` of ``device_bytes`` (the whole batch: 0), or None
        when one slot at a time does not fit either."""
        budget = device_bytes * headroom
        if self.peak(self.batch) <= budget:
            return 0
        rest = budget - self.peak(1) + self.step.per_sample
        m = math.floor(rest / self.step.per_sample) if self.step.per_sample > 0 else 0
        return min(m, self.batch) if m >= 1 else None


@dataclass(frozen=True)
class EvalMemory:
    """The peak bytes of an evaluation: the weights and one outer update of a batch (carry included)."""

    weights: int
    update: StepCost

    def peak(self, batch: int) -> int:
        return self.weights + self.update.at(batch)


def allocated_peak(fn) -> int:
    """Bytes ``fn()`` allocated at its peak above what was allocated before it (the CPU allocator's events, recorded
    by torch.profiler's ``profile_memory``; allocations on the CPU only)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    now = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        now += e.nbytes()
        peak = max(peak, now)
    return peak


def _inputs(cfg: ModelConfig, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randint(1, cfg.vocab_size, (b, cfg.seq_len), generator=g), torch.zeros(b, dtype=torch.long)


def _measured_model(model_cfg: ModelConfig, grad_only: bool) -> LoopedReasoner:
    """The model the step is measured on: one puzzle-embedding row; only the updates with gradients (training)."""
    cfg = model_cfg.replace(n_puzzles=min(model_cfg.n_puzzles, 1))
    if grad_only:
        cfg = cfg.replace(H=cfg.grad_outer)
    torch.manual_seed(0)
    model = LoopedReasoner(cfg)
    choose_kernels(model, "cpu")  # the eager step, as the trainer chooses it on the CPU
    return model


def _line(measure) -> StepCost:
    one, two = measure(1), measure(2)
    return StepCost(fixed=2 * one - two, per_sample=two - one)


def train_step_cost(model_cfg: ModelConfig, bf16: bool) -> StepCost:
    """One training segment's forward and backward (the loss as training computes it: cross-entropy of the answer
    and the halting head's), measured at micro-batches 1 and 2 (:func:`allocated_peak`)."""
    model = _measured_model(model_cfg, grad_only=True).train()

    def measure(b: int) -> int:
        inputs, pids = _inputs(model.cfg, b)
        carry = model.initial_carry(b)
        model.zero_grad(set_to_none=True)

        def step():
            with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
                _, logits, q_halt, _ = model(carry, inputs, pids)
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), inputs.flatten())
            (loss + q_halt.float().mean()).backward()

        return allocated_peak(step)

    return _line(measure)


def eval_update_cost(model_cfg: ModelConfig, bf16: bool) -> StepCost:
    """One outer update of an evaluation from a fresh carry, without gradients, at 1 and 2 puzzles."""
    model = _measured_model(model_cfg, grad_only=False).eval()

    def measure(b: int) -> int:
        inputs, pids = _inputs(model.cfg, b)

        def update():
            with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
                next(model.iterate(inputs, 1, pids))

        return allocated_peak(update)

    return _line(measure)


def _meta_model(model_cfg: ModelConfig) -> LoopedReasoner:
    """The model on the meta device: its shapes without any memory."""
    with torch.device("meta"):
        return LoopedReasoner(model_cfg)


def _param_bytes(model_cfg: ModelConfig) -> tuple[int, int]:
    """Bytes of all float32 parameters and of the puzzle embedding's, counted on the meta device."""
    model = _meta_model(model_cfg)
    total = sum(p.numel() for p in model.parameters()) * 4
    emb = model.puzzle_emb.weight.numel() * 4 if model.puzzle_emb is not None else 0
    return total, emb


def carry_bytes(model_cfg: ModelConfig) -> int:
    """Bytes of one slot's carried states (float32)."""
    carry = _meta_model(model_cfg).initial_carry(1, "meta")
    return sum(v.numel() * v.element_size() for st in carry.values() for v in st.values())


_CACHE: dict[str, StepCost] = {}


def _key(kind: str, model_cfg: ModelConfig, bf16: bool) -> str:
    cfg = model_cfg.to_dict()
    cfg.pop("n_puzzles", None)
    return json.dumps({"kind": kind, "bf16": bf16, "model": cfg}, sort_keys=True, default=str)


def _measure_natively(requests: list[tuple[str, ModelConfig, bool]]) -> list[StepCost]:
    """:func:`train_step_cost` or :func:`eval_update_cost` of each (kind, model, bf16), in one child process of the
    native numeric mode. A bf16 step is measured on the CPU as the GPU would run it, and oneDNN capped at AVX2 (the
    reproducible mode, ``infiloop/numeric.py``) has no bf16 instructions: measured 12x slower. Only bytes are
    counted here, so no result depends on the mode."""
    import os
    import subprocess
    import sys

    code = ("import json, sys\nfrom infiloop.training import memory\nfrom infiloop.model.reasoner import ModelConfig\n"
            "out = []\nfor kind, cfg, bf16 in json.load(sys.stdin):\n"
            "    fn = memory.train_step_cost if kind == 'train' else memory.eval_update_cost\n"
            "    out.append(memory.asdict(fn(ModelConfig.from_dict(cfg), bf16)))\nprint(json.dumps(out))")
    payload = json.dumps([[kind, cfg.to_dict(), bf16] for kind, cfg, bf16 in requests], default=list)
    threads = str(torch.get_num_threads())  # this process's share of the CPUs, not every core beside other work
    done = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, text=True, check=True,
                          env={**os.environ, numeric.ENV: "native", "OMP_NUM_THREADS": threads})
    return [StepCost(**c) for c in json.loads(done.stdout.strip().splitlines()[-1])]


def prefetch(requests: list[tuple[str, ModelConfig, bool]], store=None) -> None:
    """Measure at once the steps of ``requests`` (kind, model, bf16) that neither this process nor ``store`` holds:
    in a native child process where this one caps oneDNN and a step is bf16 (:func:`_measure_natively`), so that a
    plan pays one process start, not one per configuration."""
    todo = {}
    for kind, cfg, bf16 in requests:
        key = _key(kind, cfg, bf16)
        if key not in _CACHE and not (store is not None and key in store) and bf16 and _capped():
            todo.setdefault(key, (kind, cfg, bf16))
    if todo:
        for key, cost in zip(todo, _measure_natively(list(todo.values()))):
            _CACHE[key] = cost


def _capped() -> bool:
    """Whether this process's numeric mode caps oneDNN (no bf16 instructions then)."""
    return "ONEDNN_MAX_CPU_ISA" in numeric.current().env


def _cached(kind: str, model_cfg: ModelConfig, bf16: bool, store=None) -> StepCost:
    """The step's measurement, once per configuration (the puzzle embedding's size aside) and precision, kept in
    ``store`` (a dict-like that persists, e.g. plan's cache file) when given."""
    key = _key(kind, model_cfg, bf16)
    prefetch([(kind, model_cfg, bf16)], store)
    if key not in _CACHE:
        if store is not None and key in store:
            _CACHE[key] = StepCost(**store[key])
        else:
            fn = train_step_cost if kind == "train" else eval_update_cost
            with torch.random.fork_rng():
                _CACHE[key] = fn(model_cfg, bf16)
    if store is not None:
        store[key] = asdict(_CACHE[key])
    return _CACHE[key]


def trains_bf16(train_cfg: TrainConfig, on_cuda: bool) -> bool:
    """Whether a training's step runs under bf16 autocast (``train.precision``; "auto": on CUDA)."""
    return train_cfg.precision == "bf16" or (train_cfg.precision == "auto" and on_cuda)


def train_memory(model_cfg: ModelConfig, train_cfg: TrainConfig, on_cuda: bool, world: int = 1,
                 store=None) -> TrainMemory:
    """The peak bytes of one of ``world`` processes of a training run (module docstring)."""
    bf16 = trains_bf16(train_cfg, on_cuda)
    total, emb = _param_bytes(model_cfg)
    sign_sgd = emb > 0 and train_cfg.puzzle_emb_optimizer == "sign_sgd"  # optim._split_puzzle_emb
    main = total - emb if sign_sgd else total
    measured_emb = emb // max(model_cfg.n_puzzles, 1) if emb else 0
    return TrainMemory(weights=total, optimizer=2 * main, ema=main if train_cfg.ema > 0 else 0,
                       extra_grads=emb - measured_emb, carry_per_sample=carry_bytes(model_cfg),
                       step=_cached("train", model_cfg, bf16, store), batch=train_cfg.batch_size // world,
                       buckets=(total - emb if sign_sgd else total) if world > 1 else 0)


def eval_memory(model_cfg: ModelConfig, bf16: bool, store=None) -> EvalMemory:
    """The peak bytes of an evaluation of this model (weights and one outer update of a batch)."""
    return EvalMemory(weights=_param_bytes(model_cfg)[0], update=_cached("eval", model_cfg, bf16, store))


def measured_training_peak(model_cfg: ModelConfig, train_cfg: TrainConfig, data, device: str = "cpu",
                           steps: int = 2) -> int:
    """The peak bytes the trainer itself allocates in its first ``steps`` steps (weights, optimiser state, EMA,
    carried states, the steps): the allocator's events on the CPU (:func:`allocated_peak`), the CUDA caching
    allocator's peak on a GPU. What the model above is checked against (tests/test_memory.py,
    benchmarks/memory_model.py)."""
    import tempfile
    from pathlib import Path

    from .trainer import _Trainer

    def run():
        with tempfile.TemporaryDirectory() as d:
            t = _Trainer(model_cfg, train_cfg, data, Path(d), device)
            for _ in range(steps):
                t.refill()
                q_halt, _ = t.step()
                t.halt(q_halt)

    if torch.device(device).type != "cuda":
        return allocated_peak(run)
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    run()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before
