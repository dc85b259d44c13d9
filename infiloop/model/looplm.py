"""LoopLM: the looped causal decoder of the looped-language-model study, ``M_{p,s,c,K} = C ∘ F^K ∘ P``.

``P`` is a prelude of ``p`` blocks, ``F`` a core of ``s`` blocks whose weights are shared across loops, ``C`` a
coda of ``c`` blocks, and ``K`` the loop count of training (the training horizon). At inference the core runs
``r`` loops (``forward(tokens, loops=r)``): under-unrolling (r < K), the training horizon (r = K) or loop
extrapolation (r > K); the study's effective depth is ``L(r) = p + r s + c`` and the physical depth ``p + s + c``.

The study's recurrence ``h_0 = P(x~)``, ``h_{l+1} = F(h_l; gamma_l)``, ``y = W C(h_r)`` is written here with a
loop connection of this package (``connections.py``) between the core and its next input:

    z_l = F(h_{l-1})                    the core's candidate at loop l = 1..r
    h_l = connection.step(h_{l-1}, z_l)

``carry_last`` (eq. 1 of the paper, h_l = z_l) is the study's BaseLoop and gives ``C ∘ F^r ∘ P`` exactly;
``infiloop`` makes h_l the attention of eq. 2 over the candidates, ``h_l = sum_i alpha_{l,i} z_i`` with
``alpha_{l,i} = softmax_i(s_i + (l - i) log beta)``, computed by the streaming form of eq. 4/5
(``h_l = h_{l-1} + gamma_l (z_l - h_{l-1})``), so its state per token is (h, log D): O(d) whatever r. The
connection's initial state is the prelude output h_0, which is eq. 2's candidate z_0 when the connection's
``z0_candidate`` is true (the default) and holds no weight otherwise. Every token is a sample of the
connection (the token axis is folded into its sample axis), so FPRM's step size is per token and the decoder
stays causal whatever the connection.

The study's conditioners (``conditioning.py``, ``ConditionConfig``) act on this loop axis as on the reasoner's
outer axis, with h_0 = P(x~) the embedded prompt: history-state injection and initial-state injection change
what F reads (``h_{l-1} + sum_j B_j (h_{l-1-j} - h_{l-1})``, then ``I(., h_0)``), timestep conditioning sees
``t_l = l / L_infer`` with L_infer = K in training and r at test time (loop gating scales the core's update
before the connection; branch gating and AdaLN modulate the core's blocks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import from_dict
from .conditioning import ConditionConfig, Conditioner
from .connections import Connection, ConnectionConfig, build_connection
from .layers import Attention, Layer, Linear, Rotary, SwiGLU, rms_norm, trunc_normal_

NORMS = ("pre", "post")
POSITIONS = ("rope", "learned", "none")
State = dict[str, dict[str, Tensor]]


def _carry_last() -> ConnectionConfig:
    return ConnectionConfig(name="carry_last")


@dataclass
class LoopLMConfig:
    """Everything that defines a LoopLM, as data.

    prelude, core, coda: the block counts p, s, c; loops: K, the loop count of training.
    norm: ``pre`` (x + sub(RMSNorm x), a final RMSNorm before the head: the study's Llama/Qwen blocks) or
        ``post`` (RMSNorm(x + sub x), this package's TRM blocks).
    tie_head: the head is the transposed token embedding (W = E^T).
    connection: the loop connection on the loop axis (``carry_last``: the study's BaseLoop).
    cond: the study's conditioners; timestep conditioning needs ``cond.horizon == loops``.
    """

    vocab_size: int = 64
    seq_len: int = 128
    d_model: int = 64
    n_heads: int = 2
    expansion: float = 4.0
    ffn_multiple: int = 16
    prelude: int = 1
    core: int = 1
    coda: int = 1
    loops: int = 4
    tie_head: bool = True
    norm: str = "pre"
    norm_eps: float = 1e-5
    pos: str = "rope"
    rope_theta: float = 10000.0
    connection: ConnectionConfig = field(default_factory=_carry_last)
    cond: ConditionConfig = field(default_factory=ConditionConfig)

    @property
    def physical_depth(self) -> int:
        """p + s + c: the distinct blocks."""
        return self.prelude + self.core + self.coda

    def depth(self, loops: int | None = None) -> int:
        """The study's effective depth L(r) = p + r s + c (r = K by default)."""
        return self.prelude + (self.loops if loops is None else loops) * self.core + self.coda

    def validate(self, where: str = "looplm") -> None:
        def bad(f: str, msg: str) -> None:
            raise ValueError(f"{where}.{f}: {msg}")

        for f in ("seq_len", "d_model", "n_heads", "ffn_multiple", "core", "loops"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 1:
                bad(f, f"must be a positive integer, got {getattr(self, f)!r}")
        for f in ("prelude", "coda"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 0:
                bad(f, f"must be an integer >= 0, got {getattr(self, f)!r}")
        if not isinstance(self.vocab_size, int) or self.vocab_size < 2:
            bad("vocab_size", f"must be an integer >= 2, got {self.vocab_size!r}")
        if self.d_model % self.n_heads:
            bad("n_heads", f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.norm not in NORMS:
            bad("norm", f"unknown norm placement {self.norm!r}; valid choices: {', '.join(NORMS)}")
        if self.pos not in POSITIONS:
            bad("pos", f"unknown position scheme {self.pos!r}; valid choices: {', '.join(POSITIONS)}")
        if self.pos == "rope" and (self.d_model // self.n_heads) % 2:
            bad("pos", f"rope needs an even head size, got d_model/n_heads={self.d_model // self.n_heads}")
        if not self.expansion > 0:
            bad("expansion", f"must be positive, got {self.expansion}")
        if not self.norm_eps > 0:
            bad("norm_eps", f"must be positive, got {self.norm_eps}")
        self.connection.validate(f"{where}.connection")
        self.cond.validate(f"{where}.cond")
        if self.cond.uses_horizon and self.cond.horizon != self.loops:
            bad("cond.horizon", f"timestep conditioning trains at L_infer = loops K = {self.loops}; "
                                f"set cond.horizon to {self.loops}, got {self.cond.horizon}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "looplm") -> LoopLMConfig:
        return from_dict(cls, d, where)


class CausalAttention(Attention):
    """Causal multi-head self-attention: position t sees positions <= t (RoPE on the first S positions)."""

    def forward(self, x: Tensor) -> Tensor:
        B, S, d = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rotary is not None:
            cos, sin = self.rotary.cos[:S].to(x.dtype), self.rotary.sin[:S].to(x.dtype)
            q = q * cos + Rotary._rotate_half(q) * sin
            k = k * cos + Rotary._rotate_half(k) * sin
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(B, S, d))


class LoopLM(nn.Module):
    """The looped decoder C ∘ F^r ∘ P with a loop connection (and the study's conditioners) on the loop axis."""

    def __init__(self, cfg: LoopLMConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        d = cfg.d_model
        self.embed_scale = math.sqrt(d)
        self.tok_emb = nn.Embedding(cfg.vocab_size, d)
        trunc_normal_(self.tok_emb.weight, 1.0 / self.embed_scale)
        self.pos_emb = (nn.Parameter(trunc_normal_(torch.empty(cfg.seq_len, d), 1.0 / self.embed_scale))
                        if cfg.pos == "learned" else None)
        rotary = Rotary(d // cfg.n_heads, cfg.seq_len, cfg.rope_theta) if cfg.pos == "rope" else None

        def blocks(n: int) -> nn.ModuleList:
            return nn.ModuleList([
                Layer(CausalAttention(d, cfg.n_heads, rotary), None, SwiGLU(d, cfg.expansion, cfg.ffn_multiple),
                      cfg.norm, False, 1.0, cfg.norm_eps) for _ in range(n)])

        self.prelude, self.core, self.coda = blocks(cfg.prelude), blocks(cfg.core), blocks(cfg.coda)
        self.connection: Connection = build_connection(cfg.connection, d, "looplm.connection")
        self.head = None if cfg.tie_head else Linear(d, cfg.vocab_size)
        # Built last, so that the rest is initialised as the unconditioned model's (same seed).
        self.cond = Conditioner(cfg.cond, d, cfg.core, 2) if cfg.cond.active else None

    # ---------------------------------------------------------------- the three stages
    def embed(self, tokens: Tensor) -> Tensor:
        """x~: the scaled token embedding (+ learned positions), [B, T, d]."""
        if tokens.shape[1] > self.cfg.seq_len:
            raise ValueError(f"{tokens.shape[1]} tokens exceed looplm.seq_len={self.cfg.seq_len}")
        x = self.tok_emb(tokens)
        if self.pos_emb is not None:
            x = x + self.pos_emb[: tokens.shape[1]]
        return self.embed_scale * x

    @staticmethod
    def run(blocks: Iterable[nn.Module], h: Tensor, mod: list | None = None) -> Tensor:
        for i, block in enumerate(blocks):
            h = block(h, mod[i] if mod is not None else None)
        return h

    def readout(self, h: Tensor) -> Tensor:
        """W C(h_r): the coda, a final RMSNorm for pre-norm blocks, and the head; logits [B, T, vocab]."""
        h = self.run(self.coda, h)
        if self.cfg.norm == "pre":
            h = rms_norm(h, self.cfg.norm_eps)
        return self.head(h) if self.head is not None else h @ self.tok_emb.weight.T

    # ---------------------------------------------------------------- the loop axis
    def init_state(self, h0: Tensor) -> State:
        """The loop state after the prelude: the connection's state from h_0 (per token) and the conditioners'."""
        state = {"conn": self.connection.init(h0.reshape(-1, h0.shape[-1]))}
        if self.cond is not None:
            state["cond"] = self.cond.init(h0)
        return state

    def loop(self, state: State, h0: Tensor, horizon: int) -> tuple[State, Tensor, dict[str, Tensor]]:
        """One loop l: z_l = F(read(h_{l-1})), then h_l = connection.step(h_{l-1}, z_l). Returns the new state,
        h_l [B, T, d] and the step's diagnostics per token (gamma_l, score s_l), [B, T] each."""
        B, T, d = h0.shape
        h = state["conn"]["h"].reshape(B, T, d)
        read, mod, t = h, None, None
        if self.cond is not None:
            if self.cfg.cond.uses_horizon:
                t = self.cond.time(state["cond"], horizon)
                mod = self.cond.modulation(t)
            read = self.cond.read(state["cond"], h, h0)
        z = self.run(self.core, read, mod)
        if t is not None:
            z = self.cond.gate(t, h, z)
        conn, h_new, diag = self.connection.step(state["conn"], z.reshape(B * T, d))
        new = {"conn": conn}
        if self.cond is not None:
            new["cond"] = self.cond.advance(state["cond"], h)
        return new, h_new.reshape(B, T, d), {k: v.reshape(B, T) for k, v in diag.items()}

    def trajectory(self, tokens: Tensor, loops: int | None = None, horizon: int | None = None
                   ) -> Iterator[tuple[int, Tensor, State, dict[str, Tensor]]]:
        """Yield ``(l, h_l, state, diag)`` after each loop l = 1..r (r = ``loops``, default K). Only the state is
        kept between loops, so memory does not grow with r for O(d)-state connections. ``horizon``: L_infer of
        timestep conditioning (default r). ``diag`` adds ``update``, the relative update ||h_l - h_{l-1}|| /
        ||h_{l-1}|| per token."""
        r = self.cfg.loops if loops is None else loops
        if not isinstance(r, int) or r < 1:
            raise ValueError(f"loops must be an integer >= 1, got {r!r}")
        h0 = self.run(self.prelude, self.embed(tokens))
        state, h = self.init_state(h0), h0
        for lp in range(1, r + 1):
            state, h_new, diag = self.loop(state, h0, horizon or r)
            with torch.no_grad():
                diag["update"] = (h_new - h).norm(dim=-1) / h.norm(dim=-1).clamp_min(1e-12)
            h = h_new
            yield lp, h, state, diag

    def forward(self, tokens: Tensor, loops: int | None = None, diagnostics: bool = False):
        """Logits of ``W C(h_r)``, h_r after r = ``loops`` loops (default K, the training forward), [B, T, vocab].

        With ``diagnostics`` returns ``(logits, diag)``: per loop l = 1..r, ``gamma`` (eq. 5's step size),
        ``score`` (s_l) and ``update``, each [r, B, T]."""
        seen: dict[str, list[Tensor]] = {}
        h = None
        for _, h_l, _, diag in self.trajectory(tokens, loops):
            h = h_l
            if diagnostics:
                for k, v in diag.items():
                    seen.setdefault(k, []).append(v)
        logits = self.readout(h)
        return (logits, {k: torch.stack(v) for k, v in seen.items()}) if diagnostics else logits

    def logits_at(self, tokens: Tensor, loops: Iterable[int]) -> dict[int, Tensor]:
        """Logits after each r of ``loops``, from one trajectory to max r (one per r under timestep
        conditioning, whose trajectory depends on the budget L_infer = r)."""
        wanted = sorted(set(loops))
        if self.cfg.cond.uses_horizon:
            return {r: self.forward(tokens, r) for r in wanted}
        out = {}
        for lp, h, _, _ in self.trajectory(tokens, wanted[-1]):
            if lp in wanted:
                out[lp] = self.readout(h)
        return out

    def state_nbytes(self, state: State) -> int:
        """Persistent memory of the loop state (connection and conditioners), in bytes."""
        return sum(Connection.state_nbytes(s) for s in state.values())

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
