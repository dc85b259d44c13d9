"""The search's evidence for or against the paper's contrast over every recorded row (docs/calibration.md): each
connection's fall below its own peak by 60x the training depth, its loss of solved puzzles and its state change after
the solve, against the paper's TRM; the paragraph that states it, and the block of docs/results.md that holds both
(``contrasts --readme``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...analysis import paper
from ...io import atomic_write_text, fill_block
from .contrast_rows import CONNECTION_STUDY_DATE, CONNECTIONS, RECORDED, ROWS, as_built

# The paper's TRM, against which the search is judged: its fall from the peak (Fig. 1a, points), the share of
# solved puzzles it loses (%; 19.7 after update 36, "15-20 %" under perturbation) and its state change per
# update after the solve (%).
PAPER_FALL = paper.FIG1A[0].accuracy - paper.FIG1A[1].accuracy
PAPER_LOST = 15.0
PAPER_CHANGE = paper.CARRY_LAST_DIAGNOSTICS["state_change_after_pct"]["TRM"]


def cell(values: list[float], scale: float = 100.0, fmt: str = "{:.1f}") -> str:
    """Mean over seeds, with the range when there are several."""
    v = [x * scale for x in values if x is not None]
    if not v:
        return "–"
    text = fmt.format(np.mean(v))
    return text + (f" ({fmt.format(min(v))}–{fmt.format(max(v))})" if len(v) > 1 else "")


def drift_summary(results: Path | None = None, rows: dict[str, dict] | None = None
                  ) -> tuple[list[str], list[list[str]], dict]:
    """The evidence for or against the paper's contrast over every recorded row: for each row, each
    connection's exact accuracy at the training depth, how far its accuracy at 60x lies below its own peak
    (the drift the paper reports for TRM), the share of solved puzzles lost by 60x and the relative state
    change per update after the first solve (the paper's mechanism of the drift); means over seeds,
    the drop's worst seed in brackets. Returns (columns, table rows, facts): facts has ``rows`` (how many),
    ``seeds`` (models per connection in all) and, per connection, ``max_drop`` (points) with its ``row``,
    ``max_lost`` (% of solved puzzles) with its ``lost_row`` and ``max_change`` (% per update after the
    solve) with its ``change_row``, each the worst single model.
    ``results``: a results folder (default :data:`RECORDED`, the rows kept in ``docs/calibration-results``)."""
    rows = ROWS if rows is None else rows
    results = RECORDED if results is None else Path(results)
    files = {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}
    order = [n for n in rows if n in files] + sorted(n for n in files if n not in rows)
    columns = ["candidate", "what changes (over tiny)", "seeds"]
    for recipe in CONNECTIONS:
        name = {"carry_last": "carry-last", "infiloop": "InfiLoop"}[recipe]
        columns += [f"{name} @1x (%)", f"{name} peak − @60x (points)", f"{name} solved, then lost (%)",
                    f"{name} state change per update after the solve (%)"]
    worst = {"max_drop": 0.0, "row": None, "max_lost": 0.0, "lost_row": None, "max_change": 0.0, "change_row": None}
    table, facts = [], {"rows": 0, "seeds": 0, "as_built": 0, **{r: dict(worst) for r in CONNECTIONS}}
    for n in order:
        r = files[n]
        if not all(r["results"].get(recipe) for recipe in CONNECTIONS):
            continue
        settings = ", ".join(f"{k}={v}" for k, v in r["settings"].items() if k != "seeds") or "none"
        line = [n, settings, str(min(len(r["results"][x]) for x in CONNECTIONS))]
        for recipe in CONNECTIONS:
            recs = list(r["results"][recipe].values())
            drops = [100 * (x["peak"] - x["exact"]["60"]) for x in recs]
            line += [cell([x["exact"]["1"] for x in recs]),
                     f"{np.mean(drops):.1f}" + (f" ({max(drops):.1f})" if len(drops) > 1 else ""),
                     cell([x["lost_after_solve"] for x in recs]),
                     cell([x["state_change_after_solve"] for x in recs], 100, "{:.2g}")]
            f = facts[recipe]
            if max(drops) > f["max_drop"] or f["row"] is None:
                f.update(max_drop=max(drops), row=n)
            for key, row_key, field in (("max_lost", "lost_row", "lost_after_solve"),
                                        ("max_change", "change_row", "state_change_after_solve")):
                values = [100 * x[field] for x in recs if x.get(field) is not None]
                if values and (max(values) > f[key] or f[row_key] is None):
                    f.update({key: max(values), row_key: n})
        facts["rows"] += 1
        facts["as_built"] += as_built(r)
        facts["seeds"] += int(line[2])
        table.append(line)
    return columns, table, facts


def drift_statement(facts: dict) -> str:
    """The search's evidence in one paragraph from :func:`drift_summary`'s facts: carry-last's largest fall
    below its peak, loss of solved puzzles and state change after the solve, each with its row, against the
    paper's TRM; it ends with the verdict in bold when no row reaches the paper's fall nor its loss (one seed
    per row mostly, so the verdict rests on all rows together, not on an interval)."""
    if not facts["rows"]:
        return "No calibration row is recorded yet."
    cl, il = facts["carry_last"], facts["infiloop"]
    text = (f"The calibration search ({facts['rows']} candidate settings, {facts['seeds']} trained models per "
            f"connection on the 2-core CPU; `docs/calibration.md`) found carry-last at most {cl['max_drop']:.1f} "
            f"points below its own peak at 60x the training depth (row `{cl['row']}`; InfiLoop at most "
            f"{il['max_drop']:.1f}, row `{il['row']}`), losing at most {cl['max_lost']:.1f} % of its solved puzzles "
            f"(row `{cl['lost_row']}`; InfiLoop {il['max_lost']:.1f} %), its state changing by at most "
            f"{cl['max_change']:.2f} % per update after the solve (row `{cl['change_row']}`; InfiLoop "
            f"{il['max_change']:.2f} %); the paper's TRM: {PAPER_FALL:.1f} points, {PAPER_LOST:.0f}–20 %, about "
            f"{PAPER_CHANGE:.0f} %.")
    if facts.get("as_built"):
        text += (f" InfiLoop's numbers in {facts['as_built']} of these rows are the connection as built before the "
                 f"connection study ({CONNECTION_STUDY_DATE}; `docs/connection-study.md`, variant `baseline`); "
                 "carry-last's runs are today's.")
    if contrast_absent(facts):
        text += (" **In none of these settings does carry-last reach the paper's fall or its loss of solved "
                 "puzzles: at this scale the paper's contrast did not appear.**")
    return text


def contrast_absent(facts: dict) -> bool:
    """True when rows are recorded and no carry-last model reaches the paper's fall or its loss."""
    cl = facts["carry_last"]
    return bool(facts["rows"]) and cl["max_drop"] < PAPER_FALL and cl["max_lost"] < PAPER_LOST


README_START, README_END = "<!-- calibration-drift: start -->", "<!-- calibration-drift: end -->"
README_COLUMNS = ["candidate", "what changes (over `tiny`)", "seeds", "CL @1x", "CL peak − @60x", "CL lost",
                  "CL state change", "IL @1x", "IL peak − @60x", "IL lost", "IL state change"]


def render_drift(results: Path | None = None, rows: dict[str, dict] | None = None) -> str:
    """The README's block: :func:`drift_summary`'s table with short headings (CL carry-last, IL InfiLoop)
    and :func:`drift_statement`, between :data:`README_START` and :data:`README_END`."""
    columns, table, facts = drift_summary(results, rows)
    assert len(columns) == len(README_COLUMNS)
    lines = ["| " + " | ".join(README_COLUMNS) + " |", "|" + "---|" * len(README_COLUMNS)]
    lines += ["| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |" for r in table]
    return f"{README_START}\n" + "\n".join(lines) + f"\n\n{drift_statement(facts)}\n{README_END}"


def render_readme(readme: Path, results: Path | None = None, rows: dict[str, dict] | None = None) -> Path:
    """Replace the block between the README's drift markers by :func:`render_drift`; the README must
    already hold both markers (it is never appended to)."""
    text = Path(readme).read_text() if Path(readme).is_file() else ""
    filled = fill_block(text, README_START, README_END, render_drift(results, rows))
    if filled is None:
        raise ValueError(f"{readme}: no '{README_START}' ... '{README_END}' block to fill")
    return atomic_write_text(readme, filled)
