"""The effect behind each of the paper's claims, computed from the measurements, and the record of its verdict.

Each claim of ``paper.CLAIMS`` names its effect in words (``Claim.effect``) and the paper's value of it
(``Claim.paper_effect``); :data:`BUILDERS` says which function below computes it, and every one of them can take
either sign (``tests/test_paper.py`` plants data on the other side for each). The verdict is
``intervals.verdict``, :data:`intervals.RULE` in words; :func:`record` writes what the summary keeps of it.

- :func:`difference`: accuracy of a − accuracy of b on the same puzzles of each seed (a lead, a gain with depth,
  a fall with extra loops);
- :func:`ratio_difference`: the same on any ratios of per-puzzle sums (predictions changed per puzzle, wrong cells,
  a share of cells; the carry-last diagnosis, ``diagnosis.py``);
- :func:`lead_over_best`: the first accuracy − the best of the others (learned decay against every other decay);
- :func:`difference_of_changes`: (a₁ − a₀) − (b₁ − b₀), the gain or fall of one allocation against another's;
  :func:`change_over_best`, one gain against the best of several; :func:`gain_by_subset`, the gain on a subset of
  the items (short chains) against the gain on the others;
- :func:`held_out_fall`: accuracy at the peak − at the deepest update, the peak chosen on the other half of the
  puzzles, so that the fall is not positive by construction (as the peak of the same curve would make it), and
  :func:`fall_contrast`: one model's such fall − another's on the same puzzles (overthinking, notebook 09);
- :func:`proportion`: events / trials pooled per seed (solved puzzles lost), with its exact binomial bounds;
  :func:`untestable_unless_lost`: whether any model lost a solved puzzle at all (else a claim that one keeps them is
  untestable), and :func:`perturbation_cost` with :func:`perturbation_moved`, its form for a perturbation;
- :func:`phase_contrast` and :func:`score_separation`: the γ phases against each other and 1 − β, and how well the
  content score tells right candidates from wrong ones (its AUROC; the paper's medians by wrong cells beside it).

Every interval here comes from ``intervals.interval``, which widens one that no seed and no resample moves (zero width,
whatever the number of seeds) to the exact bound on the share of the item-seed pairs that could differ. Every builder
is ``claim_data.captured``: its interval keeps the per-seed inputs it was computed from, which a claim's record keeps
(:func:`claim_dict`), so that :func:`redecide` decides it again from them and records of other seeds merge.
"""

from __future__ import annotations

import numpy as np

from . import intervals, paper
from .claim_data import Untestable, captured, decide, pack
from .intervals import Interval
from .quantiles import binomial_interval

Flags = np.ndarray  # [P] right-or-wrong (or kept-or-lost) flags of one seed's test puzzles


def _diff(q):
    return q[0] - q[1]


@captured
def difference(pairs: list[tuple[Flags, Flags]], items: str = "puzzles") -> Interval:
    """Mean over seeds of accuracy(a) − accuracy(b): ``pairs[s]`` = (a, b), seed s's flags on the same items."""
    per_seed = [[(np.asarray(a, np.float64), np.ones(len(a))), (np.asarray(b, np.float64), np.ones(len(b)))]
                for a, b in pairs]
    return intervals.interval(per_seed, _diff, vectorized=True, items=items, bounds=(-1.0, 1.0))


@captured
def ratio_difference(per_seed: list[tuple[intervals.Ratio, intervals.Ratio]],
                     bounds: tuple[float, float] | None = None) -> Interval:
    """Mean over seeds of ratio(a) − ratio(b) on the same puzzles: ``per_seed[s]`` = (a, b), each a (numerator,
    denominator) pair over seed s's puzzles (a paired difference of means per puzzle or of shares, e.g. predictions
    changed per puzzle, or a model's wrong cells at one update − at another). Where no seed and no resample moves it
    (e.g. both models lose every solved instance on every seed), the interval is widened as ``intervals.interval``
    widens every such interval, not left at [x, x]."""
    return intervals.interval([list(q) for q in per_seed], _diff, vectorized=True, bounds=bounds)


