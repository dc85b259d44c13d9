"""The nested looped reasoner (the paper's architecture): TRM's rule, parameter count, memory, configuration errors."""

import pytest
import torch

from infiloop.experiments.settings.recipes import profile_model, resolve_config, with_recipe
from infiloop.model import LoopedReasoner, ModelConfig
from infiloop.model.connections import ConnectionConfig
from infiloop.model.layers import swiglu_width

CARRY_LAST = ConnectionConfig(name="carry_last")


def tiny(**kw):
    base = dict(vocab_size=6, seq_len=16, grid=(4, 4), box=(2, 2), d_model=32, n_heads=4, ffn_multiple=16,
                n_layers=2, pos="grid", conv=True, H=3, L=2, puzzle_emb_len=0)
    base.update(kw)
    return ModelConfig(**base)


@pytest.mark.parametrize("mixer,pos,prefix", [("attention", "rope", 0), ("mlp", "learned", 0),
                                              ("attention", "grid", 0), ("mlp", "none", 16), ("attention", "rope", 16)])
def test_carry_last_reproduces_trm_rule(gen, mixer, pos, prefix):
    torch.manual_seed(0)
    model = LoopedReasoner(tiny(mixer=mixer, pos=pos, conv=False, puzzle_emb_len=prefix,
                                inner=CARRY_LAST, outer=CARRY_LAST)).double()
    inputs = torch.randint(0, 6, (3, 16), generator=gen)
    carry = model.initial_carry(3)
    carry, logits, q_halt, _ = model(carry, inputs)
    carry, logits2, _, _ = model(carry, inputs)  # second segment continues from the carried state

    # TRM by hand: z <- f(z + y + x) L times, then y <- f(y + z); H times per segment; the lm head reads
    # the grid positions after the prefix, the Q head the first position.
    S = 16 + prefix
    with torch.no_grad():
        x = model.embed(inputs)
        y = model.y_init.expand(3, S, 32)
        z = model.z_init.expand(3, S, 32)
        ys = []
        for _segment in range(2):
            for _ in range(3):
                for _ in range(2):
                    z = model.block(z + y + x)
                y = model.block(y + z)
            ys.append(y)
    assert logits.shape == (3, 16, 6)
    assert torch.allclose(logits, model.lm_head(ys[0][:, prefix:]), atol=1e-12, rtol=0)
    assert torch.allclose(logits2, model.lm_head(ys[1][:, prefix:]), atol=1e-12, rtol=0)
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


def test_a_profiles_model_is_its_runs_model():
    """``profile_model`` (``info --profile``) reads the profile: the model of its Sudoku run, without building data."""
    for profile in ("smoke", "tiny"):
        assert profile_model(profile) == ModelConfig.from_dict(resolve_config("sudoku", "infiloop", profile)["model"])
    paper_model = ModelConfig.from_dict(with_recipe(ModelConfig(n_puzzles=1).to_dict(), "infiloop"))
    assert profile_model("gpu") == profile_model("paper") == paper_model  # 9x9, the paper's model
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        profile_model("huge")



def test_the_profiles_model_sizes_are_the_ones_the_docs_state():
    """The README's and docs/pipeline.md's profile rows name each CPU profile's model by its size ("a 40k-parameter
    model"): the count of its Sudoku model, rounded to thousands (the README once gave the 40k model of `quick` as
    120k, the size of `tiny`'s)."""
    import re

    from infiloop.paths import ROOT

    rows = [ln for page in ("README.md", "docs/pipeline.md")
            for ln in (ROOT / page).read_text(encoding="utf-8").splitlines() if ln.startswith("| `")]
    checked = 0
    for profile in ("smoke", "quick", "tiny"):
        with torch.device("meta"):
            size = round(LoopedReasoner(profile_model(profile)).n_params() / 1000)
        for row in (r for r in rows if r.startswith(f"| `{profile}`")):
            stated = re.findall(r"(\d+)k-parameter", row.split("|")[2])
            if stated:  # a row may name no size
                assert stated[0] == str(size), (profile, size, row[:160])
                checked += 1
    assert checked >= 5

def test_paper_configuration_parameter_count():
    cfg = profile_model("paper")
    model = LoopedReasoner(cfg)
    d, v, w = 512, 11, swiglu_width(512, 4.0, 256)
    assert w == 1536
    per_layer = 4 * d * d + (9 * d + d) + 3 * d * w  # attention, depthwise 3x3 conv, SwiGLU
    # token emb + lm head, q head, two InfiLoops, and TRM's puzzle embedding (one identifier for Sudoku)
    expected = 2 * per_layer + 2 * v * d + (d + 1) + 2 * (d + 1) + d
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
    model = LoopedReasoner(tiny(n_puzzles=5, pos="rope", puzzle_emb_len=1))
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


