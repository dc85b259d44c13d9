"""The command line's argument types and checks, shared by its commands (``cli/__init__.py``, ``cli/evaluate.py``):
each bad value is one line naming the option and what was expected."""

from __future__ import annotations

import argparse
import math

from ..errors import UsageError
from ..machine import cuda_problem


def count(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def threads(text: str) -> int:
    """An argparse type: an integer >= 0 (0: torch's default)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0 (0: the default), got {text!r}")
    return value


def tflops(text: str) -> float:
    """An argparse type: an achieved throughput in TFLOP/s, a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a throughput in TFLOP/s > 0, e.g. 200, got {text!r}")
    return value


def check_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: CUDA is not usable here ({cuda_problem()}); use --device cpu")
    if not device.startswith(("cpu", "cuda", "mps")):
        raise UsageError(f"--device {device}: expected cpu, cuda or cuda:N")

