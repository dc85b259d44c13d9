"""Fused Triton kernel for one InfiLoop streaming step (eq. 5 of the paper in log space), forward and
backward, called by the custom operator ``infiloop::step`` (``op.py``), which gives them autograd
and the fake-tensor rule that ``torch.compile`` needs.

The contract is ``reference.infiloop_step``: for every token (row) with candidate z_t, state
(h_{t-1}, log D_{t-1}), pseudo-query q and log beta,

    s_t     = min(q^T RMSNorm(z_t), clip)                         (content score; 0 without content)
    gamma_t = sigmoid(s_t - log beta - log D_{t-1})               (= e_t / (beta D_{t-1} + e_t), eq. 5)
    h_t     = h_{t-1} + gamma_t (z_t - h_{t-1})                   (eq. 5)
    log D_t = logaddexp(log beta + log D_{t-1}, s_t)              (D_t = beta D_{t-1} + e_t, eq. 4)

The forward reads z, h and log D once and writes h_t, log D_t, gamma_t and s_t once: the RMS
normalisation, the score and its clip, the log-space gamma and the state update all happen in
registers, in float32 whatever the storage dtype. The backward recomputes the row statistics from the
saved inputs (nothing but the inputs is saved) and writes the gradients of z, h and log D in one pass;
the gradients of the shared parameters q and log beta are reduced over rows in two stages (one
float32 partial per program, then a sum), so the result does not depend on atomics' ordering.

Rows are the flattened leading axes; each program takes a tile of ``BLOCK_R`` rows by ``BLOCK_D``
columns (``BLOCK_D`` = the next power of two >= d, masked), so any hidden size and any number of
tokens work. Storage dtypes: float32, bfloat16 or float16; outputs take the dtypes the eager reference
would give (torch's type promotion of its expressions), so the two are interchangeable.

Under ``TRITON_INTERPRET=1`` (set before this module is imported) the kernels run on CPU tensors,
which is how the tests check them against the reference without a GPU.

Every launch runs under the tensors' device (:func:`on_device`): Triton launches on the *current* CUDA
device, so tensors on ``cuda:1`` while ``cuda:0`` is current would otherwise be handed to a kernel on the
wrong device (an illegal address, or the probe's silent fallback to the reference step).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised only where triton is absent
    triton = None
    tl = None
    HAS_TRITON = False

__all__ = ["HAS_TRITON", "backward_rows", "check_inputs", "forward_rows", "launch_config", "on_device", "out_dtypes"]

# Elements per tile: large enough to keep a wide GPU busy per program, small enough that z, h and the
# float32 temporaries of one tile stay in registers.
_TILE_ELEMS = 4096
_MAX_BLOCK_R = 64


def launch_config(n_rows: int, d: int, block_r: int | None = None) -> tuple[int, int, int]:
    """``(BLOCK_R, BLOCK_D, num_warps)`` for ``n_rows`` rows of hidden size ``d``."""
    block_d = triton.next_power_of_2(max(d, 1))
    if block_r is None:
        block_r = max(1, min(_MAX_BLOCK_R, _TILE_ELEMS // block_d))
        block_r = min(block_r, triton.next_power_of_2(max(n_rows, 1)))
    tile = block_r * block_d
    num_warps = 1 if tile <= 256 else 2 if tile <= 1024 else 4 if tile <= 4096 else 8 if tile <= 16384 else 16
    return block_r, block_d, num_warps


if HAS_TRITON:

    @triton.jit
    def _row_stats(z, z_dtype_probe, q_ptr, cols, cmask, d, clip, eps,
                   HAS_CLIP: tl.constexpr, CONTENT: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
        """Per-row inverse RMS r, raw score q^T (z r), clipped score s and the clip's pass mask."""
        if CONTENT:
            # The reference casts q to z's dtype before the dot product; round q the same way.
            q = tl.load(q_ptr + cols, mask=cmask, other=0.0).to(z_dtype_probe.dtype).to(tl.float32)
            r = tl.rsqrt(tl.sum(z * z, axis=1) / d + eps)
            raw = tl.sum(z * q[None, :], axis=1) * r
            if HAS_CLIP:
                s = tl.minimum(raw, clip)
                passed = raw <= clip  # torch.clamp passes the gradient where input <= max
            else:
                s = raw
                passed = raw == raw
        else:
            q = tl.zeros([BLOCK_D], dtype=tl.float32)
            r = tl.zeros([BLOCK_R], dtype=tl.float32)
            raw = r
            s = r
            passed = r == r
        return q, r, raw, s, passed

    @triton.jit
    def _fwd_kernel(
        z_ptr, h_ptr, ld_ptr, q_ptr, lb_ptr,
        hn_ptr, ldn_ptr, g_ptr, s_ptr,
        n_rows, d, clip, eps,
        HAS_CLIP: tl.constexpr, CONTENT: tl.constexpr,
        BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
    ):
        pid = tl.program_id(0)
        rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = tl.arange(0, BLOCK_D)
        rmask = rows < n_rows
        cmask = cols < d
        m2 = rmask[:, None] & cmask[None, :]
        offs = rows.to(tl.int64)[:, None] * d + cols[None, :]

        z_in = tl.load(z_ptr + offs, mask=m2, other=0.0)
        z = z_in.to(tl.float32)
        h = tl.load(h_ptr + offs, mask=m2, other=0.0).to(tl.float32)
        ld_in = tl.load(ld_ptr + rows, mask=rmask, other=0.0)
        # The reference computes log_beta.to(log_d.dtype) + log_d.
        log_beta = tl.load(lb_ptr).to(ld_in.dtype).to(tl.float32)
        log_ret = log_beta + ld_in.to(tl.float32)

        _q, _r, _raw, s, _passed = _row_stats(z, z_in, q_ptr, cols, cmask, d, clip, eps,
                                              HAS_CLIP, CONTENT, BLOCK_R, BLOCK_D)
        x = s - log_ret
        gamma = tl.sigmoid(x)
        h_new = h + gamma[:, None] * (z - h)
        # logaddexp(log_ret, s) = max + log(1 + exp(-|x|)), never overflows.
        ld_new = tl.maximum(log_ret, s) + tl.log(1.0 + tl.exp(-tl.abs(x)))

        tl.store(hn_ptr + offs, h_new.to(hn_ptr.dtype.element_ty), mask=m2)
        tl.store(ldn_ptr + rows, ld_new.to(ldn_ptr.dtype.element_ty), mask=rmask)
        tl.store(g_ptr + rows, gamma.to(g_ptr.dtype.element_ty), mask=rmask)
        tl.store(s_ptr + rows, s.to(s_ptr.dtype.element_ty), mask=rmask)

    @triton.jit
    def _bwd_kernel(
        z_ptr, h_ptr, ld_ptr, q_ptr, lb_ptr,
        gh_ptr, gld_ptr, gg_ptr, gs_ptr,
        dz_ptr, dh_ptr, dld_ptr, dq_part_ptr, dlb_part_ptr,
        n_rows, d, clip, eps, n_tiles,
        HAS_CLIP: tl.constexpr, CONTENT: tl.constexpr,
        BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
    ):
        pid = tl.program_id(0)
        n_prog = tl.num_programs(0)
        cols = tl.arange(0, BLOCK_D)
        cmask = cols < d
        dq_acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        dlb_acc = tl.zeros([BLOCK_R], dtype=tl.float32)
        for tile in range(pid, n_tiles, n_prog):
            rows = tile * BLOCK_R + tl.arange(0, BLOCK_R)
            rmask = rows < n_rows
            m2 = rmask[:, None] & cmask[None, :]
            offs = rows.to(tl.int64)[:, None] * d + cols[None, :]

            z_in = tl.load(z_ptr + offs, mask=m2, other=0.0)
            z = z_in.to(tl.float32)
            h = tl.load(h_ptr + offs, mask=m2, other=0.0).to(tl.float32)
            gh = tl.load(gh_ptr + offs, mask=m2, other=0.0).to(tl.float32)
            ld_in = tl.load(ld_ptr + rows, mask=rmask, other=0.0)
            log_beta = tl.load(lb_ptr).to(ld_in.dtype).to(tl.float32)
            log_ret = log_beta + ld_in.to(tl.float32)
            g_ld = tl.load(gld_ptr + rows, mask=rmask, other=0.0).to(tl.float32)
            g_g = tl.load(gg_ptr + rows, mask=rmask, other=0.0).to(tl.float32)
            g_s = tl.load(gs_ptr + rows, mask=rmask, other=0.0).to(tl.float32)

            q, r, raw, s, passed = _row_stats(z, z_in, q_ptr, cols, cmask, d, clip, eps,
                                              HAS_CLIP, CONTENT, BLOCK_R, BLOCK_D)
            gamma = tl.sigmoid(s - log_ret)
            # Total gradient reaching gamma (through h_t and the diagnostic), then x = s - log_ret.
            g_gamma = g_g + tl.sum(gh * (z - h), axis=1)
            g_x = g_gamma * gamma * (1.0 - gamma)
            # d logaddexp(a, s)/ds = gamma, /da = 1 - gamma.
            g_logret = tl.where(rmask, g_ld * (1.0 - gamma) - g_x, 0.0)

            dz = gh * gamma[:, None]
            dh = gh * (1.0 - gamma[:, None])
            if CONTENT:
                g_raw = tl.where(passed & rmask, g_s + g_x + g_ld * gamma, 0.0)
                n = z * r[:, None]
                # d(q^T z r)/dz = r (q - n (q^T n) / d)
                dz += (g_raw * r)[:, None] * (q[None, :] - n * (raw / d)[:, None])
                dq_acc += tl.sum(g_raw[:, None] * n, axis=0)

            tl.store(dz_ptr + offs, dz.to(dz_ptr.dtype.element_ty), mask=m2)
            tl.store(dh_ptr + offs, dh.to(dh_ptr.dtype.element_ty), mask=m2)
            tl.store(dld_ptr + rows, g_logret.to(dld_ptr.dtype.element_ty), mask=rmask)
            dlb_acc += g_logret

        tl.store(dq_part_ptr + pid.to(tl.int64) * d + cols, dq_acc, mask=cmask)
        tl.store(dlb_part_ptr + pid, tl.sum(dlb_acc, axis=0))


