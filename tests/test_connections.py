"""The loop-connection family: every member's update rule, memory, gradients, resets and errors."""

import pytest
import torch

import infiloop
from infiloop.model.connections import CONNECTIONS, ConnectionConfig, build_connection

F64 = torch.float64


def make(name, d=6, **kw):
    return build_connection(ConnectionConfig(name=name, **kw), d).double()


def roll(conn, z):
    state = conn.init(z[0])
    out = [state["h"]]
    for t in range(1, z.shape[0]):
        state, h, _ = conn.step(state, z[t])
        out.append(h)
    return torch.stack(out), state


def test_carry_last_and_ema_rules(gen):
    z = torch.randn(10, 3, 6, generator=gen, dtype=F64)
    h, _ = roll(make("carry_last"), z)
    assert torch.equal(h, z)
    h, _ = roll(make("ema", gamma=0.3), z)
    expected = z[0]
    for t in range(1, 10):
        expected = 0.7 * expected + 0.3 * z[t]
    assert torch.allclose(h[-1], expected, atol=1e-14)


def test_full_attnres_with_shared_query_is_uniform_decay_aggregate(gen):
    """With every per-step query equal to q, Full AttnRes is eq. 2 with beta = 1 (no decay)."""
    z = torch.randn(40, 2, 6, generator=gen, dtype=F64) * 5
    q = torch.randn(6, generator=gen, dtype=F64)
    conn = make("full_attnres", n_queries=8)
    with torch.no_grad():
        conn.queries.copy_(q.expand(8, 6))
    h, _ = roll(conn, z)
    assert torch.allclose(h, infiloop.aggregate(z, q, 1.0), rtol=1e-12, atol=1e-12)


def test_full_attnres_uses_the_query_of_each_step(gen):
    z = torch.randn(6, 1, 6, generator=gen, dtype=F64) * 3
    conn = make("full_attnres", n_queries=4)
    with torch.no_grad():
        conn.queries.copy_(torch.randn(4, 6, generator=gen, dtype=F64))
    h, _ = roll(conn, z)
    keys = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + 1e-6)
    for t in range(1, 6):
        qt = conn.queries[min(t, 3)]
        alpha = torch.softmax((keys[: t + 1] @ qt).clamp(max=8.0), dim=0)
        assert torch.allclose(h[t], (alpha.unsqueeze(-1) * z[: t + 1]).sum(0), atol=1e-12)


def test_state_memory_infiloop_flat_full_attnres_linear(gen):
    sizes = {}
    for name in ("infiloop", "full_attnres", "carry_last", "fprm", "ema"):
        conn = build_connection(ConnectionConfig(name=name), 8)
        z = torch.randn(2, 3, 8, generator=gen)
        state = conn.init(z)
        nbytes = {}
        with torch.no_grad():
            for t in range(1, 10_001):
                state, _, _ = conn.step(state, z)
                if t in (10, 20, 10_000):
                    nbytes[t] = conn.state_nbytes(state)
                if name == "full_attnres" and t == 20:
                    break
        sizes[name] = nbytes
    for name in ("infiloop", "carry_last", "fprm", "ema"):
        assert sizes[name][10] == sizes[name][10_000], name
    per_step = sizes["full_attnres"][20] - sizes["full_attnres"][10]
    assert per_step == 10 * (2 * 3 * 8 * 4 + 2 * 3 * 1)  # one fp32 candidate + one validity flag per token
    # infiloop: h (d floats) and log D (one float) per token: O(d)
    assert sizes["infiloop"][10] == 2 * 3 * (8 + 1) * 4


@pytest.mark.parametrize("name", CONNECTIONS)
def test_gradcheck(gen, name):
    conn = make(name, d=4, n_queries=3, beta=0.6)
    if name == "infiloop":
        with torch.no_grad():
            conn.q.copy_(torch.randn(4, generator=gen, dtype=F64))
    if name == "full_attnres":
        with torch.no_grad():
            conn.queries.copy_(torch.randn(3, 4, generator=gen, dtype=F64))
    z = torch.randn(5, 2, 3, 4, generator=gen, dtype=F64, requires_grad=True)
    params = [p for p in conn.parameters()]

    def f(z, *ps):
        return roll(conn, z)[0]

    assert torch.autograd.gradcheck(f, (z, *params))


