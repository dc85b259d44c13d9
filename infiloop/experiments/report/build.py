"""The HTML report: one self-contained file compiled from the notebooks' summary JSON files.

Inputs (``results/`` is ``paths.RESULTS``, or ``<root>/results`` for the checkout given by ``--root``):

- ``results/<profile>/summaries/<notebook>.json``, one per notebook::

    {"notebook": "02_depth_scaling", "title": "...", "profile": "tiny", "created": "...", "wall_time_s": 12.3,
     "text": "conclusion (a little markdown)", "figures": [{"path": "figures/tiny/x.png", "caption": "..."}],
     "tables": [{"title": "...", "columns": [...], "rows": [[...]], "note": "..."}],
     "claims": [{"id": "...", "claim": "...", "paper": "...", "ours": "...", "agrees": true | false | null,
                 "profile": "tiny", "note": "...", "effect": {...}, "seeds": 3, "rule": 2, "untestable": "why"}]}

  ``effect`` (``analysis/claims.py``, ``record``): the claim's effect, its interval and the paper's value of it;
  ``agrees`` follows from them by the rule (``analysis/intervals.py``, ``RULE``); ``untestable``: why the claim
  cannot be tested at this scale (no verdict). A summary written under rule version 1 has none of these four.

- ``results/<profile>/stages.json`` (optional), written by the pipeline runner::

    {"stages": [{"name": "data", "seconds": 3.1, "status": "ok", "error": "..."}], "started": "...", "finished": "..."}

Output: ``results/<profile>/report.html``: plain HTML with inline CSS and the figures embedded as
``data:`` URIs; no scripts and no external resources, so it opens offline and can be mailed. Missing
figures, notebooks and failed stages are shown as warnings, never dropped silently. Animations (``.gif``,
notebook 07) are embedded the same way, each captioned with its size; a file over ``MAX_EMBED_BYTES`` is
not embedded but named as a problem, which bounds the report's size.

The page is assembled here from its pieces: ``markup.py`` (escaping, markdown, tables), ``summaries.py`` (the
inputs read), ``pages.py`` (each notebook as a page of its own), ``verdicts.py`` and ``provenance.py``.

    python -m infiloop report --profile tiny      (the cli calls ``main(["--profile", "tiny"])``)
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from ... import paths
from ...analysis import paper
from ...io import atomic_write_text
from ..settings import profiles
from .markup import esc, inline, markdown, table_html, warn
from .pages import PAGES, notebook_pages
from .provenance import PACKAGES_FILE, PACKAGES_KEY, provenance, write_packages
from .summaries import SCRATCH, folders, load_summaries
from .verdicts import MARK, ONE_MODEL, ONE_MODEL_NOTE, effect_cell, one_model, verdict

MAIN_NOTEBOOK = "01_main_table"
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml",
               ".gif": "image/gif"}
MAX_EMBED_BYTES = 8 * 2**20  # one embedded file at most (the animations are about 1 MB each)

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.9em;color:#555}
.meta{color:#666;font-size:.9em}.note{color:#555;font-size:.9em}
.warn{background:#fff3cd;border:1px solid #e0c060;padding:.5em .8em;margin:.6em 0}
.yes{color:#1a7f37;font-weight:bold}.no{color:#c62828;font-weight:bold}.na{color:#888}.undecided{color:#b26a00;font-weight:bold}
ul.verdicts{list-style:none;padding-left:0}ul.verdicts li{margin:.15em 0}
details{margin:.8em 0}summary{cursor:pointer;color:#444}
code{background:#f5f5f5;padding:0 .2em}pre{background:#f5f5f5;padding:.5em;overflow-x:auto}
"""


ABOUT = """<p>This project's measurements beside the numbers of the paper "Scaling to Tens of Thousands of Test-Time
Iterations with Loop-Native Attention Residuals" (InfiLoop, arXiv 2610.11570): a looped reasoner whose state is an
attention-weighted summary of all its candidates so far, against the usual carry-last rule (the newest state replaces
the last, as in TRM, the Tiny Recursive Model) and FPRM (the Fixed-Point Reasoning Model). Numbers marked "paper" are
the paper's; all others were measured by this project.</p>"""


