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

The step is counted, not guessed, and nothing trains: one segment's forward and backward runs on fake tensors
(torch's ``FakeTensorMode``: shapes, dtypes and storages without data or arithmetic), at the precision the run uses
(bf16 autocast where it trains on CUDA), at micro-batches of 1 and 2, and every storage an operation creates is counted
until it is freed (:func:`counted_peak`): the peak above what was allocated before it. The outer updates without
gradients save nothing and free their transients, so the counted model runs only the updates with gradients
(``H = grad_outer``); the puzzle embedding is counted with one row and its other rows' gradients are added. The
step's peak is then ``fixed + per_sample x micro_batch``, a straight line through the two counts. An evaluation (no
gradients) is counted the same way: one outer update from a fresh carry, at 1 and 2 puzzles. The count sees the
tensors, not a kernel's private workspace; against the CPU allocator's events of the same step
(:func:`allocated_peak`, tests/test_memory.py) it is within a few per cent for a training step.

What the count does not see (docs/gpu.md): the CUDA caching allocator's rounding and fragmentation, CUDA
kernels' workspaces, and how Inductor's compiled step differs from the eager one (it usually saves less, recomputing
cheap operations in the backward pass). :data:`HEADROOM` keeps that share of the device free.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import weakref
from dataclasses import asdict, dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..machine import usable_cpus
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


PROBE_BATCH = 10_007  # a prime that divides no weight's size: a storage whose bytes it divides is per sample


