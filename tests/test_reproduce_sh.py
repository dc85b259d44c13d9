"""reproduce.sh picks its Python: INFILOOP_PYTHON, else an active conda environment that imports torch, else
it builds .venv; on a CUDA machine it runs the same command (the run offers the gpu profile at its end); with
``--executor slurm`` and GPU jobs .venv gets torch's CUDA build even without a GPU here (the nodes run it). Run on
a copy of the script in a temporary folder with stub interpreters that only log what they are asked to run (no
environment is ever built)."""

import json
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUB = """#!/bin/sh
echo "$0 $*" >> "$STUB_LOG"
case "$1 $2" in
  "-c import torch") exit ${STUB_TORCH:-0} ;;
  "-c import sys, torch;"*) exit ${STUB_CPU_BUILD:-0} ;;
  "-c "*kernel.json*) exit ${STUB_KERNEL:-0} ;;
  "-m venv"*) exit 1 ;;
esac
exit 0
"""


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def box(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for f in ("reproduce.sh", "pyproject.toml"):
        shutil.copy(ROOT / f, repo / f)
    conda = _exe(tmp_path / "conda" / "bin" / "python", STUB)
    other = _exe(tmp_path / "other" / "python", STUB)
    base = _exe(tmp_path / "base" / "python3", STUB)
    bin_ = tmp_path / "bin"
    _exe(bin_ / "nvidia-smi", "#!/bin/sh\nexit 9\n")  # no GPU here, whatever the machine has
    log = tmp_path / "calls.log"
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "STUB_LOG": str(log),
           "CONDA_PREFIX": str(tmp_path / "conda"), "PYTHON": str(base)}

    def run(*args, **extra):
        e = {**env, **extra}
        e = {k: v for k, v in e.items() if v is not None}
        res = subprocess.run(["bash", str(repo / "reproduce.sh"), *args], env=e, capture_output=True, text=True,
                             timeout=60)
        calls = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return res, calls

    return {"run": run, "repo": repo, "conda": conda, "other": other, "base": base, "bin": bin_}


def _ran(calls, python, what):
    return any(c.startswith(f"{python} ") and what in c for c in calls)


def test_active_conda_environment_is_used_as_it_is(box):
    res, calls = box["run"]("--profile", "smoke")
    assert res.returncode == 0, res.stderr
    assert _ran(calls, box["conda"], "-m infiloop reproduce --profile smoke")
    assert "from the active conda environment" in res.stderr and "no .venv is built" in res.stderr
    assert not (box["repo"] / ".venv").exists()
    assert not any("pip install" in c or "-m venv" in c for c in calls)
    assert not any("ipykernel install" in c for c in calls)  # its python3 kernel spec is there


def test_infiloop_python_wins(box):
    res, calls = box["run"]("test", "-q", INFILOOP_PYTHON=str(box["other"]))
    assert res.returncode == 0, res.stderr
    assert _ran(calls, box["other"], "-m pytest -q") and not _ran(calls, box["conda"], "-m")
    assert "from INFILOOP_PYTHON" in res.stderr


def test_missing_kernel_spec_is_installed_into_that_environment(box):
    res, calls = box["run"]("--profile", "smoke", STUB_KERNEL="1")
    assert res.returncode == 0, res.stderr
    assert _ran(calls, box["conda"], "-m ipykernel install --sys-prefix --name python3")


def test_conda_environment_without_torch_falls_back_to_venv(box):
    res, calls = box["run"]("--profile", "smoke", STUB_TORCH="1")
    assert res.returncode != 0  # the stub refuses to build the venv
    assert _ran(calls, box["base"], f"-m venv {box['repo'] / '.venv'}")
    assert not _ran(calls, box["conda"], "-m infiloop")


def test_infiloop_venv_skips_the_conda_environment(box):
    res, calls = box["run"]("--profile", "smoke", INFILOOP_VENV=str(box["repo"] / "v"))
    assert _ran(calls, box["base"], f"-m venv {box['repo'] / 'v'}")


