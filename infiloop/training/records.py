"""What a run folder records of its training, and how it is read back: the checkpoints that resume a run exactly (a
damaged one set aside for the one before), ``metrics.jsonl`` (and TensorBoard's events where it is installed), the
EMA weights and ``DONE.json``, and the progress line a long job prints for the scheduler."""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..io import atomic_write_text
from ..tasks.base import DataError

CHECKPOINT = "checkpoint.pt"


CHECKPOINT_PREV = "checkpoint.prev.pt"  # the one before: resume falls back to it when the last is damaged


WEIGHTS = "model.safetensors"


DONE = "DONE.json"


METRICS = "metrics.jsonl"


TENSORBOARD = "tensorboard"  # TensorBoard's event files of metrics.jsonl's records, where tensorboard is installed


def first_line(e: BaseException) -> str:
    """``Type: first line`` of an exception (two lines where the first only introduces the second, as Dynamo's
    ``backend='inductor' raised:``)."""
    text = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not text:
        return type(e).__name__
    head = " ".join(text[:2]) if text[0].endswith(":") else text[0]
    return f"{type(e).__name__}: {head}"


def tensorboard_writer(run_dir: Path, step: int):
    """A TensorBoard ``SummaryWriter`` on ``<run_dir>/tensorboard``, or None where the optional ``tensorboard``
    package is missing. A run resumed from its checkpoint at ``step`` hides the events after it, as its
    metrics.jsonl drops the lines after it (the resumed session writes them again)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # the optional extra is not installed: metrics.jsonl is the log
        return None
    try:
        return SummaryWriter(str(run_dir / TENSORBOARD), purge_step=step + 1 if step else None)
    except Exception as e:  # noqa: BLE001 - an optional log must not stop training
        print(f"warning: {run_dir / TENSORBOARD}: no TensorBoard events ({first_line(e)}); metrics.jsonl is the log",
              file=sys.stderr, flush=True)
        return None


# One progress line of a training job (stderr, rank 0): the run folder's name, the step reached and the step this
# job stops at, the mean loss, cell and exact accuracy of the steps since the previous line, their seconds per
# step, and the minutes left to the job's last step at that pace (rounded up). The scheduler sums the minutes.
PROGRESS_LINE = "# progress {run}: step {step}/{end} loss {loss:.3f} cell {cell:.3f} exact {exact:.3f} " \
                "{s_per_step:.3g} s/step, {min_left} min left"


_NUM = r"[0-9.]+(?:e[+-]?[0-9]+)?|nan|inf"


PROGRESS_RE = re.compile(rf"# progress (?P<run>\S+): step (?P<step>\d+)/(?P<end>\d+) loss (?P<loss>{_NUM}) "
                         rf"cell (?P<cell>{_NUM}) exact (?P<exact>{_NUM}) (?P<s_per_step>{_NUM}) s/step, "
                         rf"(?P<min_left>\d+) min left")


class Progress:
    """Progress lines for long jobs, whatever the progress bar: every ``every_s`` seconds (0: every step) one
    :data:`PROGRESS_LINE` on stderr, over the steps since the previous line."""

    def __init__(self, run: str, step: int, end: int, every_s: float, clock=time.monotonic, write=None):
        self.run, self.end, self.every_s, self.clock = run, end, every_s, clock
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.t, self.step, self.seen = clock(), step, []

    def add(self, step: int, metrics: dict) -> None:
        self.seen.append(metrics)
        now = self.clock()
        if now - self.t < self.every_s or step <= self.step:
            return
        s_per_step = (now - self.t) / (step - self.step)
        mean = {k: float(np.mean([m[k] for m in self.seen])) for k in ("loss", "cell_acc", "exact_acc")}
        self.write(PROGRESS_LINE.format(run=self.run, step=step, end=self.end, loss=mean["loss"],
                                        cell=mean["cell_acc"], exact=mean["exact_acc"], s_per_step=s_per_step,
                                        min_left=math.ceil(s_per_step * (self.end - step) / 60)))
        self.t, self.step, self.seen = now, step, []


def read_checkpoint(run_dir: Path) -> dict | None:
    """The last readable checkpoint of ``run_dir``, or ``None`` for a run that has none.

    A damaged ``checkpoint.pt`` is set aside as ``checkpoint.damaged.pt`` and the previous checkpoint is
    used (a resumed run ends the same either way); when no checkpoint can be read, the error says how to
    start the run over."""
    damaged = []
    for path in (run_dir / CHECKPOINT, run_dir / CHECKPOINT_PREV):
        if not path.is_file():
            continue
        try:
            ck = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(ck, dict) or not {"step", "model"} <= set(ck):
                raise ValueError("not a training checkpoint")
            if any(v.is_floating_point() and not bool(torch.isfinite(v).all()) for v in ck["model"].values()
                   if isinstance(v, torch.Tensor)):
                raise ValueError("its weights hold NaN or Inf")
        except Exception as e:  # noqa: BLE001 - any failure to read it means a damaged file
            damaged.append((path, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__))
            continue
        if damaged:
            try:
                os.replace(damaged[0][0], run_dir / "checkpoint.damaged.pt")
            except FileNotFoundError:  # another process of the same run (DDP) set it aside first
                pass
            print(f"warning: {damaged[0][0]}: damaged checkpoint ({damaged[0][1]}), set aside as "
                  f"checkpoint.damaged.pt; resuming from {path.name} (step {int(ck['step'])})",
                  file=sys.stderr, flush=True)
        return ck
    if damaged:
        files = " ".join(str(p) for p, _ in damaged)
        raise DataError(f"{damaged[0][0]}: damaged checkpoint ({damaged[0][1]}) and no readable previous one; "
                        f"to start this run over, delete {files} and run the same command again")
    return None


def read_metrics(path: Path, strict: bool = True) -> list[dict]:
    """The training log ``metrics.jsonl``: one JSON object per line with an integer ``step`` and numbers (or null).

    ``strict``: any other line is a :class:`DataError` naming the file and the line. Otherwise such lines are
    dropped: what a write cut short by a kill or a full disk leaves, which a resumed run rewrites."""
    if not path.is_file():
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        lines = path.read_bytes().decode("utf-8", "replace").splitlines()  # the bad lines fail below
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            ok = (isinstance(rec, dict) and type(rec.get("step")) is int
                  and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in rec.values()))
        except ValueError:
            ok = False
        if ok:
            out.append(rec)
        elif strict:
            raise DataError(f"{path}:{n}: not a training-log record (expected a JSON object of numbers with an "
                            f"integer step); delete the run folder and train again")
    return out


def truncate_metrics(path: Path, step: int) -> None:
    """Keep only the metric lines up to ``step`` (a resumed run rewrites what came after)."""
    if path.is_file():
        keep = [rec for rec in read_metrics(path, strict=False) if rec["step"] <= step]
        atomic_write_text(path, "".join(json.dumps(rec) + "\n" for rec in keep))


def last_metrics(path: Path) -> dict:
    records = read_metrics(path, strict=False)
    return records[-1] if records else {}
