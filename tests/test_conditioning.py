"""Conditioners of the looped-LM study: shapes, parameter counts, exact reduction to the
unconditioned model at initialisation, the history window, the timestep, and their place in the harness."""

import numpy as np
import pytest
import torch

from infiloop.evaluation import evaluate_budgets
from infiloop.experiments.settings.recipes import CODE_VERSION, RECIPES, config_hash, profile_model, resolve_config
from infiloop.model import LoopedReasoner, ModelConfig
from infiloop.model.conditioning import ConditionConfig, Conditioner, time_features
from infiloop.model.connections import Connection, ConnectionConfig
from infiloop.tasks.base import TaskData

D, LAYERS = 32, 1
BASE = profile_model("smoke")  # d_model 32, one layer of 2 sublayers (mixer, SwiGLU), H 2, L 2
SUBS = 2

VARIANTS = {
    "inject scalar": dict(inject="scalar"),
    "inject channel": dict(inject="channel"),
    "inject residual": dict(inject="residual"),
    "inject dense": dict(inject="dense"),
    "history scalar w3": dict(history="scalar", window=3),
    "history channel w2": dict(history="channel", window=2),
    "history dense w1": dict(history="dense", window=1),
    "loop gating": dict(timestep="loop_gating", horizon=8),
    "branch gating": dict(timestep="branch_gating", horizon=8),
    "adaln": dict(timestep="adaln", horizon=8),
    "history + loop gating": dict(history="dense", window=1, timestep="loop_gating", horizon=8),
    "inject + history": dict(inject="channel", history="channel", window=2),
    "inject + adaln": dict(inject="dense", timestep="adaln", horizon=8),
}


def _time_mlp(n_out, freqs=4, hidden=64):
    return (2 * freqs * hidden + hidden) + (hidden * n_out * D + n_out * D)


EXPECTED_PARAMS = {
    "inject scalar": 1,
    "inject channel": 2 * D,
    "inject residual": 2 * D,
    "inject dense": 2 * D * D,
    "history scalar w3": 3,
    "history channel w2": 2 * D,
    "history dense w1": D * D,
    "loop gating": _time_mlp(1),
    "branch gating": _time_mlp(LAYERS * SUBS),
    "adaln": _time_mlp(2 * LAYERS * SUBS),
    "history + loop gating": D * D + _time_mlp(1),
    "inject + history": 2 * D + 2 * D,
    "inject + adaln": 2 * D * D + _time_mlp(2 * LAYERS * SUBS),
}


def _pair(cond: dict, **model):
    """(unconditioned, conditioned) models with identical shared weights (same seed; conditioner built last)."""
    cfg = BASE.replace(**model)
    torch.manual_seed(0)
    plain = LoopedReasoner(cfg)
    torch.manual_seed(0)
    conditioned = LoopedReasoner(cfg.replace(cond=ConditionConfig(**cond)))
    return plain, conditioned


