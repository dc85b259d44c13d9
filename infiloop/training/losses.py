"""What one training step is scored by and logs: the stable-max cross-entropy of TRM (and the softmax one), and what
the InfiLoop connection of each axis has learned (:func:`connection_stats`)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..analysis.trajectories import CONNECTION_KEYS, rank_correlation
from ..model.connections import InfiLoop
from ..model.kernels import raw_score
from ..model.reasoner import LoopedReasoner
from ..tasks.base import IGNORE_LABEL_ID
from ..tasks.scoring import count_wrong


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