def test_learned_beta_stays_in_unit_interval_and_gets_gradient(gen):
    conn = build_connection(ConnectionConfig(beta=0.55), 4)
    assert abs(conn.beta - 0.55) < 1e-6
    with torch.no_grad():
        conn.rho.fill_(-50.0)  # lambda -> 0+: beta -> 1-
    assert 0 < conn.beta <= 1
    with torch.no_grad():
        conn.rho.fill_(50.0)
    assert 0 < conn.beta < 1
    conn = build_connection(ConnectionConfig(beta=0.55), 4)
    z = torch.randn(4, 3, 4, generator=gen)
    h, _ = roll(conn.double(), z.double())
    h.sum().backward()
    assert conn.rho.grad is not None and conn.rho.grad.abs() > 0
    assert sum(p.numel() for p in conn.parameters()) == 4 + 1  # d + 1


def test_fixed_decay_has_no_decay_parameter():
    for decay in ("fixed", "uniform"):
        conn = build_connection(ConnectionConfig(decay=decay), 16)
        assert sum(p.numel() for p in conn.parameters()) == 16


def test_fprm_step_size_schedule_and_halting():
    conn = build_connection(ConnectionConfig(name="fprm", fprm_patience=2, fprm_decay_eval=0.5,
                                             fprm_halt_tol=1e-3), 4).eval()
    h0 = torch.ones(2, 3, 4)
    state = conn.init(h0)
    # Sample 0's relative residual is 1 at every step (never improves), sample 1's is tiny.
    gammas = []
    for t in range(1, 9):
        z = h0.clone()
        z[0] = 2 * state["h"][0]
        z[1] = state["h"][1] + 1e-4 * 0.5 ** t  # tiny residual: halts at once
        state, h, diag = conn.step(state, z)
        gammas.append(diag["gamma"][:, 0].tolist())
    g0 = [g[0] for g in gammas]
    assert g0[:2] == [1.0, 1.0] and g0[2] == 0.5  # stalled for 2 steps -> s *= 0.5
    assert g0[-1] < g0[2]
    assert all(g[1] == 0.0 for g in gammas)  # halted: the state is frozen
    assert bool(state["halted"][1]) and not bool(state["halted"][0])


def test_fprm_uses_training_decay_in_train_mode():
    conn = build_connection(ConnectionConfig(name="fprm", fprm_patience=1, fprm_decay_train=0.9,
                                             fprm_decay_eval=0.99), 4).train()
    state = conn.init(torch.ones(1, 1, 4))
    state, _, _ = conn.step(state, torch.full((1, 1, 4), 2.0))  # residual 1: improves on inf
    state, _, diag = conn.step(state, torch.full((1, 1, 4), 9.0))  # worse: stall 1 -> shrink
    assert diag["gamma"].item() == pytest.approx(0.9)


@pytest.mark.parametrize("name", CONNECTIONS)
def test_reset_restarts_only_masked_rows(gen, name):
    conn = make(name, d=4)
    z = torch.randn(6, 3, 2, 4, generator=gen, dtype=F64)
    _, state = roll(conn, z)
    fresh = torch.randn(3, 2, 4, generator=gen, dtype=F64)
    mask = torch.tensor([True, False, True])
    new = conn.reset(state, mask, fresh)
    assert torch.equal(new["h"][mask], fresh[mask])
    assert torch.equal(new["h"][~mask], state["h"][~mask])
    # After the reset a restarted row behaves exactly as a row that was initialised from ``fresh``.
    z1 = torch.randn(3, 2, 4, generator=gen, dtype=F64)
    _, h_reset, _ = conn.step(new, z1)
    _, h_init, _ = conn.step(conn.init(fresh), z1)
    assert torch.allclose(h_reset[mask], h_init[mask], atol=1e-12)


@pytest.mark.parametrize(
    "cfg,match",
    [
        (dict(name="carry_lats"), r"name: unknown connection 'carry_lats'; valid choices: carry_last, infiloop"),
        (dict(decay="backwards"), r"decay: unknown decay mode .*learned, fixed, uniform, reverse"),
        (dict(beta=1.3), r"beta: decay 'learned' needs beta in \(0, 1\)"),
        (dict(decay="fixed", beta=0.0), r"beta: decay 'fixed' needs beta in \(0, 1\)"),
        (dict(decay="reverse", beta=0.5), r"beta: decay 'reverse' needs beta > 1"),
        (dict(name="ema", gamma=0.0), r"gamma: ema needs gamma in \(0, 1\]"),
        (dict(backend="cuda"), r"backend: unknown kernel backend"),
    ],
)
def test_bad_configuration_is_named(cfg, match):
    with pytest.raises(ValueError, match=match):
        build_connection(ConnectionConfig(**cfg), 8, "model.outer")


def test_unknown_field_is_named():
    with pytest.raises(ValueError, match=r"model.inner: unknown field\(s\) \['bta'\]"):
        build_connection({"name": "infiloop", "bta": 0.5}, 8, "model.inner")
