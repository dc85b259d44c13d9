"""LoopLM (C ∘ F^r ∘ P with a loop connection on the loop axis): the training forward, the reduction of BaseLoop to
a plain decoder, causality, InfiLoop's equality with the explicit form of eq. 2, its O(d) state, any loop count,
and the configuration as data."""

import json

import pytest
import torch

from infiloop.model.conditioning import ConditionConfig
from infiloop.model.connections import ConnectionConfig, aggregate
from infiloop.model.layers import rms_norm
from infiloop.model.looplm import LoopLM, LoopLMConfig

V, T, B = 23, 12, 3
COND_HLG = dict(history="channel", window=2, timestep="loop_gating", horizon=4, t_freqs=2, t_hidden=8)


def _cfg(connection="carry_last", cond=None, **kw) -> LoopLMConfig:
    base = dict(vocab_size=V, seq_len=32, d_model=16, n_heads=2, expansion=2.0, ffn_multiple=8,
                prelude=1, core=1, coda=1, loops=4)
    base.update(kw)
    conn = ConnectionConfig(**connection) if isinstance(connection, dict) else ConnectionConfig(name=connection)
    return LoopLMConfig(connection=conn, cond=ConditionConfig(**(cond or {})), **base)


def _model(cfg: LoopLMConfig, seed=0, dtype=torch.float32) -> LoopLM:
    """A model whose zero-initialised parts (InfiLoop's q, the conditioners' maps) are made random, so that
    every part acts."""
    torch.manual_seed(seed)
    m = LoopLM(cfg).to(dtype)
    with torch.no_grad():
        if hasattr(m.connection, "q"):
            m.connection.q.normal_(0.0, 1.0)
            m.connection.rho.fill_(0.3)
        if m.cond is not None:
            for p in m.cond.parameters():
                p.add_(0.3 * torch.randn_like(p))
    return m


def _tokens(seed=1, n=B, t=T):
    return torch.randint(0, V, (n, t), generator=torch.Generator().manual_seed(seed))


CASES = {
    "carry_last": dict(connection="carry_last"),
    "infiloop": dict(connection="infiloop"),
    # FPRM halts where the relative residual falls below 0.1 (near loop 10 here): per token, or causality breaks
    "fprm": dict(connection=dict(name="fprm", fprm_halt_tol=0.1)),
    "infiloop+history+loop_gating": dict(connection="infiloop", cond=COND_HLG),
    "carry_last+history+loop_gating": dict(connection="carry_last", cond=COND_HLG),
}


@pytest.mark.parametrize("case", list(CASES))
def test_r_equal_to_k_is_the_training_forward(case):
    model, x = _model(_cfg(**CASES[case])), _tokens()
    model.train()
    train = model(x)
    model.eval()
    with torch.no_grad():
        at = model.logits_at(x, [2, 4, 8])
        assert torch.allclose(model(x, loops=4), train, atol=1e-6)
        assert torch.allclose(at[4], train, atol=1e-6)
        for r in (2, 8):  # each budget is its own trajectory, and the budget matters
            assert torch.allclose(at[r], model(x, loops=r), atol=1e-6)
            assert not torch.allclose(at[r], train, atol=1e-4)


def _plain_decoder(model: LoopLM, tokens: torch.Tensor, k: int) -> torch.Tensor:
    """The unlooped decoder of the same blocks: prelude, the core k times, coda, final norm, head."""
    h = model.embed_scale * model.tok_emb(tokens)
    for block in [*model.prelude, *([*model.core] * k), *model.coda]:
        h = block(h)
    if model.cfg.norm == "pre":
        h = rms_norm(h, model.cfg.norm_eps)
    w = model.head.weight if model.head is not None else model.tok_emb.weight
    return h @ w.T


