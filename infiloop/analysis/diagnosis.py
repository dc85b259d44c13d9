"""The paper's diagnosis of carry-last, claim by claim: what changes between two prediction snapshots, and what
happens to a puzzle after its first solve.

The paper (its carry-last diagnostics, beside Fig. 1; ``paper.CARRY_LAST_DIAGNOSTICS``) measures between outer
updates 36 and 72 of models trained to 36 (docs/model.md): TRM changes 77.0 predictions per puzzle and its wrong
cells grow by 0.21, InfiLoop changes 24.0 and its wrong cells fall by 1.25; of the blank cells both had right at 36,
TRM turns 20.9 % wrong at least once, InfiLoop 2.4 %; aligned to the first solve, TRM's state keeps changing (about
3 % per update at its lowest, back to about 10 %), InfiLoop's settles (0.3 %); TRM loses 19.7 % of its solved
puzzles within 36 updates, InfiLoop none. The companion's snapshots are at a profile's training depth and twice it
(``Run.standard_snapshots``: the paper's 36 and 72), the window after the solve is 36 updates as the paper's.

Every function takes recorded trajectories (``infiloop/evaluation.py``: ``changes``, ``flipped``,
``pred_snapshots``, ``wrong_cells``, ``correct``, ``first_solve``, ``state_change`` at every update) and returns
per-puzzle (numerator, denominator) terms, so that each effect is paired by puzzle and has an interval over seeds
and puzzles (``intervals.interval``); :func:`claims` turns them into the typed claims ``diagnosis.*`` of
``paper.CLAIMS``, and :func:`split_table` shows each quantity for the puzzles solved and unsolved at the first
snapshot.
"""

from __future__ import annotations

import numpy as np

from . import claims as effects
from . import intervals
from .intervals import Interval, Ratio
from .trajectories import row

WINDOW = 36  # updates after the first solve (the paper's "within 36 updates")


def snapshots(traj: dict) -> tuple[int, int]:
    """The two snapshot updates a < b of a depth trajectory."""
    if len(traj.get("snapshot_updates", ())) < 2:
        raise ValueError("the diagnosis needs a trajectory with two prediction snapshots (notebook 02's depth "
                         "evaluation records them at the training depth and twice it)")
    a, b = (int(u) for u in traj["snapshot_updates"][:2])
    return a, b


def solved_at_first_snapshot(traj: dict) -> np.ndarray:
    """[P]: the puzzle is right at the first snapshot."""
    return traj["correct"][row(traj, snapshots(traj)[0])].astype(bool)


def _masked(values: np.ndarray, mask: np.ndarray | None) -> Ratio:
    values = np.asarray(values, np.float64)
    m = np.ones(values.shape, np.float64) if mask is None else np.asarray(mask, np.float64)
    return values * m, m


def changed_terms(traj: dict, mask: np.ndarray | None = None) -> Ratio:
    """Predictions changed per puzzle from update a to b, summed over the updates (a cell that flips away and back
    counts twice: the paper's measure)."""
    return _masked(traj["changes"], mask)


def wrong_cells_terms(traj: dict, update: int, mask: np.ndarray | None = None) -> Ratio:
    """Wrong cells per puzzle at ``update``."""
    return _masked(traj["wrong_cells"][row(traj, update)], mask)


def wrong_change_terms(traj: dict, mask: np.ndarray | None = None) -> tuple[Ratio, Ratio]:
    """(wrong cells at b, wrong cells at a): their difference of ratios is the change in wrong cells per puzzle."""
    a, b = snapshots(traj)
    return wrong_cells_terms(traj, b, mask), wrong_cells_terms(traj, a, mask)


def flip_terms(pair: tuple[dict, dict], to_fill: np.ndarray, labels: np.ndarray) -> tuple[Ratio, Ratio]:
    """Of the cells to fill (Sudoku's blanks) that both models had right at the first snapshot, per puzzle: those
    each model turned wrong at least once before the second snapshot (numerator) and how many there were
    (denominator, the same for both: the effect is paired by cell)."""
    right = np.asarray(to_fill, bool).copy()
    for t in pair:
        right &= t["pred_snapshots"][0] == labels
    den = right.sum(1).astype(np.float64)
    return tuple(((t["flipped"] & right).sum(1).astype(np.float64), den) for t in pair)


