"""The recorded profiles as a static site (``docs/site/``): current with the records, small, and made by
``results --record`` from a run's figures and executed notebooks."""

from __future__ import annotations

import base64
import io
import json
import re

import nbformat

from infiloop import paths
from infiloop.experiments.report import results, site


def test_the_site_is_current_with_the_records_and_small():
    """A record changed (``--record``, ``--redecide``) without rendering the site again fails here; so does a page
    edited by hand, a kept figure deleted, or a site over its size."""
    assert site.stale() == []
    assert {"quick", "search"} <= set(site.profiles_with_site())
    assert site.size() < site.MAX_BYTES, f"docs/site is {site.size() / 2**20:.1f} MiB"
    for profile in site.profiles_with_site():
        page = (site.SITE / profile / "index.html").read_text(encoding="utf-8")
        for src in re.findall(r'src="([^"]+)"', page):  # every image the page shows is kept beside it
            assert (site.SITE / profile / src).is_file(), src
        assert "figure not kept" not in page
        for href in re.findall(r'href="(notebooks/[^"]+)"', page):
            assert (site.SITE / profile / href).is_file(), href
    first = (site.SITE / "index.html").read_text(encoding="utf-8")
    assert all(f'href="{p}/index.html"' in first for p in site.profiles_with_site())
    assert first.count("at commit") == len(site.profiles_with_site())  # each profile's run named on the first page
    readme = (paths.ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert any("docs/site/index.html" in line for line in readme[:25]), "the README's first screen links the site"


def _png(color) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(out, format="PNG")
    return out.getvalue()


def test_record_keeps_the_runs_figures_and_notebooks_and_the_pages_follow_the_record(tmp_path):
    res, rec = tmp_path / "results", tmp_path / "docs" / "results"
    (res / "smoke" / "summaries").mkdir(parents=True)
    (tmp_path / "figures" / "smoke").mkdir(parents=True)
    (tmp_path / "figures" / "smoke" / "curve.png").write_bytes(_png((200, 30, 30)))
    summary = {"notebook": "02_depth_scaling", "title": "Depth", "profile": "smoke", "created": "2026-12-07T10:00:00Z",
               "figures": [{"path": "figures/smoke/curve.png", "caption": "the curve"},
                           {"path": "figures/smoke/gone.png", "caption": "never drawn"}],
               "environment": {"commit": "abcdef1234567 (clean tree)", "cpu": "Test CPU × 2"},
               "claims": [{"id": "a", "claim": "it rises", "paper": "+6", "ours": "+2", "agrees": True}]}
    (res / "smoke" / "summaries" / "02_depth_scaling.json").write_text(json.dumps(summary))
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", {"image/png": base64.b64encode(_png((0, 90, 200)))
                                                            .decode()})]
    nb.cells = [nbformat.v4.new_markdown_cell("# Depth"), cell]
    nbformat.write(nb, res / "smoke" / "02_depth_scaling.ipynb")

    results.record("smoke", res, rec)
    folder = tmp_path / "docs" / "site" / "smoke"
    manifest = json.loads((folder / "site.json").read_text())
    assert manifest["figures"] == ["curve.png"] and manifest["notebooks"] == ["02_depth_scaling"]
    assert manifest["run"]["cpu"] == "Test CPU × 2" and manifest["run"]["commit"].startswith("abcdef")
    page = (folder / "notebooks" / "02_depth_scaling.html").read_text()
    assert "<script" not in page and "<style" not in page and 'href="../../notebook.css"' in page
    assert "<title>InfiLoop companion · notebook 02_depth_scaling at profile smoke</title>" in page
    assert "as executed by the run of seed(s)" in page and "abcdef1234" in page and "Test CPU × 2" in page
    assert "base64," not in page and '<img' in page  # the output's image is a file beside the page
    shown = re.findall(r'<img[^>]*src="([^"]+)"', page)
    assert shown == ["02_depth_scaling_1_0.png"] and (folder / "notebooks" / shown[0]).stat().st_size > 0
    assert (tmp_path / "docs" / "site" / "notebook.css").stat().st_size > 1000  # one style sheet for the site

    assert site.stale(rec)  # kept, but its pages not rendered yet
    assert {p.name for p in site.write(rec)} == {"index.html"} and site.stale(rec) == []
    text = (folder / "index.html").read_text()
    assert '<img src="figures/curve.png"' in text and "figure not kept: gone.png" in text
    assert 'href="notebooks/02_depth_scaling.html"' in text and "docs/results/smoke/" in text
    assert not re.search(r"built \d{4}", text)  # a function of the record and what was kept: not of when or where
    assert site.write(rec) == []

    changed = json.loads((rec / "smoke" / "02_depth_scaling.json").read_text())
    changed["claims"][0]["ours"] = "+3"  # a record re-decided, the site not rendered again
    (rec / "smoke" / "02_depth_scaling.json").write_text(json.dumps(changed))
    assert [line.split(":")[0] for line in site.stale(rec)] == [str(folder / "index.html")]
    site.write(rec)
    assert "+3" in (folder / "index.html").read_text() and site.stale(rec) == []
    (folder / "figures" / "curve.png").unlink()
    assert site.stale(rec) == [f"{folder / 'figures' / 'curve.png'}: listed in site.json, missing"]
    (folder / "notebooks" / shown[0]).unlink()
    assert site.stale(rec)[1] == f"{folder / 'notebooks' / '02_depth_scaling.html'}: shows {shown[0]}, missing"


def test_a_figure_is_kept_smaller_and_the_same_picture():
    import matplotlib
    from PIL import Image

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4), dpi=150)
    x = np.linspace(0, 10, 400)
    for k in range(4):
        ax.plot(x, np.sin(x + k), label=f"line {k}")
        ax.fill_between(x, np.sin(x + k) - 0.2, np.sin(x + k) + 0.2, alpha=0.2)
    ax.legend()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    kept = site.palette_png(out.getvalue())
    assert len(kept) < 0.7 * len(out.getvalue())
    a = np.asarray(Image.open(io.BytesIO(out.getvalue())).convert("RGBA"), dtype=float)
    b = np.asarray(Image.open(io.BytesIO(kept)).convert("RGBA"), dtype=float)
    assert a.shape == b.shape and np.abs(a - b).mean() < 2.0  # of 255: the same picture to the eye

