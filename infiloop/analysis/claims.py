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
from .claim_data import Untestable, captured, decide, decode, encode, pack
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


def _held_out_peaks(curves: list[np.ndarray], per_seed: bool = True) -> tuple[list, list[Flags]]:
    """Each half's peak row and, per seed, every puzzle's solved flag at the peak chosen for it (:func:`held_out_fall`).
    ``per_seed``: each seed's peaks chosen on that seed's own curve of the other half (since 2026-12-07; the peaks are
    then one pair per seed); else on the other half's mean curve over the seeds (one pair for all: the earlier
    analysis, which serves seeds whose peaks differ with one update)."""
    half = np.arange(curves[0].shape[1]) % 2  # 0 or 1

    def peaks(group: list[np.ndarray]) -> list[int]:  # the peak of half h, chosen on half h, serves the other half
        return [int(np.argmax(np.mean([c[:, half == h].mean(1) for c in group], axis=0))) for h in (0, 1)]

    chosen = [peaks([c]) for c in curves] if per_seed else [peaks(curves)] * len(curves)
    at_peak = [np.where(half == 0, c[k[1]], c[k[0]]) for c, k in zip(curves, chosen)]
    return (chosen if per_seed else chosen[0]), at_peak


def _pooled(iv: Interval) -> dict:
    return {"value": float(iv.value), "lo": float(iv.lo), "hi": float(iv.hi)}


@captured
def held_out_fall(curves: list[np.ndarray]) -> Interval:
    """The fall after the peak with the peak chosen on held-out puzzles: ``curves[s]`` [K, P] is seed s's solved
    flags at each recorded update (the last row the deepest). The puzzles are split by index parity (generated in
    random order: a random split); for each seed, each half's peak is the first update where that seed's curve of
    the other half is highest; the effect is the mean over seeds and puzzles of solved-at-its-peak − solved-at-the-end.
    The peaks (row indices for half 0 and half 1, one pair per seed) are in ``extra["peaks"]``; the earlier analysis,
    one pair of peaks chosen on the mean curve over the seeds (until 2026-12-07), in ``extra["pooled_peak"]``
    (value and interval) with its peaks in ``extra["pooled_peaks"]``."""
    chosen, at_peak = _held_out_peaks(curves)
    iv = difference([(a, c[-1]) for a, c in zip(at_peak, curves)])
    pooled_peaks, pooled_at = _held_out_peaks(curves, per_seed=False)
    iv.extra = {"peaks": chosen, "pooled_peaks": pooled_peaks,
                "pooled_peak": _pooled(difference([(a, c[-1]) for a, c in zip(pooled_at, curves)]))}
    return iv


def peaks_text(fall: Interval, updates) -> str:
    """The held-out peaks of :func:`held_out_fall` in words, as updates: ``"12 / 14"`` for one seed, else the range
    over the seeds and halves (``"per seed, updates 12–40"``)."""
    ups = np.asarray(updates)
    peaks = fall.extra["peaks"]
    if peaks and not isinstance(peaks[0], (list, tuple)):
        peaks = [peaks]
    if len(peaks) == 1:
        return " / ".join(str(int(ups[k])) for k in peaks[0])
    flat = [int(ups[k]) for pair in peaks for k in pair]
    return f"per seed, updates {min(flat)}–{max(flat)}"


@captured
def fall_contrast(curves_a: list[np.ndarray], curves_b: list[np.ndarray]) -> Interval:
    """How much more model a falls after its held-out peak than model b does, on the same puzzles of each seed: the
    mean over seeds of (a at its peak − a at the end) − (b at its peak − b at the end), each model's peaks chosen as
    :func:`held_out_fall` chooses them, per seed (positive: a overthinks more than b). Peaks in ``extra["peaks"]``
    (a's per seed, b's per seed)."""
    (pa, a_peak), (pb, b_peak) = _held_out_peaks(curves_a), _held_out_peaks(curves_b)
    iv = difference_of_changes([(ap, a[-1], bp, b[-1]) for ap, a, bp, b in zip(a_peak, curves_a, b_peak, curves_b)],
                               items="puzzles")
    iv.extra = {"peaks": (pa, pb)}
    return iv


