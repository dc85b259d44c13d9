"""The whole model under ``torch.compile``: one graph, no break at the connection step, compiled = eager.

The InfiLoop step is a custom operator (``infiloop/model/kernels/op.py``) so that the path a GPU takes, the
fused kernel behind ``torch.ops.infiloop.step``, traces without a graph break. On the CPU that path is taken
with ``backend="reference_op"``: the same operator, the same fake-tensor and autograd rules, the eager
reference as its body. ``fullgraph=True`` fails on any graph break, so a compile that succeeds has none.

Default suite: AOTAutograd's eager backend on one supervision segment (the graph is traced forward and backward
through fake tensors, then run by PyTorch ops: compiled and eager must agree to 1e-6). ``-m slow``: Inductor's
generated code on two segments, the second from the first's carry (forward and every gradient within
``1e-4 * (1 + max|eager|)``: Inductor fuses and reorders float32 sums).
"""

from __future__ import annotations

import pytest
import torch

from infiloop import numeric
from infiloop.model import LoopedReasoner, ModelConfig
from infiloop.model.connections import ConnectionConfig, InfiLoop, choose_kernels

# (connection, kernel backend): every member of the family; InfiLoop through the eager reference and through
# the custom operator (the CUDA dispatch path with the reference step as the kernel)
CASES = [("carry_last", "auto"), ("fprm", "auto"), ("full_attnres", "auto"), ("ema", "auto"),
         ("infiloop", "eager"), ("infiloop", "reference_op")]
IDS = [f"{c}-{b}" for c, b in CASES]


def smoke_model(name: str, backend: str) -> LoopedReasoner:
    """The smoke profile's block (d 32, H 2, L 2) on 4x4 grids, the connection on both axes; InfiLoop's q drawn
    away from 0 so that the content score matters."""
    torch.manual_seed(0)
    conn = ConnectionConfig(name=name, backend=backend)
    cfg = ModelConfig(vocab_size=6, seq_len=16, grid=(4, 4), box=(2, 2), n_puzzles=1, d_model=32, n_heads=2,
                      n_layers=1, ffn_multiple=16, pos="grid", conv=False, H=2, L=2, puzzle_emb_len=0,
                      inner=conn, outer=conn)
    model = LoopedReasoner(cfg)
    for m in model.modules():
        if isinstance(m, InfiLoop):
            with torch.no_grad():
                m.q.normal_()
    return model


def forward_backward(model: LoopedReasoner, net, segments: int = 1):
    """``segments`` supervision segments (the carry of one feeds the next); the logits, halting logits and the
    gradient of every parameter of a loss on all of them."""
    g = torch.Generator().manual_seed(1)
    inputs = torch.randint(0, 6, (4, 16), generator=g)
    pids = torch.zeros(4, dtype=torch.long)
    carry = model.initial_carry(4, "cpu")
    loss, outs = 0.0, []
    for _ in range(segments):
        carry, logits, q_halt, _ = net(carry, inputs, pids)
        loss = loss + logits.float().square().mean() + q_halt.float().sigmoid().mean()
        outs += [logits.detach(), q_halt.detach()]
        carry = {a: {k: v.detach() for k, v in st.items()} for a, st in carry.items()}
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return outs, [torch.zeros_like(p) if gr is None else gr for gr, p in zip(grads, params)]


def assert_close(got, want, tol_rel: float) -> None:
    for a, b in zip(got, want):
        tol = tol_rel * (1 + float(b.abs().max()))
        assert float((a - b).abs().max()) <= tol


def compiled_matches_eager(name: str, backend: str, compiler: str, tol_rel: float, segments: int) -> None:
    torch._dynamo.reset()
    model = smoke_model(name, backend)
    kernels = choose_kernels(model, "cpu")
    if name == "infiloop":
        assert set(kernels.values()) == {backend}
    outs0, grads0 = forward_backward(model, model, segments)
    numeric.inductor_native_width()  # Inductor's CPU code at this CPU's width (infiloop/numeric.py)
    compiled = torch.compile(model, fullgraph=True, backend=compiler)  # fails on any graph break
    outs1, grads1 = forward_backward(model, compiled, segments)
    assert_close(outs1, outs0, tol_rel)
    assert_close(grads1, grads0, tol_rel)
    assert any(float(g.abs().max()) > 0 for g in grads0)


