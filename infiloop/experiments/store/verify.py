"""An imported run checked before use: it loads, and it reproduces its recorded accuracy on a few puzzles.

``archives.import_runs`` checks an archive's files (plain files at the expected paths, the sha256 of each, the code
version, the configuration hash of each folder). That proves the files are the ones exported, not that the weights
are the ones that produced the recorded evaluations: an archive can be exported from a folder whose weights were
replaced after its evaluations were cached. :func:`check_reproduces` closes that gap before the run is moved into
the run cache:

1. **it loads**: the weights the recorded evaluation names (``info.weights``: the final EMA file, or the checkpoint
   chosen on validation) load into the run's model;
2. **it reproduces**: the recorded evaluation with the most puzzles (exact accuracy per puzzle, on the profile's
   test set, own puzzle ids) is run again on its first ``puzzles`` puzzles (default 8) to the recorded update
   nearest at or below the training depth, on the CPU, and each puzzle's wrong cells and exactness are compared
   with the record.

The rule (:func:`allowed_differences`): an evaluation recorded in float32 (the CPU's precision) must give the same
wrong cells on every puzzle but one in eight (rounded up: a tie of the arg-max broken another way by another BLAS or
thread count); one recorded in bf16 or tf32 (a CUDA device), checked here in float32, may differ on one puzzle in four
(rounded up), since a looped model amplifies rounding over its updates. More differences refuse the import, with a
one-line ``error:`` naming the run, the puzzles and the rule; nothing is imported.

A check that cannot be made is never a silent pass: the result is ``not checked: <why>`` (no recorded evaluation to
compare with; the test data cannot be built here, e.g. offline without the hub's files; the recorded weights did
not travel), recorded in the imported folder's ``imported.json`` and printed by ``runs import`` and ``runs pull``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...evaluation import load_trajectory
from ...tasks.base import DataError
from .runs import Run

IMPORTED = "imported.json"  # the verification result, written into an imported run's folder
PUZZLES = 8


@dataclass
class Reproduction:
    """What the check found: ``status`` "reproduced" or "not checked", and the details in words."""

    status: str
    detail: str
    evaluation: str = ""
    puzzles: int = 0
    differing: int = 0

    def line(self) -> str:
        return f"{self.status}: {self.detail}"


def allowed_differences(puzzles: int, precision: str) -> int:
    """Puzzles whose wrong cells may differ from the record: one in eight at float32 (the CPU's), one in four at
    bf16 or tf32 (recorded on a CUDA device), rounded up."""
    return math.ceil(puzzles / (8 if precision in ("fp32", "float32") else 4))


def _candidates(run: Run) -> list[tuple[Path, dict]]:
    """The run's cached exact-accuracy evaluations that can be run again here, the most puzzles first."""
    out = []
    for p in sorted((run.dir / "eval").glob("traj-*.npz")):
        traj = load_trajectory(p)
        info = json.loads(str(traj["info"]))
        kind = (info.get("weights") or {}).get("kind", "ema")
        if info.get("puzzle_ids", "own") == "own" and kind in ("ema", "best"):
            out.append((p, info))
    return sorted(out, key=lambda x: -x[1]["n_puzzles"])


def check_reproduces(run: Run, puzzles: int = PUZZLES) -> Reproduction:
    """Run the run's largest recorded evaluation again on its first ``puzzles`` puzzles (module docstring); raises
    :class:`DataError` when it does not reproduce, returns "not checked: <why>" when it cannot be checked here."""
    found = _candidates(run)
    if not found:
        return Reproduction("not checked", "the archive records no evaluation of this run to compare with")
    try:
        test = run.test_data()
    except (DataError, OSError) as e:
        return Reproduction("not checked", f"its test data cannot be built here ({str(e).splitlines()[0]})")
    found = [(p, info) for p, info in found if info["data"] == test.name and info["n_puzzles"] <= len(test)]
    if not found:
        return Reproduction("not checked", "no recorded evaluation of this run ran on the profile's test set")
    # an evaluation recorded in float32, the precision the check runs in, where the archive has one (stable sort)
    found.sort(key=lambda f: f[1].get("precision", "fp32") not in ("fp32", "float32"))
    path, info = found[0]
    kind = (info.get("weights") or {}).get("kind", "ema")
    model = run.load_model("cpu", "best" if kind == "best" else "auto")
    return _compare(run, model, test, path, info, min(puzzles, info["n_puzzles"]))


def _compare(run: Run, model, test, path: Path, info: dict, k: int) -> Reproduction:
    from ...evaluation import evaluate

    traj = load_trajectory(path)
    ups = traj["updates"]
    at = [i for i, u in enumerate(ups) if u <= run.training_depth] or [0]
    row, update = at[-1], int(ups[at[-1]])
    again = evaluate(model, test.subset(slice(0, k)), updates=update, every=update, batch_size=k, progress=False,
                     precision="fp32")
    recorded_wrong, wrong = traj["wrong_cells"][row, :k], again["wrong_cells"][-1]
    differing = np.flatnonzero((recorded_wrong != wrong) | (traj["correct"][row, :k] != again["correct"][-1]))
    precision = info.get("precision", "fp32")
    allowed = allowed_differences(k, precision)
    what = (f"{path.name} (weights {(info.get('weights') or {}).get('kind', 'ema')}, {precision}), {k} puzzles at "
            f"update {update}")
    if len(differing) > allowed:
        raise DataError(f"{run.dir.name}: does not reproduce its recorded evaluation {what}: {len(differing)} "
                        f"puzzles differ (rows {differing[:5].tolist()}; wrong cells recorded "
                        f"{recorded_wrong[differing[:3]].tolist()}, now {wrong[differing[:3]].tolist()}), at most "
                        f"{allowed} may; the weights are not those that were evaluated; refused, nothing was imported")
    return Reproduction("reproduced", f"{what}: {k - len(differing)} of {k} the same (at most {allowed} may differ)",
                        path.name, k, len(differing))


def write_result(folder: Path, result: Reproduction, source: str) -> None:
    """Record the check in the imported folder (``imported.json``)."""
    (folder / IMPORTED).write_text(json.dumps({"source": source, "reproduction": asdict(result)}, indent=1) + "\n",
                                   encoding="utf-8")


def read_result(folder: Path) -> str:
    """The recorded check of an imported run in words ("" for a run trained here)."""
    path = Path(folder) / IMPORTED
    if not path.is_file():
        return ""
    rec = json.loads(path.read_text(encoding="utf-8"))["reproduction"]
    return f"{rec['status']}: {rec['detail']}"
