"""The README's results table, rendered from recorded notebook summaries.

A finished run's summaries (``results/<profile>/summaries/*.json``, one per notebook) are not committed; the
ones behind the README's numbers are recorded under ``docs/results/<profile>/`` (``--record PROFILE``), and the
table between the README's ``results`` markers is rendered from those (``--render``). A test renders it again and
fails when the README is stale, so a number in the table is always one a recorded run measured.

The README shows the headline profile (``HEADLINE``: the seeds recorded on puzzles that need search) and, under its
table, the headline in words (``headline.py``, which also fills docs/results.md's table by seed); every recorded
profile's own table is kept in ``docs/results.md`` between the markers ``<!-- results PROFILE: start -->`` and
``<!-- results PROFILE: end -->``. One command refreshes every block:

    python -m infiloop results --record search   # record search's summaries, then render README.md and docs/results.md
    python -m infiloop results                   # only render from the recorded ones
    python -m infiloop results --compare quick   # a finished quick run against its record
    python -m infiloop results --fingerprints smoke   # this machine's weights against docs/results/fingerprints.json

``--record`` adds a run's seeds to the record (``records.merge``); ``--redecide`` decides every recorded claim again
from its data by today's rule; ``--compare`` prints what differs from the record (``compare.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ... import paths
from ...analysis import claims, contrasts, paper
from ...errors import DataError, UsageError
from ...io import atomic_write_text, fill_block
from ..settings import profiles
from . import compare, fingerprints, headline, records, site
from .records import RECORDED
from .verdicts import MARK, MEASURED, ONE_MODEL, ONE_MODEL_NOTE, effect_cell, one_model, verdict

START, END = "<!-- results: start -->", "<!-- results: end -->"
HEADLINE = ("search",)  # the README's profiles
PAGES = (paths.ROOT / "README.md", paths.DOCS / "results.md", paths.DOCS / "statistics.md")  # ``render`` fills these


def markers(profile: str | None = None) -> tuple[str, str]:
    """The markers of the README's block (``None``: the headline profiles) or of one profile's block."""
    if profile is None:
        return START, END
    return f"<!-- results {profile}: start -->", f"<!-- results {profile}: end -->"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise DataError(f"{path}: not a summary ({str(e).splitlines()[0]})") from None


def _write(path: Path, summary: dict) -> Path:
    return atomic_write_text(path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")


def record(profile: str, results: Path | None = None, recorded: Path | None = None, replace: bool = False,
           say=print) -> list[Path]:
    """Add ``profile``'s finished summaries (``results/<profile>/summaries``) to its record ``docs/results/<profile>/``:
    a notebook not recorded yet is copied; a recorded one gains the new seeds (``records.merge``: refused in one line
    when the run settings differ; a seed already recorded is kept as recorded). ``replace``: the record is replaced
    by the new summaries instead (a notebook the run dropped does not linger). Every summary is read, and every
    merge checked, before anything is written. The run's figures and executed notebooks are then kept for the
    site beside the record (``site.keep``: ``docs/site/<profile>/``)."""
    profiles.check(profile)
    src = (paths.RESULTS if results is None else Path(results)) / profile / "summaries"
    files = sorted(src.glob("*.json"))
    if not files:
        raise DataError(f"{src}: no summaries to record (run ./reproduce.sh --profile {profile} first)")
    dest = (RECORDED if recorded is None else Path(recorded)) / profile
    out = {}
    for f in files:
        new, old = _read(f), dest / f.name
        if replace or not old.is_file():
            out[old] = new
            continue
        merged, said = records.merge(_read(old), new)
        for line in said:
            say(line)
        out[old] = merged
    dest.mkdir(parents=True, exist_ok=True)
    if replace:
        for old in dest.glob("*.json"):
            if old not in out:
                old.unlink()
    written = [_write(path, summary) for path, summary in out.items()]
    run = (paths.RESULTS if results is None else Path(results)) / profile
    if any(run.glob("[0-9][0-9]_*.ipynb")):
        site.keep(profile, run.parent, run.parent.parent, site.beside(dest.parent))
    else:
        say(f"{run}: no executed notebooks, so the site keeps the figures it had (python -m infiloop results "
            "renders its pages from the record)")
    return written


def redecide(recorded: Path | None = None) -> list[Path]:
    """Decide every recorded claim that keeps its data again, by today's builders and rule (``claims.redecide``);
    the summaries whose claims changed are rewritten."""
    root = RECORDED if recorded is None else Path(recorded)
    changed = []
    for path in sorted(root.glob("*/*.json")):
        s = _read(path)
        again = contrasts.with_contrasts([claims.redecide(c) for c in s.get("claims", [])], s)
        if again != s.get("claims", []):
            changed.append(_write(path, {**s, "claims": again}))
    return changed


def recorded_claims(recorded: Path | None = None) -> list[dict]:
    """Every claim of the recorded summaries, the profiles in their defining order, notebooks in report order (a
    claim recorded under rule version 1, without its effect, keeps its verdict, marked: :func:`verdict_cell`)."""
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


def recorded_machines(recorded: Path | None = None) -> dict[str, dict[int, str]]:
    """For each recorded profile, each seed's machine: the CPU of the sitting that recorded it (``parts`` of its
    Table 1 summary, or the summary's own environment when it was recorded in one sitting)."""
    root = RECORDED if recorded is None else Path(recorded)
    out = {}
    for path in sorted(root.glob(f"*/{paper.NOTEBOOKS[0]}.json")):
        s = _read(path)
        out[path.parent.name] = {int(seed): str(part.get("environment", {}).get("cpu", "unknown"))
                                 for part in records.parts(s) for seed in part.get("seeds", [])}
    return out


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
    if "rule" not in c and v in MEASURED:
        return f"{v}{ONE_MODEL if one_model(c) else ''} (earlier rule{EARLIER})"
    return v + (ONE_MODEL if one_model(c) else "")


