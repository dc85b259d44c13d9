import os

import pytest
import torch

# Two threads is what CI machines have; more only adds contention.
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)
