"""The cost model of every job in FLOPs, in one place: a reasoner's training job (:func:`train_flops`, from
:func:`flops_per_step`) and evaluation (:func:`eval_flops`, from :func:`flops_per_update`), a looped decoder's job
(:func:`looplm_work`, :func:`looplm_flops`, cached by :func:`looplm_counts`) and any scheduler job
(:func:`job_flops`). The plan prices a CUDA device that is not here by them, the scheduler orders its jobs by them
(``pipeline.py`` passes :func:`job_flops` in), a cluster's time limits rest on them where no GPU is here to measure
(``cost.estimates``), the studies' ``--list`` prices its rows by them (a time through ``arithmetic.FlopTimer``), and
the pilot spaces its log lines by them.
"""

from __future__ import annotations

import json

# Achieved bf16 throughput assumed by gpu_hours_estimate and the FLOP estimate of a plan without CUDA (about a fifth
# of an H200's dense bf16 peak).
ASSUMED_GPU_TFLOPS = 200.0
# The share of that rate a job reaches at another precision: an H100's (and H200's, the same chip) dense peaks (SXM,
# NVIDIA's data sheet) are 989 TFLOP/s in bf16 on the tensor cores, 495 in TF32 and 67 in plain float32 (TF32 off:
# torch's default "highest" matmul precision, which the trainers never change). The looped decoders train and
# evaluate in float32 (no autocast, ``training/looplm.py``): priced at the bf16 rate they would look 15 x cheaper.
PRECISION_SHARE = {"bf16": 1.0, "tf32": 495 / 989, "fp32": 67 / 989}
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


def train_flops(model_cfg, steps: int, batch_size: int) -> float:
    """A reasoner's training job: ``steps`` steps of ``batch_size`` puzzles (:func:`flops_per_step`)."""
    return steps * flops_per_step(model_cfg, batch_size)


def eval_flops(model_cfg, updates: int, puzzles: int) -> float:
    """A reasoner's evaluation: ``updates`` outer updates of each of ``puzzles`` puzzles (:func:`flops_per_update`;
    ``Run.eval_updates`` counts an evaluation's updates)."""
    return updates * flops_per_update(model_cfg, puzzles)


# ------------------------------------------------------------------------------------------ the looped decoder


def forward_blocks(cfg, items: int, length: int, loops: list[int]) -> float:
    """Token-blocks (one block at one position) of the looped decoder's evaluation (``correct``) on ``items``
    items of ``length`` positions after each r of ``loops``: the prelude, the core to the largest r (once per r
    under timestep conditioning, see ``LoopLM.logits_at``) and the coda once per r."""
    loops = sorted(set(loops))
    core = sum(loops) if cfg.cond.uses_horizon else loops[-1]
    per = (cfg.prelude * (len(loops) if cfg.cond.uses_horizon else 1) + cfg.core * core + cfg.coda * len(loops))
    return float(items * length * per)


def answer_length(split) -> int:
    """Positions a batch of ``split`` runs through the decoder: up to its last answer word, less the last."""
    from ...training.looplm import crop

    return int(crop(split.tokens, split.answer)[0].shape[1]) - 1


def looplm_work(probe) -> dict[str, float]:
    """The probe's job in token-blocks: ``step``, the forward of one training step (the batch at the longest
    training item, through L(K) = p + sK + c blocks); ``eval``, every forward of its record after training (each
    test split to its r, the training split at K, the loop-axis diagnostics of each kind); ``block_flops``, the
    FLOPs of one token-block (2 x the block's weights + 4 x T x d for attention, at the longest item) and
    ``head_flops``."""
    from ...model.looplm import LoopLM, LoopLMConfig
    from ...training.looplm import data_of, model_config

    data = data_of(probe)
    cfg = model_config(probe, data)
    loops = probe.budgets()
    ev = sum(forward_blocks(cfg, len(s), answer_length(s), loops) for s in data.test.values())
    ev += forward_blocks(cfg, len(data.train), answer_length(data.train), [cfg.loops])
    for depths in probe.task.kinds().values():  # the loop-axis diagnostics, on each kind's deepest split
        deepest = data.test[max(depths)]
        ev += forward_blocks(cfg, min(64, len(deepest)), answer_length(deepest), [max(loops)])
    block = LoopLM(LoopLMConfig.from_dict({**cfg.to_dict(), "prelude": 0, "coda": 0, "core": 1})).core[0]
    weights = sum(p.numel() for p in block.parameters() if p.ndim >= 2)
    return {"step": forward_blocks(cfg, probe.train.batch_size, answer_length(data.train), [cfg.loops]),
            "eval": ev, "block_flops": 2.0 * weights + 4.0 * data.max_len * cfg.d_model,
            "head_flops": 2.0 * cfg.d_model * cfg.vocab_size}