def page(title: str, body: str) -> str:
    """A whole HTML page: ``title`` (already escaped), the report's style sheet inline, ``body``."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{CSS}</style></head>
<body>
{body}
</body></html>
"""


def figure_html(fig: dict, root: Path | None = None) -> tuple[str, str | None]:
    """A figure embedded as a data URI; returns (html, problem) where problem names a missing figure."""
    rel = str(fig.get("path") or "")
    path = Path(rel) if Path(rel).is_absolute() else folders(root)[0] / rel
    mime = IMAGE_TYPES.get(path.suffix.lower())
    text = inline(fig.get("caption", ""))
    if mime == "image/gif" and path.is_file():
        text += f"{' ' if text else ''}(animated GIF, {path.stat().st_size / 1e6:.2f} MB)"
    caption = f"<figcaption>{text}</figcaption>" if text else ""
    if not rel or mime is None:
        problem = f"figure {rel!r} cannot be embedded (use a .png, or a .gif for an animation)"
    elif not path.is_file():
        problem = f"figure missing: {rel}"
    elif path.stat().st_size > MAX_EMBED_BYTES:
        problem = (f"figure not embedded: {rel} is {path.stat().st_size / 1e6:.1f} MB, over the "
                   f"{MAX_EMBED_BYTES / 1e6:.1f} MB a report embeds per file")
    else:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        img = f'<img src="data:{mime};base64,{data}" alt="{esc(fig.get("caption") or rel)}">'
        return f"<figure>{img}{caption}</figure>", None
    return f'<figure class="missing">{warn(problem)}{caption}</figure>', problem