@pytest.mark.parametrize("norm,tie", [("pre", True), ("post", False)])
@pytest.mark.parametrize("k", [1, 3])
def test_carry_last_is_the_plain_decoder_of_p_plus_k_s_plus_c_blocks(norm, tie, k):
    cfg = _cfg(prelude=2, core=2, coda=1, loops=k, norm=norm, tie_head=tie)
    model, x = _model(cfg, dtype=torch.float64), _tokens()
    with torch.no_grad():
        got, want = model(x), _plain_decoder(model, x, k)
    assert cfg.depth() == 2 + 2 * k + 1 and cfg.physical_depth == 5
    assert got.dtype == torch.float64
    assert torch.allclose(got, want, rtol=0, atol=1e-12)
    with torch.no_grad():  # one loop more is another function
        assert not torch.allclose(model(x, loops=k + 1), want, atol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_the_decoder_is_causal(case):
    model, x = _model(_cfg(**CASES[case])).eval(), _tokens()
    t = 5
    y = x.clone()
    y[:, t + 1:] = (x[:, t + 1:] + 1 + torch.arange(T - t - 1)) % V
    with torch.no_grad():
        for r in (1, 4, 16):
            a, b = model(x, loops=r), model(y, loops=r)
            assert torch.allclose(a[:, : t + 1], b[:, : t + 1], atol=1e-6), r
            assert not torch.allclose(a[:, t + 1], b[:, t + 1], atol=1e-4), r


def _explicit_trajectory(model: LoopLM, tokens: torch.Tensor, r: int, z0_candidate: bool) -> list[torch.Tensor]:
    """h_1..h_r by eq. 2 computed explicitly: h_l = aggregate(z_0, z_1, ..., z_l)[l], z_l = F(h_{l-1})."""
    conn = model.connection
    h = model.run(model.prelude, model.embed(tokens))
    cands = [h] if z0_candidate else []
    out = []
    for _ in range(r):
        cands.append(model.run(model.core, h))
        h = aggregate(torch.stack(cands), conn.q, conn.log_beta().exp(), conn.cfg.score_clip, conn.cfg.eps)[-1]
        out.append(h)
    return out


@pytest.mark.parametrize("z0_candidate", [True, False])
def test_infiloop_on_the_loop_axis_is_the_explicit_eq_2(z0_candidate):
    cfg = _cfg("infiloop")
    cfg.connection.z0_candidate = z0_candidate
    model, x, r = _model(cfg, dtype=torch.float64).eval(), _tokens(), 7
    with torch.no_grad():
        want = _explicit_trajectory(model, x, r, z0_candidate)
        got = [h for _, h, _, _ in model.trajectory(x, r)]
        logits, diag = model(x, loops=r, diagnostics=True)
    for lp in range(r):
        assert torch.allclose(got[lp], want[lp], rtol=0, atol=1e-10), lp
    assert torch.allclose(logits, model.readout(want[-1]), rtol=0, atol=1e-10)
    g = diag["gamma"]
    assert g.shape == (r, B, T) and diag["score"].shape == (r, B, T) and diag["update"].shape == (r, B, T)
    assert bool((g > 0).all() and (g <= 1).all())
    assert bool((g[0] == 1).all()) != z0_candidate  # without z_0's weight the first step takes z_1 whole
    assert not torch.allclose(want[-1], model.run(model.core, want[-2]))  # not carry-last


def test_infiloop_state_does_not_grow_with_the_loop_count():
    model, x = _model(_cfg("infiloop", cond=dict(history="channel", window=2)), dtype=torch.float64), _tokens()
    sizes = {}
    with torch.no_grad():
        for lp, _, state, _ in model.trajectory(x, 64):
            sizes[lp] = model.state_nbytes(state)
    d = model.cfg.d_model
    conn = B * T * (d + 1) * 8  # (h, log D) per token, float64
    cond = B * 8 + B * 2 * T * d * 8  # the step count and the ring of w = 2 states
    assert sizes[2] == sizes[64] == conn + cond
    full = _model(_cfg("full_attnres"))  # the measure sees a growing state: Full Attention Residuals keep every z
    with torch.no_grad():
        grow = {lp: full.state_nbytes(s) for lp, _, s, _ in full.trajectory(x, 8) if lp in (2, 8)}
    assert grow[8] > grow[2]


def test_history_injection_and_loop_gating_follow_the_study_on_the_loop_axis():
    """BaseLoop with H + LG, written out: h_l = g-gated F(h_{l-1} + sum_{j<=m} B_j (h_{l-1-j} - h_{l-1})),
    m = min(w, max(l - 2, 0)) (the study's m_ell with ell = l - 1), gate 1 + tanh(G(t)), t = (l - 1) / r."""
    cond = {**COND_HLG, "window": 2}
    model, x, r = _model(_cfg("carry_last", cond=cond), dtype=torch.float64), _tokens(), 6
    c = model.cond
    with torch.no_grad():
        hs = [model.run(model.prelude, model.embed(x))]
        for lp in range(1, r + 1):
            h = hs[-1]
            read = h + sum(c.B[j - 1] * (hs[-1 - j] - h) for j in range(1, min(2, max(lp - 2, 0)) + 1))
            z = model.run(model.core, read)
            t = torch.full((B,), (lp - 1) / r)  # float32, as the conditioner counts the steps
            g = c.loop_gate(t)
            hs.append(h + g * (z - h))
        got = [h for _, h, _, _ in model.trajectory(x, r)]
    for lp in range(1, r + 1):
        assert torch.allclose(got[lp - 1], hs[lp], rtol=0, atol=1e-10), lp


@pytest.mark.parametrize("connection", ["carry_last", "infiloop", "fprm", "ema", "full_attnres"])
def test_any_loop_count_runs(connection):
    model, x = _model(_cfg(connection)).eval(), _tokens(n=2, t=7)
    with torch.no_grad():
        for r in (1, 2, 3, 4, 9, 40):
            logits = model(x, loops=r)
            assert logits.shape == (2, 7, V) and bool(torch.isfinite(logits).all())
        for bad in (0, -1, 2.5):
            with pytest.raises(ValueError, match="loops"):
                model(x, loops=bad)


def test_carry_last_takes_every_candidate_whole():
    model, x = _model(_cfg("carry_last")), _tokens()
    with torch.no_grad():
        _, diag = model(x, loops=5, diagnostics=True)
    assert bool((diag["gamma"] == 1).all()) and diag["gamma"].shape == (5, B, T)


def test_the_head_is_tied_or_not():
    tied, untied = LoopLM(_cfg()), LoopLM(_cfg(tie_head=False))
    assert untied.n_params() - tied.n_params() == V * 16
    assert tied.head is None and untied.head.weight.shape == (V, 16)


def test_the_configuration_round_trips():
    cfg = _cfg("infiloop", cond=COND_HLG, prelude=2, coda=0, norm="post", tie_head=False)
    cfg.connection.beta = 0.3
    d = json.loads(json.dumps(cfg.to_dict()))
    back = LoopLMConfig.from_dict(d)
    assert back == cfg and isinstance(back.connection, ConnectionConfig) and back.connection.beta == 0.3
    assert LoopLM(back).n_params() == LoopLM(cfg).n_params()


BAD = {
    "core": (dict(core=0), "looplm.core"),
    "loops": (dict(loops=0), "looplm.loops"),
    "prelude": (dict(prelude=-1), "looplm.prelude"),
    "n_heads": (dict(n_heads=3), "looplm.n_heads"),
    "norm": (dict(norm="middle"), "looplm.norm"),
    "pos": (dict(pos="alibi"), "looplm.pos"),
    "vocab_size": (dict(vocab_size=1), "looplm.vocab_size"),
    "connection": (dict(connection={"name": "bogus"}), "looplm.connection.name"),
    "cond": (dict(cond={"history": "bogus"}), "looplm.cond.history"),
    "horizon": (dict(cond={"timestep": "loop_gating", "horizon": 8, "t_freqs": 2}), "looplm.cond.horizon"),
    "unknown field": (dict(n_loops=3), "looplm: unknown field"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_configuration_gives_a_one_line_error(case):
    change, where = BAD[case]
    d = {**_cfg().to_dict(), **change}
    with pytest.raises(ValueError) as err:
        LoopLM(LoopLMConfig.from_dict(d))
    msg = str(err.value)
    assert msg.startswith(where) and "\n" not in msg, msg


def test_the_driver_scores_the_answer_words_only():
    from infiloop.tasks.language import LanguageConfig, generate
    from infiloop.training.looplm import LMTrainConfig, accuracy, answer_loss, train

    data = generate(LanguageConfig(task="knowledge", n_entities=8))
    model = _model(_cfg(vocab_size=data.vocab_size))
    split = data.train
    with torch.no_grad():
        logits = model(split.tokens[:, :-1])
        mask = split.answer[:, 1:]
        want = torch.nn.functional.cross_entropy(logits[mask], split.tokens[:, 1:][mask])
        assert torch.allclose(answer_loss(model, split.tokens, split.answer), want, atol=1e-5)
        before = accuracy(model, split, [2, 4])
    fit = train(model, split, LMTrainConfig(steps=40, batch_size=32, warmup=5, lr=1e-2, loss="answer"))
    after = accuracy(model, split, [2, 4])
    assert set(before) == set(after) == {2, 4} and fit["steps"] == 40
    assert after[4] > before[4] + 0.3 and fit["loss"] < float(want) - 1.0


@pytest.mark.parametrize("cond", [{}, {"timestep": "loop_gating", "horizon": 3, "t_freqs": 2}],
                         ids=["one trajectory", "one per r"])
def test_the_cost_model_counts_every_block_the_evaluation_applies(cond):
    """``flops.forward_blocks`` (the plan's token-blocks of an evaluation) equals the positions every block of the
    prelude, core and coda actually processes in ``correct``, counted by forward hooks: one trajectory to the
    largest r, or one per r under timestep conditioning."""
    from infiloop.experiments.cost import flops
    from infiloop.tasks.language import LanguageConfig, Split, generate
    from infiloop.training.looplm import correct

    data = generate(LanguageConfig(task="kinship", n_train=30, n_test=6, n_names=12))
    cfg = _cfg(vocab_size=data.vocab_size, seq_len=data.max_len, loops=3, prelude=2, core=1, coda=1,
               cond=cond)
    model = LoopLM(cfg)
    seen = []
    for block in [*model.prelude, *model.core, *model.coda]:
        block.register_forward_hook(lambda m, args, out: seen.append(out.shape[0] * out.shape[1]))
    split = data.test[max(data.test)]
    part = Split(split.tokens[:5], split.answer[:5], split.depth[:5])
    loops = [1, 3, 6]
    correct(model, part, loops, batch=5)
    assert sum(seen) == flops.forward_blocks(cfg, 5, flops.answer_length(part), loops) > 0


def test_a_decoder_job_writes_the_record_the_notebook_would_compute(tmp_path, monkeypatch):
    """A model of notebook 08 computed as a job (``JobRun``, through its JSON) writes the record that
    the notebook's own path (``Needs.records``) computes: the same file name, the same answers and loop-axis
    diagnostics (only the timings differ); the notebook then reads it without training."""
    from infiloop import paths
    from infiloop.experiments import looplm
    from infiloop.experiments.compute.job import JobRun
    from infiloop.experiments.notebooks import manifest as jobs

    monkeypatch.setattr(paths, "RUNS", tmp_path / "a")
    need = jobs.needs("08", "smoke", seeds="0", connections="carry_last")
    job = next(j for j in jobs.jobs(["08"], "smoke", {"seeds": "0", "connections": "carry_last"})
               if j.kind == "looplm")
    JobRun.from_json(JobRun.of(job, "smoke", "cpu", 1).to_json()).run()
    assert job.finished() and job.model.path.parent == tmp_path / "a" / "looplm"
    by_job = json.loads(job.model.path.read_text())
    monkeypatch.setattr(paths, "RUNS", tmp_path / "b")
    spec = next(iter(jobs.needs("08", "smoke", seeds="0", connections="carry_last").models.values()))
    by_notebook = looplm.record(spec.probe, spec.path.parent)
    assert spec.path.name == job.model.path.name
    for key in ("correct", "accuracy", "loop_axis", "params", "train_accuracy", "kinds"):
        assert by_job[key] == by_notebook[key], key
    # one model, both kinds of task evaluated apart: knowledge at depth 1, kinship at its chain lengths
    assert by_job["kinds"] == {"knowledge": [1], "kinship": list(range(2, 11))} and by_job["task"]["task"] == "mixture"
    assert set(by_job["correct"]) == {str(d) for d in range(1, 11)} and set(by_job["loop_axis"]) == set(looplm.TASKS)
    monkeypatch.setattr(looplm, "run", lambda *a, **k: pytest.fail("trained again"))
    assert need.models[spec.id].compute()["correct"] == by_job["correct"]  # root a: read, not trained


def test_the_text_loss_is_next_token_over_every_word_of_the_text():
    """The study's objective: cross-entropy of every word (padding aside) from the words before it, not only of the
    answer; a change to a logit of a story's name moves it, where the answer loss does not see that position."""
    from infiloop.tasks.language import LanguageConfig, generate
    from infiloop.training.looplm import answer_loss, crop, text_loss

    data = generate(LanguageConfig(task="mixture", n_train=40, n_test=4, n_entities=10, n_names=20))
    model = _model(_cfg(vocab_size=data.vocab_size, seq_len=data.max_len))
    tokens, answer = data.train.tokens[:16], data.train.answer[:16]
    with torch.no_grad():
        t, a = crop(tokens, answer)
        logits = model(t[:, :-1])
        words = t[:, 1:] != 0
        want = torch.nn.functional.cross_entropy(logits[words], t[:, 1:][words])
        assert torch.allclose(text_loss(model, tokens, answer), want, atol=1e-5)
        assert words.sum() > a[:, 1:].sum() and not torch.allclose(want, answer_loss(model, tokens, answer))


def test_the_fixed_beta_average_is_content_free():
    """Notebook 08's averaging baseline (``ema``): h_l = h_{l-1} + γ (z_l - h_{l-1}) with γ = 1 - β₀ at every loop
    and token, whatever the candidates (no content score), as written out here."""
    from infiloop.experiments import looplm

    conn, _ = looplm.CONNECTIONS["ema"]
    assert conn["gamma"] == pytest.approx(1 - ConnectionConfig().beta) == pytest.approx(0.45)
    model = _model(_cfg(connection=conn), dtype=torch.float64).eval()
    gammas = []
    with torch.no_grad():
        for x in (_tokens(1), _tokens(2)):
            _, diag = model(x, loops=6, diagnostics=True)
            gammas.append(diag["gamma"])
            h = model.run(model.prelude, model.embed(x))
            for _, got, _, _ in model.trajectory(x, 6):
                h = h + 0.45 * (model.run(model.core, h) - h)
                assert torch.allclose(got, h, rtol=0, atol=1e-10)
    assert all(bool((g == 0.45).all()) for g in gammas) and torch.equal(gammas[0], gammas[1])
    assert bool((diag["score"] == 0).all())
