"""The reporting layer: figure style and saving (infiloop.analysis.plotting) and the HTML report
(infiloop.experiments.report.build).

The report is built in a temporary root from summary JSON files constructed here and a PNG rendered
here with matplotlib: this tests the report builder, not any experiment.
"""

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib as mpl
import pytest
from matplotlib.figure import Figure

from infiloop.analysis import paper, plotting
from infiloop.experiments.notebooks.helper import write_summary
from infiloop.experiments.report import build as report
from infiloop.experiments.report import markup, summaries

CHROMIUM = Path("/usr/bin/chromium")
EVIL = '<script>alert("x")</script> & <b>'


def _figure():
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0, 1, 4], color=plotting.COLORS["infiloop"], label=plotting.LABELS["infiloop"])
    plotting.profile_note(ax, "tiny", 256)
    return fig


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tmp root with three summaries (one unreadable), one PNG, one missing figure, a failed stage."""
    root = tmp_path_factory.mktemp("root")
    with mpl.rc_context():
        plotting.use_style()
        png, _ = plotting.save_figure(_figure(), "depth_scaling", "tiny", root=root)
    summaries = root / "results" / "tiny" / "summaries"
    claim = {"profile": "tiny", "paper": "p", "ours": "o", "note": "n"}
    _write(summaries / "01_main_table.json", {
        "notebook": "01_main_table", "title": "Main table", "profile": "tiny", "created": "2026-11-29T10:00:00Z",
        "wall_time_s": 1.5, "text": "Main **result**.",
        "figures": [],
        "tables": [{"title": "MAIN-TABLE-TITLE", "columns": ["model", "sudoku"],
                    "rows": [["InfiLoop (ours)", 61.25], ["TRM (paper)", 74.7], ["none", None]], "note": "exact %"},
                   {"title": "SECOND-TABLE", "columns": ["a"], "rows": [[1]]}],
        "claims": [{"id": "main.infiloop_beats_carry_last_sudoku", "claim": "beats", "agrees": True, **claim}]})
    _write(summaries / "02_depth_scaling.json", {
        "notebook": "02_depth_scaling", "title": "Depth scaling", "profile": "tiny", "created": "2026-11-29T10:01:00Z",
        "wall_time_s": 12.3, "text": f"Conclusion {EVIL}\n\n- first point\n- second `code`",
        "figures": [{"path": "figures/tiny/depth_scaling.png", "caption": f"caption {EVIL}"},
                    {"path": "figures/tiny/nope.png", "caption": "never made"}],
        "tables": [],
        "claims": [{"id": "depth.infiloop_improves_with_depth", "claim": EVIL, "agrees": False, **claim},
                   {"id": "depth.carry_last_degrades", "claim": "degrades", "agrees": None, **claim},
                   {"id": "depth.extra", "claim": "an extra claim", "agrees": True, **claim},
                   {"id": "depth.unmeasured", "claim": "not measured here", "agrees": None, **claim, "ours": ""}]})
    _write(summaries / "03_gamma_dynamics.json", "{not json")
    _write(summaries / "04_perturbation.json", {
        "notebook": "04_perturbation", "title": "Perturbation", "profile": "tiny", "created": "2026-11-29T10:02:00Z",
        "claims": _claims_with_effects()})
    _write(root / "results" / "tiny" / "stages.json", {
        "started": "2026-11-29T09:59:00Z", "finished": "2026-11-29T10:02:00Z",
        "stages": [{"name": "data", "seconds": 3.1, "status": "ok"},
                   {"name": "04_perturbation", "seconds": 40.2, "status": "failed", "error": "boom <err>"}]})
    out = report.build_report("tiny", root=root)
    return root, out, out.read_text(encoding="utf-8"), png


def _claims_with_effects() -> list[dict]:
    """Notebook 04's claims as the analysis writes them: one from three seeds, untestable; one from one seed."""
    import numpy as np

    from infiloop.analysis import claims

    solved = [np.arange(100) < 60] * 3
    kept = claims.claim_dict("perturb.infiloop_retains", "InfiLoop kept all", effect=claims.proportion(
        [np.zeros(100, bool)] * 3, solved), untestable="the perturbation moved no model")
    lost = claims.claim_dict("perturb.carry_last_loses", "carry-last lost none",
                             effect=claims.proportion([np.zeros(100, bool)], solved[:1]))
    return [{**kept, "profile": "tiny"}, {**lost, "profile": "tiny"}]


