"""The scheduler's multi-process training, run for real: its own torchrun command with two CPU processes (gloo).

The job is notebook 05's no-content-score ablation at `smoke` (its q gets no gradient, which DDP must not hold) with
micro-batches of 6 slots (each process's 16 slots as 6, 6 and 4). Checked: it finishes; both processes hold the
same weights at every checkpoint (the trainer compares them and says so); the weights equal a one-process training of
the same global batch within float tolerance; a run killed after its first checkpoint resumes to the uninterrupted
run's weights bit for bit.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from infiloop.experiments.compute import scheduler
from infiloop.experiments.compute.slots import Slot
from infiloop.experiments.notebooks import manifest
from infiloop.experiments.store.runs import resolve
from infiloop.io import load_weights

# float32 gradients summed in another order (each process's mean of its 16 slots, then the all-reduce's average,
# against one mean over 32): differences of about 1e-7 per step, which Adam's normalised updates keep near 2e-7
# after smoke's 30 steps (measured: 2.1e-7 at most). 1e-5 is fifty times that and far below any real disagreement
# (a gradient not reduced moves weights by about the learning rate, 1e-3, at the first step).
ATOL = 1e-5


def _no_content_score_job(root: Path) -> manifest.Job:
    """Notebook 05's no-content-score training at smoke, in a run folder under ``root``, with micro-batches."""
    job = next(j for j in manifest.jobs(["05"], "smoke")
               if j.kind == "train" and j.spec.overrides.get("model.outer.content_score") is False)
    overrides = {**job.spec.overrides, "train.micro_batch": 6}
    run = resolve(job.spec.task, job.spec.recipe, "smoke", overrides, root=root)
    return manifest.Job(job.id, "train", replace(job.spec, overrides=overrides, run=run))


def _command(job: manifest.Job, processes: int) -> tuple[list[str], dict]:
    slots = [Slot(f"cpu{i}", "cpu", 1) for i in range(processes)]
    cmd, env = scheduler.command(job, "smoke", slots)
    return cmd, {**env, "OMP_NUM_THREADS": "1"}


def _run(job: manifest.Job, processes: int) -> str:
    cmd, env = _command(job, processes)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_weights(run_dir / "model.safetensors")


def _kill_all(marker: str) -> None:
    """SIGKILL every process whose command line names ``marker`` (the launcher and each training process)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes().decode(errors="replace"):
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def test_torchrun_two_cpu_processes_train_as_one(tmp_path):
    one, two, killed = (_no_content_score_job(tmp_path / name) for name in ("one", "two", "killed"))
    cmd, _ = _command(two, 2)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"] and "-m" in cmd[5:7]

    _run(one, 1)
    log = _run(two, 2)
    steps = [int(s) for s in re.findall(r"# step (\d+): the 2 processes hold the same weights", log)]
    assert steps == [10, 20, 30], log[-3000:]  # every checkpoint of smoke's 30 steps, the last included
    assert "processes hold different weights" not in log
    w1, w2 = _weights(one.spec.run.dir), _weights(two.spec.run.dir)
    assert w1.keys() == w2.keys()
    for k in w1:
        assert torch.allclose(w1[k], w2[k], rtol=0, atol=ATOL), f"{k}: two processes != one process"
    # the unused q stayed at its initial value (frozen under DDP, never updated in one process either)
    assert torch.count_nonzero(w2["conn_outer.q"]) == 0 and torch.equal(w1["conn_outer.q"], w2["conn_outer.q"])

    # killed (the launcher and both processes) after the first checkpoint, then the same command again
    cmd, env = _command(killed, 2)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    ckpt = killed.spec.run.dir / "checkpoint.pt"
    deadline = time.time() + 300
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    _kill_all(str(killed.spec.run.dir))  # torchrun starts its processes in sessions of their own
    proc.wait()
    assert not (killed.spec.run.dir / "DONE.json").exists(), "the run finished before it could be killed"
    log = _run(killed, 2)
    assert re.search(r"# resuming \S+ from its checkpoint at step (10|20)", log), log[-3000:]
    wk = _weights(killed.spec.run.dir)
    for k in w2:
        assert torch.equal(wk[k], w2[k]), f"{k}: the resumed run differs from the uninterrupted one"


def test_processes_that_disagree_are_named(monkeypatch):
    """The comparison behind the lines above: one bit of one weight changes the fingerprint, and processes whose
    fingerprints differ stop the training with the step and every process's fingerprint."""
    from infiloop.training import batching

    model = torch.nn.Linear(3, 2)
    before = batching.weights_fingerprint(model)
    with torch.no_grad():
        model.weight.view(-1)[4] = torch.nextafter(model.weight.view(-1)[4], torch.tensor(9.0))
    after = batching.weights_fingerprint(model)
    assert before != after
    monkeypatch.setattr(batching.dist, "all_gather_object", lambda out, mine: out.__setitem__(slice(None),
                                                                                           [mine, before]))
    with pytest.raises(RuntimeError, match=rf"different weights at step 7 \(fingerprints by rank: {after}, {before}\)"):
        batching.check_ranks_agree(model, 2, 7)
    assert batching.check_ranks_agree(model, 1, 7) == ""  # one process: nothing to compare


def _ablation_overrides():
    from infiloop.experiments.settings import recipes

    yield from ((r, {}) for r in recipes.RECIPES)
    yield from (("infiloop", a["overrides"]) for a in recipes.ABLATIONS.values())


@pytest.mark.parametrize("recipe,overrides", list(_ablation_overrides()))
def test_the_declared_unused_parameters_are_exactly_those_without_a_gradient(recipe, overrides):
    """DDP needs a gradient for every parameter it holds at every step: for every recipe and ablation, the parameters
    that get none in each of three segments are exactly those ``unused_parameters`` names (frozen under DDP)."""
    from infiloop.model.reasoner import LoopedReasoner

    cfg = resolve("sudoku", recipe, "smoke", {**overrides, "model.puzzle_emb_len": 1}).model_config()
    torch.manual_seed(0)
    model = LoopedReasoner(cfg).train()
    inputs = torch.randint(1, cfg.vocab_size, (4, cfg.seq_len))
    pids = torch.zeros(4, dtype=torch.long)
    carry = model.initial_carry(4)
    for _ in range(3):
        model.zero_grad(set_to_none=True)
        carry, logits, q_halt, _ = model(carry, inputs, pids)
        (logits.float().square().mean() + q_halt.float().mean()).backward()
        no_grad = {n for n, p in model.named_parameters() if p.grad is None}
        assert no_grad == set(model.unused_parameters()), recipe
