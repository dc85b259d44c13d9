"""Conditioners of the recurrent core between loops (the looped-LM study).

The study writes a looped model as ``h_{l+1} = F(h_l; c_l)`` with a conditioning signal ``c_l``. Here the
loop is the **outer axis**: ``h_l`` is the answer state y after ``l`` outer updates (counted per sample from
its start, across deep-supervision segments), and ``F`` is one outer update (L inner updates of z, then
the update of y, with the loop connection of each axis). That is the axis run past the training depth at
test time. A conditioner changes what F reads and how its output is taken; the loop connections are left
as they are, so every conditioner composes with every connection.

Three families, each a field of ``ConditionConfig``, composable with one another:

* Initial-state injection (``inject``), with ``h0 = x`` the embedded input (the study's ``h_0``, the
  embedded prompt). F reads ``I(h, h0)`` in place of y:

    scalar    I = h + alpha * h0                      alpha = 0
    channel   I = a * h + b * h0                      a = 1, b = 0
    residual  I = (1 + delta_a) * h + b * h0          delta_a = 0, b = 0
    dense     I = W_h h + W_0 h0                      W_h = identity, W_0 = 0

* History-state injection (``history``, window ``w``): F reads
  ``h_l + sum_{j=1..m_l} B_j (h_{l-j} - h_l)`` with ``m_l = min(w, max(l - 1, 0))``, ``B_j`` a scalar, a
  channel vector or a dense matrix, all zero at initialisation. The state keeps the last ``w`` answer
  states in a ring: O(w d) per token, whatever the number of updates.

* Timestep conditioning (``timestep``) on ``t_l = l / L_infer``: ``L_infer`` is ``horizon`` in training
  (the training depth) and the evaluation budget at test time, so t stays in [0, 1) for any budget. The
  study names the variants and not their formulas; this project's forms, each the identity at
  initialisation (the last layer of the time MLP is zero):

    loop_gating    h_{l+1} = h_l + g(t) * (F(.) - h_l)               gate per channel on the loop update
    branch_gating  x <- norm(x + g_i(t) * sub_i(x))                  gate per channel on every branch i
    adaln          x <- norm(x + sub_i(x)) * (1 + s_i(t)) + b_i(t)   modulation of every norm
                   (pre-norm blocks: x <- x + sub_i(norm(x) * (1 + s_i(t)) + b_i(t)))

  with gates ``g = 1 + tanh(MLP(phi(t)))`` in (0, 2), AdaLN's ``s, b = MLP(phi(t))``, and
  ``phi(t) = [sin(pi k t), cos(pi k t)]``, k = 1..``t_freqs``: smooth in t, so that a budget longer than the
  training horizon, which visits t between the training points, gets gates between the trained ones. (A
  first version used geometric frequencies up to 32 pi: at the training points t = l / 16 the highest
  ones were constant, the gates learned there oscillated, and every other budget collapsed to 0 %.)
  Every block application within outer update l sees the same t_l.

With the initial values above, a conditioned model computes exactly what the unconditioned one does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from ..config import from_dict

INJECTIONS = ("none", "scalar", "channel", "residual", "dense")
HISTORY_MAPS = ("none", "scalar", "channel", "dense")
TIMESTEPS = ("none", "loop_gating", "branch_gating", "adaln")

State = dict[str, Tensor]


@dataclass
class ConditionConfig:
    """Which conditioners wrap the shared block (all ``"none"``: the unconditioned baseline).

    inject: initial-state injection, one of ``INJECTIONS``.
    history: the map B_j of history-state injection, one of ``HISTORY_MAPS``; ``window`` is w.
    timestep: timestep conditioning, one of ``TIMESTEPS``.
    horizon: L_infer in training (outer updates); the experiments fill in the training depth.
    t_freqs, t_hidden: sinusoidal frequencies of phi(t) (k = 1..t_freqs, at most t_freqs / 2 periods on
        [0, 1]; fewer than ``horizon``, so that the training points resolve them) and the hidden width
        of the time MLP.
    """

    inject: str = "none"
    history: str = "none"
    window: int = 1
    timestep: str = "none"
    horizon: int = 0
    t_freqs: int = 4
    t_hidden: int = 64

    @property
    def active(self) -> bool:
        return (self.inject, self.history, self.timestep) != ("none", "none", "none")

    @property
    def uses_horizon(self) -> bool:
        """True when the model's output depends on the budget it is told (timestep conditioning)."""
        return self.timestep != "none"

    def validate(self, where: str = "model.cond") -> None:
        def bad(f: str, msg: str) -> None:
            raise ValueError(f"{where}.{f}: {msg}")

        for f, choices in (("inject", INJECTIONS), ("history", HISTORY_MAPS), ("timestep", TIMESTEPS)):
            if getattr(self, f) not in choices:
                bad(f, f"unknown choice {getattr(self, f)!r}; valid choices: {', '.join(choices)}")
        if self.window < 1:
            bad("window", f"the history window w must be at least 1, got {self.window}")
        if self.uses_horizon and self.horizon < 1:
            bad("horizon", f"timestep conditioning {self.timestep!r} needs the training horizon L_infer >= 1 "
                           f"(outer updates a sample sees in training), got {self.horizon}")
        if self.horizon < 0:
            bad("horizon", f"must be >= 0, got {self.horizon}")
        if self.t_freqs < 1 or self.t_hidden < 1:
            bad("t_freqs" if self.t_freqs < 1 else "t_hidden", "must be a positive integer")
        if self.uses_horizon and self.t_freqs >= self.horizon:
            bad("t_freqs", f"{self.t_freqs} frequencies alias at the {self.horizon} training points t = l / horizon "
                           f"(t_freqs / 2 periods need more than t_freqs samples): use t_freqs < {self.horizon}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "model.cond") -> ConditionConfig:
        return from_dict(cls, d, where)


def time_features(t: Tensor, n_freqs: int) -> Tensor:
    """phi(t) = [sin(pi k t), cos(pi k t)], k = 1..n_freqs, for t of shape [B]: [B, 2 n_freqs]."""
    freqs = math.pi * torch.arange(1, n_freqs + 1, device=t.device, dtype=t.dtype)
    a = t[:, None] * freqs
    return torch.cat([a.sin(), a.cos()], dim=-1)


class TimeMLP(nn.Module):
    """phi(t) -> Linear -> SiLU -> Linear (zero-initialised), giving ``n_out`` vectors of size d per sample."""

    def __init__(self, n_freqs: int, hidden: int, d: int, n_out: int):
        super().__init__()
        self.n_freqs, self.d, self.n_out = n_freqs, d, n_out
        self.fc1 = nn.Linear(2 * n_freqs, hidden)
        self.fc2 = nn.Linear(hidden, n_out * d)
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, t: Tensor) -> Tensor:
        phi = time_features(t.to(self.fc1.weight.dtype), self.n_freqs)
        return self.fc2(nn.functional.silu(self.fc1(phi))).view(-1, self.n_out, 1, self.d)  # [B, n_out, 1, d]