@pytest.mark.parametrize("name,backend", CASES, ids=IDS)
def test_whole_model_traces_as_one_graph_and_equals_eager(name, backend):
    compiled_matches_eager(name, backend, "aot_eager", 1e-6, segments=1)


@pytest.mark.slow
@pytest.mark.parametrize("name,backend", CASES, ids=IDS)
def test_whole_model_compiled_by_inductor_equals_eager(name, backend):
    compiled_matches_eager(name, backend, "inductor", 1e-4, segments=2)


def test_explain_counts_no_break_on_the_cuda_dispatch_path():
    """What ``torch._dynamo.explain`` reported before the custom operator: 13 breaks in 14 graphs, one per
    connection step (an import inside the dispatch). Now: one graph, no break."""
    torch._dynamo.reset()
    model = smoke_model("infiloop", "reference_op")
    explanation = torch._dynamo.explain(model)(model.initial_carry(4, "cpu"), torch.zeros(4, 16, dtype=torch.long),
                                               torch.zeros(4, dtype=torch.long))
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


def test_auto_kernel_is_the_reference_on_the_cpu():
    model = smoke_model("infiloop", "auto")
    assert choose_kernels(model, "cpu") == {"conn_inner": "eager", "conn_outer": "eager"}


def test_a_triton_kernel_that_cannot_launch_falls_back_to_the_reference(monkeypatch, capsys):
    """A kernel that fails to build or launch on its device: one warning line, the eager reference, the same
    numbers. Faked with a real failure: the Triton kernel on CPU tensors without its interpreter."""
    import infiloop.model.connections as connections
    from infiloop.model.kernels import probe

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(connections, "resolve_backend", lambda *a, **k: "triton")
    monkeypatch.setattr(probe, "_TRITON_PROBES", {})
    model = smoke_model("infiloop", "auto")
    assert choose_kernels(model, "cpu") == {"conn_inner": "eager", "conn_outer": "eager"}
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: the fused Triton step does not run on cpu ("), lines
    want = smoke_model("infiloop", "eager")
    assert_close(forward_backward(model, model)[0], forward_backward(want, want)[0], 0.0)


def test_on_cuda_only_the_gpu_profiles_compile_by_default(tmp_path):
    """The scheduler's own decision (``worker.compile_shape``, the trainer's rule: ``on``, or ``auto`` on CUDA) for a
    training of each profile on a GPU: the GPU profiles compile, the CPU-scale ones (minutes of training, less than a
    cold Inductor compile) do not; ``--set train.compile=on`` still compiles them; no run folder moves (compile is
    hashed at ``auto``)."""
    from types import SimpleNamespace

    from infiloop.experiments.compute.worker import compile_shape
    from infiloop.experiments.settings import profiles
    from infiloop.experiments.settings.recipes import config_hash
    from infiloop.experiments.store.runs import resolve

    def compiles(profile, overrides=None):
        run = resolve("sudoku", "infiloop", profile, overrides, root=tmp_path)
        job = SimpleNamespace(kind="train", spec=SimpleNamespace(run=run, overrides={}))
        return compile_shape(job, "cuda")[0], compile_shape(job, "cpu")[0], run

    seen = {}
    for profile in profiles.names():
        on_cuda, on_cpu, run = compiles(profile)
        seen[profile] = on_cuda
        assert not on_cpu  # auto and off never compile on the CPU
        auto = resolve("sudoku", "infiloop", profile, ["train.compile=auto"], root=tmp_path)
        assert config_hash(run.config) == config_hash(auto.config) and run.dir == auto.dir, profile
    assert seen == {p: p in ("gpu", "paper") for p in profiles.names()}, seen
    assert compiles("quick", ["train.compile=on"])[0]  # asked for: compiled