@captured
def proportion(events: list[Flags], trials: list[Flags], level: float = 0.95) -> Interval:
    """Mean over seeds of events / trials (``events[s]``, ``trials[s]``: seed s's [P] flags, events among trials): the
    point and the interval are for the same estimand, the mean of the per-seed shares (until 2026-12-07 the interval
    was widened to contain the exact interval of the pooled counts, another estimand). Where nothing moves it (no
    seed lost anything) ``intervals.interval`` widens it by the exact bound on the pooled pairs. The pooled counts and
    their exact (Clopper–Pearson) interval are kept beside it, in ``extra["pooled"]`` (x, n, lo, hi), for the words."""
    x = int(sum(np.asarray(e, bool).sum() for e in events))
    n = int(sum(np.asarray(t, bool).sum() for t in trials))
    per_seed = [[(np.asarray(e, np.float64), np.asarray(t, np.float64))] for e, t in zip(events, trials)]
    iv = intervals.interval(per_seed, intervals._first, vectorized=True, bounds=(0.0, 1.0), level=level)
    iv.extra = {"pooled": (x, n, *binomial_interval(x, n, level))} if n else {}
    return iv


@captured
def share(per_seed: list[intervals.Ratio]) -> Interval:
    """Mean over seeds of one ratio (numerator / denominator summed over the seed's puzzles), e.g. the share of the
    instances a model solved at some update that it has wrong at the deepest: ``per_seed[s]`` = (numerator,
    denominator) over seed s's puzzles. The estimand of :func:`proportion`, from ratios instead of flags."""
    return intervals.interval([[(np.asarray(n, np.float64), np.asarray(d, np.float64))] for n, d in per_seed],
                              intervals._first, vectorized=True, bounds=(0.0, 1.0))


@captured
def ratio_changes(per_seed: list[tuple[intervals.Ratio, ...]], bounds: tuple[float, float] | None = None) -> Interval:
    """Mean over seeds of (ratio a₀ − ratio a₁) − (ratio b₀ − ratio b₁) on the same puzzles: ``per_seed[s]`` = (a₀, a₁,
    b₀, b₁), each a (numerator, denominator) pair over seed s's puzzles (e.g. InfiLoop's fall of wrong cells between
    two snapshots against carry-last's)."""
    return intervals.interval([list(q) for q in per_seed], _changes, vectorized=True, bounds=bounds)


@captured
def perturbation_cost(kept_control: list[Flags], kept: list[Flags], solved: list[Flags]) -> Interval:
    """What a perturbation cost: mean over seeds of (kept without it − kept with it) / solved at the perturbation,
    on the same puzzles (``kept_control[s]``, ``kept[s]``, ``solved[s]``: seed s's [P] flags)."""
    per_seed = [[(np.asarray(a, np.float64), np.asarray(n, np.float64)), (np.asarray(b, np.float64),
                                                                         np.asarray(n, np.float64))]
                for a, b, n in zip(kept_control, kept, solved)]
    return intervals.interval(per_seed, _diff, vectorized=True, bounds=(-1.0, 1.0))


def untestable_unless_lost(losses: dict[str, Interval], what: str, beyond: str = "", margin: float = 0.0) -> str:
    """"" when some model's loss of solved puzzles (``losses``: each model's interval of it) lies wholly above
    ``margin`` (half the loss the paper's TRM shows, as a share: the absence claim's threshold), so that a claim that
    one model keeps them can be tested against a model that loses as the paper's TRM does; else why it cannot, in
    words. Until 2026-12-07 the guard asked only for a loss above zero, which passes an empty "agrees" whenever the
    comparison model loses a little (and read an interval clipped at zero as none)."""
    inputs = [getattr(iv, "inputs", None) for iv in losses.values()]
    data = None if None in inputs else {"what": what, "beyond": beyond, "losses": dict(zip(losses, inputs))}
    if any(float(iv.lo) > margin for iv in losses.values()):
        return Untestable("", data)
    bar = f"{100 * margin:g} %, half the paper's TRM's loss" if margin > 0 else "zero"
    return Untestable(f"{what} cost no model more than {bar}{beyond} (no interval of a loss lies above it: "
                      + ", ".join(f"{k} {iv.points()}" for k, iv in losses.items())
                      + "), so keeping them says nothing at this scale", data)


def margin(cid: str) -> float:
    """The threshold of claim ``cid``'s rule as a fraction (half the paper's effect; 0 where it gives no number)."""
    c = paper.CLAIMS_BY_ID[cid]
    return 0.0 if c.paper_effect is None else intervals.FRACTION * abs(c.paper_effect) / c.scale