def test_save_figure_writes_png_and_pdf_atomically(tmp_path):
    paths = plotting.save_figure(_figure(), "fig_a", "tiny", root=tmp_path)
    assert paths == [tmp_path / "figures" / "tiny" / "fig_a.png", tmp_path / "figures" / "tiny" / "fig_a.pdf"]
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes().startswith(b"%PDF")
    assert sorted(p.name for p in paths[0].parent.iterdir()) == ["fig_a.pdf", "fig_a.png"]  # no temp files
    with pytest.raises(ValueError):
        plotting.save_figure(_figure(), "../escape", "tiny", root=tmp_path)


def test_style_colours_and_profile_note():
    assert {"carry_last", "infiloop", "fprm", "full_attnres", "paper"} <= set(plotting.COLORS)
    assert set(plotting.LABELS) == set(plotting.COLORS)
    assert len(set(plotting.COLORS.values())) == len(plotting.COLORS)
    with mpl.rc_context():
        plotting.use_style()
        assert mpl.rcParams["savefig.dpi"] == plotting.PNG_DPI
    fig = Figure()
    assert plotting.profile_note(fig, "paper", 32768).get_text() == "profile: paper · 32,768 puzzles"
    assert plotting.profile_note(fig.add_subplot(), "tiny").get_text() == "profile: tiny"


def test_report_is_self_contained(built):
    root, out, text, _ = built
    assert out == root / "results" / "tiny" / "report.html"
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert "<script" not in text.lower() and "<link" not in text.lower() and "@import" not in text
    assert "mathjax" not in text.lower() and "require.js" not in text.lower()
    assert sorted(p.name for p in out.parent.iterdir()) == ["packages.txt", "report.html", "stages.json", "summaries"]


def test_figures_embedded_and_missing_flagged(built):
    _, _, text, png = built
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == text.count("<img") == 1
    assert base64.b64decode(images[0]) == png.read_bytes()
    assert text.count("figure missing: figures/tiny/nope.png") == 2  # in place and in the problem list
    problems = text[text.index('<div id="problems">'):]
    assert "nope.png" in problems


def test_text_is_escaped(built):
    _, _, text, _ = built
    assert EVIL not in text and "<b>" not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;" in text
    assert "boom &lt;err&gt;" in text
    assert "<strong>result</strong>" in text and "<li>second <code>code</code></li>" in text


def test_order_main_table_first(built):
    _, _, text, _ = built
    pos = [text.index(s) for s in ('id="nb-01_main_table"', "MAIN-TABLE-TITLE", 'id="nb-02_depth_scaling"',
                                   'id="claims"', 'id="provenance"')]
    assert pos == sorted(pos)
    assert text.count("MAIN-TABLE-TITLE") == 1 and text.count("SECOND-TABLE") == 1
    assert "61.25" in text and "<td>–</td>" in text


def test_claims_table(built):
    from infiloop.analysis.intervals import RULE, multiplicity

    _, _, text, _ = built
    claims = text[text.index('id="claims"'):text.index('id="provenance"')]
    reported = 7
    unreported = len(paper.CLAIMS) - 5  # five of the paper's claims were reported
    assert claims.count('<tr class="claim"') == reported + unreported
    assert '<td class="yes">✓</td>' in claims and '<td class="no">✗</td>' in claims
    assert '<td class="undecided">?</td>' in claims  # measured, neither agrees nor differs
    assert '<td class="na">⊘</td>' in claims and "untestable: the perturbation moved no model" in claims
    assert '<td class="no">✗¹</td>' in claims  # differs, from one trained model: marked
    assert (f"2 agree ✓, 0 smaller than the paper's ↓, 2 differ ✗, 1 undecided ?, 1 untestable ⊘, 1 not measured "
            f"at this profile –, {unreported} "
            "not reported by any notebook; 1 verdict(s) from one trained model ¹") in claims
    assert "0.0 [0.0, 6.0] points; the paper +15 (half: +7.5)" in claims  # the effect beside the paper's
    assert "<th>seeds</th>" in claims and "kept all</td><td>3</td>" in claims  # each claim's seeds
    # the rule is stated once in the report, with the multiplicity sentence and the one-model mark explained
    assert text.count("The rule: ") == 1 and markup.inline(RULE) in claims
    assert markup.esc(multiplicity(reported)) in claims and "¹ one trained model per connection" in claims


def test_provenance_and_problems(built):
    _, _, text, _ = built
    prov = text[text.index('id="provenance"'):]
    for key in ("git commit", "python", "torch", "numpy", "matplotlib", "cpu", "cuda device"):
        assert f"<th>{key}</th>" in prov
    assert "40.2" in prov and "failed" in prov
    problems = prov[prov.index('<div id="problems">'):]
    for name in ("03_gamma_dynamics: summary unreadable", "05_beta0_ablation: no summary",
                 "stage 04_perturbation: failed"):
        assert name in problems, name


