"""The command line's argument types and checks, shared by its commands (``cli/__init__.py``, ``cli/evaluate.py``):
each bad value is one line naming the option and what was expected."""

from __future__ import annotations

import argparse
import math

from ..errors import UsageError
from ..machine import cuda_problem


def _integer(text: str, minimum: int, expected: str) -> int:
    """``text`` as an integer >= ``minimum``, or argparse's error saying what was ``expected``."""
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def count(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _integer(text, 1, "an integer >= 1")


def threads(text: str) -> int:
    """An argparse type: an integer >= 0 (0: torch's default)."""
    return _integer(text, 0, "an integer >= 0 (0: the default)")


def _positive(text: str, expected: str) -> float:
    """``text`` as a finite number > 0, or argparse's error saying what was ``expected``."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def tflops(text: str) -> float:
    """An argparse type: an achieved throughput in TFLOP/s, a finite number > 0."""
    return _positive(text, "a throughput in TFLOP/s > 0, e.g. 200")


def gigabytes(text: str) -> float:
    """An argparse type: a memory size in GB, a finite number > 0."""
    return _positive(text, "a memory size in GB > 0, e.g. 80")


def check_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: CUDA is not usable here ({cuda_problem()}); use --device cpu")
    if not device.startswith(("cpu", "cuda", "mps")):
        raise UsageError(f"--device {device}: expected cpu, cuda or cuda:N")