def out_dtypes(z: Tensor, h: Tensor, log_d: Tensor) -> tuple[torch.dtype, torch.dtype, torch.dtype]:
    """(h_t, log D_t and gamma_t, s_t) dtypes exactly as torch promotes them in the reference."""
    s_dt = z.dtype
    g_dt = torch.promote_types(s_dt, log_d.dtype)
    h_dt = torch.promote_types(torch.promote_types(h.dtype, z.dtype), g_dt)
    return h_dt, g_dt, s_dt


def check_inputs(z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor) -> None:
    if z.shape != h.shape:
        raise ValueError(f"fused_step: z and h must have the same shape, got {tuple(z.shape)} and {tuple(h.shape)}")
    if log_d.shape != z.shape[:-1]:
        raise ValueError(f"fused_step: log_d must have shape {tuple(z.shape[:-1])}, got {tuple(log_d.shape)}")
    if q.shape != z.shape[-1:]:
        raise ValueError(f"fused_step: q must have shape {tuple(z.shape[-1:])}, got {tuple(q.shape)}")
    if log_beta.ndim != 0:
        raise ValueError(f"fused_step: log_beta must be a 0-d tensor, got shape {tuple(log_beta.shape)}")
    devices = {t.device for t in (z, h, log_d, q, log_beta)}
    if len(devices) != 1:
        raise ValueError(f"fused_step: all tensors must be on one device, got {sorted(map(str, devices))}")


