"""Coverage of the notebooks' 95 % intervals: the simulation that chose ``infiloop/analysis/intervals.py``'s method.

Two models on the same test puzzles, trained with 1, 3 or 10 seeds, on the profiles' puzzle counts (128: `quick`;
256: `search` and `tiny`), with a small or a `search`-like spread between seeds, with no true effect and with a
true +5 points (the model of ``infiloop/analysis/coverage.py``). For each cell, over ``--n`` simulated experiments:
how often the 95 % interval of the paired difference covers the true effect, lies wholly above zero ("agrees"
with a positive effect) and wholly below it, and its mean width. Two methods:

- ``earlier``: the two-level percentile bootstrap the notebooks used until issue 49 (seeds drawn with replacement,
  then each drawn seed's own puzzle draw; 1,000 resamples; the 2.5th and 97.5th percentiles);
- ``t, crossed``: the current method (``intervals.interval``): a t interval over the per-seed effects with the
  puzzles' variance from resamples shared by every seed, Satterthwaite's degrees of freedom.

Then the Monte-Carlo error of a bound: one `search`-like experiment's interval computed with 20 different random
seeds of the resampling, by each method; the spread of its lower bound across them.

    python benchmarks/interval_coverage.py                 # the full table (about 10 minutes on two cores)
    python benchmarks/interval_coverage.py --quick         # a smaller n, for a look
    python benchmarks/interval_coverage.py --write         # and fill docs/statistics.md's table with it
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infiloop.analysis import coverage, intervals  # noqa: E402
from infiloop.io import atomic_write_text, fill_block  # noqa: E402

START, END = "<!-- coverage: start -->", "<!-- coverage: end -->"
DOC = ROOT / "docs" / "statistics.md"


def earlier_interval(flags: np.ndarray, replicates: int, seed: int) -> tuple[float, float]:
    """The method of the notebooks until issue 49: a two-level percentile bootstrap (seeds with replacement, then,
    within each drawn seed, its puzzles with replacement, a draw of its own), the 2.5th and 97.5th percentiles."""
    rng = np.random.default_rng(seed)
    d = flags[1] - flags[0]  # [S, P] paired per-puzzle differences
    s, p = d.shape
    picks = rng.integers(0, s, (replicates, s)) if s > 1 else np.zeros((replicates, 1), dtype=np.int64)
    idx = rng.integers(0, p, (replicates, s, p))
    reps = np.take_along_axis(d[picks], idx, axis=-1).mean(-1).mean(-1)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return float(lo), float(hi)


METHODS = {"earlier": earlier_interval, "t, crossed": coverage.project_interval}


def table(n: int, seeds=(1, 3, 10), puzzles=(128, 256), replicates: int = 400) -> list[str]:
    """The coverage table (markdown rows): every cell of the grid, both methods."""
    rows = ["| seeds | puzzles | seed spread | true effect | method | covers | above 0 | below 0 | mean width |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s in seeds:
        for p in puzzles:
            for spread in coverage.SPREADS:
                for effect in (0.0, 0.05):
                    for name, method in METHODS.items():
                        reps = 1000 if name == "earlier" else replicates
                        c = coverage.simulate(method, s, p, effect, spread, n, reps, seed=s * 1000 + p)
                        rows.append(f"| {s} | {p} | {spread} | {100 * effect:+.0f} points | {name} | "
                                    f"{100 * c.covers:.1f} % | {100 * c.above:.1f} % | {100 * c.below:.1f} % | "
                                    f"{100 * c.width:.1f} points |")
                        print(rows[-1], flush=True)
    return rows


def monte_carlo(runs: int = 20) -> list[str]:
    """The spread of one experiment's lower bound over ``runs`` resampling seeds, for each method."""
    flags = coverage.draw(np.random.default_rng(7), 3, 256, 0.05, "search")
    ones = np.ones(256)
    per_seed = [[(flags[1, s], ones), (flags[0, s], ones)] for s in range(3)]
    earlier = [earlier_interval(flags, 1000, k)[0] for k in range(runs)]
    current = [intervals.interval(per_seed, lambda q: q[0] - q[1], seed=k, vectorized=True) for k in range(runs)]
    reported = max(iv.mc_error for iv in current)
    return [f"One `search`-like experiment (3 seeds, 256 puzzles, true +5 points), its interval computed with {runs} "
            "resampling seeds: the lower bound's standard deviation across them is "
            f"{100 * np.std(earlier, ddof=1):.2f} points for the earlier method (1,000 resamples) and "
            f"{100 * np.std([iv.lo for iv in current], ddof=1):.3f} points for the current one "
            f"({min(iv.replicates for iv in current):,}–{max(iv.replicates for iv in current):,} resamples, added "
            f"until the reported Monte-Carlo error of the bounds is below 0.05 points; the largest reported: "
            f"{100 * reported:.3f} points)."]


