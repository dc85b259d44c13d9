"""The numeric mode of CPU runs: which kernels compute, so that one seed trains to the same bytes on other machines.

A CPU's floating-point results depend on which kernels run, not only on the seed: torch's CPU build dispatches its own
vectorised kernels (ATen) by the widest instruction set the CPU has (AVX-512 on this project's Intel machines, AVX2 on
its AMD ones), its BLAS (Intel's oneMKL, linked into torch) picks a code path by CPU vendor and instruction set, and
both split work by the number of threads. Each changes the order of floating-point sums, and a training amplifies the
last bit into different weights. Measured here (docs/results.md, "Across machines"): the smoke profile's InfiLoop
training, seed 0, gives different weights for each of MKL's default path, its AVX2 branch and another thread count.

Two modes (``MODES``, chosen by the environment variable ``INFILOOP_NUMERIC``; default ``reproducible``):

- ``reproducible``: MKL's conditional numerical reproducibility on its AVX2 branch, ATen's and oneDNN's kernels capped
  at AVX2, one torch thread for each CPU training. The same seed gives the same bytes on every Intel CPU with AVX2
  (AVX-512 and AMX machines included), and on AMD CPUs bytes of their own: MKL ignores the branch on other vendors'
  CPUs (docs/results/fingerprints.json records which families were checked; docs/results.md, "Across machines").
- ``native``: whatever the libraries choose on this CPU, and the threads a job is given (faster where wider kernels
  or more threads pay; the runs recorded before the mode existed were trained so).

The mode is set in one place, :func:`apply`, which ``import infiloop`` calls before torch is imported, so that every
process that trains or evaluates (the command line, the scheduler's warm workers and new processes, torchrun's
ranks, Slurm jobs, a notebook's kernel) is in it: the libraries read these variables when they first compute, and
child processes inherit them. :func:`check` reads back what the libraries really use, and a training refuses to
start in a process that is not in its run's mode. A run's mode is part of its identity (``TrainConfig.numeric``).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

from .errors import UsageError

ENV = "INFILOOP_NUMERIC"
SET_BY_MODE = "INFILOOP_NUMERIC_SET"  # the variables the mode set, so that a child in another mode can unset them
DEFAULT = "reproducible"

# oneMKL's named constants for conditional numerical reproducibility (oneMKL developer reference, "Named Constants
# for CNR Control"): mkl_cbwr_get(MKL_CBWR_BRANCH) returns the branch in force.
MKL_CBWR_BRANCH = 1
MKL_BRANCHES = {0: "OFF", 1: "BRANCH_OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 8: "SSE4_2", 10: "AVX2",
                12: "AVX512", 14: "AVX512_E1"}


@dataclass(frozen=True)
class NumericMode:
    """How CPU kernels are chosen: the variables set before torch computes, what the libraries must report back, and
    the torch threads of a CPU training (None: the job's own)."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    mkl_branch: str | None = None  # the branch mkl_cbwr_get must report (None: not checked)
    aten_capability: str | None = None  # what torch.backends.cpu.get_cpu_capability() must report
    training_threads: int | None = None
    summary: str = ""


# MKL's AVX2 branch: the same code on every Intel CPU with AVX2, and a square root that is correctly rounded (its
# COMPATIBLE branch computes torch.sqrt inexactly: 43 of 192 values a last bit off here). On other vendors' CPUs MKL
# takes its AUTO branch instead (oneMKL developer guide, "Getting Started with Conditional Numerical
# Reproducibility"), whatever is asked: AMD's results are reproducible among AMD CPUs but not equal to Intel's
# (docs/results.md, "Across machines", names the first operation that differs).
MODES: dict[str, NumericMode] = {
    "reproducible": NumericMode(
        "reproducible",
        env={"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
        mkl_branch="AVX2", aten_capability="AVX2", training_threads=1,
        summary="MKL_CBWR=AVX2, ATen and oneDNN capped at AVX2, one thread per CPU training"),
    "native": NumericMode("native", summary="the libraries' own choice of kernels on this CPU, the job's threads"),
}


class NumericModeError(UsageError):
    """This process cannot compute in the mode asked for (set too late, another mode, a CPU without AVX2)."""


def current() -> NumericMode:
    """The mode this process was started in: ``INFILOOP_NUMERIC``, else ``reproducible``."""
    name = os.environ.get(ENV, DEFAULT) or DEFAULT
    if name not in MODES:
        raise NumericModeError(f"{ENV}={name!r}: expected one of {', '.join(MODES)}")
    return MODES[name]


def apply() -> NumericMode:
    """Put this process (and the processes it starts) in the mode of ``INFILOOP_NUMERIC``: its variables set (a value
    the user set is replaced: the mode is what a run's identity says), before torch computes; the variables a parent's
    mode set are removed first, so that a native process started by a reproducible one computes natively. Called by
    ``import infiloop``; harmless to call again. An unknown mode name is left to :func:`check` to report, so that
    importing the package never fails."""
    try:
        mode = current()
    except NumericModeError:
        return MODES[DEFAULT]
    os.environ[ENV] = mode.name
    for k in filter(None, os.environ.pop(SET_BY_MODE, "").split(",")):  # a parent's mode, not the user's settings
        os.environ.pop(k, None)
    os.environ.update(mode.env)
    if mode.env:
        os.environ[SET_BY_MODE] = ",".join(mode.env)
    return mode


def _torch_cpu_library():
    import torch

    return ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))


