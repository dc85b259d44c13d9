"""Does the outer content score tell right boards from wrong ones? The connection study's score verdict over a
variant's trained InfiLoop models (``connection-study --verdict``; docs/connection-study.md)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ...analysis import intervals
from ...analysis import trajectories as analysis
from ..store.runs import get_run
from . import connection_design as design


def score_quantities(traj: dict, bins: np.ndarray, clip: float | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-puzzle terms (numerator, denominator) of one seed's score verdict, from a per-token trajectory:
    the mean outer score at each wrong-cell count of the candidate (notebook 03's claim
    ``gamma.score_tracks_correctness``), then the share of the candidates' cell scores at the clip on wrong
    boards and on right ones."""
    _, sums, counts = analysis.score_terms(traj, "outer", of="candidate", bins=bins)
    tok = traj["score_outer_tok"].astype(np.float64)  # [K, P, cells]
    wrong = traj["wrong_cells_candidate"] > 0  # [K, P]
    at = (tok >= clip - 1e-3).mean(-1) if clip is not None else np.zeros(wrong.shape)
    return [(sums, counts), ((at * wrong).sum(0), wrong.sum(0).astype(np.float64)),
            ((at * ~wrong).sum(0), (~wrong).sum(0).astype(np.float64))]


def score_verdict(variant: str, block: str, seeds: list[int], root: Path | None = None,
                  updates: int | None = None) -> dict:
    """Does the outer content score tell right boards from wrong ones, over these seeds' trained InfiLoop
    models (trained first if need be), each evaluated per token at every update to ``updates`` (default the
    profile's evaluation depth, 960 at `search`, as notebook 03 pools them)? The rank correlation of the mean
    score with the candidate's wrong cells and the share of scores at the clip on wrong and on right boards,
    each with its 95 % interval over seeds and puzzles (``infiloop/analysis/intervals.py``)."""
    trajs, clip = [], None
    for seed in seeds:
        run = get_run(design.TASK, "infiloop", design.PROFILE, design.overrides(variant, block, seed), root=root,
                      progress=False)
        n = run.config["eval"]["updates"] if updates is None else updates
        traj, _ = run.evaluate(updates=n, every=1, per_token=True, progress=False)
        trajs.append(traj)
        clip = run.model_config().outer.score_clip
    bins = np.unique(np.concatenate([analysis.score_terms(t, "outer", of="candidate")[0] for t in trajs]))
    per_seed = [score_quantities(t, bins, clip) for t in trajs]
    corr = intervals.bootstrap(per_seed, combine=lambda q: analysis.rank_correlation(bins.astype(float), q[0]))
    at_wrong = intervals.bootstrap(per_seed, combine=lambda q: q[1])
    at_right = intervals.bootstrap(per_seed, combine=lambda q: q[2])

    def iv(x):
        return {"value": x.value, "lo": x.lo, "hi": x.hi}

    return {"variant": variant, "block": block, "seeds": seeds, "profile": design.PROFILE, "method": corr.method,
            "updates": int(trajs[0]["updates"][-1]),
            "rank_correlation": iv(corr), "at_clip_wrong": iv(at_wrong), "at_clip_right": iv(at_right),
            "updated": datetime.now(timezone.utc).strftime("%Y-%m-%d")}
