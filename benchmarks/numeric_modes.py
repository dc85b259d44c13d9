"""Which settings change a trained model's bytes, and where two CPUs part: the evidence behind the numeric mode
(infiloop/numeric.py; docs/results.md, "Across machines").

    python benchmarks/numeric_modes.py                           # settings table: this machine, smoke InfiLoop, seed 0
    python benchmarks/numeric_modes.py --quick                   # its first two rows: the mode and native
    python benchmarks/numeric_modes.py --emulate Haswell-v4      # smoke fingerprints under qemu-x86_64 -cpu MODEL
    python benchmarks/numeric_modes.py --emulate Haswell-v4 --record   # ... and add that family to fingerprints.json
    python benchmarks/numeric_modes.py --first-difference EPYC-Rome-v2  # the first aten op whose bytes differ

The settings table trains the smoke profile's InfiLoop (seed 0) once per setting in a new process and prints the
sha256 of its weights: equal hashes mean the setting changed no bit. ``--emulate`` runs the smoke fingerprints in a
CPU that this machine is not (``qemu-x86_64`` from Debian's qemu-user; the CPU models of ``qemu-x86_64 -cpu help``),
to compare CPU families that no session has: TCG emulates IEEE operations exactly but not the approximate reciprocal
instructions (rcpps, rsqrtps), so a family recorded this way is marked emulated. ``--first-difference`` traces every
aten operation of the first training step (a ``TorchDispatchMode``) here and under the emulated CPU, on the same
inputs, and prints the first operation whose output bytes differ, with its shapes: the bisection over the model's
operations that names the kernel two CPUs compute differently.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _common import ROOT, header

# qemu's CPU models as /proc/cpuinfo would name them (qemu-user shows the host's /proc/cpuinfo, not the model's)
EMULATED = {
    "Haswell-v4": {"vendor": "GenuineIntel", "family": "6", "model": "60", "model name": "Intel Core (Haswell, no TSX)",
                   "vector flags": ["avx", "avx2", "f16c", "fma"]},
    "EPYC-Rome-v2": {"vendor": "AuthenticAMD", "family": "23", "model": "49", "model name": "AMD EPYC-Rome",
                     "vector flags": ["avx", "avx2", "f16c", "fma"]},
}
SETTINGS = {  # name -> environment of the training process (INFILOOP_NUMERIC=native unless the mode is asked)
    "reproducible mode (default)": {"INFILOOP_NUMERIC": "reproducible"},
    "native, 1 thread": {"OMP_NUM_THREADS": "1"},
    "native, 2 threads": {"OMP_NUM_THREADS": "2"},
    "native, MKL_CBWR=AVX2, 1 thread": {"OMP_NUM_THREADS": "1", "MKL_CBWR": "AVX2"},
    "native, ATen capped at AVX2, 1 thread": {"OMP_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "avx2"},
    "native, MKL_CBWR=COMPATIBLE, ATen at AVX2, 1 thread": {"OMP_NUM_THREADS": "1", "MKL_CBWR": "COMPATIBLE",
                                                    "ATEN_CPU_CAPABILITY": "avx2"},
    "mode's variables, 2 threads": {"OMP_NUM_THREADS": "2", "MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                                    "ONEDNN_MAX_CPU_ISA": "AVX2"},
}

_MEASURE = """
import json, sys, tempfile
from infiloop.experiments.report import fingerprints
with tempfile.TemporaryDirectory() as d:
    which = [w for w in fingerprints.SMOKE if w[2] in sys.argv[1].split(",")]
    print(json.dumps(fingerprints.measure(which, root=d)))
"""

_TRACE = """
import hashlib, json, sys, tempfile
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from infiloop.experiments.store.runs import get_run

