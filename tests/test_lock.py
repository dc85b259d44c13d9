"""The exact environment: requirements-cpu.lock pins every package with hashes for the Python and platform it names,
reproduce.sh installs from it on the CPU path (and says why not otherwise), and provenance says whether the running
environment matches it."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from infiloop import machine
from infiloop.paths import ROOT

LOCK = """# locked for: python 3.11, linux-x86_64, torch==2.13.0
numpy==2.4.6 \\
    --hash=sha256:aaaa
Jinja2==3.1.6 \\
    --hash=sha256:bbbb
ruamel.yaml==0.18.10 \\
    --hash=sha256:cccc
"""


def test_the_shipped_lock_pins_everything_with_hashes():
    text = machine.LOCK.read_text(encoding="utf-8")
    lock = machine.read_lock(machine.LOCK)
    assert lock["python"] == "3.11" and lock["platform"] == "linux-x86_64" and re.fullmatch(r"\d+\.\d+\.\d+",
                                                                                         lock["torch"])
    for need in ("numpy", "matplotlib", "papermill", "jupytext", "pytest", "triton", "safetensors"):
        assert need in lock["pins"], need
    assert "torch" not in lock["pins"] and "infiloop" not in lock["pins"]  # installed apart (see the module)
    # every requirement line has at least one hash, as pip's --require-hashes demands
    blocks = re.split(r"\n(?=[A-Za-z])", text.split("\n", 4)[-1].strip())
    assert len(blocks) == len(lock["pins"])
    assert all("--hash=sha256:" in b for b in blocks)


def test_reading_and_comparing_a_lock(tmp_path):
    path = tmp_path / "lock.txt"
    path.write_text(LOCK)
    lock = machine.read_lock(path)
    assert lock["pins"] == {"numpy": "2.4.6", "jinja2": "3.1.6", "ruamel-yaml": "0.18.10"}
    same = {"numpy": "2.4.6", "jinja2": "3.1.6", "ruamel-yaml": "0.18.10", "torch": "2.13.0+cpu", "extra": "1"}
    assert machine.lock_differences(lock, same) == []
    assert machine.lock_status(path, same).startswith("matches lock.txt (sha256 ")
    moved = {**same, "numpy": "2.5.0", "torch": "2.14.0"}
    del moved["jinja2"]
    assert machine.lock_differences(lock, moved) == ["jinja2 3.1.6 → missing", "numpy 2.4.6 → 2.5.0",
                                                     "torch 2.13.0 → 2.14.0"]
    said = machine.lock_status(path, moved)
    assert said.startswith("DIFFERS from lock.txt") and "in 3 package(s): jinja2 3.1.6 → missing" in said
    assert machine.lock_status(tmp_path / "none.txt").startswith("no lock file (none.txt absent)")
    path.write_text("numpy==1\n")
    assert "no '# locked for:" in machine.lock_status(path)


def test_the_report_names_the_lock_in_its_provenance():
    from infiloop.experiments.report import provenance as report

    assert report.provenance()["environment lock"] == machine.lock_status()


def test_a_copy_later_on_sys_path_is_not_the_installed_version(tmp_path, monkeypatch):
    """setuptools, once imported, appends its ``_vendor`` folder (an older packaging, platformdirs, wheel, each with
    its dist-info) to ``sys.path``; the version that counts is the first, the one ``import packaging`` loads (CI's
    lock check failed when a test on the same worker had imported setuptools first)."""
    import sys
    from importlib import metadata

    installed = metadata.version("packaging")
    vendored = tmp_path / "packaging-0.1.dist-info"
    vendored.mkdir()
    (vendored / "METADATA").write_text("Metadata-Version: 2.1\nName: packaging\nVersion: 0.1\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    assert "0.1" in {d.version for d in metadata.distributions() if d.metadata["Name"] == "packaging"}
    assert machine.installed_versions()["packaging"] == installed != "0.1"


@pytest.mark.skipif(machine.this_platform() != "linux-x86_64", reason="the lock is made for linux-x86_64")
def test_the_suite_runs_in_the_locked_environment_in_ci(monkeypatch):
    """In CI, `./reproduce.sh test` built .venv from nothing: from the lock, so the environment must match it."""
    import os
    import sys

    if os.environ.get("CI") != "true" or sys.version_info[:2] != (3, 11) or not sys.prefix.endswith(".venv"):
        pytest.skip("only where reproduce.sh built this environment (CI)")
    assert machine.lock_status().startswith("matches "), machine.lock_status()


STUB = """#!/bin/sh
echo "$0 $*" >> "$STUB_LOG"
case "$1 $2" in
  "-c import torch") exit 1 ;;
  "-c import platform,"*) echo "${STUB_PY:-3.11 linux-x86_64}"; exit 0 ;;
  "-m venv"*) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && chmod +x "$3/bin/python"; exit 0 ;;
