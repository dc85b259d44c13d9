"""Whether the fused Triton step runs on a device: one forward and backward of it on a small input, in each storage
type a training or an evaluation gives it, asked once per device and hidden size (``connections.choose_kernels``).

A kernel that fails to build or launch there (an old GPU, a Triton without support for it, a driver the bundled
compiler cannot serve) must not stop a training: the InfiLoop connections then take the eager reference step, the
same numbers, slower, and one warning line says why. The float32 and the bfloat16 step are different kernels (the
dtypes are compile-time constants): bf16 candidates with a float32 state are what bf16 autocast gives it on CUDA,
so both are tried.
"""

from __future__ import annotations

import sys

import torch

from .op import fused_step

_TRITON_PROBES: dict[tuple[str, int], str | None] = {}  # (device, d) -> why the kernel fails, or None
PROBED_DTYPES = (torch.float32, torch.bfloat16)  # of the candidates z; the state (h, log D) stays float32


def _probe_once(device: torch.device, d: int) -> str | None:
    g = torch.Generator().manual_seed(0)
    for z_dtype in PROBED_DTYPES:
        z = torch.randn(4, d, generator=g).to(device, z_dtype).requires_grad_()
        h = torch.randn(4, d, generator=g).to(device).requires_grad_()
        q = torch.randn(d, generator=g).to(device).requires_grad_()
        log_d, log_beta = torch.zeros(4, device=device), torch.tensor(-0.5, device=device)
        out = fused_step(z, h, log_d, q, log_beta, 8.0, 1e-6, True)
        grads = torch.autograd.grad(sum(o.float().sum() for o in out), (z, h, q))
        if not all(bool(torch.isfinite(t).all()) for t in (*out, *grads)):
            return f"it returned non-finite numbers on a {str(z_dtype).removeprefix('torch.')} test input"
    return None


def triton_fails(device: torch.device, d: int) -> str | None:
    """Why the fused kernel cannot build or launch on ``device`` for hidden size ``d`` (one line), or None when a
    forward and backward of it on a small input run and give finite numbers in float32 and in bfloat16. Asked once
    per device and size; a failure is said once, in one warning line."""
    key = (str(device), d)
    if key not in _TRITON_PROBES:
        try:
            _TRITON_PROBES[key] = _probe_once(torch.device(device), d)
        except Exception as e:  # noqa: BLE001 - any failure to compile or launch means: do not use it
            text = str(e).strip().splitlines()
            _TRITON_PROBES[key] = f"{type(e).__name__}: {text[0] if text else ''}".strip().rstrip(":")
        if _TRITON_PROBES[key]:
            print(f"warning: the fused Triton step does not run on {device} ({_TRITON_PROBES[key]}); InfiLoop "
                  f"connections take the eager reference step (same results, slower)", file=sys.stderr, flush=True)
    return _TRITON_PROBES[key]
