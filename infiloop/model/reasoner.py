"""The nested looped reasoner of the paper (its architecture: TRM's nesting), in the style of TRM.

Answer state y (z_H) and latent z (z_L), one shared block f (``n_layers`` Transformer layers).
One *outer update* is L inner updates of the latent and one update of the answer:

    inner (L times):  z_cand = f(z + y + x),   z <- connection_inner.step(z_cand)
    outer (once):     y_cand = f(y + z),       y <- connection_outer.step(y_cand)

With ``recall=False`` the input is not fed again: it enters only the initial states (y_0 = y_init + x,
z_0 = z_init + x) and the inner update is z_cand = f(z + y) (Bansal et al. 2022's network without recall; TRM,
like their recall network, feeds x at every inner update).

With ``carry_last`` on both axes this is TRM's rule exactly (z <- f(z + y + x), y <- f(y + z));
with ``infiloop`` each axis keeps its own (q, beta, h, log D). A supervision segment is H outer
updates with gradients through the last ``grad_outer`` of them; the state is detached between
segments (deep supervision). Depth unit: ``layers_per_outer_update = (L + 1) * n_layers``.

Optionally, conditioners of the looped-LM study (``cond``, ``conditioning.py``) wrap the outer update:
F reads ``cond.read(y)`` in place of y (history / initial-state injection), the block is modulated by
the timestep (branch gating, AdaLN), and loop gating scales the update of y before its connection.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from ..config import from_dict, hash_rule
from .conditioning import ConditionConfig, Conditioner
from .connections import Connection, ConnectionConfig, build_connection
from .layers import (
    Attention,
    GridConv,
    GridPositions,
    Layer,
    Linear,
    Rotary,
    SwiGLU,
    TokenMixMLP,
    rms_norm,
    trunc_normal_,
)

MIXERS = ("attention", "mlp")
POSITIONS = ("rope", "learned", "grid", "none")
NORMS = ("post", "pre")
TOKEN_MIX_NORMS = ("sequence", "channel")

Carry = dict[str, dict[str, Tensor]]


@dataclass
class ModelConfig:
    """Everything that defines the model, as data. Task fields first, then the block, then the loop."""

    # task
    vocab_size: int = 11
    seq_len: int = 81
    grid: tuple[int, int] | None = (9, 9)
    box: tuple[int, int] | None = (3, 3)
    n_puzzles: int = 0  # puzzle identifiers of the learned puzzle embedding (0: none; Sudoku and Maze have 1)
    # Prefix positions before the grid (TRM: puzzle_emb_len = 16 with puzzle_emb_ndim = hidden size): the
    # puzzle embedding fills the first, the others start at zero; the halting head reads the first.
    puzzle_emb_len: int = 16
    # shared block
    d_model: int = 512
    n_heads: int = 8
    expansion: float = 4.0
    ffn_multiple: int = 256
    n_layers: int = 2
    mixer: str = "attention"
    # TRM's token-mixing block (mixer "mlp", its mlp_t): hidden width rounded to this multiple, and its
    # residual normalised over the sequence axis ("sequence") or, as in the other sublayers, the channels
    token_mix_multiple: int = 256
    token_mix_norm: str = "sequence"
    pos: str = "rope"
    conv: bool = True
    norm: str = "post"
    residual_scale: bool = False
    residual_scale_init: float = 1.0
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    # loop
    H: int = 3
    L: int = 6
    grad_outer: int = 1
    # recall: the input x fed to every inner update (TRM's rule); False: x only in the initial states. Added after runs
    # were cached: hashed only off TRM's rule
    recall: bool = field(default=True, metadata=hash_rule(neutral=True))
    inner: ConnectionConfig = field(default_factory=ConnectionConfig)
    outer: ConnectionConfig = field(default_factory=ConnectionConfig)
    # conditioners of the looped-LM study (test-time recurrence in looped language models); all "none" by default
    cond: ConditionConfig = field(default_factory=ConditionConfig)

    @property
    def prefix(self) -> int:
        """Positions before the grid cells: the puzzle-embedding prefix."""
        return self.puzzle_emb_len

    @property
    def size_agnostic(self) -> bool:
        """Whether no weight depends on the grid's size, so that a model trained on one size runs on another
        (:meth:`LoopedReasoner.resized`): attention (TRM's token-mixing MLP is as wide as the sequence) with rotary
        or no positions (learned and grid positions are tables of the training size)."""
        return self.mixer == "attention" and self.pos in ("rope", "none")

    @property
    def layers_per_outer_update(self) -> int:
        """Executed layers per outer update: (L inner + 1 outer) block applications x n_layers."""
        return (self.L + 1) * self.n_layers

    def validate(self) -> None:
        def bad(f: str, msg: str) -> None:
            raise ValueError(f"model.{f}: {msg}")

        for f in ("vocab_size", "seq_len", "d_model", "n_heads", "n_layers", "H", "ffn_multiple",
                  "token_mix_multiple"):
            if getattr(self, f) < 1:
                bad(f, f"must be a positive integer, got {getattr(self, f)}")
        if self.n_puzzles < 0 or self.puzzle_emb_len < 0:
            bad("puzzle_emb_len", f"n_puzzles and puzzle_emb_len must be >= 0, got {self.n_puzzles}, "
                f"{self.puzzle_emb_len}")
        if self.n_puzzles > 1 and self.puzzle_emb_len == 0:
            bad("puzzle_emb_len", f"{self.n_puzzles} puzzle identifiers need a prefix position for their "
                "embedding (puzzle_emb_len >= 1)")
        if self.token_mix_norm not in TOKEN_MIX_NORMS:
            bad("token_mix_norm", f"unknown axis {self.token_mix_norm!r}; valid choices: {', '.join(TOKEN_MIX_NORMS)}")
        if self.L < 0:
            bad("L", f"must be >= 0, got {self.L}")
        if self.mixer not in MIXERS:
            bad("mixer", f"unknown mixer {self.mixer!r}; valid choices: {', '.join(MIXERS)}")
        if self.pos not in POSITIONS:
            bad("pos", f"unknown position scheme {self.pos!r}; valid choices: {', '.join(POSITIONS)}")
        if self.norm not in NORMS:
            bad("norm", f"unknown norm placement {self.norm!r}; valid choices: {', '.join(NORMS)}")
        if self.d_model % self.n_heads:
            bad("n_heads", f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.pos == "rope" and (self.d_model // self.n_heads) % 2:
            bad("pos", f"rope needs an even head size, got d_model/n_heads={self.d_model // self.n_heads}")
        if not 1 <= self.grad_outer <= self.H:
            bad("grad_outer", f"must be in [1, H={self.H}], got {self.grad_outer}")
        if self.expansion <= 0:
            bad("expansion", f"must be positive, got {self.expansion}")
        needs_grid = self.conv or self.pos == "grid"
        if needs_grid and self.grid is None:
            bad("grid", "conv=True or pos='grid' needs the grid shape (rows, cols)")
        if self.grid is not None:
            rows, cols = self.grid
            if rows * cols != self.seq_len:
                bad("grid", f"grid {rows}x{cols} has {rows * cols} cells but seq_len={self.seq_len}")
            if self.box is not None:
                br, bc = self.box
                if br < 1 or bc < 1 or rows % br or cols % bc:
                    bad("box", f"box {br}x{bc} does not tile the grid {rows}x{cols}")
        if not self.recall and self.cond.active:
            bad("recall", "recall=False (the input only in the initial states) is not defined with the looped-LM "
                "study's conditioners, which inject the input themselves")
        self.inner.validate("model.inner")
        self.outer.validate("model.outer")
        self.cond.validate("model.cond")

    def at_grid(self, grid: tuple[int, int]) -> ModelConfig:
        """This configuration on a grid of another size (the box kept where it still tiles the grid)."""
        rows, cols = int(grid[0]), int(grid[1])
        box = self.box if self.box and rows % self.box[0] == 0 and cols % self.box[1] == 0 else None
        return self.replace(grid=(rows, cols), seq_len=rows * cols, box=box)

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        return from_dict(cls, d, "model")


class LoopedReasoner(nn.Module):
    """The nested looped reasoner with a loop connection per recurrent axis."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        d, S = cfg.d_model, cfg.seq_len + cfg.prefix
        self.embed_scale = math.sqrt(d)
        std = 1.0 / self.embed_scale
        self.tok_emb = nn.Embedding(cfg.vocab_size, d)
        trunc_normal_(self.tok_emb.weight, std)
        self.puzzle_emb = None
        if cfg.puzzle_emb_len > 0:  # TRM: zero-initialised, one row per puzzle identifier
            self.puzzle_emb = nn.Embedding(max(cfg.n_puzzles, 1), d)
            nn.init.zeros_(self.puzzle_emb.weight)
        self.pos_emb = None
        if cfg.pos == "learned":
            self.pos_emb = nn.Parameter(trunc_normal_(torch.empty(S, d), std))
        elif cfg.pos == "grid":
            self.pos_emb = GridPositions(d, cfg.grid, cfg.box, cfg.prefix, std)
        rotary = Rotary(d // cfg.n_heads, S, cfg.rope_theta) if cfg.pos == "rope" else None

        def make_layer() -> Layer:
            mixer = (Attention(d, cfg.n_heads, rotary) if cfg.mixer == "attention"
                     else TokenMixMLP(S, cfg.expansion, cfg.token_mix_multiple, cfg.token_mix_norm == "sequence"))
            conv = GridConv(d, cfg.grid, cfg.prefix) if cfg.conv else None
            mlp = SwiGLU(d, cfg.expansion, cfg.ffn_multiple)
            return Layer(mixer, conv, mlp, cfg.norm, cfg.residual_scale, cfg.residual_scale_init, cfg.norm_eps)

        self.layers = nn.ModuleList([make_layer() for _ in range(cfg.n_layers)])
        self.conn_inner: Connection = build_connection(cfg.inner, d, "model.inner")
        self.conn_outer: Connection = build_connection(cfg.outer, d, "model.outer")
        # Fixed random initial states, as TRM's H_init / L_init (buffers: saved, not trained).
        g = torch.Generator().manual_seed(0)
        self.register_buffer("y_init", trunc_normal_(torch.empty(d), 1.0, generator=g))
        self.register_buffer("z_init", trunc_normal_(torch.empty(d), 1.0, generator=g))
        self.lm_head = Linear(d, cfg.vocab_size)
        self.q_head = Linear(d, 1, bias=True)
        nn.init.zeros_(self.q_head.weight)
        nn.init.constant_(self.q_head.bias, -5.0)
        # Built last, so that the rest of the model is initialised as the unconditioned one (same seed).
        self.cond = (Conditioner(cfg.cond, d, cfg.n_layers, len(self.layers[0].subs))
                     if cfg.cond.active else None)

    # ---------------------------------------------------------------- pieces
    def embed(self, inputs: Tensor, puzzle_ids: Tensor | None = None) -> Tensor:
        """Input injection x: scaled token embedding (+ positions), after the prefix of ``puzzle_emb_len``
        positions whose first holds the puzzle embedding and the rest zeros (TRM's padding of a
        ``hidden_size``-wide puzzle embedding to ``puzzle_emb_len`` positions)."""
        x = self.tok_emb(inputs)
        if self.puzzle_emb is not None:
            if puzzle_ids is None:
                if self.cfg.n_puzzles > 1:
                    raise ValueError(f"this model has {self.cfg.n_puzzles} puzzle embeddings: pass puzzle_ids")
                puzzle_ids = torch.zeros(inputs.shape[0], dtype=torch.long, device=inputs.device)
            B, d = inputs.shape[0], self.cfg.d_model
            prefix = x.new_zeros(B, self.cfg.puzzle_emb_len, d)
            prefix[:, 0] = self.puzzle_emb(puzzle_ids)
            x = torch.cat([prefix, x], dim=1)
        if isinstance(self.pos_emb, nn.Parameter):
            x = x + self.pos_emb
        elif self.pos_emb is not None:
            x = x + self.pos_emb()
        return self.embed_scale * x

    def block(self, h: Tensor, mod: list | None = None) -> Tensor:
        """The shared block f_theta. A pre-norm stack ends with a final RMSNorm (as pre-norm
        Transformers do before their head): without it the residual stream, and with it a state that
        is fed back again and again, would grow without bound. ``mod``: timestep modulation per layer."""
        for i, layer in enumerate(self.layers):
            h = layer(h, mod[i] if mod is not None else None)
        if self.cfg.norm == "pre":
            h = rms_norm(h, self.cfg.norm_eps)
        return h

    def initial_carry(self, batch_size: int, device: torch.device | str | None = None) -> Carry:
        """The state before the first update: y_0 = y_init and z_0 = z_init at every position."""
        device = device if device is not None else self.y_init.device
        S, d = self.cfg.seq_len + self.cfg.prefix, self.cfg.d_model
        y0 = self.y_init.to(device).expand(batch_size, S, d)
        z0 = self.z_init.to(device).expand(batch_size, S, d)
        carry = {"y": self.conn_outer.init(y0), "z": self.conn_inner.init(z0)}
        if self.cond is not None:
            carry["cond"] = self.cond.init(y0)
        if not self.cfg.recall:  # the samples whose initial states still wait for their input (the next update)
            carry["fresh"] = {"mask": torch.ones(batch_size, dtype=torch.bool, device=device)}
        return carry

    def reset_carry(self, carry: Carry, mask: Tensor) -> Carry:
        """Restart the samples where ``mask`` is true (a halted sequence takes a new puzzle)."""
        fresh = self.initial_carry(mask.shape[0], mask.device)
        out = {
            "y": self.conn_outer.reset(carry["y"], mask, fresh["y"]["h"]),
            "z": self.conn_inner.reset(carry["z"], mask, fresh["z"]["h"]),
        }
        if self.cond is not None:
            out["cond"] = self.cond.reset(carry["cond"], mask)
        if not self.cfg.recall:
            out["fresh"] = {"mask": carry["fresh"]["mask"] | mask}
        return out

    @staticmethod
    def detach_carry(carry: Carry) -> Carry:
        return {axis: Connection.detach(state) for axis, state in carry.items()}

    def outer_update(self, carry: Carry, x: Tensor, horizon: int | None = None) -> tuple[Carry, dict[str, Tensor]]:
        """One outer update: L inner updates of the latent z, then one update of the answer y.

        With conditioners, F reads y_in = cond.read(y) (history / initial-state injection with h0 = x)
        where the unconditioned model reads y, and sees t = l / horizon (``horizon``: L_infer, default the
        training horizon ``cond.horizon``). Diagnostics per token: gamma and score of the outer step, and
        the mean of the inner steps.
        """
        z_state, y_state = carry["z"], carry["y"]
        if not self.cfg.recall:  # the input enters the states once, at a sample's first update
            fresh = carry["fresh"]["mask"]
            y_state = self.conn_outer.reset(y_state, fresh, self.y_init + x)
            z_state = self.conn_inner.reset(z_state, fresh, self.z_init + x)
            x = torch.zeros((), dtype=x.dtype, device=x.device)
        y = y_state["h"]
        y_in, mod, t = y, None, None
        if self.cond is not None:
            cond = carry["cond"]
            if self.cfg.cond.uses_horizon:
                t = self.cond.time(cond, horizon or self.cfg.cond.horizon)
                mod = self.cond.modulation(t)
            y_in = self.cond.read(cond, y, x)
        g_in, s_in, z_cand = [], [], None
        for _ in range(self.cfg.L):
            z_cand = self.block(z_state["h"] + y_in + x, mod)
            z_state, _, diag = self.conn_inner.step(z_state, z_cand)
            g_in.append(diag["gamma"])
            s_in.append(diag["score"])
        y_cand = self.block(y_in + z_state["h"], mod)
        if t is not None:
            y_cand = self.cond.gate(t, y, y_cand)
        y_state, _, diag = self.conn_outer.step(y_state, y_cand)
        # y_cand is the candidate z_t whose content score s_t is score_outer (eq. 2)
        out = {"gamma_outer": diag["gamma"], "score_outer": diag["score"], "candidate_outer": y_cand}
        if g_in:
            out["gamma_inner"] = torch.stack(g_in).mean(0)
            out["score_inner"] = torch.stack(s_in).mean(0)
            out["candidate_inner"] = z_cand  # the last inner candidate
        new = {"y": y_state, "z": z_state}
        if self.cond is not None:
            new["cond"] = self.cond.advance(carry["cond"], y)
        if not self.cfg.recall:
            new["fresh"] = {"mask": torch.zeros_like(carry["fresh"]["mask"])}
        return new, out

    def logits(self, y: Tensor) -> Tensor:
        """lm head on the grid positions of an answer state (or of an outer candidate), [B, seq_len, vocab]."""
        return self.lm_head(y[:, self.cfg.prefix:])

    def readout(self, carry: Carry) -> tuple[Tensor, Tensor]:
        """lm head on the answer state (grid positions) and halting logit from its first position."""
        y = carry["y"]["h"]
        return self.logits(y), self.q_head(y[:, 0]).squeeze(-1)

    # ---------------------------------------------------------------- training / evaluation
    def forward(self, carry: Carry, inputs: Tensor, puzzle_ids: Tensor | None = None,
                progressive: tuple[int, int] | None = None) -> tuple[Carry, Tensor, Tensor, dict[str, Tensor]]:
        """One supervision segment: H outer updates, gradients through the last ``grad_outer``.

        Returns the carry for the next segment (detached), logits ``[B, seq_len, vocab]``, the halting
        logit ``[B]`` and the diagnostics of the last outer update. With ``progressive = (n, k)`` the
        diagnostics also hold ``progressive_logits``: the readout after n updates without and k with gradients
        from the same starting state (the progressive loss's output, ``train.progressive``).
        """
        x = self.embed(inputs, puzzle_ids)
        start = carry = self.detach_carry(carry)
        carry, diag = self._updates(carry, x, self.cfg.H - self.cfg.grad_outer, self.cfg.grad_outer)
        logits, q_halt = self.readout(carry)
        if progressive is not None:
            diag = {**diag, "progressive_logits": self.logits(self._updates(start, x, *progressive)[0]["y"]["h"])}
        return self.detach_carry(carry), logits, q_halt, diag

    def _updates(self, carry: Carry, x: Tensor, n_free: int, n_grad: int) -> tuple[Carry, dict[str, Tensor]]:
        """``n_free`` outer updates without gradients, then ``n_grad`` >= 1 with them: the carry and the last
        update's diagnostics."""
        if n_free:
            with torch.no_grad():
                for _ in range(n_free):
                    carry, _ = self.outer_update(carry, x)
        for _ in range(n_grad):
            carry, diag = self.outer_update(carry, x)
        return carry, diag

    @torch.no_grad()
    def iterate(self, inputs: Tensor, n_updates: int, puzzle_ids: Tensor | None = None,
                carry: Carry | None = None, horizon: int | None = None
                ) -> Iterator[tuple[int, Carry, dict[str, Tensor]]]:
        """Run ``n_updates`` outer updates without gradients, yielding ``(k, carry, diag)`` after each.

        Nothing is kept between updates except the carry, so memory does not grow with ``n_updates``
        (for connections with O(d) state). A timestep-conditioned model is told the budget:
        L_infer = ``horizon``, by default ``n_updates`` (so its state at k < n_updates is not the state
        of a run with budget k; the other models do not depend on it).
        """
        x = self.embed(inputs, puzzle_ids)
        if carry is None:
            carry = self.initial_carry(inputs.shape[0], inputs.device)
        horizon = horizon or n_updates
        for k in range(1, n_updates + 1):
            carry, diag = self.outer_update(carry, x, horizon)
            yield k, carry, diag

    def resized(self, grid: tuple[int, int]) -> LoopedReasoner:
        """The same weights on a grid of another size (a longer sequence is a 1 x N grid): a new model sharing
        this one's parameters, for a size-agnostic configuration (``ModelConfig.size_agnostic``); ValueError
        naming what ties the weights to the training size otherwise."""
        if not self.cfg.size_agnostic:
            raise ValueError(f"this model's weights depend on its grid size (mixer={self.cfg.mixer!r}, "
                             f"pos={self.cfg.pos!r}): only attention with rope or no positions runs on other sizes")
        like = self.y_init
        other = LoopedReasoner(self.cfg.at_grid(grid))
        other = other.to(device=like.device, dtype=like.dtype)
        other.load_state_dict(self.state_dict())
        return other.train(self.training)

    # ---------------------------------------------------------------- accounting
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def connection_params(self) -> int:
        return sum(p.numel() for p in self.conn_inner.parameters()) + sum(
            p.numel() for p in self.conn_outer.parameters())

    def conditioner_params(self) -> int:
        return sum(p.numel() for p in self.cond.parameters()) if self.cond is not None else 0

    def unused_parameters(self) -> list[str]:
        """The names of the parameters this configuration never uses (no gradient at any step; ``no_content_score``
        leaves each axis's q unused): frozen before DistributedDataParallel wraps the model."""
        return [f"{name}.{p}" for name, m in (("conn_inner", self.conn_inner), ("conn_outer", self.conn_outer))
                for p in m.unused_parameters()]