def render_table(recorded: Path | None = None, only: tuple[str, ...] | None = None) -> str:
    """The markdown table: each claim the recorded runs (of the profiles ``only``, default all) checked, the
    paper's number, ours, the effect beside the paper's, the verdict; then the counts and the rule."""
    from ...analysis.intervals import RULE, multiplicity

    claims = [c for c in recorded_claims(recorded) if only is None or c["profile"] in only]
    if not claims:
        return "(no recorded results: `python -m infiloop results --record PROFILE`)"
    lines = ["| notebook | the paper's claim | decided at | the paper | ours | seeds | effect: ours [95 % interval]; "
             "the paper's | verdict |", "|---|---|---|---|---|---|---|---|"]
    for c in claims:
        effect = effect_cell(c) or ("recorded without its effect" if "rule" not in c and verdict(c) != "not measured"
                                    else "")
        lines.append(f"| {c['notebook'][:2]} | {_cell(c.get('claim'))} | {_cell(paper.claim_depth(c.get('id', '')))} "
                     f"| {_cell(c.get('paper'))} "
                     f"| {_cell(c.get('ours'))} | {_cell(c.get('seeds'))} | {_cell(effect)} | {verdict_cell(c)} |")
    runs = sorted({(c["profile"], c["created"]) for c in claims})
    current = [c for c in claims if "rule" in c or verdict(c) not in MEASURED]
    earlier = [c for c in claims if c not in current]
    counts = ", ".join(f"{sum(verdict(c) == v for c in current)} {v}" for v in MARK)
    lines += ["", "Measured at " + ", ".join(f"`{p}` ({d})" for p, d in runs) + f"; by the rule below: {counts}"
              + (f"; by the earlier rule{EARLIER}: " + ", ".join(f"{sum(verdict(c) == v for c in earlier)} {v}"
                                                          for v in ("agrees", "differs", "undecided"))
                 if earlier else "") + ".", "",
              f"The rule: {RULE}", ""]
    notes = [n for n, used in ((ONE_MODEL_NOTE, any(one_model(c) for c in claims)),
                               (EARLIER_NOTE, bool(earlier))) if used]
    lines += [" ".join([*notes, multiplicity(len(claims))])]
    return "\n".join(lines)


CELL = 160  # the most characters a cell of the README's results table may hold


