"""Training with deep supervision and adaptive halting, as in TRM (the paper's training protocol).

One optimiser step runs one supervision segment (H outer updates, gradients through the last) for
every slot of the global batch. A slot holds one puzzle and its carried state; it halts when its
halting logit q_halt > 0 (with exploration: with probability ``halt_exploration`` a random minimum of
2..``max_segments`` segments) or after ``max_segments`` segments, and then takes the next puzzle of the
data stream. Loss: stable-max cross-entropy over the answer cells + ``halt_loss_weight`` x binary
cross-entropy of q_halt against "the whole answer is right".

Runs resume exactly: a checkpoint holds the model, the optimiser, the EMA, the data position, the
slots with their carried states and every random state. With ``torchrun`` (several processes, DDP)
the global batch is fixed and each process takes an equal slice of the slots.

On a GPU: ``train.micro_batch`` accumulates the gradient of a process's slots over chunks (the same update,
in less memory; running out of memory is one ``error:`` line naming the setting), a ``torch.compile`` that
fails falls back to eager mode with one warning line (DONE.json says which mode trained), long jobs print a
progress line every 30 s (:data:`PROGRESS_LINE`), and with the optional ``tensorboard`` package the logged
records go to TensorBoard event files beside metrics.jsonl too.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from .analysis.trajectories import CONNECTION_KEYS, rank_correlation
from .config import from_dict
from .errors import UsageError
from .io import atomic_write, atomic_write_text, save_weights
from .model.connections import InfiLoop, choose_kernels
from .model.kernels import raw_score
from .model.reasoner import Carry, LoopedReasoner, ModelConfig
from .optim import WeightEMA, lr_at, make_optimizer, make_puzzle_emb_optimizer
from .tasks.base import IGNORE_LABEL_ID, DataError, TaskData
from .tasks.scoring import count_wrong

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_PREV = "checkpoint.prev.pt"  # the one before: resume falls back to it when the last is damaged
WEIGHTS = "model.safetensors"
DONE = "DONE.json"
METRICS = "metrics.jsonl"
TENSORBOARD = "tensorboard"  # TensorBoard's event files of metrics.jsonl's records, where tensorboard is installed
OPTIMIZERS = ("adamw", "adam_atan2")
DECAY_GROUPS = ("all", "matrices", "no_connections")
PUZZLE_EMB_OPTIMIZERS = ("sign_sgd", "main")
SCHEDULES = ("constant", "cosine")


@dataclass
class TrainConfig:
    """Training hyper-parameters (the paper's protocol gives its values; see the `paper` profile)."""

    steps: int = 2000  # optimiser steps; each runs one supervision segment for the whole global batch
    batch_size: int = 768  # global batch, whatever the number of processes
    lr: float = 1e-4
    warmup_steps: int = 2000
    schedule: str = "constant"  # after warm-up: "constant" (TRM) or "cosine" (to lr_min_ratio * lr)
    lr_min_ratio: float = 0.1
    weight_decay: float = 1.0
    betas: tuple[float, float] = (0.9, 0.95)
    optimizer: str = "adamw"
    # Which parameters weight decay acts on: "all" (TRM decays every parameter), "matrices" (not the
    # 1-D parameters and not the loop connections' q and rho, a common choice the paper does not state) or
    # "no_connections" (every parameter but the loop connections' q, rho and queries).
    decay: str = "all"
    # Weight w of the loss on the outer candidate z_t: the lm loss is (1 - w) CE(head(h_t)) + w CE(head(z_t)).
    # 0: only the answer state h_t is supervised (TRM; the paper states no loss on the candidate). 0.5, this
    # project's choice for every model (docs/connection-study.md): the block is trained on what it proposes, the
    # connection on what it keeps. Carry-last's loss is the same number whatever w (its candidate is its state).
    candidate_loss: float = 0.5
    # The puzzle embedding: "sign_sgd" (TRM: its own sign-SGD on the rows of the batch's puzzles, at
    # puzzle_emb_lr with puzzle_emb_weight_decay; None = lr / weight_decay) or "main" (the main optimiser).
    puzzle_emb_optimizer: str = "sign_sgd"
    puzzle_emb_lr: float | None = None
    puzzle_emb_weight_decay: float | None = None
    grad_clip: float = 0.0  # 0: no clipping
    ema: float = 0.999  # rate of the weight EMA used for evaluation and checkpoints; 0 disables it
    ema_warmup: bool = False  # rate min(ema, (1 + n) / (10 + n)) after n updates; TRM: a fixed rate (False)
    max_segments: int = 16
    halt_exploration: float = 0.1
    halt_loss_weight: float = 0.5
    loss: str = "stablemax"  # or "softmax"
    checkpoint_every: int = 500
    log_every: int = 25
    seed: int = 0
    precision: str = "auto"  # "fp32", "bf16" (autocast) or "auto" (bf16 on CUDA, fp32 elsewhere)
    compile: str = "auto"  # "on", "off" or "auto" (on for CUDA)
    threads: int = 0  # torch CPU threads; 0 leaves torch's default
    # Gradient accumulation: 0 runs each process's slots at once; n > 0 runs them in chunks of at most n slots, one
    # forward and backward after the other, each chunk's loss weighted by its share of the samples: the update of
    # the whole batch (up to rounding) in the memory of n slots. What to set when a step runs out of memory.
    micro_batch: int = 0

    def validate(self) -> None:
        def bad(f, msg):
            raise ValueError(f"train.{f}: {msg}")

        for f in ("steps", "batch_size", "max_segments", "checkpoint_every", "log_every"):
            if getattr(self, f) < 1:
                bad(f, f"must be a positive integer, got {getattr(self, f)}")
        for f in ("warmup_steps", "threads", "micro_batch"):
            if getattr(self, f) < 0:
                bad(f, f"must be 0 or a positive integer, got {getattr(self, f)}")
        for f in ("weight_decay", "grad_clip", "halt_loss_weight", "puzzle_emb_weight_decay"):
            if getattr(self, f) is not None and getattr(self, f) < 0:
                bad(f, f"must be 0 or positive, got {getattr(self, f)}")
        if not 0 <= self.lr_min_ratio <= 1:
            bad("lr_min_ratio", f"must be in [0, 1], got {self.lr_min_ratio}")
        if len(self.betas) != 2 or not all(0 <= x < 1 for x in self.betas):
            bad("betas", f"must be two numbers in [0, 1), got {list(self.betas)}")
        if self.lr <= 0:
            bad("lr", f"must be positive, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", f"unknown optimizer {self.optimizer!r}; valid choices: {', '.join(OPTIMIZERS)}")
        if self.decay not in DECAY_GROUPS:
            bad("decay", f"unknown choice {self.decay!r}; valid choices: {', '.join(DECAY_GROUPS)}")
        if self.puzzle_emb_optimizer not in PUZZLE_EMB_OPTIMIZERS:
            bad("puzzle_emb_optimizer", f"unknown choice {self.puzzle_emb_optimizer!r}; valid choices: "
                f"{', '.join(PUZZLE_EMB_OPTIMIZERS)}")
        if self.puzzle_emb_lr is not None and self.puzzle_emb_lr <= 0:
            bad("puzzle_emb_lr", f"must be positive (or null: the main lr), got {self.puzzle_emb_lr}")
        if self.schedule not in SCHEDULES:
            bad("schedule", f"unknown schedule {self.schedule!r}; valid choices: {', '.join(SCHEDULES)}")
        if self.loss not in ("stablemax", "softmax"):
            bad("loss", f"unknown loss {self.loss!r}; valid choices: stablemax, softmax")
        if not 0 <= self.ema < 1:
            bad("ema", f"must be in [0, 1), got {self.ema}")
        if not 0 <= self.candidate_loss <= 1:
            bad("candidate_loss", f"must be in [0, 1], got {self.candidate_loss}")
        if not 0 <= self.halt_exploration <= 1:
            bad("halt_exploration", f"must be in [0, 1], got {self.halt_exploration}")
        if self.precision not in ("auto", "fp32", "bf16"):
            bad("precision", f"valid choices: auto, fp32, bf16; got {self.precision!r}")
        if self.compile not in ("auto", "on", "off"):
            bad("compile", f"valid choices: auto, on, off; got {self.compile!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        return from_dict(cls, d, "train")


# ------------------------------------------------------------------------------------------ losses


def stablemax_cross_entropy(logits: Tensor, labels: Tensor, ignore_index: int = IGNORE_LABEL_ID) -> Tensor:
    """TRM's stable-max cross-entropy: p_i = s(x_i) / sum_j s(x_j), s(x) = x + 1 (x >= 0), 1 / (1 - x)
    (x < 0). Per position, 0 where the label is ignored. Computed in float64 as TRM does.

    The negative branch reads min(x, 0): ``torch.where`` back-propagates through both branches, and
    1 / (1 - x) at a logit of exactly 1 would send 0 * inf = NaN into the gradient."""
    x = logits.double()
    s = torch.where(x >= 0, x + 1, 1 / (1 - x.clamp(max=0)))
    logp = torch.log(s / s.sum(-1, keepdim=True))
    valid = labels != ignore_index
    picked = torch.gather(logp, -1, torch.where(valid, labels, 0).unsqueeze(-1)).squeeze(-1)
    return torch.where(valid, -picked, 0).to(logits.dtype)


def softmax_cross_entropy(logits: Tensor, labels: Tensor, ignore_index: int = IGNORE_LABEL_ID) -> Tensor:
    return F.cross_entropy(logits.float().transpose(1, -1), labels.long(), ignore_index=ignore_index,
                           reduction="none")


# ------------------------------------------------------------------------------------------ data stream


class PuzzleStream:
    """Shuffled epochs over the training rows; the position (epoch, offset) is the whole state."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed, self.epoch, self.pos = n, seed, 0, 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.n, generator=g)

    def take(self, k: int) -> Tensor:
        out = []
        while k > 0:
            chunk = self._perm[self.pos:self.pos + k]
            out.append(chunk)
            self.pos += len(chunk)
            k -= len(chunk)
            if self.pos == self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation(self.epoch)
        return torch.cat(out) if out else torch.empty(0, dtype=torch.long)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, st: dict) -> None:
        self.epoch, self.pos = int(st["epoch"]), int(st["pos"])
        self._perm = self._permutation(self.epoch)


# ------------------------------------------------------------------------------------------ helpers


def _dist() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _gather(t: Tensor, world: int) -> Tensor:
    """Concatenate a per-process tensor along its first (sample) axis, in rank order."""
    if world == 1:
        return t
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


def _gather_carry(carry: Carry, world: int) -> Carry:
    return {a: {k: _gather(v, world) for k, v in st.items()} for a, st in carry.items()}


def _slice_carry(carry: Carry, sl: slice) -> Carry:
    return {a: {k: v[sl].clone() for k, v in st.items()} for a, st in carry.items()}


# ------------------------------------------------------------------------------------------ the connection


CONNECTION_STATS = CONNECTION_KEYS  # what connection_stats logs per axis (analysis.connection_dynamics reads it)


@torch.no_grad()
def connection_stats(model: LoopedReasoner, diag: dict[str, Tensor], labels: Tensor) -> dict[str, float]:
    """What the InfiLoop connection of each axis has learned, from one training step's last outer update:
    ``<axis>_q_norm`` (|q|), ``<axis>_beta``, the raw (unclipped) content score q^T RMSNorm(z_t) of the
    step's candidates over the grid cells (``score_mean``; ``score_sd_cells``: its spread across the cells of
    a board, averaged over boards; ``score_sd_boards``: the spread of the board means), ``at_clip``: the share
    of raw scores at or above the clip, and ``gamma``: the mean step size. For the outer axis also
    ``outer_score_wrong_corr``: the rank correlation across boards between the board-mean raw score of the
    outer candidate and its wrong cells (negative when the score tells right from wrong). Axes whose
    connection is not InfiLoop report nothing."""
    out: dict[str, float] = {}
    prefix = model.cfg.prefix
    for axis, conn in (("inner", model.conn_inner), ("outer", model.conn_outer)):
        cand = diag.get(f"candidate_{axis}")
        if not isinstance(conn, InfiLoop) or cand is None:
            continue
        raw = raw_score(cand[:, prefix:].float(), conn.q.float(), conn.cfg.eps)  # [B, cells]
        clip = conn.cfg.score_clip
        board = raw.mean(-1)
        out.update({
            f"{axis}_q_norm": float(conn.q.norm()), f"{axis}_beta": conn.beta,
            f"{axis}_score_mean": float(raw.mean()), f"{axis}_score_sd_cells": float(raw.std(-1).mean()),
            f"{axis}_score_sd_boards": float(board.std()) if len(board) > 1 else 0.0,
            f"{axis}_at_clip": float((raw >= clip).float().mean()) if clip is not None else 0.0,
            f"{axis}_gamma": float(diag[f"gamma_{axis}"][:, prefix:].float().mean()),
        })
        if axis == "outer":
            wrong = count_wrong(model.logits(cand).argmax(-1), labels)
            corr = rank_correlation(board.cpu().numpy(), wrong.float().cpu().numpy())
            out["outer_score_wrong_corr"] = None if np.isnan(corr) else float(corr)
    return out


# ------------------------------------------------------------------------------------------ training


def _wide(t: Tensor) -> Tensor:
    """``t`` in float32 for the loss and the metrics, or in float64 where the model runs in float64 (tests)."""
    return t if t.dtype == torch.float64 else t.float()


def _is_compile_error(e: BaseException) -> bool:
    """Whether ``e`` is a failure of ``torch.compile`` (Dynamo's tracing, AOTAutograd, Inductor's code
    generation or the backend compiler: Triton, a C++ compiler) rather than of the computation it runs."""
    from torch._dynamo.exc import TorchDynamoException

    module = type(e).__module__ or ""
    return isinstance(e, TorchDynamoException) or module.startswith(("torch._inductor", "torch._dynamo", "triton"))


def _caused_by_oom(e: BaseException) -> bool:
    """Whether ``e`` is, or wraps (a compiler error raised while autotuning, say), an out-of-memory error."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, torch.OutOfMemoryError):
            return True
        seen.add(id(e))
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return False


def _first_line(e: BaseException) -> str:
    """``Type: first line`` of an exception (two lines where the first only introduces the second, as Dynamo's
    ``backend='inductor' raised:``)."""
    text = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not text:
        return type(e).__name__
    head = " ".join(text[:2]) if text[0].endswith(":") else text[0]
    return f"{type(e).__name__}: {head}"


def _rng_state(device: torch.device) -> tuple:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def _set_rng_state(state: tuple, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def _cat_carry(parts: list[Carry]) -> Carry:
    return {a: {k: torch.cat([p[a][k] for p in parts]) for k in st} for a, st in parts[0].items()}


def _view_carry(carry: Carry, sl: slice) -> Carry:
    return {a: {k: v[sl] for k, v in st.items()} for a, st in carry.items()}


class _Trainer:
    """The state of one training run between optimiser steps, with the steps of :func:`train` as methods:
    set-up and resume (``__init__``), refilling halted slots (``refill``), one optimiser step (``step``),
    halting (``halt``), logging (``log``), checkpointing (``checkpoint``) and finishing (``finish``).

    Slot bookkeeping (which puzzle each batch slot holds, its segment, whether it halted) is global and
    identical on every process; the carried states are local to this process's slice of the batch.
    """

    def __init__(self, model_cfg: ModelConfig, train_cfg: TrainConfig, data: TaskData, run_dir: Path,
                 device: str):
        train_cfg.validate()
        model_cfg.validate()
        run_dir.mkdir(parents=True, exist_ok=True)
        self.cfg, self.run_dir = train_cfg, run_dir
        self.rank, self.world = _dist()
        if train_cfg.batch_size % self.world:
            raise ValueError(f"train.batch_size={train_cfg.batch_size} must be divisible by the number of "
                             f"processes ({self.world})")
        if train_cfg.threads:
            torch.set_num_threads(train_cfg.threads)
        self.B, b = train_cfg.batch_size, train_cfg.batch_size // self.world
        self.mine = slice(self.rank * b, (self.rank + 1) * b)
        self.device = torch.device(device)
        on_cuda = self.device.type == "cuda"
        self.autocast = train_cfg.precision == "bf16" or (train_cfg.precision == "auto" and on_cuda)

        torch.manual_seed(train_cfg.seed)
        self.model = model = LoopedReasoner(model_cfg).to(self.device)
        self.kernels = choose_kernels(model, self.device)  # once, before torch.compile sees the model
        self.opt = make_optimizer(model, train_cfg)
        self.opt_emb = make_puzzle_emb_optimizer(model, train_cfg)
        self.ema = (WeightEMA(model, train_cfg.ema, train_cfg.ema_warmup,
                              exclude=("puzzle_emb.",) if self.opt_emb is not None else ())
                    if train_cfg.ema > 0 else None)
        self.stream = PuzzleStream(len(data), train_cfg.seed)
        self.explore = torch.Generator().manual_seed(train_cfg.seed + 17)
        self.inputs_all = torch.from_numpy(data.inputs.astype(np.int64))
        self.labels_all = torch.from_numpy(data.labels.astype(np.int64))
        self.pids_all = torch.from_numpy(data.puzzle_ids.astype(np.int64))
        self.slot_idx = torch.zeros(self.B, dtype=torch.long)
        self.slot_seg = torch.zeros(self.B, dtype=torch.long)
        self.halted = torch.ones(self.B, dtype=torch.bool)
        self.carry = model.initial_carry(b, self.device)
        self.step_ = 0
        self.window: list[dict] = []  # metrics since the last log line
        self.last: dict[str, float] = {}  # the metrics of the last step (progress lines)
        self.conn_stats: dict[str, float] = {}  # the loop connections at the last log step (connection_stats)
        self.elapsed_before = 0.0  # training seconds of the sessions before a resume, up to their last checkpoint
        self._resume()

        self.net: nn.Module = model
        if self.world > 1:
            self.net = nn.parallel.DistributedDataParallel(model)
        self.eager_net = self.net  # what training falls back to when the compiled module fails
        self.compiled = train_cfg.compile == "on" or (train_cfg.compile == "auto" and on_cuda)
        self.compile_seconds: float | None = None  # the first compiled step, compilation included
        self.compile_error: str | None = None
        if self.compiled:
            self.net = torch.compile(self.net)
        self.tensorboard = _tensorboard(run_dir, self.step_) if self.rank == 0 else None
        self.t_start = time.time() - self.elapsed_before  # elapsed_s and train_seconds count every session

    def _resume(self) -> None:
        """Continue from the last readable checkpoint, exactly (every random state included), if there is one."""
        ck = read_checkpoint(self.run_dir)
        if ck is None:
            if self.rank == 0:
                _truncate_metrics(self.run_dir / METRICS, 0)
            return
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["optimizer"])
        if self.ema is not None:
            self.ema.shadow = {k: v.to(self.device) for k, v in ck["ema"].items()}
            self.ema.updates = int(ck["ema_updates"])
        self.stream.load_state_dict(ck["stream"])
        self.explore.set_state(ck["explore_rng"])
        torch.set_rng_state(ck["torch_rng"])
        self.slot_idx, self.slot_seg, self.halted = ck["slot_idx"], ck["slot_seg"], ck["halted"]
        self.carry = {a: {k: v.to(self.device) for k, v in st.items()}
                      for a, st in _slice_carry(ck["carry"], self.mine).items()}
        self.step_ = int(ck["step"])
        if self.rank == 0:  # in every job's log: a requeued or restarted job resumes, it does not start again
            print(f"# resuming {self.run_dir.name} from its checkpoint at step {self.step_} of {self.cfg.steps}",
                  file=sys.stderr, flush=True)
        self.window = list(ck["window"])
        _truncate_metrics(self.run_dir / METRICS, self.step_)
        # checkpoints written before elapsed_s was kept: the last log line at or before the checkpoint
        self.elapsed_before = float(ck.get("elapsed_s", _last_metrics(self.run_dir / METRICS).get("elapsed_s", 0.0)))

    def refill(self) -> None:
        """Halted slots take the next puzzles of the stream (the same decision on every process)."""
        n_new = int(self.halted.sum())
        if n_new:
            self.slot_idx[self.halted] = self.stream.take(n_new)
            self.slot_seg[self.halted] = 0
            self.carry = self.model.reset_carry(self.carry, self.halted[self.mine].to(self.device))

    def step(self) -> tuple[Tensor, Tensor]:
        """One supervision segment of every slot and one optimiser step (the paper's protocol): the loss is the
        stable-max cross-entropy of the answer plus the halting head's binary cross-entropy against exact
        correctness. Returns the halting logits and the step's metrics (loss, lm loss, q loss, cell and
        exact accuracy)."""
        cfg, dev = self.cfg, self.device
        idx = self.slot_idx[self.mine]
        inputs, labels = self.inputs_all[idx].to(dev), self.labels_all[idx].to(dev)
        pids = self.pids_all[idx].to(dev)
        for g in self.opt.param_groups:
            g["lr"] = lr_at(self.step_, cfg)
        if self.opt_emb is not None:  # the same schedule from its own peak (TRM); it keeps no state to checkpoint
            for g in self.opt_emb.param_groups:
                g["lr"] = lr_at(self.step_, cfg) / cfg.lr * (cfg.puzzle_emb_lr or cfg.lr)
        logs = (self.step_ + 1) % cfg.log_every == 0 or self.step_ + 1 == cfg.steps
        self.carry, q_halt, m, diag = self._gradients(inputs, labels, pids, logs)
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        if self.opt_emb is not None:
            self.opt_emb.step(self.pids_all[self.slot_idx])  # the global batch's puzzles: the same rows everywhere
        if self.ema is not None:
            self.ema.update(self.model)
        self.step_ += 1
        if logs:
            self.conn_stats = connection_stats(self.model, diag, labels)
        return q_halt, m

    def _gradients(self, inputs: Tensor, labels: Tensor, pids: Tensor, keep_diag: bool
                   ) -> tuple[Carry, Tensor, Tensor, dict[str, Tensor]]:
        """The step's forward and backward (:meth:`_accumulate`), nothing applied yet: a compiled module that
        fails to compile is dropped for the eager one with one warning line, and the step is redone from the
        same state (the random state too); out of device memory is one line naming the setting to change."""
        state = _rng_state(self.device) if self.compiled else None
        first = self.compiled and self.compile_seconds is None
        t0 = time.perf_counter()
        try:
            out = self._accumulate(inputs, labels, pids, keep_diag)
        except Exception as e:
            if _caused_by_oom(e):
                raise self._out_of_memory() from e
            if not (self.compiled and _is_compile_error(e)):
                raise
            self.compiled, self.net, self.compile_error = False, self.eager_net, _first_line(e)
            print(f"warning: torch.compile failed ({self.compile_error}); training "
                  f"{self.run_dir.name} in eager mode", file=sys.stderr, flush=True)
            _set_rng_state(state, self.device)
            return self._gradients(inputs, labels, pids, keep_diag)
        if first:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.compile_seconds = round(time.perf_counter() - t0, 2)
        return out

    def _out_of_memory(self) -> UsageError:
        """The one-line error of a step that ran out of device memory: the batch and the setting to change."""
        per = self.B // self.world
        now = min(self.cfg.micro_batch or per, per)
        cuda = self.device.type == "cuda"
        where = torch.cuda.get_device_name(self.device) if cuda else str(self.device)
        fix = (f"set train.micro_batch={now // 2} (or lower) to accumulate the same batch in smaller pieces" if now > 1
               else "one slot at a time does not fit either: use a smaller model or a device with more memory")
        return UsageError(f"{self.run_dir.name}: {'CUDA' if cuda else self.device.type} out of memory at "
                          f"train.batch_size={self.B} (per process {per}, micro-batch {now}) on {where}: {fix}")

    def _accumulate(self, inputs: Tensor, labels: Tensor, pids: Tensor, keep_diag: bool
                    ) -> tuple[Carry, Tensor, Tensor, dict[str, Tensor]]:
        """The gradient of the step's loss over this process's slots, in chunks of at most ``train.micro_batch``
        slots (gradient accumulation; 0: all at once). The loss is a mean over samples, so each chunk's is
        weighted by its share of the samples: the accumulated gradient is the whole batch's. Each chunk takes
        and returns its slice of the carry. Returns the new carry (not yet applied), the halting logits, the
        step's metrics and, with ``keep_diag``, the diagnostics of the last outer update of every slot."""
        b = len(inputs)
        size = min(self.cfg.micro_batch or b, b)
        self.opt.zero_grad(set_to_none=True)
        if self.opt_emb is not None:
            self.opt_emb.zero_grad(set_to_none=True)
        parts = []
        for start in range(0, b, size):
            sl = slice(start, min(start + size, b))
            carry = self.carry if size == b else _view_carry(self.carry, sl)
            # DDP: one all-reduce per step, with the last chunk (a compiled DDP module reduces every chunk: the
            # same sum of gradients)
            sync = (self.eager_net.no_sync() if self.world > 1 and not self.compiled and sl.stop < b
                    else nullcontext())
            with sync:
                parts.append(self._chunk(carry, inputs[sl], labels[sl], pids[sl], (sl.stop - sl.start) / b,
                                         keep_diag))
        carries, q_halts, sums, diags = zip(*parts)
        s = torch.stack(sums).sum(0) if len(sums) > 1 else sums[0]
        # loss, lm loss, q loss, cell accuracy, exact accuracy (the whole batch's, whatever the chunks)
        m = torch.stack([s[0], s[1], s[2], s[3] / s[4].clamp_min(1), s[5] / b])
        if len(parts) == 1:
            return carries[0], q_halts[0], m, diags[0]
        diag = {k: torch.cat([d[k] for d in diags]) for k in diags[0]} if keep_diag else {}
        return _cat_carry(list(carries)), torch.cat(q_halts), m, diag

    def _chunk(self, carry: Carry, inputs: Tensor, labels: Tensor, pids: Tensor, share: float, keep_diag: bool
               ) -> tuple[Carry, Tensor, Tensor, dict[str, Tensor]]:
        """Forward and backward of one chunk of slots with its loss weighted by ``share`` (its share of the
        samples): the stable-max cross-entropy of the answer (and of the outer candidate, ``candidate_loss``)
        plus ``halt_loss_weight`` x the halting head's binary cross-entropy. Returns the chunk's new carry,
        halting logits, sums [loss, lm loss, q loss (each weighted), right cells, cells, right answers] and
        diagnostics (empty unless ``keep_diag``)."""
        cfg = self.cfg
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            carry, logits, q_halt, diag = self.net(carry, inputs, pids)
            cand_logits = self.model.logits(diag["candidate_outer"]) if cfg.candidate_loss > 0 else None
        cross_entropy = stablemax_cross_entropy if cfg.loss == "stablemax" else softmax_cross_entropy
        mask = labels != IGNORE_LABEL_ID
        n_cells = mask.sum(-1).clamp_min(1)
        lm_loss = (_wide(cross_entropy(logits, labels)).sum(-1) / n_cells).mean()
        if cand_logits is not None:
            cand_loss = (_wide(cross_entropy(cand_logits, labels)).sum(-1) / n_cells).mean()
            lm_loss = (1 - cfg.candidate_loss) * lm_loss + cfg.candidate_loss * cand_loss
        with torch.no_grad():
            pred = logits.argmax(-1)
            cell_ok = (pred == labels) & mask
            seq_ok = count_wrong(pred, labels) == 0
        q_loss = F.binary_cross_entropy_with_logits(_wide(q_halt), seq_ok.to(lm_loss.dtype))
        loss = lm_loss + cfg.halt_loss_weight * q_loss
        if share != 1:
            loss, lm_loss, q_loss = loss * share, lm_loss * share, q_loss * share
        loss.backward()
        with torch.no_grad():
            sums = torch.stack([_wide(loss.detach()), lm_loss.detach(), _wide(q_loss.detach()),
                                cell_ok.sum().to(lm_loss.dtype), mask.sum().to(lm_loss.dtype),
                                seq_ok.sum().to(lm_loss.dtype)])
        kept = {k: v.detach() for k, v in diag.items()} if keep_diag else {}
        return carry, q_halt.detach(), sums, kept

    @torch.no_grad()
    def halt(self, q_halt: Tensor) -> None:
        """Halting (TRM's rule): a slot halts when q_halt > 0 after its exploration minimum of segments,
        or at the last segment. With one segment (``max_segments=1``) every slot halts after it and no
        exploration minimum is drawn."""
        cfg = self.cfg
        self.slot_seg += 1
        local_halt = (q_halt.detach() > 0).cpu()
        all_halt = (_gather(local_halt.to(self.device, torch.uint8), self.world).cpu().bool() if self.world > 1
                    else local_halt)
        explore_min = 0
        if cfg.max_segments > 1:  # the same draws as ever, so that runs resume the same
            explore_min = torch.where(torch.rand(self.B, generator=self.explore) < cfg.halt_exploration,
                                      torch.randint(2, cfg.max_segments + 1, (self.B,), generator=self.explore), 0)
        self.halted = (self.slot_seg >= cfg.max_segments) | (all_halt & (self.slot_seg >= explore_min))

    @torch.no_grad()
    def record(self, m: Tensor) -> dict | None:
        """Add the step's metrics (averaged over processes) to the window; every ``log_every`` steps, append
        their mean to metrics.jsonl (and to TensorBoard's event files where it is installed) and return it.
        A non-finite loss stops the run."""
        if self.world > 1:  # reduced where the tensors live (NCCL needs CUDA tensors), then read on the CPU
            dist.all_reduce(m)
            m /= self.world
        m = m.cpu()
        if not torch.isfinite(m[0]):  # a diverged model must not become a finished run (nor a figure)
            raise FloatingPointError(f"{self.run_dir}: training diverged at step {self.step_}: the loss is "
                                     f"{m[0].item()}; lower train.lr or change the settings")
        self.last = dict(zip(("loss", "lm_loss", "q_loss", "cell_acc", "exact_acc"), m.tolist()))
        self.window.append(self.last)
        if self.step_ % self.cfg.log_every and self.step_ != self.cfg.steps:
            return None
        rec = {k: float(np.mean([w[k] for w in self.window])) for k in self.window[0]}
        rec.update(step=self.step_, lr=lr_at(self.step_ - 1, self.cfg), segments=float(self.slot_seg.float().mean()),
                   elapsed_s=round(time.time() - self.t_start, 2))
        rec.update(self.conn_stats)
        self.window = []
        if self.rank == 0:
            with open(self.run_dir / METRICS, "a") as f:
                f.write(json.dumps(rec) + "\n")
            self._to_tensorboard(rec)
        return rec

    def _to_tensorboard(self, rec: dict) -> None:
        """The record's numbers as TensorBoard scalars ``train/<key>`` at its step; a failure to write them is
        one warning line and no more TensorBoard for this run, never a failed run."""
        if self.tensorboard is None:
            return
        try:
            for k, v in rec.items():
                if k != "step" and v is not None:
                    self.tensorboard.add_scalar(f"train/{k}", v, rec["step"])
            self.tensorboard.flush()
        except Exception as e:  # noqa: BLE001 - an optional log must not stop training
            print(f"warning: {self.run_dir / TENSORBOARD}: could not write TensorBoard events ({_first_line(e)}); "
                  f"metrics.jsonl goes on", file=sys.stderr, flush=True)
            self.close()

    def close(self) -> None:
        """Close TensorBoard's event file (if any)."""
        if self.tensorboard is not None:
            writer, self.tensorboard = self.tensorboard, None
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - an optional log must not stop training
                pass

    def checkpoint(self) -> None:
        """Everything an exact resume needs, written atomically; the previous checkpoint is kept until the new
        one is complete. Gathered on the device (NCCL needs CUDA tensors), then moved to the CPU."""
        full_carry = {a: {k: v.cpu() for k, v in st.items()} for a, st in _gather_carry(self.carry, self.world).items()}
        if self.rank != 0:
            return
        ema = self.ema
        ck = {
            "step": self.step_, "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
            "ema": ema.shadow if ema is not None else {}, "ema_updates": ema.updates if ema else 0,
            "stream": self.stream.state_dict(), "explore_rng": self.explore.get_state(),
            "torch_rng": torch.get_rng_state(), "slot_idx": self.slot_idx, "slot_seg": self.slot_seg,
            "halted": self.halted, "carry": full_carry,
            "window": self.window,  # metrics since the last log line, so that a resumed run logs the same
            "elapsed_s": time.time() - self.t_start,
        }
        path = self.run_dir / CHECKPOINT
        if path.is_file():
            os.replace(path, self.run_dir / CHECKPOINT_PREV)
        atomic_write(path, lambda tmp: torch.save(ck, tmp))

    def finish(self) -> dict:
        """The last checkpoint; for a complete run also the EMA weights (safetensors) and DONE.json. The
        summary says how this session trained: ``compiled`` (whether the steps ran through ``torch.compile``),
        ``compile_seconds`` (the first compiled step, compilation included), ``compile_error`` (why
        training fell back to eager mode, or null) and ``kernels`` (the step each InfiLoop connection took:
        ``kernels.RESOLVED``)."""
        self.checkpoint()
        self.close()
        mode = {"compiled": self.compiled, "compile_seconds": self.compile_seconds,
                "compile_error": self.compile_error, "kernels": self.kernels}
        if self.step_ < self.cfg.steps:  # stopped early on purpose: keep it resumable
            return {"step": self.step_, "complete": False, **mode}
        weights = self.ema.weights(self.model) if self.ema is not None else self.model.state_dict()
        summary = {"step": self.step_, "complete": True, "train_seconds": round(time.time() - self.t_start, 2),
                   **mode, "final": _last_metrics(self.run_dir / METRICS)}
        if self.rank == 0:
            save_weights(self.run_dir / WEIGHTS, weights)
            atomic_write_text(self.run_dir / DONE, json.dumps(summary, indent=1))
        return summary


def _tensorboard(run_dir: Path, step: int):
    """A TensorBoard ``SummaryWriter`` on ``<run_dir>/tensorboard``, or None where the optional ``tensorboard``
    package is missing. A run resumed from its checkpoint at ``step`` hides the events after it, as its
    metrics.jsonl drops the lines after it (the resumed session writes them again)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # the optional extra is not installed: metrics.jsonl is the log
        return None
    try:
        return SummaryWriter(str(run_dir / TENSORBOARD), purge_step=step + 1 if step else None)
    except Exception as e:  # noqa: BLE001 - an optional log must not stop training
        print(f"warning: {run_dir / TENSORBOARD}: no TensorBoard events ({_first_line(e)}); metrics.jsonl is the log",
              file=sys.stderr, flush=True)
        return None


# One progress line of a training job (stderr, rank 0): the run folder's name, the step reached and the step this
# job stops at, the mean loss, cell and exact accuracy of the steps since the previous line, their seconds per
# step, and the minutes left to the job's last step at that pace (rounded up). The scheduler sums the minutes.
PROGRESS_LINE = "# progress {run}: step {step}/{end} loss {loss:.3f} cell {cell:.3f} exact {exact:.3f} " \
                "{s_per_step:.3g} s/step, {min_left} min left"
_NUM = r"[0-9.]+(?:e[+-]?[0-9]+)?|nan|inf"
PROGRESS_RE = re.compile(rf"# progress (?P<run>\S+): step (?P<step>\d+)/(?P<end>\d+) loss (?P<loss>{_NUM}) "
                         rf"cell (?P<cell>{_NUM}) exact (?P<exact>{_NUM}) (?P<s_per_step>{_NUM}) s/step, "
                         rf"(?P<min_left>\d+) min left")


class _Progress:
    """Progress lines for long jobs, whatever the progress bar: every ``every_s`` seconds (0: every step) one
    :data:`PROGRESS_LINE` on stderr, over the steps since the previous line."""

    def __init__(self, run: str, step: int, end: int, every_s: float, clock=time.monotonic, write=None):
        self.run, self.end, self.every_s, self.clock = run, end, every_s, clock
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.t, self.step, self.seen = clock(), step, []

    def add(self, step: int, metrics: dict) -> None:
        self.seen.append(metrics)
        now = self.clock()
        if now - self.t < self.every_s or step <= self.step:
            return
        s_per_step = (now - self.t) / (step - self.step)
        mean = {k: float(np.mean([m[k] for m in self.seen])) for k in ("loss", "cell_acc", "exact_acc")}
        self.write(PROGRESS_LINE.format(run=self.run, step=step, end=self.end, loss=mean["loss"],
                                        cell=mean["cell_acc"], exact=mean["exact_acc"], s_per_step=s_per_step,
                                        min_left=math.ceil(s_per_step * (self.end - step) / 60)))
        self.t, self.step, self.seen = now, step, []


def train(model_cfg: ModelConfig, train_cfg: TrainConfig, data: TaskData, run_dir: str | os.PathLike,
          device: str = "cpu", max_steps: int | None = None, progress: bool = True,
          return_model: bool = False, progress_every_s: float = 30.0, time_limit_s: float | None = None
          ) -> dict | tuple[dict, LoopedReasoner]:
    """Train (or resume) a model in ``run_dir``; returns the final summary (also written to DONE.json),
    and with ``return_model`` the trained model too (this process's live weights, not the EMA).

    ``max_steps`` stops early after that many optimiser steps in total, ``time_limit_s`` after the first step
    that ends past that many seconds of this session (the pilot); either way the run stays resumable.
    ``progress`` shows a progress bar; every ``progress_every_s`` seconds a progress line goes to stderr
    in any case (:data:`PROGRESS_LINE`), for the logs of jobs.
    """
    t = _Trainer(model_cfg, train_cfg, data, Path(run_dir), device)
    end = train_cfg.steps if max_steps is None else min(train_cfg.steps, max_steps)
    bar = tqdm(total=train_cfg.steps, initial=t.step_, disable=not progress or t.rank != 0, desc=t.run_dir.name,
               dynamic_ncols=True)
    write = None if bar.disable else (lambda line: tqdm.write(line, file=sys.stderr))  # above the bar
    lines = _Progress(t.run_dir.name, t.step_, end, progress_every_s, write=write) if t.rank == 0 else None
    t.net.train()
    session_start = time.time()
    try:
        while t.step_ < end and (time_limit_s is None or time.time() - session_start < time_limit_s):
            t.refill()
            q_halt, metrics = t.step()
            t.halt(q_halt)
            rec = t.record(metrics)
            if rec is not None:
                bar.set_postfix(loss=f"{rec['loss']:.3f}", cell=f"{rec['cell_acc']:.3f}",
                                exact=f"{rec['exact_acc']:.3f}")
            bar.update(1)
            if lines is not None:
                lines.add(t.step_, t.last)
            if t.step_ % train_cfg.checkpoint_every == 0 and t.step_ < train_cfg.steps:
                t.checkpoint()
    finally:
        bar.close()
        t.close()
    summary = t.finish()
    return (summary, t.model) if return_model else summary


def read_checkpoint(run_dir: Path) -> dict | None:
    """The last readable checkpoint of ``run_dir``, or ``None`` for a run that has none.

    A damaged ``checkpoint.pt`` is set aside as ``checkpoint.damaged.pt`` and the previous checkpoint is
    used (a resumed run ends the same either way); when no checkpoint can be read, the error says how to
    start the run over."""
    damaged = []
    for path in (run_dir / CHECKPOINT, run_dir / CHECKPOINT_PREV):
        if not path.is_file():
            continue
        try:
            ck = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(ck, dict) or not {"step", "model"} <= set(ck):
                raise ValueError("not a training checkpoint")
            if any(v.is_floating_point() and not bool(torch.isfinite(v).all()) for v in ck["model"].values()
                   if isinstance(v, torch.Tensor)):
                raise ValueError("its weights hold NaN or Inf")
        except Exception as e:  # noqa: BLE001 - any failure to read it means a damaged file
            damaged.append((path, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__))
            continue
        if damaged:
            try:
                os.replace(damaged[0][0], run_dir / "checkpoint.damaged.pt")
            except FileNotFoundError:  # another process of the same run (DDP) set it aside first
                pass
            print(f"warning: {damaged[0][0]}: damaged checkpoint ({damaged[0][1]}), set aside as "
                  f"checkpoint.damaged.pt; resuming from {path.name} (step {int(ck['step'])})",
                  file=sys.stderr, flush=True)
        return ck
    if damaged:
        files = " ".join(str(p) for p, _ in damaged)
        raise DataError(f"{damaged[0][0]}: damaged checkpoint ({damaged[0][1]}) and no readable previous one; "
                        f"to start this run over, delete {files} and run the same command again")
    return None


def read_metrics(path: Path, strict: bool = True) -> list[dict]:
    """The training log ``metrics.jsonl``: one JSON object per line with an integer ``step`` and numbers (or null).

    ``strict``: any other line is a :class:`DataError` naming the file and the line. Otherwise such lines are
    dropped: what a write cut short by a kill or a full disk leaves, which a resumed run rewrites."""
    if not path.is_file():
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        lines = path.read_bytes().decode("utf-8", "replace").splitlines()  # the bad lines fail below
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            ok = (isinstance(rec, dict) and type(rec.get("step")) is int
                  and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in rec.values()))
        except ValueError:
            ok = False
        if ok:
            out.append(rec)
        elif strict:
            raise DataError(f"{path}:{n}: not a training-log record (expected a JSON object of numbers with an "
                            f"integer step); delete the run folder and train again")
    return out


def _truncate_metrics(path: Path, step: int) -> None:
    """Keep only the metric lines up to ``step`` (a resumed run rewrites what came after)."""
    if path.is_file():
        keep = [rec for rec in read_metrics(path, strict=False) if rec["step"] <= step]
        atomic_write_text(path, "".join(json.dumps(rec) + "\n" for rec in keep))


def _last_metrics(path: Path) -> dict:
    records = read_metrics(path, strict=False)
    return records[-1] if records else {}
