"""Training engine: losses, optimiser, deep supervision, exact resume, SIGKILL, DDP on gloo."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from infiloop.experiments import get_run, resolve, resolve_config
from infiloop.training import (
    AdamATan2,
    TrainConfig,
    load_weights,
    lr_at,
    stablemax_cross_entropy,
)

ROOT = Path(__file__).resolve().parents[1]


def test_stablemax_cross_entropy_by_hand(gen):
    logits = torch.randn(2, 5, 7, generator=gen, dtype=torch.float64) * 3
    labels = torch.randint(1, 7, (2, 5), generator=gen)
    labels[0, 2] = 0  # ignored
    ce = stablemax_cross_entropy(logits, labels)
    for b in range(2):
        for i in range(5):
            x = logits[b, i]
            s = torch.where(x >= 0, x + 1, 1 / (1 - x))
            expected = 0.0 if labels[b, i] == 0 else -torch.log(s[labels[b, i]] / s.sum()).item()
            assert ce[b, i].item() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_adam_atan2_matches_formula(gen):
    p = torch.nn.Parameter(torch.randn(4, generator=gen))
    p0 = p.detach().clone()
    grads = [torch.randn(4, generator=gen) for _ in range(3)]
    opt = AdamATan2([p], lr=0.01, betas=(0.9, 0.95), weight_decay=0.1)
    m = v = torch.zeros(4)
    ref = p0.clone()
    for t, g in enumerate(grads, 1):
        p.grad = g.clone()
        opt.step()
        m = 0.9 * m + 0.1 * g
        v = 0.95 * v + 0.05 * g * g
        ref = ref * (1 - 0.01 * 0.1) - 0.01 * 1.27 * torch.atan2(m / (1 - 0.9 ** t), (v / (1 - 0.95 ** t)).sqrt())
    assert torch.allclose(p.detach(), ref, atol=1e-6)


def test_lr_schedule():
    cfg = TrainConfig(steps=100, lr=1.0, warmup_steps=10, schedule="cosine", lr_min_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1)
    assert lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(99, cfg) == pytest.approx(0.1, abs=1e-3)
    assert lr_at(50, TrainConfig(steps=100, lr=1.0, warmup_steps=10)) == 1.0


def test_bad_train_configuration():
    with pytest.raises(ValueError, match=r"train.optimizer: unknown optimizer 'sgd'; valid choices: adamw, adam_atan2"):
        TrainConfig(optimizer="sgd").validate()
    with pytest.raises(ValueError, match=r"override 'train.lrr': unknown key 'train.lrr'"):
        resolve_config("sudoku", "infiloop", "smoke", {"train.lrr": 1})
    with pytest.raises(ValueError, match=r"unknown connection recipe 'trm'; valid choices: carry_last"):
        resolve_config("sudoku", "trm", "smoke")


def test_smoke_run_trains_and_is_cached(tmp_path):
    run = get_run("sudoku", "infiloop", "smoke", root=tmp_path, progress=False)
    assert run.done and run.dir.parent == tmp_path / "sudoku"
    lines = (run.dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(ln)["step"] for ln in lines] == [5, 10, 15, 20, 25, 30]
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    assert last["loss"] < first["loss"]  # it learns something in 30 steps
    model = run.load_model()
    assert model.cfg.outer.name == "infiloop"
    mtime = (run.dir / "model.safetensors").stat().st_mtime
    again = get_run("sudoku", "infiloop", "smoke", root=tmp_path, progress=False)
    assert again.dir == run.dir and (run.dir / "model.safetensors").stat().st_mtime == mtime
    # A different configuration is a different run folder.
    other = resolve("sudoku", "infiloop", "smoke", {"model.outer.beta": 0.1}, root=tmp_path)
    assert other.dir != run.dir and not other.done


@pytest.mark.parametrize("recipe", ["carry_last", "history_lg"])  # history_lg: the carry holds past states
def test_interrupted_run_resumes_exactly(tmp_path, recipe):
    full = get_run("sudoku", recipe, "smoke", root=tmp_path / "a", progress=False)
    part = get_run("sudoku", recipe, "smoke", root=tmp_path / "b", max_steps=13, progress=False)
    assert not part.done and (part.dir / "checkpoint.pt").is_file()
    done = get_run("sudoku", recipe, "smoke", root=tmp_path / "b", progress=False)
    assert done.done
    wa, wb = load_weights(full.dir / "model.safetensors"), load_weights(done.dir / "model.safetensors")
    for k in wa:
        assert torch.allclose(wa[k], wb[k], atol=1e-6), k
    ma = (full.dir / "metrics.jsonl").read_text().splitlines()
    mb = (done.dir / "metrics.jsonl").read_text().splitlines()
    strip = [{k: v for k, v in json.loads(x).items() if k != "elapsed_s"} for x in ma]
    stripb = [{k: v for k, v in json.loads(x).items() if k != "elapsed_s"} for x in mb]
    assert [r["step"] for r in stripb] == [r["step"] for r in strip]
    for ra, rb in zip(strip, stripb):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5)


def _cli(*args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "infiloop", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_sigkill_then_restart_finishes_like_an_uninterrupted_run(tmp_path):
    args = ["train", "--profile", "smoke", "--connection", "infiloop", "--quiet", "--set", "train.steps=40",
            "--set", "train.checkpoint_every=5"]
    ref = _cli(*args, "--run-dir", str(tmp_path / "ref"))
    out, err = ref.communicate(timeout=300)
    assert ref.returncode == 0, err
    proc = _cli(*args, "--run-dir", str(tmp_path / "killed"))
    ckpt = tmp_path / "killed" / "checkpoint.pt"
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "DONE.json").exists(), "the run finished before it could be killed"
    again = _cli(*args, "--run-dir", str(tmp_path / "killed"))
    out2, err2 = again.communicate(timeout=300)
    assert again.returncode == 0, err2
    a = json.loads((tmp_path / "ref" / "DONE.json").read_text())
    b = json.loads((tmp_path / "killed" / "DONE.json").read_text())
    assert a["step"] == b["step"] == 40
    assert b["final"]["loss"] == pytest.approx(a["final"]["loss"], rel=1e-4)


DDP_SCRIPT = r"""
import os, sys, torch, torch.distributed as dist
from safetensors.torch import save_file
sys.path.insert(0, {root!r})
from infiloop.experiments import resolve
from infiloop.training import train
torch.set_num_threads(1)
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    dist.init_process_group("gloo")
run = resolve("sudoku", "infiloop", "smoke", {{"train.steps": 12, "train.ema": 0.0}})
out = sys.argv[1]
_, model = train(run.model_config(), run.train_config(), run.train_data(), out, progress=False,
                 return_model=True)
rank = dist.get_rank() if world > 1 else 0
# every process saves its own live weights
save_file({{k: v.contiguous() for k, v in model.state_dict().items()}}, os.path.join(out, f"rank{{rank}}.safetensors"))
"""


def test_ddp_two_gloo_processes_match_one_process(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT.format(root=str(ROOT)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, str(script), str(tmp_path / "one")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                          "--master_port", "29531", str(script), str(tmp_path / "two")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    w1 = load_weights(tmp_path / "one" / "rank0.safetensors")
    r0 = load_weights(tmp_path / "two" / "rank0.safetensors")
    r1 = load_weights(tmp_path / "two" / "rank1.safetensors")
    for k in w1:
        assert torch.equal(r0[k], r1[k]), f"ranks disagree on {k}"
        assert torch.allclose(r0[k], w1[k], atol=1e-5, rtol=1e-4), f"2 processes != 1 process on {k}"
