"""How InfiLoop's connection is trained (docs/connection-study.md), in float64 against eq. 2:

- ``history_grad``: with the old candidates held fixed, the gradients of gamma_t and log D_t with respect
  to q and log beta are those of eq. 2's explicit form, through a detached (deep-supervision) state, for a
  gradient window of one step or several; the forward values are untouched; evaluation keeps O(d) state.
- ``z0_candidate=False``: eq. 2's sums start at i = 1 (gamma_1 = 1), in the eager step and the Triton kernel.
- ``clip_mode="soft"``: c tanh(s / c) in the explicit and the streaming form alike.
- the candidate loss, the weight-decay groups, the logged connection statistics and the run hashes of
  settings at their neutral values.
"""

import json

import pytest
import torch
import torch.nn.functional as F

import infiloop
from infiloop.model.connections import ConnectionConfig, build_connection
from infiloop.model.kernels import content_score

F64 = torch.float64


def _connection(gen, d, **cfg):
    conn = build_connection(ConnectionConfig(**cfg), d).double().train()
    with torch.no_grad():
        conn.q.copy_(torch.randn(d, generator=gen, dtype=F64) * 1.5)
        if hasattr(conn, "rho"):
            conn.rho.fill_(0.3)
    return conn


def _explicit(z, q, rho, clip, mode, start=0):
    """gamma_t and log D_t of eq. 2 at the last step, as functions of (q, rho), candidates z[start:] fixed."""
    z = z[start:]
    s = content_score(z, q, clip, 1e-6, mode)
    ages = torch.arange(z.shape[0] - 1, -1, -1, dtype=F64).reshape(-1, *([1] * (s.ndim - 1)))
    logits = s - ages * F.softplus(rho)
    return torch.softmax(logits, 0)[-1], torch.logsumexp(logits, 0)


def _streamed(conn, z, window):
    """Run the connection over z with the first T - window steps detached (as deep supervision does), the
    last ``window`` steps with gradients; return (gamma_T, log D_T)."""
    T = z.shape[0]
    with torch.no_grad():
        st = conn.init(z[0])
        for t in range(1, T - window):
            st, _, _ = conn.step(st, z[t])
    st = {k: v.detach() for k, v in st.items()}
    for t in range(T - window, T):
        st, _, diag = conn.step(st, z[t])
    return diag["gamma"], st["log_d"]


@pytest.mark.parametrize("clip,mode", [(None, "hard"), (8.0, "hard"), (4.0, "soft")])
@pytest.mark.parametrize("window", [1, 3])
@pytest.mark.parametrize("z0_candidate", [True, False])
def test_history_grad_is_the_gradient_of_eq2(gen, clip, mode, window, z0_candidate):
    d, T = 8, 9
    z = torch.randn(T, 5, d, generator=gen, dtype=F64) * 2
    conn = _connection(gen, d, history_grad=True, score_clip=clip, clip_mode=mode, z0_candidate=z0_candidate)
    gamma, log_d = _streamed(conn, z, window)
    # the last `window` candidates carry their own gradient paths (to the block): hold them fixed here too
    got = torch.autograd.grad((gamma * torch.arange(5, dtype=F64)).sum() + log_d.sum(), [conn.q, conn.rho])
    q = conn.q.detach().clone().requires_grad_(True)
    rho = conn.rho.detach().clone().requires_grad_(True)
    g_ref, ld_ref = _explicit(z, q, rho, clip, mode, start=0 if z0_candidate else 1)
    want = torch.autograd.grad((g_ref * torch.arange(5, dtype=F64)).sum() + ld_ref.sum(), [q, rho])
    for a, b in zip(got, want):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert torch.allclose(gamma, g_ref.detach(), rtol=1e-10) and torch.allclose(log_d, ld_ref.detach(), rtol=1e-10)


def test_detached_history_gradient_is_not_eq2s(gen):
    """Without history_grad the retained mass is a constant to the gradient: the same check fails (this is
    what the switch corrects), and a common shift of every score still moves gamma."""
    d, T = 8, 9
    z = torch.randn(T, 5, d, generator=gen, dtype=F64) * 2
    conn = _connection(gen, d, history_grad=False, score_clip=None)
    gamma, _ = _streamed(conn, z, 1)
    got = torch.autograd.grad(gamma.sum(), [conn.q, conn.rho])
    q = conn.q.detach().clone().requires_grad_(True)
    rho = conn.rho.detach().clone().requires_grad_(True)
    want = torch.autograd.grad(_explicit(z, q, rho, None, "hard")[0].sum(), [q, rho])
    assert not torch.allclose(got[0], want[0], rtol=1e-3)
    assert not torch.allclose(got[1], want[1], rtol=1e-3)


