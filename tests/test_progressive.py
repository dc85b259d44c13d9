"""The literature's progressive loss as a switch (``train.progressive``, issue 47): the readout after n outer
updates without and k with gradients from a segment's starting state, n ~ U{0..H-1}, k ~ U{1..H-n}, weighted
alpha against the segment's own loss (Bansal et al. 2022; docs/model.md, "Recall and size")."""

import json
from collections import Counter

import pytest
import torch

from infiloop.experiments.settings.recipes import config_hash
from infiloop.experiments.store.runs import get_run
from infiloop.io import load_weights
from infiloop.model import LoopedReasoner, ModelConfig
from infiloop.model.connections import ConnectionConfig
from infiloop.training import TrainConfig

INFILOOP = ConnectionConfig(name="infiloop", z0_candidate=False, history_grad=True)


def small(**kw):
    base = dict(vocab_size=3, seq_len=8, grid=(1, 8), box=None, d_model=16, n_heads=2, ffn_multiple=16, n_layers=1,
                pos="none", conv=True, mixer="attention", H=4, L=2, puzzle_emb_len=0, inner=INFILOOP, outer=INFILOOP)
    base.update(kw)
    return ModelConfig(**base)


def test_the_progressive_output_is_n_free_then_k_trained_updates_from_the_segments_start():
    torch.manual_seed(0)
    model = LoopedReasoner(small()).double()
    inputs = torch.randint(1, 3, (3, 8))
    with torch.no_grad():  # a starting state some updates in, as a later segment's is
        start = list(model.iterate(inputs, 3))[-1][1]
    plain = model(start, inputs)
    carry, logits, q_halt, diag = model(start, inputs, progressive=(1, 2))
    # the extra output leaves the segment as it was
    assert torch.equal(logits, plain[1]) and torch.equal(q_halt, plain[2])
    assert all(torch.equal(carry[a][k], plain[0][a][k]) for a in carry for k in carry[a])
    # by hand, in float64: one update without gradients, two with them, from a copy of the same start
    x = model.embed(inputs)
    c = model.detach_carry(start)
    with torch.no_grad():
        c, _ = model.outer_update(c, x)
    for _ in range(2):
        c, _ = model.outer_update(c, x)
    want = model.logits(c["y"]["h"])
    got = diag["progressive_logits"]
    assert torch.allclose(got, want, atol=1e-12, rtol=0)
    # the gradient reaches the block through exactly the k trained updates: the same gradient as by hand
    params = [p for p in model.parameters() if p.requires_grad]
    g_got = torch.autograd.grad(got.square().sum(), params, allow_unused=True)
    g_want = torch.autograd.grad(want.square().sum(), params, allow_unused=True)
    for a, b in zip(g_got, g_want):
        assert (a is None) == (b is None) and (a is None or torch.allclose(a, b, atol=1e-10, rtol=0))
    # and it is not the gradient of three trained updates
    c3, x = model.detach_carry(start), model.embed(inputs)
    for _ in range(3):
        c3, _ = model.outer_update(c3, x)
    g3 = torch.autograd.grad(model.logits(c3["y"]["h"]).square().sum(), params, allow_unused=True)
    assert any(a is not None and not torch.allclose(a, b) for a, b in zip(g_got, g3))


def test_the_draws_cover_exactly_the_literatures_pairs(tmp_path):
    from infiloop.experiments.store.runs import resolve
    from infiloop.training.trainer import _Trainer

    run = resolve("sudoku", "carry_last", "smoke", {"train.progressive": 0.5}, root=tmp_path)
    model_cfg = run.model_config()
    trainer = _Trainer(model_cfg, run.train_config(), run.train_data(), tmp_path / "t", "cpu")
    h = model_cfg.H
    draws = Counter(trainer._progressive_draw() for _ in range(4000))
    assert set(draws) == {(n, k) for n in range(h) for k in range(1, h - n + 1)}
    # n is uniform on {0..H-1}
    by_n = Counter()
    for (n, _), c in draws.items():
        by_n[n] += c
    assert all(abs(c / 4000 - 1 / h) < 0.05 for c in by_n.values())


def test_the_switch_is_checked_and_off_by_default_keeps_every_runs_name():
    with pytest.raises(ValueError, match=r"train.progressive: must be in \[0, 1\], got 1.5"):
        TrainConfig(progressive=1.5).validate()
    base = {"task": "sudoku", "recipe": "carry_last", "profile": "smoke", "model": small().to_dict(), "train": {}}
    assert config_hash(base) == config_hash({**base, "train": {"progressive": 0.0}})
    assert config_hash(base) != config_hash({**base, "train": {"progressive": 0.5}})


def test_a_progressive_run_trains_and_resumes_exactly(tmp_path):
    over = {"train.progressive": 0.5}
    full = get_run("sudoku", "infiloop", "smoke", over, root=tmp_path / "a", progress=False)
    part = get_run("sudoku", "infiloop", "smoke", over, root=tmp_path / "b", max_steps=13, progress=False)
    assert not part.done
    done = get_run("sudoku", "infiloop", "smoke", over, root=tmp_path / "b", progress=False)
    wa, wb = load_weights(full.dir / "model.safetensors"), load_weights(done.dir / "model.safetensors")
    assert all(torch.allclose(wa[k], wb[k], atol=1e-6) for k in wa)
    # the progressive loss changes what is trained: other weights than the same run without it
    plain = get_run("sudoku", "infiloop", "smoke", root=tmp_path / "c", progress=False)
    wc = load_weights(plain.dir / "model.safetensors")
    assert any(not torch.allclose(wa[k], wc[k], atol=1e-4) for k in wa)
    lines = [json.loads(x) for x in (full.dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["lm_loss"] < lines[0]["lm_loss"]