def after_solve(traj: dict, window: int = WINDOW) -> dict[str, np.ndarray]:
    """Per puzzle, the ``window`` updates after its first solve: ``room`` (solved, and ``window`` recorded updates
    follow the solve), ``lost`` (wrong at least once in them), ``state_change`` (mean relative change of the answer
    state per update over them)."""
    ups, fs = traj["updates"], traj["first_solve"]
    if len(ups) > 1 and np.any(np.diff(ups) != 1):
        raise ValueError("the diagnosis after the solve needs a trajectory recorded at every update (every=1)")
    room = (fs > 0) & (fs + window <= ups[-1])
    rows = (fs - ups[0])[None, :] + np.arange(1, window + 1)[:, None]  # [window, P]
    rows = np.where(room[None, :], rows, 0)
    cols = np.arange(len(fs))[None, :]
    lost = room & ~traj["correct"][rows, cols].all(0)
    change = np.where(room, traj["state_change"].astype(np.float64)[rows, cols].mean(0), 0.0)
    return {"room": room, "lost": lost, "state_change": change}


def _interval(per_seed: list[list[Ratio]], combine=intervals._first, bounds=None) -> Interval:
    return intervals.interval(per_seed, combine, vectorized=True, bounds=bounds)


def _effects(pairs: list[tuple[dict, dict]], to_fill, labels, window: int) -> dict[str, Interval]:
    """The effect of each ``diagnosis.*`` claim from ``pairs[s]`` = (carry-last's, InfiLoop's) trajectory of seed s."""
    diff = effects.ratio_difference
    rooms = [(after_solve(cl, window), after_solve(il, window)) for cl, il in pairs]
    both = [c["room"] & i["room"] for c, i in rooms]
    moved = [(_masked(c["state_change"], m), _masked(i["state_change"], m)) for (c, i), m in zip(rooms, both)]
    return {
        "diagnosis.carry_last_changes_more": diff([(changed_terms(cl), changed_terms(il)) for cl, il in pairs]),
        "diagnosis.carry_last_wrong_cells_grow": diff([wrong_change_terms(cl) for cl, _ in pairs]),
        "diagnosis.infiloop_wrong_cells_fall": diff([wrong_change_terms(il)[::-1] for _, il in pairs]),
        "diagnosis.carry_last_flips_right_cells": diff([flip_terms(p, to_fill, labels) for p in pairs],
                                                    bounds=(-1.0, 1.0)),  # a keyword: not one entry per seed
        "diagnosis.carry_last_state_moves_after_solve": diff(moved),
        "diagnosis.carry_last_loses_after_solve": effects.proportion([c["lost"] for c, _ in rooms],
                                                                     [c["room"] for c, _ in rooms]),
        "diagnosis.infiloop_keeps_after_solve": effects.proportion([i["lost"] for _, i in rooms],
                                                                   [i["room"] for _, i in rooms]),
    }


