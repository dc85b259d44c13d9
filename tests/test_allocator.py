"""machine.tune_allocator: a CPU job's freed tensors stay in glibc's heap instead of being mapped again at each step
(docs/quick.md), in the processes that ``python -m infiloop`` and the scheduler start, and nowhere else."""

import json
import platform
import subprocess
import sys

import pytest

from infiloop import machine
from infiloop.paths import ROOT

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                           reason="mallopt's thresholds are glibc's")

# glibc's mallinfo2 in a fresh process: how many bytes are mapped (hblkhd) rather than held in the heap (arena).
_MALLINFO = """
import ctypes, json, runpy, sys
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                              "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
"""

# The process allocates and frees a 4 MiB tensor three times, after tuning the allocator ("tuned"), after importing the
# package's modules ("imported") or neither ("plain"), and prints the bytes mapped while each tensor lived.
_PROBE = _MALLINFO + """
if sys.argv[1] == "tuned":
    from infiloop.machine import tune_allocator
    assert tune_allocator()
if sys.argv[1] == "imported":
    import infiloop.machine, infiloop.experiments.compute.worker
import torch
mapped = []
for _ in range(3):
    x = torch.ones(1 << 20)  # 4 MiB: above glibc's first mmap threshold (128 KiB)
    mapped.append(libc.mallinfo2().hblkhd)
    del x
print(json.dumps(mapped))
"""


def _mapped(mode: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_a_tuned_process_keeps_a_freed_tensor_in_the_heap_and_an_untuned_one_maps_it():
    untuned, tuned = _mapped("plain"), _mapped("tuned")
    assert untuned[0] >= 4 << 20  # glibc's default: the first 4 MiB block is mapped
    assert all(m < 4 << 20 for m in tuned)  # tuned: never mapped, served from the heap every time


# The same measurement after a module has run as ``python -m MODULE ARGS`` would run it (its exit caught).
_AFTER_ENTRY = _MALLINFO + """
out, module, sys.argv = sys.argv[1], sys.argv[2], [sys.argv[2], *sys.argv[3:]]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
import torch
x = torch.ones(1 << 20)
open(out, "w").write(json.dumps(libc.mallinfo2().hblkhd))
"""


@glibc
@pytest.mark.parametrize("module, args", [("infiloop", ["--help"]),
                                          ("infiloop.experiments.compute.job", ["{}"]),  # not a job: it ends
                                          ("infiloop.experiments.compute.worker", [])])  # no request: it ends
def test_each_entry_point_tunes_the_allocator_before_its_work(tmp_path, module, args):
    out = tmp_path / "mapped.json"
    subprocess.run([sys.executable, "-c", _AFTER_ENTRY, str(out), module, *args], cwd=ROOT, check=True,
                   stdin=subprocess.DEVNULL, capture_output=True)
    assert json.loads(out.read_text()) < 4 << 20


@glibc
def test_importing_the_package_leaves_a_library_users_allocator_alone():
    assert _mapped("imported")[0] >= 4 << 20
    assert machine.MMAP_THRESHOLD == 32 << 20  # glibc's largest mmap threshold on 64-bit