esac
exit 0
"""


@pytest.fixture
def box(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for f in ("reproduce.sh", "pyproject.toml", "requirements-cpu.lock"):
        shutil.copy(ROOT / f, repo / f)
    base = tmp_path / "base" / "python3"
    base.parent.mkdir()
    base.write_text(STUB)
    base.chmod(0o755)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (bin_ / "nvidia-smi").chmod(0o755)
    log = tmp_path / "calls.log"

    def run(*args, **extra):
        env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "STUB_LOG": str(log), "PYTHON": str(base),
               **extra}
        res = subprocess.run(["bash", str(repo / "reproduce.sh"), *args], env=env, capture_output=True, text=True,
                             timeout=60)
        calls = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return res, calls

    return {"run": run, "repo": repo}


def test_setup_installs_the_lock_on_the_cpu_path(box):
    res, calls = box["run"]("setup")
    assert res.returncode == 0, res.stderr
    py = str(box["repo"] / ".venv" / "bin" / "python")
    torch = machine.read_lock(machine.LOCK)["torch"]
    assert f"{py} -m pip download --quiet --no-index --no-deps torch=={torch} -d" in " ".join(calls)
    assert any(c.startswith(f"{py} -m pip install --quiet --require-hashes --no-deps -r ") for c in calls), calls
    assert f"{py} -m pip install --quiet --no-deps -e ." in calls
    assert not any("-e .[dev]" in c for c in calls)


@pytest.mark.parametrize("env, why", [({"INFILOOP_UNLOCKED": "1"}, "INFILOOP_UNLOCKED is set"),
                                      ({"STUB_PY": "3.12 linux-x86_64"}, "the lock is for python 3.11 linux-x86_64, "
                                                                         "this is python 3.12 linux-x86_64"),
                                      ({"INFILOOP_TORCH": "torch==2.5"}, "INFILOOP_TORCH chooses torch")])
def test_setup_says_why_it_does_not_use_the_lock(box, env, why):
    res, calls = box["run"]("setup", **env)
    assert res.returncode == 0, res.stderr
    assert f"not installing from the lock ({why})" in res.stderr
    assert any(c.endswith("-m pip install --quiet -e .[dev]") for c in calls)
    assert not any("--require-hashes" in c for c in calls)


def test_the_lock_is_refreshed_by_one_documented_command():
    script = (ROOT / "reproduce.sh").read_text()
    assert "./reproduce.sh lock" in script and "write_lock" in script
    assert "./reproduce.sh lock" in (ROOT / "docs" / "setup.md").read_text()
    assert Path(machine.LOCK).name in (ROOT / "docs" / "setup.md").read_text()


def test_lock_needs_an_environment_that_reproduce_sh_built(box):
    res, calls = box["run"]("lock")
    assert res.returncode == 1 and "error: ./reproduce.sh lock writes the lock from a .venv" in res.stderr
    assert res.stderr.count("\n") == 1 and not calls