class Conditioner(nn.Module):
    """All conditioners of one model (``cfg.active`` false: an empty module the model never calls).

    State (sample axis first, as the loop connections'): ``step`` [B] int64, the outer updates done;
    ``hist`` [B, w, S, d], the states h_{l-1}, ..., h_{l-w} (history injection only).
    """

    def __init__(self, cfg: ConditionConfig, d: int, n_layers: int, n_subs: int):
        super().__init__()
        cfg.validate()
        self.cfg, self.d, self.n_layers, self.n_subs = cfg, d, n_layers, n_subs
        # initial-state injection
        if cfg.inject == "scalar":
            self.alpha = nn.Parameter(torch.zeros(()))
        elif cfg.inject == "channel":
            self.a, self.b = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))
        elif cfg.inject == "residual":
            self.delta_a, self.b = nn.Parameter(torch.zeros(d)), nn.Parameter(torch.zeros(d))
        elif cfg.inject == "dense":
            self.W_h, self.W_0 = nn.Parameter(torch.eye(d)), nn.Parameter(torch.zeros(d, d))
        # history-state injection: B_j, j = 1..w
        shape = {"none": None, "scalar": (cfg.window,), "channel": (cfg.window, d), "dense": (cfg.window, d, d)}
        self.B = nn.Parameter(torch.zeros(shape[cfg.history])) if cfg.history != "none" else None
        # timestep conditioning
        n_out = {"none": 0, "loop_gating": 1, "branch_gating": n_layers * n_subs, "adaln": 2 * n_layers * n_subs}
        self.time_mlp = (TimeMLP(cfg.t_freqs, cfg.t_hidden, d, n_out[cfg.timestep])
                         if cfg.timestep != "none" else None)

    # ------------------------------------------------------------------ state
    def init(self, y0: Tensor) -> State:
        B = y0.shape[0]
        state = {"step": torch.zeros(B, dtype=torch.long, device=y0.device)}
        if self.B is not None:
            state["hist"] = y0.new_zeros((B, self.cfg.window, *y0.shape[1:]))
        return state

    def reset(self, state: State, mask: Tensor) -> State:
        """Restart the samples where ``mask`` is true: no updates done, empty history."""
        out = {"step": torch.where(mask, torch.zeros_like(state["step"]), state["step"])}
        if "hist" in state:
            m = mask.view(-1, *([1] * (state["hist"].ndim - 1)))
            out["hist"] = torch.where(m, torch.zeros_like(state["hist"]), state["hist"])
        return out

    def advance(self, state: State, h: Tensor) -> State:
        """After outer update l: push h_l into the history ring (dropping h_{l-w}) and count the update."""
        out = {"step": state["step"] + 1}
        if "hist" in state:
            out["hist"] = torch.cat([h.unsqueeze(1), state["hist"][:, :-1]], dim=1)
        return out

    # ------------------------------------------------------------------ what F reads
    def history_term(self, state: State, h: Tensor) -> Tensor:
        """sum_{j=1..m_l} B_j (h_{l-j} - h_l), m_l = min(w, max(l - 1, 0)), per sample."""
        step, hist = state["step"], state["hist"]
        out = torch.zeros_like(h)
        for j in range(1, self.cfg.window + 1):
            diff = hist[:, j - 1] - h
            term = diff @ self.B[j - 1].T if self.cfg.history == "dense" else self.B[j - 1] * diff
            active = (step >= j + 1).view(-1, *([1] * (h.ndim - 1)))  # j <= l - 1
            out = out + torch.where(active, term, torch.zeros_like(term))
        return out

    def inject(self, h: Tensor, h0: Tensor) -> Tensor:
        """Initial-state injection I(h, h0)."""
        kind = self.cfg.inject
        if kind == "scalar":
            return h + self.alpha * h0
        if kind == "channel":
            return self.a * h + self.b * h0
        if kind == "residual":
            return (1 + self.delta_a) * h + self.b * h0
        if kind == "dense":
            return h @ self.W_h.T + h0 @ self.W_0.T
        return h

    def read(self, state: State, h: Tensor, h0: Tensor) -> Tensor:
        """What F reads in place of h_l: history injection first, then initial-state injection."""
        if self.B is not None:
            h = h + self.history_term(state, h)
        return self.inject(h, h0)

    # ------------------------------------------------------------------ timestep conditioning
    def time(self, state: State, horizon: int) -> Tensor:
        """t_l = l / L_infer per sample, [B]."""
        return state["step"].float() / float(horizon)

    def modulation(self, t: Tensor) -> list[list[dict[str, Tensor]]] | None:
        """Per layer and branch: ``{"gate"}`` (branch gating) or ``{"scale", "shift"}`` (AdaLN), [B, 1, d]."""
        if self.cfg.timestep not in ("branch_gating", "adaln"):
            return None
        out = self.time_mlp(t)
        L, S = self.n_layers, self.n_subs
        if self.cfg.timestep == "branch_gating":
            return [[{"gate": 1 + torch.tanh(out[:, i * S + s])} for s in range(S)] for i in range(L)]
        return [[{"scale": 1 + out[:, 2 * (i * S + s)], "shift": out[:, 2 * (i * S + s) + 1]} for s in range(S)]
                for i in range(L)]

    def gate(self, t: Tensor, h: Tensor, h_new: Tensor) -> Tensor:
        """Loop gating: h_l + g(t) * (h_new - h_l) with g = 1 + tanh(G(t)) in (0, 2), written as
        h_new + tanh(G) * (h_new - h_l) so that G = 0 returns h_new bit for bit. The identity on h_new for
        the other variants."""
        if self.cfg.timestep != "loop_gating":
            return h_new
        return h_new + self._gate_offset(t) * (h_new - h)

    def _gate_offset(self, t: Tensor) -> Tensor:
        return torch.tanh(self.time_mlp(t)[:, 0])

    def loop_gate(self, t: Tensor) -> Tensor:
        """The loop gate g(t) = 1 + tanh(G(t)) in (0, 2), [B, 1, d] (loop gating only)."""
        if self.cfg.timestep != "loop_gating":
            raise ValueError(f"model.cond.timestep is {self.cfg.timestep!r}: there is no loop gate")
        return 1 + self._gate_offset(t)