def _lead(q):
    return q[0] - np.maximum.reduce(list(q[1:]))


@captured
def lead_over_best(per_seed: list[list[Flags]], items: str = "puzzles") -> Interval:
    """Mean over seeds of accuracy(first) − max(accuracy of the others), all on the same items of the seed."""
    quantities = [[(np.asarray(f, np.float64), np.ones(len(f))) for f in flags] for flags in per_seed]
    return intervals.interval(quantities, _lead, vectorized=True, items=items, bounds=(-1.0, 1.0))


def _changes(q):
    return (q[0] - q[1]) - (q[2] - q[3])


@captured
def difference_of_changes(per_seed: list[tuple[Flags, Flags, Flags, Flags]], items: str = "items") -> Interval:
    """Mean over seeds of (acc a₁ − acc a₀) − (acc b₁ − acc b₀): ``per_seed[s]`` = (a₁, a₀, b₁, b₀) on the same
    items (e.g. an allocation's gain from r = K to 2K against another's)."""
    quantities = [[(np.asarray(f, np.float64), np.ones(len(f))) for f in flags] for flags in per_seed]
    # an item that differs moves a difference of two changes by up to 2 (a gains where b loses)
    return intervals.interval(quantities, _changes, vectorized=True, items=items, bounds=(-2.0, 2.0), reach=2.0)


def _change_lead(q):
    gains = [q[i] - q[i + 1] for i in range(0, len(q), 2)]
    return gains[0] - np.maximum.reduce(gains[1:])


@captured
def change_over_best(per_seed: list[list[Flags]], items: str = "items") -> Interval:
    """Mean over seeds of (acc a₁ − acc a₀) − max over the others (acc b₁ − acc b₀, ...): ``per_seed[s]`` =
    [a₁, a₀, b₁, b₀, ...] on the same items (one allocation's gain against the best of the others')."""
    quantities = [[(np.asarray(f, np.float64), np.ones(len(f))) for f in flags] for flags in per_seed]
    return intervals.interval(quantities, _change_lead, vectorized=True, items=items, bounds=(-2.0, 2.0), reach=2.0)


@captured
def gain_by_subset(pairs: list[tuple[Flags, Flags]], subsets: list[np.ndarray], items: str = "items") -> Interval:
    """Mean over seeds of the gain (acc after − acc before, ``pairs[s]`` = (after, before)) on the items of the
    subset ``subsets[s]`` (a boolean mask) − the gain on the other items: the subsets as weights on one item axis,
    so that every item is resampled once (e.g. short chains' gain against long chains')."""
    quantities = []
    for (after, before), m in zip(pairs, subsets):
        m = np.asarray(m, np.float64)
        quantities.append([(np.asarray(f, np.float64) * w, w) for w in (m, 1.0 - m) for f in (after, before)])
    return intervals.interval([[q[0], q[1], q[2], q[3]] for q in quantities], _changes, vectorized=True, items=items,
                              bounds=(-2.0, 2.0))


def _held_out_peaks(curves: list[np.ndarray]) -> tuple[list[int], list[Flags]]:
    """Each half's peak row (chosen on the other half's mean curve over seeds, :func:`held_out_fall`) and, per seed,
    every puzzle's solved flag at the peak chosen for it."""
    half = np.arange(curves[0].shape[1]) % 2  # 0 or 1
    chosen = []
    for h in (0, 1):  # the peak of half h, chosen on half h's mean curve, is used for the other half's puzzles
        mean = np.mean([c[:, half == h].mean(1) for c in curves], axis=0)
        chosen.append(int(np.argmax(mean)))
    return chosen, [np.where(half == 0, c[chosen[1]], c[chosen[0]]) for c in curves]