VERDICTS = ("<!-- verdict-rates: start -->", "<!-- verdict-rates: end -->")
PAPER_LEAD = 0.232  # the paper's lead of InfiLoop over TRM (Table 1: 97.9 − 74.7), the headline claim's effect


def verdict_rates(n: int, seeds: int = 21, puzzles: int = 256, spread: str = "search",
                  replicates: int = 400) -> list[str]:
    """How often each verdict of the rule (``intervals.outcome``) comes out at ``seeds`` seeds, with the paper's
    effect +23.2 points, when the true effect is zero, a third of the paper's or the paper's: the error rates of
    "smaller" (it should read smaller at a third, never at the paper's value) and of the other outcomes."""
    rows = ["| seeds | puzzles | seed spread | true effect | agrees | smaller | differs | undecided | covers |",
            "|---|---|---|---|---|---|---|---|---|"]
    for effect in (0.0, PAPER_LEAD / 3, PAPER_LEAD):
        rng = np.random.default_rng(seeds * 1000 + puzzles + int(1000 * effect))
        counts = dict.fromkeys(("agrees", "smaller", "differs", "undecided"), 0)
        covers = 0
        for i in range(n):
            flags = coverage.draw(rng, seeds, puzzles, effect, spread)
            ones = np.ones(puzzles)
            iv = intervals.interval([[(flags[1, s], ones), (flags[0, s], ones)] for s in range(seeds)],
                                    lambda q: q[0] - q[1], replicates=replicates, seed=i, vectorized=True)
            counts[intervals.outcome(iv, PAPER_LEAD)] += 1
            covers += iv.lo <= effect <= iv.hi
        rows.append(f"| {seeds} | {puzzles} | {spread} | {100 * effect:+.2f} points | "
                    + " | ".join(f"{100 * counts[k] / n:.1f} %" for k in counts) + f" | {100 * covers / n:.1f} % |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="simulated experiments per cell (default 2000)")
    ap.add_argument("--quick", action="store_true", help="n = 300, for a look")
    ap.add_argument("--write", action="store_true", help=f"fill the table in {DOC.relative_to(ROOT)}")
    ap.add_argument("--verdicts", action="store_true", help="only the rates of each verdict at 21 seeds (the rule's "
                    "'smaller', issue 74), with --write into its own block")
    args = ap.parse_args(argv)
    if args.verdicts:
        n = 300 if args.quick else args.n
        t0 = time.time()
        rows = verdict_rates(n)
        head = [f"Measured by `python benchmarks/interval_coverage.py --verdicts{' --quick' if args.quick else ''}` "
                f"({datetime.date.today().isoformat()}, {platform.machine()}, numpy {np.__version__}; "
                f"{time.time() - t0:.0f} s): {n:,} simulated experiments per row, the paper's effect +23.2 points "
                "(half: +11.6), 400 puzzle resamples per interval; the binomial standard error of a 5 % share is "
                f"{100 * np.sqrt(0.05 * 0.95 / n):.1f} points."]
        if args.write:
            text = DOC.read_text(encoding="utf-8")
            filled = fill_block(text, *VERDICTS, "\n".join([VERDICTS[0], *head, "", *rows, VERDICTS[1]]))
            if filled is None:
                raise SystemExit(f"{DOC}: no {VERDICTS[0]} ... {VERDICTS[1]} block")
            atomic_write_text(DOC, filled)
            print(f"wrote {DOC}")
        return 0
    n = 300 if args.quick else args.n
    t0 = time.time()
    head = [f"Measured by `python benchmarks/interval_coverage.py{' --quick' if args.quick else ''}` "
            f"({datetime.date.today().isoformat()}, {platform.machine()}, numpy {np.__version__}): {n:,} simulated "
            "experiments per cell (the binomial standard error of a 95 % coverage is "
            f"{100 * np.sqrt(0.95 * 0.05 / n):.1f} points, of a 2.5 % share {100 * np.sqrt(0.025 * 0.975 / n):.1f})."]
    rows = table(n)
    mc = monte_carlo()
    print(mc[0])
    print(f"({time.time() - t0:.0f} s)")
    if args.write:
        text = DOC.read_text(encoding="utf-8")
        block = "\n".join([START, *head, "", *rows, "", *mc, END])
        filled = fill_block(text, START, END, block)
        if filled is None:
            raise SystemExit(f"{DOC}: no {START} ... {END} block")
        atomic_write_text(DOC, filled)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