def on_device(device: torch.device) -> contextlib.AbstractContextManager:
    """The context every kernel launch runs in: ``torch.cuda.device(device)`` for CUDA tensors (Triton launches on
    the current device), nothing for CPU tensors (the interpreter)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _forward(z2: Tensor, h2: Tensor, ld1: Tensor, q: Tensor, log_beta: Tensor, score_clip: float | None,
             eps: float, content: bool, dtypes, block_r: int | None = None):
    n_rows, d = z2.shape
    h_dt, g_dt, s_dt = dtypes
    h_new = torch.empty((n_rows, d), dtype=h_dt, device=z2.device)
    ld_new = torch.empty(n_rows, dtype=g_dt, device=z2.device)
    gamma = torch.empty(n_rows, dtype=g_dt, device=z2.device)
    s = torch.empty(n_rows, dtype=s_dt, device=z2.device)
    if n_rows == 0:
        return h_new, ld_new, gamma, s
    br, bd, nw = launch_config(n_rows, d, block_r)
    grid = (triton.cdiv(n_rows, br),)
    with on_device(z2.device):
        _fwd_kernel[grid](
            z2, h2, ld1, q, log_beta, h_new, ld_new, gamma, s,
            n_rows, d, float(score_clip) if score_clip is not None else 0.0, float(eps),
            HAS_CLIP=score_clip is not None, CONTENT=bool(content), BLOCK_R=br, BLOCK_D=bd, num_warps=nw,
        )
    return h_new, ld_new, gamma, s


def _n_programs_bwd(n_tiles: int, device: torch.device) -> int:
    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return max(1, min(n_tiles, 4 * sms))
    return max(1, min(n_tiles, 4))


def forward_rows(z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor, score_clip: float | None,
                 eps: float, content: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The forward kernel on tensors of any leading shape: ``(h_t, log D_t, gamma_t, s_t)``, no autograd."""
    shape, d = z.shape, z.shape[-1]
    outs = _forward(z.reshape(-1, d).contiguous(), h.reshape(-1, d).contiguous(), log_d.reshape(-1).contiguous(),
                    q.contiguous(), log_beta.contiguous(), score_clip, eps, content, out_dtypes(z, h, log_d))
    h_new, ld_new, gamma, s = outs
    lead = shape[:-1]
    return h_new.reshape(shape), ld_new.reshape(lead), gamma.reshape(lead), s.reshape(lead)


