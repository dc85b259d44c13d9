"""The README's results table, rendered from recorded notebook summaries.

A finished run's summaries (``results/<profile>/summaries/*.json``, one per notebook) are not committed; the
ones behind the README's numbers are recorded under ``docs/results/<profile>/`` (``--record PROFILE``), and the
table between the README's ``results`` markers is rendered from those (``--render``). A test renders it again and
fails when the README is stale, so a number in the table is always one a recorded run measured.

The README shows the headline profile (``HEADLINE``: three seeds on puzzles that need search); every recorded
profile's own table is kept in ``docs/results.md`` between the markers ``<!-- results PROFILE: start -->`` and
``<!-- results PROFILE: end -->``. One command refreshes every block:

    python -m infiloop results --record search   # record search's summaries, then render README.md and docs/results.md
    python -m infiloop results                   # only render from the recorded ones
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ... import paths
from ...analysis import paper
from ...errors import DataError, UsageError
from ...io import atomic_write_text, fill_block
from ..settings import profiles
from .verdicts import MARK, ONE_MODEL, ONE_MODEL_NOTE, effect_cell, one_model, verdict

RECORDED = paths.DOCS / "results"
START, END = "<!-- results: start -->", "<!-- results: end -->"
HEADLINE = ("search",)  # the README's profiles
PAGES = (paths.ROOT / "README.md", paths.DOCS / "results.md")  # the files whose blocks ``render`` fills


def markers(profile: str | None = None) -> tuple[str, str]:
    """The markers of the README's block (``None``: the headline profiles) or of one profile's block."""
    if profile is None:
        return START, END
    return f"<!-- results {profile}: start -->", f"<!-- results {profile}: end -->"


def record(profile: str, results: Path | None = None, recorded: Path | None = None) -> list[Path]:
    """Copy ``profile``'s summaries from the results folder into ``docs/results/<profile>/`` (replacing the
    recorded ones, so that a notebook the run dropped does not linger)."""
    profiles.check(profile)
    src = (paths.RESULTS if results is None else Path(results)) / profile / "summaries"
    files = sorted(src.glob("*.json"))
    if not files:
        raise DataError(f"{src}: no summaries to record (run ./reproduce.sh --profile {profile} first)")
    dest = (RECORDED if recorded is None else Path(recorded)) / profile
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.json"):
        if old.name not in {f.name for f in files}:
            old.unlink()
    out = []
    for f in files:
        json.loads(f.read_text(encoding="utf-8"))  # a damaged summary is refused before anything is replaced
        out.append(dest / f.name)
        atomic_write_text(out[-1], f.read_text(encoding="utf-8"))
    return out


def recorded_claims(recorded: Path | None = None) -> list[dict]:
    """Every claim of the recorded summaries, the profiles in their defining order, notebooks in report order; a
    claim recorded before issue 49's rule is re-decided where the record fixes the data it needs (:func:`redecide`)."""
    root = RECORDED if recorded is None else Path(recorded)
    claims = []
    for profile in profiles.PROFILES:
        folder = root / profile
        by_name = {p.stem: p for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
        for name in [n for n in paper.NOTEBOOKS if n in by_name] + sorted(set(by_name) - set(paper.NOTEBOOKS)):
            s = json.loads(by_name[name].read_text(encoding="utf-8"))
            for c in redecide(s):
                claims.append({**c, "profile": s.get("profile", profile), "notebook": name,
                               "created": s.get("created", "")[:10]})
    return claims


REDECIDED = "‡"
REDECIDED_NOTE = (f"{REDECIDED} re-decided by the rule from the recorded retention table: every model kept every "
                  "solved puzzle at every ε, which fixes every per-puzzle term the analysis reads (the per-seed counts "
                  "are recorded; one lost puzzle would show as at most 99.9 %).")
EARLIER = "†"
EARLIER_NOTE = (f"{EARLIER} decided by the earlier rule (a two-level percentile bootstrap, the verdict by the side of "
                "zero; with three seeds spread as search's it covered 84–89 % in the simulation of "
                "docs/statistics.md): the record keeps no per-puzzle data, so it waits for a re-run of its notebook "
                "with the runs at hand (docs/statistics.md, 'Re-deciding a recorded run').")


def redecide(summary: dict) -> list[dict]:
    """The summary's claims; those of notebook 04 recorded before issue 49 are decided again by the current
    analysis (``claims.perturbation_claims``) where the recorded retention table fixes their data exactly: every cell
    "100.0 % [100.0, 100.0]" with at most 2,000 solved puzzles over the seeds of a model, so that a single lost puzzle
    would have shown. Every other claim is returned as recorded."""
    recorded = list(summary.get("claims", []))
    if summary.get("notebook") != "04_perturbation" or any("rule" in c for c in recorded):
        return recorded
    terms = _retention_terms(summary)
    if terms is None:
        return recorded
    from ...analysis import claims as effects
    from ...analysis.plotting import LABELS

    fresh = {c["id"]: {**c, "redecided": REDECIDED_NOTE} for c in effects.perturbation_claims(*terms, LABELS)}
    return [fresh.get(c.get("id"), c) for c in recorded]


def _retention_terms(summary: dict):
    """(terms, eps) as notebook 04 builds them, rebuilt from a recorded retention table that fixes them, or None."""
    import re

    import numpy as np

    from ...analysis.plotting import LABELS

    table = next((t for t in summary.get("tables", []) if t.get("title") == "Retention of solved puzzles"), None)
    size = re.search(r"\((\d+) puzzles", summary.get("text", ""))
    if table is None or size is None:
        return None
    eps = tuple(float(c.split("=")[1]) for c in table["columns"][2:])
    recipe = {label: key for key, label in LABELS.items()}
    terms = {}
    for row in table["rows"]:
        counts = [int(x) for x in str(row[1]).split(" / ")]
        if row[0] not in recipe or any(cell != "100.0 % [100.0, 100.0]" for cell in row[2:]) \
                or len(counts) * max(counts) > 2000:
            return None
        solved = [np.arange(int(size.group(1))) < n for n in counts]  # which puzzles does not matter: none was lost
        terms[recipe[row[0]]] = [[(f.copy(), f.copy()) for _ in eps] for f in solved]
    return (terms, eps) if {"carry_last", "infiloop"} <= set(terms) else None


def _cell(text) -> str:
    return " ".join(str(text or "–").split()).replace("|", "\\|")


def verdict_cell(c: dict) -> str:
    """The verdict as the table shows it: marked ¹ when it rests on one trained model, ‡ when re-decided from the
    record, † when decided by the earlier rule."""
    v = verdict(c)
    if "rule" not in c and v in ("agrees", "differs", "undecided"):
        return f"{v}{ONE_MODEL if one_model(c) else ''} (earlier rule{EARLIER})"
    return v + (ONE_MODEL if one_model(c) else "") + (REDECIDED if c.get("redecided") else "")


def render_table(recorded: Path | None = None, only: tuple[str, ...] | None = None) -> str:
    """The markdown table: each claim the recorded runs (of the profiles ``only``, default all) checked, the
    paper's number, ours, the effect beside the paper's, the verdict; then the counts and the rule."""
    from ...analysis.intervals import MULTIPLICITY, RULE

    claims = [c for c in recorded_claims(recorded) if only is None or c["profile"] in only]
    if not claims:
        return "(no recorded results: `python -m infiloop results --record PROFILE`)"
    lines = ["| notebook | the paper's claim | the paper | ours | effect: ours [95 % interval]; the paper's "
             "| verdict |", "|---|---|---|---|---|---|"]
    for c in claims:
        effect = effect_cell(c) or ("recorded without its effect" if "rule" not in c and verdict(c) != "not measured"
                                    else "")
        lines.append(f"| {c['notebook'][:2]} | {_cell(c.get('claim'))} | {_cell(c.get('paper'))} "
                     f"| {_cell(c.get('ours'))} | {_cell(effect)} | {verdict_cell(c)} |")
    runs = sorted({(c["profile"], c["created"]) for c in claims})
    current = [c for c in claims if "rule" in c or verdict(c) not in ("agrees", "differs", "undecided")]
    earlier = [c for c in claims if c not in current]
    counts = ", ".join(f"{sum(verdict(c) == v for c in current)} {v}" for v in MARK)
    lines += ["", "Measured at " + ", ".join(f"`{p}` ({d})" for p, d in runs) + f"; by the rule below: {counts}"
              + (f"; by the earlier rule{EARLIER}: " + ", ".join(f"{sum(verdict(c) == v for c in earlier)} {v}"
                                                          for v in ("agrees", "differs", "undecided"))
                 if earlier else "") + ".", "",
              f"The rule: {RULE}", ""]
    notes = [n for n, used in ((ONE_MODEL_NOTE, any(one_model(c) for c in claims)),
                               (REDECIDED_NOTE, any(c.get("redecided") for c in claims)),
                               (EARLIER_NOTE, bool(earlier))) if used]
    lines += [" ".join([*notes, MULTIPLICITY])]
    return "\n".join(lines)


def render_readme(readme: Path, recorded: Path | None = None) -> Path:
    """Fill the README's results block (the headline profiles) from the recorded summaries."""
    text = Path(readme).read_text(encoding="utf-8")
    filled = fill_block(text, START, END, f"{START}\n{render_table(recorded, HEADLINE)}\n{END}")
    if filled is None:
        raise UsageError(f"{readme}: no '{START}' ... '{END}' block to fill")
    atomic_write_text(Path(readme), filled)
    return Path(readme)


def render_blocks(text: str, recorded: Path | None = None) -> str:
    """``text`` with each block it holds filled: the README's (``markers()``: the headline profiles) and every
    per-profile block (``markers(profile)``: that profile's table)."""
    for name, only in ((None, HEADLINE), *((n, (n,)) for n in profiles.PROFILES)):
        start, end = markers(name)
        text = fill_block(text, start, end, f"{start}\n{render_table(recorded, only)}\n{end}") or text
    return text


def render(pages=PAGES, recorded: Path | None = None) -> list[Path]:
    """Fill every results block of ``pages``; the files that changed."""
    changed = []
    for page in map(Path, pages):
        before = page.read_text(encoding="utf-8")
        text = render_blocks(before, recorded)
        if text != before:
            atomic_write_text(page, text)
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infiloop results", description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", metavar="PROFILE", default=None,
                    help="first copy results/PROFILE/summaries into docs/results/PROFILE")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.record:
        for p in record(args.record):
            print(f"recorded {p}")
    changed = render()
    print(f"wrote {', '.join(map(str, changed))}" if changed else "README.md and docs/results.md were current")
    return 0
