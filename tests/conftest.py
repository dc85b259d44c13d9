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
# The notebooks the tests run through papermill write the profile's results as the pipeline's do, not the scratch
# folder of a notebook run by hand (notebooks/helper.keep_apart; tests/test_notebooks.py unsets it to test that).
os.environ["INFILOOP_PIPELINE"] = "1"


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

from infiloop.machine import threads_per_job, usable_cpus  # noqa: E402

# The suite runs in parallel (pytest-xdist, one worker per usable CPU: pyproject's addopts and
# pytest_xdist_auto_num_workers below), so each worker's torch gets its share of the CPUs; alone, two threads
# (what CI machines have; more only adds contention).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(min(2, threads_per_job(WORKERS)))

# Tests that cannot share the machine with each other run one after the other on one worker: the real cluster (one
# node, one queue), the multi-process trainings (torchrun, gloo) and the tests that measure time. Every other test
# keeps its file's tests together on one worker, so that a module-scoped fixture (a trained run, an executed
# pipeline) is built once, not once per worker. (The scheduler below does the grouping: xdist's own ``xdist_group``
# marks are lost under pytest 9, whose node ids no longer take xdist's suffix.)
SERIAL = "serial"
SERIAL_FILES = ("test_distributed.py", "test_slurm_real.py", "test_flake_loops.py")
SERIAL_TESTS = ("test_ddp_two_gloo_processes_match_one_process",  # test_training.py: torchrun
                "test_one_gradient_all_reduce_per_step_compiled_or_not_and_the_puzzle_embedding_apart",  # torchrun
                "test_the_report_is_written_after_every_section_and_a_part_cut_short_keeps_them")  # a 20 s limit
# Files whose tests take longest, started first so that no long file is left alone at the end (docs/testing.md).
FIRST = ("test_notebooks.py", "test_documented_commands.py", "test_headline.py", "test_looplm_grid.py",
         "test_results.py", "test_cluster.py")


def group(nodeid: str) -> str:
    """The worker group of a test by its node id: ``serial``, or its file."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    return SERIAL if file in SERIAL_FILES or name.split("[", 1)[0] in SERIAL_TESTS else file


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per CPU this process may use (its affinity, not every CPU of the machine)."""
    return usable_cpus()


def pytest_xdist_make_scheduler(config, log):
    """xdist's scheduling by scope, each scope a :func:`group` (whole, on one worker)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    """The serial group first, then the long files, then the rest (each file's tests in their order)."""

    def rank(item) -> int:
        if group(item.nodeid) == SERIAL:
            return 0
        return 1 + FIRST.index(item.path.name) if item.path.name in FIRST else 1 + len(FIRST)

    items.sort(key=rank)  # stable: each file's tests keep their order


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


@pytest.fixture(autouse=True)
def _numeric_mode_unchanged():
    """No test leaves this process in another numeric mode: the runs every later test resolves would move (a module
    that set INFILOOP_NUMERIC on import once did; benchmarks/_common.py now sets it only in its own process)."""
    before = os.environ.get("INFILOOP_NUMERIC")
    yield
    assert os.environ.get("INFILOOP_NUMERIC") == before, "this test changed INFILOOP_NUMERIC and did not restore it"


@pytest.fixture
def native_mode(monkeypatch):
    """Runs resolved natively (``INFILOOP_NUMERIC=native``): the run folders and records pinned by the tests were made
    before the numeric mode existed, and keep their names in the native mode (infiloop/numeric.py)."""
    from infiloop import numeric

    monkeypatch.setenv(numeric.ENV, "native")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One trained smoke run (4x4 Sudoku, InfiLoop) for the whole session, in a temporary run root.

    Tests may add evaluations to it; a test that damages files works on a copy (``shutil.copytree``)."""
    from infiloop.experiments.store.runs import get_run

    return get_run("sudoku", "infiloop", "smoke", root=tmp_path_factory.mktemp("smoke-runs"), progress=False)