def test_history_grad_common_shift_of_scores_has_no_gradient(gen):
    """Eq. 2 is unchanged when every score moves by the same amount; with constant-norm candidates a step
    of q along a direction every normalised candidate shares is such a shift, so the gradient has no
    component along it (the detached history's gradient has one)."""
    d, T = 8, 7
    common = torch.zeros(d, dtype=F64)
    common[0] = 1.0
    z = torch.randn(T, 4, d, generator=gen, dtype=F64)
    z[..., 0] = 0
    z = z / z.pow(2).mean(-1, keepdim=True).sqrt() * (1 - 1 / d) ** 0.5  # rms 1 after adding the common part
    z[..., 0] = 1.0  # every normalised candidate has the same first coordinate
    for history, zero in ((True, True), (False, False)):
        conn = _connection(gen, d, history_grad=history, score_clip=None)
        gamma, _ = _streamed(conn, z, 1)
        (gq,) = torch.autograd.grad(gamma.sum(), [conn.q])
        assert (abs(float(gq @ common)) < 1e-12) == zero


def test_history_grad_changes_no_value_and_evaluation_keeps_o_d_state(gen):
    d, T = 8, 12
    z = torch.randn(T, 3, d, generator=gen, dtype=F64)
    a = _connection(torch.Generator().manual_seed(5), d, history_grad=True)
    b = _connection(torch.Generator().manual_seed(5), d, history_grad=False)
    sa, sb = a.init(z[0]), b.init(z[0])
    assert set(sa) == {"h", "log_d", "u", "age"} and set(sb) == {"h", "log_d"}
    for t in range(1, T):
        sa, ha, da = a.step(sa, z[t])
        sb, hb, db = b.step(sb, z[t])
        assert torch.equal(ha, hb) and torch.equal(da["gamma"], db["gamma"]) and torch.equal(sa["log_d"], sb["log_d"])
    a.eval()
    st = a.init(z[0])
    assert set(st) == {"h", "log_d"}
    st, _, _ = a.step(st, z[1])
    assert a.state_nbytes(st) == b.state_nbytes(b.init(z[0]))


@pytest.mark.parametrize("beta", [0.3, 0.9])
def test_initial_state_not_a_candidate(gen, beta):
    """z0_candidate=False: h_0 = z_0 holds no weight, gamma_1 = 1, and h_t is eq. 2 over z_1..z_t."""
    d, T = 8, 40
    z = torch.randn(T, 2, 3, d, generator=gen, dtype=F64) * 3
    conn = _connection(gen, d, z0_candidate=False, decay="fixed", beta=beta)
    st = conn.init(z[0])
    assert torch.isneginf(st["log_d"]).all()
    hs, gammas = [], []
    for t in range(1, T):
        st, h, diag = conn.step(st, z[t])
        hs.append(h)
        gammas.append(diag["gamma"])
    assert torch.equal(gammas[0], torch.ones_like(gammas[0])) and torch.allclose(hs[0], z[1], rtol=1e-14, atol=1e-14)
    ref = infiloop.aggregate(z[1:], conn.q.detach(), beta)
    assert torch.allclose(torch.stack(hs), ref, rtol=1e-10, atol=1e-10)
    assert all(torch.isfinite(g).all() for g in gammas)


def test_initial_state_not_a_candidate_gradients_are_finite(gen):
    d = 8
    z = torch.randn(4, 3, d, generator=gen, dtype=F64, requires_grad=True)
    conn = _connection(gen, d, z0_candidate=False)
    st = conn.init(z[0].detach())
    out = 0
    for t in range(1, 4):
        st, h, _ = conn.step(st, z[t])
        out = out + h.pow(2).sum() + st["log_d"].sum()
    out.backward()
    for g in (z.grad, conn.q.grad, conn.rho.grad):
        assert torch.isfinite(g).all()


@pytest.mark.parametrize("T", [1, 50])
def test_soft_cap_explicit_equals_streaming(gen, T):
    d = 8
    z = torch.randn(T, 4, d, generator=gen, dtype=F64) * 5
    q = torch.randn(d, generator=gen, dtype=F64) * 4
    a = infiloop.aggregate(z, q, 0.6, 3.0, clip_mode="soft")
    s = infiloop.stream(z, q, 0.6, 3.0, clip_mode="soft")
    assert torch.allclose(a, s, rtol=1e-10, atol=1e-12)
    conn = build_connection(ConnectionConfig(clip_mode="soft", score_clip=3.0, decay="fixed", beta=0.6), d).double()
    with torch.no_grad():
        conn.q.copy_(q)
    st = conn.init(z[0])
    for t in range(1, T):
        st, h, diag = conn.step(st, z[t])
        assert torch.allclose(h, a[t], rtol=1e-10, atol=1e-12)
        assert (diag["score"].abs() < 3.0).all()


