"""The headline in words and the table by seed: every number rendered from a record's data, none typed by hand."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from infiloop import paths
from infiloop.analysis import claim_data, claims
from infiloop.analysis.quantiles import t_quantile
from infiloop.experiments.report import by_cpu, headline, results

SEEDS = [3, 4, 5, 6]
P = 200


def _flags(rate: float, seed: int) -> np.ndarray:
    """Exactly round(rate · P) puzzles right, their places drawn by ``seed``."""
    out = np.zeros(P, bool)
    out[np.random.default_rng(seed).permutation(P)[:round(rate * P)]] = True
    return out


def _planted() -> tuple[dict[str, dict], dict]:
    """A record of four seeds with known accuracies, gains and losses; and what each seed was planted with."""
    infiloop = {3: 0.80, 4: 0.60, 5: 0.70, 6: 0.50}
    carry = {3: 0.70, 4: 0.65, 5: 0.40, 6: 0.50}
    lost = {3: 0, 4: 5, 5: 30, 6: 0}  # carry-last's solved puzzles lost after the solve, of 100 solved
    pairs = [(_flags(infiloop[s], s), _flags(carry[s], 100 + s)) for s in SEEDS]
    deeper = [(a | _flags(0.05, 200 + s), a) for s, (a, _) in zip(SEEDS, pairs)]
    solved = [np.arange(P) < 100 for _ in SEEDS]
    events = [np.arange(P) < lost[s] for s in SEEDS]
    found = {
        headline.LEAD: claims.claim_dict(headline.LEAD, "", seeds=SEEDS, effect=claims.difference(pairs)),
        headline.DEPTH: claims.claim_dict(headline.DEPTH, "", seeds=SEEDS, effect=claims.difference(deeper)),
        headline.LOST_AFTER_SOLVE: claims.claim_dict(headline.LOST_AFTER_SOLVE, "", seeds=SEEDS,
                                                     effect=claims.proportion(events, solved)),
        headline.KEPT_UNPERTURBED: claims.claim_dict(headline.KEPT_UNPERTURBED, "", seeds=SEEDS,
                                                     effect=claims.proportion([np.zeros(P, bool)] * 4, solved)),
    }
    found = json.loads(json.dumps(found))  # as read back from the record
    return found, {"infiloop": infiloop, "carry": carry, "lost": lost, "deeper": deeper}


def test_the_table_by_seed_gives_each_seeds_planted_numbers():
    found, planted = _planted()
    rows = headline.by_seed(found)
    assert [r["seed"] for r in rows] == SEEDS
    for r in rows:
        s = r["seed"]
        assert math.isclose(r["infiloop"], 100 * planted["infiloop"][s], abs_tol=1e-9)
        assert math.isclose(r["carry_last"], 100 * planted["carry"][s], abs_tol=1e-9)
        assert math.isclose(r["lead"], 100 * (planted["infiloop"][s] - planted["carry"][s]), abs_tol=1e-9)
        a, b = planted["deeper"][SEEDS.index(s)]
        assert math.isclose(r["gain"], 100 * (a.mean() - b.mean()), abs_tol=1e-9)
        assert r["lost"] == (planted["lost"][s], 100)
        assert r["auroc"] is None  # not recorded: a dash, not a number
    table = headline.render_by_seed(found, "search")
    assert "| 5 | 70.0 % | 40.0 % | +30.0 |" in table and "| 30 of 100 | – | – |" in table
    assert "InfiLoop 65.0 %, carry-last 56.2 %; the lead is positive on 2 of 4 seeds" in table


def test_the_headline_says_what_the_data_decide():
    found, planted = _planted()
    text = headline.render_headline(found, "search")
    assert text.startswith("At `search` (4 seeds, 3–6) InfiLoop's lead over carry-last at the training depth, ")
    assert "InfiLoop 65.0 % against carry-last 56.2 %, means over the seeds; positive on 2 of 4 seeds)" in text
    e = found[headline.LEAD]["effect"]
    inside = "lies inside" if 100 * e["lo"] <= 11.6 else "lies below"
    assert f"(the paper's +23.2; half of it, +11.6, {inside} the interval;" in text
    leads = 100 * np.array([planted["infiloop"][s] - planted["carry"][s] for s in SEEDS])
    sd = float(np.std(leads, ddof=1))
    need = next(n for n in range(2, 201) if t_quantile(0.975, n - 1) * sd / math.sqrt(n) <= headline.HALF_WIDTH)
    assert f"the seeds' spread ({sd:.1f} points) asks for about {need} seeds for 6 and" in text
    e = found[headline.LEAD]["effect"]
    half = 100 * (e["hi"] - e["lo"]) / 2
    assert f"Its half-width, {half:.1f} points, {'meets' if half <= 6 else 'misses'} the 6 asked" in text
    assert f"**{results.verdict(found[headline.LEAD])}**" in text
    # one run of four reaches half the paper's 19.7 % (seed 5 loses 30 %): the exact one-sided bound of 1 of 4
    assert "Carry-last loses 0 of its 400 solved puzzles without a perturbation" in text
    assert "1 of 4 runs lose as the paper's TRM does (at least 9.85 %), which bounds that share at ≤ 75 %" in text
    assert "content score" not in text  # not recorded, so not said


def test_the_bound_on_runs_is_the_exact_one_sided_binomial_bound():
    """k of S runs beyond the threshold: the bound p solves P(X <= k; S, p) = 0.05 (with k = 0: 1 − 0.05^(1/S))."""
    found, _ = _planted()
    c = found[headline.LOST_AFTER_SOLVE]
    k, n, bound = headline.runs_beyond(c)
    assert (k, n) == (1, 4)
    cdf = sum(math.comb(n, i) * bound ** i * (1 - bound) ** (n - i) for i in range(k + 1))
    assert math.isclose(cdf, 0.05, abs_tol=1e-9)
    c["effect"]["threshold"] = 90.0  # no seed loses that much
    k, n, bound = headline.runs_beyond(c)
    assert (k, n) == (0, 4) and math.isclose(bound, 1 - 0.05 ** (1 / 4), rel_tol=1e-9)


def test_a_profile_without_per_seed_data_says_so_and_the_pages_are_current():
    assert "records no per-seed data" in headline.render_headline({}, "quick")
    found, _ = _planted()
    one = {cid: claims.redecide({**c, "ours": "seed 3"}, claim_data.subset(c["data"], [3])) for cid, c in found.items()}
    text = headline.render_headline(one, "quick")
    assert text.startswith("At `quick` (1 seed, 3) InfiLoop's lead over carry-last at the training depth, +10.0 [")
    assert "half-width" not in text and "0 of 1 runs lose" in text  # one seed: no spread, no seeds needed
    assert "records no per-seed data" in headline.render_by_seed({}, "quick")
    for page in (paths.ROOT / "README.md", paths.DOCS / "results.md"):  # current: tests/test_results.py renders them
        text = page.read_text(encoding="utf-8")
        start, end = headline.markers("headline", "search")
        assert start in text and end in text, f"{page.name} lacks the headline block"
        block = text[text.index(start):text.index(end)]
        assert re.search(r"\(\d+ seeds, ", block), "the headline names its seeds"


def test_the_lead_by_cpu_and_its_welch_interval():
    """Seeds recorded on two CPUs: each CPU's mean lead and the difference with Welch's t interval (against an
    independent computation); one CPU: no such sentence; the table by CPU lists every claim with per-seed data."""
    found, planted = _planted()
    cpu = {3: "Intel", 4: "Intel", 5: "AMD", 6: "AMD"}
    leads = {s: 100 * (planted["infiloop"][s] - planted["carry"][s]) for s in SEEDS}
    groups = by_cpu.groups(found[headline.LEAD], cpu)
    assert [(n, x.size) for n, x in groups] == [("AMD", 2), ("Intel", 2)]  # most seeds first, ties by name
    a = np.array([leads[s] for s in SEEDS if cpu[s] == "AMD"])
    b = np.array([leads[s] for s in SEEDS if cpu[s] == "Intel"])
    d, lo, hi = by_cpu.difference(found[headline.LEAD], cpu)
    se2 = a.var(ddof=1) / 2 + b.var(ddof=1) / 2
    df = se2 ** 2 / ((a.var(ddof=1) / 2) ** 2 + (b.var(ddof=1) / 2) ** 2)
    assert math.isclose(d, a.mean() - b.mean(), abs_tol=1e-9)
    assert math.isclose(hi - d, t_quantile(0.975, df) * math.sqrt(se2), rel_tol=1e-9) and math.isclose(d - lo, hi - d)
    text = headline.render_headline(found, "search", cpu)
    assert "The seeds were trained on 2 kinds of CPU" in text and f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]" in text
    assert "kinds of CPU" not in headline.render_headline(found, "search", {s: "AMD" for s in SEEDS})
    assert "| 5 | 70.0 % | 40.0 % | +30.0 |" in headline.render_by_seed(found, "search", cpu)
    assert headline.render_by_seed(found, "search", cpu).splitlines()[2].endswith(f"| {cpu[3]} |")
    table = by_cpu.render_table(list(found.values()), cpu, "search")
    assert f"| {headline.LEAD} | 2, {a.mean():+.2f} | 2, {b.mean():+.2f} | {d:+.2f} [{lo:+.2f}, {hi:+.2f}] points |" \
        in table  # the CPUs in the order of the headline's difference
    assert len(table.splitlines()) == 2 + len(found)
    assert "one kind of CPU" in by_cpu.render_table(list(found.values()), {s: "AMD" for s in SEEDS}, "search")
    assert by_cpu.welch(np.array([1.0, 1.0]), np.array([2.0, 2.0])) is None  # no spread: no interval


def test_each_models_accuracy_by_cpu():
    """The table by CPU also splits InfiLoop's and carry-last's own accuracy (which model moves a lead that differs
    between CPUs), each against the planted accuracies."""
    found, planted = _planted()
    cpu = {3: "Intel", 4: "AMD", 5: "Intel", 6: "AMD"}
    table = by_cpu.render_table(list(found.values()), cpu, "search", headline.accuracies(found))
    assert len(table.splitlines()) == 2 + len(found) + 2
    for model, key in (("InfiLoop", "infiloop"), ("carry-last", "carry")):
        amd = np.array([100 * planted[key][s] for s in (4, 6)])
        intel = np.array([100 * planted[key][s] for s in (3, 5)])
        d, lo, hi = by_cpu.welch(amd, intel)
        row = (f"| {model}'s accuracy at the training depth (not a claim) | 2, {amd.mean():+.2f} | 2, "
               f"{intel.mean():+.2f} | {d:+.2f} [{lo:+.2f}, {hi:+.2f}] points |")
        assert row in table, (row, table)
    assert headline.accuracies({}) == {}  # no Table-1 data: no rows


def test_permutation_p_and_holm_against_hand_counts():
    """The permutation p enumerates every split (two groups of 2 from [0, 0, 1, 1]: 2 of 6 splits are as far apart as
    the observed one), and Holm's adjustment multiplies the k-th smallest by (m − k + 1), never decreasing."""
    assert by_cpu.permutation_p(np.array([0.0, 0.0]), np.array([1.0, 1.0])) == pytest.approx(2 / 6)
    assert by_cpu.permutation_p(np.array([0.0, 1.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)
    assert by_cpu.holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert by_cpu.holm({"a": 0.5, "b": 0.6}) == {"a": 1.0, "b": 1.0}


def test_the_cpu_paragraph_leads_with_the_confirmatory_comparison(monkeypatch):
    """Where seeds were trained after the comparison by CPU was first made (``by_cpu.CONFIRMATORY``), the headline
    gives that comparison and the multiplicity-adjusted value first, labels the one over every seed post hoc, and reads
    the lead by CPU where the CPUs' verdicts differ."""
    found, _ = _planted()
    cpu = {3: "Intel", 4: "Intel", 5: "AMD", 6: "AMD"}
    monkeypatch.setitem(by_cpu.CONFIRMATORY, "search", (6,))
    text = headline.render_headline(found, "search", cpu)
    first, holm, post = (text.index(k) for k in ("Confirmatory:", "adjusted by Holm", "Post hoc"))
    assert first < holm < post
    cmp = by_cpu.comparison(found[headline.LEAD], list(found.values()), cpu, "search")
    (iv1, v1), _ = cmp["verdicts"]["AMD"]
    (iv2, v2), _ = cmp["verdicts"]["Intel"]
    assert ("Read by CPU alone" in text) is (v1 != v2)
    monkeypatch.setitem(by_cpu.CONFIRMATORY, "search", ())
    assert "Confirmatory" not in headline.render_headline(found, "search", cpu)
