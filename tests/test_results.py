"""The README's results table: rendered from the recorded summaries, and stale when they change."""

from __future__ import annotations

import json

import pytest

from infiloop import paths
from infiloop.errors import DataError, UsageError
from infiloop.experiments.report import results


def summary(notebook: str, profile: str, claims: list[dict]) -> dict:
    return {"notebook": notebook, "title": notebook, "profile": profile, "created": "2026-12-01T12:00:00Z",
            "claims": claims}


def test_the_readme_table_is_the_rendering_of_the_recorded_summaries():
    """A summary recorded without re-rendering (``python -m infiloop results``) fails here."""
    text = (paths.ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index(results.START):text.index(results.END) + len(results.END)]
    assert block == f"{results.START}\n{results.render_compact(only=results.HEADLINE)}\n{results.END}"
    assert len(text.splitlines()) <= 200, "the README is the front door: at most 200 lines"
    rows = [ln for ln in block.splitlines() if ln.startswith("| ")]
    too_long = [cell for ln in rows for cell in ln.strip("|").split(" | ") if len(cell.strip()) > results.CELL]
    assert len(rows) > 2 and not too_long, too_long  # one short row per claim, taken in at a glance
    from infiloop.analysis.intervals import RULE

    assert text.count(RULE) == 1 and text.count("The rule: ") == 1  # the rule, stated once


def test_no_recorded_share_is_printed_outside_its_range():
    """A share printed as ``x % [lo, hi]`` in a recorded summary lies in [0, 100] (intervals of a share are clipped
    to it; a signed difference of shares is printed in points). Recorded 74.2 % [33.6, 114.9] before 9432fb9."""
    import re

    share = re.compile(r"(-?\d+(?:\.\d+)?) % \[(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\]")
    bad = [(f.relative_to(paths.ROOT).as_posix(), m.group(0))
           for f in sorted((paths.ROOT / "docs" / "results").glob("*/*.json"))
           for m in share.finditer(f.read_text(encoding="utf-8"))
           if not 0.0 <= float(m.group(2)) <= float(m.group(1)) <= float(m.group(3)) <= 100.0]
    assert not bad, bad


def test_recorded_search_claims_are_decided_by_the_rule():
    """The `search` record (as data since 2026-12-05; it grows seed by seed): every claim carries its effect and is
    decided by the rule. Carry-last kept every solved puzzle at ε = 0: its loss, 0 of 759 on five seeds, rules out
    the paper's 15–20 % (differs); InfiLoop's retention is untestable, as the perturbation cost no model a solved
    puzzle. A record merged from parts gives each seed's effect in its place of the solved counts."""
    import re

    by_id = {c["id"]: c for c in results.recorded_claims() if c["profile"] == "search"}
    assert by_id and all("rule" in c and "effect" in c for c in by_id.values())
    loses, keeps = by_id["perturb.carry_last_loses"], by_id["perturb.infiloop_retains"]
    assert loses["agrees"] is False and loses["seeds"] >= 4
    assert loses["effect"]["hi"] < 0.0075 and loses["effect"]["value"] == 0.0
    solved = re.search(r"0\.0 % \[0\.0, \d\.\d\] of ([\d / ]+) solved puzzles", loses["ours"])
    by_seed = re.search(r"the effect by seed \(([^)]*)\)", loses["ours"])  # a record merged from parts
    assert solved or by_seed, loses["ours"]
    assert len(solved[1].split(" / ") if solved else by_seed[1].split(", ")) == loses["seeds"], loses["ours"]
    assert keeps["agrees"] is None and "cost no model more than 7.5 %" in keeps["untestable"]
    assert results.verdict_cell(loses) == "differs" and results.verdict_cell(keeps) == "untestable"


def test_a_claim_recorded_before_the_rule_is_marked():
    """A claim without the rule's record (no "rule", no effect) keeps its verdict, marked † and explained under the
    table; one from one trained model is marked ¹."""
    claim = {"id": "main.infiloop_beats_carry_last_sudoku", "claim": "c", "paper": "p", "ours": "o", "agrees": True,
             "note": "1 seed(s)"}
    old = summary("01_main_table", "quick", [claim])
    assert results.verdict_cell(claim).startswith("agrees") and results.verdict_cell(claim).endswith(
        "(earlier rule†)")
    assert "recorded without its effect" in _render([old]) and results.EARLIER_NOTE in _render([old])


def _render(summaries: list[dict]) -> str:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        for s in summaries:
            f = Path(d) / s["profile"] / f"{s['notebook']}.json"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps(s), encoding="utf-8")
        return results.render_table(Path(d))


