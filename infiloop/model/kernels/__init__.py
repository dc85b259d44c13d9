"""Kernels for the InfiLoop streaming step.

Three ways to take one step (eq. 4/5 in log space), all with the contract of ``reference.infiloop_step``:

- ``"eager"``: the reference in plain PyTorch (``reference.py``), which ``torch.compile`` traces and fuses;
- ``"triton"``: the fused Triton kernels (``triton_step.py``) behind the custom operator
  ``torch.ops.infiloop.step`` (``op.py``), on CUDA tensors (or CPU tensors under ``TRITON_INTERPRET=1``);
- ``"reference_op"``: the same custom operator with the reference as its body: the CUDA dispatch path
  with the kernel swapped for the reference, so that the path a GPU takes is tested on the CPU.

A connection's ``backend`` setting may also be ``"auto"``; :func:`resolve_backend` turns it into one of
the three once, when the model is placed on its device (``connections.choose_kernels``): the kernel on
CUDA where Triton is installed and the hard clip (or none) is used, the eager reference elsewhere.
"""

from __future__ import annotations

import os

from torch import Tensor

from . import triton_step
from .op import fused_step, step_op
from .reference import CLIP_MODES, bound_score, content_score, infiloop_init, raw_score, rms_normalize, score_slope
from .reference import infiloop_step as eager_step

BACKENDS = ("auto", "eager", "triton", "reference_op")
RESOLVED = ("eager", "triton", "reference_op")

__all__ = ["BACKENDS", "CLIP_MODES", "RESOLVED", "bound_score", "content_score", "fused_step", "infiloop_init",
           "infiloop_step", "raw_score", "resolve_backend", "rms_normalize", "score_slope", "triton_available"]


def triton_available(device_type: str = "cuda") -> bool:
    """True when the fused kernel can run on tensors of this device type."""
    if not triton_step.HAS_TRITON:
        return False
    return device_type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def resolve_backend(backend: str, device_type: str, clip_mode: str = "hard", score_clip: float | None = 8.0) -> str:
    """The step a connection with setting ``backend`` takes on ``device_type``: one of :data:`RESOLVED`.

    ``auto``: the fused kernel on CUDA (Triton installed, hard clip or none), the eager reference elsewhere.
    ``triton`` is refused where it cannot run (no Triton, a CPU without ``TRITON_INTERPRET=1``, the soft cap)."""
    if backend not in BACKENDS:
        raise ValueError(f"kernel backend must be one of {BACKENDS}, got {backend!r}")
    soft = clip_mode == "soft" and score_clip is not None
    if backend == "auto":
        return "triton" if device_type == "cuda" and not soft and triton_available("cuda") else "eager"
    if soft and backend != "eager":
        raise ValueError(f"backend={backend!r} implements the hard score clip only; use backend 'eager' or 'auto' "
                         "for clip_mode='soft'")
    if backend == "triton" and not triton_available(device_type):
        raise RuntimeError("backend='triton' needs the Triton package and a CUDA tensor "
                           "(or TRITON_INTERPRET=1 for CPU tensors)")
    return backend


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

    ``backend`` is best resolved once (:func:`resolve_backend`, ``connections.choose_kernels``); anything but
    ``"eager"`` is checked here against ``z``'s device (a static fact that ``torch.compile`` traces)."""
    if backend != "eager":
        backend = resolve_backend(backend, z.device.type, clip_mode, score_clip)
    if backend == "eager":
        return eager_step(z, h, log_d, q, log_beta, score_clip, eps, content, clip_mode)
    triton_step.check_inputs(z, h, log_d, q, log_beta)
    return step_op(z, h, log_d, q, log_beta, score_clip, eps, content, "triton" if backend == "triton" else "reference")