def test_puzzle_embedding_prefix_is_trms():
    """TRM (puzzle_emb_len = 16, puzzle_emb_ndim = hidden size): the puzzle embedding fills the first of 16
    prefix positions, the other 15 are zero, all before the scaling by sqrt(d); one identifier for Sudoku."""
    model = LoopedReasoner(tiny(pos="none", conv=False, puzzle_emb_len=16, n_puzzles=1)).double()
    assert model.cfg.prefix == 16 and model.puzzle_emb.weight.shape == (1, 32)
    assert torch.equal(model.puzzle_emb.weight, torch.zeros(1, 32, dtype=torch.float64))  # TRM: zero init
    with torch.no_grad():
        model.puzzle_emb.weight.normal_()
    inputs = torch.randint(0, 6, (2, 16))
    x = model.embed(inputs)  # Sudoku: no ids needed, identifier 0
    assert x.shape == (2, 32, 32)
    scale = 32 ** 0.5
    assert torch.allclose(x[:, 0], scale * model.puzzle_emb.weight[0].expand(2, 32))
    assert torch.equal(x[:, 1:16], torch.zeros(2, 15, 32, dtype=torch.float64))
    assert torch.allclose(x[:, 16:], scale * model.tok_emb(inputs))
    # Several identifiers (ARC) must be told which.
    arc = LoopedReasoner(tiny(pos="none", conv=False, puzzle_emb_len=16, n_puzzles=5))
    with pytest.raises(ValueError, match="5 puzzle embeddings: pass puzzle_ids"):
        arc.embed(inputs)
    with pytest.raises(ValueError, match="need a prefix position"):
        tiny(n_puzzles=5, puzzle_emb_len=0).validate()


def test_token_mixing_block_is_trms_mlp_t():
    """TRM's mlp_t layer: transpose, SwiGLU over the sequence, RMSNorm over the sequence axis while
    transposed, transpose back; then the channel SwiGLU with RMSNorm over the channels. Checked by hand."""
    torch.manual_seed(0)
    model = LoopedReasoner(tiny(mixer="mlp", pos="none", conv=False, n_layers=1, puzzle_emb_len=16)).double()
    layer = model.layers[0]
    mix, mlp = layer.subs[0].mlp, layer.subs[1]
    h = torch.randn(2, 32, 32, dtype=torch.float64)

    def swiglu(m, v):
        gate, up = (v @ m.gate_up.weight.T).chunk(2, dim=-1)
        return (torch.nn.functional.silu(gate) * up) @ m.down.weight.T

    def rms(v):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + 1e-5)

    t = h.transpose(1, 2)  # [B, d, S]
    t = rms(t + swiglu(mix, t)).transpose(1, 2)
    expected = rms(t + swiglu(mlp, t))
    assert torch.allclose(layer(h), expected, atol=1e-12)
    # TRM rounds the token mixer's hidden width to a multiple of 256: 16 + 16 positions -> 256.
    assert mix.down.weight.shape[1] == 256
    chan = LoopedReasoner(tiny(mixer="mlp", pos="none", conv=False, n_layers=1, token_mix_norm="channel"))
    assert chan.layers[0].subs[0].norm_dim == -1


def test_truncated_normal_init_has_the_requested_std():
    """TRM's trunc_normal_init_: the standard deviation is the one asked for (torch's own truncation at
    +-2 sigma leaves 0.88 sigma), and samples lie within +-2 of the pre-truncation scale."""
    from infiloop.model.layers import Linear, trunc_normal_, truncated_std_factor

    assert truncated_std_factor(2.0) == pytest.approx(0.87962566, abs=1e-7)
    w = trunc_normal_(torch.empty(1_000_000, dtype=torch.float64), 0.5, generator=torch.Generator().manual_seed(0))
    assert w.std().item() == pytest.approx(0.5, rel=5e-3)
    assert w.abs().max().item() <= 2 * 0.5 / truncated_std_factor(2.0) + 1e-12
    torch.manual_seed(0)
    lin = Linear(1024, 512)
    assert lin.weight.std().item() == pytest.approx(1024 ** -0.5, rel=1e-2)
    model = LoopedReasoner(tiny(d_model=512, n_heads=8))
    assert model.y_init.std().item() == pytest.approx(1.0, abs=0.1)  # TRM's H_init: std 1
