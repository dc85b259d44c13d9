"""Fingerprints that travel: the sha256 of trained weights, per CPU family, in ``docs/results/fingerprints.json``.

In the reproducible numeric mode (``infiloop/numeric.py``) one seed trains to the same bytes on every Intel CPU with
AVX2 (AMD CPUs: bytes of their own, MKL taking its own path there). This file is how that is checked rather than
assumed: each CPU family this project has run on (vendor, family
and model numbers, vector flags) keeps the weights' hashes of the smoke profile's trainings (each connection, seed 0)
and of the ``quick`` profile's three Table-1 models. ``python -m infiloop results --fingerprints`` compares this
machine's with them (training what the run cache lacks; exit status 1 where they differ, run by the suite as
docs/results.md shows it), ``--record-fingerprints`` adds its family; tests/test_numeric.py checks that the recorded
families on the same kernels agree.
"""

from __future__ import annotations

import hashlib
import json
import platform
from datetime import date
from pathlib import Path

from ... import numeric, paths
from ...errors import DataError
from ...io import atomic_write_text
from ...model.registry import CONNECTION_REGISTRY
from ..settings.recipes import MAIN_RECIPES

FILE = paths.DOCS / "results" / "fingerprints.json"
# each registered loop connection's recipe (model/registry.py: carry-last, InfiLoop, FPRM, full AttnRes)
SMOKE = tuple(("smoke", "sudoku", name) for name, e in CONNECTION_REGISTRY.items() if e.recipe is not None)
QUICK = tuple(("quick", "sudoku", r) for r in MAIN_RECIPES)  # Table 1's three models at the default profile
VECTOR_FLAGS = ("avx", "fma", "amx", "f16c")  # the /proc/cpuinfo flags that name a family's vector units


def entry(profile: str, task: str, recipe: str) -> str:
    """A fingerprint's name: ``profile/task/recipe/seed0``."""
    return f"{profile}/{task}/{recipe}/seed0"


def cpu_family(cpuinfo: str | None = None) -> dict:
    """This machine's CPU family from /proc/cpuinfo (or the text ``cpuinfo``): vendor, family and model numbers, the
    model name and the vector flags; ``key`` names it in the file."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        except OSError:
            cpuinfo = ""
    first = cpuinfo.split("\n\n", 1)[0]
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines()) if k.strip()}
    flags = sorted(f for f in fields.get("flags", "").split() if f.startswith(VECTOR_FLAGS))
    fam = {"vendor": fields.get("vendor_id", platform.machine() or "unknown"), "family": fields.get("cpu family", "?"),
           "model": fields.get("model", "?"), "model name": fields.get("model name", platform.processor()),
           "vector flags": flags}
    fam["key"] = f"{fam['vendor']} family {fam['family']} model {fam['model']}: {' '.join(flags) or 'no vector flags'}"
    return fam


def weights_sha256(run_dir: Path) -> str:
    """The sha256 of a run's final weights (``model.safetensors``), tensor by tensor in name order, so that the
    file's metadata and layout do not enter it."""
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(Path(run_dir) / "model.safetensors"))
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def measure(which=SMOKE, root: Path | None = None, progress: bool = False) -> dict[str, str]:
    """Train (or take from the run cache ``root``, default ``paths.RUNS``) each run of ``which`` (profile, task,
    recipe), seed 0, in this process's numeric mode, and return the hash of each one's weights by :func:`entry`."""
    from ..store.runs import get_run

    return {entry(*w): weights_sha256(get_run(w[1], w[2], w[0], root=root, progress=progress).dir) for w in which}


def load(path: Path = FILE) -> dict:
    """The recorded fingerprints (an empty record where the file does not exist)."""
    if not Path(path).is_file():
        return {"families": {}}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as e:
        raise DataError(f"{path}: not valid JSON ({e}); restore it with git") from None
    if not isinstance(data, dict) or not isinstance(data.get("families"), dict):
        raise DataError(f"{path}: expected an object with a 'families' object")
    return data


def kernels(fam: dict) -> tuple:
    """What decides a family's bytes besides its CPU: the mode, torch, the lock and the MKL branch the libraries
    reported (AVX2 on Intel CPUs; AUTO on other vendors', where MKL ignores the branch asked: ``numeric.MODES``)."""
    return fam.get("mode"), fam.get("torch"), fam.get("lock"), fam.get("numeric", {}).get("mkl branch")


def disagreements(data: dict) -> list[str]:
    """Each fingerprint that two recorded families computing with the same kernels (:func:`kernels`) give
    differently, in words; empty when they agree. Families on different MKL branches are not expected to agree
    (:func:`branches` says whether they do)."""
    out, seen = [], {}
    for key, fam in sorted(data["families"].items()):
        for name, digest in sorted(fam.get("fingerprints", {}).items()):
            first = seen.setdefault((kernels(fam), name), (key, digest))
            if first[1] != digest:
                out.append(f"{name}: {first[0]} gives {first[1][:16]}, {key} gives {digest[:16]}")
    return out