def backward_rows(z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor, g_h: Tensor, g_ld: Tensor,
                  g_g: Tensor, g_s: Tensor, score_clip: float | None, eps: float, content: bool
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The backward kernel: gradients of ``(z, h, log D, q, log beta)`` from the gradients of the four outputs
    (recomputing the row statistics from the inputs); ``dq`` is zero without the content score."""
    shape, d = z.shape, z.shape[-1]
    z2, h2 = z.reshape(-1, d).contiguous(), h.reshape(-1, d).contiguous()
    ld1, qc, lb = log_d.reshape(-1).contiguous(), q.contiguous(), log_beta.contiguous()
    n_rows, dev = z2.shape[0], z2.device
    gh, gld = g_h.reshape(n_rows, d).contiguous(), g_ld.reshape(n_rows).contiguous()
    gg, gs = g_g.reshape(n_rows).contiguous(), g_s.reshape(n_rows).contiguous()
    dz, dh, dld = torch.empty_like(z2), torch.empty_like(h2), torch.empty_like(ld1)
    if n_rows == 0:
        return dz.reshape(shape), dh.reshape(shape), dld.reshape(shape[:-1]), torch.zeros_like(qc), torch.zeros_like(lb)
    br, bd, nw = launch_config(n_rows, d)
    n_tiles = triton.cdiv(n_rows, br)
    n_prog = _n_programs_bwd(n_tiles, dev)
    dq_part = torch.empty((n_prog, d), dtype=torch.float32, device=dev)
    dlb_part = torch.empty(n_prog, dtype=torch.float32, device=dev)
    with on_device(dev):
        _bwd_kernel[(n_prog,)](
            z2, h2, ld1, qc, lb, gh, gld, gg, gs,
            dz, dh, dld, dq_part, dlb_part,
            n_rows, d, float(score_clip) if score_clip is not None else 0.0, float(eps), n_tiles,
            HAS_CLIP=score_clip is not None, CONTENT=bool(content), BLOCK_R=br, BLOCK_D=bd, num_warps=nw,
        )
    dq = dq_part.sum(0).to(q.dtype) if content else torch.zeros_like(qc)
    return dz.reshape(shape), dh.reshape(shape), dld.reshape(shape[:-1]), dq, dlb_part.sum().to(lb.dtype)
