"""A claim's verdict as the report and the README's results table show it: its word and mark (:func:`verdict`,
:data:`MARK`), the effect's cell (:func:`effect_cell`) and the mark of a verdict resting on one trained model per
connection (:data:`ONE_MODEL`).
"""

from __future__ import annotations

MARK = {"agrees": ("yes", "✓"), "differs": ("no", "✗"), "undecided": ("undecided", "?"),
        "untestable": ("na", "⊘"), "not measured": ("na", "–")}  # a verdict's CSS class and mark
ONE_MODEL = "¹"  # marks a verdict that rests on one trained model per connection (one seed)
ONE_MODEL_NOTE = (f"{ONE_MODEL} one trained model per connection: the interval covers the test puzzles, not the "
                  "variation between training runs (the coverage simulation, docs/statistics.md: with one seed and a "
                  "seed spread like search's, a 95 % interval covers 57–70 % of the time).")


def verdict(c: dict) -> str:
    """agrees, differs, undecided (measured, neither: ``intervals.RULE``), untestable (the claim cannot be tested at
    this scale; why: ``c["untestable"]``), not measured."""
    if c.get("untestable"):
        return "untestable"
    if c.get("agrees") is True:
        return "agrees"
    if c.get("agrees") is False:
        return "differs"
    return "not measured" if c.get("unreported") or not c.get("ours") or not _measured(c) else "undecided"


def _measured(c: dict) -> bool:
    """A claim with an effect, or an earlier summary's claim whose ``ours`` says it was measured."""
    return "effect" in c or not str(c.get("ours", "")).startswith("not ")


def one_model(c: dict) -> bool:
    """The claim's verdict rests on one trained model per connection: its effect's interval has one seed (in a
    summary written before issue 49, its note says "1 seed(s)")."""
    seeds = c.get("seeds", 1 if "1 seed(s)" in f"{c.get('note', '')} {c.get('ours', '')}" else None)
    return seeds == 1 and verdict(c) in ("agrees", "differs", "undecided")


def effect_cell(c: dict) -> str:
    """The claim's effect beside the paper's (``claims.effect_text``), or "" for a claim recorded without one."""
    from ...analysis.claims import effect_text

    return effect_text(c["effect"]) if isinstance(c.get("effect"), dict) else ""
