"""The training settings (:class:`TrainConfig`) and the choices they allow; the paper's protocol gives the values
(the `paper` profile)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .. import numeric as numeric_mode
from ..config import from_dict, hash_rule

OPTIMIZERS = ("adamw", "adam_atan2")


DECAY_GROUPS = ("all", "matrices", "no_connections")


PUZZLE_EMB_OPTIMIZERS = ("sign_sgd", "main")


SCHEDULES = ("constant", "cosine")


@dataclass
class TrainConfig:
    """Training hyper-parameters (the paper's protocol gives its values; see the `paper` profile). Every field enters a
    run's hash as it is unless its ``hash_rule`` says otherwise (``config.hash_rule``): a new setting is added with
    ``neutral=`` the value that reproduces the cached runs, or every cached run's hash moves."""

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
    # connection on what it keeps. Carry-last's loss is the same number whatever w (its candidate is its state), so a
    # run's hash leaves w out for carry-last, and at 0 (added after runs were cached: those runs had no candidate loss).
    candidate_loss: float = field(default=0.5, metadata=hash_rule(neutral=0.0, idle_with_outer=("carry_last",)))
    # The puzzle embedding: "sign_sgd" (TRM: its own sign-SGD on the rows of the batch's puzzles, at
    # puzzle_emb_lr with puzzle_emb_weight_decay; None = lr / weight_decay) or "main" (the main optimiser).
    puzzle_emb_optimizer: str = "sign_sgd"
    puzzle_emb_lr: float | None = None
    puzzle_emb_weight_decay: float | None = None
    grad_clip: float = 0.0  # 0: no clipping
    ema: float = 0.999  # rate of the weight EMA used for evaluation and checkpoints; 0 disables it
    ema_warmup: bool = False  # rate min(ema, (1 + n) / (10 + n)) after n updates; TRM: a fixed rate (False)
    max_segments: int = 16
    # Weight alpha of the literature's progressive loss (Bansal et al. 2022; docs/model.md, "Recall and size"):
    # the lm loss is (1 - alpha) x the segment's + alpha x the loss of a readout after n updates without and k
    # with gradients from the segment's starting state, n ~ U{0..H-1}, k ~ U{1..H-n}. 0: off (TRM), and out of a run's
    # hash (added after runs were cached).
    progressive: float = field(default=0.0, metadata=hash_rule(neutral=0.0))
    halt_exploration: float = 0.1
    halt_loss_weight: float = 0.5
    loss: str = "stablemax"  # or "softmax"
    checkpoint_every: int = 500
    log_every: int = 25
    seed: int = 0
    precision: str = "auto"  # "fp32", "bf16" (autocast) or "auto" (bf16 on CUDA, fp32 elsewhere)
    # "on", "off" or "auto" (on for CUDA). Compiled = eager (tests/test_compile.py), so a run's hash has it at "auto"
    # whatever its value: --no-compile trains the same run, and the runs cached before keep their folders.
    compile: str = field(default="auto", metadata=hash_rule(at_default=True))
    threads: int = field(default=0, metadata=hash_rule(hashed=False))  # torch CPU threads; 0: torch's default
    # Gradient accumulation: 0 runs each process's slots at once; n > 0 runs them in chunks of at most n slots, one
    # forward and backward after the other, each chunk's loss weighted by its share of the samples: the update of
    # the whole batch (up to rounding) in the memory of n slots. What to set when a step runs out of memory. Not in a
    # run's hash: a run restarted with a smaller micro-batch after an OOM stays the run.
    micro_batch: int = field(default=0, metadata=hash_rule(hashed=False))
    # The CPU numeric mode the run trains in (infiloop/numeric.py): "reproducible" (the same bytes on every x86-64 CPU
    # with AVX2, one thread) or "native" (the libraries' own kernels and threads). The process's mode
    # (INFILOOP_NUMERIC) by default, so a cached run trained in another mode is another run; "native" is out of the
    # hash: the runs cached before the mode existed were trained so.
    numeric: str = field(default_factory=lambda: numeric_mode.current().name, metadata=hash_rule(neutral="native"))

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
        if not 0 <= self.progressive <= 1:
            bad("progressive", f"must be in [0, 1], got {self.progressive}")
        if not 0 <= self.candidate_loss <= 1:
            bad("candidate_loss", f"must be in [0, 1], got {self.candidate_loss}")
        if not 0 <= self.halt_exploration <= 1:
            bad("halt_exploration", f"must be in [0, 1], got {self.halt_exploration}")
        if self.precision not in ("auto", "fp32", "bf16"):
            bad("precision", f"valid choices: auto, fp32, bf16; got {self.precision!r}")
        if self.numeric not in numeric_mode.MODES:
            bad("numeric", f"unknown numeric mode {self.numeric!r}; valid choices: {', '.join(numeric_mode.MODES)}")
        if self.compile not in ("auto", "on", "off"):
            bad("compile", f"valid choices: auto, on, off; got {self.compile!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        return from_dict(cls, d, "train")
