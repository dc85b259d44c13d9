"""Progress bars inside a notebook's kernel: no "IProgress not found" warning on the executed pages
(``machine.progress_bar``)."""

import subprocess
import sys
from importlib.util import find_spec

import pytest

# A Jupyter kernel as tqdm.autonotebook tells it: ``ipykernel.zmqshell`` imported. Every warning is printed (tqdm
# catches its own warning raised as an error).
KERNEL = "import warnings, ipykernel.zmqshell; warnings.simplefilter('always'); "


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KERNEL + code], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(find_spec("ipywidgets") is not None, reason="with ipywidgets tqdm.auto draws its widget unwarned")
def test_the_kernel_context_reproduces_the_warning():
    """The context below is the one that drew the red box: tqdm.auto in a kernel without ipywidgets warns."""
    res = _run("from tqdm.auto import tqdm")
    assert res.returncode == 0 and "TqdmWarning: IProgress not found" in res.stderr, res.stderr[-2000:]


def test_the_package_draws_its_bars_in_a_kernel_without_a_warning():
    """Importing what the notebooks run (evaluation, training, the data generators, the looped decoders, the
    scheduler) and drawing a bar raise no TqdmWarning in a kernel, with or without ipywidgets."""
    res = _run("import infiloop.evaluation, infiloop.training.trainer, infiloop.tasks.sudoku, infiloop.tasks.maze, "
               "infiloop.experiments.looplm, infiloop.experiments.compute.scheduler; "
               "from infiloop.machine import progress_bar; "
               "bar = progress_bar()(total=3, desc='check'); bar.update(3); bar.close(); print(type(bar).__module__)")
    assert res.returncode == 0, res.stderr[-3000:]
    expected = "tqdm.notebook" if find_spec("ipywidgets") is not None else "tqdm.std"
    assert res.stdout.strip() == expected and "TqdmWarning" not in res.stderr, res.stderr[-3000:]
