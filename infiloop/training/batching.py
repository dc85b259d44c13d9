"""The global batch's slots between steps: the shuffled stream of training puzzles, the carried states of the slots
(gathered across processes under DDP, sliced into micro-batches), and the random states a checkpoint keeps."""

from __future__ import annotations

import hashlib

import torch
import torch.distributed as dist
from torch import Tensor

from ..model.reasoner import Carry


class PuzzleStream:
    """Shuffled epochs over the training rows; the position (epoch, offset) is the whole state."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed, self.epoch, self.pos = n, seed, 0, 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.n, generator=g)

    def take(self, k: int) -> Tensor:
        out = []
        while k > 0:
            chunk = self._perm[self.pos:self.pos + k]
            out.append(chunk)
            self.pos += len(chunk)
            k -= len(chunk)
            if self.pos == self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation(self.epoch)
        return torch.cat(out) if out else torch.empty(0, dtype=torch.long)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, st: dict) -> None:
        self.epoch, self.pos = int(st["epoch"]), int(st["pos"])
        self._perm = self._permutation(self.epoch)


def rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather(t: Tensor, world: int) -> Tensor:
    """Concatenate a per-process tensor along its first (sample) axis, in rank order."""
    if world == 1:
        return t
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


def gather_carry(carry: Carry, world: int) -> Carry:
    return {a: {k: gather(v, world) for k, v in st.items()} for a, st in carry.items()}


def slice_carry(carry: Carry, sl: slice) -> Carry:
    return {a: {k: v[sl].clone() for k, v in st.items()} for a, st in carry.items()}


def rng_state(device: torch.device) -> tuple:
    return torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def set_rng_state(state: tuple, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def cat_carry(parts: list[Carry]) -> Carry:
    return {a: {k: torch.cat([p[a][k] for p in parts]) for k in st} for a, st in parts[0].items()}


def view_carry(carry: Carry, sl: slice) -> Carry:
    return {a: {k: v[sl] for k, v in st.items()} for a, st in carry.items()}


def weights_fingerprint(model: torch.nn.Module) -> str:
    """A hash of the model's parameters and buffers, byte for byte (16 hex digits of sha256)."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def check_ranks_agree(model: torch.nn.Module, world: int, step: int) -> str:
    """The weights' fingerprint, the same on every process of a DDP training ("" with one process); raises where
    they differ (a gradient not reduced, a parameter updated on one process only), naming the step and each
    process's fingerprint."""
    if world == 1:
        return ""
    mine = weights_fingerprint(model)
    every: list = [None] * world
    dist.all_gather_object(every, mine)
    if len(set(every)) > 1:
        raise RuntimeError(f"the {world} training processes hold different weights at step {step} "
                           f"(fingerprints by rank: {', '.join(every)}): their gradients were not all reduced")
    return mine