def _short(e: dict) -> str:
    """An effect record as ``+1.9 [+1.2, +2.6] points (the paper +6.24)``: ours, its interval and the paper's."""
    from ...analysis.claims import _show

    if e.get("value") is None:
        return "undefined"
    marks = [0.0] + ([] if e.get("paper_effect") is None else [e["threshold"]])
    show = (lambda x: _show(e["scale"] * x, e.get("digits", 1), e.get("signed", True), marks))
    paper_says = ("no number" if e.get("paper_effect") is None else f"TRM {e['paper_effect']:g}" if e.get("absence")
                  else f"{e['paper_effect']:+g}")
    return f"{show(e['value'])} [{show(e['lo'])}, {show(e['hi'])}]{e['unit']} (the paper {paper_says})"


def short_ours(c: dict) -> str:
    """A claim's "ours" for the README's table: the effect with its interval beside the paper's and the seeds; a claim
    with a contrast, the verdict that leads first and the other beside it with its verdict. The per-seed values are in
    docs/results.md and the report."""
    e = c.get("effect")
    if not isinstance(e, dict):
        return _cell(c.get("ours"))
    seeds = f"; {c.get('seeds')} seeds" if c.get("seeds") else ""
    con = c.get("contrast")
    if isinstance(con, dict):
        if paper.CLAIMS_BY_ID[c["id"]].absence:
            return (f"InfiLoop loses {_short(e)}; carry-last − InfiLoop {_short(con['effect'])} ({con['verdict']})"
                    f"{seeds}")
        return (f"InfiLoop − carry-last {_short(con['effect'])}; InfiLoop alone {_short(e)} ({c.get('own_verdict')})"
                f"{seeds}")
    return _short(e) + seeds


def render_compact(recorded: Path | None = None, only: tuple[str, ...] | None = None) -> str:
    """The README's results table: one short row per claim (the claim, the paper, ours with its interval and seeds,
    the verdict), no cell longer than :data:`CELL` characters; then the counts and the rule. Each profile's full table
    (each seed's effect, the effect beside the paper's, how each interval was computed) is :func:`render_table`'s."""
    from ...analysis.intervals import RULE, multiplicity

    claims = [c for c in recorded_claims(recorded) if only is None or c["profile"] in only]
    if not claims:
        return "(no recorded results: `python -m infiloop results --record PROFILE`)"
    lines = ["| notebook | the paper's claim | the paper | ours [95 % interval] | verdict |", "|---|---|---|---|---|"]
    for c in claims:
        cells = [c["notebook"][:2], _cell(c.get("claim")), _cell(c.get("paper")), _cell(short_ours(c)),
                 verdict_cell(c)]
        lines.append("| " + " | ".join(cells) + " |")
    runs = sorted({(c["profile"], c["created"]) for c in claims})
    counts = ", ".join(f"{sum(verdict(c) == v for c in claims)} {v}" for v in MARK)
    lines += ["", "Measured at " + ", ".join(f"`{p}` ({d})" for p, d in runs) + f"; by the rule below: {counts}. "
              "Each seed's effect, the depth each claim is decided at and how each interval was computed: "
              "[docs/results.md](docs/results.md).", "", f"The rule: {RULE}", ""]
    notes = [ONE_MODEL_NOTE] if any(one_model(c) for c in claims) else []
    lines += [" ".join([*notes, multiplicity(len(claims))])]
    return "\n".join(lines)


def render_readme(readme: Path, recorded: Path | None = None) -> Path:
    """Fill the README's results block (the headline profiles) from the recorded summaries."""
    text = Path(readme).read_text(encoding="utf-8")
    filled = fill_block(text, START, END, f"{START}\n{render_compact(recorded, HEADLINE)}\n{END}")
    if filled is None:
        raise UsageError(f"{readme}: no '{START}' ... '{END}' block to fill")
    atomic_write_text(Path(readme), filled)
    return Path(readme)


POWER = ("<!-- power: start -->", "<!-- power: end -->")  # docs/statistics.md's table of seeds needed