class _StorageCount(TorchDispatchMode):
    """The storages the operations under it create, each counted from the operation that made it until it is freed:
    ``peak[0]`` their peak as run. Run at a micro-batch of ``batch`` (a prime, :data:`PROBE_BATCH`), each storage is
    also split into what is per sample (bytes the prime divides: a multiple of the batch) and what is not, so that
    ``peak[1]`` and ``peak[2]`` are the peaks of the same operations at micro-batches 1 and 2: one pass for both."""

    def __init__(self, batch: int = 0):
        super().__init__()
        self.batch = batch
        self.live: dict[int, tuple[int, int, int]] = {}
        self.now, self.peak = [0, 0, 0], [0, 0, 0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and id(st := t.untyped_storage()) not in self.live:  # a view: counted
                n = st.nbytes()
                per = n // self.batch if self.batch and n % self.batch == 0 else 0
                sizes = (n, n - per * (self.batch - 1), n - per * (self.batch - 2))
                self.live[id(st)] = sizes
                for i, size in enumerate(sizes):
                    self.now[i] += size
                    self.peak[i] = max(self.peak[i], self.now[i])
                weakref.finalize(st, self._free, id(st))
        return out

    def _free(self, key: int) -> None:
        for i, size in enumerate(self.live.pop(key)):
            self.now[i] -= size


def counted_peak(fn) -> int:
    """Bytes the storages that ``fn()``'s operations create take at their peak, each from the operation that made
    it until it is freed. With fake tensors (``FakeTensorMode``) nothing is allocated or computed: the shapes say."""
    count = _StorageCount()
    with count:
        fn()
    return count.peak[0]


def counted_line(prepare) -> StepCost:
    """The peak of a step as ``fixed + per_sample x m`` at micro-batch ``m``: ``prepare(b)`` makes its inputs at
    micro-batch ``b`` and returns the step, counted once at :data:`PROBE_BATCH` (:class:`_StorageCount`: its peaks
    at 1 and 2, the straight line through them). Equal to counting ``prepare(1)`` and ``prepare(2)`` apart
    (tests/test_memory.py), in half the time."""
    step = prepare(PROBE_BATCH)
    count = _StorageCount(PROBE_BATCH)
    with count:
        step()
    one, two = count.peak[1], count.peak[2]
    return StepCost(fixed=2 * one - two, per_sample=two - one)


def _fake_model(model_cfg: ModelConfig, mode: FakeTensorMode, grad_only: bool) -> LoopedReasoner:
    """The model the step is counted on, its weights fake tensors of ``mode`` (made on the meta device, never
    initialised): one puzzle-embedding row; only the updates with gradients (training)."""
    cfg = model_cfg.replace(n_puzzles=min(model_cfg.n_puzzles, 1))
    if grad_only:
        cfg = cfg.replace(H=cfg.grad_outer)
    with torch.device("meta"):
        model = LoopedReasoner(cfg)
    choose_kernels(model, "cpu")  # the eager step, as the trainer chooses it on the CPU
    cpu = torch.device("cpu")
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, t in table.items():
                if t is not None:
                    fake = mode.fake_tensor_converter.from_meta_and_device(mode, t, cpu)
                    table[name] = torch.nn.Parameter(fake, t.requires_grad) if table is module._parameters else fake
    return model


def train_step(model_cfg: ModelConfig, bf16: bool):
    """One training segment's forward and backward on fake tensors (the loss as training computes it: cross-entropy
    of the answer and the halting head's), as :func:`counted_line` takes it: micro-batch -> the step."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # a constant tensor of the model's code is taken as it is
    model = _fake_model(model_cfg, mode, grad_only=True).train()

    def prepare(b: int):
        with mode:
            model.zero_grad(set_to_none=True)
            inputs, pids = torch.zeros(b, model.cfg.seq_len, dtype=torch.long), torch.zeros(b, dtype=torch.long)
            carry = model.initial_carry(b)

        def step():
            with mode:
                with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
                    _, logits, q_halt, _ = model(carry, inputs, pids)
                loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), inputs.flatten())
                (loss + q_halt.float().mean()).backward()

        return step

    return prepare


def eval_update(model_cfg: ModelConfig, bf16: bool):
    """One outer update of an evaluation from a fresh carry, without gradients, on fake tensors (as
    :func:`train_step`)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model = _fake_model(model_cfg, mode, grad_only=False).eval()

    def prepare(b: int):
        with mode:
            inputs, pids = torch.zeros(b, model.cfg.seq_len, dtype=torch.long), torch.zeros(b, dtype=torch.long)

        def update():
            with mode, torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
                next(model.iterate(inputs, 1, pids))

        return update

    return prepare


def train_step_cost(model_cfg: ModelConfig, bf16: bool) -> StepCost:
    """The peak of a training step (:func:`train_step`) at each micro-batch."""
    return counted_line(train_step(model_cfg, bf16))


def eval_update_cost(model_cfg: ModelConfig, bf16: bool) -> StepCost:
    """The peak of an evaluation's outer update (:func:`eval_update`) at each batch."""
    return counted_line(eval_update(model_cfg, bf16))


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


COUNTS = {"train": train_step_cost, "eval": eval_update_cost}
_CACHE: dict[str, StepCost] = {}


def _key(kind: str, model_cfg: ModelConfig, bf16: bool) -> str:
    cfg = model_cfg.to_dict()
    cfg.pop("n_puzzles", None)
    return json.dumps({"kind": kind, "bf16": bf16, "model": cfg, "by": "fake-tensor count"}, sort_keys=True,
                      default=str)  # not a measurement an older plan kept under the same configuration


_CHILD = """import json, sys
from infiloop.model.reasoner import ModelConfig
from infiloop.training import memory
costs = [memory.asdict(memory.COUNTS[k](ModelConfig.from_dict(c), b)) for k, c, b in json.load(sys.stdin)]
print(json.dumps(costs))"""


def count_all(requests: list[tuple[str, ModelConfig, bool]], store=None) -> None:
    """Count at once the steps of ``requests`` (kind, model, bf16) that neither this process nor ``store`` holds:
    every other one in a second process where this one may use two CPUs (a count runs Python, on one CPU), so that
    a plan of many configurations prints in seconds. A second process that fails leaves its share to this one."""
    todo = {}
    for kind, cfg, bf16 in requests:
        key = _key(kind, cfg, bf16)
        if key not in _CACHE and not (store is not None and key in store):
            todo.setdefault(key, (kind, cfg, bf16))
    items = list(todo.items())
    there = items[1::2] if len(items) >= 4 and usable_cpus() >= 2 else []
    child = None
    if there:
        payload, errors = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        json.dump([[k, c.to_dict(), b] for _, (k, c, b) in there], payload, default=list)
        payload.seek(0)
        child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=payload, stdout=subprocess.PIPE,
                                 stderr=errors, text=True)
    for key, (kind, cfg, bf16) in items[::2] if there else items:
        _CACHE[key] = COUNTS[kind](cfg, bf16)
    if child is not None:
        out, _ = child.communicate()
        if child.returncode == 0:
            for (key, _), cost in zip(there, json.loads(out.strip().splitlines()[-1])):
                _CACHE[key] = StepCost(**cost)
        else:
            errors.seek(0)
            print(f"warning: the second counting process failed ({(errors.read().strip().splitlines() or ['?'])[-1]});"
                  " counting its share here", file=sys.stderr)
            for key, (kind, cfg, bf16) in there:
                _CACHE[key] = COUNTS[kind](cfg, bf16)
        payload.close()
        errors.close()


def _cached(kind: str, model_cfg: ModelConfig, bf16: bool, store=None) -> StepCost:
    """The step's count, once per configuration (the puzzle embedding's size aside) and precision, kept in
    ``store`` (a dict-like that persists, e.g. plan's cache file) when given."""
    key = _key(kind, model_cfg, bf16)
    if key not in _CACHE:
        _CACHE[key] = StepCost(**store[key]) if store is not None and key in store else COUNTS[kind](model_cfg, bf16)
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