def test_soft_cap_on_the_triton_backend_is_refused():
    from infiloop.model.kernels import infiloop_step

    z = torch.randn(2, 4)
    with pytest.raises(ValueError, match="hard score clip only"):
        infiloop_step(z, z, torch.zeros(2), torch.zeros(4), torch.tensor(-0.5), 8.0, 1e-6, backend="triton",
                      clip_mode="soft")
    with pytest.raises(ValueError, match="clip_mode"):
        ConnectionConfig(clip_mode="cubic").validate()


def test_triton_kernel_takes_a_state_without_mass():
    """The fused kernel (under Triton's interpreter) at log D = -inf: gamma = 1, D_t = e_t, finite gradients."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    if os.environ.get("TRITON_INTERPRET") != "1":  # Triton reads it at import: run this test in a new process
        test = f"{__file__}::test_triton_kernel_takes_a_state_without_mass"
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                           env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
        return
    from infiloop.model.kernels import infiloop_step
    from infiloop.model.kernels.reference import infiloop_step as ref

    g = torch.Generator().manual_seed(0)
    z = torch.randn(6, 16, generator=g, requires_grad=True)
    h = torch.randn(6, 16, generator=g)
    ld = torch.tensor([float("-inf")] * 3 + [0.5] * 3)
    q = (torch.randn(16, generator=g) * 0.5).requires_grad_(True)
    lb = torch.tensor(-0.6, requires_grad=True)
    outs = infiloop_step(z, h, ld, q, lb, 8.0, 1e-6, backend="triton")
    refs = ref(z, h, ld, q, lb, 8.0, 1e-6)
    for a, b in zip(outs, refs):
        assert torch.allclose(a, b, atol=1e-5)
    grads = torch.autograd.grad(outs[0].sum() + outs[1].sum(), [z, q, lb])
    want = torch.autograd.grad(refs[0].sum() + refs[1].sum(), [z, q, lb])
    for a, b in zip(grads, want):
        assert torch.isfinite(a).all() and torch.allclose(a, b, atol=1e-4)


# ------------------------------------------------------------------------------------------ training


def _configs(recipe, **train):
    from infiloop.experiments.settings.recipes import resolve_config
    from infiloop.model import ModelConfig
    from infiloop.training import TrainConfig

    cfg = resolve_config("sudoku", recipe, "smoke", {f"train.{k}": v for k, v in train.items()})
    return ModelConfig.from_dict(cfg["model"]), TrainConfig.from_dict(cfg["train"])


def _model(recipe, **train):
    from infiloop.model import LoopedReasoner

    model_cfg, tc = _configs(recipe, **train)
    return LoopedReasoner(model_cfg), tc


def test_no_connections_decay_group_exempts_q_and_rho():
    from infiloop.optim import make_optimizer

    model, tc = _model("infiloop", decay="no_connections")
    opt = make_optimizer(model, tc)
    no_decay = {id(p) for g in opt.param_groups if g["weight_decay"] == 0 for p in g["params"]}
    conn = {id(p) for n, p in model.named_parameters() if n.startswith("conn_")}
    assert conn and no_decay == conn


def test_candidate_loss_is_carry_last_s_own_loss(tmp_path):
    """For carry-last the candidate is the state: the mixed loss is the same number; InfiLoop's differs."""
    from infiloop.experiments.settings.profiles import data_profile
    from infiloop.tasks import load
    from infiloop.training import train

    data = load("sudoku", data_profile("smoke"), "train")
    finals = {}
    for recipe in ("carry_last", "infiloop"):
        for w in (0.0, 0.5):
            model_cfg, tc = _configs(recipe, candidate_loss=w, steps=3, log_every=1, checkpoint_every=100)
            out = train(model_cfg, tc, data, tmp_path / f"{recipe}-{w}", progress=False)
            finals[recipe, w] = out["final"]["lm_loss"]
    assert finals["carry_last", 0.0] == pytest.approx(finals["carry_last", 0.5], rel=1e-5)
    assert finals["infiloop", 0.0] != pytest.approx(finals["infiloop", 0.5], rel=1e-5)


