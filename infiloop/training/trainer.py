"""One training run between optimiser steps (:class:`_Trainer`) and the loop that drives it (:func:`train`); the
module docstring of ``infiloop/training/__init__.py`` describes the protocol."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from .. import numeric
from ..io import atomic_write, atomic_write_text, save_weights
from ..machine import progress_bar
from ..model.connections import choose_kernels
from ..model.reasoner import Carry, LoopedReasoner, ModelConfig
from ..optim import WeightEMA, lr_at, make_optimizer, make_puzzle_emb_optimizer
from ..tasks.base import IGNORE_LABEL_ID, TaskData
from ..tasks.scoring import count_wrong
from . import ddp, interrupt
from .batching import (
    PuzzleStream,
    cat_carry,
    check_ranks_agree,
    gather,
    gather_carry,
    rank_and_world,
    rng_state,
    set_rng_state,
    slice_carry,
    view_carry,
)
from .config import TrainConfig
from .losses import connection_stats, softmax_cross_entropy, stablemax_cross_entropy
from .records import (
    CHECKPOINT,
    CHECKPOINT_PREV,
    DONE,
    METRICS,
    TENSORBOARD,
    WEIGHTS,
    Progress,
    first_line,
    last_metrics,
    read_checkpoint,
    tensorboard_writer,
    truncate_metrics,
)
from .selection import BestOnValidation
from .step_faults import caused_by_oom, is_compile_error, out_of_memory

tqdm = progress_bar()


def _wide(t: Tensor) -> Tensor:
    """``t`` in float32 for the loss and the metrics, or in float64 where the model runs in float64 (tests)."""
    return t if t.dtype == torch.float64 else t.float()


class _Trainer:
    """The state of one training run between optimiser steps, with the steps of :func:`train` as methods:
    set-up and resume (``__init__``), refilling halted slots (``refill``), one optimiser step (``step``),
    halting (``halt``), logging (``log``), checkpointing (``checkpoint``) and finishing (``finish``).

    Slot bookkeeping (which puzzle each batch slot holds, its segment, whether it halted) is global and
    identical on every process; the carried states are local to this process's slice of the batch.
    """

    def __init__(self, model_cfg: ModelConfig, train_cfg: TrainConfig, data: TaskData, run_dir: Path,
                 device: str, selection: BestOnValidation | None = None):
        train_cfg.validate()
        model_cfg.validate()
        run_dir.mkdir(parents=True, exist_ok=True)
        self.cfg, self.run_dir, self.selection = train_cfg, run_dir, selection
        self.rank, self.world = rank_and_world()
        if train_cfg.batch_size % self.world:
            raise ValueError(f"train.batch_size={train_cfg.batch_size} must be divisible by the number of "
                             f"processes ({self.world})")
        self.device = torch.device(device)
        numeric.check(train_cfg.numeric, self.device.type)  # refused in a process of another numeric mode
        threads = (numeric.training_threads(train_cfg.numeric, train_cfg.threads) if self.device.type == "cpu"
                   else train_cfg.threads)
        if threads:
            torch.set_num_threads(threads)
        self.B, b = train_cfg.batch_size, train_cfg.batch_size // self.world
        self.mine = slice(self.rank * b, (self.rank + 1) * b)
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
        self.progressive_rng = torch.Generator().manual_seed(train_cfg.seed + 29)  # train.progressive's (n, k)
        self.progressive: tuple[int, int] | None = None  # this step's (n, k); None without the progressive loss
        # the training set stays in its stored integer type on the host (uint8 tokens: an eighth of int64, in every
        # process); each batch is widened on its device
        self.inputs_all, self.labels_all, self.pids_all = (torch.from_numpy(np.ascontiguousarray(a))
                                                           for a in (data.inputs, data.labels, data.puzzle_ids))
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

        # DDP without the unused parameters and the puzzle embedding (its touched rows reduced alone, ddp.py)
        self.net: nn.Module = ddp.wrap(model, self.opt_emb) if self.world > 1 else model
        self.eager_net = self.net  # what training falls back to when the compiled module fails
        self.compiled = train_cfg.compile == "on" or (train_cfg.compile == "auto" and on_cuda)
        self.compile_seconds: float | None = None  # the first compiled step, compilation included
        self.compile_error: str | None = None
        self.oom_halvings = 0  # micro-batches halved after running out of memory (_gradients)
        if self.compiled:
            numeric.inductor_native_width()
            self.net = torch.compile(self.net)
        self.tensorboard = tensorboard_writer(run_dir, self.step_) if self.rank == 0 else None
        self.t_start = time.time() - self.elapsed_before  # elapsed_s and train_seconds count every session

    def _resume(self) -> None:
        """Continue from the last readable checkpoint, exactly (every random state included), if there is one."""
        ck = read_checkpoint(self.run_dir)
        if ck is None:
            if self.rank == 0:
                truncate_metrics(self.run_dir / METRICS, 0)
            return
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["optimizer"])
        if self.ema is not None:
            self.ema.shadow = {k: v.to(self.device) for k, v in ck["ema"].items()}
            self.ema.updates = int(ck["ema_updates"])
        self.stream.load_state_dict(ck["stream"])
        self.explore.set_state(ck["explore_rng"])
        if "progressive_rng" in ck:  # written by every run since train.progressive exists
            self.progressive_rng.set_state(ck["progressive_rng"])
        torch.set_rng_state(ck["torch_rng"])
        self.slot_idx, self.slot_seg, self.halted = ck["slot_idx"], ck["slot_seg"], ck["halted"]
        self.carry = {a: {k: v.to(self.device) for k, v in st.items()}
                      for a, st in slice_carry(ck["carry"], self.mine).items()}
        self.step_ = int(ck["step"])
        if self.rank == 0:  # in every job's log: a requeued or restarted job resumes, it does not start again
            print(f"# resuming {self.run_dir.name} from its checkpoint at step {self.step_} of {self.cfg.steps}",
                  file=sys.stderr, flush=True)
        self.window = list(ck["window"])
        truncate_metrics(self.run_dir / METRICS, self.step_)
        # checkpoints written before elapsed_s was kept: the last log line at or before the checkpoint
        self.elapsed_before = float(ck.get("elapsed_s", last_metrics(self.run_dir / METRICS).get("elapsed_s", 0.0)))

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
        inputs, labels = self.inputs_all[idx].to(dev).long(), self.labels_all[idx].to(dev).long()
        pids = self.pids_all[idx].to(dev).long()
        for g in self.opt.param_groups:
            g["lr"] = lr_at(self.step_, cfg)
        if self.opt_emb is not None:  # the same schedule from its own peak (TRM); it keeps no state to checkpoint
            for g in self.opt_emb.param_groups:
                g["lr"] = lr_at(self.step_, cfg) / cfg.lr * (cfg.puzzle_emb_lr or cfg.lr)
        logs = (self.step_ + 1) % cfg.log_every == 0 or self.step_ + 1 == cfg.steps
        self.progressive = self._progressive_draw() if cfg.progressive > 0 else None
        self.carry, q_halt, m, diag = self._gradients(inputs, labels, pids, logs)
        ddp.reduce_rows(self.opt_emb, self.pids_all[self.slot_idx].long(), self.world)  # the global batch's rows
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        if self.opt_emb is not None:
            self.opt_emb.step(self.pids_all[self.slot_idx].long())  # the global batch's puzzles, on every process
        if self.ema is not None:
            self.ema.update(self.model)
        self.step_ += 1
        if logs:
            self.conn_stats = connection_stats(self.model, diag, labels)
        return q_halt, m

    def _progressive_draw(self) -> tuple[int, int]:
        """The progressive loss's (n, k) for this step, the same on every process: n ~ U{0..H-1} updates without
        gradients, then k ~ U{1..H-n} with them (Bansal et al. 2022's draw, with H outer updates in place of their
        maximum iterations; aks2203/deep-thinking, ``get_output_for_prog_loss``)."""
        h = self.model.cfg.H
        n = int(torch.randint(0, h, (1,), generator=self.progressive_rng))
        return n, int(torch.randint(1, h - n + 1, (1,), generator=self.progressive_rng))

    def _gradients(self, inputs: Tensor, labels: Tensor, pids: Tensor, keep_diag: bool
                   ) -> tuple[Carry, Tensor, Tensor, dict[str, Tensor]]:
        """The step's forward and backward (:meth:`_accumulate`), nothing applied yet: a compiled module that
        fails to compile is dropped for the eager one with one warning line, and the step is redone from the
        same state (the random state too); out of device memory halves the micro-batch and redoes the step (twice at
        most, one line each; one process only: the processes of a DDP training would wait for each other), then is
        one line naming the setting to change."""
        first = self.compiled and self.compile_seconds is None
        while True:
            state = rng_state(self.device)
            t0 = time.perf_counter()
            try:
                out = self._accumulate(inputs, labels, pids, keep_diag)
                break
            except Exception as e:
                retry = self._recover(e)
            # Out of the except block: the failed attempt's exception, its traceback and so the frames that hold its
            # activations and partial gradients are gone before the retry (inside it, empty_cache frees nothing).
            self.opt.zero_grad(set_to_none=True)
            gc.collect()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            print(retry, file=sys.stderr, flush=True)
            set_rng_state(state, self.device)
        if first and self.compiled:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.compile_seconds = round(time.perf_counter() - t0, 2)
        return out

    def _recover(self, e: Exception) -> str:
        """What to do after the step failed with ``e``: the warning line of a retry (the micro-batch halved after
        running out of memory; eager mode after a compile failure), or raise (the one-line error when no smaller
        micro-batch is left, or ``e`` itself)."""
        if caused_by_oom(e):
            per = self.B // self.world
            now = min(self.cfg.micro_batch or per, per)
            if self.world > 1 or now == 1 or self.oom_halvings == 2:
                raise out_of_memory(self.run_dir.name, self.B, self.world, now, self.device) from e
            self.oom_halvings += 1
            self.cfg.micro_batch = now // 2
            return (f"warning: {self.run_dir.name}: out of memory at micro-batch {now} (step {self.step_ + 1}): "
                    f"going on at train.micro_batch={now // 2} (the same update, in smaller pieces)")
        if self.compiled and is_compile_error(e):
            self.compiled, self.net, self.compile_error = False, self.eager_net, first_line(e)
            return f"warning: torch.compile failed ({self.compile_error}); training {self.run_dir.name} in eager mode"
        raise e

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
            carry = self.carry if size == b else view_carry(self.carry, sl)
            with ddp.sync(self.eager_net, self.world, last=sl.stop == b):  # one all-reduce, compiled or not
                parts.append(self._chunk(carry, inputs[sl], labels[sl], pids[sl], (sl.stop - sl.start) / b,
                                         keep_diag))
        carries, q_halts, sums, diags = zip(*parts)
        s = torch.stack(sums).sum(0) if len(sums) > 1 else sums[0]
        # loss, lm loss, q loss, cell accuracy, exact accuracy (the whole batch's, whatever the chunks)
        m = torch.stack([s[0], s[1], s[2], s[3] / s[4].clamp_min(1), s[5] / b])
        if len(parts) == 1:
            return carries[0], q_halts[0], m, diags[0]
        diag = {k: torch.cat([d[k] for d in diags]) for k in diags[0]} if keep_diag else {}
        return cat_carry(list(carries)), torch.cat(q_halts), m, diag

    def _chunk(self, carry: Carry, inputs: Tensor, labels: Tensor, pids: Tensor, share: float, keep_diag: bool
               ) -> tuple[Carry, Tensor, Tensor, dict[str, Tensor]]:
        """Forward and backward of one chunk of slots with its loss weighted by ``share`` (its share of the
        samples): the stable-max cross-entropy of the answer (and of the outer candidate, ``candidate_loss``)
        plus ``halt_loss_weight`` x the halting head's binary cross-entropy. Returns the chunk's new carry,
        halting logits, sums [loss, lm loss, q loss (each weighted), right cells, cells, right answers] and
        diagnostics (empty unless ``keep_diag``)."""
        cfg = self.cfg
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            carry, logits, q_halt, diag = (self.net(carry, inputs, pids) if self.progressive is None
                                           else self.net(carry, inputs, pids, progressive=self.progressive))
            cand_logits = self.model.logits(diag["candidate_outer"]) if cfg.candidate_loss > 0 else None
        cross_entropy = stablemax_cross_entropy if cfg.loss == "stablemax" else softmax_cross_entropy
        mask = labels != IGNORE_LABEL_ID
        n_cells = mask.sum(-1).clamp_min(1)
        lm_loss = (_wide(cross_entropy(logits, labels)).sum(-1) / n_cells).mean()
        if cand_logits is not None:
            cand_loss = (_wide(cross_entropy(cand_logits, labels)).sum(-1) / n_cells).mean()
            lm_loss = (1 - cfg.candidate_loss) * lm_loss + cfg.candidate_loss * cand_loss
        if self.progressive is not None:
            prog_loss = (_wide(cross_entropy(diag.pop("progressive_logits"), labels)).sum(-1) / n_cells).mean()
            lm_loss = (1 - cfg.progressive) * lm_loss + cfg.progressive * prog_loss
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
        all_halt = (gather(local_halt.to(self.device, torch.uint8), self.world).cpu().bool() if self.world > 1
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
            print(f"warning: {self.run_dir / TENSORBOARD}: could not write TensorBoard events ({first_line(e)}); "
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
        full_carry = {a: {k: v.cpu() for k, v in st.items()} for a, st in gather_carry(self.carry, self.world).items()}
        fingerprint = check_ranks_agree(self.model, self.world, self.step_)
        if self.rank != 0:
            return
        if self.world > 1:
            print(f"# step {self.step_}: the {self.world} processes hold the same weights ({fingerprint})",
                  file=sys.stderr, flush=True)
        ema = self.ema
        if self.selection is not None:  # the checkpoint chosen on validation (selection.py)
            self.selection.check(self.step_, ema.weights(self.model) if ema is not None else self.model.state_dict())
        ck = {
            "step": self.step_, "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
            "ema": ema.shadow if ema is not None else {}, "ema_updates": ema.updates if ema else 0,
            "stream": self.stream.state_dict(), "explore_rng": self.explore.get_state(),
            "progressive_rng": self.progressive_rng.get_state(),
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
                   **mode, "final": last_metrics(self.run_dir / METRICS)}
        if self.rank == 0:
            save_weights(self.run_dir / WEIGHTS, weights)
            atomic_write_text(self.run_dir / DONE, json.dumps(summary, indent=1))
        return summary


def train(model_cfg: ModelConfig, train_cfg: TrainConfig, data: TaskData, run_dir: str | os.PathLike,
          device: str = "cpu", max_steps: int | None = None, progress: bool = True,
          return_model: bool = False, progress_every_s: float = 30.0, time_limit_s: float | None = None,
          valid: TaskData | None = None, valid_why: str = "") -> dict | tuple[dict, LoopedReasoner]:
    """Train (or resume) a model in ``run_dir``; returns the final summary (also written to DONE.json),
    and with ``return_model`` the trained model too (this process's live weights, not the EMA).

    ``max_steps`` stops early after that many optimiser steps in total, ``time_limit_s`` after the first step
    that ends past that many seconds of this session (the pilot); either way the run stays resumable.
    ``progress`` shows a progress bar; every ``progress_every_s`` seconds a progress line goes to stderr
    in any case (:data:`PROGRESS_LINE`), for the logs of jobs. ``valid`` (the validation split; or ``valid_why``, why
    there is none): at every checkpoint the weights are scored on it and the best kept (:mod:`.selection`).
    """
    selection = None
    if valid is not None or valid_why:
        selection = BestOnValidation(Path(run_dir), model_cfg, valid, model_cfg.H * train_cfg.max_segments,
                                     train_cfg.batch_size, device, "ema" if train_cfg.ema > 0 else "last", valid_why)
    t = _Trainer(model_cfg, train_cfg, data, Path(run_dir), device, selection)
    end = train_cfg.steps if max_steps is None else min(train_cfg.steps, max_steps)
    bar = tqdm(total=train_cfg.steps, initial=t.step_, disable=not progress or t.rank != 0, desc=t.run_dir.name,
               dynamic_ncols=True)
    write = None if bar.disable else (lambda line: tqdm.write(line, file=sys.stderr))  # above the bar
    lines = Progress(t.run_dir.name, t.step_, end, progress_every_s, write=write) if t.rank == 0 else None
    t.net.train()
    session_start = time.time()
    stopped = 0  # a signal that asked the training to stop (interrupt.py)
    try:
        with interrupt.steps():
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
                stopped = interrupt.asked(t.world, t.device)
                if stopped:
                    break
    finally:
        bar.close()
        t.close()
    summary = t.finish()
    if stopped and not summary["complete"]:
        if t.rank == 0:
            name = signal.Signals(stopped).name
            print(f"# stopping {t.run_dir.name} at step {t.step_} of {train_cfg.steps} ({name}): its checkpoint is "
                  "written, it resumes from there", file=sys.stderr, flush=True)
        raise interrupt.Stopped(t.run_dir.name, t.step_, stopped)
    return (summary, t.model) if return_model else summary
