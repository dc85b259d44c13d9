"""The report's HTML pieces: any value escaped, a small safe markdown subset, a table cell and a whole summary table,
and a warning (``build.py`` assembles the page from them)."""

from __future__ import annotations

import html
import re


def esc(value) -> str:
    """HTML-escape any value (``None`` becomes an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def inline(text: str) -> str:
    """Escape, then render `code`, **bold** and *italic*."""
    out = esc(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"<em>\1</em>", out)


_BULLET = r"^\s*[-*] "


def markdown(text: str | None) -> str:
    """A small, safe markdown subset: paragraphs, '-'/'*' lists, '#' headings, inline code/bold/italic."""
    blocks = []
    for block in re.split(r"\n\s*\n", (text or "").strip()):
        lines = [ln.rstrip() for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        if all(re.match(_BULLET, ln) for ln in lines):
            items = "".join(f"<li>{inline(re.sub(_BULLET, '', ln))}</li>" for ln in lines)
            blocks.append(f"<ul>{items}</ul>")
        elif len(lines) == 1 and lines[0].startswith("#"):
            blocks.append(f"<h4>{inline(lines[0].lstrip('#').strip())}</h4>")
        else:
            blocks.append(f"<p>{inline(' '.join(lines))}</p>")
    return "\n".join(blocks)


def fmt(value) -> str:
    """A table cell: '–' for missing, ✓/✗ for booleans, thousands separators, 4 significant digits."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 1000 and value == int(value):
            return f"{int(value):,}"
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:.4g}"
    return str(value)


def warn(message: str) -> str:
    return f'<div class="warn">⚠ {esc(message)}</div>'


def table_html(table: dict) -> str:
    """One summary table (title, columns, rows, note) as HTML; malformed rows are flagged."""
    cols = list(table.get("columns") or [])
    parts = [f"<h3>{esc(table.get('title', ''))}</h3>"] if table.get("title") else []
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body, bad = [], 0
    for row in table.get("rows") or []:
        row = list(row) if isinstance(row, (list, tuple)) else [row]
        bad += len(row) != len(cols)
        cells = "".join(
            f'<td class="num">{esc(fmt(v))}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
            else f"<td>{esc(fmt(v))}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
    if bad:
        parts.append(warn(f"{bad} row(s) of this table do not have {len(cols)} cells"))
    if table.get("note"):
        parts.append(f'<p class="note">{inline(table["note"])}</p>')
    return "\n".join(parts)
