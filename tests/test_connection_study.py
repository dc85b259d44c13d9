"""The connection study (studies/connection_study.py, its design in studies/connection_design.py, its score verdict
in studies/score_verdict.py): its models go through the run cache, carry-last is
trained only for variants that change its settings, the records hold what the table needs, and the table
is rendered from the result files (docs/connection-study.md)."""

import json

import pytest

from infiloop.experiments.studies import connection_design as design
from infiloop.experiments.studies import connection_study as cs
from infiloop.experiments.studies import score_verdict


@pytest.fixture
def small(monkeypatch, tmp_path):
    """The study on the smoke profile with a four-step block, in temporary folders."""
    monkeypatch.setattr(design, "PROFILE", "smoke")
    monkeypatch.setattr(design, "BLOCKS", {"mini": {"overrides": {"train.steps": 4, "train.log_every": 2},
                                                "read_at": (2, 4)}})
    return tmp_path


def test_models_share_carry_last_only_where_it_has_the_setting():
    assert design.models("history_grad", "mlp", 0) == [("carry_last", "baseline"), ("infiloop", "history_grad")]
    assert design.models("grad_outer_2", "mlp", 0) == [("carry_last", "grad_outer_2"), ("infiloop", "grad_outer_2")]
    with pytest.raises(ValueError, match="unknown variant"):
        design.check_variant("nope")
    from infiloop.experiments.settings.recipes import resolve_config

    for v in design.VARIANTS.values():  # every variant's settings resolve to a valid configuration
        for recipe in design.CONNECTIONS:
            resolve_config("sudoku", recipe, "smoke", {**v["overrides"], "train.steps": 2})


@pytest.mark.slow  # 33 s: the research harness end to end (its pieces are tested below)
def test_study_trains_records_and_renders(small):
    root, results = small / "runs", small / "results"
    recs = cs.run_variants(["baseline", "history_grad"], ["mini"], [0], results=results, root=root)
    assert sorted((r["variant"], r["recipe"]) for r in recs) == [
        ("baseline", "carry_last"), ("baseline", "infiloop"), ("history_grad", "infiloop")]
    inf = next(r for r in recs if r["variant"] == "history_grad")
    assert set(inf["cell_acc"]) == {"2", "4"} and 0 <= inf["exact_at_depth"] <= 1
    assert inf["connection"]["outer_q_norm"] > 0 and "outer_at_clip" in inf["connection"]
    assert not next(r for r in recs if r["recipe"] == "carry_last")["connection"]
    saved = json.loads((results / "history_grad-mini.json").read_text())
    assert saved["settings"]["model.outer.history_grad"] is True and len(saved["records"]) == 1
    # a second call trains nothing (the run cache) and replaces the records rather than adding to them
    cs.run_variants(["history_grad"], ["mini"], [0], results=results, root=root, connections=("infiloop",))
    assert len(json.loads((results / "history_grad-mini.json").read_text())["records"]) == 1
    table = cs.render_table(results)
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["baseline", "history_grad"]
    baseline_cl = next(r for r in recs if r["recipe"] == "carry_last")["cell_acc"]
    assert f"{baseline_cl['2']:.2f} / {baseline_cl['4']:.2f}" in rows[1]  # history_grad's carry-last is the baseline's
    v = score_verdict.score_verdict("history_grad", "mini", [0], root=root)  # the runs are cached: nothing trains
    assert -1 <= v["rank_correlation"]["value"] <= 1 or v["rank_correlation"]["value"] != v["rank_correlation"]["value"]
    for k in ("at_clip_wrong", "at_clip_right"):
        assert v[k]["lo"] <= v[k]["value"] <= v[k]["hi"] or v[k]["value"] != v[k]["value"]
    cs.verdict_path("history_grad", "mini", results).write_text(json.dumps(v))
    assert "| `history_grad` | mini | 0 | 24 |" in cs.render_table(results)  # smoke's evaluation depth
    assert [r["step"] for r in inf["log"]] == [2, 4] and "outer_q_norm" in inf["log"][-1]
    png = cs.plot_dynamics(["baseline", "history_grad"], results, small / "dyn.png")
    assert png.stat().st_size > 10_000
    doc = small / "doc.md"
    doc.write_text("head\n<!-- connection-study: start -->\nold\n<!-- connection-study: end -->\ntail\n")
    cs.render(results, doc)
    text = doc.read_text()
    assert "old" not in text and "`history_grad`" in text and text.startswith("head") and text.endswith("tail\n")


def test_cli_refuses_unknown_names(capsys):
    assert cs.main(["nope"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown variant 'nope'")
    assert cs.main(["baseline", "--blocks", "cnn"]) == 2
    assert "error: --blocks: unknown block 'cnn'" in capsys.readouterr().err
    assert cs.main(["--list"]) == 0
    assert "`history_grad`" in capsys.readouterr().out


def test_score_quantities_count_the_clip_by_board():
    """Two updates of three puzzles: the share of cell scores at the clip is split by wrong and right boards."""
    import numpy as np

    from infiloop.analysis.intervals import _ratio

    tok = np.array([[[8, 8], [8, 1], [0, 0]], [[8, 8], [2, 2], [8, 0]]], np.float16)  # [K=2, P=3, cells=2]
    wrong = np.array([[0, 3, 5], [0, 2, 1]], np.int16)
    traj = {"score_outer_tok": tok, "wrong_cells_candidate": wrong, "score_outer": tok.mean(-1).astype(np.float32)}
    bins = np.unique(wrong)
    (sums, counts), at_wrong, at_right = score_verdict.score_quantities(traj, bins, 8.0)
    assert float(_ratio(*at_right)) == 1.0  # puzzle 0 is right at both updates, every cell at the clip
    assert float(_ratio(*at_wrong)) == (0.5 + 0 + 0 + 0.5) / 4
    assert sums.shape == counts.shape == (len(bins), 3) and counts.sum() == 6
    _, _, none = score_verdict.score_quantities(traj, bins, None)
    assert float(_ratio(*none)) == 0.0


def test_the_docs_table_is_the_recorded_results():
    """docs/connection-study.md shows what `--render --results docs/connection-study-results` writes: the
    table is current with the recorded result files (re-render after adding results)."""
    assert any(cs.RECORDED.glob("*.json")), "no recorded results in docs/connection-study-results"
    text = cs.DOC.read_text()
    block = text.split("<!-- connection-study: start -->\n", 1)[1].split("<!-- connection-study: end -->", 1)[0]
    assert block == cs.render_table(cs.RECORDED), (
        "docs/connection-study.md is stale: run python -m infiloop connection-study --render --results "
        "docs/connection-study-results")
    for p in cs.RECORDED.glob("*.json"):  # every recorded file is one the study can read back
        d = json.loads(p.read_text())
        assert p.name.startswith("verdict-") or (d["variant"] in design.VARIANTS and d["block"] in design.BLOCKS)
