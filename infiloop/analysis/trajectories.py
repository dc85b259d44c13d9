"""Analyses of recorded trajectories (see ``evaluation.py`` for their schema): the quantities of the
paper's figures, computed from what the code measured.

Every function takes a trajectory dict (``Run.evaluate``) and returns plain numpy arrays or dicts.
Update indices are the 1-based outer updates of ``traj["updates"]``; alignment to the first solve
needs a trajectory recorded at every update (``every=1``).
"""

from __future__ import annotations

import json

import numpy as np


def info(traj: dict) -> dict:
    return json.loads(str(traj["info"]))


def row(traj: dict, update: int) -> int:
    """The row of ``update`` in a trajectory's per-update arrays."""
    hits = np.flatnonzero(traj["updates"] == update)
    if not len(hits):
        raise ValueError(f"update {update} was not recorded (recorded: {traj['updates'][0]}..{traj['updates'][-1]} "
                         f"every {int(traj['updates'][1] - traj['updates'][0]) if len(traj['updates']) > 1 else 1})")
    return int(hits[0])


def exact_by_depth(traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """(updates [K], exact accuracy [K])."""
    return traj["updates"], traj["correct"].mean(1)


def solved_at(traj: dict, update: int) -> np.ndarray:
    """[P]: whole answer right at the recorded ``update``."""
    return traj["correct"][row(traj, update)]


def accuracy_at(traj: dict, update: int) -> float:
    return float(solved_at(traj, update).mean())


def best_depth(traj: dict) -> tuple[int, float]:
    """The recorded update with the highest exact accuracy (the first one on ties)."""
    acc = traj["correct"].mean(1)
    k = int(np.argmax(acc))
    return int(traj["updates"][k]), float(acc[k])


def difficulty_breakdown(traj: dict, update: int, values: np.ndarray | None = None,
                         groups: int | None = None) -> dict[int | str, tuple[float, int]]:
    """Exact accuracy at ``update`` by a difficulty value per puzzle (default: the number of blank cells;
    e.g. a maze's shortest-path length): {value: (accuracy, puzzles)}, in increasing order. With ``groups``
    and more distinct values than that, the values are grouped into at most ``groups`` ranges of about equal
    size, keyed ``"lo–hi"``."""
    ok = traj["correct"][row(traj, update)]
    v = np.asarray(traj["blanks"] if values is None else values)[: len(ok)]
    if len(v) != len(ok):
        raise ValueError(f"difficulty values: {len(v)} for {len(ok)} puzzles")
    distinct = np.unique(v)
    if groups is None or len(distinct) <= groups:
        return {int(u): (float(ok[v == u].mean()), int((v == u).sum())) for u in distinct}
    # cut points at quantiles of the values, so each range holds about as many puzzles
    cuts = np.unique(np.quantile(v, np.linspace(0, 1, groups + 1)[1:-1], method="higher"))
    which = np.searchsorted(cuts, v, side="right")
    out = {}
    for g in np.unique(which):
        sel = which == g
        lo, hi = int(v[sel].min()), int(v[sel].max())
        out[f"{lo}–{hi}" if lo != hi else str(lo)] = (float(ok[sel].mean()), int(sel.sum()))
    return out


def _aligned(traj: dict, values: np.ndarray, before: int, after: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """values [K, P] aligned to each solved puzzle's first solve: offsets, mean, count per offset."""
    ups = traj["updates"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("alignment to the first solve needs a trajectory recorded at every update (every=1)")
    fs = traj["first_solve"]
    offsets = np.arange(-before, after + 1)
    total = np.zeros(len(offsets))
    count = np.zeros(len(offsets), dtype=np.int64)
    for p in np.flatnonzero(fs > 0):
        rows = fs[p] - ups[0] + offsets
        ok = (rows >= 0) & (rows < len(ups))
        total[ok] += values[rows[ok], p]
        count[ok] += 1
    with np.errstate(invalid="ignore"):
        return offsets, total / np.maximum(count, 1) * np.where(count > 0, 1, np.nan), count


def aligned_to_first_solve(traj: dict, key: str, before: int = 12, after: int = 36):
    """Mean of ``traj[key]`` over solved puzzles, at each offset from their first solve (0 = the update
    that completes the board). Returns (offsets, mean, number of puzzles at each offset)."""
    return _aligned(traj, traj[key].astype(np.float64), before, after)


def retention_after_solve(traj: dict, after: int = 36) -> tuple[np.ndarray, np.ndarray]:
    """Fraction of solved puzzles still right k updates after their first solve, k = 0..after."""
    offsets, mean, _ = _aligned(traj, traj["correct"].astype(np.float64), 0, after)
    return offsets, mean


def lost_after_solve(traj: dict) -> float:
    """Fraction of puzzles solved at some update that are wrong at the last update."""
    solved = traj["first_solve"] > 0
    if not solved.any():
        return float("nan")
    return float((~traj["correct"][-1][solved]).mean())


def state_change_after_solve(traj: dict) -> float:
    """Mean relative state change per update after the first solve: for each puzzle solved before the
    last recorded update, the mean of ``state_change`` over the updates after its first solve, then
    the mean over those puzzles (the paper: TRM about 10 %, InfiLoop 0.3 % per update)."""
    ups = traj["updates"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("state change after the solve needs a trajectory recorded at every update (every=1)")
    fs = traj["first_solve"]
    rows = np.arange(len(ups))[:, None]
    after = rows >= (fs - ups[0] + 1)[None, :]  # [K, P]: updates after each puzzle's first solve
    keep = (fs > 0) & after.any(axis=0)
    if not keep.any():
        return float("nan")
    sc = np.where(after, traj["state_change"].astype(np.float64), 0.0)[:, keep]
    return float((sc.sum(0) / after[:, keep].sum(0)).mean())


# Per-puzzle terms (numerator, denominator; the puzzle axis last) of the statistics above, for intervals over
# seeds and puzzles (infiloop/analysis/intervals.py): each statistic is numerator.sum(-1) / denominator.sum(-1).

def accuracy_terms(traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """Exact accuracy at every recorded update ([K, P] terms; :func:`exact_by_depth`)."""
    c = traj["correct"]
    return c, np.ones(c.shape, dtype=bool)


def solved_by(traj: dict) -> np.ndarray:
    """[K, P]: the puzzle was first solved at or before the recorded update (needs every=1 to be exact)."""
    fs = traj["first_solve"]
    return (fs > 0)[None, :] & (fs[None, :] <= traj["updates"][:, None])


def lost_terms(traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """Of the puzzles solved at some update, those wrong at the last update (:func:`lost_after_solve`)."""
    solved = traj["first_solve"] > 0
    return solved & ~traj["correct"][-1], solved


def lost_by_depth_terms(traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """[K, P]: at each update, of the puzzles solved by then, those wrong at that update."""
    by = solved_by(traj)
    return by & ~traj["correct"], by


def state_change_terms(traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per puzzle solved before the last update, its mean relative state change per update after its first
    solve (:func:`state_change_after_solve`)."""
    ups, fs = traj["updates"], traj["first_solve"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("state change after the solve needs a trajectory recorded at every update (every=1)")
    after = np.arange(len(ups))[:, None] >= (fs - ups[0] + 1)[None, :]
    keep = (fs > 0) & after.any(axis=0)
    sc = np.where(after, traj["state_change"].astype(np.float64), 0.0).sum(0) / np.maximum(after.sum(0), 1)
    return np.where(keep, sc, 0.0), keep


def state_change_by_depth_terms(traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """[K, P]: at each update, the relative state change of the puzzles solved before it (after the solve)."""
    ups = traj["updates"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("state change by depth needs a trajectory recorded at every update (every=1)")
    before = (traj["first_solve"] > 0)[None, :] & (traj["first_solve"][None, :] < ups[:, None])
    return np.where(before, traj["state_change"].astype(np.float64), 0.0), before


def gamma_phase_terms(traj: dict, axis: str = "outer", search: int = 6, settle: int = 6) -> dict[str, tuple]:
    """Per-puzzle terms (sum of γ_t, number of updates; the puzzle axis last) of the phases of the paper's
    self-verification picture (Fig. 3a): ``search`` (the ``search`` updates before the first solve), ``solve``
    (the completing update), ``after`` (from ``settle`` to ``3 settle`` updates after it), ``unsolved``
    (never-solved puzzles, every update). Each phase's mean γ is numerator.sum() / denominator.sum()."""
    ups = traj["updates"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("γ phases need a trajectory recorded at every update (every=1)")
    g = traj[f"gamma_{axis}"].astype(np.float64)
    fs = traj["first_solve"]
    off = (np.arange(len(ups)) + ups[0])[:, None] - fs[None, :]  # [K, P]: updates from each puzzle's solve
    solved = (fs > 0)[None, :]
    windows = {"search": solved & (off >= -search) & (off < 0), "solve": solved & (off == 0),
               "after": solved & (off >= settle) & (off <= 3 * settle),
               "unsolved": np.broadcast_to(~solved, g.shape)}
    return {k: (np.where(w, g, 0.0).sum(0), w.sum(0)) for k, w in windows.items()}


GAMMA_PHASES = ("search", "solve", "after", "unsolved")


def gamma_phase_quantities(traj: dict, axis: str, search: int = 6, settle: int = 6) -> list[tuple]:
    """One seed's terms for notebook 03's intervals: the four phases of :func:`gamma_phase_terms` in
    :data:`GAMMA_PHASES` order, then its equal-weight baseline 1 − β as a constant ratio over the same puzzles
    (``claims.phase_contrast`` reads them in this order)."""
    terms = gamma_phase_terms(traj, axis, search, settle)
    ones = np.ones(traj["correct"].shape[1])
    return [terms[k] for k in GAMMA_PHASES] + [((1 - info(traj)["beta"][axis]) * ones, ones)]


def gamma_phases(traj: dict, axis: str = "outer", search: int = 6, settle: int = 6) -> dict[str, float]:
    """Mean step size γ_t in each phase of :func:`gamma_phase_terms`, pooled over the puzzles' updates
    (NaN for a phase with no update, e.g. ``unsolved`` when every puzzle is solved)."""
    out = {}
    for k, (num, den) in gamma_phase_terms(traj, axis, search, settle).items():
        out[k] = float(num.sum() / den.sum()) if den.sum() else float("nan")
    return out


def score_terms(traj: dict, axis: str = "outer", of: str = "candidate", bins: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-puzzle terms of the mean content score s_t by wrong cells (Fig. 3b): (wrong-cell counts [B],
    score sums [B, P], samples [B, P]) over every recorded update; pairing as in :func:`score_by_wrong_cells`.
    ``bins``: the wrong-cell counts to use (e.g. the union over several seeds; a count no update reaches has
    zero samples); default, the counts that occur."""
    s, w = _score_pairs(traj, axis, of)
    bins = np.unique(w) if bins is None else np.asarray(bins)
    sums, counts = np.zeros((len(bins), s.shape[1])), np.zeros((len(bins), s.shape[1]), dtype=np.int64)
    for i, v in enumerate(bins):
        hit = w == v
        sums[i], counts[i] = np.where(hit, s, 0.0).sum(0), hit.sum(0)
    return bins, sums, counts


def separation_terms(traj: dict, axis: str = "outer", of: str = "candidate") -> list[tuple[np.ndarray, np.ndarray]]:
    """One seed's per-puzzle terms of the content score's AUROC for right (no wrong cell) against wrong candidates,
    over every recorded update (``claims.score_separation``), pairing as in :func:`score_by_wrong_cells`:
    [(placements of the puzzle's right candidates, their number), (placements of its wrong ones, their number),
    (the seed's AUROC, 1)]. A right candidate's placement is the share of the seed's wrong candidates scoring below
    it, a wrong one's the share of its right candidates scoring above it (ties count half): each kind's mean placement
    is the AUROC. The AUROC's terms have no denominator where the seed has no right or no wrong candidate."""
    s, w = _score_pairs(traj, axis, of)
    right = w == 0
    ones = np.ones(s.shape[1])
    r, x = np.sort(s[right]), np.sort(s[~right])
    if not (r.size and x.size):
        zero = np.zeros(s.shape[1])
        return [(zero, zero), (zero, zero), (zero, zero)]
    below = (np.searchsorted(x, s, "left") + np.searchsorted(x, s, "right")) / (2.0 * x.size)
    above = (2.0 * r.size - np.searchsorted(r, s, "left") - np.searchsorted(r, s, "right")) / (2.0 * r.size)
    auroc = float(below[right].mean())
    return [(np.where(right, below, 0.0).sum(0), right.sum(0).astype(np.float64)),
            (np.where(right, 0.0, above).sum(0), (~right).sum(0).astype(np.float64)), (auroc * ones, ones)]


def _auroc(right: np.ndarray, wrong: np.ndarray) -> float:
    """The chance that a right candidate's score exceeds a wrong one's (ties half)."""
    x = np.sort(wrong)
    return float(((np.searchsorted(x, right, "left") + np.searchsorted(x, right, "right")) / (2.0 * x.size)).mean())


def separation_held(traj: dict, axis: str = "outer") -> dict:
    """Where the content score's separation of right from wrong candidates (:func:`separation_terms`, over every
    update) comes from. A right candidate is also a late one (a board is right after its solve), so a score that only
    drifts with the update would separate them too: ``within_update`` is the AUROC at each update (right against
    wrong candidates of that update), averaged over the ``updates`` holding both kinds; ``higher_when_right`` the
    share of the ``puzzles`` with right and wrong candidates whose mean score is higher when right (NaN where none)."""
    s, w = _score_pairs(traj, axis, "candidate")
    right = w == 0
    per_update = [_auroc(s[k][right[k]], s[k][~right[k]]) for k in range(s.shape[0])
                  if right[k].any() and (~right[k]).any()]
    both = right.any(0) & (~right).any(0)
    mean_right = np.where(right, s, 0.0).sum(0) / np.maximum(right.sum(0), 1)
    mean_wrong = np.where(right, 0.0, s).sum(0) / np.maximum((~right).sum(0), 1)
    higher = mean_right[both] > mean_wrong[both]
    nan = float("nan")
    return {"every_update": _auroc(s[right], s[~right]) if right.any() and (~right).any() else nan,
            "within_update": float(np.mean(per_update)) if per_update else nan, "updates": len(per_update),
            "higher_when_right": float(higher.mean()) if higher.size else nan, "puzzles": int(higher.size)}


def rank_correlation(x: np.ndarray, y: np.ndarray) -> float | np.ndarray:
    """Spearman's rank correlation of x and y over the entries where both are finite (NaN with fewer than 3, or
    when either is constant there; ties share their mean rank). ``y`` may carry a last axis of resamples ([B, R]
    against x [B]): the result is then [R], each column's correlation, exactly as one at a time."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if y.ndim == 1:
        return float(_rank_correlation_columns(x, y[:, None])[0])
    return _rank_correlation_columns(x, y)


def _mean_ranks(v: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """[B, R]: each entry's rank among the valid entries of its column (0-based; ties: their mean rank)."""
    less = ((v[None, :, :] < v[:, None, :]) & ok[None, :, :]).sum(1)
    equal = ((v[None, :, :] == v[:, None, :]) & ok[None, :, :]).sum(1)
    return less + (equal - 1) / 2.0


def _rank_correlation_columns(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.full(y.shape[1], np.nan)
    for start in range(0, y.shape[1], 512):  # bounded memory: [B, B, 512] comparisons at a time
        yc = y[:, start:start + 512]
        xc = np.broadcast_to(x[:, None], yc.shape)
        ok = np.isfinite(xc) & np.isfinite(yc)
        rx, ry = _mean_ranks(np.where(ok, xc, 0.0), ok), _mean_ranks(np.where(ok, yc, 0.0), ok)
        n = ok.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx, my = (np.where(ok, rx, 0).sum(0) / n, np.where(ok, ry, 0).sum(0) / n)
            dx, dy = np.where(ok, rx - mx, 0.0), np.where(ok, ry - my, 0.0)
            sxx, syy = (dx ** 2).sum(0), (dy ** 2).sum(0)
            r = (dx * dy).sum(0) / np.sqrt(sxx * syy)
        out[start:start + 512] = np.where((n >= 3) & (sxx > 1e-12) & (syy > 1e-12), np.clip(r, -1, 1), np.nan)
    return out


def score_by_wrong_cells(traj: dict, axis: str = "outer", of: str = "candidate") -> dict[int, tuple[float, int]]:
    """Median content score s_t by the number of wrong cells at that update: {wrong cells: (median score,
    samples)} over all recorded updates and puzzles (Fig. 3b).

    The score belongs to the candidate z_t, so by default it is paired with the wrong cells of the
    candidate's own readout (``of="candidate"``, outer axis only); ``of="state"`` pairs it with the
    readout of the aggregated state h_t, which after a rejected candidate (small gamma) is an older board.
    """
    s, w = _score_pairs(traj, axis, of)
    s, w = s.ravel(), w.ravel()
    return {int(v): (float(np.median(s[w == v])), int((w == v).sum())) for v in np.unique(w)}


def _score_pairs(traj: dict, axis: str, of: str) -> tuple[np.ndarray, np.ndarray]:
    """([K, P] content scores, [K, P] wrong cells they are paired with)."""
    if of not in ("candidate", "state"):
        raise ValueError(f"of={of!r}: expected 'candidate' or 'state'")
    if of == "candidate" and axis != "outer":
        raise ValueError("the candidate's wrong cells are recorded for the outer axis (its candidate is a board)")
    return (traj[f"score_{axis}"].astype(np.float64),
            traj["wrong_cells_candidate" if of == "candidate" else "wrong_cells"])


def perturbation_terms(out: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per eps, the per-puzzle terms of the retention (puzzle axis last): (solved at the perturbation and right
    at the last update, solved at the perturbation); the retention is numerator.sum() / denominator.sum()."""
    solved = out["solved_at"]
    return [(out["correct"][i, -1] & solved, solved) for i in range(len(out["eps"]))]


def perturbation_retention(out: dict) -> dict[float, float]:
    """Per eps: fraction of the puzzles solved at the perturbation still right at the last update."""
    return {float(e): float(num.sum() / max(1, den.sum()))
            for e, (num, den) in zip(out["eps"], perturbation_terms(out))}


# ARC pass@k needs the predictions themselves: the evaluation keeps a snapshot of them at each of these depths.
PASS_DEPTHS = 32  # at most this many depths
PASS_SNAPSHOT_BYTES = 2**30  # and at most this many bytes of snapshots (rows x cells x depths, one byte each)


def pass_depths(updates: int, every: int, rows: int, cells: int) -> tuple[int, ...]:
    """The recorded updates (``every``, ``2 every``, ..., ``updates``) at which an ARC evaluation keeps a
    prediction snapshot for pass@k: all of them when there are at most ``PASS_DEPTHS`` and their snapshots
    fit ``PASS_SNAPSHOT_BYTES``; else that many, evenly spaced, always with the first and the last."""
    recorded = np.arange(every, updates + 1, every)
    if not len(recorded):
        return ()
    most = max(1, min(PASS_DEPTHS, PASS_SNAPSHOT_BYTES // max(1, rows * cells)))
    if len(recorded) <= most:
        return tuple(int(u) for u in recorded)
    picks = np.unique(np.round(np.linspace(len(recorded) - 1, 0, most)).astype(int))
    return tuple(int(u) for u in recorded[picks])


def arc_vote(traj: dict, test_data, update: int, k: int = 2):
    """ARC pass@k at ``update`` (a prediction snapshot of ``test_data``'s rows), as
    :class:`infiloop.tasks.voting.PassAtK`: each view's prediction mapped back to the task's frame, votes
    over the views of each test input, ranked by vote count then mean halting confidence (sigmoid of
    q_halt at that update, as TRM votes); a task scores the fraction of its test inputs one of the k
    best candidates solves."""
    from ..tasks import attempts_from_predictions, solutions_from_data, vote_pass_at_k

    snaps = [int(u) for u in traj["snapshot_updates"]]
    if update not in snaps:
        raise ValueError(f"update {update} has no prediction snapshot (snapshots: {snaps})")
    pred = traj["pred_snapshots"][snaps.index(update)]
    conf = 1 / (1 + np.exp(-traj["q_halt"][row(traj, update)].astype(np.float64)))
    attempts = attempts_from_predictions(test_data, pred, conf, run="eval")
    return vote_pass_at_k(attempts, solutions_from_data(test_data), k=k)


def arc_pass_by_depth(traj: dict, test_data, ks: tuple[int, ...] = (1, 2)) -> dict[int, dict]:
    """``{update: {k: PassAtK}}`` at every prediction snapshot of ``traj`` (:func:`arc_vote`)."""
    return {int(u): {k: arc_vote(traj, test_data, int(u), k) for k in ks} for u in traj["snapshot_updates"]}


# ------------------------------------------------------------------------------------------ training dynamics

CONNECTION_KEYS = ("q_norm", "beta", "score_mean", "score_sd_cells", "score_sd_boards", "at_clip", "gamma")


def connection_dynamics(records: list[dict], axis: str = "outer") -> dict[str, np.ndarray]:
    """The learned connection of one axis against training steps, from a run's training log (the lines of
    ``metrics.jsonl``): ``{"step": [N], key: [N] for each of CONNECTION_KEYS and "score_wrong_corr"}``,
    NaN where a line lacks the key (a log written before these statistics, or a connection that is not
    InfiLoop: then every value is NaN)."""
    def col(key):
        return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records], np.float64)

    out = {"step": np.array([int(r["step"]) for r in records], np.int64)}
    for k in (*CONNECTION_KEYS, "score_wrong_corr"):
        out[k] = col(f"{axis}_{k}")
    return out
