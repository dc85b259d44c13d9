"""Prefix sums (issue 47's size-extrapolation task): the oracle, seeded and distinct generation, the token record."""

import numpy as np
import pytest

from infiloop.tasks import prefix_sums


def test_the_oracle_is_the_running_parity():
    bits = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 1]])
    assert prefix_sums.answers(bits).tolist() == [[1, 1, 0, 1, 1], [0, 0, 0, 0, 1]]
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, (50, 33))
    slow = np.array([[sum(row[: i + 1]) % 2 for i in range(33)] for row in b])
    assert np.array_equal(prefix_sums.answers(b), slow)


def test_generation_is_seeded_distinct_and_checked():
    a, b = prefix_sums.generate(100, 12, seed=3), prefix_sums.generate(100, 12, seed=3)
    assert np.array_equal(a, b) and a.dtype == np.uint8 and set(np.unique(a)) == {0, 1}
    assert len({r.tobytes() for r in a}) == 100  # distinct below EXHAUSTIVE_BELOW
    assert not np.array_equal(a, prefix_sums.generate(100, 12, seed=4))
    assert len(prefix_sums.generate(16, 4)) == 16
    with pytest.raises(ValueError, match="17 distinct strings of length 4 do not exist"):
        prefix_sums.generate(17, 4)
    long = prefix_sums.generate(200, 64)
    assert long.shape == (200, 64) and 0.4 < long.mean() < 0.6


def test_the_split_keeps_test_strings_out_of_training():
    train, tests = prefix_sums.split(500, 100, 10, (10, 40))
    seen = {r.tobytes() for r in train.inputs}
    assert not any(r.tobytes() in seen for r in tests[10].inputs)
    assert train.grid == (1, 10) and tests[40].grid == (1, 40) and train.vocab_size == 3
    assert np.array_equal(tests[40].labels - 1, prefix_sums.answers(tests[40].inputs - 1))
    assert (train.labels > 0).all()  # every position is scored
