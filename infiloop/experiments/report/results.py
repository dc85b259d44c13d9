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
    """Every claim of the recorded summaries, the profiles in their defining order, notebooks in report order (a
    claim recorded before issue 49's rule keeps its verdict, marked: :func:`verdict_cell`)."""
    root = RECORDED if recorded is None else Path(recorded)
    claims = []
    for profile in profiles.PROFILES:
        folder = root / profile
        by_name = {p.stem: p for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
        for name in [n for n in paper.NOTEBOOKS if n in by_name] + sorted(set(by_name) - set(paper.NOTEBOOKS)):
            s = json.loads(by_name[name].read_text(encoding="utf-8"))
            for c in s.get("claims", []):
                claims.append({**c, "profile": s.get("profile", profile), "notebook": name,
                               "created": s.get("created", "")[:10]})
    return claims


EARLIER = "†"
EARLIER_NOTE = (f"{EARLIER} decided by the earlier rule (a two-level percentile bootstrap, the verdict by the side of "
                "zero; with three seeds spread as search's it covered 84–89 % in the simulation of "
                "docs/statistics.md): the record keeps no per-puzzle data, so it waits for a re-run of its notebook "
                "with the runs at hand (docs/statistics.md, 'Re-deciding a recorded run').")


def _cell(text) -> str:
    return " ".join(str(text or "–").split()).replace("|", "\\|")


def verdict_cell(c: dict) -> str:
    """The verdict as the table shows it: marked ¹ when it rests on one trained model, † when decided by the
    earlier rule."""
    v = verdict(c)
    if "rule" not in c and v in ("agrees", "differs", "undecided"):
        return f"{v}{ONE_MODEL if one_model(c) else ''} (earlier rule{EARLIER})"
    return v + (ONE_MODEL if one_model(c) else "")


def render_table(recorded: Path | None = None, only: tuple[str, ...] | None = None) -> str:
    """The markdown table: each claim the recorded runs (of the profiles ``only``, default all) checked, the
    paper's number, ours, the effect beside the paper's, the verdict; then the counts and the rule."""
    from ...analysis.intervals import MULTIPLICITY, RULE

    claims = [c for c in recorded_claims(recorded) if only is None or c["profile"] in only]
    if not claims:
        return "(no recorded results: `python -m infiloop results --record PROFILE`)"
    lines = ["| notebook | the paper's claim | decided at | the paper | ours | effect: ours [95 % interval]; the "
             "paper's | verdict |", "|---|---|---|---|---|---|---|"]
    for c in claims:
        effect = effect_cell(c) or ("recorded without its effect" if "rule" not in c and verdict(c) != "not measured"
                                    else "")
        lines.append(f"| {c['notebook'][:2]} | {_cell(c.get('claim'))} | {_cell(paper.claim_depth(c.get('id', '')))} "
                     f"| {_cell(c.get('paper'))} "
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