def claims_html(claims: list[dict]) -> str:
    """The aggregated claims table, with a count of each verdict, the rule that decides them (stated once, here),
    the mark of a verdict from one trained model and a sentence on multiplicity."""
    from ...analysis import paper_curves
    from ...analysis.intervals import RULE, multiplicity

    rows = []
    for c in claims:
        cls, sym = MARK[verdict(c)]
        why = f"<br><span class=\"meta\">untestable: {esc(c['untestable'])}</span>" if c.get("untestable") else ""
        rows.append(f'<tr class="claim" id="claim-{esc(c.get("id"))}"><td>{esc(c.get("claim"))}<br>'
                    f'<span class="meta">{esc(c.get("id"))} · {esc(c.get("notebook"))}</span></td>'
                    f"<td>{esc(c.get('paper'))}</td><td>{esc(c.get('ours'))}</td><td>{esc(c.get('seeds', '–'))}</td>"
                    f"<td>{esc(effect_cell(c))}{why}</td>"
                    f'<td class="{cls}">{sym}{ONE_MODEL if one_model(c) else ""}</td><td>{esc(c.get("profile"))}</td>'
                    f'<td>{esc(c.get("note"))}</td></tr>')
    n = {k: sum(verdict(c) == k and not c.get("unreported") for c in claims) for k in MARK}
    n_unreported = sum(bool(c.get("unreported")) for c in claims)
    n_one = sum(one_model(c) for c in claims)
    decided = len({c.get("id") for c in claims if not c.get("unreported")})
    head = "".join(f"<th>{h}</th>" for h in ("claim", "paper", "ours", "seeds", "effect: ours; the paper's",
                                             "verdict", "profile", "note"))
    return (f"<p>{n['agrees']} agree ✓, {n['smaller']} smaller than the paper's ↓, {n['differs']} differ ✗, "
            f"{n['undecided']} undecided ?, {n['untestable']} untestable ⊘, {n['not measured']} not measured at "
            f"this profile –, {n_unreported} not reported by any notebook; {n_one} verdict(s) from one trained model "
            f"{ONE_MODEL}.</p>"
            f'<p class="rule">The rule: {inline(RULE)}</p>'
            f'<p class="note">{esc(paper_curves.statement())}</p>'
            f'<p class="note">{esc(ONE_MODEL_NOTE)} {esc(multiplicity(decided))}</p>'
            f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def paper_table1_html() -> str:
    """The paper's Table 1 (shown when this run's main table is missing)."""
    cols = ["model", "params", "Sudoku", "Maze", "ARC-1", "ARC-2", "note"]
    rows = [[r.model, r.params, *(r.cell(c) for c in paper.TABLE1_COLUMNS), r.note] for r in paper.TABLE1]
    return table_html({"title": "Table 1 as reported by the paper", "columns": cols, "rows": rows,
                       "note": "exact accuracy (%) on Sudoku-Extreme / Maze-Hard, pass@2 (%) on ARC; source: paper"})


def _prov_value(key: str, value: str) -> str:
    """A provenance cell; the package count links to the list written beside the report."""
    if key == PACKAGES_KEY:
        return f'{esc(value.split(" ")[0])} (<a href="{PACKAGES_FILE}">{PACKAGES_FILE}</a>, beside this report)'
    return esc(value)


def stages_html(profile: str, root: Path | None = None) -> tuple[str, list[str]]:
    """Per-stage wall times from stages.json (or a warning that it is missing); plus failed stages."""
    path = folders(root)[1] / profile / "stages.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return warn(f"results/{profile}/stages.json not found: per-stage wall times are unknown "
                    "(the pipeline runner writes it)."), []
    except (OSError, ValueError) as e:
        return warn(f"results/{profile}/stages.json unreadable: {e}"), []
    stages = data.get("stages") or []
    rows = [[s.get("name"), s.get("seconds"), s.get("status"), s.get("error")] for s in stages]
    failed = [f"stage {s.get('name')}: {s.get('status')}" + (f" ({s['error']})" if s.get("error") else "")
              for s in stages if s.get("status") != "ok"]
    total = sum(float(s.get("seconds") or 0) for s in stages)
    note = f"started {data.get('started', '?')}, finished {data.get('finished', '?')}; total {total:,.1f} s"
    return table_html({"title": "Stages", "columns": ["stage", "seconds", "status", "error"],
                       "rows": rows, "note": note}), failed


def verdict_lines(claims: list[dict]) -> str:
    """A notebook's claims, one line each: the verdict's mark, the claim, ours and its effect beside the paper's."""
    items = []
    for c in claims:
        cls, sym = MARK[verdict(c)]
        ours = esc(c.get("ours")) if c.get("ours") else "not measured at this profile"
        effect = f" · effect {esc(effect_cell(c))}" if effect_cell(c) else ""
        mark = f"{sym}{ONE_MODEL if one_model(c) else ''}"
        items.append(f'<li><span class="{cls}">{mark}</span> {esc(c.get("claim"))}: {ours}{effect} '
                     f'<span class="meta">(paper: {esc(c.get("paper"))})</span></li>')
    return f'<ul class="verdicts">{"".join(items)}</ul>' if items else ""


