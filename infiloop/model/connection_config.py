"""The settings of the loop connection on one recurrent axis (``ModelConfig.inner``, ``ModelConfig.outer``): one
record that every member reads (``connections.py``), checked as a whole here and, for the settings only one member
reads, by that member's ``check_settings``."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..config import from_dict, hash_rule
from .kernels import BACKENDS, CLIP_MODES
from .registry import CONNECTION_REGISTRY

DECAY_MODES = ("learned", "fixed", "uniform", "reverse")


@dataclass
class ConnectionConfig:
    """Configuration of the connection on one recurrent axis (all members share this record).

    name: a registered connection (``CONNECTIONS``, or one added by ``register_connection``).
    beta: InfiLoop's beta_0 (``learned``: initial value; ``fixed``/``reverse``: the value used).
    decay: InfiLoop's decay mode, one of ``DECAY_MODES``; ``uniform`` is beta = 1.
    content_score: InfiLoop's content score on (s_t = q^T RMSNorm(z_t)) or off (s_t = 0).
    score_clip: upper bound on s_t (the paper uses 8.0); ``None`` for no clip.
    clip_mode: how the bound acts: ``hard`` (min(s, clip), the paper's) or ``soft`` (clip * tanh(s / clip)).
    z0_candidate: the initial state is the candidate z_0 of eq. 2 (h_0 = z_0 with weight e_0; True) or holds
        no weight (gamma_1 = 1; False).
    history_grad: the gradient of log D_{t-1} with respect to q and lambda through the scores and ages of
        the detached history (training only). Deep supervision detaches the state, so without it the
        gradient treats the retained mass beta D_{t-1} as a constant; with it the derivative of gamma_t is
        the one of eq. 2 with the old candidates held fixed. Costs a second O(d) vector per token in training
        (``u``: the alpha-weighted mean of the normalised candidates) and a scalar (the mean age).
    eps: added to the mean square in RMSNorm.
    gamma: the fixed step size of ``ema``.
    n_queries: number of per-step queries of ``full_attnres`` (steps past it reuse the last query).
    fprm_decay_train / fprm_decay_eval / fprm_patience / fprm_halt_tol: FPRM's step-size schedule.
    backend: kernel for the InfiLoop step, one of ``kernels.BACKENDS``.
    """

    name: str = "infiloop"
    beta: float = 0.55
    decay: str = "learned"
    content_score: bool = True
    score_clip: float | None = 8.0
    # InfiLoop's own switches, added after runs were cached: in a run's hash only for InfiLoop, and only off the paper's
    clip_mode: str = field(default="hard", metadata=hash_rule(neutral="hard", only_for=("infiloop",)))
    z0_candidate: bool = field(default=True, metadata=hash_rule(neutral=True, only_for=("infiloop",)))
    history_grad: bool = field(default=False, metadata=hash_rule(neutral=False, only_for=("infiloop",)))
    eps: float = 1e-6
    gamma: float = 0.5
    n_queries: int = 64
    fprm_decay_train: float = 0.9
    fprm_decay_eval: float = 0.99
    fprm_patience: int = 5
    fprm_halt_tol: float = 1e-4
    backend: str = "auto"

    def validate(self, where: str = "connection") -> None:
        def bad(field: str, msg: str) -> None:
            raise ValueError(f"{where}.{field}: {msg}")

        if self.name not in CONNECTION_REGISTRY:
            bad("name", f"unknown connection {self.name!r}; valid choices: {', '.join(CONNECTION_REGISTRY)}")
        if self.decay not in DECAY_MODES:
            bad("decay", f"unknown decay mode {self.decay!r}; valid choices: {', '.join(DECAY_MODES)}")
        if self.score_clip is not None and not (math.isfinite(self.score_clip) and (
                self.clip_mode == "hard" or self.score_clip > 0)):
            bad("score_clip", f"must be a finite number (positive for the soft cap) or None, got {self.score_clip}")
        if self.clip_mode not in CLIP_MODES:
            bad("clip_mode", f"unknown clip mode {self.clip_mode!r}; valid choices: {', '.join(CLIP_MODES)}")
        if not self.eps > 0:
            bad("eps", f"must be positive, got {self.eps}")
        if self.backend not in BACKENDS:
            bad("backend", f"unknown kernel backend {self.backend!r}; valid choices: {', '.join(BACKENDS)}")
        CONNECTION_REGISTRY[self.name].member.check_settings(self, bad)  # the settings only this connection reads

    @classmethod
    def from_dict(cls, d: dict, where: str = "connection") -> ConnectionConfig:
        return from_dict(cls, d, where)

    def to_dict(self) -> dict:
        return asdict(self)
