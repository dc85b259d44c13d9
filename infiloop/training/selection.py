"""The checkpoint chosen on validation: at every checkpoint of a training run, the weights an evaluation would score
(the EMA of the weights where training keeps one, TRM's protocol, else the weights of that step) are scored on the
validation split (held-out puzzles of the training distribution, ``tasks/validation.py``; never the test set) at the
training depth, and the best so far are kept as ``best.safetensors`` with their record ``best.json`` (the step, the
validation accuracy, every step checked). ``python -m infiloop eval RUN --weights best`` scores them
(``Run.weights_used``).

The check runs on a model of its own under ``torch.no_grad`` and draws no random number, so the trained weights,
the checkpoints and the training log are the same with it as without it. Ties keep the earlier step; a resumed run
checks its steps after the checkpoint again, and the same step's weights replace their earlier record. A run whose
task has no validation split (ARC) keeps no best weights, and says why in ``best.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ..evaluation import EvalRequest, evaluate
from ..io import atomic_write_text, save_weights
from ..model.reasoner import LoopedReasoner, ModelConfig
from ..tasks.base import TaskData

BEST = "best.safetensors"
BEST_RECORD = "best.json"


class BestOnValidation:
    """Scores weights on ``valid`` (or records why there is none: ``why``) at ``depth`` outer updates; keeps the
    best in ``run_dir``."""

    def __init__(self, run_dir: Path, model_cfg: ModelConfig, valid: TaskData | None, depth: int, batch_size: int,
                 device: str, kind: str, why: str = ""):
        self.run_dir, self.cfg, self.valid, self.depth = Path(run_dir), model_cfg, valid, depth
        self.batch_size, self.device, self.kind, self.why = batch_size, device, kind, why

    def record(self) -> dict:
        path = self.run_dir / BEST_RECORD
        return json.loads(path.read_text()) if path.is_file() else {}

    def check(self, step: int, weights: dict[str, torch.Tensor]) -> float | None:
        """Score ``weights`` (those of ``step``) on the validation split; keep them when they are the best so far.
        Returns their exact accuracy (None without a validation split)."""
        if self.valid is None:
            atomic_write_text(self.run_dir / BEST_RECORD, json.dumps({"kind": None, "why": self.why}, indent=1))
            return None
        model = LoopedReasoner(self.cfg)
        model.load_state_dict({k: v.detach().cpu() for k, v in weights.items()})
        with torch.random.fork_rng(devices=[]):  # nothing here may move the training's random streams
            traj = evaluate(model.eval(), self.valid, EvalRequest(self.depth, self.depth, batch_size=self.batch_size,
                                                                  device=self.device, progress=False))
        acc = float(np.asarray(traj["correct"][-1]).mean())
        rec = self.record()
        checked = {int(k): v for k, v in rec.get("checked", {}).items() if int(k) < step}  # a resumed run re-checks
        checked[step] = acc
        best = rec if rec.get("step") is not None else {}
        # a resumed run checks its steps again: the same step's weights replace their earlier record
        if not best or acc > best["valid_exact"] or best["step"] == step:
            save_weights(self.run_dir / BEST, {k: v.detach().cpu() for k, v in weights.items()})
            best = {"step": step, "valid_exact": acc}
        atomic_write_text(self.run_dir / BEST_RECORD, json.dumps({
            "kind": self.kind, "step": best["step"], "valid_exact": best["valid_exact"], "depth": self.depth,
            "puzzles": len(self.valid), "data": self.valid.name, "checked": {str(k): checked[k] for k in
                                                                            sorted(checked)}}, indent=1))
        return acc
