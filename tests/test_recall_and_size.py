"""Two switches of the overthinking setting (issue 47): ``recall`` (the input fed at every inner update, TRM's rule,
or only into the initial states, Bansal et al. 2022's network without recall) and a model that runs on grids of
another size with the same weights (``ModelConfig.size_agnostic``, ``LoopedReasoner.resized``)."""

import pytest
import torch

from infiloop.model import LoopedReasoner, ModelConfig
from infiloop.model.conditioning import ConditionConfig
from infiloop.model.connections import ConnectionConfig

CARRY_LAST = ConnectionConfig(name="carry_last")


def cfg(**kw):
    base = dict(vocab_size=3, seq_len=8, grid=(1, 8), box=None, d_model=16, n_heads=2, ffn_multiple=16, n_layers=1,
                pos="none", conv=True, mixer="attention", H=2, L=2, puzzle_emb_len=0, inner=CARRY_LAST,
                outer=CARRY_LAST)
    base.update(kw)
    return ModelConfig(**base)


def test_without_recall_the_input_enters_only_the_initial_states():
    torch.manual_seed(0)
    model = LoopedReasoner(cfg(recall=False)).double()
    inputs = torch.randint(1, 3, (3, 8))
    with torch.no_grad():
        got = [c["y"]["h"].clone() for _, c, _ in model.iterate(inputs, 3)]
        # by hand, in float64: y_0 = y_init + x, z_0 = z_init + x; z <- f(z + y) L times, y <- f(y + z)
        x = model.embed(inputs)
        y, z = model.y_init + x, model.z_init + x
        for k in range(3):
            for _ in range(2):
                z = model.block(z + y)
            y = model.block(y + z)
            assert torch.allclose(got[k], y, atol=1e-12, rtol=0), k
        # with recall the same weights give another trajectory (x at every inner update)
        model.cfg = model.cfg.replace(recall=True)
        assert not torch.allclose(next(iter(model.iterate(inputs, 1)))[1]["y"]["h"], got[0])


def test_without_recall_a_reset_sample_takes_its_new_input_at_its_next_update():
    torch.manual_seed(0)
    model = LoopedReasoner(cfg(recall=False, outer=ConnectionConfig(name="infiloop"),
                               inner=ConnectionConfig(name="infiloop"))).double()
    a, b = torch.randint(1, 3, (2, 8)), torch.randint(1, 3, (2, 8))
    with torch.no_grad():
        carry = model.initial_carry(2)
        carry, _ = model.outer_update(carry, model.embed(a))
        assert not carry["fresh"]["mask"].any()
        carry = model.reset_carry(carry, torch.tensor([False, True]))  # sample 1 takes puzzle b
        assert carry["fresh"]["mask"].tolist() == [False, True]
        x = model.embed(torch.stack([a[0], b[1]]))
        carry, _ = model.outer_update(carry, x)
        alone = model.outer_update(model.initial_carry(1), model.embed(b[1:]))[0]
        assert torch.allclose(carry["y"]["h"][1], alone["y"]["h"][0], atol=1e-12, rtol=0)


def test_recall_false_trains_and_keeps_the_old_hashes():
    from infiloop.experiments.settings.recipes import config_hash

    base = {"task": "sudoku", "recipe": "infiloop", "profile": "smoke", "model": cfg().to_dict(), "train": {}}
    without = {**base, "model": {k: v for k, v in base["model"].items() if k != "recall"}}
    assert config_hash(base) == config_hash(without)  # recall at its default: the runs cached before keep names
    off = {**base, "model": {**base["model"], "recall": False}}
    assert config_hash(off) != config_hash(base)
    with pytest.raises(ValueError, match="model.recall: recall=False .* conditioners"):
        cfg(recall=False, cond=ConditionConfig(inject="dense")).validate()


def test_a_size_agnostic_model_runs_on_longer_sequences_with_the_same_weights():
    torch.manual_seed(1)
    model = LoopedReasoner(cfg()).double()
    assert model.cfg.size_agnostic
    inputs = torch.randint(1, 3, (2, 8))
    same = model.resized((1, 8))
    with torch.no_grad():
        a = [c["y"]["h"] for _, c, _ in model.iterate(inputs, 2)]
        b = [c["y"]["h"] for _, c, _ in same.iterate(inputs, 2)]
        assert all(torch.equal(p, q) for p, q in zip(a, b))
        longer = model.resized((1, 32))
        assert longer.cfg.seq_len == 32 and longer.n_params() == model.n_params()
        assert all(torch.equal(p, q) for p, q in zip(model.state_dict().values(), longer.state_dict().values()))
        logits, _ = longer.readout(list(longer.iterate(torch.randint(1, 3, (2, 32)), 2))[-1][1])
        assert logits.shape == (2, 32, 3)
    for bad in (dict(mixer="mlp"), dict(pos="learned"), dict(pos="grid", box=(1, 2))):
        m = LoopedReasoner(cfg(**bad))
        assert not m.cfg.size_agnostic
        with pytest.raises(ValueError, match="depend on its grid size"):
            m.resized((1, 16))
