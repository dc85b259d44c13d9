"""What notebook 02 concludes from its depth curves: the paper's contrast (Fig. 1a: carry-last falls from its peak,
InfiLoop keeps rising) in one sentence, decided by the intervals of the falls after the held-out peaks."""

from __future__ import annotations

from .intervals import Interval, verdict


def contrast_sentence(task: str, drop: dict[str, Interval], lost: dict[str, Interval],
                      change: dict[str, Interval]) -> str:
    """The paper's contrast, in bold, from each connection's fall after its held-out peak (``claims.held_out_fall``;
    a fall when its interval lies above zero), carry-last's share of solved puzzles lost by the end and its state
    change per update after the solve: appears (carry-last falls, InfiLoop does not), both fall, or does not appear."""
    falls = {r: verdict(drop[r]) is True for r in ("carry_last", "infiloop")}
    cl, il = drop["carry_last"].points(), drop["infiloop"].points()
    if falls["carry_last"] and not falls["infiloop"]:
        return (f"**The paper's contrast appears on {task} at this profile:** carry-last falls from its peak by {cl} "
                f"and InfiLoop does not ({il}).")
    if falls["carry_last"]:
        return (f"**Both connections fall from their peak** (carry-last {cl}, InfiLoop {il}): the paper's contrast, "
                "a fall for carry-last only, does not appear.")
    return (f"**The paper's contrast does not appear on {task} at this profile:** carry-last does not fall from its "
            f"peak by more than sampling noise (fall after the held-out peak {cl}); it loses "
            f"{lost['carry_last'].pct()} of its solved puzzles and its state changes by {change['carry_last'].pct(3)} "
            "per update after the solve, where the paper's TRM loses 15–20 % and changes by about 10 %.")
