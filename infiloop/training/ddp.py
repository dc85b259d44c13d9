"""How a training of several processes reduces its gradients (DistributedDataParallel), used by ``trainer.py``.

- :func:`wrap`: the model in DDP, the parameters it never uses frozen first (DDP would wait for their gradients)
  and the puzzle embedding left out of DDP where its own sign-SGD trains it (``train.puzzle_emb_optimizer:
  sign_sgd``, TRM's). Its gradient is dense, one row per puzzle identifier (paper ARC: about a million views x
  the hidden size, gigabytes in float32), of which a step touches only the rows of its batch's puzzles: DDP would
  copy it into its buckets and all-reduce all of it every step. :func:`reduce_rows` all-reduces the touched rows
  alone, once per step after the last micro-batch, averaged over the processes as DDP averages (the other rows'
  gradient is zero on every process, and sign-SGD reads only the touched rows).
- :func:`sync`: one gradient all-reduce per step with micro-batches, compiled or not. Every chunk but the last
  runs under DDP's ``no_sync()``. A compiled DDP module (``torch.compile(ddp)``) runs DDP's own ``forward`` eagerly
  around the compiled inner module (``DistributedDataParallel._inside_ddp_forward``: Dynamo only compiles the
  module underneath), so the ``no_sync()`` of the DDP module (``eager_net``) holds for the compiled call too:
  ``_pre_forward`` reads ``require_backward_grad_sync`` at each call.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
import torch.distributed as dist
from torch import Tensor, nn


def own_parameters(model: nn.Module, opt_emb) -> list[str]:
    """The names of the parameters trained by ``opt_emb`` (the puzzle embedding's sign-SGD; none without it)."""
    if opt_emb is None:
        return []
    mine = {id(p) for group in opt_emb.param_groups for p in group["params"]}
    return [name for name, p in model.named_parameters() if id(p) in mine]


def wrap(model: nn.Module, opt_emb) -> nn.Module:
    """``model`` in DistributedDataParallel, without its unused parameters (frozen) and without the puzzle
    embedding of ``opt_emb`` (reduced by :func:`reduce_rows`)."""
    for name in model.unused_parameters():
        model.get_parameter(name).requires_grad_(False)
    nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model,
                                                                                   own_parameters(model, opt_emb))
    return nn.parallel.DistributedDataParallel(model)


def sync(ddp: nn.Module, world: int, last: bool) -> AbstractContextManager:
    """The context of one micro-batch's forward and backward: DDP's ``no_sync()`` for all but the ``last``
    (the accumulated gradient is all-reduced once, with the last), nothing with one process."""
    return ddp.no_sync() if world > 1 and not last else nullcontext()


@torch.no_grad()
def reduce_rows(opt_emb, rows: Tensor, world: int) -> None:
    """The mean over the processes of the rows ``rows`` of the gradient of every parameter of ``opt_emb`` (the
    global batch's puzzle identifiers, the same on every process): one all-reduce of len(rows) x d values."""
    if opt_emb is None or world == 1:
        return
    for group in opt_emb.param_groups:
        for p in group["params"]:
            if p.grad is None:  # no process's chunk used it: a zero gradient everywhere
                p.grad = torch.zeros_like(p)
            r = rows.unique().to(p.device)
            g = p.grad[r].div_(world)  # divided first, then summed: as DDP's default reduction
            dist.all_reduce(g)
            p.grad[r] = g


__all__ = ["own_parameters", "reduce_rows", "sync", "wrap"]
