"""The mathematical contract of the paper's method: eq. 2 (explicit) == eq. 4 (streaming) == eq. 5
(the connection module, log space), in float64, plus the properties the paper states."""

import math

import pytest
import torch

import infiloop
from infiloop.model.connections import ConnectionConfig, build_connection

F64 = torch.float64


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def random_case(gen, T, lead, d, dtype=F64):
    scale = 1 + 29 * torch.rand(T, *lead, 1, generator=gen, dtype=dtype)  # |z| from 1 to 30
    z = torch.randn(T, *lead, d, generator=gen, dtype=dtype) * scale
    q = torch.randn(d, generator=gen, dtype=dtype) * 2
    return z, q


def run_module(conn, z):
    state = conn.init(z[0])
    hs, gammas, scores = [state["h"]], [], []
    for t in range(1, z.shape[0]):
        state, h, diag = conn.step(state, z[t])
        hs.append(h)
        gammas.append(diag["gamma"])
        scores.append(diag["score"])
    return torch.stack(hs), torch.stack(gammas), torch.stack(scores)


@pytest.mark.parametrize("T,lead", [(1000, ()), (300, (2, 3)), (50, (4,))])
@pytest.mark.parametrize("beta", [0.05, 0.55, 0.97])
def test_stream_equals_aggregate_float64(gen, T, lead, beta):
    z, q = random_case(gen, T, lead, 8)
    a = infiloop.aggregate(z, q, beta)
    s = infiloop.stream(z, q, beta)
    assert a.shape == z.shape and s.shape == z.shape
    assert rel_err(s, a) < 1e-10


def _eq2_numpy(z, q, beta, eps=1e-6, clip=8.0):
    """Eq. 2 from its definition, in numpy float64, sharing no code with the package: s_i = q . z_i /
    sqrt(mean(z_i^2) + eps), clipped above at 8; alpha_{t,i} = exp(s_i - lambda (t - i)) / sum_j (...)."""
    import numpy as np

    z, q = z.numpy(), q.numpy()
    T = z.shape[0]
    s = np.einsum("t...d,d->t...", z / np.sqrt((z**2).mean(-1, keepdims=True) + eps), q)
    s = np.minimum(s, clip) if clip is not None else s
    lam = -math.log(beta)
    out = np.empty_like(z)
    for t in range(T):
        logits = s[: t + 1] - lam * (t - np.arange(t + 1)).reshape(-1, *([1] * (s.ndim - 1)))
        w = np.exp(logits - logits.max(0, keepdims=True))
        w /= w.sum(0, keepdims=True)
        out[t] = (w[..., None] * z[: t + 1]).sum(0)
    return torch.from_numpy(out)


@pytest.mark.parametrize("beta", [0.2, 0.55, 0.9])
def test_all_three_forms_equal_an_independent_eq2(gen, beta):
    """aggregate, stream and the module against eq. 2 computed from scratch (own score, own weights)."""
    z, q = random_case(gen, 120, (3,), 8)
    ref = _eq2_numpy(z, q, beta)
    assert rel_err(infiloop.aggregate(z, q, beta), ref) < 1e-12
    assert rel_err(infiloop.stream(z, q, beta), ref) < 1e-10
    conn = build_connection(ConnectionConfig(name="infiloop", decay="fixed", beta=beta), 8).double()
    with torch.no_grad():
        conn.q.copy_(q)
    assert rel_err(run_module(conn, z)[0], ref) < 1e-10


def test_stream_equals_aggregate_without_clip_and_large_scores(gen):
    z, q = random_case(gen, 200, (3,), 16)
    q = q * 20  # scores of order +-100: exp() of them would overflow a naive N/D
    a = infiloop.aggregate(z, q, 0.3, score_clip=None)
    s = infiloop.stream(z, q, 0.3, score_clip=None)
    assert torch.isfinite(s).all()
    assert rel_err(s, a) < 1e-10


@pytest.mark.parametrize("decay", ["fixed", "learned"])
def test_module_steps_equal_both_forms(gen, decay):
    z, q = random_case(gen, 400, (2, 5), 12)
    conn = build_connection(ConnectionConfig(name="infiloop", decay=decay, beta=0.7), 12).double()
    with torch.no_grad():
        conn.q.copy_(q)
    beta = conn.log_beta().detach().exp()
    h, gamma, _ = run_module(conn, z)
    assert rel_err(h, infiloop.aggregate(z, q, beta)) < 1e-10
    assert rel_err(h, infiloop.stream(z, q, beta)) < 1e-10
    assert ((gamma > 0) & (gamma < 1)).all()


def test_gamma_is_eq5(gen):
    """gamma_t = e_t / (beta D_{t-1} + e_t), with D accumulated naively in float64 (small T)."""
    z, q = random_case(gen, 30, (3,), 8)
    beta = 0.55
    conn = build_connection(ConnectionConfig(decay="fixed", beta=beta), 8).double()
    with torch.no_grad():
        conn.q.copy_(q)
    _, gamma, scores = run_module(conn, z)
    rms = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + 1e-6)
    e = torch.exp((rms @ q).clamp(max=8.0))
    D = e[0]
    for t in range(1, 30):
        expected = e[t] / (beta * D + e[t])
        assert torch.allclose(gamma[t - 1], expected, rtol=1e-12, atol=0)
        assert torch.allclose(scores[t - 1], e[t].log(), rtol=1e-12)
        D = beta * D + e[t]


