import os
import shutil
import sys
import tempfile
from pathlib import Path

# Everything the suite writes goes to a temporary folder of this session: the package's writable folders
# (infiloop/paths.py) are moved there through the environment before infiloop is imported, so that the
# subprocesses of the tests (papermill's kernels, `reproduce`, `train`) write there too. At the end of the
# session, the repository's own folders must not have changed (pytest_sessionfinish).
REPO = Path(__file__).resolve().parents[1]
WRITABLE = ("runs", "data", "results", "figures")
SESSION_DIR = Path(tempfile.mkdtemp(prefix="infiloop-tests-"))
for _name in WRITABLE:
    os.environ[f"INFILOOP_{_name.upper()}"] = str(SESSION_DIR / _name)
    if "infiloop.paths" in sys.modules:  # imported before this file (a plugin, an interactive session)
        setattr(sys.modules["infiloop.paths"], _name.upper(), SESSION_DIR / _name)
# No test asks the network: huggingface_hub reads only its caches (a test that fakes the hub unsets this itself).
os.environ["HF_HUB_OFFLINE"] = "1"


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: relative path -> (size, modification time)."""
    out = {}
    for p in folder.rglob("*") if folder.is_dir() else ():
        try:
            if p.is_file() or p.is_symlink():
                st = p.lstat()
                out[p.relative_to(REPO).as_posix()] = (st.st_size, st.st_mtime_ns)
        except OSError:
            continue
    return out


def _snapshot() -> dict[str, tuple[int, int]]:
    return {k: v for name in WRITABLE for k, v in _files(REPO / name).items()}


BEFORE = _snapshot()

import pytest  # noqa: E402
import torch  # noqa: E402

from infiloop.machine import usable_cpus  # noqa: E402

# Two threads is what CI machines have; more only adds contention.
torch.set_num_threads(min(2, usable_cpus()))


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test wrote into the repository's runs/, data/, results/ or figures/."""
    after = _snapshot()
    shutil.rmtree(SESSION_DIR, ignore_errors=True)
    changed = sorted(k for k, v in after.items() if BEFORE.get(k) != v)
    if not changed:
        return
    text = (f"the tests wrote {len(changed)} file(s) into the repository's own folders (they must write only "
            f"into temporary folders, through infiloop.paths):\n  " + "\n  ".join(changed[:50]))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nERROR: {text}", red=True, bold=True)
    else:
        print(f"ERROR: {text}", file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One trained smoke run (4x4 Sudoku, InfiLoop) for the whole session, in a temporary run root.

    Tests may add evaluations to it; a test that damages files works on a copy (``shutil.copytree``)."""
    from infiloop.experiments.store.runs import get_run

    return get_run("sudoku", "infiloop", "smoke", root=tmp_path_factory.mktemp("smoke-runs"), progress=False)