def test_missing_everything_says_so(tmp_path, capsys):
    assert report.main(["--profile", "tiny", "--root", str(tmp_path)]) == 0
    out = Path(capsys.readouterr().out.strip())
    text = out.read_text(encoding="utf-8")
    assert out == tmp_path / "results" / "tiny" / "report.html"
    assert "stages.json not found" in text and "no main table" in text
    assert "97.9" in text  # the paper's Table 1 is shown instead
    assert text.count('<tr class="claim"') == len(paper.CLAIMS)
    with pytest.raises(ValueError):
        report.build_report("../x", root=tmp_path)


def _decoded_in_chromium(html_text: str, tmp_path: Path) -> str:
    """Load a page in headless Chromium with a probe script; return the dumped <body ...> tag."""
    probe = ("<script>window.onload = () => { const imgs = [...document.images];"
             " document.body.dataset.nimages = imgs.length;"
             " document.body.dataset.decoded = imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0);"
             " };</script>")
    page = tmp_path / "probe.html"
    page.write_text(html_text.replace("</body>", f"{probe}</body>"), encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    body = re.search(r"<body[^>]*>", res.stdout)
    assert body, f"chromium printed no DOM (rc {res.returncode}): {res.stderr[-2000:]}"
    return body.group(0)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                    "(apt-get install -y chromium); CI installs it")
def test_images_decode_in_chromium(built, tmp_path):
    _, _, text, _ = built
    # A second copy of the real PNG, so that "every image" means more than one.
    extra = re.search(r"<figure><img[^>]+>", text).group(0) + "</figure>"
    body = _decoded_in_chromium(text.replace("</body>", f"{extra}</body>"), tmp_path)
    assert 'data-nimages="2"' in body and 'data-decoded="true"' in body, body
    # Negative control: the same probe reports a corrupt image.
    broken = re.sub(r"base64,[A-Za-z0-9+/=]{40}", "base64,AAAAAAAA", extra)
    body = _decoded_in_chromium(text.replace("</body>", f"{broken}</body>"), tmp_path)
    assert 'data-nimages="2"' in body and 'data-decoded="false"' in body, body


def test_write_summary_round_trip(tmp_path):
    import numpy as np

    png, _ = plotting.save_figure(_figure(), "fig_b", "tiny", root=tmp_path)
    summary = {"notebook": "05_beta0_ablation", "title": "Ablations", "profile": "tiny", "wall_time_s": np.float64(2.5),
               "text": "t", "figures": [{"path": png, "caption": "c"}],
               "tables": [{"title": "x", "columns": ["a"], "rows": np.array([[1.5], [2.0]])}],
               "claims": [{"id": "ablation.reverse_fails", "claim": "c", "paper": "2.0 %", "ours": "3 %",
                           "agrees": True, "profile": "tiny", "note": ""}]}
    path = write_summary(summary, root=tmp_path)
    assert path == tmp_path / "results" / "tiny" / "summaries" / "05_beta0_ablation.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["figures"][0]["path"] == "figures/tiny/fig_b.png"
    assert data["tables"][0]["rows"] == [[1.5], [2.0]] and data["wall_time_s"] == 2.5
    text = report.build_report("tiny", root=tmp_path).read_text(encoding="utf-8")
    assert text.count("<img src=\"data:image/png;base64,") == 1 and "wall time 2.5 s" in text
    with pytest.raises(ValueError):
        write_summary({**summary, "claims": [{"id": "x", "agrees": "yes"}]}, root=tmp_path)
    with pytest.raises(ValueError):
        write_summary({"notebook": "01_main_table"}, root=tmp_path)


