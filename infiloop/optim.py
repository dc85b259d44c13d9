"""The optimisers of training: AdamATan2 (TRM's main optimiser), sign-SGD for the puzzle embeddings, the
weight-decay groups, the learning-rate schedule and the EMA of the weights.

Each takes the training settings (``training.TrainConfig``, read through :class:`OptimSettings`) as its ``cfg``.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import Tensor, nn


class OptimSettings(Protocol):
    """The training settings the optimisers read (``training.TrainConfig`` has them: this module stands below it)."""

    lr: float
    betas: tuple[float, float]
    weight_decay: float
    decay: str
    optimizer: str
    puzzle_emb_optimizer: str
    puzzle_emb_lr: float | None
    puzzle_emb_weight_decay: float | None
    schedule: str
    warmup_steps: int
    steps: int
    lr_min_ratio: float


class AdamATan2(torch.optim.Optimizer):
    """Adam with atan2 in place of the division by sqrt(v) + eps (Everett et al., 2024) and decoupled
    weight decay: the optimiser of TRM's public recipe, as the fused kernel of the ``adam-atan2`` package
    computes it, written in plain PyTorch (that package builds only with CUDA). With bias corrections
    c1 = 1 - beta1^t and c2 = 1 - beta2^t:

        m <- lerp(m, g, 1 - beta1),   v <- lerp(v, g^2, 1 - beta2)
        p <- p (1 - lr wd) - (lr / c1) atan2(m, sqrt(v) / sqrt(c2))

    (no extra scale: the factor 1.27 of some re-implementations is not in the package).
    """

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = torch.zeros((), dtype=torch.float32)
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                st["step"] += 1
                t = float(st["step"])
                c1, c2 = 1 - b1**t, 1 - b2**t
                p.mul_(1 - lr * wd)
                st["m"].lerp_(p.grad, 1 - b1)
                st["v"].lerp_(p.grad * p.grad, 1 - b2)
                p.add_(torch.atan2(st["m"], st["v"].sqrt() / math.sqrt(c2)), alpha=-lr / c1)


class SignSGD(torch.optim.Optimizer):
    """TRM's optimiser of the puzzle embeddings: only the rows of this step's puzzles change,
    ``p_r <- p_r (1 - lr wd) - lr sign(g_r)``. ``step(rows)`` takes the ids of the global batch."""

    def __init__(self, params, lr=1e-2, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, rows: Tensor):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                r = rows.unique().to(p.device)
                p[r] = p[r] * (1 - group["lr"] * group["weight_decay"]) - group["lr"] * p.grad[r].sign()


def _split_puzzle_emb(model: nn.Module, cfg: OptimSettings) -> tuple[list, list]:
    """(named parameters of the main optimiser, parameters of the puzzle-embedding sign-SGD)."""
    main, emb = [], []
    for name, p in model.named_parameters():
        is_emb = name.split(".")[-2:-1] == ["puzzle_emb"]
        (emb if is_emb and cfg.puzzle_emb_optimizer == "sign_sgd" else main).append((name, p))
    return main, [p for _, p in emb]


def make_optimizer(model: nn.Module, cfg: OptimSettings) -> torch.optim.Optimizer:
    """The main optimiser. Weight decay on every parameter (``decay="all"``, TRM), only on matrices
    (``"matrices"``: not on 1-D parameters and not on the loop connections' q and rho) or on every
    parameter but the loop connections' (``"no_connections"``)."""
    main, _ = _split_puzzle_emb(model, cfg)
    decay, no_decay = [], []
    for name, p in main:
        connection = name.startswith(("conn_", "module.conn_", "_orig_mod.conn_"))
        exempt = (cfg.decay == "matrices" and (p.ndim < 2 or connection)) or (cfg.decay == "no_connections"
                                                                               and connection)
        (no_decay if exempt else decay).append(p)
    groups = [g for g in ({"params": decay, "weight_decay": cfg.weight_decay},
                          {"params": no_decay, "weight_decay": 0.0}) if g["params"]]
    if cfg.optimizer == "adam_atan2":
        return AdamATan2(groups, lr=cfg.lr, betas=cfg.betas)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def make_puzzle_emb_optimizer(model: nn.Module, cfg: OptimSettings) -> SignSGD | None:
    """TRM's sign-SGD for the puzzle embedding, or None (no embedding, or trained by the main optimiser)."""
    _, emb = _split_puzzle_emb(model, cfg)
    if not emb:
        return None
    wd = cfg.weight_decay if cfg.puzzle_emb_weight_decay is None else cfg.puzzle_emb_weight_decay
    return SignSGD(emb, lr=cfg.puzzle_emb_lr or cfg.lr, weight_decay=wd)


def lr_at(step: int, cfg: OptimSettings) -> float:
    """Linear warm-up to ``lr``, then constant (TRM) or cosine to ``lr_min_ratio * lr``."""
    if cfg.schedule == "constant" and step >= cfg.warmup_steps:
        return cfg.lr
    return warmup_cosine(step, cfg.lr, cfg.warmup_steps, cfg.steps, cfg.lr_min_ratio)


def warmup_cosine(step: int, lr: float, warmup: int, steps: int, min_ratio: float) -> float:
    """Linear warm-up over ``warmup`` steps to ``lr``, then cosine to ``min_ratio * lr`` at ``steps``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


class WeightEMA:
    """Exponential moving average of the weights (not the ``ema`` loop connection): a fixed rate as in
    TRM, or with ``warmup`` the rate min(rate, (1 + n) / (10 + n)) after n updates. Entries named in
    ``exclude`` are not averaged (TRM's puzzle embedding, a buffer outside its EMA)."""

    def __init__(self, model: nn.Module, rate: float, warmup: bool = False, exclude: tuple[str, ...] = ()):
        self.rate, self.warmup = rate, warmup
        self.shadow = {k: v.detach().float().clone() for k, v in model.state_dict().items()
                       if v.dtype.is_floating_point and not k.startswith(exclude)}
        self.updates = 0

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        self.updates += 1
        r = min(self.rate, (1 + self.updates) / (10 + self.updates)) if self.warmup else self.rate
        for k, v in model.state_dict().items():
            if k in self.shadow:
                self.shadow[k].lerp_(v.detach().float(), 1 - r)

    def weights(self, model: nn.Module) -> dict[str, Tensor]:
        out = {}
        for k, v in model.state_dict().items():
            out[k] = self.shadow[k].to(v.dtype) if k in self.shadow else v.detach()
        return out