def test_bad_infiloop_python_is_one_line(box):
    res, _ = box["run"](INFILOOP_PYTHON=str(box["repo"] / "nope"))
    assert res.returncode == 1 and "INFILOOP_PYTHON: " in res.stderr and "not an executable Python" in res.stderr


def test_on_a_cuda_machine_the_script_leaves_the_run_and_its_offer_to_python(box):
    """With a GPU listed by nvidia-smi the script prints nothing before the run (the default run itself uses the GPU
    and offers the gpu profile at its end: tests/test_gpu_offer.py) and passes no argument of its own."""
    _exe(box["bin"] / "nvidia-smi", "#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-x)'\n")
    res, calls = box["run"]()
    assert res.returncode == 0, res.stderr
    assert any(c == f"{box['conda']} -m infiloop reproduce" for c in calls), calls
    assert "--profile gpu" not in res.stderr and "quick" not in res.stderr


def test_no_offer_without_a_gpu(box):
    res, _ = box["run"]()
    assert res.returncode == 0 and "--profile gpu" not in res.stderr


def test_reproduce_runs_gpu_profiles_and_the_default_one_on_cuda_where_there_is_one(monkeypatch):
    import torch

    from infiloop.experiments.placement import default_device

    monkeypatch.setattr(torch.version, "cuda", "12.9")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert (default_device("gpu"), default_device("paper"), default_device("quick")) == ("cuda", "cuda", "cuda")
    assert (default_device("smoke"), default_device("tiny"), default_device("search")) == ("cpu",) * 3


