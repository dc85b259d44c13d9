"""Building blocks of the shared block f_theta (the paper's architecture): TRM-style Transformer layers.

Post-norm RMSNorm without a learned gain (as in TRM), bidirectional attention through
``scaled_dot_product_attention`` (or TRM's token-mixing MLP), SwiGLU, an optional depthwise 3x3
convolution over the grid, and position information (RoPE, learned, factored grid, or none).
A pre-norm variant with learned residual scales serves the FPRM baseline of the paper's comparison.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def rms_norm(x: Tensor, eps: float = 1e-5, dim: int = -1) -> Tensor:
    """RMSNorm without gain over axis ``dim``, computed in float32 (float64 stays float64)."""
    xf = x if x.dtype == torch.float64 else x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(dim, keepdim=True) + eps)).to(x.dtype)


def truncated_std_factor(bound: float = 2.0) -> float:
    """Standard deviation of a standard normal truncated to [-bound, bound] (0.8796 at bound 2)."""
    z = math.erf(bound / math.sqrt(2))  # P(|X| <= bound)
    pdf = math.exp(-0.5 * bound**2) / math.sqrt(2 * math.pi)
    return math.sqrt(1 - 2 * bound * pdf / z)


def trunc_normal_(w: Tensor, std: float, bound: float = 2.0, generator: torch.Generator | None = None) -> Tensor:
    """Truncated normal whose standard deviation is exactly ``std`` (TRM's ``trunc_normal_init_``).

    The normal is cut at +-``bound`` of its own scale sigma' = std / c, with c the standard deviation of a
    standard normal truncated to [-bound, bound]; ``nn.init.trunc_normal_(std=std)`` alone would leave
    0.88 std at bound 2.
    """
    s = std / truncated_std_factor(bound)
    return nn.init.trunc_normal_(w, std=s, a=-bound * s, b=bound * s, generator=generator)


class Linear(nn.Linear):
    """Linear layer with LeCun truncated-normal initialisation (std 1/sqrt(fan_in)), as in TRM."""

    def __init__(self, d_in: int, d_out: int, bias: bool = False):
        super().__init__(d_in, d_out, bias=bias)
        trunc_normal_(self.weight, 1.0 / math.sqrt(d_in))
        if bias:
            nn.init.zeros_(self.bias)


def swiglu_width(d: int, expansion: float, multiple: int) -> int:
    """Hidden width of SwiGLU: 2/3 of ``expansion * d`` rounded up to ``multiple`` (TRM's rule)."""
    w = round(expansion * d * 2 / 3)
    return multiple * math.ceil(w / multiple)


class SwiGLU(nn.Module):
    def __init__(self, d: int, expansion: float, multiple: int):
        super().__init__()
        w = swiglu_width(d, expansion, multiple)
        self.gate_up = Linear(d, 2 * w)
        self.down = Linear(w, d)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Rotary(nn.Module):
    """Rotary position embedding tables (cos, sin) for ``seq_len`` positions."""

    def __init__(self, head_dim: int, seq_len: int, theta: float = 10000.0):
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        ang = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
        emb = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    @staticmethod
    def _rotate_half(x: Tensor) -> Tensor:
        a, b = x.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    def forward(self, x: Tensor) -> Tensor:  # x: [B, heads, S, head_dim]
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        return x * cos + self._rotate_half(x) * sin


class Attention(nn.Module):
    """Bidirectional multi-head self-attention (no mask: every cell sees every cell)."""

    def __init__(self, d: int, n_heads: int, rotary: Rotary | None):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d // n_heads
        self.qkv = Linear(d, 3 * d)
        self.out = Linear(d, d)
        self.rotary = rotary

    def forward(self, x: Tensor) -> Tensor:
        B, S, d = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out(o.transpose(1, 2).reshape(B, S, d))


class TokenMixMLP(nn.Module):
    """TRM's attention-free variant (``mlp_t``): a SwiGLU across the sequence axis. TRM rounds its hidden
    width to a multiple of 256 and normalises its residual over the sequence axis (``norm_dim = 1``)."""

    def __init__(self, seq_len: int, expansion: float, multiple: int, norm_over_sequence: bool = True):
        super().__init__()
        self.mlp = SwiGLU(seq_len, expansion, multiple)
        self.norm_dim = 1 if norm_over_sequence else -1

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(x.transpose(1, 2)).transpose(1, 2)


class GridConv(nn.Module):
    """Depthwise 3x3 convolution over the grid cells; prefix tokens (puzzle embedding) are untouched."""

    def __init__(self, d: int, grid: tuple[int, int], prefix: int):
        super().__init__()
        self.grid, self.prefix = grid, prefix
        self.conv = nn.Conv2d(d, d, kernel_size=3, padding=1, groups=d)
        nn.init.zeros_(self.conv.bias)

    def forward(self, x: Tensor) -> Tensor:
        B, S, d = x.shape
        cells = x[:, self.prefix:].transpose(1, 2).reshape(B, d, *self.grid)
        out = self.conv(cells).reshape(B, d, -1).transpose(1, 2)
        return F.pad(out, (0, 0, self.prefix, 0))


class Layer(nn.Module):
    """One Transformer layer: token mixing, [grid convolution], SwiGLU; each sublayer residual.

    ``norm="post"`` (TRM): x = RMSNorm(x + sub(x)).
    ``norm="pre"`` with residual scales (FPRM): x = x + a * sub(RMSNorm(x)), a learned per sublayer.
    Each norm is over the channels, except where a sublayer says otherwise (``norm_dim``: TRM's token
    mixer normalises over the sequence axis).
    """

    def __init__(self, mixer: nn.Module, conv: nn.Module | None, mlp: nn.Module, norm: str,
                 residual_scale: bool, residual_scale_init: float, eps: float):
        super().__init__()
        self.subs = nn.ModuleList([m for m in (mixer, conv, mlp) if m is not None])
        self.norm, self.eps = norm, eps
        self.scales = (nn.Parameter(torch.full((len(self.subs),), residual_scale_init))
                       if residual_scale else None)

    def forward(self, x: Tensor, mod: list[dict[str, Tensor]] | None = None) -> Tensor:
        """``mod``: per sublayer, timestep modulation from ``conditioning.Conditioner.modulation``:
        ``gate`` multiplies the branch (branch gating), ``scale``/``shift`` modulate its norm (AdaLN)."""
        for i, sub in enumerate(self.subs):
            a = self.scales[i] if self.scales is not None else 1.0
            m = mod[i] if mod is not None else {}
            dim = getattr(sub, "norm_dim", -1)
            if "gate" in m:
                a = a * m["gate"]
            if self.norm == "post":
                x = _modulate(rms_norm(x + a * sub(x), self.eps, dim), m)
            else:
                x = x + a * sub(_modulate(rms_norm(x, self.eps, dim), m))
        return x


def _modulate(x: Tensor, m: dict[str, Tensor]) -> Tensor:
    return x * m["scale"] + m["shift"] if "scale" in m else x


class GridPositions(nn.Module):
    """Factored learned positions for grid cells: row + column (+ box) embeddings.

    Small models learn Sudoku's constraint structure much faster from these than from per-cell
    embeddings, since every cell shares its row, column and box vectors with its peers.
    """

    def __init__(self, d: int, grid: tuple[int, int], box: tuple[int, int] | None, prefix: int, std: float):
        super().__init__()
        rows, cols = grid
        self.prefix = prefix
        self.row = nn.Parameter(trunc_normal_(torch.empty(rows, d), std))
        self.col = nn.Parameter(trunc_normal_(torch.empty(cols, d), std))
        r = torch.arange(rows)[:, None].expand(rows, cols)
        c = torch.arange(cols)[None, :].expand(rows, cols)
        self.register_buffer("r_idx", r.reshape(-1), persistent=False)
        self.register_buffer("c_idx", c.reshape(-1), persistent=False)
        if box is not None:
            br, bc = box
            n_box = (rows // br) * (cols // bc)
            self.box = nn.Parameter(trunc_normal_(torch.empty(n_box, d), std))
            self.register_buffer("b_idx", ((r // br) * (cols // bc) + c // bc).reshape(-1), persistent=False)
        else:
            self.box = None

    def forward(self) -> Tensor:
        pos = self.row[self.r_idx] + self.col[self.c_idx]
        if self.box is not None:
            pos = pos + self.box[self.b_idx]
        return F.pad(pos, (0, 0, self.prefix, 0))