class Trace(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if "empty" in str(func):  # uninitialised memory: nothing computed
            return out
        h = hashlib.sha256()
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.numel():
                h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        shapes = [list(t.shape) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        self.rows.append([str(func), h.hexdigest()[:16], shapes])
        return out

with tempfile.TemporaryDirectory() as d, Trace() as trace:
    get_run("sudoku", "infiloop", "smoke", root=d, max_steps=1, progress=False)
print(json.dumps(trace.rows))
"""


def _python(code: str, args: list[str], env: dict, emulate: str | None = None) -> str:
    """Run ``code`` in a new Python process (under ``qemu-x86_64 -cpu emulate`` if given); its last stdout line."""
    cmd = (["qemu-x86_64", "-cpu", emulate] if emulate else []) + [sys.executable, "-c", code, *args]
    base = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                                                             "INFILOOP_NUMERIC_SET", "OMP_NUM_THREADS")}
    done = subprocess.run(cmd, env={**base, "INFILOOP_NUMERIC": "native", **env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if done.returncode:
        sys.exit(f"error: {' '.join(cmd[:4])} ... failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


QUICK = ("reproducible mode (default)", "native, 1 thread")


def settings_table(quick: bool = False) -> None:
    print("| setting | smoke InfiLoop seed 0: sha256 of the weights |\n|---|---|")
    for name, env in SETTINGS.items():
        if quick and name not in QUICK:
            continue
        got = json.loads(_python(_MEASURE, ["infiloop"], env))
        print(f"| {name} | `{next(iter(got.values()))[:16]}` |", flush=True)


def emulate(model: str, record: bool) -> None:
    from infiloop.experiments.report import fingerprints

    recipes = ",".join(w[2] for w in fingerprints.SMOKE)
    here = json.loads(_python(_MEASURE, [recipes], {"INFILOOP_NUMERIC": "reproducible"}))
    print(f"smoke fingerprints, reproducible mode: this machine beside qemu-x86_64 -cpu {model}", flush=True)
    there = json.loads(_python(_MEASURE, [recipes], {"INFILOOP_NUMERIC": "reproducible"}, model))
    print("| training | this machine | emulated | equal |\n|---|---|---|---|")
    for k in here:
        print(f"| {k} | `{here[k][:16]}` | `{there[k][:16]}` | {'yes' if here[k] == there[k] else 'no'} |")
    if record:
        qemu = subprocess.run(["qemu-x86_64", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        fam = {**EMULATED[model], "emulated": f"{qemu}, -cpu {model}"}
        fam["key"] = (f"{fam['vendor']} family {fam['family']} model {fam['model']}: {' '.join(fam['vector flags'])}"
                      " (emulated)")
        fingerprints.record(there, fingerprints.FILE, fam, state={"mode": "reproducible", "aten capability": "AVX2",
                                                                  "mkl branch": "AUTO" if "AMD" in fam["vendor"]
                                                                  else "AVX2"})
        print(f"recorded {fam['key']} in {fingerprints.FILE}")


def first_difference(model: str) -> None:
    env = {"INFILOOP_NUMERIC": "reproducible"}
    a = json.loads(_python(_TRACE, [], env))
    b = json.loads(_python(_TRACE, [], env, model))
    print(f"first training step of smoke InfiLoop (seed 0, reproducible mode): {len(a)} aten operations here, "
          f"{len(b)} under qemu-x86_64 -cpu {model}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x[0] != y[0]:
            print(f"operation {i}: the sequences part ({x[0]} here, {y[0]} there)")
            return
        if x[1] != y[1]:
            print(f"first difference: operation {i}, {x[0]} on inputs of shapes {x[2]} "
                  f"({sum(u[1] != v[1] for u, v in zip(a, b))} of {len(a)} operations differ from there on)")
            return
    print("no operation differs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--emulate", metavar="QEMU_CPU", choices=sorted(EMULATED))
    ap.add_argument("--record", action="store_true", help="with --emulate: add the emulated family to the file")
    ap.add_argument("--first-difference", metavar="QEMU_CPU", choices=sorted(EMULATED))
    ap.add_argument("--quick", action="store_true", help="the settings table's first two rows only")
    args = ap.parse_args()
    print(header("numeric modes"))
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("INFILOOP_DATA", os.path.join(d, "data"))  # the smoke set, built once per call
        if args.emulate:
            emulate(args.emulate, args.record)
        elif args.first_difference:
            first_difference(args.first_difference)
        else:
            settings_table(args.quick)


if __name__ == "__main__":
    main()
