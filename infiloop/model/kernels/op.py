"""The InfiLoop step as a PyTorch custom operator, ``torch.ops.infiloop.step`` (eq. 4/5 in log space).

``torch.compile`` cannot trace into a Triton launch wrapped in an ``autograd.Function`` with its lazy
imports: every connection step used to break the graph. Declared as a custom operator, the step is one
opaque node of the graph with

- a fake-tensor rule (output shapes and dtypes, those of ``reference.infiloop_step``), so Dynamo and
  Inductor trace the whole model around it without running it;
- an autograd rule whose backward is a second operator, ``infiloop::step_backward``, so the backward
  graph compiles too.

The operator has two bodies, chosen by its ``impl`` argument when the model is built
(``kernels.resolve_backend``): ``"triton"``, the fused kernels of ``triton_step.py`` (a CUDA device, or
the CPU under ``TRITON_INTERPRET=1``), and ``"reference"``, the eager reference behind the same
operator boundary. The second is the CUDA dispatch path with the reference step in place of the
kernel: it is how the tests check, on the CPU, that the path a GPU takes compiles without a break and
equals eager in forward and backward.
"""


import torch
from torch import Tensor

from . import triton_step
from .reference import infiloop_step as reference_step
from .reference import infiloop_step_backward as reference_step_backward

IMPLS = ("triton", "reference")


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"infiloop::step: impl must be one of {IMPLS}, got {impl!r}")


@torch.library.custom_op("infiloop::step", mutates_args=())
def step_op(z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor, score_clip: float | None,
            eps: float, content: bool, impl: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One streaming step: ``(h_t, log D_t, gamma_t, s_t)`` (contract: ``reference.infiloop_step``, hard clip)."""
    _check_impl(impl)
    if impl == "triton":
        return triton_step.forward_rows(z, h, log_d, q, log_beta, score_clip, eps, content)
    with torch.no_grad():  # every output of the reference is a new tensor: none aliases an input
        return reference_step(z, h, log_d, q, log_beta, score_clip, eps, content)


@step_op.register_fake
def _step_fake(z, h, log_d, q, log_beta, score_clip, eps, content, impl):
    h_dt, g_dt, s_dt = triton_step.out_dtypes(z, h, log_d)
    lead = z.shape[:-1]
    return (z.new_empty(z.shape, dtype=h_dt), z.new_empty(lead, dtype=g_dt), z.new_empty(lead, dtype=g_dt),
            z.new_empty(lead, dtype=s_dt))


@torch.library.custom_op("infiloop::step_backward", mutates_args=())
def step_backward_op(z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor, g_h: Tensor, g_ld: Tensor,
                     g_g: Tensor, g_s: Tensor, score_clip: float | None, eps: float, content: bool,
                     impl: str) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of ``(z, h, log D, q, log beta)`` of one step from those of its four outputs."""
    _check_impl(impl)
    if impl == "triton":
        return triton_step.backward_rows(z, h, log_d, q, log_beta, g_h, g_ld, g_g, g_s, score_clip, eps, content)
    return reference_step_backward(z, h, log_d, q, log_beta, g_h, g_ld, g_g, g_s, score_clip, eps, content)


@step_backward_op.register_fake
def _step_backward_fake(z, h, log_d, q, log_beta, g_h, g_ld, g_g, g_s, score_clip, eps, content, impl):
    return tuple(torch.empty_like(t) for t in (z, h, log_d, q, log_beta))


def _setup_context(ctx, inputs, output):
    z, h, log_d, q, log_beta, score_clip, eps, content, impl = inputs
    ctx.save_for_backward(z, h, log_d, q, log_beta)
    ctx.cfg = (score_clip, eps, content, impl)
    ctx.out_meta = [(o.shape, o.dtype) for o in output]


def _backward(ctx, g_h, g_ld, g_g, g_s):
    z, h, log_d, q, log_beta = ctx.saved_tensors
    score_clip, eps, content, impl = ctx.cfg
    # outputs that got no gradient count as zero
    grads = [g if g is not None else z.new_zeros(shape, dtype=dt)
             for g, (shape, dt) in zip((g_h, g_ld, g_g, g_s), ctx.out_meta)]
    dz, dh, dld, dq, dlb = step_backward_op(z, h, log_d, q, log_beta, *grads, score_clip, eps, content, impl)
    # without the content score q plays no part: no gradient at all, as in the reference
    return dz, dh, dld, (dq if content else None), dlb, None, None, None, None


step_op.register_autograd(_backward, setup_context=_setup_context)


def fused_step(z: Tensor, h: Tensor, log_d: Tensor, q: Tensor, log_beta: Tensor, score_clip: float | None,
               eps: float, content: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One InfiLoop step (eq. 4/5, log space) in the fused Triton kernels, through the custom operator:
    ``(h_t, log D_t, gamma_t, s_t)`` with the shapes, dtypes and gradients of ``reference.infiloop_step``.

    ``score_clip`` is a hard upper clamp (zero gradient where it binds, as ``torch.clamp``);
    ``content=False`` makes s_t = 0 (q gets no gradient). Float32 arithmetic inside whatever the storage dtype.
    """
    if not triton_step.HAS_TRITON:
        raise RuntimeError("fused_step needs the triton package")
    triton_step.check_inputs(z, h, log_d, q, log_beta)
    return step_op(z, h, log_d, q, log_beta, score_clip, eps, content, "triton")