def test_animations_embedded_with_their_size(tmp_path, monkeypatch):
    from PIL import Image

    gif = tmp_path / "figures" / "tiny" / "watch_race.gif"
    gif.parent.mkdir(parents=True)
    frames = [Image.new("RGB", (8, 6), c) for c in ("red", "blue", "green")]
    frames[0].save(gif, save_all=True, append_images=frames[1:], duration=100, loop=0)
    write_summary({"notebook": "07_watch_the_loop", "title": "Watch the loop", "profile": "tiny", "text": "t",
                          "figures": [{"path": gif, "caption": "the race"}]}, root=tmp_path)
    text = report.build_report("tiny", root=tmp_path).read_text(encoding="utf-8")
    data = re.findall(r'<img src="data:image/gif;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(data) == 1 and base64.b64decode(data[0]) == gif.read_bytes()
    assert f"the race (animated GIF, {gif.stat().st_size / 1e6:.2f} MB)" in text
    monkeypatch.setattr(report, "MAX_EMBED_BYTES", 100)  # a file over the bound is named, not embedded
    text = report.build_report("tiny", root=tmp_path).read_text(encoding="utf-8")
    assert "data:image/gif" not in text
    assert "figure not embedded: figures/tiny/watch_race.gif" in text[text.index('<div id="problems">'):]


def test_a_profile_without_some_notebooks_does_not_call_them_missing(tmp_path):
    _, problems = summaries.load_summaries("search", tmp_path)
    missing = {p.split(":")[0] for p in problems}
    assert missing == {"01_main_table", "02_depth_scaling", "03_gamma_dynamics", "04_perturbation",
                       "07_watch_the_loop"}  # 05 and 06 are not in the search profile's list
    from infiloop.experiments.notebooks.declarations import profile_notebooks

    tiny = {p.split(":")[0] for p in summaries.load_summaries("tiny", tmp_path)[1]}
    assert tiny == set(profile_notebooks("tiny")) == set(paper.NOTEBOOKS) - {"09_overthinking"}  # 09: smoke, overthink


def test_one_heading_per_notebook_and_its_verdicts_beside_its_figures(built):
    _, _, text, _ = built
    headings = re.findall(r"<h2>(.*?)</h2>", text)
    assert len(headings) == len(set(headings)), headings
    assert headings[:2] == ["Main table", "Depth scaling"]  # the notebooks' own titles, nothing added before them
    depth = text[text.index('id="nb-02_depth_scaling"'):text.index('id="nb-04_perturbation"')]
    assert depth.index('<ul class="verdicts">') < depth.index("<figure") < depth.index("<details>")
    assert depth.count("<li><span class=") == 4 and '<span class="no">✗</span>' in depth
    assert "not measured at this profile" in depth
    perturbation = text[text.index('id="nb-04_perturbation"'):text.index('id="claims"')]
    assert '<span class="no">✗¹</span>' in perturbation and "effect 0.0 [0.0, 6.0] points" in perturbation


@pytest.mark.parametrize("notebook", ["01_main_table", "02_depth_scaling", "03_gamma_dynamics", "06_conditioning",
                                      "07_watch_the_loop"])
def test_the_default_run_is_not_marked_and_one_changed_parameter_is_named_alone(notebook):
    """A depth parameter's default 0 resolves to the profile's depth (``max_updates 0`` -> 240 at quick); compared
    as resolved, the default run's notebooks change no parameter (it once read "-p max_updates 240"), and a re-run
    with one parameter set names that one alone, even set to what the default resolves to (no mark then)."""
    from infiloop.experiments.notebooks.helper import changed_parameters
    from infiloop.experiments.notebooks.manifest import needs
    from infiloop.experiments.notebooks.parameters import DEPTH_PARAMETERS, notebook_defaults
    from infiloop.experiments.settings import profiles

    assert changed_parameters(notebook, needs(notebook, "quick")) == {}
    depth = next(k for k in DEPTH_PARAMETERS if k in notebook_defaults(notebook))
    assert changed_parameters(notebook, needs(notebook, "quick", **{depth: 48})) == {depth: 48}
    assert changed_parameters(notebook, needs(notebook, "quick", **{depth: profiles.depth("quick")})) == {}


def test_a_section_made_apart_from_the_default_run_says_so(tmp_path):
    """A notebook re-run alone with other parameters (``--only 02 -p max_updates 480``, or interactively) is marked
    in its section with those parameters, and the provenance names the commit each notebook ran at where it is not
    the report's: the two runs are not presented as one (issue 64)."""
    summaries = tmp_path / "results" / "tiny" / "summaries"
    base = {"profile": "tiny", "created": "2026-11-29T10:00:00Z", "text": "t", "figures": [], "tables": [],
            "claims": []}
    _write(summaries / "01_main_table.json", {**base, "notebook": "01_main_table", "title": "Main table",
                                              "environment": {"commit": "aaaaaaaaaaaa1234 (clean tree)"}})
    _write(summaries / "02_depth_scaling.json", {**base, "notebook": "02_depth_scaling", "title": "Depth",
                                                 "parameters": {"max_updates": 480},
                                                 "environment": {"commit": "bbbbbbbbbbbb5678 (clean tree)"}})
    text = report.build_report("tiny", root=tmp_path).read_text(encoding="utf-8")
    main, depth = (text[text.index(f'id="nb-{n}"'):] for n in ("01_main_table", "02_depth_scaling"))
    assert "made with parameters other than its defaults" not in main[:main.index("</section>")]
    assert "made with parameters other than its defaults, so not the default run&#x27;s: -p max_updates 480" in \
        depth[:depth.index("</section>")] and "commit bbbbbbbbbb" in depth
    prov = text[text.index('id="provenance"'):]
    assert "notebooks run at" in prov and "aaaaaaaaaa: notebook(s) 01; bbbbbbbbbb: notebook(s) 02" in prov