def looplm_flops(probe, work: dict[str, float] | None = None) -> float:
    """FLOPs of the probe's job: its training steps (forward and backward, 3 x the forward) and its evaluation;
    the head counted once per forward position."""
    w = work or looplm_work(probe)
    cfg = probe.model
    per_pos = w["head_flops"] / max(1, cfg.prelude + cfg.core * cfg.loops + cfg.coda)
    return (3 * probe.train.steps * w["step"] + w["eval"]) * (w["block_flops"] + per_pos)


def looplm_counts(probe) -> dict[str, float]:
    """:func:`looplm_work` of a looped decoder with ``flops``, its job's FLOPs (:func:`looplm_flops`): once per
    probe in this process, the models built on the meta device (their weights counted, never initialised)."""
    from dataclasses import asdict

    import torch

    from ...training.looplm import data_of

    key = "looplm " + json.dumps(asdict(probe), sort_keys=True, default=str)
    if key not in _COUNTED:
        data_of(probe)  # the generated task, made on the CPU (and kept) before the meta device is on
        with torch.device("meta"):
            work = looplm_work(probe)
            _COUNTED[key] = {**work, "flops": looplm_flops(probe, work)}
    return _COUNTED[key]


def job_flops(job) -> float:
    """FLOPs of one scheduler job (``jobs.Job``): a training's steps, an evaluation's updates of its puzzles, or a
    looped decoder's training and evaluation (:func:`looplm_flops`)."""
    if job.kind == "looplm":
        return looplm_counts(job.model.probe)["flops"]
    run = job.spec.run
    if job.kind == "train":
        cfg = run.train_config()
        return train_flops(run.model_config(), cfg.steps, cfg.batch_size)
    args, data, _ = run.eval_key(job.eval.kind, job.eval.args)
    return eval_flops(run.model_config(), run.eval_updates(job.eval.kind, args), len(data))


def job_precision(job) -> str:
    """The precision a scheduler job computes in on a CUDA GPU (a key of :data:`PRECISION_SHARE`): a looped decoder
    float32; a training its ``precision`` (``auto``: bf16 autocast); an evaluation its ``precision`` argument
    (``auto``: bf16, ``evaluation.precision_context``)."""
    if job.kind == "looplm":
        return "fp32"
    run = job.spec.run
    if job.kind == "train":
        precision = run.train_config().precision
    else:
        precision = run.eval_key(job.eval.kind, job.eval.args)[0].get("precision", "auto")
    return "bf16" if precision == "auto" else precision


def gpu_seconds(job, tflops: float = ASSUMED_GPU_TFLOPS) -> float:
    """Seconds of one scheduler job on a CUDA GPU that reaches ``tflops`` TFLOP/s in bf16: its FLOPs
    (:func:`job_flops`) at that rate's share at the job's precision (:func:`job_precision`)."""
    return job_flops(job) / (tflops * 1e12 * PRECISION_SHARE[job_precision(job)])


def gpu_hours_estimate(model_cfg, steps: int, batch_size: int, tflops: float = ASSUMED_GPU_TFLOPS) -> float:
    """Training hours of ``steps`` steps at an achieved throughput of ``tflops`` (an estimate, not a
    measurement: ``plan --device cuda`` measures)."""
    return train_flops(model_cfg, steps, batch_size) / (tflops * 1e12) / 3600