def test_training_log_records_the_connection(tmp_path):
    from infiloop.experiments.settings.profiles import data_profile
    from infiloop.tasks import load
    from infiloop.training import CONNECTION_STATS, train

    data = load("sudoku", data_profile("smoke"), "train")
    model_cfg, tc = _configs("infiloop", steps=4, log_every=2, checkpoint_every=100)
    train(model_cfg, tc, data, tmp_path / "run", progress=False)
    recs = [json.loads(ln) for ln in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [2, 4]
    for axis in ("inner", "outer"):
        for k in CONNECTION_STATS:
            assert f"{axis}_{k}" in recs[-1]
        assert 0 < recs[-1][f"{axis}_gamma"] < 1 and 0 < recs[-1][f"{axis}_beta"] < 1
    assert "outer_score_wrong_corr" in recs[-1]
    model_cfg, tc = _configs("carry_last", steps=2, log_every=2, checkpoint_every=100)
    train(model_cfg, tc, data, tmp_path / "cl", progress=False)
    rec = json.loads((tmp_path / "cl" / "metrics.jsonl").read_text().splitlines()[-1])
    assert not any(k.startswith(("inner_", "outer_")) for k in rec)


def test_connection_stats_measure_the_clip():
    """A query that puts every raw score far above the clip: share at the clip 1, mean near |q| sqrt(d)."""
    from infiloop.training import connection_stats

    model, _ = _model("infiloop")
    d, prefix = model.cfg.d_model, model.cfg.prefix
    cand = torch.ones(3, prefix + model.cfg.seq_len, d)
    cand[1] *= -1  # the second board scores -|q| sqrt(d)
    with torch.no_grad():
        model.conn_outer.q.fill_(1.0)
    diag = {"candidate_outer": cand, "gamma_outer": torch.full(cand.shape[:2], 0.25),
            "candidate_inner": cand, "gamma_inner": torch.full(cand.shape[:2], 0.5)}
    labels = torch.zeros(3, model.cfg.seq_len, dtype=torch.long)
    st = connection_stats(model, diag, labels)
    assert st["outer_at_clip"] == pytest.approx(2 / 3) and st["inner_at_clip"] == 0.0
    assert st["outer_q_norm"] == pytest.approx(d ** 0.5) and st["outer_gamma"] == pytest.approx(0.25)
    assert st["outer_score_sd_cells"] == pytest.approx(0.0, abs=1e-4)
    assert st["outer_score_sd_boards"] == pytest.approx(d * 2 / 3 ** 0.5, rel=1e-3)  # board means d, -d, d


# Run hashes of the `tiny` and `search` profiles before the study's switches existed (commit 6c6896c).
HASHES_BEFORE = {("carry_last", "tiny"): "649c294a1d", ("carry_last", "search"): "b42f67c9b6",
                 ("infiloop", "tiny"): "5e171e9215", ("infiloop", "search"): "f791ab8eff",
                 ("fprm", "tiny"): "5857733083", ("fprm", "search"): "78a3f7d2c9"}


@pytest.mark.usefixtures("native_mode")  # pinned before the numeric mode (conftest.py)
def test_runs_cached_before_the_switches_keep_their_names():
    """Carry-last's runs keep their hashes (the study's choice does not change its loss); InfiLoop's and
    FPRM's change, and with the switches set to their earlier values they hash as before."""
    from infiloop.experiments.settings.recipes import config_hash, resolve_config
    from infiloop.experiments.studies.connection_design import AS_BUILT

    for (recipe, profile), before in HASHES_BEFORE.items():
        now = config_hash(resolve_config("sudoku", recipe, profile))
        assert (now == before) == (recipe == "carry_last")
        old = AS_BUILT if recipe == "infiloop" else {"train.candidate_loss": 0.0}
        assert config_hash(resolve_config("sudoku", recipe, profile, old)) == before


def test_settings_without_effect_leave_the_hash():
    from infiloop.experiments.settings.recipes import config_hash, resolve_config

    base = config_hash(resolve_config("sudoku", "carry_last", "smoke"))
    for over in ({"model.outer.history_grad": True}, {"model.inner.z0_candidate": False},
                 {"train.candidate_loss": 0.0}, {"model.outer.clip_mode": "soft"}):
        assert config_hash(resolve_config("sudoku", "carry_last", "smoke", over)) == base
    inf = config_hash(resolve_config("sudoku", "infiloop", "smoke"))
    for over in ({"model.outer.history_grad": False}, {"model.inner.z0_candidate": True},
                 {"train.candidate_loss": 0.0}, {"model.outer.clip_mode": "soft"}):
        assert config_hash(resolve_config("sudoku", "infiloop", "smoke", over)) != inf