@captured
def held_out_fall(curves: list[np.ndarray]) -> Interval:
    """The fall after the peak with the peak chosen on held-out puzzles: ``curves[s]`` [K, P] is seed s's solved
    flags at each recorded update (the last row the deepest). The puzzles are split by index parity (generated in
    random order: a random split); each half's peak is the first update where the other half's mean curve over
    seeds is highest; the effect is the mean over seeds and puzzles of solved-at-its-peak − solved-at-the-end.
    The peaks (row indices, for half 0 and half 1) are in ``extra["peaks"]``."""
    chosen, at_peak = _held_out_peaks(curves)
    iv = difference([(a, c[-1]) for a, c in zip(at_peak, curves)])
    iv.extra = {"peaks": chosen}
    return iv


@captured
def fall_contrast(curves_a: list[np.ndarray], curves_b: list[np.ndarray]) -> Interval:
    """How much more model a falls after its held-out peak than model b does, on the same puzzles of each seed: the
    mean over seeds of (a at its peak − a at the end) − (b at its peak − b at the end), each model's peaks chosen as
    :func:`held_out_fall` chooses them (positive: a overthinks more than b). Peaks in ``extra["peaks"]`` (a, b)."""
    (pa, a_peak), (pb, b_peak) = _held_out_peaks(curves_a), _held_out_peaks(curves_b)
    iv = difference_of_changes([(ap, a[-1], bp, b[-1]) for ap, a, bp, b in zip(a_peak, curves_a, b_peak, curves_b)],
                               items="puzzles")
    iv.extra = {"peaks": (pa, pb)}
    return iv


@captured
def proportion(events: list[Flags], trials: list[Flags], level: float = 0.95) -> Interval:
    """Mean over seeds of events / trials (``events[s]``, ``trials[s]``: seed s's [P] flags, events among trials),
    containing the exact (Clopper–Pearson) interval of the pooled counts."""
    x = int(sum(np.asarray(e, bool).sum() for e in events))
    n = int(sum(np.asarray(t, bool).sum() for t in trials))
    lo, hi = binomial_interval(x, n, level)
    per_seed = [[(np.asarray(e, np.float64), np.asarray(t, np.float64))] for e, t in zip(events, trials)]
    exact = (lo, hi, f"the exact binomial interval of the pooled {x:,} of {n:,}") if n else None
    return intervals.interval(per_seed, intervals._first, vectorized=True, bounds=(0.0, 1.0), exact=exact)


@captured
def perturbation_cost(kept_control: list[Flags], kept: list[Flags], solved: list[Flags]) -> Interval:
    """What a perturbation cost: mean over seeds of (kept without it − kept with it) / solved at the perturbation,
    on the same puzzles (``kept_control[s]``, ``kept[s]``, ``solved[s]``: seed s's [P] flags)."""
    per_seed = [[(np.asarray(a, np.float64), np.asarray(n, np.float64)), (np.asarray(b, np.float64),
                                                                         np.asarray(n, np.float64))]
                for a, b, n in zip(kept_control, kept, solved)]
    return intervals.interval(per_seed, _diff, vectorized=True, bounds=(-1.0, 1.0))


def untestable_unless_lost(losses: dict[str, Interval], what: str, beyond: str = "") -> str:
    """"" when some model's loss of solved puzzles (``losses``: each model's interval of it) lies above zero, so that a
    claim that one model keeps them can be tested; else why it cannot, in words. An absence claim (InfiLoop keeps its
    solved puzzles) would otherwise read "agrees" where no model lost anything either: the perturbation's claim and
    the diagnosis after the solve both ask this first."""
    inputs = [getattr(iv, "inputs", None) for iv in losses.values()]
    data = None if None in inputs else {"what": what, "beyond": beyond, "losses": dict(zip(losses, inputs))}
    if any(float(iv.lo) > 0 for iv in losses.values()):
        return Untestable("", data)
    return Untestable(f"{what} cost no model a solved puzzle{beyond} (no interval of a loss above zero: "
                      + ", ".join(f"{k} {iv.points()}" for k, iv in losses.items())
                      + "), so keeping them says nothing at this scale", data)


