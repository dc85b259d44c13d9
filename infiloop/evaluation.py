"""Evaluation to any depth, with every step recorded, and perturbation of the state (the paper's depth analyses).

``evaluate`` runs a trained model for N outer updates without gradients (the carry is all that is kept,
so state memory does not grow with N) and returns a *trajectory*: a dict of numpy arrays, saved as a
compressed ``.npz`` with this schema (P puzzles, K recorded updates, S grid cells):

    updates        [K]      int32    the recorded outer updates (every ``every``-th, 1-based)
    correct        [K, P]   bool     whole answer right
    wrong_cells    [K, P]   int16    answer cells predicted wrong, read out from the answer state h_t
    wrong_cells_candidate [K, P] int16  the same, read out from the outer candidate z_t (whose score is s_t)
    q_halt         [K, P]   float32  halting logit (the model's confidence that the answer is right)
    state_change   [K, P]   float32  ||y_k - y_{k-1}|| / ||y_{k-1}||, answer state, over the last update
    gamma_outer    [K, P]   float32  gamma_t of the outer axis, mean over grid cells
    score_outer    [K, P]   float32  content score s_t of the outer axis, mean over grid cells
    gamma_inner    [K, P]   float32  the same for the inner axis, mean over the L inner steps and cells
    score_inner    [K, P]   float32
    first_solve    [P]      int32    first update (checked at every update) with a right answer, -1 if none
    blanks         [P]      int16    given as input: cells to fill (Sudoku blanks; cells with a label)
    snapshot_updates [Q]    int32    updates at which predictions were kept (``snapshots``)
    pred_snapshots [Q, P, S] uint8   predicted tokens at those updates
    flipped        [P, S]   bool     cells whose prediction changed at least once in (snap_0, snap_1]
    changes        [P]      int32    predictions changed, summed over every update in (snap_0, snap_1]
    *_tok          [K, P, S] float16 per-cell gamma / score (only with ``per_token=True``)
    info           str (JSON): layers per update, beta per axis, model and data description

``evaluate_budgets`` gives the exact accuracy after exactly N updates for a list of budgets N, telling a
timestep-conditioned model each budget (``conditioning.py``); a trajectory tells it ``updates``.

Precision (``precision``, :func:`precision_context`): ``"auto"`` (the default) is bf16 autocast on CUDA and float32
elsewhere; ``"bf16"`` runs the block's matrix products in bfloat16 while the carried states stay float32 (the
connections promote: h_t = h_{t-1} + gamma_t (z_t - h_{t-1}) with a float32 h_{t-1} is float32), and on CUDA what
stays float32 uses TF32; ``"tf32"`` is float32 with TF32 matrix products on CUDA; ``"fp32"`` is plain float32
everywhere (on CUDA, TF32 off for matrix products and cuDNN's convolutions alike). The trajectory's ``info``
records the device and the precision.

``perturb`` runs to update ``at``, adds a relative perturbation of size eps to the states
(``h <- h + eps ||h|| u / ||u||`` per puzzle, u Gaussian) and runs on, recording the same quantities
plus the distance ``||y^eps_k - y_k|| / ||y_k||`` to the unperturbed trajectory.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .errors import DataError, UsageError
from .io import load_npz, save_npz
from .machine import progress_bar
from .model.connections import choose_kernels
from .model.reasoner import Carry, LoopedReasoner
from .tasks.base import IGNORE_LABEL_ID, TaskData
from .tasks.scoring import count_wrong

tqdm = progress_bar()
TRAJECTORY_KEYS = ("correct", "wrong_cells", "wrong_cells_candidate", "q_halt", "state_change", "gamma_outer",
                   "score_outer", "gamma_inner", "score_inner")
# Version of the recorded quantities: part of every cached evaluation's key.
TRAJECTORY_VERSION = 2
PRECISIONS = ("auto", "fp32", "tf32", "bf16")
# What the puzzle-embedding prefix is given (the identity ablation): each puzzle's own id, the blank id 0 (no
# puzzle), or another puzzle's id drawn at random (seeded). A model that recalls puzzles by their identity loses
# accuracy without its own; one whose prefix carries no identity (Sudoku and Maze: one id for all) does not.
PUZZLE_IDS = ("own", "blank", "random")
WEIGHT_CHOICES = ("auto", "ema", "last", "best")  # which of a run's weights an evaluation scores (Run.weights_used)


@dataclasses.dataclass(frozen=True)
class EvalRequest:
    """One evaluation of a trajectory: what :func:`evaluate` runs and records, and what ``Run.evaluate`` finds in
    a run's cache or adds to it. ``None`` is the run profile's setting in ``Run.evaluate``; a bare model
    (:func:`evaluate`) records every update in batches of 256. Every field but the last three names the cache file
    (:meth:`cache_args`)."""

    updates: int | None = None  # outer updates each puzzle runs
    every: int | None = None  # record every ``every``-th update (a divisor of ``updates``)
    limit: int | None = None  # the first ``limit`` puzzles (of a run's test set: the profile's; of given data: all)
    per_token: bool = False  # record gamma and the score of every grid cell too (the ``*_tok`` arrays)
    snapshots: tuple[int, ...] = ()  # updates at which the predicted grids are kept (``pred_snapshots``)
    puzzles: tuple[int, ...] = ()  # only these rows of the (limited) set, in this order, e.g. one puzzle animated
    precision: str = "auto"  # :data:`PRECISIONS` (:func:`precision_context`)
    weights: str = "auto"  # which of a run's weights score (:data:`WEIGHT_CHOICES`, ``Run.weights_used``)
    puzzle_ids: str = "own"  # the puzzle ids the model is given (:data:`PUZZLE_IDS`, the identity ablation)
    test_set: str = "test"  # a run's test set: ``test``, ``valid`` or one at another size (``test_<size>``)
    batch_size: int | None = None  # puzzles run at once
    device: str = "cpu"
    progress: bool = True  # a progress bar on stderr

    def __post_init__(self):
        # tuples of ints, however given (a declaration read from JSON gives lists), keep a request hashable
        object.__setattr__(self, "snapshots", tuple(int(s) for s in self.snapshots))
        object.__setattr__(self, "puzzles", tuple(int(p) for p in self.puzzles))

    @classmethod
    def of(cls, request: EvalRequest | None = None, **fields) -> EvalRequest:
        """``request`` with ``fields`` changed, or a request of ``fields`` alone: the keyword form its callers
        write (``run.evaluate(updates=12, limit=16)``)."""
        if request is not None and not isinstance(request, EvalRequest):  # e.g. the updates of an older call
            raise TypeError(f"expected an EvalRequest or its fields as keywords (updates=...), got {request!r}")
        return cls(**fields) if request is None else dataclasses.replace(request, **fields)

    def cache_args(self) -> dict:
        """The request as its cache key names it: updates, every, limit, per_token and the sorted snapshots always;
        precision, weights, puzzle ids, test set and puzzles only where they are not the default, so that every
        evaluation cached before they existed keeps its file. An unknown choice is refused."""
        for name, choices in (("precision", PRECISIONS), ("weights", WEIGHT_CHOICES), ("puzzle_ids", PUZZLE_IDS)):
            if getattr(self, name) not in choices:
                raise UsageError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        args = {"updates": self.updates, "every": self.every, "limit": self.limit, "per_token": self.per_token,
                "snapshots": sorted(self.snapshots)}
        args |= {name: getattr(self, name) for name in ("precision", "weights", "puzzle_ids", "test_set")
                 if getattr(self, name) != _DEFAULT_REQUEST_FIELDS[name]}
        if self.puzzles:
            args["puzzles"] = list(self.puzzles)
        return args


_DEFAULT_REQUEST_FIELDS = {f.name: f.default for f in dataclasses.fields(EvalRequest)}


def precision_arg(precision: str) -> dict:
    """An evaluation's precision in its cache key: only when asked for explicitly, so that every evaluation cached
    before precisions existed (``auto``: float32 on the CPU) keeps its file."""
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return {} if precision == "auto" else {"precision": precision}


def resolve_precision(precision: str, device: str | torch.device) -> str:
    """The arithmetic an evaluation on ``device`` uses for ``precision``: ``auto`` is ``bf16`` on CUDA, ``fp32``
    elsewhere (:data:`PRECISIONS`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "auto":
        return "bf16" if torch.device(device).type == "cuda" else "fp32"
    return precision


@contextmanager
def precision_context(precision: str, device: str | torch.device) -> Iterator[str]:
    """Run the enclosed evaluation at ``precision`` (:func:`resolve_precision`) on ``device``; yields the resolved
    name. ``bf16``: autocast to bfloat16 (the block's products; the states stay float32) and, on CUDA, TF32 for the
    float32 products left; ``tf32``: TF32 products on CUDA; ``fp32``: float32 throughout, TF32 off for matrix
    products and for cuDNN's convolutions (the block's depthwise 3x3 convolution, ``model.conv``; cuDNN allows
    TF32 by default). The previous settings are restored."""
    resolved = resolve_precision(precision, device)
    dev = torch.device(device)
    with ExitStack() as stack:
        if dev.type == "cuda":
            tf32 = resolved in ("bf16", "tf32")
            before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
            torch.set_float32_matmul_precision("high" if tf32 else "highest")  # TF32 for float32 matrix products
            torch.backends.cudnn.allow_tf32 = tf32
            stack.callback(torch.set_float32_matmul_precision, before[0])
            stack.callback(setattr, torch.backends.cudnn, "allow_tf32", before[1])
        if resolved == "bf16":
            stack.enter_context(torch.autocast(dev.type, dtype=torch.bfloat16))
        yield resolved


def _placed(model: LoopedReasoner, device) -> LoopedReasoner:
    """The model on ``device`` in evaluation mode, its connection kernels chosen for that device."""
    model = model.to(device).eval()
    choose_kernels(model, device)
    return model


def _norm(x: Tensor) -> Tensor:
    return torch.linalg.vector_norm(x.float().flatten(1), dim=1)


def _tensors(data: TaskData, idx: np.ndarray, device) -> tuple[Tensor, Tensor, Tensor]:
    inputs = torch.from_numpy(data.inputs[idx].astype(np.int64)).to(device)
    labels = torch.from_numpy(data.labels[idx].astype(np.int64)).to(device)
    pids = torch.from_numpy(data.puzzle_ids[idx].astype(np.int64)).to(device)
    return inputs, labels, pids


def replaced_puzzle_ids(data: TaskData, how: str, seed: int = 0) -> TaskData:
    """``data`` with its puzzle ids as :data:`PUZZLE_IDS` says: ``own`` as it is, ``blank`` all 0, ``random`` each
    row another id than its own, uniformly among the ids 1..n_puzzles-1 (seeded; the same id where there is no
    other)."""
    if how not in PUZZLE_IDS:
        raise ValueError(f"puzzle_ids must be one of {', '.join(PUZZLE_IDS)}, not {how!r}")
    if how == "own":
        return data
    own = np.asarray(data.puzzle_ids, np.int64)
    if how == "blank":
        ids = np.zeros_like(own)
    else:
        n = max(int(data.n_puzzles) - 1, 1)  # ids 1..n_puzzles-1; 0 is the blank
        draw = np.random.default_rng(seed).integers(1, n + 1, len(own)) if n > 1 else np.ones_like(own)
        ids = np.where((draw == own) & (n > 1), draw % n + 1, draw)  # another id than its own where one exists
    return dataclasses.replace(data, puzzle_ids=ids.astype(data.puzzle_ids.dtype))


def _wrong_cells(model: LoopedReasoner, carry: Carry, labels: Tensor) -> Tensor:
    """Answer cells predicted wrong per puzzle, [B] (cells without a label do not count)."""
    return count_wrong(model.readout(carry)[0].argmax(-1), labels)


def _info(model: LoopedReasoner, data: TaskData, **extra) -> str:
    cfg = model.cfg
    betas = {}
    for axis, conn in (("inner", model.conn_inner), ("outer", model.conn_outer)):
        if hasattr(conn, "beta"):
            betas[axis] = conn.beta
    return json.dumps({"layers_per_update": cfg.layers_per_outer_update, "H": cfg.H, "L": cfg.L,
                       "inner": cfg.inner.name, "outer": cfg.outer.name, "beta": betas,
                       "cond": cfg.cond.to_dict() if cfg.cond.active else None, "data": data.name,
                       "n_puzzles": len(data), **extra})


class _Recorder:
    """Per-update bookkeeping for one batch of puzzles.

    Every record array is allocated once, up front: appending small tensors at every update would
    interleave long-lived small allocations with the large per-update temporaries and make the
    process grow with the number of updates (heap fragmentation), which O(d) state must not do.
    """

    TOKEN_KEYS = ("gamma_outer", "score_outer", "gamma_inner", "score_inner")

    def __init__(self, model, labels, every, n_updates, snapshots, per_token, first_row: int = 0):
        self.model, self.labels, self.every, self.per_token = model, labels, every, per_token
        self.first_row = first_row  # the data row of this batch's first puzzle (named when a state diverges)
        self.snapshots = list(snapshots)
        B, S = labels.shape
        K = n_updates // every
        dtypes = {"correct": np.bool_, "wrong_cells": np.int16, "wrong_cells_candidate": np.int16}
        self.rows = {k: np.zeros((K, B), dtypes.get(k, np.float32)) for k in TRAJECTORY_KEYS}
        if per_token:
            for k in self.TOKEN_KEYS:
                self.rows[k + "_tok"] = np.zeros((K, B, S), np.float16)
        self.first_solve = np.full(B, -1, np.int32)
        self.snap = np.zeros((len(self.snapshots), B, S), np.uint8)
        self.flipped = np.zeros((B, S), np.bool_)
        self.changes = np.zeros(B, np.int32)
        self.prev_y = self.prev_pred = None

    def start(self, carry: Carry) -> None:
        self.prev_y = carry["y"]["h"].clone()

    def __call__(self, k: int, carry: Carry, diag: dict[str, Tensor]) -> None:
        y = carry["y"]["h"]
        if not torch.isfinite(y).all():
            bad = (~torch.isfinite(y)).flatten(1).any(1).nonzero().flatten().tolist()
            rows = ", ".join(str(self.first_row + b) for b in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5
                                                                          else "")
            raise DataError(f"the answer state is not finite (NaN or Inf) at outer update {k} for puzzle(s) {rows}: "
                            "the model's weights or its state diverged; nothing of this evaluation is kept")
        logits, q_halt = self.model.readout(carry)
        pred = logits.argmax(-1)
        wrong = count_wrong(pred, self.labels)
        correct = (wrong == 0).cpu().numpy()
        self.first_solve[(self.first_solve < 0) & correct] = k
        if self.snapshots:
            if k == self.snapshots[0]:
                self.ref_pred = pred.clone()
            elif len(self.snapshots) > 1 and self.snapshots[0] < k <= self.snapshots[1]:
                self.flipped |= (pred != self.ref_pred).cpu().numpy()
                self.changes += (pred != self.prev_pred).sum(-1).cpu().numpy().astype(np.int32)
            if k in self.snapshots:
                self.snap[self.snapshots.index(k)] = pred.to(torch.uint8).cpu().numpy()
            self.prev_pred = pred
        if k % self.every == 0:
            j, p, r = k // self.every - 1, self.model.cfg.prefix, self.rows
            r["correct"][j] = correct
            r["wrong_cells"][j] = wrong.cpu().numpy()
            cand = self.model.logits(diag["candidate_outer"]).argmax(-1)
            r["wrong_cells_candidate"][j] = count_wrong(cand, self.labels).cpu().numpy()
            r["q_halt"][j] = q_halt.float().cpu().numpy()
            r["state_change"][j] = (_norm(y - self.prev_y) / _norm(self.prev_y).clamp_min(1e-30)).cpu().numpy()
            for name in self.TOKEN_KEYS:
                v = diag.get(name)
                if v is None:  # e.g. L = 0: no inner step
                    continue
                r[name][j] = v[:, p:].float().mean(-1).cpu().numpy()
                if self.per_token:
                    r[name + "_tok"][j] = v[:, p:].cpu().numpy()
        self.prev_y.copy_(y)

    def result(self) -> dict[str, np.ndarray]:
        out = dict(self.rows)
        out["first_solve"] = self.first_solve
        out["flipped"] = self.flipped
        out["changes"] = self.changes
        if self.snapshots:
            out["pred_snapshots"] = self.snap
        return out


def _check(n_updates: int | None, every: int) -> None:
    if n_updates is None or n_updates < 1:
        raise ValueError(f"updates must be at least 1, got {n_updates}")
    if every < 1 or n_updates % every:
        raise ValueError(f"every={every} must be a positive divisor of updates={n_updates}")


@torch.no_grad()
def evaluate(model: LoopedReasoner, data: TaskData, request: EvalRequest | None = None, loaded: dict | None = None,
             **fields) -> dict[str, np.ndarray]:
    """Run every puzzle of ``data`` for ``request.updates`` outer updates and record its trajectory (every
    ``every``-th update, at its precision, with the puzzle ids :func:`replaced_puzzle_ids` gives). ``fields``: the
    request's, in place of one or changing it (``evaluate(model, data, updates=12)``). The fields that choose a
    run's puzzles and weights (limit, puzzles, test_set, weights) are ``Run.evaluate``'s: here ``data`` and
    ``model`` are what they chose, and ``loaded`` (which weights were loaded: kind and step) is recorded in the
    trajectory's ``info``."""
    r = EvalRequest.of(request, **fields)
    updates, every = r.updates, 1 if r.every is None else r.every
    _check(updates, every)
    data = replaced_puzzle_ids(data, r.puzzle_ids)
    snapshots = tuple(sorted(r.snapshots))
    if any(not 1 <= s <= updates for s in snapshots):
        raise ValueError(f"snapshots {snapshots} must lie in [1, updates={updates}]")
    model = _placed(model, r.device)
    with precision_context(r.precision, r.device) as resolved:
        out = _evaluate(model, data, updates, every, 256 if r.batch_size is None else r.batch_size, r.device,
                        r.per_token, snapshots, r.progress)
    out["info"] = np.asarray(_info(model, data, updates=updates, every=every, horizon=updates, device=str(r.device),
                                   precision=resolved, puzzle_ids=r.puzzle_ids, weights=loaded))
    return out


def _evaluate(model: LoopedReasoner, data: TaskData, updates: int, every: int, batch_size: int, device,
              per_token: bool, snapshots: tuple[int, ...], progress: bool) -> dict[str, np.ndarray]:
    parts: list[dict[str, np.ndarray]] = []
    n = len(data)
    bar = tqdm(total=n * updates, disable=not progress, desc="evaluate", unit="upd", unit_scale=True,
               dynamic_ncols=True)
    for start in range(0, n, batch_size):
        idx = np.arange(start, min(n, start + batch_size))
        inputs, labels, pids = _tensors(data, idx, device)
        rec = _Recorder(model, labels, every, updates, snapshots, per_token, first_row=start)
        rec.start(model.initial_carry(len(idx), device))
        for k, carry, diag in model.iterate(inputs, updates, pids):
            rec(k, carry, diag)
            bar.update(len(idx))
        parts.append(rec.result())
    bar.close()
    per_puzzle = ("first_solve", "flipped", "changes")  # puzzle axis first; every other array has it second
    out = {k: np.concatenate([p[k] for p in parts], axis=0 if k in per_puzzle else 1) for k in parts[0]}
    out["updates"] = np.arange(every, updates + 1, every, dtype=np.int32)
    out["snapshot_updates"] = np.asarray(snapshots, dtype=np.int32)
    out["blanks"] = (data.labels != IGNORE_LABEL_ID).sum(1).astype(np.int16) if "blanks" not in data.meta \
        else data.meta["blanks"].astype(np.int16)
    return out


@torch.no_grad()
def evaluate_budgets(model: LoopedReasoner, data: TaskData, budgets: tuple[int, ...], batch_size: int = 256,
                     device: str = "cpu", progress: bool = True, separate: bool | None = None,
                     precision: str = "auto", weights: dict | None = None) -> dict[str, np.ndarray]:
    """Exact accuracy after exactly N outer updates, for each budget N, each run told its budget.

    A timestep-conditioned model (t = l / L_infer) is run once per budget with L_infer = N. Any other model
    does not depend on the budget, so one run to the largest budget is read at each N (``separate=True``
    forces one run per budget; both give the same numbers for such models, which a test checks).
    Returns ``budgets`` [K], ``correct`` [K, P] and ``wrong_cells`` [K, P].
    """
    budgets = tuple(sorted({int(b) for b in budgets}))
    if not budgets or budgets[0] < 1:
        raise ValueError(f"budgets must be outer-update counts >= 1, got {budgets}")
    if separate is None:
        separate = model.cfg.cond.uses_horizon
    model = _placed(model, device)
    with precision_context(precision, device) as resolved:
        correct, wrong = _run_budgets(model, data, budgets, batch_size, device, progress, separate)
    return {"budgets": np.asarray(budgets, np.int32), "correct": correct, "wrong_cells": wrong,
            "info": np.asarray(_info(model, data, budgets=list(budgets), separate=bool(separate), device=str(device),
                                     precision=resolved, weights=weights))}


def _run_budgets(model: LoopedReasoner, data: TaskData, budgets: tuple[int, ...], batch_size: int, device,
                 progress: bool, separate: bool) -> tuple[np.ndarray, np.ndarray]:
    n = len(data)
    correct = np.zeros((len(budgets), n), bool)
    wrong = np.zeros((len(budgets), n), np.int16)
    runs = [(b, (b,)) for b in budgets] if separate else [(budgets[-1], budgets)]
    bar = tqdm(total=n * sum(r[0] for r in runs), disable=not progress, desc="budgets", unit="upd",
               unit_scale=True, dynamic_ncols=True)
    for start in range(0, n, batch_size):
        idx = np.arange(start, min(n, start + batch_size))
        inputs, labels, pids = _tensors(data, idx, device)
        for budget, read_at in runs:
            for k, carry, _ in model.iterate(inputs, budget, pids, horizon=budget):
                if k in read_at:
                    j = budgets.index(k)
                    w = _wrong_cells(model, carry, labels)
                    wrong[j, idx] = w.cpu().numpy()
                    correct[j, idx] = (w == 0).cpu().numpy()
                bar.update(len(idx))
    bar.close()
    return correct, wrong


def _perturb_state(state: dict[str, Tensor], eps: float, gen: torch.Generator) -> dict[str, Tensor]:
    h = state["h"]
    u = torch.randn(h.shape, generator=gen, dtype=torch.float32).to(h.device, h.dtype)
    scale = eps * _norm(h) / _norm(u).clamp_min(1e-30)
    return {**state, "h": h + scale.view(-1, *([1] * (h.ndim - 1))) * u}


@torch.no_grad()
def perturb(model: LoopedReasoner, data: TaskData, at: int, eps: tuple[float, ...], updates_after: int,
            every: int = 1, batch_size: int = 256, device: str = "cpu", seed: int = 0,
            progress: bool = True, precision: str = "auto", weights: dict | None = None) -> dict[str, np.ndarray]:
    """Perturb both states at update ``at`` by each relative size in ``eps`` and run ``updates_after`` more.

    Returns arrays with a leading eps axis E (``eps`` as given; include 0.0 for the unperturbed control):
    ``correct``/``wrong_cells``/``distance`` ``[E, K, P]`` at updates ``at + updates`` (``updates``: [K]),
    ``solved_at`` ``[P]`` (right at update ``at``), ``eps`` ``[E]``.
    """
    _check(updates_after, every)
    if at < 1:
        raise ValueError(f"perturb at must be >= 1, got {at}")
    eps = tuple(float(e) for e in eps)
    if not eps or any(not 0 <= e < np.inf for e in eps):
        raise ValueError(f"eps must be a non-empty list of finite sizes >= 0, got {eps}")
    model = _placed(model, device)
    with precision_context(precision, device) as resolved:
        out = _run_perturb(model, data, at, eps, updates_after, every, batch_size, device, seed, progress)
    out["info"] = np.asarray(_info(model, data, at=at, updates_after=updates_after, every=every, device=str(device),
                                   precision=resolved, weights=weights))
    return out


def _run_perturb(model: LoopedReasoner, data: TaskData, at: int, eps: tuple[float, ...], updates_after: int,
                 every: int, batch_size: int, device, seed: int, progress: bool) -> dict[str, np.ndarray]:
    K = updates_after // every
    E, n = len(eps), len(data)
    correct = np.zeros((E, K, n), bool)
    wrong = np.zeros((E, K, n), np.int16)
    distance = np.zeros((E, K, n), np.float32)
    solved_at = np.zeros(n, bool)
    bar = tqdm(total=n * (at + updates_after * (E + 1)), disable=not progress, desc="perturb", unit="upd",
               unit_scale=True, dynamic_ncols=True)
    for start in range(0, n, batch_size):
        idx = np.arange(start, min(n, start + batch_size))
        sl = slice(start, start + len(idx))
        inputs, labels, pids = _tensors(data, idx, device)
        x = model.embed(inputs, pids)
        carry = model.initial_carry(len(idx), device)
        horizon = at + updates_after  # L_infer of a timestep-conditioned model: the whole run
        for _ in range(at):
            carry, _ = model.outer_update(carry, x, horizon)
        bar.update(len(idx) * at)
        solved_at[sl] = (_wrong_cells(model, carry, labels) == 0).cpu().numpy()
        ref = []
        c = carry
        for k in range(1, updates_after + 1):
            c, _ = model.outer_update(c, x, horizon)
            if k % every == 0:
                ref.append(c["y"]["h"].clone())
        bar.update(len(idx) * updates_after)
        for e, size in enumerate(eps):
            gen = torch.Generator().manual_seed(seed * 7919 + start)
            c = ({axis: _perturb_state(st, size, gen) if axis in ("y", "z") else st for axis, st in carry.items()}
                 if size > 0 else carry)  # the states, not the conditioner's record of past ones
            for k in range(1, updates_after + 1):
                c, _ = model.outer_update(c, x, horizon)
                if k % every == 0:
                    j = k // every - 1
                    w = _wrong_cells(model, c, labels)
                    wrong[e, j, sl] = w.cpu().numpy()
                    correct[e, j, sl] = (w == 0).cpu().numpy()
                    y = c["y"]["h"]
                    distance[e, j, sl] = (_norm(y - ref[j]) / _norm(ref[j]).clamp_min(1e-30)).cpu().numpy()
            bar.update(len(idx) * updates_after)
    bar.close()
    return {"eps": np.asarray(eps, np.float64), "updates": np.arange(at + every, at + updates_after + 1, every,
                                                                        dtype=np.int32),
            "correct": correct, "wrong_cells": wrong, "distance": distance, "solved_at": solved_at}


def save_trajectory(path: str | Path, traj: dict[str, np.ndarray]) -> Path:
    """Write a trajectory atomically as a compressed .npz (no pickled objects)."""
    return save_npz(path, traj)


def load_trajectory(path: str | Path) -> dict[str, np.ndarray]:
    return load_npz(path)


def accuracy_by_depth(traj: dict[str, np.ndarray]) -> list[tuple[int, float]]:
    """(update, exact accuracy) for each recorded update."""
    return [(int(u), float(c.mean())) for u, c in zip(traj["updates"], traj["correct"])]