def notebook_section(s: dict, root: Path | None = None, claims: list[dict] | None = None,
                     lead: str = "", pages: str = PAGES, figure=None,
                     linked: bool | None = None) -> tuple[str, list[str]]:
    """One notebook's section: its heading, its claims' verdicts (a line each), figures and tables, then what
    the notebook says, folded; plus its missing figures. ``lead``: HTML shown first (a missing table's warning);
    ``pages``: the executed notebooks' folder as the report links it; ``figure``: a figure's HTML and problem
    (default :func:`figure_html`, embedded); ``linked``: whether the executed notebook has a page (default: whether
    ``results/<profile>/notebooks/<name>.html`` exists)."""
    name = s.get("notebook", "")
    meta = [f"profile: {esc(s['profile'])}"] if s.get("profile") else []
    meta += [f"created {esc(s['created'])}"] if s.get("created") else []
    if isinstance(s.get("wall_time_s"), (int, float)):
        meta.append(f"wall time {s['wall_time_s']:,.1f} s")
    commit = str((s.get("environment") or {}).get("commit", ""))[:10]
    meta += [f"commit {esc(commit)}"] if commit else []
    meta = " · ".join(meta)
    if s.get("parameters"):
        lead = warn("made with parameters other than its defaults, so not the default run's: "
                    + " ".join(f"-p {k} {v}" for k, v in s["parameters"].items())) + lead
    if s.get("scratch"):
        lead = warn(f"run outside the pipeline (results/{SCRATCH}/{s.get('profile')}/summaries/{name}.json), in place "
                    "of the default run's section") + lead
    if linked is None:
        linked = (folders(root)[1] / str(s.get("profile") or "") / PAGES / f"{name}.html").is_file()
    link = (f'<a href="{pages}/{esc(name)}.html">notebook {esc(name)}</a>' if linked and not s.get("scratch")
            else f"notebook {esc(name)}")
    parts = [f'<section id="nb-{esc(name)}"><h2>{esc(s.get("title") or name)}</h2>',
             f'<p class="meta">{link}{" · " + meta if meta else ""}</p>', lead,
             verdict_lines(claims or [])]
    problems = []
    for fig in s.get("figures") or []:
        fig = fig if isinstance(fig, dict) else {"path": fig}
        fig_html, problem = figure(fig) if figure else figure_html(fig, root)
        parts.append(fig_html)
        if problem:
            problems.append(f"{name}: {problem}")
    for table in s.get("tables") or []:
        parts.append(table_html(table))
    if s.get("text"):
        parts.append(f"<details><summary>What the notebook found, in detail</summary>{markdown(s.get('text'))}"
                     "</details>")
    parts.append("</section>")
    return "\n".join(parts), problems


def _all_claims(summaries: list[dict], profile: str, problems: list[str]) -> list[dict]:
    """Every claim the summaries report (a malformed one added to ``problems``), then each of the paper's claims
    that no notebook reported, so that it stays visible."""
    claims, reported = [], set()
    for s in summaries:
        for c in s.get("claims") or []:
            if not isinstance(c, dict):
                problems.append(f"{s.get('notebook')}: a claim is not a JSON object: {c!r}")
                continue
            claims.append({"notebook": s.get("notebook"), **c})
            reported.add(c.get("id"))
    for c in paper.CLAIMS:
        if c.id not in reported:
            claims.append({"id": c.id, "claim": c.claim, "paper": c.paper, "ours": "", "agrees": None,
                           "profile": profile, "notebook": c.notebook, "note": "not reported by any notebook",
                           "unreported": True})
    return claims


def _commits_row(summaries: list[dict], report_commit: str) -> str:
    """A provenance row naming the commit each notebook was run at, where one differs from the report's (a notebook
    re-run alone, or kept from an earlier run): the two runs are not mixed under one commit."""
    by_commit: dict[str, list[str]] = {}
    for s in summaries:
        commit = str((s.get("environment") or {}).get("commit", "")).split(" ")[0][:10]
        if commit:
            by_commit.setdefault(commit, []).append(str(s.get("notebook", ""))[:2])
    if not by_commit or set(by_commit) <= {report_commit.split(" ")[0][:10]}:
        return ""
    text = "; ".join(f"{c}: notebook(s) {', '.join(nbs)}" for c, nbs in by_commit.items())
    return f"<tr><th>notebooks run at</th><td>{esc(text)}</td></tr>"