def perturbation_moved(costs: dict[str, Interval], eps: float, margin: float = 0.0) -> str:
    """"" when some model's cost of the strongest perturbation lies above ``margin`` (the perturbation moves solved
    answers as the paper's TRM loses them, so that a claim of keeping them can be tested), else why the claim is
    untestable, in words."""
    return untestable_unless_lost(costs, f"the strongest perturbation (ε = {eps:g})", " beyond its unperturbed run",
                                  margin)


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
    "overthink.carry_last_overthinks": held_out_fall, "overthink.infiloop_keeps": share,
}
# The builders by name, for a claim decided again from its recorded data (``claim_data.decide``).
BUILDERS_BY_NAME = {f.__name__: f for f in (*BUILDERS.values(), fall_contrast, perturbation_cost, ratio_difference,
                                            ratio_changes, difference_of_changes)}


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
    of the rule (half the paper's effect: below it, an interval above zero reads smaller and one that holds zero
    differs), e.g. ``+8.2 [+3.0, +13.4] points; the paper +23.2 (half: +11.6)``."""
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
    return f"{ours}; the paper {e['paper_effect']:+g} (half: {e['threshold']:+g})"


def record_effect(effect: Interval, what: str, paper_effect: float | None, basis: str, unit: str, scale: float,
                   digits: int, absence: bool, signed: bool) -> dict:
    undefined = effect.value != effect.value
    threshold = round(intervals.FRACTION * paper_effect, 4) if paper_effect is not None else 0.0
    e = {"what": what, "value": None if undefined else float(effect.value),
         "lo": None if undefined else float(effect.lo), "hi": None if undefined else float(effect.hi),
         "scale": scale, "unit": unit, "digits": digits if scale != 1 else 2,
         "paper_effect": paper_effect, "paper_basis": basis, "threshold": abs(threshold) if absence else threshold,
         "absence": absence, "signed": signed, "seeds": effect.seeds, "items": effect.puzzles,
         "undefined_seeds": effect.undefined_seeds,
         "undefined_replicates": effect.undefined_replicates, "replicates": effect.replicates,
         "mc_error": effect.mc_error, "method": effect.describe(scale, unit)}
    pooled = (getattr(effect, "extra", None) or {}).get("pooled")
    if pooled and len(pooled) == 4 and pooled[1]:
        e["pooled"] = {"events": pooled[0], "trials": pooled[1], "lo": pooled[2], "hi": pooled[3]}
    earlier = (getattr(effect, "extra", None) or {}).get("pooled_peak")
    if earlier:
        e["pooled_peak"] = {**earlier, "verdict": intervals.outcome(
            Interval(earlier["value"], earlier["lo"], earlier["hi"], effect.seeds, effect.puzzles),
            None if paper_effect is None else paper_effect / scale, absence=absence)}
    return e


def outcome_of(effect: Interval, paper_effect: float | None, scale: float, absence: bool) -> str:
    if effect.value != effect.value:
        return intervals.UNDECIDED
    return intervals.outcome(effect, None if paper_effect is None else paper_effect / scale, absence=absence)


def record(cid: str, effect: Interval | None, untestable: str = "", digits: int = 1) -> dict:
    """What a summary keeps of a claim's effect: its verdict (``verdict``: agrees, smaller, differs, undecided, by
    ``intervals.outcome``, or untestable when ``untestable`` says why it cannot be tested here; ``agrees``: True for
    agrees, False for differs, None otherwise), and ``effect``: the effect in words, its value and interval (the
    statistic's units; ``scale`` and ``unit`` to show it), the paper's value and the rule's threshold (display units),
    the seeds and items, what was undefined and how the interval was computed. A claim with a contrast
    (``paper.Claim.contrast``) gains it from the summary's other claims (``contrasts.with_contrasts``)."""
    c = paper.CLAIMS_BY_ID[cid]
    if effect is None:
        return {"agrees": None}
    v = intervals.UNTESTABLE if untestable else outcome_of(effect, c.paper_effect, c.scale, c.absence)
    e = record_effect(effect, c.effect, c.paper_effect, c.basis, c.unit, c.scale, digits, c.absence,
                       BUILDERS.get(cid) not in (proportion, share))
    out = {"agrees": {intervals.AGREES: True, intervals.DIFFERS: False}.get(v), "verdict": v, "effect": e,
           "seeds": effect.seeds, "rule": RULE_VERSION}
    if untestable:
        out["untestable"] = str(untestable)
    return out


RULE_VERSION = 3  # 1: a two-level percentile bootstrap, verdict by the side of zero; 2: no smaller


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


def label(claim: dict) -> str:
    """A summary's claim's verdict in one word (the lead: its contrast's where it has one): agrees, smaller, differs,
    undecided or untestable."""
    if claim.get("untestable") and "verdict" not in claim:
        return intervals.UNTESTABLE
    if claim.get("verdict") in intervals.OUTCOMES:
        return claim["verdict"]
    return intervals.LABELS[claim.get("agrees")]


def _note(c: paper.Claim, rec: dict, untestable: str) -> str:
    return (f"{c.effect}: {effect_text(rec['effect'])} ({rec.get('verdict', 'undecided')}; {rec['effect']['method']})"
            + (f". Untestable: {untestable}" if untestable else ""))


def decide_again(data: dict, cid: str | None = None) -> tuple[Interval, str]:
    """A claim's effect and why it is untestable ("" if not), from its recorded data (``claim_data.decide``); the
    guard's margin is claim ``cid``'s (:func:`margin`; 0 without ``cid``)."""
    return decide(data, BUILDERS_BY_NAME, untestable_unless_lost, 0.0 if cid is None else margin(cid))


def _migrated(cid: str, data: dict) -> dict:
    """``data`` recorded by an earlier definition of claim ``cid``, in today's: ``overthink.infiloop_keeps`` was
    carry-last's share lost − InfiLoop's (``ratio_difference``) until 2026-12-07 and is now InfiLoop's own share
    (``share``), guarded by both models' shares (:func:`untestable_unless_lost`); the same per-seed ratios."""
    inputs = decode(data["effect"])
    if cid != "overthink.infiloop_keeps" or inputs["builder"] != "ratio_difference":
        return data
    pairs = inputs["args"][0]
    guard = {"what": "iterating to the deepest update", "beyond": "",
             "losses": {"carry-last": {"builder": "share", "args": [[q[0] for q in pairs]], "kwargs": {}},
                        "InfiLoop": {"builder": "share", "args": [[q[1] for q in pairs]], "kwargs": {}}}}
    return {**data, "effect": encode({"builder": "share", "args": [[q[1] for q in pairs]], "kwargs": {}}),
            "guard": encode(guard)}


def redecide(claim: dict, data: dict | None = None) -> dict:
    """``claim`` (a summary's) decided again from ``data`` (default its own recorded data: ``claim_data``) by
    today's builders and rule: its verdict, effect, seeds, untestability and note replaced; ``ours`` and the rest kept
    (a contrast is added again by ``contrasts.with_contrasts``, which needs the summary's other claims). A claim
    recorded without data is returned as it is."""
    data = claim.get("data") if data is None else data
    if not data:
        return claim
    data = _migrated(claim["id"], data)
    effect, untestable = decide_again(data, claim["id"])
    rec = record(claim["id"], effect, untestable, data["digits"])
    drop = ("untestable", "agrees", "verdict", "own_verdict", "contrast", "effect", "seeds", "rule", "note")
    out = {k: v for k, v in claim.items() if k not in drop}
    c = paper.CLAIMS_BY_ID[claim["id"]]
    out.update(claim=c.claim, paper=c.paper)  # the paper's words are the code's, not the run's
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
        untestable = perturbation_moved(costs, eps[strongest], margin("perturb.infiloop_retains"))
    out = [claim_dict("perturb.infiloop_retains", f"InfiLoop's retention at ε = {eps[strongest]:g}: {retention.pct()}",
                      effect=inf_loss, untestable=untestable)]
    if control is None:
        return out + [claim_dict("perturb.carry_last_loses", "not measured: ε = 0 is not in the grid")]
    cl_loss = proportion(*lost("carry_last", control))
    solved = " / ".join(str(int(np.sum(q[control][1]))) for q in terms["carry_last"])
    return out + [claim_dict("perturb.carry_last_loses", f"carry-last's loss at ε = 0: {cl_loss.pct()} of {solved} "
                             "solved puzzles", effect=cl_loss)]