def branches(data: dict) -> list[str]:
    """One line per MKL branch recorded: its families, and whether its fingerprints equal another branch's."""
    groups: dict[str, dict] = {}
    for key, fam in sorted(data["families"].items()):
        g = groups.setdefault(str(kernels(fam)[3]), {"families": [], "fingerprints": {}})
        g["families"].append(key)
        for name, digest in fam.get("fingerprints", {}).items():
            g["fingerprints"].setdefault(name, digest)
    out = []
    for branch, g in groups.items():
        others = [b for b, h in groups.items() if b != branch and any(
            h["fingerprints"].get(n) not in (None, d) for n, d in g["fingerprints"].items())]
        out.append(f"MKL branch {branch}: {'; '.join(g['families'])}"
                   + (f" (other bytes than branch {', '.join(others)})" if others else ""))
    return out


def record(fingerprints: dict[str, str], path: Path = FILE, family: dict | None = None,
           state: dict | None = None) -> dict:
    """Add (or replace) a family (default: this machine's) in the file at ``path`` with ``fingerprints``, and the
    libraries' ``state`` (default: this process's, ``numeric.state``); the new record."""
    import torch

    from ...machine import lock_status

    family = family or cpu_family()
    data = load(path)
    old = data["families"].get(family["key"], {}).get("fingerprints", {})
    data["families"][family["key"]] = {
        **{k: v for k, v in family.items() if k != "key"}, "mode": (state or {}).get("mode", numeric.current().name),
        "numeric": {k: v for k, v in (state or numeric.state()).items() if k != "torch threads"},
        "torch": torch.__version__, "lock": lock_status(), "python": platform.python_version(),
        "date": date.today().isoformat(), "fingerprints": {**old, **fingerprints}}
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def here_kernels() -> tuple:
    """:func:`kernels` of this process: its mode, torch, lock and the MKL branch its libraries report."""
    import torch

    from ...machine import lock_status

    state = numeric.state()
    return kernels({"mode": state["mode"], "torch": torch.__version__, "lock": lock_status(),
                    "numeric": {"mkl branch": state["mkl branch"]}})


def reference(data: dict, family: dict | None = None) -> tuple[str, dict] | None:
    """The recorded family this machine must reproduce, and its fingerprints: its own family where recorded (and
    measured on its own CPU), else one that computes with the same kernels (another Intel CPU, say); None where
    neither is recorded."""
    family = family or cpu_family()
    own = data["families"].get(family["key"])
    if own is not None:
        return family["key"], own["fingerprints"]
    mine = here_kernels()
    return next(((k, f["fingerprints"]) for k, f in sorted(data["families"].items(), key=lambda kv: "emulated" in kv[1])
                 if kernels(f) == mine), None)


def main(quick: bool = True, record_family: bool = False, path: Path | None = None) -> tuple[list[str], bool]:
    """``results --fingerprints``: this machine's fingerprints (smoke, and quick's unless ``quick`` is False,
    trained where the run cache lacks them) against the family it must reproduce (:func:`reference`); with
    ``record_family``, also added to the file. The lines to print, and whether nothing differs."""
    path = FILE if path is None else path
    if numeric.current().name != "reproducible":
        raise DataError(f"fingerprints are taken in the reproducible numeric mode; unset {numeric.ENV}")
    family, data = cpu_family(), load(path)
    got = measure(SMOKE + (QUICK if quick else ()), progress=True)
    ref = reference(data, family)
    lines = [f"this machine: {family['key']} ({family['model name']}), MKL branch {numeric.mkl_branch()}"]
    if ref is None:
        lines.append("no recorded family computes with this machine's kernels: nothing to compare")
        same = True
    else:
        common = [k for k in got if k in ref[1]]
        differ = [k for k in common if ref[1][k] != got[k]]
        same = not differ
        lines += [f"{k}: {got[k][:16]} here, {ref[1][k][:16]} recorded" for k in differ]
        lines.append(f"{len(common) - len(differ)} of {len(common)} fingerprints equal to those of {ref[0]}"
                     + (f" ({len(got) - len(common)} not recorded there)" if len(got) > len(common) else "")
                     + ("" if same else ": this machine does NOT reproduce them"))
    if record_family:
        data = record(got, path, family)
        lines.append(f"recorded {family['key']} in {path}")
    bad = disagreements(data)
    return lines + (bad or ["every recorded family on the same kernels agrees"]) + branches(data), same and not bad
