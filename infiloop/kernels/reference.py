"""Eager PyTorch reference of one InfiLoop streaming step (the contract every kernel must match).

The state of one token is the pair (h_{t-1}, log D_{t-1}): the current aggregate and the log of the
retained mass. One step with a new candidate z_t is eq. 5 of the paper in log space:

    s_t     = min(q^T RMSNorm(z_t), clip)                       (content score)
    gamma_t = e_t / (beta D_{t-1} + e_t) = sigmoid(s_t - log beta - log D_{t-1})
    h_t     = h_{t-1} + gamma_t (z_t - h_{t-1})
    log D_t = logaddexp(log beta + log D_{t-1}, s_t)            (D_t = beta D_{t-1} + e_t, eq. 4)

This is algebraically identical to N_t / D_t of eq. 4 (h_t = N_t / D_t) and cannot overflow at any
loop count, because only log D is kept and D never appears as a number.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def rms_normalize(z: Tensor, eps: float) -> Tensor:
    """RMSNorm without a learned gain: ``z / sqrt(mean(z^2) + eps)`` over the last axis."""
    return z * torch.rsqrt(z.pow(2).mean(dim=-1, keepdim=True) + eps)


def content_score(z: Tensor, q: Tensor, score_clip: float | None, eps: float) -> Tensor:
    """s = q^T RMSNorm(z), clipped from above at ``score_clip`` (a hard upper bound), shape z[..., 0].

    Computed as (q^T z) / rms(z): the same number, without materialising the normalised candidate."""
    mean_square = torch.linalg.vector_norm(z, dim=-1).pow(2) / z.shape[-1]
    s = (z @ q.to(z.dtype)) * torch.rsqrt(mean_square + eps)
    if score_clip is not None:
        s = s.clamp(max=score_clip)
    return s


def infiloop_init(
    z0: Tensor, q: Tensor, score_clip: float | None, eps: float, content: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """State from the first candidate: h_0 = z_0, log D_0 = s_0 (N_0 = e_0 z_0, D_0 = e_0)."""
    s0 = content_score(z0, q, score_clip, eps) if content else z0.new_zeros(z0.shape[:-1])
    return z0, s0, s0


def infiloop_step(
    z: Tensor,
    h: Tensor,
    log_d: Tensor,
    q: Tensor,
    log_beta: Tensor,
    score_clip: float | None,
    eps: float,
    content: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One streaming step (eq. 4/5, log space). Returns ``(h_t, log D_t, gamma_t, s_t)``.

    Shapes: ``z, h: [..., d]``, ``log_d: [...]``, ``q: [d]``, ``log_beta``: a 0-d tensor.
    With ``content=False`` the score is the constant 0, so gamma_t -> 1 - beta (equal weights).
    """
    s = content_score(z, q, score_clip, eps) if content else z.new_zeros(z.shape[:-1])
    log_retained = log_beta.to(log_d.dtype) + log_d
    x = s - log_retained
    gamma = torch.sigmoid(x)
    h_new = h + gamma.unsqueeze(-1) * (z - h)
    # logaddexp(log_retained, s) = log_retained + softplus(s - log_retained), reusing x; the threshold
    # (where softplus returns x itself) is far enough out that the difference is below 1e-21.
    log_d_new = log_retained + F.softplus(x, threshold=50.0)
    return h_new, log_d_new, gamma, s