def test_every_recorded_profile_has_its_current_table_in_docs_results():
    """docs/results.md holds one block per recorded profile, each the rendering of that profile's summaries; and
    every page that ``python -m infiloop results`` fills (README.md, docs/results.md, docs/statistics.md: tables,
    headline, table by seed, by CPU, power) is its rendering of the records. One test renders them all, in one
    process, so that the records' intervals are computed once (``power.per_seed_effects`` caches them)."""
    text = (paths.DOCS / "results.md").read_text(encoding="utf-8")
    recorded = sorted(p.name for p in results.RECORDED.iterdir() if p.is_dir() and any(p.glob("*.json")))
    assert "quick" in recorded and "search" in recorded
    for name in recorded:
        start, end = results.markers(name)
        assert start in text and end in text, f"docs/results.md lacks the block of {name}"
    for page in results.PAGES:
        text = page.read_text(encoding="utf-8")
        assert results.render_blocks(text) == text, f"{page.name} is stale: run `python -m infiloop results`"


def test_record_and_render(tmp_path, monkeypatch):
    res, rec = tmp_path / "results", tmp_path / "recorded"
    folder = res / "smoke" / "summaries"
    folder.mkdir(parents=True)
    claims = [{"id": "a", "claim": "InfiLoop beats | carry-last", "paper": "97.9 vs 74.7 %", "ours": "90 vs 80 %",
               "agrees": True},
              {"id": "b", "claim": "it keeps rising", "paper": "+6", "ours": "+0.1 [−0.2, +0.3]", "agrees": None},
              {"id": "c", "claim": "not at this profile", "paper": "x", "ours": "", "agrees": None}]
    (folder / "01_main_table.json").write_text(json.dumps(summary("01_main_table", "smoke", claims[:1])))
    (folder / "02_depth_scaling.json").write_text(json.dumps(summary("02_depth_scaling", "smoke", claims[1:])))
    written = results.record("smoke", res, rec)
    assert sorted(p.name for p in written) == ["01_main_table.json", "02_depth_scaling.json"]
    table = results.render_table(rec)
    lines = table.splitlines()
    assert lines[2] == ("| 01 | InfiLoop beats \\| carry-last | – | 97.9 vs 74.7 % | 90 vs 80 % | – | recorded "
                        "without its effect | agrees (earlier rule†) |")  # "decided at": no depth named for claim "a"
    assert "| main.infiloop_beats_carry_last_sudoku |" not in table and results.render_table().count(
        "| training depth (the depth-fair columns of notebook 01 beside it) |") >= 1
    assert lines[3].endswith("| undecided (earlier rule†) |") and lines[4].endswith("| – | – | not measured |")
    assert "`smoke` (2026-12-01)" in table
    assert "1 not measured; by the earlier rule†: 1 agrees, 0 differs, 1 undecided" in table

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{results.START}\nold\n{results.END}\nrest\n")
    results.render_readme(readme, rec)  # the headline is search, of which nothing is recorded here
    assert "(no recorded results" in readme.read_text()
    monkeypatch.setattr(results, "HEADLINE", ("smoke",))
    start, end = results.markers("smoke")
    page = tmp_path / "results.md"
    page.write_text(f"# runs\n{start}\nold\n{end}\n")
    assert results.render([readme, page], rec) == [readme, page]
    assert readme.read_text() == f"intro\n{results.START}\n{results.render_compact(rec)}\n{results.END}\nrest\n"
    assert page.read_text() == f"# runs\n{start}\n{table}\n{end}\n"
    assert results.render([readme, page], rec) == []  # current: nothing written
    (folder / "02_depth_scaling.json").unlink()  # a notebook the new run dropped does not linger (--replace)
    with pytest.raises(DataError, match="keeps no data of its runs .* --replace"):
        results.record("smoke", res, rec)  # adding to a record kept as text is refused
    results.record("smoke", res, rec, replace=True)
    assert [p.name for p in (rec / "smoke").glob("*.json")] == ["01_main_table.json"]


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(DataError, match="no summaries to record"):
        results.record("smoke", tmp_path / "results", tmp_path / "recorded")
    with pytest.raises(UsageError, match="unknown profile 'huge'"):
        results.record("huge", tmp_path / "results", tmp_path / "recorded")
    bare = tmp_path / "README.md"
    bare.write_text("no markers\n")
    with pytest.raises(UsageError, match="no '<!-- results: start -->'"):
        results.render_readme(bare, tmp_path / "recorded")
    assert results.render_table(tmp_path / "none").startswith("(no recorded results")


def test_every_recorded_claim_is_what_todays_rule_decides_from_its_data(tmp_path):
    """``results --redecide`` on the records changes nothing: a rule or builder changed without deciding the records
    again fails here (copies of the records are decided, the repository's are not touched)."""
    import shutil

    shutil.copytree(results.RECORDED, tmp_path / "results")
    assert any("data" in c for p in (tmp_path / "results").glob("*/*.json")
               for c in json.loads(p.read_text())["claims"])
    assert results.redecide(tmp_path / "results") == []
