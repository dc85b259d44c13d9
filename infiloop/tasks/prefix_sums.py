"""Prefix sums: the size-extrapolation task of the recurrent-reasoning literature (Schwarzschild et al. 2021, "Can You
Learn an Algorithm?"; Bansal et al. 2022, "End-to-end Algorithm Synthesis with Recurrent Networks"), generated offline.

An instance is a bit string b_1 … b_n; its answer is the running parity c_i = (b_1 + … + b_i) mod 2. A network
trained at a small n and run on strings several times longer needs more iterations than it was trained with (the
carry travels one cell per block application at best): the one small-scale setting in which iterating past the
training depth is known to destroy answers ("overthinking"), and so where a loop connection's effect can be seen.

Tokens: 0 pad (never used: every position is scored), 1 the bit 0, 2 the bit 1; vocabulary 3. A string of length n
is a 1 x n grid (:class:`TaskData`), so a size-agnostic reasoner (``ModelConfig.size_agnostic``) runs on any n.
"""

from __future__ import annotations

import numpy as np

from .base import TaskData

VOCAB = 3
EXHAUSTIVE_BELOW = 20  # at most 2^20 strings: distinct ones are drawn without replacement


def answers(bits: np.ndarray) -> np.ndarray:
    """The running parity of each row of ``bits`` (0/1): the oracle."""
    return np.cumsum(np.asarray(bits, np.int64), axis=-1) % 2


def generate(n: int, length: int, seed: int | str = 0) -> np.ndarray:
    """``n`` bit strings of ``length`` ([n, length] uint8), uniformly drawn from the seed ``(length, seed)``; all
    distinct where ``length`` is below :data:`EXHAUSTIVE_BELOW` (ValueError if ``n`` exceeds the 2^length strings)."""
    if length < 1 or n < 0:
        raise ValueError(f"prefix sums: need length >= 1 and n >= 0, got length={length}, n={n}")
    rng = np.random.default_rng(np.frombuffer(f"prefix/{length}/{seed}".encode(), np.uint8))
    if length < EXHAUSTIVE_BELOW:
        if n > 2 ** length:
            raise ValueError(f"prefix sums: {n} distinct strings of length {length} do not exist (2^{length})")
        codes = rng.choice(2 ** length, size=n, replace=False)
        return ((codes[:, None] >> np.arange(length)[None, :]) & 1).astype(np.uint8)
    return rng.integers(0, 2, (n, length), dtype=np.uint8)


def to_taskdata(name: str, bits: np.ndarray, info: dict | None = None) -> TaskData:
    """The token record of bit strings and their running parities (grid 1 x length)."""
    bits = np.asarray(bits, np.uint8)
    n, length = bits.shape
    return TaskData(name=name, inputs=bits + 1, labels=(answers(bits) + 1).astype(np.uint8), grid=(1, length),
                    vocab_size=VOCAB, meta={"ones": bits.sum(1).astype(np.int32)}, n_puzzles=1, info=info or {})


def split(n_train: int, n_test: int, train_length: int, test_lengths: tuple[int, ...], seed: int = 0
          ) -> tuple[TaskData, dict[int, TaskData]]:
    """The training strings at ``train_length`` and a test set at each of ``test_lengths`` (seeded apart; a test
    string at the training length is never a training string: below :data:`EXHAUSTIVE_BELOW` one draw without
    replacement holds both, above it the held-out draw skips any training string)."""
    held = n_test if train_length in test_lengths else 0
    spare = held if train_length >= EXHAUSTIVE_BELOW else 0  # random draws: room for the (rare) repeats skipped
    train_bits = generate(n_train + held + spare, train_length, seed)
    train = to_taskdata(f"prefix-{train_length}-train", train_bits[:n_train], {"seed": seed})
    seen = {r.tobytes() for r in train_bits[:n_train]}
    kept = [r for r in train_bits[n_train:] if r.tobytes() not in seen][:held]
    if len(kept) < held:
        raise ValueError(f"prefix sums: fewer than {held} held-out strings of length {train_length} outside the "
                         f"{n_train} training strings")
    tests = {}
    for length in test_lengths:
        bits = np.asarray(kept, np.uint8).reshape(-1, length) if length == train_length else \
            generate(n_test, length, f"{seed}/test")
        tests[length] = to_taskdata(f"prefix-{length}-test", bits, {"seed": seed})
    return train, tests