@pytest.mark.parametrize("cuda_build,available,warning,phrase", [
    (None, False, None, "is a CPU build"),
    ("12.9", False, None, "no CUDA device is visible (CUDA_VISIBLE_DEVICES='')"),
    ("12.9", False, "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).",
     "the NVIDIA driver cannot run this CUDA 12.9 build of PyTorch (CUDA initialization: The NVIDIA driver"),
])
def test_a_gpu_profile_without_usable_cuda_stops_before_any_work(monkeypatch, tmp_path, capsys, cuda_build,
                                                                available, warning, phrase):
    """No silent CPU fallback: one line saying why CUDA is unusable, before data or training; --device cpu runs."""
    import warnings

    import torch

    from infiloop.experiments import pipeline

    def is_available():
        if warning:
            warnings.warn(warning, UserWarning, stacklevel=2)
        return available

    monkeypatch.setattr(torch.version, "cuda", cuda_build)
    monkeypatch.setattr(torch.cuda, "is_available", is_available)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(pipeline, "_build_data", lambda plan: pytest.fail("built data"))
    from infiloop.cli import main

    for argv in (["--profile", "gpu"], ["--profile", "paper"], ["--profile", "smoke", "--device", "cuda"]):
        code = main(["reproduce", *argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and phrase in err[0], err
    assert main(["reproduce", "--profile", "gpu"]) == 2
    assert "give --device cpu to run it on the CPU all the same" in capsys.readouterr().err


def test_the_notebooks_run_as_many_at_a_time_as_there_are_slots(tmp_path, monkeypatch):
    """The notebook stage: two at a time on two slots, each kernel told one torch thread (two kernels of two
    threads on two cores slow each other down several times), every stage recorded, a failing one among them
    recorded as failed; the environment is restored after."""
    import os
    import threading

    from infiloop.experiments import pipeline

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    running, most, seen = set(), [0], {}
    lock = threading.Lock()

    def fake(name, profile, params, out_dir, progress=True):
        with lock:
            running.add(name)
            most[0] = max(most[0], len(running))
            seen[name] = (os.environ.get("OMP_NUM_THREADS"), progress)
        time.sleep(0.3)
        with lock:
            running.discard(name)
        if name == "03":
            raise RuntimeError("broken notebook")

    monkeypatch.setattr(pipeline, "run_notebook", fake)
    stages = pipeline.Stages(tmp_path / "stages.json")
    pipeline._run_notebooks(stages, ["01", "02", "03", "04"], "smoke", {}, tmp_path, 2)
    assert most[0] == 2 and all(v == ("1", False) for v in seen.values()) and len(seen) == 4
    assert "OMP_NUM_THREADS" not in os.environ
    recorded = {s["name"]: s["status"] for s in json.loads((tmp_path / "stages.json").read_text())["stages"]}
    assert recorded == {"01": "ok", "02": "ok", "03": "failed", "04": "ok"}
    seen.clear()
    most[0] = 0
    pipeline._run_notebooks(stages, ["01", "02"], "smoke", {}, tmp_path, 1)  # one at a time: as they are
    assert most[0] == 1 and seen == {"01": (None, True), "02": (None, True)}


# ------------------------------------------------------------------------------ --executor slurm: torch's CUDA build

VENV_BASE = """#!/bin/sh
echo "$0 $*" >> "$STUB_LOG"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$STUB_FILE" "$3/bin/python" && chmod +x "$3/bin/python"; fi
exit 0
"""


def _venv_with_stamp(box) -> Path:
    """A .venv set up already (its stamp current) whose torch is a CPU build (the stub's default)."""
    import hashlib

    venv = box["repo"] / ".venv"
    _exe(venv / "bin" / "python", STUB)
    want = hashlib.sha256((box["repo"] / "pyproject.toml").read_bytes() + (box["repo"] / "reproduce.sh").read_bytes())
    (venv / ".infiloop-setup").write_text(want.hexdigest()[:16] + "\n")
    return venv


def test_a_fresh_venv_for_slurm_gpu_jobs_gets_the_cuda_build_without_a_gpu_here(box, tmp_path):
    base = _exe(tmp_path / "base2" / "python3", VENV_BASE)
    res, calls = box["run"]("--profile", "paper", "--executor", "slurm", STUB_TORCH="1", PYTHON=str(base),
                            STUB_FILE=str(box["conda"]))
    assert res.returncode == 0, res.stderr
    py = box["repo"] / ".venv" / "bin" / "python"
    want = "torch>=2.4 --index-url https://download.pytorch.org/whl/cu126"  # no lock in the box: any recent torch
    assert f"{py} -m pip install {want}" in calls, calls
    assert not any("download.pytorch.org/whl/cpu" in c or "pip download" in c for c in calls)
    assert f"installing torch's CUDA build ({want})" in res.stderr
    assert "no NVIDIA driver on this machine (the GPU nodes have their own): torch's CUDA 12.6 build" in res.stderr
    assert f"{py} -m infiloop reproduce --profile paper --executor slurm" in calls


@pytest.mark.parametrize("args", [["--profile", "gpu", "--executor", "slurm", "--wait"],
                                  ["--executor=slurm", "--profile", "smoke", "--device", "cuda"],
                                  ["setup", "--cuda"]])
def test_a_cpu_build_in_venv_is_replaced_for_slurm_gpu_jobs(box, args):
    venv = _venv_with_stamp(box)
    res, calls = box["run"](*args, INFILOOP_VENV=str(venv))
    assert res.returncode == 0, res.stderr
    py = venv / "bin" / "python"
    install = f"{py} -m pip install torch>=2.4 --index-url https://download.pytorch.org/whl/cu126"
    assert calls.index(f"{py} -m pip uninstall --yes torch") < calls.index(install), calls
    assert "replacing its CPU build of torch by the CUDA build" in res.stderr


@pytest.mark.parametrize("args", [["--profile", "paper"], ["--profile", "smoke", "--executor", "slurm"],
                                  ["--profile", "paper", "--executor", "slurm", "--cluster", "local"],
                                  ["--profile", "paper", "--executor", "slurm", "--device", "cpu"], ["setup"]])
def test_no_cuda_build_is_installed_for_anything_else(box, args):
    venv = _venv_with_stamp(box)
    res, calls = box["run"](*args, INFILOOP_VENV=str(venv))
    assert res.returncode == 0, res.stderr
    assert not any("pip " in c for c in calls), calls


def test_a_cuda_build_already_there_is_kept(box):
    venv = _venv_with_stamp(box)
    res, calls = box["run"]("--profile", "paper", "--executor", "slurm", INFILOOP_VENV=str(venv), STUB_CPU_BUILD="1")
    assert res.returncode == 0, res.stderr
    assert not any("pip " in c for c in calls), calls


def test_an_environment_used_as_it_is_gets_nothing_installed_for_slurm(box):
    """The conda environment is never changed: python -m infiloop refuses its CPU build in one line."""
    res, calls = box["run"]("--profile", "paper", "--executor", "slurm")
    assert res.returncode == 0, res.stderr
    assert not any("pip " in c for c in calls) and _ran(calls, box["conda"], "-m infiloop reproduce --profile paper")


# ------------------------------------------------------------------------------ the CUDA wheel that fits the driver

def _fake_driver(box, driver: str | None, cap: str | None = "9.0") -> None:
    """An nvidia-smi that reports ``driver`` and compute capability ``cap`` (None: a driver that does not answer; a
    cap of None: an nvidia-smi too old to know the field)."""
    if driver is None:
        _exe(box["bin"] / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
        return
    cap_line = f"echo '{cap}'" if cap else "echo 'Field \"compute_cap\" is not a valid field to query.' >&2; exit 2"
    _exe(box["bin"] / "nvidia-smi", f"""#!/bin/sh
case "$*" in
  *driver_version*) echo '{driver}' ;;
  *compute_cap*) {cap_line} ;;
  -L) echo 'GPU 0: NVIDIA Test GPU (UUID: GPU-0)' ;;
  *) exit 3 ;;
esac
""")


def _locked_torch() -> str:
    from infiloop import machine

    return machine.read_lock(ROOT / "requirements-cpu.lock")["torch"]


@pytest.mark.parametrize("driver,cap,flavour,why", [
    ("535.104.05", "9.0", "cu126", "torch's CUDA 12.6 build (CUDA 12 runs on drivers >= 525.60.13"),
    ("525.60.13", "8.0", "cu126", "torch's CUDA 12.6 build"),  # the oldest CUDA 12 driver itself
    ("575.51.03", None, "cu126", "GPU compute capability ?"),  # an nvidia-smi that does not know compute_cap
    ("570.124.06", "12.0", "cu129", "a Blackwell GPU under a driver < 580"),
    ("580.65.06", "9.0", "cu130", "torch's CUDA 13.0 build (CUDA 13 runs on drivers >= 580)"),
    ("590.44.01", "10.0", "cu130", "torch's CUDA 13.0 build"),
    ("580.95.05", "7.0", "cu126", "CUDA 13 builds no longer target compute capability 7.0"),
])
def test_the_cuda_wheel_fits_the_driver(box, driver, cap, flavour, why):
    """``./reproduce.sh torch-choice``: the lock's torch version from the wheel index the driver runs (the table of
    reproduce.sh and docs/gpu.md), printed as pip's arguments; nothing is installed, no Python is asked to."""
    shutil.copy(ROOT / "requirements-cpu.lock", box["repo"] / "requirements-cpu.lock")
    _fake_driver(box, driver, cap)
    res, calls = box["run"]("torch-choice", INFILOOP_VENV=str(box["repo"] / "v"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"torch=={_locked_torch()} --index-url https://download.pytorch.org/whl/{flavour}\n"
    assert f"NVIDIA driver {driver} (GPU compute capability {cap or '?'})" in res.stderr and why in res.stderr
    assert not any(" -m " in c for c in calls), calls  # no pip, no venv


def test_no_driver_gets_the_cpu_build(box):
    shutil.copy(ROOT / "requirements-cpu.lock", box["repo"] / "requirements-cpu.lock")
    for driver in (None, "not a version"):
        _fake_driver(box, driver)
        res, calls = box["run"]("torch-choice", INFILOOP_VENV=str(box["repo"] / "v"))
        assert res.returncode == 0, res.stderr
        assert res.stdout == (f"torch=={_locked_torch()} --index-url https://download.pytorch.org/whl/cpu "
                              "--extra-index-url https://pypi.org/simple\n")
        assert "no NVIDIA driver answers (nvidia-smi): torch's CPU build" in res.stderr and not calls
    (box["bin"] / "nvidia-smi").unlink()  # none at all (PATH has only this folder and the system's)
    if not shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        res, _ = box["run"]("torch-choice", INFILOOP_VENV=str(box["repo"] / "v"))
        assert res.returncode == 0 and "whl/cpu" in res.stdout


def test_a_driver_too_old_for_every_cuda_build_is_one_error_line(box, tmp_path):
    """torch-choice and a real setup stop alike, in one line that names the driver and the ways on; nothing is
    installed."""
    shutil.copy(ROOT / "requirements-cpu.lock", box["repo"] / "requirements-cpu.lock")
    _fake_driver(box, "470.82.01", "7.0")
    res, calls = box["run"]("torch-choice", INFILOOP_VENV=str(box["repo"] / "v"))
    assert res.returncode == 1 and res.stdout == "" and not calls
    lines = res.stderr.strip().splitlines()
    assert lines == [f"[reproduce] error: NVIDIA driver 470.82.01 is older than 525.60.13, the oldest that PyTorch's "
                     f"CUDA 12 and 13 builds run on: update the driver, or choose torch yourself "
                     f"(INFILOOP_TORCH='torch=={_locked_torch()} --index-url https://download.pytorch.org/whl/cpu' "
                     f"for the CPU build)"], lines
    base = _exe(tmp_path / "base2" / "python3", VENV_BASE)
    res, calls = box["run"]("setup", STUB_TORCH="1", PYTHON=str(base), STUB_FILE=str(box["conda"]),
                            INFILOOP_VENV=str(box["repo"] / "v"))
    assert res.returncode == 1 and "error: NVIDIA driver 470.82.01 is older than 525.60.13" in res.stderr
    assert [ln for ln in res.stderr.splitlines() if "error" in ln] and not any("pip install" in c for c in calls)


def test_setup_on_a_gpu_box_installs_the_wheel_the_driver_runs(box, tmp_path):
    """A fresh .venv with driver 535: the lock's torch from the cu126 index (PyPI's default torch is a CUDA 13 build,
    which driver 535 cannot run); the rest of the environment as before."""
    shutil.copy(ROOT / "requirements-cpu.lock", box["repo"] / "requirements-cpu.lock")
    _fake_driver(box, "535.104.05", "9.0")
    base = _exe(tmp_path / "base2" / "python3", VENV_BASE)
    res, calls = box["run"]("setup", STUB_TORCH="1", PYTHON=str(base), STUB_FILE=str(box["conda"]),
                            INFILOOP_VENV=str(box["repo"] / "v"))
    assert res.returncode == 0, res.stderr
    py = box["repo"] / "v" / "bin" / "python"
    assert f"{py} -m pip install torch=={_locked_torch()} --index-url https://download.pytorch.org/whl/cu126" in calls
    assert not any("whl/cpu" in c or "pip download" in c for c in calls), calls


ARGV_STUB = """#!/bin/sh
printf '%s' "$0" >> "$STUB_LOG"; for a in "$@"; do printf ' [%s]' "$a" >> "$STUB_LOG"; done; echo >> "$STUB_LOG"
case "$1 $2" in
  "-c import torch") exit 1 ;;
esac
exit 0
"""


@pytest.mark.parametrize("cuda", [False, True])
def test_infiloop_torch_carries_pip_arguments_split_at_blanks_never_globbed(box, tmp_path, cuda):
    """INFILOOP_TORCH='torch==X --index-url URL' reaches pip as three arguments (before, as one: a requirement pip
    refused); a pattern in it stays as written, whatever files the folder holds."""
    _fake_driver(box, "535.104.05", "9.0")
    (box["repo"] / "torch-glob-bait").write_text("")
    base = _exe(tmp_path / "base2" / "python3", VENV_BASE)
    argv_stub = _exe(tmp_path / "argv" / "python", ARGV_STUB)
    given = "torch==2.13.0  --index-url https://example.org/whl/cu130 torch*"
    res, calls = box["run"]("setup", *(["--cuda"] if cuda else []), PYTHON=str(base), STUB_FILE=str(argv_stub),
                            INFILOOP_VENV=str(box["repo"] / "v"), INFILOOP_TORCH=given)
    assert res.returncode == 0, res.stderr
    py = box["repo"] / "v" / "bin" / "python"
    want = f"{py} [-m] [pip] [install] [torch==2.13.0] [--index-url] [https://example.org/whl/cu130] [torch*]"
    assert want in calls, calls
    res, _ = box["run"]("torch-choice", INFILOOP_TORCH=given, INFILOOP_VENV=str(box["repo"] / "v"))
    assert res.stdout == "torch==2.13.0 --index-url https://example.org/whl/cu130 torch*\n"
    assert "INFILOOP_TORCH chooses torch" in res.stderr


# --------------------------------------------------------------------- a CUDA build takes the lock all the same

LOCK_STUB = STUB.replace('''  "-m venv"*) exit 1 ;;''', '''  "-m venv"*) exit 1 ;;
  "-c import platform, sys;"*) echo "3.11 linux-x86_64" ;;''')  # the lock's Python and platform


@pytest.mark.parametrize("driver,args,flavour", [("535.104.05", ["setup"], "cu126"),
                                                 (None, ["--profile", "paper", "--executor", "slurm"], "cu126"),
                                                 ("580.65.06", ["--profile", "paper", "--executor", "slurm"],
                                                  "cu130")])
def test_a_cuda_build_installs_the_locks_other_packages_with_their_hashes(box, tmp_path, driver, args, flavour):
    """torch's CUDA build from its index (its own dependencies: the nvidia libraries, triton), then the lock's other
    packages at their exact versions, hashes checked, no dependencies (never `pip install -e .[dev]`'s newest); for
    Slurm jobs from a login node without a driver the build any supported driver runs (cu126), and where the login
    node has one, a warning that the compute nodes' driver decides, naming INFILOOP_TORCH."""
    shutil.copy(ROOT / "requirements-cpu.lock", box["repo"] / "requirements-cpu.lock")
    _fake_driver(box, driver)
    stub = _exe(tmp_path / "lockstub" / "python", LOCK_STUB)
    base = _exe(tmp_path / "base2" / "python3", VENV_BASE)
    res, calls = box["run"](*args, STUB_TORCH="1", PYTHON=str(base), STUB_FILE=str(stub),
                            INFILOOP_VENV=str(box["repo"] / "v"))
    assert res.returncode == 0, res.stderr
    py = box["repo"] / "v" / "bin" / "python"
    torch = f"{py} -m pip install torch=={_locked_torch()} --index-url https://download.pytorch.org/whl/{flavour}"
    locked = f"{py} -m pip install --quiet --require-hashes --no-deps -r {box['repo'] / 'requirements-cpu.lock'}"
    assert torch in calls and locked in calls and calls.index(torch) < calls.index(locked), calls
    assert not any("[dev]" in c or "whl/cpu" in c for c in calls), calls
    warned = "the jobs run under the compute nodes' driver, which decides" in res.stderr
    assert warned == (driver is not None and "slurm" in args), res.stderr
    if warned:
        assert f"INFILOOP_TORCH='torch=={_locked_torch()} --index-url https://download.pytorch.org/whl/cu126'" in \
            res.stderr
