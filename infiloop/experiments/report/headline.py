"""The headline in words and each seed's own numbers, rendered from a profile's record (``docs/results/<profile>``).

The README's paragraph under its results table (``<!-- headline PROFILE: start -->``), docs/results.md's table by
seed (``<!-- by-seed PROFILE: start -->``) and its table of every claim by CPU (``<!-- by-cpu PROFILE: start -->``,
``by_cpu.py``) are filled by ``python -m infiloop results`` as the verdict tables are
(``results.render_blocks``), so no number in them is typed by hand and none goes stale when seeds are added. Every
number is computed from the data a claim keeps (``analysis/claim_data.py``): the per-seed, per-puzzle flags of
Table 1's claim give each model's accuracy, the claims' intervals and verdicts are the recorded ones, each seed's
effect is ``power.per_seed_effects``. FPRM's accuracy is in no claim's data, so it is not here.
"""

from __future__ import annotations

import numpy as np

from ...analysis import claim_data, paper, power
from ...analysis.claims import _show
from ...analysis.quantiles import beta_quantile
from . import by_cpu
from .verdicts import verdict

LEAD = "main.infiloop_beats_carry_last_sudoku"  # InfiLoop − carry-last at the training depth (Table 1)
DEPTH = "depth.infiloop_improves_with_depth"  # InfiLoop at the deepest evaluation − at the training depth
FALL = "depth.carry_last_degrades"
KEPT_UNPERTURBED = "perturb.carry_last_loses"  # carry-last's solved puzzles lost without a perturbation (ε = 0)
LOST_AFTER_SOLVE = "diagnosis.carry_last_loses_after_solve"
SCORE = "gamma.score_tracks_correctness"  # the content score's AUROC − ½
HALF_WIDTH = 6.0  # points: the headline's interval narrow enough to tell half the paper's +23.2 (11.6) from zero


def markers(kind: str, profile: str) -> tuple[str, str]:
    """The markers of a block of ``kind`` ("headline", "by-seed" or "by-cpu") for ``profile``."""
    return f"<!-- {kind} {profile}: start -->", f"<!-- {kind} {profile}: end -->"


def _args(claim: dict) -> list:
    return claim_data.decode(claim["data"]["effect"])["args"]


def _mean_pct(flags) -> float:
    return 100.0 * float(np.mean([np.mean(np.asarray(f, np.float64)) for f in flags]))


def _iv(claim: dict, offset: float = 0.0) -> str:
    """The claim's effect and interval in display units as the results table prints them (``claims._show``: more
    digits where fewer would print a value equal to one the rule compares it with), e.g. ``+9.2 [+2.4, +16.1]``;
    ``offset`` is added for display (the AUROC's ½)."""
    e = claim["effect"]
    d, s = e.get("digits", 1), e["scale"]
    marks = [0.0] + ([] if e.get("paper_effect") is None else [e["threshold"]])
    if offset:
        show = (lambda x: f"{s * x + offset:.{d}f}")
    else:
        show = (lambda x: _show(s * x, d, e.get("signed", True), marks))
    return f"{show(e['value'])} [{show(e['lo'])}, {show(e['hi'])}]"


def _counts(claim: dict) -> tuple[int, int]:
    """A ``proportion`` claim's pooled events and trials over its seeds."""
    events, trials = _args(claim)
    return (int(sum(np.asarray(x, bool).sum() for x in events)), int(sum(np.asarray(x, bool).sum() for x in trials)))


def runs_beyond(claim: dict) -> tuple[int, int, float]:
    """Training runs whose own effect reaches the rule's threshold (half the paper's: for carry-last's loss after the
    solve, a run losing as the paper's TRM does), of all seeds, and the one-sided 95 % exact upper bound of the share of
    runs that do (Clopper–Pearson; with none of S runs, 1 − 0.05^(1/S))."""
    effects = [e for e in power.per_seed_effects(claim) if e == e]
    k, s = sum(e >= claim["effect"]["threshold"] for e in effects), len(effects)
    return k, s, 1.0 if k >= s else beta_quantile(0.95, k + 1, s - k)