def mkl_branch() -> str | None:
    """The MKL branch torch's MKL computes with (``mkl_cbwr_get``), or None where torch has no MKL to ask."""
    try:
        get = _torch_cpu_library().mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    got = get(MKL_CBWR_BRANCH)
    return MKL_BRANCHES.get(got, str(got))


def state() -> dict:
    """What this process computes with, as the libraries report it: the mode's name, ATen's CPU capability, MKL's
    branch, oneDNN's cap and torch's threads (for a summary's environment and a run's record)."""
    import torch

    return {"mode": os.environ.get(ENV, DEFAULT), "aten capability": torch.backends.cpu.get_cpu_capability(),
            "mkl branch": mkl_branch(), "onednn max isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
            "torch threads": torch.get_num_threads()}


def check(name: str, device: str = "cpu") -> NumericMode:
    """The mode ``name`` if this process computes in it, else :class:`NumericModeError` saying why in one line: a
    process in another mode, or one whose libraries had computed before the mode was set (torch imported and used
    before ``import infiloop``), or a CPU the mode cannot run on. On CUDA only the process's mode name is compared:
    the GPU's kernels are not the CPU's."""
    if name not in MODES:
        raise NumericModeError(f"train.numeric={name!r}: expected one of {', '.join(MODES)}")
    here = os.environ.get(ENV, DEFAULT)
    if here != name:
        raise NumericModeError(f"this run trains in the numeric mode {name!r} but this process computes in {here!r}: "
                               f"start it with {ENV}={name} (docs/setup.md, 'Numeric mode')")
    mode = MODES[name]
    if device != "cpu":
        return mode
    import torch

    if mode.aten_capability and (got := torch.backends.cpu.get_cpu_capability()) != mode.aten_capability:
        why = ("this CPU has no AVX2" if got == "DEFAULT" else
               "torch computed before the mode was set: import infiloop before torch computes")
        raise NumericModeError(f"numeric mode {name!r}: torch's CPU kernels are {got}, not {mode.aten_capability}: "
                               f"{why}; or set {ENV}=native")
    # AUTO: MKL's answer on another vendor's CPU, whatever branch is asked (see MODES); where the asked branch runs
    # (an Intel CPU with AVX2) MKL reports it, and a CPU without AVX2 was refused above
    if mode.mkl_branch and (got := mkl_branch()) not in (None, mode.mkl_branch, "AUTO"):
        raise NumericModeError(f"numeric mode {name!r}: MKL computes on its {got} branch, not {mode.mkl_branch}: MKL "
                               "was used before the mode was set (import infiloop before torch); or set "
                               f"{ENV}=native")
    return mode


def inductor_native_width() -> None:
    """Let Inductor's CPU code keep this CPU's vector width. Inductor takes its width from ``ATEN_CPU_CAPABILITY``,
    which the reproducible mode caps, and its AVX2 code computed NaN on an AVX-512 CPU here (torch 2.13; the
    whole-model tests of tests/test_compile.py; passed with the width set). Compiled code is not bitwise reproducible
    anyway (compiled = eager within rounding), so only the eager path is capped. Call before ``torch.compile``."""
    if "ATEN_CPU_CAPABILITY" not in current().env:
        return
    from torch._inductor import config, cpu_vec_isa

    widths = [isa.bit_width() for isa in cpu_vec_isa.valid_vec_isa_list()]
    if config.cpp.simdlen is None and widths:
        config.cpp.simdlen = max(widths)


def training_threads(name: str, threads: int) -> int:
    """The torch threads of a CPU training of ``train.threads = threads`` in mode ``name`` (0: torch's default).
    The reproducible mode trains on one thread whatever the machine has: more threads split the sums another way
    (measured: docs/results.md, "Across machines"); a run that asks for another count is refused."""
    fixed = MODES[name].training_threads
    if fixed is None:
        return threads
    if threads not in (0, fixed):
        raise NumericModeError(f"train.threads={threads}: the numeric mode {name!r} trains a CPU run on {fixed} "
                               f"thread(s) (its bytes depend on the count); leave train.threads at 0, or set "
                               f"{ENV}=native")
    return fixed


def describe() -> str:
    """One line for the console: this process's mode and what it sets."""
    mode = MODES.get(os.environ.get(ENV, DEFAULT), MODES[DEFAULT])
    return f"numeric mode {mode.name}: {mode.summary}"
