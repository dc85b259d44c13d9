"""The cost model of every job in FLOPs: a reasoner's training step and evaluation update
(:func:`flops_per_step`, :func:`flops_per_update`), a looped decoder's job (:func:`looplm_counts`) and any
scheduler job (:func:`job_flops`). The plan prices a CUDA device that is not here by them, the cluster sets its
time limits by them, and the pilot spaces its log lines by them.
"""

from __future__ import annotations

import json

# Achieved bf16 throughput assumed by gpu_hours_estimate and the FLOP estimate of a plan without CUDA (about a fifth
# of an H200's dense bf16 peak).
ASSUMED_GPU_TFLOPS = 200.0
# ------------------------------------------------------------------------------------------ arithmetic


_COUNTED: dict[str, float] = {}  # flops_per_token and the looped decoders' work, once per shape in this process


def flops_per_token(model_cfg) -> float:
    """Multiply-add FLOPs of one application of the shared block, per position (forward).

    Channel weights (and the depthwise convolution) count 2 x their size per position; TRM's token-mixing
    weights act along the sequence (2 x size x d / S per position); attention adds 4 x S x d per layer
    (scores and weighted sum). Element-wise work (norms, the loop connections) is not counted. The model is
    built on the meta device (its weights counted, never initialised) once per configuration."""
    key = "reasoner " + json.dumps(model_cfg.to_dict(), sort_keys=True)
    if key not in _COUNTED:
        _COUNTED[key] = _flops_per_token(model_cfg)
    return _COUNTED[key]


def _flops_per_token(model_cfg) -> float:
    import torch

    from ...model.layers import Attention, TokenMixMLP
    from ...model.reasoner import LoopedReasoner

    with torch.device("meta"):
        model = LoopedReasoner(model_cfg)
    S, d = model_cfg.seq_len + model_cfg.prefix, model_cfg.d_model
    total = 0.0
    for layer in model.layers:
        for sub in layer.subs:
            per = d / S if isinstance(sub, TokenMixMLP) else 1.0
            total += sum(2.0 * p.numel() * per for p in sub.parameters() if p.ndim >= 2)
            if isinstance(sub, Attention):
                total += 4.0 * S * d
    return total


def flops_per_step(model_cfg, batch_size: int) -> float:
    """One training step (one supervision segment): H x (L + 1) block applications forward, and the
    backward pass (about twice the forward) through the last ``grad_outer`` outer updates."""
    apps = model_cfg.H * (model_cfg.L + 1) + 2 * model_cfg.grad_outer * (model_cfg.L + 1)
    return apps * batch_size * (model_cfg.seq_len + model_cfg.prefix) * flops_per_token(model_cfg)


def flops_per_update(model_cfg, puzzles: int) -> float:
    """One evaluation outer update (L + 1 block applications, forward only) of ``puzzles`` puzzles."""
    return (model_cfg.L + 1) * puzzles * (model_cfg.seq_len + model_cfg.prefix) * flops_per_token(model_cfg)


def looplm_counts(probe) -> dict[str, float]:
    """``looplm.work`` of a looped decoder with ``flops``, its job's FLOPs (``looplm.flops``): once per probe in
    this process, the models built on the meta device (their weights counted, never initialised)."""
    from dataclasses import asdict

    import torch

    from ..looplm import data_of, flops, work

    key = "looplm " + json.dumps(asdict(probe), sort_keys=True, default=str)
    if key not in _COUNTED:
        data_of(probe)  # the generated task, made on the CPU (and kept by looplm) before the meta device is on
        with torch.device("meta"):
            _COUNTED[key] = {**work(probe), "flops": flops(probe)}
    return _COUNTED[key]


def job_flops(job) -> float:
    """FLOPs of one scheduler job (``jobs.Job``): a training's steps, an evaluation's updates of its puzzles, or a
    looped decoder's training and evaluation (``looplm.flops``)."""
    if job.kind == "looplm":
        return looplm_counts(job.model.probe)["flops"]
    run = job.spec.run
    if job.kind == "train":
        cfg = run.train_config()
        return cfg.steps * flops_per_step(run.model_config(), cfg.batch_size)
    args, data, _ = run.eval_key(job.eval.kind, job.eval.args)
    return run.eval_updates(job.eval.kind, args) * flops_per_update(run.model_config(), len(data))


def gpu_hours_estimate(model_cfg, steps: int, batch_size: int, tflops: float = ASSUMED_GPU_TFLOPS) -> float:
    """Training hours of ``steps`` steps at an achieved throughput of ``tflops`` (an estimate, not a
    measurement: ``plan --device cuda`` measures)."""
    return steps * flops_per_step(model_cfg, batch_size) / (tflops * 1e12) / 3600
