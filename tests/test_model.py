"""The nested looped reasoner (SPEC section 2): TRM's rule, parameter count, memory, configuration errors."""

import pytest
import torch

from infiloop.connections import ConnectionConfig
from infiloop.layers import swiglu_width
from infiloop.model import LoopedReasoner, ModelConfig

CARRY_LAST = ConnectionConfig(name="carry_last")


def tiny(**kw):
    base = dict(vocab_size=6, seq_len=16, grid=(4, 4), box=(2, 2), d_model=32, n_heads=4, ffn_multiple=16,
                n_layers=2, pos="grid", conv=True, H=3, L=2)
    base.update(kw)
    return ModelConfig(**base)


@pytest.mark.parametrize("mixer,pos", [("attention", "rope"), ("mlp", "learned"), ("attention", "grid")])
def test_carry_last_reproduces_trm_rule(gen, mixer, pos):
    torch.manual_seed(0)
    model = LoopedReasoner(tiny(mixer=mixer, pos=pos, inner=CARRY_LAST, outer=CARRY_LAST)).double()
    inputs = torch.randint(0, 6, (3, 16), generator=gen)
    carry = model.initial_carry(3)
    carry, logits, q_halt, _ = model(carry, inputs)
    carry, logits2, _, _ = model(carry, inputs)  # second segment continues from the carried state

    # TRM by hand: z <- f(z + y + x) L times, then y <- f(y + z); H times per segment.
    with torch.no_grad():
        x = model.embed(inputs)
        y = model.y_init.expand(3, 16, 32)
        z = model.z_init.expand(3, 16, 32)
        ys = []
        for _segment in range(2):
            for _ in range(3):
                for _ in range(2):
                    z = model.block(z + y + x)
                y = model.block(y + z)
            ys.append(y)
    assert torch.allclose(logits, model.lm_head(ys[0]), atol=1e-12, rtol=0)
    assert torch.allclose(logits2, model.lm_head(ys[1]), atol=1e-12, rtol=0)
    assert torch.allclose(q_halt, model.q_head(ys[0][:, 0]).squeeze(-1), atol=1e-12)


def test_gradients_flow_only_through_the_last_outer_update(gen):
    model = LoopedReasoner(tiny(H=3, grad_outer=1))
    inputs = torch.randint(0, 6, (2, 16), generator=gen)
    carry, logits, _, _ = model(model.initial_carry(2), inputs)
    assert all(not v.requires_grad for state in carry.values() for v in state.values())
    logits.sum().backward()
    assert model.conn_outer.q.grad is not None and model.conn_inner.q.grad is not None
    # grad_outer = H puts every update on the graph: the graph is deeper, so the gradients differ.
    full = LoopedReasoner(tiny(H=3, grad_outer=3))
    full.load_state_dict(model.state_dict())
    _, logits_full, _, _ = full(full.initial_carry(2), inputs)
    assert torch.allclose(logits_full, logits)  # same forward value
    logits_full.sum().backward()
    g1 = model.tok_emb.weight.grad
    g3 = full.tok_emb.weight.grad
    assert not torch.allclose(g1, g3)


def test_paper_configuration_parameter_count():
    cfg = ModelConfig.preset("paper")
    model = LoopedReasoner(cfg)
    d, v, w = 512, 11, swiglu_width(512, 4.0, 256)
    assert w == 1536
    per_layer = 4 * d * d + (9 * d + d) + 3 * d * w  # attention, depthwise 3x3 conv, SwiGLU
    expected = 2 * per_layer + 2 * v * d + (d + 1) + 2 * (d + 1)  # emb + lm head, q head, two InfiLoops
    assert model.n_params() == expected
    assert 6.5e6 < model.n_params() < 7.5e6  # "7M-parameter"
    assert model.connection_params() == 2 * (d + 1) == 1026
    trm = LoopedReasoner(cfg.replace(inner=CARRY_LAST, outer=CARRY_LAST))
    assert model.n_params() - trm.n_params() == 1026
    assert cfg.layers_per_outer_update == (cfg.L + 1) * cfg.n_layers == 14