def claims(pairs: list[tuple[dict, dict]], to_fill: np.ndarray, labels: np.ndarray, window: int = WINDOW,
           claim=effects.claim_dict) -> list[dict]:
    """The seven ``diagnosis.*`` claims, each decided by the interval of its effect (``claims.claim_dict``, or a
    notebook's ``claim``): ``pairs[s]`` = (carry-last's, InfiLoop's) depth trajectory of seed s on the same test
    puzzles; ``to_fill``, ``labels``: [P, S] the cells to fill and the solutions. InfiLoop's "loses none" is untestable
    unless some model's loss after the solve lies above half the paper's TRM's (``claims.untestable_unless_lost``).
    The contrasts of two claims (InfiLoop against carry-last: ``paper.Claim.contrast``) are added from these claims'
    data when the summary is written (``contrasts.with_contrasts``)."""
    a, b = snapshots(pairs[0][0])
    iv = _effects(pairs, to_fill, labels, window)
    own = {k: {"changed": intervals.over_seeds([p[k] for p in pairs], changed_terms,
                                                   bounds=intervals.NONNEGATIVE),
               "wrong": effects.ratio_difference([wrong_change_terms(p[k]) for p in pairs])} for k in (0, 1)}
    flips = [_interval([[flip_terms(p, to_fill, labels)[k]] for p in pairs], bounds=intervals.SHARE) for k in (0, 1)]
    rooms = [[after_solve(t, window) for t in p] for p in pairs]
    moved = [_interval([[_masked(r[k]["state_change"], r[0]["room"] & r[1]["room"])] for r in rooms],
                       bounds=intervals.NONNEGATIVE) for k in (0, 1)]
    span = f"between updates {a} and {b}"
    text = {
        "diagnosis.carry_last_changes_more": f"predictions changed per puzzle {span}: carry-last "
        f"{own[0]['changed'].num('.2f')}, InfiLoop {own[1]['changed'].num('.2f')}",
        "diagnosis.carry_last_wrong_cells_grow": f"carry-last's wrong cells per puzzle {span}: "
        f"{own[0]['wrong'].num('+.2f')}",
        "diagnosis.infiloop_wrong_cells_fall": f"InfiLoop's wrong cells per puzzle {span}: "
        f"{own[1]['wrong'].num('+.2f')}",
        "diagnosis.carry_last_flips_right_cells": f"of the blank cells both had right at {a}, turned wrong at least "
        f"once by {b}: carry-last {flips[0].pct()}, InfiLoop {flips[1].pct()}",
        "diagnosis.carry_last_state_moves_after_solve": f"state change per update in the {window} updates after the "
        f"first solve (puzzles both solved): carry-last {moved[0].pct(2)}, InfiLoop {moved[1].pct(2)}",
        "diagnosis.carry_last_loses_after_solve": f"carry-last's solved puzzles wrong at least once within {window} "
        f"updates: {iv['diagnosis.carry_last_loses_after_solve'].pct()}",
        "diagnosis.infiloop_keeps_after_solve": f"InfiLoop's solved puzzles wrong at least once within {window} "
        f"updates: {iv['diagnosis.infiloop_keeps_after_solve'].pct()}",
    }
    digits = {"diagnosis.carry_last_state_moves_after_solve": 2}
    # InfiLoop keeping its solved puzzles says nothing where no model lost them as the paper's TRM does (notebook 04)
    untestable = {"diagnosis.infiloop_keeps_after_solve": effects.untestable_unless_lost(
        {"carry-last": iv["diagnosis.carry_last_loses_after_solve"],
         "InfiLoop": iv["diagnosis.infiloop_keeps_after_solve"]}, f"the {window} updates after the first solve",
        margin=effects.margin("diagnosis.infiloop_keeps_after_solve"))}
    return [claim(cid, text[cid], effect=effect, digits=digits.get(cid, 1), untestable=untestable.get(cid, ""))
            for cid, effect in iv.items()]


SPLIT_COLUMNS = ["model", "puzzles at the first snapshot", "puzzles (per seed)", "predictions changed per puzzle",
                 "wrong cells per puzzle, second − first snapshot"]


def split_table(by_model: dict[str, list[dict]], labels: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """Predictions changed and the change in wrong cells per puzzle, for each model's puzzles solved and unsolved at
    the first snapshot (``by_model[r]``: its trajectories, one per seed; ``labels``: the models' names), with their
    intervals over seeds and puzzles. The paper gives both over all puzzles only."""
    rows = []
    for r, trajs in by_model.items():
        solved = [solved_at_first_snapshot(t) for t in trajs]
        for name, masks in (("solved", solved), ("unsolved", [~s for s in solved]), ("all", [None] * len(trajs))):
            n = " / ".join(str(int(len(t["changes"]) if m is None else m.sum())) for t, m in zip(trajs, masks))
            changed = _interval([[changed_terms(t, m)] for t, m in zip(trajs, masks)], bounds=intervals.NONNEGATIVE)
            wrong = effects.ratio_difference([wrong_change_terms(t, m) for t, m in zip(trajs, masks)])
            rows.append([labels[r], name, n, changed.num(".2f"), wrong.num("+.2f")])
    return SPLIT_COLUMNS, rows


def summary_lines(decided: list[dict]) -> list[str]:
    """One line per decided claim (:func:`claims`): the claim, its verdict, what was measured and the paper's."""
    out = []
    for c in decided:
        label = effects.label(c)
        out.append(f"{c['claim'][0].upper()}{c['claim'][1:]} ({label}): {c['ours']} (the paper: {c['paper']}).")
    return out
