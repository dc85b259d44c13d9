"""One qualitative claim of the paper (``paper.CLAIMS``): its words, its number, who checks it and the effect that
decides it (``infiloop/analysis/intervals.py``, ``RULE``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """A qualitative claim of the paper, its number as the paper gives it, who checks it, and the effect that
    decides it (``infiloop/analysis/intervals.py``, ``RULE``).

    ``effect``: what the notebook measures, in words; ``paper_effect``: the paper's value of that effect in the same
    units (``unit``; accuracies in points, i.e. the fraction × ``scale`` = 100), signed (negative: the paper's effect
    is a fall), None where the paper gives no number; ``basis``: how it follows from the paper's numbers. An
    ``absence`` claim says that something does not happen: its effect is what would happen (a loss) and
    ``paper_effect`` the contrast the paper draws (TRM's loss). ``contrast``: where the paper's claim sets InfiLoop's
    behaviour against TRM's, that contrast in words (InfiLoop − carry-last, oriented as the paper's), its value in
    the paper (``contrast_effect``) and how it follows (``contrast_basis``); its verdict answers the claim's sentence
    and leads (``contrasts.CONTRASTS`` computes it). ``source``: for the looped-LM study's claims of
    notebook 08, the study summary's words that the claim's quantity, direction and depths were checked against, and
    how the depths map onto this grid's."""

    id: str
    claim: str
    paper: str
    notebook: str
    effect: str = ""
    paper_effect: float | None = None
    basis: str = ""
    unit: str = " points"
    scale: float = 100.0
    absence: bool = False
    source: str = ""
    contrast: str = ""
    contrast_effect: float | None = None
    contrast_basis: str = ""