def by_seed(found: dict[str, dict]) -> list[dict]:
    """Each recorded seed's own numbers: InfiLoop's and carry-last's accuracy at the training depth and the lead,
    InfiLoop's gain to the deepest evaluation, carry-last's solved puzzles lost after the solve, the content score's
    AUROC (each None where its claim is not recorded)."""
    lead = found[LEAD]
    seeds = lead["data"]["seeds"]
    rows = [{"seed": s, "infiloop": _mean_pct([a]), "carry_last": _mean_pct([b])}
            for s, (a, b) in zip(seeds, _args(lead)[0])]
    extra = {"lead": power.per_seed_effects(lead)}
    if DEPTH in found:
        extra["gain"] = dict(zip(found[DEPTH]["data"]["seeds"], power.per_seed_effects(found[DEPTH])))
    if LOST_AFTER_SOLVE in found:
        c = found[LOST_AFTER_SOLVE]
        events, trials = _args(c)
        extra["lost"] = {s: (int(np.sum(e)), int(np.sum(t))) for s, e, t in zip(c["data"]["seeds"], events, trials)}
    if SCORE in found:
        score = found[SCORE]
        extra["auroc"] = {s: 0.5 + e for s, e in zip(score["data"]["seeds"], power.per_seed_effects(score))}
    for i, row in enumerate(rows):
        row["lead"] = extra["lead"][i]
        for key in ("gain", "lost", "auroc"):
            row[key] = extra.get(key, {}).get(row["seed"])
    return rows


def accuracies(found: dict[str, dict]) -> dict[str, tuple[dict[int, float], str]]:
    """InfiLoop's and carry-last's accuracy at the training depth by seed (:func:`by_seed`), for the table by CPU: a
    lead that differs between CPUs may come from either model."""
    if LEAD not in found or not (found[LEAD].get("data") or {}).get("seeds"):
        return {}
    rows = by_seed(found)
    return {f"{name}'s accuracy at the training depth (not a claim)": ({r["seed"]: r[key] for r in rows}, "points")
            for key, name in (("infiloop", "InfiLoop"), ("carry_last", "carry-last"))}


def render_by_seed(found: dict[str, dict], profile: str, cpu: dict[int, str] | None = None) -> str:
    """The table by seed (markdown), each seed with the CPU of the sitting that recorded it (``cpu``), or why there
    is none."""
    if LEAD not in found or not (found[LEAD].get("data") or {}).get("seeds"):
        return f"(`{profile}` records no per-seed data of Table 1's claim)"
    lines = ["| seed | InfiLoop | carry-last | lead (points) | InfiLoop past the training depth (points) | "
             "carry-last's solved puzzles lost after the solve | content score's AUROC | CPU |",
             "|---|---|---|---|---|---|---|---|"]
    rows = by_seed(found)
    for r in rows:
        lost = "–" if r["lost"] is None else f"{r['lost'][0]} of {r['lost'][1]}"
        lines.append(f"| {r['seed']} | {r['infiloop']:.1f} % | {r['carry_last']:.1f} % | {r['lead']:+.1f} | "
                     + ("–" if r["gain"] is None else f"{r['gain']:+.1f}") + f" | {lost} | "
                     + ("–" if r["auroc"] is None else f"{r['auroc']:.2f}") + f" | {(cpu or {}).get(r['seed'], '–')} |")
    lines += ["", f"Means over the {len(rows)} seeds: InfiLoop {np.mean([r['infiloop'] for r in rows]):.1f} %, "
              f"carry-last {np.mean([r['carry_last'] for r in rows]):.1f} %; the lead is positive on "
              f"{sum(r['lead'] > 0 for r in rows)} of {len(rows)} seeds. Rendered from the record by "
              "`python -m infiloop results`; FPRM's accuracy is in no claim's data."]
    return "\n".join(lines)