def render(profile: str, root: Path | None = None, scratch: bool = False) -> str:
    """The report's HTML as a string (see the module docstring); ``scratch``: the default run's with each notebook
    run outside the pipeline in place of its section (``results/scratch/<profile>/report.html``)."""
    summaries, problems = load_summaries(profile, root, scratch)
    claims = _all_claims(summaries, profile, problems)
    main = next((s for s in summaries if s.get("notebook") == MAIN_NOTEBOOK), None)
    no_table = warn(f"no main table: {MAIN_NOTEBOOK} has no summary or no table; showing the paper's numbers "
                    "only.") + paper_table1_html()
    sections = [] if main else [f'<section id="nb-{MAIN_NOTEBOOK}"><h2>Table 1</h2>{no_table}</section>']
    for s in summaries:
        mine = [c for c in claims if c.get("notebook") == s.get("notebook") and not c.get("unreported")]
        lead = no_table if s is main and not main.get("tables") else ""
        section, figure_problems = notebook_section(s, root, mine, lead,
                                                    f"../../{profile}/{PAGES}" if scratch else PAGES)
        sections.append(section)
        problems += figure_problems
    stage_table, failed = stages_html(profile, root)
    problems += failed
    info = provenance(root)
    prov = "".join(f"<tr><th>{esc(k)}</th><td>{_prov_value(k, v)}</td></tr>" for k, v in info.items())
    prov += _commits_row(summaries, info.get("git commit", ""))
    problem_html = ("<ul>" + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>") if problems \
        else "<p>none: every notebook ran and every figure is present.</p>"
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(sections)
    banner = warn(f"{len(problems)} problem(s): see 'Missing or failed' at the end.") if problems else ""
    return page(f"InfiLoop companion report · profile {esc(profile)}", f"""<header>
<h1>InfiLoop companion: reproduction report</h1>
{ABOUT}
<p class="meta">profile: <strong>{esc(profile)}</strong> · built {esc(now)} · {len(summaries)} notebook
summaries · {len(problems)} problem(s)</p>
{banner}
</header>
{body}
<section id="claims"><h2>Every claim, checked (the paper's, and the looped-LM study's: ids study.*)</h2>
{claims_html(claims)}
</section>
<section id="provenance"><h2>Provenance</h2>
<table>{prov}</table>
<p class="note">Versions and device are those of the machine that built this report.</p>
{stage_table}
<h3>Missing or failed</h3>
<div id="problems">{problem_html}</div>
</section>""")


def build_report(profile: str, root: Path | None = None, scratch: bool = False) -> Path:
    """Write ``results/<profile>/report.html`` (atomically); ``root``: another checkout (see ``summaries.folders``);
    ``scratch``: ``results/scratch/<profile>/report.html``, the notebooks run outside the pipeline in place of their
    sections (:func:`render`)."""
    if not paths.is_plain_name(profile):
        raise ValueError(f"profile name {profile!r} is not a plain name")
    results = folders(root)[1] / (f"{SCRATCH}/{profile}" if scratch else profile)
    write_packages(results)
    if not scratch:
        notebook_pages(profile, root)
    return atomic_write_text(results / "report.html", render(profile, root, scratch))


def main(argv: list[str] | None = None) -> int:
    """``python -m infiloop report --profile P [--root DIR]``: build the report and print its path."""
    parser = argparse.ArgumentParser(prog="python -m infiloop report",
                                     description="Compile results/<profile>/report.html from the notebook summaries.")
    parser.add_argument("--profile", default=profiles.DEFAULT,
                        help=f"profile whose results to report: {profiles.choices()}")
    parser.add_argument("--root", default=None,
                        help=f"repository root whose results/ to report (default: {paths.RESULTS})")
    parser.add_argument("--scratch", action="store_true",
                        help=f"report results/{SCRATCH}/<profile>/report.html: the default run's, with each notebook "
                             "run outside the pipeline (papermill, JupyterLab) in place of its section")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    results = folders(args.root)[1]
    if not (results / args.profile).is_dir():
        print(f"report: {results / args.profile} does not exist; run the notebooks first "
              "(./reproduce.sh). Writing a report that says so.", file=sys.stderr)
    path = build_report(args.profile, args.root, args.scratch)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