def perturbation_moved(costs: dict[str, Interval], eps: float) -> str:
    """"" when some model's cost of the strongest perturbation lies above zero (the perturbation moves a solved
    answer, so that a claim of keeping them can be tested), else why the claim is untestable, in words."""
    return untestable_unless_lost(costs, f"the strongest perturbation (ε = {eps:g})", " beyond its unperturbed run")


def _below(q):
    return q[4] - q[0]


def _jump(q):
    return q[1] - np.maximum(q[0], q[4])


@captured
def phase_contrast(quantities: list[list], which: str) -> Interval:
    """``quantities[s]``: seed s's γ phase terms (search, solve, after, unsolved) and its 1 − β as a constant ratio
    (notebook 03). ``which``: ``below`` (1 − β − γ(search)) or ``jump`` (γ(solve) − max(γ(search), 1 − β))."""
    return intervals.interval(quantities, {"below": _below, "jump": _jump}[which], vectorized=True)


def _separation(q):
    return q[0] + q[1] - q[2] - 0.5


@captured
def score_separation(per_seed: list[list]) -> Interval:
    """The content score's AUROC for right against wrong candidates − ½ (positive: right boards score higher; the
    chance that a right candidate scores above a wrong one, ties half): ``per_seed[s]`` = seed s's
    ``trajectories.separation_terms``, the placements of its right and wrong candidates per puzzle and its AUROC as a
    constant, whose combination (mean right placement + mean wrong placement − AUROC) moves with a resample of the
    puzzles as the AUROC does to first order (its DeLong expansion), the puzzles' candidates resampled together."""
    return intervals.interval(per_seed, _separation, vectorized=True, bounds=(-0.5, 0.5))


# Which builder computes each claim's effect (the test plants data on the other side for every builder).
BUILDERS = {
    "main.infiloop_beats_carry_last_sudoku": difference, "depth.infiloop_improves_with_depth": difference,
    "depth.carry_last_degrades": held_out_fall, "gamma.search_below_baseline": phase_contrast,
    "gamma.jump_at_solve": phase_contrast, "gamma.score_tracks_correctness": score_separation,
    "perturb.infiloop_retains": proportion, "perturb.carry_last_loses": proportion,
    "ablation.learned_beats_fixed": lead_over_best, "ablation.reverse_fails": difference,
    "ablation.both_axes_best": lead_over_best, "ablation.content_score_matters": difference,
    "study.history_beats_dense_injection": difference, "study.window_one_best": difference,
    "study.loop_gating_helps": difference, "study.history_lg_best_pair": lead_over_best,
    "study.loops_help_reasoning": difference, "study.loops_hurt_knowledge": difference,
    "study.history_lg_beats_baseloop": ratio_difference, "study.balanced_allocation_extrapolates": change_over_best,
    "study.short_chains_gain_more": gain_by_subset, "study.recurrent_beats_nonloop": difference,
    "study.coda_protects_knowledge": difference_of_changes, "study.prelude_helps_reasoning": difference_of_changes,
    **{f"diagnosis.{k}": ratio_difference for k in ("carry_last_changes_more", "carry_last_wrong_cells_grow",
                                                    "infiloop_wrong_cells_fall", "carry_last_flips_right_cells",
                                                    "carry_last_state_moves_after_solve")},
    "diagnosis.carry_last_loses_after_solve": proportion, "diagnosis.infiloop_keeps_after_solve": proportion,
    "overthink.carry_last_overthinks": held_out_fall, "overthink.infiloop_keeps": ratio_difference,
}
# The builders by name, for a claim decided again from its recorded data (``claim_data.decide``).
BUILDERS_BY_NAME = {f.__name__: f for f in (*BUILDERS.values(), fall_contrast, perturbation_cost)}


def _show(x: float, digits: int, signed: bool, marks: list[float]) -> str:
    """``x`` with ``digits`` decimals, or up to three more where fewer would print it equal to a value the rule
    compares it with (0, the threshold) that it is not: a reader can then check the verdict from the digits."""
    for d in range(digits, digits + 4):
        text = f"{x:{'+' if signed else ''}.{d}f}"
        if not any(round(x, d) == round(m, d) and x != m for m in marks):
            break
    return text


