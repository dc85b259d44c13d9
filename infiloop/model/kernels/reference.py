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


CLIP_MODES = ("hard", "soft")


def raw_score(z: Tensor, q: Tensor, eps: float) -> Tensor:
    """The unclipped content score q^T RMSNorm(z), shape z[..., 0].

    Computed as (q^T z) / rms(z): the same number, without materialising the normalised candidate."""
    mean_square = torch.linalg.vector_norm(z, dim=-1).pow(2) / z.shape[-1]
    return (z @ q.to(z.dtype)) * torch.rsqrt(mean_square + eps)


def bound_score(raw: Tensor, score_clip: float | None, clip_mode: str = "hard") -> Tensor:
    """The bound on the score: ``min(raw, clip)`` (``hard``, the paper's clip from above at 8.0) or
    ``clip * tanh(raw / clip)`` (``soft``: the same ceiling, reached smoothly, and a floor at -clip)."""
    if score_clip is None:
        return raw
    if clip_mode == "soft":
        return score_clip * torch.tanh(raw / score_clip)
    return raw.clamp(max=score_clip)


def score_slope(raw: Tensor, score_clip: float | None, clip_mode: str = "hard") -> Tensor:
    """ds/d(raw) of :func:`bound_score`: 1 below a hard clip and 0 above it; 1 - tanh^2 for the soft cap."""
    if score_clip is None:
        return torch.ones_like(raw)
    if clip_mode == "soft":
        return 1 - torch.tanh(raw / score_clip).pow(2)
    return (raw <= score_clip).to(raw.dtype)  # torch.clamp passes the gradient where raw <= max


def content_score(z: Tensor, q: Tensor, score_clip: float | None, eps: float, clip_mode: str = "hard") -> Tensor:
    """s = q^T RMSNorm(z), bounded by ``score_clip`` (:func:`bound_score`), shape z[..., 0]."""
    return bound_score(raw_score(z, q, eps), score_clip, clip_mode)


def infiloop_init(
    z0: Tensor, q: Tensor, score_clip: float | None, eps: float, content: bool = True, clip_mode: str = "hard",
    z0_candidate: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """State from the first candidate: h_0 = z_0, log D_0 = s_0 (N_0 = e_0 z_0, D_0 = e_0).

    With ``z0_candidate=False`` the initial state is not a candidate: it holds no mass (log D_0 = -inf), so
    gamma_1 = 1 and h_1 = z_1, and eq. 2's sums start at i = 1."""
    s0 = content_score(z0, q, score_clip, eps, clip_mode) if content else z0.new_zeros(z0.shape[:-1])
    if not z0_candidate:
        return z0, torch.full_like(s0, float("-inf")), s0
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
    clip_mode: str = "hard",
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One streaming step (eq. 4/5, log space). Returns ``(h_t, log D_t, gamma_t, s_t)``.

    Shapes: ``z, h: [..., d]``, ``log_d: [...]``, ``q: [d]``, ``log_beta``: a 0-d tensor.
    With ``content=False`` the score is the constant 0, so gamma_t -> 1 - beta (equal weights).
    A state with no mass yet (log D = -inf: the initial state is not a candidate) takes gamma_t = 1.
    """
    s = content_score(z, q, score_clip, eps, clip_mode) if content else z.new_zeros(z.shape[:-1])
    log_retained = log_beta.to(log_d.dtype) + log_d
    x = s - log_retained
    gamma = torch.sigmoid(x)
    h_new = h + gamma.unsqueeze(-1) * (z - h)
    # logaddexp(log_retained, s) = log_retained + softplus(s - log_retained), reusing x; the threshold
    # (where softplus returns x itself) is far enough out that the difference is below 1e-21.
    log_d_new = log_retained + F.softplus(x, threshold=50.0)
    # -inf + inf is NaN: a state without mass takes D_t = e_t (the branch's gradient is masked, not NaN)
    log_d_new = torch.where(torch.isneginf(log_retained), s.to(log_d_new.dtype), log_d_new)
    return h_new, log_d_new, gamma, s


def infiloop_step_backward(
    z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor,
    g_h: Tensor, g_ld: Tensor, g_g: Tensor, g_s: Tensor,
    score_clip: float | None, eps: float, content: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The backward of :func:`infiloop_step` (hard clip or none) written out, as the fused kernel computes it:
    gradients of ``(z, h, log D, q, log beta)`` from those of ``(h_t, log D_t, gamma_t, s_t)``.

    With x = s - log beta - log D:  dgamma/dx = gamma (1 - gamma); d log D_t/ds = gamma and
    d log D_t/d(log beta + log D) = 1 - gamma (logaddexp); d raw/dz = r (q - raw n / d) with r = rms(z)^-1 and
    n = z r; the hard clip passes the gradient where raw <= clip. Arithmetic in float32 (float64 for float64
    inputs); each gradient in its input's dtype. The custom operator's reference body (``op.py``)."""
    dt = torch.promote_types(z.dtype, torch.float32)
    zf, hf, gh = z.to(dt), h.to(dt), g_h.to(dt)
    log_ret = log_beta.to(log_d.dtype).to(dt) + log_d.to(dt)
    d = z.shape[-1]
    if content:
        qz = q.to(z.dtype).to(dt)
        r = torch.rsqrt(zf.pow(2).mean(dim=-1) + eps)
        raw = (zf @ qz) * r
        s = raw if score_clip is None else raw.clamp(max=score_clip)
    else:
        s = zf.new_zeros(z.shape[:-1])
    gamma = torch.sigmoid(s - log_ret)
    g_x = (g_g.to(dt) + (gh * (zf - hf)).sum(-1)) * gamma * (1 - gamma)
    g_ld_new = g_ld.to(dt)
    d_log_ret = g_ld_new * (1 - gamma) - g_x
    dz = gh * gamma.unsqueeze(-1)
    dh = gh * (1 - gamma).unsqueeze(-1)
    if content:
        g_raw = g_s.to(dt) + g_x + g_ld_new * gamma
        if score_clip is not None:
            g_raw = torch.where(raw <= score_clip, g_raw, 0)
        n = zf * r.unsqueeze(-1)
        dz = dz + (g_raw * r).unsqueeze(-1) * (qz - n * (raw / d).unsqueeze(-1))
        dq = (g_raw.unsqueeze(-1) * n).reshape(-1, d).sum(0)
    else:
        dq = torch.zeros_like(q, dtype=dt)
    return (dz.to(z.dtype), dh.to(h.dtype), d_log_ret.to(log_d.dtype), dq.to(q.dtype),
            d_log_ret.sum().to(log_beta.dtype))