def _seeds_text(seeds: list[int]) -> str:
    """``17 seeds, 0–16``, ``2 seeds, 3, 7`` or ``1 seed, 3``."""
    which = (f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1))
             else ", ".join(map(str, seeds)))
    return f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}, {which}"


def render_headline(found: dict[str, dict], profile: str, cpu: dict[int, str] | None = None) -> str:
    """The headline paragraph (markdown, one line), or why there is none; with the lead by CPU where the seeds were
    recorded on more than one (``cpu``: each seed's)."""
    if LEAD not in found or not (found[LEAD].get("data") or {}).get("seeds"):
        return f"(`{profile}` records no per-seed data of Table 1's claim)"
    lead = found[LEAD]
    seeds, e = lead["data"]["seeds"], lead["effect"]
    infiloop, carry = zip(*_args(lead)[0])
    out = [f"At `{profile}` ({_seeds_text(seeds)}) InfiLoop's lead over carry-last at the "
           f"training depth, {_iv(lead)} points, **{verdict(lead)}** (the paper's {e['paper_effect']:+g}; half of "
           f"it, {e['threshold']:+g}, {'lies inside' if e['lo'] * e['scale'] <= e['threshold'] else 'lies below'} the "
           f"interval; InfiLoop {_mean_pct(infiloop):.1f} % against carry-last {_mean_pct(carry):.1f} %, means over "
           f"the seeds; positive on {sum(x > 0 for x in power.per_seed_effects(lead))} of {len(seeds)} seeds)."]
    row = power.power_row(lead, HALF_WIDTH)  # None with one seed: no spread to read
    if row is not None:
        five = power.seeds_needed(row["sd"], power.TARGET) or "more than 200"
        needed = "more than 200" if row["needed"] is None else row["needed"]
        out.append(f"Its half-width, {row['half_width']:.1f} points, "
                   f"{'meets' if row['half_width'] <= HALF_WIDTH else 'misses'} the {HALF_WIDTH:g} asked: the seeds' "
                   f"spread ({row['sd']:.1f} points) asks for about {needed} seeds for {HALF_WIDTH:g} and {five} for "
                   f"{power.TARGET:g} (`docs/statistics.md`, power table).")
    out += _by_cpu(found, lead, cpu or {}, profile)
    if DEPTH in found:
        depth = found[DEPTH]
        deepest, trained = zip(*_args(depth)[0])
        gains = power.per_seed_effects(depth)
        own = depth.get("own_verdict", verdict(depth))
        line = (f"InfiLoop's gain past the training depth: {_iv(depth)} points, **{own}** against the paper's "
                f"{depth['effect']['paper_effect']:+g} ({_mean_pct(trained):.1f} → {_mean_pct(deepest):.1f} % at the "
                f"deepest evaluation; positive on {sum(g > 0 for g in gains)} of {len(gains)} seeds)")
        con = depth.get("contrast")
        if isinstance(con, dict):
            ce = con["effect"]
            line += (f"; carry-last gains too, and InfiLoop's gain − carry-last's, {_iv({'effect': ce})} points, "
                     f"**{con['verdict']}** against the paper's {ce['paper_effect']:+g} (its Fig. 1a)")
        out.append(line + ".")
    if KEPT_UNPERTURBED in found and LOST_AFTER_SOLVE in found:
        lost, solved = _counts(found[KEPT_UNPERTURBED])
        after = found[LOST_AFTER_SOLVE]
        k, s, bound = runs_beyond(after)
        kept = found[KEPT_UNPERTURBED]
        out.append(f"Carry-last loses {lost:,} of its {solved:,} solved puzzles without a perturbation (ε = 0) and "
                   f"{_iv(after)} % in {paper.claim_depth(LOST_AFTER_SOLVE)} (the paper's TRM: {kept['paper']}; "
                   f"{after['paper']}; verdicts: {verdict(kept)} and {verdict(after)}); {k} of {s} runs lose as the "
                   f"paper's TRM does (at least {after['effect']['threshold']:g} %), which bounds that share at ≤ "
                   f"{100 * bound:.0f} % (one-sided 95 %).")
    if FALL in found:
        out.append(f"Carry-last's fall after a peak chosen on held-out puzzles: {_iv(found[FALL])} points, "
                   f"**{verdict(found[FALL])}**.")
    if SCORE in found:
        out.append(f"InfiLoop's content score, right against wrong boards: AUROC − ½ {_iv(found[SCORE])}, the "
                   f"table's scale (the AUROC itself {_iv(found[SCORE], offset=0.5)}; 0 is chance), "
                   f"**{verdict(found[SCORE])}**.")
    return " ".join(out)