def test_evaluation_state_memory_does_not_grow(gen):
    model = LoopedReasoner(tiny()).eval()
    inputs = torch.randint(0, 6, (2, 16), generator=gen)
    sizes = {}
    for k, carry, diag in model.iterate(inputs, 60):
        if k in (6, 60):
            sizes[k] = sum(model.conn_outer.state_nbytes(s) for s in carry.values())
            assert diag["gamma_outer"].shape == (2, 16)
            assert ((diag["gamma_outer"] > 0) & (diag["gamma_outer"] < 1)).all()
    assert sizes[6] == sizes[60]


def test_iterate_matches_segments(gen):
    """Evaluation (iterate) and training segments run the same updates."""
    model = LoopedReasoner(tiny(H=2)).double().eval()
    inputs = torch.randint(0, 6, (2, 16), generator=gen)
    carry = model.initial_carry(2)
    for _ in range(3):
        carry, logits, _, _ = model(carry, inputs)
    *_, (_, c, _) = model.iterate(inputs, 6)
    assert torch.allclose(model.readout(c)[0], logits, atol=1e-12)


def test_reset_carry(gen):
    model = LoopedReasoner(tiny())
    inputs = torch.randint(0, 6, (3, 16), generator=gen)
    carry, _, _, _ = model(model.initial_carry(3), inputs)
    mask = torch.tensor([False, True, False])
    new = model.reset_carry(carry, mask)
    init = model.initial_carry(3)
    assert torch.equal(new["y"]["h"][1], init["y"]["h"][1])
    assert torch.equal(new["z"]["log_d"][1], init["z"]["log_d"][1])
    assert torch.equal(new["y"]["h"][0], carry["y"]["h"][0])


def test_puzzle_embedding_prefix(gen):
    model = LoopedReasoner(tiny(n_puzzles=5, pos="rope"))
    inputs = torch.randint(0, 6, (2, 16), generator=gen)
    _, logits, q_halt, _ = model(model.initial_carry(2), inputs, torch.tensor([1, 4]))
    assert logits.shape == (2, 16, 6) and q_halt.shape == (2,)
    with pytest.raises(ValueError, match="puzzle_ids"):
        model(model.initial_carry(2), inputs)


def test_fprm_baseline_model_runs(gen):
    fprm = ConnectionConfig(name="fprm")
    model = LoopedReasoner(tiny(norm="pre", residual_scale=True, inner=fprm, outer=fprm))
    inputs = torch.randint(0, 6, (2, 16), generator=gen)
    _, logits, _, diag = model(model.initial_carry(2), inputs)
    logits.sum().backward()
    assert model.layers[0].scales.grad is not None
    assert torch.isfinite(logits).all()
    # the pre-norm block ends with a final norm: a state fed back 200 times keeps unit RMS
    with torch.no_grad():
        h = model.y_init.expand(2, 16, 32)
        for _ in range(200):
            h = model.block(h + h)
    assert torch.allclose(h.pow(2).mean(-1), torch.ones(2, 16), atol=1e-3)


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(d_model=30, n_heads=4), r"model.n_heads: d_model=30 is not divisible by n_heads=4"),
        (dict(seq_len=15), r"model.grid: grid 4x4 has 16 cells but seq_len=15"),
        (dict(box=(3, 2)), r"model.box: box 3x2 does not tile the grid 4x4"),
        (dict(mixer="conv"), r"model.mixer: unknown mixer 'conv'; valid choices: attention, mlp"),
        (dict(pos="alibi"), r"model.pos: unknown position scheme 'alibi'; valid choices: rope"),
        (dict(grad_outer=4), r"model.grad_outer: must be in \[1, H=3\]"),
        (dict(outer=ConnectionConfig(name="lstm")), r"model.outer.name: unknown connection 'lstm'"),
        (dict(inner=ConnectionConfig(beta=1.5)), r"model.inner.beta: decay 'learned' needs beta in \(0, 1\)"),
    ],
)
def test_bad_model_configuration(change, match):
    with pytest.raises(ValueError, match=match):
        LoopedReasoner(tiny(**change))


def test_config_round_trip():
    cfg = tiny(outer=ConnectionConfig(name="ema", gamma=0.2))
    again = ModelConfig.from_dict(cfg.to_dict())
    assert again == cfg
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['widht'\]"):
        ModelConfig.from_dict({"widht": 3})