def test_both_dtypes_and_float32_accuracy(gen):
    z, q = random_case(gen, 100, (4,), 16)
    ref = infiloop.aggregate(z, q, 0.6)
    for fn in (infiloop.aggregate, infiloop.stream):
        out = fn(z.float(), q.float(), 0.6)
        assert out.dtype == torch.float32
        assert rel_err(out.double(), ref) < 1e-5


def test_score_clip_is_a_hard_upper_bound(gen):
    z, q = random_case(gen, 20, (8,), 8)
    conn = build_connection(ConnectionConfig(score_clip=2.0), 8).double()
    with torch.no_grad():
        conn.q.copy_(q * 10)
    _, _, scores = run_module(conn, z)
    assert scores.max().item() == 2.0
    assert scores.min().item() < -2.0  # only the top is clipped


def test_convex_hull(gen):
    for _ in range(5):
        z, q = random_case(gen, 120, (6,), 10)
        bound = torch.linalg.vector_norm(z, dim=-1).cummax(dim=0).values  # max_{i<=t} ||z_i||
        for h in (infiloop.aggregate(z, q, 0.4), infiloop.stream(z, q, 0.9)):
            assert (torch.linalg.vector_norm(h, dim=-1) <= bound * (1 + 1e-12)).all()


def test_equal_scores_make_gamma_tend_to_one_minus_beta(gen):
    beta = 0.44
    for cfg in (ConnectionConfig(decay="fixed", beta=beta, content_score=False),
                ConnectionConfig(decay="fixed", beta=beta)):  # q = 0 at init: all scores equal
        conn = build_connection(cfg, 8).double()
        z = torch.randn(300, 5, 8, generator=gen, dtype=F64)
        _, gamma, _ = run_module(conn, z)
        # gamma_t = 1 / (1 + beta + ... + beta^t) -> 1 - beta
        assert torch.allclose(gamma[-1], torch.full_like(gamma[-1], 1 - beta), atol=1e-12)
        assert torch.allclose(gamma[0], torch.full_like(gamma[0], 1 / (1 + beta)), atol=1e-12)


def _adversarial_run(dtype, steps):
    """Phases of scores pinned at the clip (8), then very low (-20), then at the clip again."""
    d = 16
    u = torch.ones(d, dtype=dtype) / math.sqrt(d)
    conn = build_connection(ConnectionConfig(decay="fixed", beta=0.55), d).to(dtype)
    with torch.no_grad():
        conn.q.copy_(5 * u)  # q . RMSNorm(+-u) = +-20
    z_hi, z_lo = u.expand(3, d) * 7.0, -u.expand(3, d) * 0.01
    state = conn.init(z_hi)
    gmin, gmax, finite = 1.0, 0.0, True
    third = steps // 3
    for t in range(1, steps):
        z = z_lo if third <= t < 2 * third else z_hi
        state, h, diag = conn.step(state, z)
        if t % 1000 == 0 or t in (third, third + 1, 2 * third, 2 * third + 1):
            finite &= bool(torch.isfinite(h).all() and torch.isfinite(state["log_d"]).all())
            gmin, gmax = min(gmin, diag["gamma"].min().item()), max(gmax, diag["gamma"].max().item())
            finite &= bool(torch.isfinite(diag["gamma"]).all())
    return finite, gmin, gmax, state


# slow (29 s): the 100,000-step horizon; test_adversarial_float64_gamma_strictly_inside covers the bounds
@pytest.mark.slow
def test_hundred_thousand_float32_steps_stay_finite():
    finite, gmin, gmax, state = _adversarial_run(torch.float32, 100_000)
    assert finite
    # In float32 a gamma of 1 - 1e-12 rounds to 1.0: the strict bounds are checked in float64 below.
    assert 0.0 <= gmin and gmax <= 1.0
    assert gmin < 0.5 < gmax


def test_adversarial_float64_gamma_strictly_inside():
    finite, gmin, gmax, _ = _adversarial_run(F64, 30_000)
    assert finite
    assert 0.0 < gmin and gmax < 1.0


def test_reverse_and_uniform_decay_are_exact(gen):
    z, q = random_case(gen, 60, (3,), 8)
    for decay, beta in (("reverse", 1.82), ("uniform", 1.0)):
        conn = build_connection(ConnectionConfig(decay=decay, beta=beta if decay == "reverse" else 0.55), 8)
        conn = conn.double()
        with torch.no_grad():
            conn.q.copy_(q)
        h, _, _ = run_module(conn, z)
        assert rel_err(h, infiloop.aggregate(z, q, beta)) < 1e-10


def test_aggregate_and_stream_gradcheck(gen):
    z, q = random_case(gen, 6, (2,), 5)
    z.requires_grad_(True)
    q.requires_grad_(True)
    beta = torch.tensor(0.6, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z, q, b: infiloop.stream(z, q, b, score_clip=None), (z, q, beta))
    assert torch.autograd.gradcheck(lambda z, q, b: infiloop.aggregate(z, q, b, score_clip=None), (z, q, beta))


def test_bad_beta_for_the_functions(gen):
    z, q = random_case(gen, 4, (), 4)
    with pytest.raises(ValueError, match="beta"):
        infiloop.stream(z, q, 0.0)
    with pytest.raises(ValueError, match="beta"):
        infiloop.aggregate(z, q, -1.0)
