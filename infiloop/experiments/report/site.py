"""The recorded profiles as a static site under ``docs/site/``: results a reader can open before running anything.

::

    docs/site/index.html                 the recorded profiles, a line each
    docs/site/<profile>/index.html       the profile's report, rendered from its record (docs/results/<profile>/)
    docs/site/<profile>/figures/         the figures of the run recorded last (PNG re-encoded with a 256-colour palette)
    docs/site/<profile>/notebooks/       that run's executed notebooks, a page each, and their images
    docs/site/notebook.css               nbconvert's style sheet, shared by every notebook page
    docs/site/<profile>/site.json        where the figures and notebooks came from: the run's seeds, commit, machine

``python -m infiloop results --record PROFILE`` keeps the run's figures and notebooks (:func:`keep`) and renders
every page again (:func:`write`); ``results`` alone and ``results --redecide`` render the pages again from the
record and what was kept. A page is a function of those two only (no build time, nothing of the machine that
builds it), so :func:`stale` renders each one again and compares it byte for byte: the suite's check that the site
is current with the records.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

from ... import paths
from ...io import atomic_write_text
from .build import ABOUT, _all_claims, claims_html, notebook_section, page
from .markup import esc, warn
from .records import RECORDED, parts

SITE = paths.DOCS / "site"  # beside(): the records' folder's sibling
MANIFEST = "site.json"
FIGURES, NOTEBOOKS, STYLE = "figures", "notebooks", "notebook.css"
MAX_BYTES = 15 * 2**20  # the whole site: small enough to clone with the repository and to read on a slow link


def _recorded(recorded: Path | None) -> Path:
    return RECORDED if recorded is None else Path(recorded)


def beside(recorded: Path | None = None) -> Path:
    """The site of the records in ``recorded`` (default ``docs/results``): ``site/`` beside it (``docs/site``)."""
    return _recorded(recorded).parent / "site"


def _summaries(profile: str, recorded: Path) -> list[dict]:
    from .summaries import order_by_notebook

    files = {p.stem: p for p in sorted((recorded / profile).glob("[0-9][0-9]_*.json"))}
    return [json.loads(files[name].read_text(encoding="utf-8")) for name in order_by_notebook(files)]


def _short(commit: str | None) -> str:
    head = str(commit or "").split(" ")[0][:10]
    return head + (" (uncommitted changes)" if "uncommitted" in str(commit or "") else "") if head else "unknown"


def _seed_list(seeds) -> str:
    seeds = sorted(int(s) for s in seeds or [])
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds)) or "none"


def palette_png(data: bytes) -> bytes:
    """A PNG re-encoded with an adaptive 256-colour palette: a third to a half of matplotlib's size, and
    indistinguishable on a plot (its colours are few; only the anti-aliased edges are approximated)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im = im.convert("RGBA" if "A" in im.getbands() else "RGB")
        small = im.quantize(colors=256, method=Image.Quantize.FASTOCTREE)
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
    return out.getvalue() if out.tell() < len(data) else data


