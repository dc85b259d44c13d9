"""The reproducible numeric mode (infiloop/numeric.py) and the fingerprints that check it across CPU families
(infiloop/experiments/report/fingerprints.py, docs/results/fingerprints.json).

The same seed gives the same bytes in every process path (warm worker, new process, the command line, this process)
and other bytes without the mode: tests/test_workers.py, whose smoke trainings it reuses. That this machine gives
its family's recorded bytes: ``python -m infiloop results --fingerprints smoke``, which exits 1 where it does not,
run as written by tests/test_documented_commands.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from infiloop import numeric, paths
from infiloop.errors import UsageError
from infiloop.experiments.report import fingerprints
from infiloop.experiments.settings.recipes import config_hash, resolve_config
from infiloop.training.config import TrainConfig


def _state_in_subprocess(code: str, **env) -> dict:
    """numeric.state() as a new Python process reports it after ``code`` (run before it)."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport json, infiloop\n"
                           "from infiloop import numeric\nprint(json.dumps(numeric.state()))"],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120, cwd=paths.ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_this_process_and_a_new_one_compute_in_the_mode():
    """``import infiloop`` sets the mode before torch computes: this test process (conftest imports torch first) and a
    new process that imports torch before infiloop both report ATen's AVX2 kernels and MKL's AVX2 branch (AUTO on
    another vendor's CPU, which MKL answers whatever is asked); a process started with INFILOOP_NUMERIC=native by this
    one does not inherit them."""
    branch = "AVX2" if fingerprints.cpu_family()["vendor"] == "GenuineIntel" else "AUTO"  # MKL's answer elsewhere
    here = numeric.state()
    assert (here["mode"], here["aten capability"], here["mkl branch"]) == ("reproducible", "AVX2", branch)
    numeric.check("reproducible")
    child = _state_in_subprocess("import torch")
    assert (child["mode"], child["aten capability"], child["mkl branch"]) == ("reproducible", "AVX2", branch)
    native = _state_in_subprocess("", INFILOOP_NUMERIC="native")
    assert native["mode"] == "native" and native["mkl branch"] == "BRANCH_OFF"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        widest = "AVX512" if " avx512f" in f.read() else "AVX2"
    assert native["aten capability"] == widest


def test_a_process_that_computed_before_the_mode_or_in_another_mode_is_refused():
    """Torch used before ``import infiloop`` keeps the kernels it chose, and the check says so in one line; a run of
    one mode is refused in a process of the other; a thread count other than one is refused in the mode."""
    code = ("import torch; a = torch.ones(8, 8); (a @ a).sum()\nimport infiloop\nfrom infiloop import numeric\n"
            "try:\n    numeric.check('reproducible')\nexcept numeric.NumericModeError as e:\n    print('refused:', e)")
    fresh = {k: v for k, v in os.environ.items()  # a process started from a shell, not from this one
             if k not in numeric.MODES["reproducible"].env and k not in (numeric.ENV, numeric.SET_BY_MODE)}
    done = subprocess.run([sys.executable, "-c", code], env=fresh, capture_output=True, text=True, timeout=120,
                          cwd=paths.ROOT)
    assert "refused: numeric mode 'reproducible': torch's CPU kernels are" in done.stdout, done.stdout + done.stderr
    assert "import infiloop before torch computes" in done.stdout
    with pytest.raises(UsageError, match="INFILOOP_NUMERIC=native"):
        numeric.check("native")
    with pytest.raises(UsageError, match="train.threads=4"):
        numeric.training_threads("reproducible", 4)
    assert numeric.training_threads("reproducible", 0) == 1 and numeric.training_threads("native", 4) == 4
    with pytest.raises(ValueError, match="train.numeric"):
        TrainConfig(numeric="fast").validate()


def test_the_mode_is_part_of_a_runs_identity(monkeypatch):
    """A run resolved in the mode has another hash than the same run resolved natively; the native hash is the one
    of a configuration written before the mode existed (no ``numeric`` key), so cached runs keep their folders and
    are known as native."""
    here = resolve_config("sudoku", "infiloop", "smoke")
    assert here["train"]["numeric"] == "reproducible"
    monkeypatch.setenv(numeric.ENV, "native")
    native = resolve_config("sudoku", "infiloop", "smoke")
    assert native["train"]["numeric"] == "native" and config_hash(here) != config_hash(native)
    old = json.loads(json.dumps(native))
    del old["train"]["numeric"]
    assert config_hash(old) == config_hash(native)
    from infiloop.experiments.store.runs import Run

    assert Run(paths.ROOT / "nowhere", old).train_config().numeric == "native"


def test_cpu_families_are_read_from_cpuinfo():
    """Vendor, family, model and the vector flags name a family; the other flags do not."""
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n"
            "model name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx avx2 fma f16c sha_ni\n\nprocessor\t: 1\n")
    fam = fingerprints.cpu_family(text)
    assert fam["key"] == "AuthenticAMD family 23 model 49: avx avx2 f16c fma"
    assert fam["model name"] == "AMD EPYC 7B12" and "sha_ni" not in fam["vector flags"]


def test_recorded_families_agree_and_disagreements_are_named(tmp_path):
    """docs/results/fingerprints.json: at least one family measured on its own CPU, with the smoke fingerprints of
    every connection and quick's three (an emulated family: the smoke ones); every two families on the same kernels
    give the same bytes. A planted disagreement is named with both families."""
    data = fingerprints.load()
    assert any("emulated" not in f for f in data["families"].values()), \
        "no CPU family recorded: python -m infiloop results --fingerprints"
    smoke = {fingerprints.entry(*w) for w in fingerprints.SMOKE}
    every = smoke | {fingerprints.entry(*w) for w in fingerprints.QUICK}
    for key, fam in data["families"].items():
        need = smoke if "emulated" in fam else every
        assert need <= set(fam["fingerprints"]), f"{key}: lacks {sorted(need - set(fam['fingerprints']))}"
        assert fam["mode"] == "reproducible" and fam["numeric"]["aten capability"] == "AVX2"
    assert fingerprints.disagreements(data) == []
    planted = json.loads(json.dumps(data))
    first = next(iter(planted["families"].values()))
    planted["families"]["GenuineIntel family 6 model 0: planted"] = {
        **first, "fingerprints": {**first["fingerprints"], "smoke/sudoku/infiloop/seed0": "0" * 64}}
    bad = fingerprints.disagreements(planted)
    assert bad and all(b.startswith("smoke/sudoku/infiloop/seed0: ") and "planted gives 0000" in b for b in bad)


def test_recording_adds_this_family_and_keeps_the_others(tmp_path):
    """``record`` writes this machine's family beside the recorded ones, atomically, with the mode, torch and lock."""
    path = tmp_path / "fingerprints.json"
    other = {"vendor": "AuthenticAMD", "family": "23", "model": "49", "model name": "x", "vector flags": ["avx2"],
             "key": "AuthenticAMD family 23 model 49: avx2"}
    fingerprints.record({"smoke/sudoku/infiloop/seed0": "a" * 64}, path, other)
    data = fingerprints.record({"smoke/sudoku/infiloop/seed0": "a" * 64}, path)
    here = fingerprints.cpu_family()["key"]
    assert set(data["families"]) == {other["key"], here} and data["families"][here]["mode"] == "reproducible"
    assert json.loads(path.read_text()) == data and fingerprints.disagreements(data) == []