def _inputs(n=3, seed=0):
    return torch.randint(0, BASE.vocab_size, (n, BASE.seq_len), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", VARIANTS)
def test_parameter_count_per_variant(name):
    plain, model = _pair(VARIANTS[name])
    assert model.conditioner_params() == EXPECTED_PARAMS[name]
    assert model.n_params() == plain.n_params() + EXPECTED_PARAMS[name]
    assert plain.conditioner_params() == 0 and plain.cond is None


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("connection", ["carry_last", "infiloop"])
def test_initialised_conditioner_is_the_baseline_exactly(name, connection):
    conn = ConnectionConfig(name=connection)
    plain, model = _pair(VARIANTS[name], inner=conn, outer=conn)
    inputs = _inputs()
    for (k, ca, _), (_, cb, _) in zip(plain.iterate(inputs, 9), model.iterate(inputs, 9)):
        assert torch.equal(ca["y"]["h"], cb["y"]["h"]), k
        assert torch.equal(ca["z"]["h"], cb["z"]["h"]), k
        assert torch.equal(plain.readout(ca)[0], model.readout(cb)[0]), k
    # and one training segment, with gradients, from the same carry
    out_a = plain(plain.initial_carry(3), inputs)
    out_b = model(model.initial_carry(3), inputs)
    assert torch.equal(out_a[1], out_b[1]) and torch.equal(out_a[2], out_b[2])


@pytest.mark.parametrize("name", ["branch gating", "adaln", "loop gating", "history dense w1"])
def test_initialised_conditioner_is_the_baseline_in_a_pre_norm_block(name):
    plain, model = _pair(VARIANTS[name], norm="pre", residual_scale=True)
    inputs = _inputs()
    for (_, ca, _), (_, cb, _) in zip(plain.iterate(inputs, 6), model.iterate(inputs, 6)):
        assert torch.equal(ca["y"]["h"], cb["y"]["h"])


@pytest.mark.parametrize("name", VARIANTS)
def test_trained_conditioner_changes_the_computation(name):
    """The converse: with non-zero parameters the conditioner is really in the loop."""
    plain, model = _pair(VARIANTS[name])
    with torch.no_grad():
        for p in model.cond.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    inputs = _inputs()
    ya = [c["y"]["h"].clone() for _, c, _ in plain.iterate(inputs, 6)]
    yb = [c["y"]["h"].clone() for _, c, _ in model.iterate(inputs, 6)]
    assert not torch.allclose(ya[-1], yb[-1])
    if VARIANTS[name].get("history") and not VARIANTS[name].get("inject") and not VARIANTS[name].get("timestep"):
        # history injection reads nothing at l = 0 and l = 1 (m_l = 0): the first two updates agree
        assert torch.equal(ya[0], yb[0]) and torch.equal(ya[1], yb[1])
        assert not torch.allclose(ya[2], yb[2])


def test_conditioners_receive_gradients_in_a_training_segment():
    _, model = _pair(dict(history="dense", window=2, timestep="loop_gating", horizon=8, inject="residual"))
    model.cfg.grad_outer = 2  # gradients through both outer updates of the segment
    carry = model.initial_carry(3)
    inputs = _inputs()
    carry, *_ = model(carry, inputs)  # l = 2 now: the history term is active in the next segment
    _, logits, _, _ = model(carry, inputs)
    logits.square().mean().backward()
    for name, p in model.cond.named_parameters():
        # the zero last layer of the time MLP blocks the first layer's gradient until it has moved (as adaLN-Zero)
        if not name.startswith("time_mlp.fc1"):
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    with torch.no_grad():
        model.cond.time_mlp.fc2.weight.add_(1e-3)
    model.zero_grad()
    _, logits, _, _ = model(carry, inputs)
    logits.square().mean().backward()
    assert model.cond.time_mlp.fc1.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", ["scalar", "channel", "dense"])
@pytest.mark.parametrize("w", [1, 2, 4])
def test_history_reads_exactly_the_last_w_states(kind, w):
    """Against the formula over the full list of past states, in float64: the term at l depends on
    h_{l-1}, ..., h_{l-m_l} (m_l = min(w, max(l - 1, 0))) and on nothing older."""
    torch.manual_seed(1)
    cond = Conditioner(ConditionConfig(history=kind, window=w), D, LAYERS, SUBS).double()
    with torch.no_grad():
        cond.B.normal_()
    S, B, T = 5, 2, 9
    states = [torch.randn(B, S, D, dtype=torch.float64, requires_grad=True) for _ in range(T + 1)]
    state = cond.init(states[0].detach())
    for ell in range(T + 1):
        h = states[ell]
        term = cond.history_term(state, h)
        m = min(w, max(ell - 1, 0))
        ref = torch.zeros_like(h)
        for j in range(1, m + 1):
            Bj = cond.B[j - 1]
            diff = states[ell - j] - h
            ref = ref + (diff @ Bj.T if kind == "dense" else Bj * diff)
        torch.testing.assert_close(term, ref, rtol=1e-12, atol=1e-12)
        grads = torch.autograd.grad(term.sum(), states[:ell], allow_unused=True) if ell else []
        for i, g in enumerate(grads):
            read = ell - m <= i <= ell - 1 and m > 0
            assert (g is not None and g.abs().sum() > 0) == read, (ell, i)
        state = cond.advance(state, h)  # the ring keeps the values; gradients flow through it


@pytest.mark.parametrize("w", [1, 2, 4])
def test_history_state_is_O_w_d(w):
    cond = Conditioner(ConditionConfig(history="channel", window=w), D, LAYERS, SUBS)
    B, S = 3, 7
    state = cond.init(torch.zeros(B, S, D))
    sizes = []
    for _ in range(40):
        state = cond.advance(state, torch.randn(B, S, D))
        sizes.append(Connection.state_nbytes(state))  # the same accounting as the loop connections
    assert set(sizes) == {B * 8 + B * w * S * D * 4}  # step counter + w states, whatever the number of updates
    assert state["hist"].shape == (B, w, S, D)


def test_reset_restarts_the_history_of_one_sample():
    _, model = _pair(dict(history="dense", window=2))
    with torch.no_grad():
        model.cond.B.normal_(std=0.1)
    inputs = _inputs()
    carry = model.initial_carry(3)
    x = model.embed(inputs)
    for _ in range(4):
        carry, _ = model.outer_update(carry, x)
    carry = model.reset_carry(carry, torch.tensor([False, True, False]))
    assert carry["cond"]["step"].tolist() == [4, 0, 4]
    assert carry["cond"]["hist"][1].abs().sum() == 0 and carry["cond"]["hist"][0].abs().sum() > 0
    fresh = model.initial_carry(1)
    for _ in range(3):  # the restarted sample follows a fresh run exactly
        carry, _ = model.outer_update(carry, x)
        fresh, _ = model.outer_update(fresh, x[1:2])
        torch.testing.assert_close(carry["y"]["h"][1:2], fresh["y"]["h"], rtol=1e-6, atol=1e-6)


def test_timestep_is_l_over_L_infer_and_a_budget_is_told():
    cond = Conditioner(ConditionConfig(timestep="loop_gating", horizon=8), D, LAYERS, SUBS)
    state = {"step": torch.tensor([0, 3, 8])}
    assert cond.time(state, 8).tolist() == [0.0, 0.375, 1.0]
    phi = time_features(torch.tensor([0.25], dtype=torch.float64), 3)
    np.testing.assert_allclose(phi[0].numpy(), [np.sin(np.pi / 4), np.sin(np.pi / 2), np.sin(3 * np.pi / 4),
                                                np.cos(np.pi / 4), np.cos(np.pi / 2), np.cos(3 * np.pi / 4)],
                               atol=1e-12)
    _, model = _pair(dict(timestep="loop_gating", horizon=8))
    with torch.no_grad():
        for p in model.cond.parameters():
            p.normal_(std=0.5)
    inputs = _inputs()
    a = [c["y"]["h"].clone() for _, c, _ in model.iterate(inputs, 4, horizon=4)]
    b = [c["y"]["h"].clone() for _, c, _ in model.iterate(inputs, 4, horizon=16)]
    assert torch.equal(a[0], b[0])  # t_0 = 0 whatever the budget
    assert not torch.allclose(a[-1], b[-1])


def _task_data(n=10):
    g = np.random.default_rng(0)
    inputs = g.integers(1, BASE.vocab_size, (n, BASE.seq_len)).astype(np.uint8)
    return TaskData("synthetic", inputs, inputs.copy(), BASE.grid, BASE.vocab_size, np.zeros(n, np.int32))


@pytest.mark.parametrize("cond", [dict(history="dense", window=2), dict(timestep="loop_gating", horizon=8)])
def test_budget_evaluation_tells_each_run_its_budget(cond):
    _, model = _pair(cond)
    with torch.no_grad():
        for p in model.cond.parameters():
            p.normal_(std=0.3)
    data = _task_data()
    budgets = (2, 5, 9)
    got = evaluate_budgets(model, data, budgets, batch_size=4, progress=False)
    assert got["budgets"].tolist() == list(budgets)
    inputs = torch.from_numpy(data.inputs.astype(np.int64))
    labels = torch.from_numpy(data.labels.astype(np.int64))
    for j, b in enumerate(budgets):  # by hand: a run of exactly b updates, told its budget
        *_, (_, carry, _) = model.iterate(inputs, b, horizon=b)
        wrong = (model.readout(carry)[0].argmax(-1) != labels).sum(-1).numpy()
        np.testing.assert_array_equal(got["wrong_cells"][j], wrong)
    if not ConditionConfig(**cond).uses_horizon:  # one long run read at each budget gives the same
        sep = evaluate_budgets(model, data, budgets, batch_size=4, progress=False, separate=True)
        np.testing.assert_array_equal(sep["wrong_cells"], got["wrong_cells"])


@pytest.mark.parametrize("field,value,needle", [
    ("inject", "matrix", "model.cond.inject"),
    ("history", "mlp", "model.cond.history"),
    ("timestep", "film", "model.cond.timestep"),
    ("window", 0, "model.cond.window"),
])
def test_bad_conditioner_configuration_is_named(field, value, needle):
    with pytest.raises(ValueError, match=needle):
        BASE.replace(cond=ConditionConfig(**{field: value})).validate()


def test_timestep_needs_a_horizon_and_unknown_fields_are_named():
    with pytest.raises(ValueError, match="model.cond.horizon"):
        ConditionConfig(timestep="adaln").validate()
    with pytest.raises(ValueError, match="model.cond.t_freqs: 8 frequencies alias"):
        ConditionConfig(timestep="loop_gating", horizon=8, t_freqs=8).validate()
    with pytest.raises(ValueError, match="model.cond: unknown field"):
        ModelConfig.from_dict({**BASE.to_dict(), "cond": {"windw": 2}})
    cfg = BASE.replace(cond=ConditionConfig(history="dense", window=2))
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_recipes_and_hashes():
    lg = resolve_config("sudoku", "loop_gating", "smoke")
    assert lg["model"]["cond"]["horizon"] == lg["model"]["H"] * lg["train"]["max_segments"]
    assert lg["model"]["inner"]["name"] == lg["model"]["outer"]["name"] == "carry_last"
    h2 = resolve_config("sudoku", "history_w2", "smoke")
    assert (h2["model"]["cond"]["history"], h2["model"]["cond"]["window"]) == ("dense", 2)
    assert {"history_w1", "history_w2", "loop_gating", "history_lg", "inject_dense"} <= set(RECIPES)
    # the hash covers the code version (runs of older model or training code are never reused) and the
    # conditioners
    plain = resolve_config("sudoku", "carry_last", "smoke")
    assert plain["code_version"] == CODE_VERSION
    assert config_hash({**plain, "code_version": CODE_VERSION - 1}) != config_hash(plain)
    assert config_hash(resolve_config("sudoku", "carry_last", "smoke", {"model.cond.inject": "scalar"})) != \
        config_hash(plain)


def test_loop_gate_is_bounded_and_applied():
    _, model = _pair(dict(timestep="loop_gating", horizon=8))
    with torch.no_grad():
        for p in model.cond.parameters():
            p.normal_(std=0.3)
    t = torch.linspace(0, 1, 50)
    g = model.cond.loop_gate(t)
    assert g.shape == (50, 1, D) and (g > 0).all() and (g < 2).all()
    h, h_new = torch.randn(50, 4, D), torch.randn(50, 4, D)
    torch.testing.assert_close(model.cond.gate(t, h, h_new), h + g * (h_new - h))
    with pytest.raises(ValueError, match="no loop gate"):
        _pair(dict(timestep="adaln", horizon=8))[1].cond.loop_gate(t)