def _notebook_page(nb_path: Path, banner: str, title: str) -> tuple[str, dict[str, bytes], str]:
    """One executed notebook as an HTML page (nbconvert's lab template, no scripts), its images as files beside it
    (``<notebook>_<cell>_<output>.png``, re-encoded by :func:`palette_png`: the page holds no encoded image data), and
    its style sheet, taken out so that every page of the site shares one file (:data:`STYLE`, at the site's top)."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import ExtractOutputPreprocessor

    exporter = HTMLExporter(template_name="lab")
    exporter.register_preprocessor(ExtractOutputPreprocessor(extract_output_types={"image/png"}), enabled=True)
    exporter.mathjax_url = exporter.require_js_url = ""
    body, resources = exporter.from_notebook_node(nbformat.read(nb_path, as_version=4), resources={
        "metadata": {"name": f"InfiLoop companion · {title}"}, "unique_key": nb_path.stem})
    images = {name: palette_png(data) for name, data in resources.get("outputs", {}).items()}
    body = re.sub(r"<script\b.*?</script>\s*", "", body, flags=re.S)
    styles = re.findall(r"<style[^>]*>(.*?)</style>", body, flags=re.S)
    body = re.sub(r"<style[^>]*>.*?</style>\s*", "", body, flags=re.S)
    body = body.replace("</head>", f'<link rel="stylesheet" href="../../{STYLE}">\n</head>', 1)
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1)
    return body, images, "\n".join(styles)


def keep(profile: str, results: Path | None = None, checkout: Path | None = None, site: Path | None = None) -> Path:
    """Keep the figures and executed notebooks of the run in ``results/<profile>/`` as the site's, in place of any
    kept before (written beside, then swapped in, so an interrupted call leaves the old ones whole); the run's
    seeds, commit and machine go to ``site.json``. Returns the profile's site folder."""
    results = (paths.RESULTS if results is None else Path(results)) / profile
    checkout = paths.ROOT if checkout is None else Path(checkout)
    site = SITE if site is None else Path(site)
    summaries = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((results / "summaries").glob("*.json"))]
    new = site / f".{profile}.new"
    shutil.rmtree(new, ignore_errors=True)
    (new / FIGURES).mkdir(parents=True)
    figures = []
    for s in summaries:
        for fig in s.get("figures") or []:
            rel = Path(str(fig.get("path") if isinstance(fig, dict) else fig))
            src = rel if rel.is_absolute() else checkout / rel
            if src.is_file():
                data = src.read_bytes()
                (new / FIGURES / src.name).write_bytes(palette_png(data) if src.suffix == ".png" else data)
                figures.append(src.name)
    first = parts(summaries[0])[-1] if summaries else {}
    env = first.get("environment") or {}
    run = {"seeds": first.get("seeds", []), "commit": env.get("commit"), "cpu": env.get("cpu"),
           "numeric": (env.get("numeric") or {}).get("mode", "native"), "created": first.get("created")}
    notebooks, style = [], ""
    for nb_path in sorted(results.glob("[0-9][0-9]_*.ipynb")):
        page, images, style = _notebook_page(nb_path, _notebook_banner(profile, nb_path.stem, run),
                                             f"notebook {nb_path.stem} at profile {profile}")
        (new / NOTEBOOKS).mkdir(exist_ok=True)
        (new / NOTEBOOKS / f"{nb_path.stem}.html").write_text(page, encoding="utf-8")
        for name, data in images.items():
            (new / NOTEBOOKS / name).write_bytes(data)
        notebooks.append(nb_path.stem)
    if notebooks:  # nbconvert's style sheet, the same for every page of a version of it: one file for the site
        atomic_write_text(site / STYLE, style)
    manifest = {"profile": profile, "run": run, "figures": sorted(figures), "notebooks": notebooks}
    (new / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    old = site / f".{profile}.old"
    shutil.rmtree(old, ignore_errors=True)
    if (site / profile).exists():
        (site / profile).rename(old)
    new.rename(site / profile)
    shutil.rmtree(old, ignore_errors=True)
    return site / profile


def _run_line(run: dict) -> str:
    return (f"the run of seed(s) {esc(_seed_list(run.get('seeds')))} at commit {esc(_short(run.get('commit')))} on "
            f"{esc(run.get('cpu') or 'an unnamed machine')} ({esc(run.get('numeric'))} numeric mode), "
            f"{esc(str(run.get('created') or '')[:10])}")


def _notebook_banner(profile: str, name: str, run: dict) -> str:
    return (f'<div style="background:#eef4fb;border:1px solid #9bb8d8;padding:.5em .8em;margin:.5em 0;'
            f'font-family:system-ui,sans-serif">Notebook <strong>{esc(name)}</strong> at profile '
            f"<strong>{esc(profile)}</strong>, as executed by {_run_line(run)}. Its summary in the record: "
            f"<code>docs/results/{esc(profile)}/{esc(name)}.json</code>. "
            f'<a href="../index.html#nb-{esc(name)}">Back to the report</a>.</div>')


def _manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def _kept_figure(folder: Path, manifest: dict):
    def figure(fig: dict) -> tuple[str, str | None]:
        name = Path(str(fig.get("path") or "")).name
        caption = f"<figcaption>{esc(fig.get('caption', ''))}</figcaption>" if fig.get("caption") else ""
        if name in manifest.get("figures", []) and (folder / FIGURES / name).is_file():
            return (f'<figure><img src="{FIGURES}/{esc(name)}" alt="{esc(fig.get("caption") or name)}">'
                    f"{caption}</figure>"), None
        problem = f"figure not kept: {name} (the run kept here, {_seed_list(manifest['run'].get('seeds'))}, drew none)"
        return f'<figure class="missing">{warn(problem)}{caption}</figure>', problem
    return figure


def _sittings(summaries: list[dict]) -> str:
    """The record's sittings, a line each: seeds, commit, machine, date (as the main summary keeps them)."""
    rows = []
    for part in parts(summaries[0]) if summaries else []:
        env = part.get("environment") or {}
        rows.append(f"<li>seed(s) {esc(_seed_list(part.get('seeds')))}: commit {esc(_short(env.get('commit')))}, "
                    f"{esc(env.get('cpu') or 'machine not recorded')}, {esc(str(part.get('created') or '')[:10])}</li>")
    return "<ul>" + "".join(rows) + "</ul>"


def render(profile: str, recorded: Path | None = None) -> str:
    """The profile's page: every recorded notebook's section (verdicts, figures kept from the run, tables, text),
    every claim, and where each part came from."""
    recorded, site = _recorded(recorded), beside(recorded)
    folder = site / profile
    manifest = _manifest(folder)
    summaries = _summaries(profile, recorded)
    problems: list[str] = []
    claims = _all_claims(summaries, profile, problems)
    figure = _kept_figure(folder, manifest)
    sections = []
    for s in summaries:
        mine = [c for c in claims if c.get("notebook") == s.get("notebook") and not c.get("unreported")]
        section, missing = notebook_section(s, None, mine, pages=NOTEBOOKS, figure=figure,
                                            linked=s.get("notebook") in manifest.get("notebooks", []))
        sections.append(section)
        problems += missing
    problem_html = ("<ul>" + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>") if problems else "<p>none.</p>"
    return page(f"InfiLoop companion · recorded results · {esc(profile)}", f"""<header>
<p class="meta"><a href="../index.html">All recorded profiles</a></p>
<h1>InfiLoop companion: the recorded results at profile {esc(profile)}</h1>
{ABOUT}
<p class="meta">Tables, claims and verdicts: the record <code>docs/results/{esc(profile)}/</code>, made in these
sittings:</p>{_sittings(summaries)}
<p class="meta">Figures and the executed notebooks: {_run_line(manifest["run"])}.
A figure shows that run's seeds only; where they are fewer than the record's, the tables and claims are the
record's. Re-run: <code>./reproduce.sh --profile {esc(profile)}</code>.</p>
</header>
{"".join(sections)}
<section id="claims"><h2>Every claim, checked (the paper's, and the looped-LM study's: ids study.*)</h2>
{claims_html(claims)}
</section>
<section id="problems"><h2>Missing</h2>{problem_html}</section>""")


def render_index(recorded: Path | None = None) -> str:
    """The site's first page: each profile with a site, its record's notebooks and seeds, and its run."""
    recorded, site = _recorded(recorded), beside(recorded)
    rows = []
    for profile in profiles_with_site(site):
        summaries = _summaries(profile, recorded)
        seeds = sorted({seed for p in (parts(summaries[0]) if summaries else []) for seed in p.get("seeds", [])})
        rows.append(f'<li><a href="{esc(profile)}/index.html"><strong>{esc(profile)}</strong></a>: '
                    f"{len(summaries)} notebooks, seed(s) {esc(_seed_list(seeds))} in the record; figures from "
                    f"{_run_line(_manifest(site / profile)['run'])}</li>")
    return page("InfiLoop companion · recorded results", f"""<h1>InfiLoop companion: recorded results</h1>
<p>Each profile's report as this project recorded it (<code>docs/results/</code>), with the figures and executed
notebooks of a run: to read before running anything. <code>docs/results.md</code> says how each record was made;
<code>./reproduce.sh</code> makes the default one again on your machine.</p>
<ul>{"".join(rows)}</ul>""")


def profiles_with_site(site: Path | None = None) -> list[str]:
    """The profiles that have kept figures and notebooks (a ``site.json``), in the profiles' defining order."""
    from ..settings import profiles

    site = SITE if site is None else Path(site)
    mine = {p.parent.name for p in site.glob(f"*/{MANIFEST}")}
    return [p for p in profiles.PROFILES if p in mine] + sorted(mine - set(profiles.PROFILES))


def _pages(recorded: Path) -> dict[Path, str]:
    site = beside(recorded)
    pages = {site / p / "index.html": render(p, recorded) for p in profiles_with_site(site)}
    pages[site / "index.html"] = render_index(recorded)
    return pages


def write(recorded: Path | None = None) -> list[Path]:
    """Render every page again from the record and what was kept; the pages that changed."""
    recorded = _recorded(recorded)
    changed = []
    for path, text in _pages(recorded).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            changed.append(atomic_write_text(path, text))
    return changed


def stale(recorded: Path | None = None) -> list[str]:
    """What keeps the site from being current: a page that renders differently now, a kept figure or notebook
    missing, a profile kept without a record; one line each (empty: current)."""
    recorded, site = _recorded(recorded), beside(recorded)
    lines = []
    for profile in profiles_with_site(site):
        if not (recorded / profile).is_dir():
            lines.append(f"{site / profile}: kept, but {recorded / profile} holds no record")
            continue
        m = _manifest(site / profile)
        lines += [f"{site / profile / FIGURES / f}: listed in {MANIFEST}, missing" for f in m["figures"]
                  if not (site / profile / FIGURES / f).is_file()]
        for n in m["notebooks"]:
            page = site / profile / NOTEBOOKS / f"{n}.html"
            if not page.is_file():
                lines.append(f"{page}: listed in {MANIFEST}, missing")
                continue
            lines += [f"{page}: shows {src}, missing" for src in re.findall(r'src="([^"]+)"', page.read_text("utf-8"))
                      if not src.startswith("data:") and not (page.parent / src).is_file()]
        if m["notebooks"] and not (site / STYLE).is_file():
            lines.append(f"{site / STYLE}: the notebook pages' style sheet, missing")
    if lines:
        return lines
    for path, text in _pages(recorded).items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            lines.append(f"{path}: not current with the record (python -m infiloop results renders it again)")
    return lines


def size(site: Path | None = None) -> int:
    """The site's size in bytes (every file under it)."""
    site = SITE if site is None else Path(site)
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file())