def effect_text(e: dict) -> str:
    """One effect record (:func:`record`) in words: ours with its interval, the paper's beside it and the threshold
    of the rule, e.g. ``+8.2 [+3.0, +13.4] points; the paper +23.2 (differs below +11.6)``."""
    if e.get("value") is None:
        return "undefined (nothing to measure it on)"
    d, s = e.get("digits", 1), e["scale"]
    marks = [0.0] + ([] if e.get("paper_effect") is None else [e["threshold"]])
    show = (lambda x: _show(s * x, d, e.get("signed", True), marks))
    ours = f"{show(e['value'])} [{show(e['lo'])}, {show(e['hi'])}]{e['unit']}"
    if e.get("absence"):
        return (f"{ours}; the paper none, where TRM loses {e['paper_effect']:g} (agrees below "
                f"{e['threshold']:g}, differs above)")
    if e.get("paper_effect") is None:
        return f"{ours}; the paper gives no number (differs below 0)"
    side = "below" if e["paper_effect"] > 0 else "above"
    return f"{ours}; the paper {e['paper_effect']:+g} (differs {side} {e['threshold']:+g})"


def record(cid: str, effect: Interval | None, untestable: str = "", digits: int = 1) -> dict:
    """What a summary keeps of a claim's effect: its verdict (``agrees``: True, False or None, by
    ``intervals.verdict``; None when ``untestable`` says why it cannot be tested here), and ``effect``: the effect in
    words, its value and interval (the statistic's units; ``scale`` and ``unit`` to show it), the paper's value and the
    rule's threshold (display units), the seeds and items, what was undefined and how the interval was computed."""
    c = paper.CLAIMS_BY_ID[cid]
    if effect is None:
        return {"agrees": None}
    undefined = effect.value != effect.value
    paper_stat = None if c.paper_effect is None else c.paper_effect / c.scale
    agrees = None if untestable or undefined else intervals.verdict(effect, paper_stat, absence=c.absence)
    threshold = round(intervals.FRACTION * c.paper_effect, 4) if c.paper_effect is not None else 0.0
    e = {"what": c.effect, "value": None if undefined else float(effect.value),
         "lo": None if undefined else float(effect.lo), "hi": None if undefined else float(effect.hi),
         "scale": c.scale, "unit": c.unit, "digits": digits if c.scale != 1 else 2,
         "paper_effect": c.paper_effect,
         "paper_basis": c.basis, "threshold": abs(threshold) if c.absence else threshold, "absence": c.absence,
         "signed": BUILDERS.get(cid) is not proportion, "seeds": effect.seeds, "items": effect.puzzles,
         "undefined_seeds": effect.undefined_seeds,
         "undefined_replicates": effect.undefined_replicates, "replicates": effect.replicates,
         "mc_error": effect.mc_error, "method": effect.describe(c.scale, c.unit)}
    out = {"agrees": agrees, "effect": e, "seeds": effect.seeds, "rule": RULE_VERSION}
    if untestable:
        out["untestable"] = str(untestable)
    return out


RULE_VERSION = 2  # 1: a two-level percentile bootstrap, verdict by the side of zero (until issue 49)


def claim_dict(cid: str, ours: str, agrees=None, note: str | None = None, *, effect: Interval | None = None,
               untestable: str = "", digits: int = 1, seeds: list[int] | None = None) -> dict:
    """A claim as a summary keeps it (``notebooks/helper.py``, ``Notebook.claim``): the claim and the paper's number
    from ``paper.CLAIMS``, ``ours``, and either the verdict decided by the rule from ``effect`` (:func:`record`; its
    note the effect beside the paper's and how the interval was computed) or, without one, ``agrees`` as given."""
    c = paper.CLAIMS_BY_ID[cid]
    out = {"id": c.id, "claim": c.claim, "paper": c.paper, "ours": ours,
           "agrees": None if agrees is None else bool(agrees)}
    if effect is not None:
        if agrees is not None:
            raise ValueError(f"claim {cid}: give an effect (its verdict follows from the rule) or agrees, not both")
        rec = record(cid, effect, untestable, digits)
        out.update(rec)
        note = note or _note(c, rec, untestable)
        data = pack(effect, untestable, digits, seeds)
        if data is not None:
            out["data"] = data
    if note:
        out["note"] = note
    return out


