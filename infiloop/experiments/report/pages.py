"""Each executed notebook as a page of its own beside the report (``results/<profile>/notebooks/<name>.html``),
rendered by nbconvert."""

from __future__ import annotations

import re
from pathlib import Path

from ...io import atomic_write_text
from .summaries import folders

PAGES = "notebooks"  # results/<profile>/notebooks/<name>.html: each executed notebook as a page of its own


def notebook_pages(profile: str, root: Path | None = None) -> list[Path]:
    """Each executed notebook of ``results/<profile>/`` rendered by nbconvert to one self-contained HTML page
    (figures embedded; the scripts nbconvert would fetch from a CDN, require.js and MathJax, left out, so
    equations show as their TeX source), written atomically beside the report."""
    import nbformat
    from nbconvert import HTMLExporter

    results = folders(root)[1] / profile
    out = []
    for nb_path in sorted(results.glob("[0-9][0-9]_*.ipynb")):
        exporter = HTMLExporter(template_name="lab")
        exporter.embed_images = True
        exporter.mathjax_url = exporter.require_js_url = ""
        body, _ = exporter.from_notebook_node(nbformat.read(nb_path, as_version=4))
        body = re.sub(r'<script src=""></script>\s*', "", body)
        body = re.sub(r'<script type="text/x-mathjax-config">.*?</script>\s*', "", body, flags=re.S)
        out.append(atomic_write_text(results / PAGES / f"{nb_path.stem}.html", body))
    return out
