"""Loops that once found an intermittent failure, kept so that anyone can run them again (docs/testing.md, "Flakes").

Each repeats one path many times and counts the failures; run them beside the default suite to load the machine as
CI does:

    INFILOOP_FLAKE_ROUNDS=50 .venv/bin/python -m pytest -n 0 -m slow tests/test_flake_loops.py -k torchrun &
    .venv/bin/python -m pytest -n 1

- ``torchrun``: the two-process gloo training of ``tests/test_distributed.py`` (30 smoke steps) must exit 0 every
  time. Once in about fifty runs rank 1 aborted at exit ("terminate called without an active exception"): DDP's
  reducer keeps the gloo process group, and so its worker thread, alive past ``destroy_process_group``; at
  interpreter exit that thread asked for the GIL during ``Py_FinalizeEx`` and was unwound through a ``noexcept``
  frame (gdb, docs/testing.md). Fixed by ``machine.leave_process_group`` (a barrier, then the destroy) and
  ``machine.end_process`` (flush, then ``os._exit``: no interpreter finalization beside gloo's threads).
- ``requeue`` (with the test cluster, ``-m "slow and slurm"``): the requeued training of ``tests/test_slurm_real.py``
  must resume from the step the signal stopped it at and end with the uninterrupted run's weights, every time.
  Slurm sends SIGTERM and kills 5 s later (KillWait): a training that kept going could finish before the kill (no
  resume line) or lose its steps since the last checkpoint; it now stops at the next step boundary and checkpoints
  (``training/interrupt.py``).

The number of rounds is ``INFILOOP_FLAKE_ROUNDS`` (default 3, what CI's slow step runs).
"""

from __future__ import annotations

import os

import pytest
import test_distributed as torchrun_case

ROUNDS = int(os.environ.get("INFILOOP_FLAKE_ROUNDS", "3"))


@pytest.mark.slow
def test_torchrun_training_exits_cleanly_every_round(tmp_path):
    """Every round: torchrun returns 0, each checkpoint agrees between the processes, and no process aborts."""
    failures = []
    for i in range(ROUNDS):
        job = torchrun_case._no_content_score_job(tmp_path / f"round{i}")
        cmd, env = torchrun_case._command(job, 2)
        import subprocess

        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        agree = done.stderr.count("the 2 processes hold the same weights")
        if done.returncode or "terminate called" in done.stderr or agree != 3:
            failures.append(f"round {i}: rc {done.returncode}, {agree} agreeing checkpoints\n{done.stderr[-1500:]}")
        print(f"round {i + 1}/{ROUNDS}: rc {done.returncode}", flush=True)
    assert not failures, f"{len(failures)} of {ROUNDS} rounds failed:\n" + "\n".join(failures)


@pytest.mark.slow
@pytest.mark.slurm
def test_requeued_training_resumes_every_round(tmp_path, monkeypatch):
    """Every round: tests/test_slurm_real.py's requeued training resumes from the step the signal stopped it at and
    ends with the uninterrupted run's weights (with the test cluster of tests/slurm/start.sh; skipped without it)."""
    import test_slurm_real as case

    if case.PROBLEM:
        pytest.skip(case.PROBLEM)
    failures = []
    for i in range(ROUNDS):
        folder = tmp_path / f"round{i}"
        folder.mkdir()
        with pytest.MonkeyPatch.context() as mp:
            fixture = case.real.__wrapped__(folder, mp)  # the test's own fixture, a fresh one each round
            said = next(fixture)
            try:
                case.test_a_training_requeued_while_it_runs_resumes_to_the_weights_of_an_uninterrupted_run(
                    said, folder, mp)
                outcome = "ok"
            except AssertionError as e:
                outcome = f"failed: {str(e)[:1500]}"
                failures.append(f"round {i}: {outcome}")
            finally:
                next(fixture, None)
        print(f"round {i + 1}/{ROUNDS}: {outcome[:200]}", flush=True)
    assert not failures, f"{len(failures)} of {ROUNDS} rounds failed:\n" + "\n".join(failures)
