import os

import pytest
import torch

# Two threads is what CI machines have; more only adds contention.
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One trained smoke run (4x4 Sudoku, InfiLoop) for the whole session, in a temporary run root.

    Tests may add evaluations to it; a test that damages files works on a copy (``shutil.copytree``)."""
    from infiloop.experiments import get_run

    return get_run("sudoku", "infiloop", "smoke", root=tmp_path_factory.mktemp("smoke-runs"), progress=False)