def _note(c: paper.Claim, rec: dict, untestable: str) -> str:
    label = "untestable" if untestable else intervals.LABELS[rec["agrees"]]
    return (f"{c.effect}: {effect_text(rec['effect'])} ({label}; {rec['effect']['method']})"
            + (f". Untestable: {untestable}" if untestable else ""))


def decide_again(data: dict) -> tuple[Interval, str]:
    """A claim's effect and why it is untestable ("" if not), from its recorded data (``claim_data.decide``)."""
    return decide(data, BUILDERS_BY_NAME, untestable_unless_lost)


def redecide(claim: dict, data: dict | None = None) -> dict:
    """``claim`` (a summary's) decided again from ``data`` (default its own recorded data: ``claim_data``) by
    today's builders and rule: its verdict, effect, seeds, untestability and note replaced; ``ours`` and the rest kept.
    A claim recorded without data is returned as it is."""
    data = claim.get("data") if data is None else data
    if not data:
        return claim
    effect, untestable = decide_again(data)
    rec = record(claim["id"], effect, untestable, data["digits"])
    out = {k: v for k, v in claim.items() if k not in ("untestable", "agrees", "effect", "seeds", "rule", "note")}
    out.update(rec)
    out["note"] = _note(paper.CLAIMS_BY_ID[claim["id"]], rec, untestable)
    out["data"] = data
    return out


def perturbation_claims(terms: dict[str, list[list[tuple[Flags, Flags]]]], eps: tuple[float, ...],
                        labels: dict[str, str]) -> list[dict]:
    """Notebook 04's two claims from ``terms[recipe][seed][i]`` = (solved at the perturbation and right at the end,
    solved at the perturbation) at ``eps[i]``; ``labels``: the models' names. ``perturb.carry_last_loses``: carry-last's
    own loss at ε = 0; ``perturb.infiloop_retains``: InfiLoop's loss at the strongest ε, untestable unless that
    perturbation costs some model a solved puzzle beyond its unperturbed run (:func:`perturbation_moved`)."""
    strongest = int(np.argmax(eps))
    control = list(eps).index(0.0) if 0.0 in eps else None

    def lost(r, i):
        return [q[i][1] & ~q[i][0] for q in terms[r]], [q[i][1] for q in terms[r]]

    retention = proportion(*[[q[strongest][k] for q in terms["infiloop"]] for k in (0, 1)])
    inf_loss = proportion(*lost("infiloop", strongest))
    if control is None:
        untestable = ("ε = 0 (the unperturbed control) is not in the grid: what the perturbation costs cannot be "
                      "measured")
    else:
        costs = {labels[r]: perturbation_cost([q[control][0] for q in t], [q[strongest][0] for q in t],
                                              [q[strongest][1] for q in t]) for r, t in terms.items()}
        untestable = perturbation_moved(costs, eps[strongest])
    out = [claim_dict("perturb.infiloop_retains", f"InfiLoop's retention at ε = {eps[strongest]:g}: {retention.pct()}",
                      effect=inf_loss, untestable=untestable)]
    if control is None:
        return out + [claim_dict("perturb.carry_last_loses", "not measured: ε = 0 is not in the grid")]
    cl_loss = proportion(*lost("carry_last", control))
    solved = " / ".join(str(int(np.sum(q[control][1]))) for q in terms["carry_last"])
    return out + [claim_dict("perturb.carry_last_loses", f"carry-last's loss at ε = 0: {cl_loss.pct()} of {solved} "
                             "solved puzzles", effect=cl_loss)]
