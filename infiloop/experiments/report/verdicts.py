"""A claim's verdict as the report and the README's results table show it: its word and mark (:func:`verdict`,
:data:`MARK`), the effect's cell (:func:`effect_cell`) and the mark of a verdict resting on one trained model per
connection (:data:`ONE_MODEL`).
"""

from __future__ import annotations

MARK = {"agrees": ("yes", "✓"), "smaller": ("smaller", "↓"), "differs": ("no", "✗"), "undecided": ("undecided", "?"),
        "untestable": ("na", "⊘"), "not measured": ("na", "–")}  # a verdict's CSS class and mark
ONE_MODEL = "¹"  # marks a verdict that rests on one trained model per connection (one seed)
ONE_MODEL_NOTE = (f"{ONE_MODEL} one trained model per connection: the interval covers the test puzzles, not the "
                  "variation between training runs (the coverage simulation, docs/statistics.md: with one seed and a "
                  "seed spread like search's, a 95 % interval covers 57–70 % of the time).")


MEASURED = ("agrees", "smaller", "differs", "undecided")  # the verdicts of a measured claim (``intervals.RULE``)


def verdict(c: dict) -> str:
    """agrees, smaller, differs, undecided (measured: ``intervals.RULE``; a claim with a contrast reads its contrast's,
    ``c["verdict"]``), untestable (the claim cannot be tested at this scale; why: ``c["untestable"]``), not
    measured."""
    if c.get("verdict") in MEASURED + ("untestable",):
        return c["verdict"]
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
    summary written before claims kept their effect, rule version 1, its note says "1 seed(s)")."""
    seeds = c.get("seeds", 1 if "1 seed(s)" in f"{c.get('note', '')} {c.get('ours', '')}" else None)
    return seeds == 1 and verdict(c) in MEASURED


def effect_cell(c: dict) -> str:
    """The claim's effect beside the paper's (``claims.effect_text``), or "" for a claim recorded without one. A claim
    with a contrast shows first the effect whose verdict leads (the contrast, or an absence claim's own effect), then
    the other with its verdict; a fall after a held-out peak shows the earlier analysis (one peak for every seed)."""
    from ...analysis import paper
    from ...analysis.claims import effect_text

    if not isinstance(c.get("effect"), dict):
        return ""
    own = effect_text(c["effect"])
    earlier = c["effect"].get("pooled_peak")
    if earlier:
        e = {**c["effect"], **earlier}
        own += f" (the earlier analysis, one peak for every seed: {effect_text(e).split(';')[0]}, {earlier['verdict']})"
    if isinstance(c.get("contrast"), dict):
        other = f"against carry-last: {effect_text(c['contrast']['effect'])}"
        claim = paper.CLAIMS_BY_ID.get(c.get("id", ""))
        if claim is not None and claim.absence:
            return f"{own}; {other} ({c['contrast']['verdict']})"
        return f"{other}; InfiLoop alone: {own} ({c.get('own_verdict', '?')})"
    return own
