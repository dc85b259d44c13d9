"""The looped decoder's training and evaluation (``model.looplm.LoopLM`` on the generated text tasks of
``tasks.language``), beside the reasoner's (``trainer.py``, ``evaluation.py``): a :class:`Probe` is one model on
one task, :func:`run` trains and evaluates it into a JSON-ready record.

Training: plain AdamW (linear warm-up, cosine decay over ``steps``), next-token cross-entropy over the whole text
(the study's pre-training objective: its summary's "Models and Data", next-token prediction) or on the answer
words only (``LMTrainConfig.loss``), gradients through all K loops of ``C ∘ F^K ∘ P``. Evaluation: exact match of
the answer words after r loops, for a list of r (under-unrolling r < K, the horizon r = K, extrapolation r > K),
per depth of the test split (a mixture's depths say which kind of task they are: ``LanguageConfig.kinds``).
``experiments/looplm.py`` holds notebook 08's grid, the record cache and the command line.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from ..config import from_dict
from ..model.connections import choose_kernels
from ..model.looplm import LoopLM, LoopLMConfig
from ..optim import warmup_cosine
from ..tasks.language import LanguageConfig, LanguageData, Split, generate

LOSSES = ("text", "answer")


@dataclass
class LMTrainConfig:
    """steps of AdamW (lr with ``warmup`` linear steps, then cosine to 10 %), batch size, seed; ``loss``: ``text``,
    next-token cross-entropy at every position of the text (the study's), or ``answer``, on the answer words only."""

    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.1
    warmup: int = 100
    grad_clip: float = 1.0
    seed: int = 0
    eval_batch: int = 250
    loss: str = "text"


def crop(tokens: Tensor, answer: Tensor) -> tuple[Tensor, Tensor]:
    """Drop the columns after the last answer word of the batch (right padding)."""
    n = int(answer.float().cumsum(1).argmax(1).max()) + 1
    return tokens[:, :n], answer[:, :n]


def answer_loss(model: LoopLM, tokens: Tensor, answer: Tensor) -> Tensor:
    """Mean cross-entropy of the answer words, each predicted from the positions before it."""
    tokens, answer = crop(tokens, answer)
    logits = model(tokens[:, :-1])
    mask = answer[:, 1:]
    return F.cross_entropy(logits[mask], tokens[:, 1:][mask])


def text_loss(model: LoopLM, tokens: Tensor, answer: Tensor) -> Tensor:
    """Mean next-token cross-entropy over the text: every word (the answer's too) predicted from the words before
    it; the right padding is left out."""
    tokens, answer = crop(tokens, answer)
    logits = model(tokens[:, :-1])
    mask = tokens[:, 1:] != 0
    return F.cross_entropy(logits[mask], tokens[:, 1:][mask])


def train(model: LoopLM, split: Split, cfg: LMTrainConfig) -> dict:
    """Train in place; returns the seconds, the steps and the mean loss of the last 10 % of steps."""
    if cfg.loss not in LOSSES:
        raise ValueError(f"probe.train.loss: unknown loss {cfg.loss!r}; valid choices: {', '.join(LOSSES)}")
    loss_of = text_loss if cfg.loss == "text" else answer_loss
    gen = torch.Generator().manual_seed(cfg.seed)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "emb" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "emb" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))

    model.train()
    losses, start = [], time.perf_counter()
    for step in range(cfg.steps):
        idx = torch.randint(0, len(split), (cfg.batch_size,), generator=gen)
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(step, cfg.lr, cfg.warmup, cfg.steps, 0.1)
        dev = next(model.parameters()).device
        loss = loss_of(model, split.tokens[idx].to(dev), split.answer[idx].to(dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
    tail = losses[-max(1, cfg.steps // 10):]
    return {"seconds": time.perf_counter() - start, "steps": cfg.steps, "loss": sum(tail) / len(tail)}


@torch.no_grad()
def correct(model: LoopLM, split: Split, loops: list[int], batch: int = 250) -> dict[int, Tensor]:
    """Per item, whether every answer word is predicted after r loops, for each r of ``loops``: ``{r: [n] bool}``."""
    model.eval()
    out: dict[int, list[Tensor]] = {r: [] for r in loops}
    for i in range(0, len(split), batch):
        tokens, answer = crop(split.tokens[i: i + batch], split.answer[i: i + batch])
        dev = next(model.parameters()).device
        tokens, answer = tokens.to(dev), answer.to(dev)
        mask, target = answer[:, 1:], tokens[:, 1:]
        for r, logits in model.logits_at(tokens[:, :-1], loops).items():
            out[r].append(((logits.argmax(-1) == target) | ~mask).all(1))
    return {r: torch.cat(v) for r, v in out.items()}


def accuracy(model: LoopLM, split: Split, loops: list[int], batch: int = 250) -> dict[int, float]:
    """Exact match of every answer word after r loops, for each r of ``loops``."""
    return {r: float(ok.float().mean()) for r, ok in correct(model, split, loops, batch).items()}


def evaluate(model: LoopLM, data: LanguageData, loops: list[int], batch: int = 250) -> dict[int, dict[int, Tensor]]:
    """Per test depth and r, the items answered right: ``{depth: {r: [n] bool}}``."""
    return {d: correct(model, split, loops, batch) for d, split in data.test.items()}


@dataclass
class Probe:
    """One model on one task: the task, the model, the training, and the loop counts r evaluated."""

    task: LanguageConfig = field(default_factory=LanguageConfig)
    model: LoopLMConfig = field(default_factory=LoopLMConfig)
    train: LMTrainConfig = field(default_factory=LMTrainConfig)
    loops: tuple[int, ...] = ()

    def budgets(self) -> list[int]:
        """The r evaluated: by default K/2, K, 2K, 4K."""
        K = self.model.loops
        return sorted(set(self.loops or (max(1, K // 2), K, 2 * K, 4 * K)))

    @classmethod
    def from_dict(cls, d: dict) -> Probe:
        """The probe of ``asdict(probe)`` (a scheduler job's description); it has the same :func:`key`."""
        return cls(LanguageConfig.from_dict(d["task"], "probe.task"), LoopLMConfig.from_dict(d["model"], "probe.model"),
                   from_dict(LMTrainConfig, d["train"], "probe.train"), tuple(d["loops"]))


def run(probe: Probe, device: str = "cpu") -> dict:
    """Generate the task, build and train the model (seeded), evaluate; a JSON-ready record."""
    data = generate(probe.task)
    cfg = model_config(probe, data)
    torch.manual_seed(probe.train.seed)
    model = LoopLM(cfg).to(device)
    choose_kernels(model, device)
    fit = train(model, data.train, probe.train)
    start = time.perf_counter()
    right = evaluate(model, data, probe.budgets(), probe.train.eval_batch)
    axis = {kind: loop_axis(model, data, max(probe.budgets()), max(depths))
            for kind, depths in probe.task.kinds().items()}
    train_acc = accuracy(model, data.train, [cfg.loops], probe.train.eval_batch)[cfg.loops]
    return {"task": asdict(probe.task), "model": cfg.to_dict(), "train": asdict(probe.train),
            "params": model.n_params(), "kinds": {k: list(v) for k, v in probe.task.kinds().items()}, "fit": fit,
            "eval_seconds": time.perf_counter() - start,
            "train_accuracy": train_acc,
            "accuracy": {str(d): {str(r): float(ok.float().mean()) for r, ok in v.items()} for d, v in right.items()},
            "correct": {str(d): {str(r): "".join("1" if x else "0" for x in ok.tolist()) for r, ok in v.items()}
                        for d, v in right.items()},
            "loop_axis": axis}


@torch.no_grad()
def loop_axis(model: LoopLM, data: LanguageData, loops: int, depth: int, items: int = 64) -> dict:
    """What the connection does on the loop axis, at the position that predicts the answer of the first ``items``
    test items of test depth ``depth``, for l = 1..``loops``: the mean step size gamma_l (eq. 5; 1 for carry-last),
    the mean content score s_l and the relative update ||h_l - h_{l-1}|| / ||h_{l-1}|| (the study's relative update
    norm, its summary's "Which Computations Should Be Recurrent?"); and InfiLoop's learned beta and |q|."""
    split = data.test[depth]
    tokens, answer = crop(split.tokens[:items], split.answer[:items])
    dev = next(model.parameters()).device
    tokens, answer = tokens.to(dev), answer.to(dev)
    _, diag = model(tokens[:, :-1], loops=loops, diagnostics=True)
    at = answer[:, 1:]  # [B, T-1]: the positions whose next word is an answer word
    out = {k: [float(v[lp][at].mean()) for lp in range(loops)] for k, v in diag.items()}
    conn = model.connection
    if hasattr(conn, "beta"):
        out["beta"] = float(conn.beta)
    if getattr(conn, "q", None) is not None:
        out["q_norm"] = float(conn.q.norm())
    return out


@functools.lru_cache(maxsize=8)
def _data(task_json: str) -> LanguageData:
    return generate(LanguageConfig.from_dict(json.loads(task_json)))


def data_of(probe: Probe) -> LanguageData:
    """The probe's generated task, kept in this process (a grid's models share one per task)."""
    return _data(json.dumps(asdict(probe.task), sort_keys=True))


def model_config(probe: Probe, data: LanguageData | None = None) -> LoopLMConfig:
    """The probe's model configuration with the task's vocabulary and length (as :func:`run` builds it)."""
    data = data or data_of(probe)
    return LoopLMConfig.from_dict({**probe.model.to_dict(), "vocab_size": data.vocab_size,
                                   "seq_len": max(probe.model.seq_len, data.max_len)})
