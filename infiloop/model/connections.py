"""The family of loop connections: how a looped reasoner turns its newest candidate into its next state.

Every member has the same small interface (``Connection``):

- ``init(z0) -> state``: the state after the first candidate z_0 (``state["h"]`` is h_0);
- ``step(state, z) -> (state, h, diag)``: take candidate z_t, return the new state, the next input
  h_t and the step's diagnostics ``{"gamma": gamma_t, "score": s_t}`` (one value per token);
- ``reset(state, mask, z0)``: start the rows of the leading (sample) axis where ``mask`` is true afresh;
- ``state_nbytes(state)``: persistent memory held by the state.

Candidates have shape ``[..., d]``; the first axis is the sample axis (FPRM's step size is per
sample), and every state tensor keeps the sample axis first, so that states can be reset, sliced and
gathered per sample (training with halting, several processes, checkpoints). Every member is an
adaptive residual update ``h_t = h_{t-1} + gamma_t (z_t - h_{t-1})`` (eq. 5) except Full Attention
Residuals, whose per-step query re-weights old candidates too.

A member is known by its name once registered (``registry.register_connection``: its class, label and colour in
figures, and recipe); the end of this module registers the package's own.

The module-level functions ``aggregate`` (eq. 2, explicit) and ``stream`` (eq. 4, streaming) are the
public mathematical contract; the ``InfiLoop`` module implements the same map step by step in log space.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .connection_config import ConnectionConfig
from .kernels import (
    content_score,
    infiloop_init,
    infiloop_step,
    raw_score,
    resolve_backend,
    rms_normalize,
    score_slope,
)
from .kernels.probe import triton_fails
from .registry import CONNECTION_REGISTRY, on_both_axes, register_connection

State = dict[str, Tensor]


# --------------------------------------------------------------------------------------------------
# The mathematical contract: eq. 2 (explicit) and eq. 4 (streaming) on whole sequences
# --------------------------------------------------------------------------------------------------


def _log_beta(beta: float | Tensor, like: Tensor) -> Tensor:
    beta = torch.as_tensor(beta, dtype=like.dtype, device=like.device)
    if beta.ndim != 0 or not bool(beta > 0):
        raise ValueError(f"beta must be a positive scalar, got {beta}")
    return beta.log()


def aggregate(z: Tensor, q: Tensor, beta: float | Tensor, score_clip: float | None = 8.0,
              eps: float = 1e-6, clip_mode: str = "hard") -> Tensor:
    """Eq. 2, computed explicitly: ``h_t = sum_{i<=t} alpha_{t,i} z_i``,
    ``alpha_{t,i} = softmax_i(s_i + (t - i) log beta)``, ``s_i = min(q^T RMSNorm(z_i), clip)``.

    ``z``: ``[T, ..., d]`` (candidates along the first axis), ``q``: ``[d]``, ``beta``: scalar.
    Returns h_0..h_{T-1}, shape of ``z``. O(T^2) time and O(T) memory: this is the reference.
    """
    T, d = z.shape[0], z.shape[-1]
    lead = z.shape[1:-1]
    zf = z.reshape(T, -1, d)  # [T, M, d]
    s = content_score(zf, q, score_clip, eps, clip_mode)  # [T, M]
    t = torch.arange(T, device=z.device)
    lag = (t[:, None] - t[None, :]).to(z.dtype)  # [t, i] = t - i
    logits = s[None, :, :] + (lag * _log_beta(beta, z))[:, :, None]  # [t, i, M]
    logits = logits.masked_fill((lag < 0)[:, :, None], float("-inf"))
    alpha = torch.softmax(logits, dim=1)
    h = torch.einsum("tim,imd->tmd", alpha, zf)
    return h.reshape(T, *lead, d)


def stream(z: Tensor, q: Tensor, beta: float | Tensor, score_clip: float | None = 8.0,
           eps: float = 1e-6, clip_mode: str = "hard") -> Tensor:
    """Eq. 4 by the streaming recurrence ``N_t = beta N_{t-1} + e_t z_t``, ``D_t = beta D_{t-1} + e_t``,
    ``h_t = N_t / D_t``: O(d) state per token whatever T.

    N and D are carried with a running scale m_t (``N_t = e^{m_t} N^_t``, same for D) so that no
    exponential can overflow or underflow; the ratio N_t / D_t is unchanged by the common factor.
    Same arguments and result as ``aggregate``.
    """
    log_beta = _log_beta(beta, z)
    out = torch.empty_like(z)
    s = content_score(z, q, score_clip, eps, clip_mode)  # [T, ...]
    m = s[0]
    n_hat, d_hat = z[0].clone(), torch.ones_like(s[0])
    out[0] = z[0]
    for t in range(1, z.shape[0]):
        m_new = torch.maximum(log_beta + m, s[t])
        a, b = torch.exp(log_beta + m - m_new), torch.exp(s[t] - m_new)
        n_hat = a[..., None] * n_hat + b[..., None] * z[t]
        d_hat = a * d_hat + b
        m = m_new
        out[t] = n_hat / d_hat[..., None]
    return out


# --------------------------------------------------------------------------------------------------
# The members
# --------------------------------------------------------------------------------------------------


class Connection(nn.Module):
    """Base class: an adaptive residual update with a state of tensors (``state["h"]`` is h_t)."""

    def __init__(self, cfg: ConnectionConfig, d: int):
        super().__init__()
        self.cfg, self.d = cfg, d

    @staticmethod
    def check_settings(cfg: ConnectionConfig, bad: Callable[[str, str], None]) -> None:
        """Refuse, by ``bad(field, message)``, a value of a setting this connection reads that it cannot run with
        (``ConnectionConfig.validate`` checks the settings every connection shares); none by default."""

    def init(self, z0: Tensor) -> State:
        return {"h": z0}

    def step(self, state: State, z: Tensor) -> tuple[State, Tensor, dict[str, Tensor]]:
        raise NotImplementedError

    def unused_parameters(self) -> tuple[str, ...]:
        """The parameters this configuration never uses: they get no gradient at any step, and
        DistributedDataParallel, which reduces a gradient for every parameter it holds, must not hold them."""
        return ()

    def init_diag(self, state: State) -> dict[str, Tensor]:
        """Diagnostics of the initial state (gamma_0 = 1: h_0 is z_0)."""
        h = state["h"]
        return {"gamma": h.new_ones(h.shape[:-1]), "score": state.get("log_d", h.new_zeros(h.shape[:-1]))}

    def reset(self, state: State, mask: Tensor, z0: Tensor) -> State:
        fresh = self.init(z0)
        out = {}
        for k, v in state.items():
            m = mask.reshape(mask.shape + (1,) * (v.ndim - mask.ndim))
            out[k] = torch.where(m, fresh[k], v)
        return out

    @staticmethod
    def detach(state: State) -> State:
        return {k: v.detach() for k, v in state.items()}

    @staticmethod
    def state_nbytes(state: State) -> int:
        return sum(v.numel() * v.element_size() for v in state.values())

    def extra_repr(self) -> str:
        return f"d={self.d}"


class CarryLast(Connection):
    """Carry-last (TRM, eq. 1): h_t = z_t, i.e. gamma_t = 1."""

    def step(self, state, z):
        ones = z.new_ones(z.shape[:-1])
        return {"h": z}, z, {"gamma": ones, "score": torch.zeros_like(ones)}


class EMA(Connection):
    """Fixed step size: h_t = h_{t-1} + gamma (z_t - h_{t-1})."""

    @staticmethod
    def check_settings(cfg, bad):
        if not 0.0 < cfg.gamma <= 1.0:
            bad("gamma", f"ema needs gamma in (0, 1], got {cfg.gamma}")

    def step(self, state, z):
        g = self.cfg.gamma
        h = state["h"] + g * (z - state["h"])
        gamma = z.new_full(z.shape[:-1], g)
        return {"h": h}, h, {"gamma": gamma, "score": torch.zeros_like(gamma)}


class InfiLoop(Connection):
    """InfiLoop (eq. 2 = eq. 4 = eq. 5): attention over all candidates with content score and decay.

    Parameters: the pseudo-query q (d) and, with learned decay, lambda = softplus(rho) > 0 so that
    beta = exp(-lambda) stays in (0, 1): d + 1 parameters. The state per token is (h_t, log D_t):
    O(d) memory whatever the loop count.
    """

    @staticmethod
    def check_settings(cfg, bad):
        if cfg.decay in ("learned", "fixed") and not 0.0 < cfg.beta < 1.0:
            bad("beta", f"decay {cfg.decay!r} needs beta in (0, 1), got {cfg.beta}")
        if cfg.decay == "reverse" and not cfg.beta > 1.0:
            bad("beta", f"decay 'reverse' needs beta > 1 (the paper uses 1.82), got {cfg.beta}")

    def __init__(self, cfg: ConnectionConfig, d: int):
        super().__init__(cfg, d)
        # The step's kernel: cfg.backend until ``choose_kernels`` resolves it for the model's device, once.
        self.kernel = cfg.backend
        # q = 0 starts every candidate with the same score: the equal-weight baseline gamma -> 1 - beta.
        self.q = nn.Parameter(torch.zeros(d))
        if cfg.decay == "learned":
            lam0 = -math.log(cfg.beta)
            self.rho = nn.Parameter(torch.tensor(math.log(math.expm1(lam0))))
        else:
            # Kept as a Python float so that float64 use is exact (a float32 buffer would round it).
            self.fixed_log_beta = math.log({"fixed": cfg.beta, "reverse": cfg.beta, "uniform": 1.0}[cfg.decay])

    def unused_parameters(self) -> tuple[str, ...]:
        return () if self.cfg.content_score else ("q",)  # s_t = 0: q scores nothing

    def log_beta(self) -> Tensor:
        if self.cfg.decay == "learned":
            return -nn.functional.softplus(self.rho)
        return torch.full((), self.fixed_log_beta, dtype=self.q.dtype, device=self.q.device)

    @property
    def beta(self) -> float:
        return float(self.log_beta().detach().exp())

    def init(self, z0):
        c = self.cfg
        h, log_d, _ = infiloop_init(z0, self.q, c.score_clip, c.eps, c.content_score, c.clip_mode, c.z0_candidate)
        state = {"h": h, "log_d": log_d}
        if self._keeps_history():
            with torch.no_grad():
                u = self._score_direction(z0) if c.z0_candidate else torch.zeros_like(z0)
            state.update(u=u, age=torch.zeros_like(log_d))
        return state

    def _keeps_history(self) -> bool:
        """The history terms of the gradient are kept in training only (evaluation keeps (h, log D))."""
        return self.cfg.history_grad and self.training and (self.cfg.content_score or self.cfg.decay == "learned")

    def _score_direction(self, z: Tensor) -> Tensor:
        """ds/dq of one candidate: its normalised direction times the slope of the clip (0 above a hard clip)."""
        c = self.cfg
        if not c.content_score:
            return torch.zeros_like(z)
        slope = score_slope(raw_score(z, self.q, c.eps), c.score_clip, c.clip_mode)
        return rms_normalize(z, c.eps) * slope.unsqueeze(-1)

    def _with_history_grad(self, state: State, log_beta: Tensor) -> Tensor:
        """log D_{t-1} with the gradient of eq. 2's history attached, value unchanged.

        log D_{t-1} = logsumexp_i (s_i + (t-1-i) log beta), so with the candidates held fixed
        d log D_{t-1}/dq = sum_i alpha_{t-1,i} ds_i/dq = u and d log D_{t-1}/d log beta = sum_i alpha_{t-1,i}
        (t-1-i) = age. Attached once, where the state enters the graph detached (the start of the segment's
        gradient window); inside the window autograd carries it on through log D.
        """
        log_d = state["log_d"]
        if log_d.requires_grad or not torch.is_grad_enabled():
            return log_d
        term = log_d.new_zeros(())
        if self.cfg.content_score:
            qu = state["u"] @ self.q.to(state["u"].dtype)
            term = term + (qu - qu.detach())
        if self.cfg.decay == "learned":
            term = term + (log_beta - log_beta.detach()) * state["age"]
        return log_d + term

    def step(self, state, z):
        c = self.cfg
        log_beta = self.log_beta()
        history = "u" in state
        log_d = self._with_history_grad(state, log_beta) if history else state["log_d"]
        h, log_d, gamma, s = infiloop_step(
            z, state["h"], log_d, self.q, log_beta, c.score_clip, c.eps, c.content_score, backend=self.kernel,
            clip_mode=c.clip_mode,
        )
        new = {"h": h, "log_d": log_d}
        if history:
            with torch.no_grad():  # alpha_{t,t} = gamma_t, alpha_{t,i} = (1 - gamma_t) alpha_{t-1,i}
                g = gamma.detach().unsqueeze(-1).to(z.dtype)
                new["u"] = state["u"] + g * (self._score_direction(z.detach()) - state["u"])
                new["age"] = (1 - gamma.detach()) * (state["age"] + 1)
        return new, h, {"gamma": gamma, "score": s}

    def choose_kernel(self, device: torch.device | str) -> str:
        """Resolve this connection's step for ``device`` (``kernels.resolve_backend``) and keep it. A fused Triton
        kernel is first run once, forward and backward, on a small input on the device; where it fails to build
        or launch, the eager reference (the same numbers, slower) is kept and one warning line says why."""
        device = torch.device(device)
        c = self.cfg
        kernel = resolve_backend(c.backend, device.type, c.clip_mode, c.score_clip)
        if kernel == "triton" and triton_fails(device, self.d):
            kernel = "eager"
        self.kernel = kernel
        return kernel

    def extra_repr(self):
        c = self.cfg
        return (f"kernel={self.kernel}, d={self.d}, decay={c.decay}, beta={self.beta:.4f}, "
                f"content_score={c.content_score}, "
                f"clip={c.score_clip} ({c.clip_mode}), z0_candidate={c.z0_candidate}, history_grad={c.history_grad}")


class FullAttnRes(Connection):
    """Full Attention Residuals: eq. 2 with a learned query per step and no decay, over every stored
    candidate: ``h_t = sum_{i<=t} softmax_i(q_t^T RMSNorm(z_i)) z_i``. The state stores all candidates
    (O(T d) memory) and each step costs O(T d). Not an ``h + gamma (z - h)`` update: the step-t query
    re-weights the old candidates too. Its diagnostics report gamma_t = alpha_{t,t} (weight of z_t).
    Steps past ``n_queries`` reuse the last query. State tensors keep the sample axis first; the
    candidate axis T is the second (``cand: [B, T, ..., d]``).
    """

    @staticmethod
    def check_settings(cfg, bad):
        if cfg.n_queries < 1:
            bad("n_queries", f"must be at least 1, got {cfg.n_queries}")

    def __init__(self, cfg: ConnectionConfig, d: int):
        super().__init__(cfg, d)
        self.queries = nn.Parameter(torch.zeros(cfg.n_queries, d))

    def init(self, z0):
        lead = z0.shape[:-1]
        return {
            "h": z0,
            "cand": z0.unsqueeze(1),
            "valid": torch.ones((lead[0], 1, *lead[1:]), dtype=torch.bool, device=z0.device),
            "t": torch.zeros(lead, dtype=torch.long, device=z0.device),
        }

    def step(self, state, z):
        cand = torch.cat([state["cand"], z.unsqueeze(1)], dim=1)
        valid = torch.cat([state["valid"], torch.ones_like(state["valid"][:, :1])], dim=1)
        t = state["t"] + 1
        keys = cand * torch.rsqrt(cand.pow(2).mean(-1, keepdim=True) + self.cfg.eps)
        q = self.queries[t.clamp(max=self.cfg.n_queries - 1)].unsqueeze(1)  # [B, 1, ..., d]
        s = (keys * q.to(keys.dtype)).sum(-1)
        if self.cfg.score_clip is not None:
            s = s.clamp(max=self.cfg.score_clip)
        s = s.masked_fill(~valid, float("-inf"))  # [B, T, ...]
        alpha = torch.softmax(s, dim=1)
        h = (alpha.unsqueeze(-1) * cand).sum(1)
        new = {"h": h, "cand": cand, "valid": valid, "t": t}
        return new, h, {"gamma": alpha[:, -1], "score": s[:, -1]}

    def reset(self, state, mask, z0):
        m = mask.reshape(mask.shape + (1,) * (z0.ndim - 1 - mask.ndim))  # [B, 1...] over lead dims
        valid = state["valid"] & ~m.unsqueeze(1)
        valid = torch.cat([valid, m.unsqueeze(1).expand_as(valid[:, :1])], dim=1)
        cand = torch.cat([state["cand"], z0.unsqueeze(1)], dim=1)
        h = torch.where(m.unsqueeze(-1), z0, state["h"])
        t = torch.where(m, torch.zeros_like(state["t"]), state["t"])
        return {"h": h, "cand": cand, "valid": valid, "t": t}


class FPRM(Connection):
    """FPRM's damped fixed-point update ``h_t = s z_t + (1 - s) h_{t-1}`` (gamma_t = s).

    Per sample (first axis): s starts at 1 and is multiplied by ``fprm_decay_train`` (training) or
    ``fprm_decay_eval`` (evaluation) whenever the relative residual ||z_t - h_{t-1}|| / ||h_{t-1}|| has
    not improved on its best for ``fprm_patience`` steps. In evaluation a sample halts (gamma = 0 from
    then on) once its residual falls below ``fprm_halt_tol`` (0 disables halting).
    """

    @staticmethod
    def check_settings(cfg, bad):
        for f in ("fprm_decay_train", "fprm_decay_eval"):
            if not 0.0 < getattr(cfg, f) <= 1.0:
                bad(f, f"must be in (0, 1], got {getattr(cfg, f)}")
        if cfg.fprm_patience < 1:
            bad("fprm_patience", f"must be at least 1, got {cfg.fprm_patience}")
        if cfg.fprm_halt_tol < 0:
            bad("fprm_halt_tol", f"must be >= 0, got {cfg.fprm_halt_tol}")

    def init(self, z0):
        n = z0.shape[0]
        return {
            "h": z0,
            "s": z0.new_ones(n),
            "best": z0.new_full((n,), float("inf")),
            "stall": torch.zeros(n, dtype=torch.long, device=z0.device),
            "halted": torch.zeros(n, dtype=torch.bool, device=z0.device),
        }

    def step(self, state, z):
        h = state["h"]
        with torch.no_grad():
            dims = tuple(range(1, z.ndim))
            resid = torch.linalg.vector_norm(z - h, dim=dims) / torch.linalg.vector_norm(h, dim=dims).clamp_min(
                1e-12)
            improved = resid < state["best"]
            best = torch.minimum(state["best"], resid)
            stall = torch.where(improved, torch.zeros_like(state["stall"]), state["stall"] + 1)
            decay = self.cfg.fprm_decay_train if self.training else self.cfg.fprm_decay_eval
            shrink = stall >= self.cfg.fprm_patience
            s = torch.where(shrink, state["s"] * decay, state["s"])
            stall = torch.where(shrink, torch.zeros_like(stall), stall)
            halted = state["halted"]
            if not self.training and self.cfg.fprm_halt_tol > 0:
                halted = halted | (resid < self.cfg.fprm_halt_tol)
            g = torch.where(halted, torch.zeros_like(s), s)
        gamma = g.reshape((-1,) + (1,) * (z.ndim - 1))
        h_new = h + gamma * (z - h)
        new = {"h": h_new, "s": s, "best": best, "stall": stall, "halted": halted}
        gamma_tok = gamma.squeeze(-1).expand(z.shape[:-1])
        return new, h_new, {"gamma": gamma_tok, "score": torch.zeros_like(gamma_tok)}


def choose_kernels(model: nn.Module, device: torch.device | str) -> dict[str, str]:
    """Choose the step of every InfiLoop connection in ``model`` for ``device``, once, when the model is placed
    there (before ``torch.compile``): ``{module name: kernel}`` (``kernels.RESOLVED``)."""
    return {name: m.choose_kernel(device) for name, m in model.named_modules() if isinstance(m, InfiLoop)}


# The members, each with its label and colour in figures (Okabe-Ito, colour-blind-safe) and its recipe. A new connection
# is its class and one line here (or one ``register_connection`` call from outside the package).
register_connection("carry_last", CarryLast, label="carry-last (TRM)", color="#D55E00",  # vermilion
                    recipe=on_both_axes("carry_last"))
# InfiLoop as trained here (docs/connection-study.md): the initial state is not a candidate (candidates are the block's
# outputs, eq. 1) and q and lambda get eq. 2's gradient through the detached history
register_connection("infiloop", InfiLoop, label="InfiLoop", color="#0072B2",  # blue
                    recipe=on_both_axes("infiloop", z0_candidate=False, history_grad=True))
# FPRM: pre-norm block with learned residual scales and the damped fixed-point update
register_connection("fprm", FPRM, label="FPRM", color="#009E73",  # green
                    recipe={"norm": "pre", "residual_scale": True, **on_both_axes("fprm")})
register_connection("full_attnres", FullAttnRes, label="Full AttnRes", color="#CC79A7",  # purple
                    recipe=on_both_axes("full_attnres"))
# no recipe: its fixed-gamma baseline is the looped-LM study's (experiments/looplm.py)
register_connection("ema", EMA, label="fixed-γ EMA", color="#E69F00", recipe=None)  # orange
CONNECTIONS = tuple(CONNECTION_REGISTRY)  # the package's own members


def build_connection(cfg: ConnectionConfig | dict, d: int, where: str = "connection") -> Connection:
    """Make the connection named by ``cfg.name`` for hidden size ``d`` (validates ``cfg`` first)."""
    if isinstance(cfg, dict):
        cfg = ConnectionConfig.from_dict(cfg, where)
    cfg.validate(where)
    return CONNECTION_REGISTRY[cfg.name].member(cfg, d)