def _by_cpu(found: dict[str, dict], lead: dict, cpu: dict[int, str], profile: str) -> list[str]:
    """The lead by CPU, in the order to weigh it (``by_cpu.comparison``): the confirmatory comparison and the
    multiplicity-adjusted value first, the comparison over every seed labelled post hoc, then the lead's verdict on
    each CPU alone where the two differ."""
    rows = [c for c in found.values() if (c.get("data") or {}).get("seeds") and (c.get("effect") or {}).get("lo")
            is not None]
    cmp = by_cpu.comparison(lead, rows, cpu, profile)
    if cmp is None:
        return []
    first, second = cmp["names"]
    out = ["The seeds were trained on 2 kinds of CPU, on which one seed trains to different models "
           "(`docs/results.md`)."]
    if "confirmatory" in cmp:
        home, other, late, w, p = cmp["confirmatory"]
        out.append(f"Confirmatory: the {home} seeds' lead − that of the {other} seeds trained after the by-CPU "
                   f"comparison was first made ({_seeds_text(late).split(', ', 1)[1]}), "
                   + ("–" if w is None else f"{w[0]:+.1f} [{w[1]:+.1f}, {w[2]:+.1f}] points") +
                   f" (Welch's t over the seeds), permutation p = {p:.3f}.")
    adjusted, m = cmp["holm"]
    (w, p) = cmp["post_hoc"]
    if adjusted is not None:
        out.append(f"Over every seed, adjusted by Holm for the {m} claims the by-CPU table compares: "
                   f"p = {adjusted:.2f}.")
    out.append(f"Post hoc (this comparison was formed after the first low seeds came in): every seed, {first} "
               f"({cmp['verdicts'][first][1]} seeds) − {second} ({cmp['verdicts'][second][1]}), "
               + ("–" if w is None else f"{w[0]:+.1f} [{w[1]:+.1f}, {w[2]:+.1f}] points") +
               f", permutation p = {p:.3f}.")
    (iv1, v1), _ = cmp["verdicts"][first]
    (iv2, v2), _ = cmp["verdicts"][second]
    if v1 != v2:
        out.append(f"Read by CPU alone the lead would be **{v1}** on {first} ({iv1.points()}) and **{v2}** on "
                   f"{second} ({iv2.points()}).")
    return out


def fill(text: str, claims: list[dict], fill_block, machines: dict[str, dict[int, str]] | None = None) -> str:
    """``text`` with every headline, by-seed and by-cpu block it holds filled from ``claims``
    (``results.recorded_claims``) and each seed's machine (``results.recorded_machines``)."""
    for profile in sorted({c["profile"] for c in claims}):
        found = {c["id"]: c for c in claims if c["profile"] == profile}
        cpu = (machines or {}).get(profile, {})
        renders = (("headline", render_headline), ("by-seed", render_by_seed),
                   ("by-cpu", lambda f, p, m: by_cpu.render_table(list(f.values()), m, p, accuracies(f))))
        for kind, render in renders:
            start, end = markers(kind, profile)
            if start in text:
                text = fill_block(text, start, end, f"{start}\n{render(found, profile, cpu)}\n{end}") or text
    return text
