"""Kernels for the InfiLoop streaming step.

``infiloop_step`` dispatches between the eager reference (``reference.py``) and a fused Triton kernel
(``triton_step.py``, when present and usable). ``backend``: ``"auto"`` (Triton on CUDA tensors,
eager elsewhere), ``"eager"`` or ``"triton"`` (forced; under ``TRITON_INTERPRET=1`` the Triton kernel
also runs on CPU tensors, which is how the tests check it without a GPU).
"""

from __future__ import annotations

import importlib
import os

from torch import Tensor

from .reference import CLIP_MODES, bound_score, content_score, infiloop_init, raw_score, rms_normalize, score_slope
from .reference import infiloop_step as eager_step

BACKENDS = ("auto", "eager", "triton")

__all__ = ["BACKENDS", "CLIP_MODES", "bound_score", "content_score", "infiloop_init", "infiloop_step", "raw_score",
           "rms_normalize", "score_slope", "triton_available"]


def _triton_module():
    try:
        return importlib.import_module(".triton_step", __package__)
    except ImportError:
        return None


def triton_available(device_type: str = "cuda") -> bool:
    """True when the fused kernel can run on tensors of this device type."""
    mod = _triton_module()
    if mod is None or not getattr(mod, "HAS_TRITON", False):
        return False
    return device_type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def infiloop_step(
    z: Tensor,
    h: Tensor,
    log_d: Tensor,
    q: Tensor,
    log_beta: Tensor,
    score_clip: float | None,
    eps: float,
    content: bool = True,
    backend: str = "auto",
    clip_mode: str = "hard",
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One InfiLoop step (eq. 5 in log space); see ``reference.infiloop_step`` for the contract.

    The fused kernel implements the paper's hard clip (or none); the soft cap of the connection study
    (``clip_mode="soft"``) runs the eager reference under ``auto`` and is refused under ``triton``."""
    if backend not in BACKENDS:
        raise ValueError(f"kernel backend must be one of {BACKENDS}, got {backend!r}")
    soft = clip_mode == "soft" and score_clip is not None
    if backend == "triton" and soft:
        raise ValueError("backend='triton' implements the hard score clip only; use backend 'eager' or 'auto' "
                         "for clip_mode='soft'")
    use_triton = backend == "triton" or (backend == "auto" and not soft and z.is_cuda and triton_available("cuda"))
    if use_triton:
        if not triton_available(z.device.type):
            raise RuntimeError(
                "backend='triton' needs the Triton package and a CUDA tensor "
                "(or TRITON_INTERPRET=1 for CPU tensors)"
            )
        return _triton_module().fused_step(z, h, log_d, q, log_beta, score_clip, eps, content)
    return eager_step(z, h, log_d, q, log_beta, score_clip, eps, content, clip_mode)