def render_power(recorded: Path | None = None) -> str:
    """The power table: for each recorded claim kept with the data of two seeds or more, the spread of its per-seed
    effects and, in its own units, what the rule asks of it and the seeds that would give it (``analysis/power.py``:
    a half-width of a quarter of the paper's effect, a lower bound from the seeds' part; for a claim with no paper
    number, 80 % power to clear zero at the observed effect), and the seeds recorded."""
    from ...analysis import power

    rows = [(c["profile"], c["notebook"], r) for c in recorded_claims(recorded) if (r := power.power_row(c))]
    if not rows:
        return "(no claim is recorded with the data of two seeds or more)"
    lines = ["| profile | notebook | claim | seeds recorded | per-seed effects: mean, standard deviation | asked (its "
             "units) | seeds for it (at least) | now |", "|---|---|---|---|---|---|---|---|"]
    for profile, nb, r in rows:
        needed = "more than 200" if r["needed"] is None else str(r["needed"])
        defined = "" if r["defined"] == r["seeds"] else f" ({r['defined']} defined)"
        if r["target"] is None:
            now = "; ".join(f"power {100 * v:.0f} % at {s} seeds" for s, v in r["power"].items())
        else:
            now = f"half-width {r['half_width']:.3g}"
        lines.append(f"| {profile} | {nb[:2]} | {r['id']} | {r['seeds']}{defined} | {r['mean']:+.3g}, {r['sd']:.3g} "
                     f"{r['unit']} | {r['asked']} | {needed} | {now} |")
    return "\n".join(lines)


def render_blocks(text: str, recorded: Path | None = None) -> str:
    """``text`` with each block it holds filled: the README's (``markers()``: the headline profiles), every
    per-profile block (``markers(profile)``: that profile's table), the power table (:data:`POWER`) and the
    headline's words and table by seed (``headline.py``)."""
    for name, only in ((None, HEADLINE), *((n, (n,)) for n in profiles.PROFILES)):
        start, end = markers(name)
        table = render_compact(recorded, only) if name is None else render_table(recorded, only)
        text = fill_block(text, start, end, f"{start}\n{table}\n{end}") or text
    if POWER[0] in text:
        text = fill_block(text, *POWER, f"{POWER[0]}\n{render_power(recorded)}\n{POWER[1]}") or text
    if any(f"<!-- {kind} " in text for kind in ("headline", "by-seed", "by-cpu")):
        text = headline.fill(text, recorded_claims(recorded), fill_block, recorded_machines(recorded))
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
                    help="first add the seeds of results/PROFILE/summaries to the record docs/results/PROFILE")
    ap.add_argument("--replace", action="store_true", help="with --record: replace the record instead of adding to it")
    ap.add_argument("--redecide", action="store_true",
                    help="first decide every recorded claim again from its data by today's rule")
    ap.add_argument("--compare", metavar="PROFILE", default=None,
                    help="only compare results/PROFILE/summaries with the record docs/results/PROFILE, claim by claim "
                         "and cell by cell, and the machines (exit status 1 when a verdict differs)")
    ap.add_argument("--fingerprints", nargs="?", const="all", choices=("all", "smoke"), default=None,
                    help="only compare this machine's fingerprints (the sha256 of the weights of the smoke trainings "
                         "and, with all, quick's three Table-1 models; trained where the run cache lacks them) with "
                         "docs/results/fingerprints.json; exit status 1 where they differ")
    ap.add_argument("--record-fingerprints", action="store_true",
                    help="with --fingerprints: also add this machine's CPU family to docs/results/fingerprints.json")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.record_fingerprints and not args.fingerprints:
        ap.error("--record-fingerprints goes with --fingerprints")
    if args.fingerprints:
        lines, same = fingerprints.main(quick=args.fingerprints == "all", record_family=args.record_fingerprints)
        print("\n".join(lines))
        return 0 if same else 1
    if args.compare:
        profiles.check(args.compare)
        lines, alike = compare.compare(args.compare, paths.RESULTS, RECORDED)
        print("\n".join(lines))
        return 0 if alike else 1
    if args.replace and not args.record:
        ap.error("--replace goes with --record PROFILE")
    if args.record:
        for p in record(args.record, replace=args.replace):
            print(f"recorded {p}")
    if args.redecide:
        changed = redecide()
        print(f"decided again: {len(changed)} summaries changed" + "".join(f"\n  {p}" for p in changed))
    changed = render() + site.write()
    print(f"wrote {', '.join(map(str, changed))}" if changed
          else "README.md, docs/results.md and docs/site were current")
    return 0
