"""``python -m infiloop eval``: a trained run evaluated to any depth (a trajectory file and exact accuracy by depth;
ARC: pass@1 and pass@2 by depth), with a perturbation of the state (``--perturb-at``) or told its budget
(``--budgets``); which weights and which puzzle ids are recorded with it (``--weights``, ``--puzzle-ids``)."""

from __future__ import annotations

import argparse
import math

from ..errors import UsageError
from . import args as cli_args

EVAL_EXAMPLES = """examples (RUN: the folder printed by `train`):
  python -m infiloop eval RUN --updates 48 --every 4
  python -m infiloop eval RUN --updates 12 --precision bf16
  python -m infiloop eval RUN --updates 12 --weights last --puzzle-ids blank
  python -m infiloop eval RUN --updates 12 --weights best
  python -m infiloop eval RUN --perturb-at 2 --eps 0,1e-4,1e-2,0.3 --updates 3
  python -m infiloop eval RUN --budgets 8,16,32 --limit 16
"""


def _floats(text: str) -> tuple[float, ...]:
    """``--eps``: comma-separated finite sizes >= 0."""
    try:
        eps = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        eps = ()
    if not eps or any(not (math.isfinite(e) and e >= 0) for e in eps):
        raise UsageError(f"--eps {text}: expected comma-separated finite sizes >= 0, e.g. 0,1e-4,1e-2,0.3")
    return eps


def _budgets(text: str) -> tuple[int, ...]:
    """``--budgets``: comma-separated outer-update counts >= 1."""
    try:
        budgets = tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        budgets = ()
    if not budgets or min(budgets) < 1:
        raise UsageError(f"--budgets {text}: expected comma-separated outer-update counts >= 1, e.g. 16,64,960")
    return budgets


def _request(args: argparse.Namespace):
    """The trajectory ``eval`` asks for (``evaluation.EvalRequest``), from its options."""
    from ..evaluation import EvalRequest

    return EvalRequest(updates=args.updates, every=args.every, limit=args.limit, per_token=args.per_token,
                       precision=args.precision, weights=args.weights, puzzle_ids=args.puzzle_ids,
                       device=args.device, progress=not args.quiet)


def cmd_eval(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from ..evaluation import accuracy_by_depth
    from ..experiments.store.runs import load_run
    from ..tasks.registry import task

    budgets = _budgets(args.budgets) if args.budgets is not None else None
    eps = _floats(args.eps) if args.perturb_at is not None else None
    cli_args.check_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    run = load_run(args.run_dir)
    data = run.user_data(args.data) if args.data else None
    cfg = run.model_config()
    if budgets:
        out, path = run.budgets(budgets, args.limit, data, args.data, device=args.device, progress=not args.quiet,
                                precision=args.precision)
        print(f"# exact accuracy after exactly N outer updates on {_puzzles(out['correct'].shape[-1], args.data)}, "
              f"each run told its budget ({cfg.layers_per_outer_update} layers per outer update)")
        print("budget  layers  exact_acc")
        for b, c in zip(out["budgets"], out["correct"]):
            print(f"{b:6d}  {b * cfg.layers_per_outer_update:6d}  {c.mean():.4f}")
    elif eps is not None:
        out, path = run.perturb(args.perturb_at, eps, args.updates, args.every, args.limit, data, args.data,
                                args.device, progress=not args.quiet, precision=args.precision)
        solved = out["solved_at"]
        print(f"# {int(solved.sum())} of {_puzzles(len(solved), args.data)} solved at update "
              f"{args.perturb_at}; retention after {int(out['updates'][-1]) - args.perturb_at} more updates, "
              f"and median relative distance at the end:")
        for e, eps_v in enumerate(out["eps"]):
            kept = (out["correct"][e, -1] & solved).sum() / max(1, solved.sum())
            print(f"eps={eps_v:<8g} retention={kept:.4f} distance={np.median(out['distance'][e, -1]):.4g}")
    elif task(run.config["task"]).voted:
        limit, snapshots, test = _arc_plan(run, args.updates, args.every, args.limit)
        traj, path = run.evaluate(_request(args), limit=limit, snapshots=snapshots)
        _print_arc(traj, test, run, cfg.layers_per_outer_update)
    else:
        traj, path = run.evaluate(_request(args), data, args.data)
        print(f"# exact accuracy by depth on {_puzzles(traj['correct'].shape[1], args.data)} "
              f"({cfg.layers_per_outer_update} layers per outer update)")
        print("update  layers  exact_acc")
        for k, acc in accuracy_by_depth(traj):
            print(f"{k:6d}  {k * cfg.layers_per_outer_update:6d}  {acc:.4f}")
    print(path)
    return 0


SHOW_TASKS = 20  # task ids listed after an ARC evaluation, at most


def _arc_plan(run, updates: int | None, every: int | None, limit: int | None):
    """An ARC evaluation: (limit, prediction snapshot depths, evaluated test rows). By default every test row
    (pass@k is over whole tasks, as notebook 01 scores them); snapshots at the depths of
    ``analysis.pass_depths``, so that pass@k by depth is read from the cached evaluation."""
    from ..analysis.trajectories import pass_depths
    from ..tasks import solutions_from_data

    limit = limit or len(run.test_data())
    resolved, test, _ = run.eval_key("evaluate", {"updates": updates, "every": every, "limit": limit})
    solutions_from_data(test)  # refuses a test set without its outputs before anything is evaluated
    return limit, pass_depths(resolved["updates"], resolved["every"], len(test), test.inputs.shape[1]), test


def _print_arc(traj: dict, test, run, layers: int) -> None:
    """Exact accuracy by depth, pass@1 and pass@2 at the snapshot depths, the tasks pass@2 solves at the last."""
    from ..analysis.trajectories import arc_pass_by_depth
    from ..evaluation import accuracy_by_depth
    from ..tasks import solutions_from_data

    sols = solutions_from_data(test)
    by_depth = arc_pass_by_depth(traj, test, (1, 2))
    full = run.test_data()
    print(f"# exact accuracy by depth on {len(test)} rows of the profile's test set ({len(sols)} tasks, each test "
          f"input in {test.info['views']} views; {layers} layers per outer update); pass@1, pass@2: the views' "
          f"answers voted per test input, mean over tasks of the fraction of test inputs solved (at {len(by_depth)} of "
          f"{len(traj['updates'])} depths)")
    if len(test) < len(full):
        cut, absent = int(test.meta["task"][-1]), len(solutions_from_data(full)) - len(sols)
        print(f"# the limit cuts the test set: task {test.info['tasks'][cut]} keeps "
              f"{int((test.meta['task'] == cut).sum())} of its {int((full.meta['task'] == cut).sum())} rows"
              + (f"; {absent} more task{'s have' if absent > 1 else ' has'} no row" if absent else ""))
    print("update  layers  exact_acc  pass@1  pass@2")
    for k, acc in accuracy_by_depth(traj):
        p = by_depth.get(k)
        cols = f"{p[1].score:6.4f}  {p[2].score:6.4f}" if p else f"{'-':>6s}  {'-':>6s}"
        print(f"{k:6d}  {k * layers:6d}  {acc:9.4f}  {cols}")
    last = max(by_depth)
    per_task = by_depth[last][2].per_task
    solved = sorted(t for t, v in per_task.items() if v > 0)
    whole = sum(per_task[t] == 1 for t in solved)
    names = [t if per_task[t] == 1 else f"{t} ({round(per_task[t] * len(sols[t]))} of {len(sols[t])} test inputs)"
             for t in solved]
    more = f", and {len(names) - SHOW_TASKS} more" if len(names) > SHOW_TASKS else ""
    print(f"# pass@2 at update {last}: {whole} of {len(sols)} tasks solved"
          + (f", {len(solved) - whole} in part" if len(solved) > whole else "")
          + (f": {', '.join(names[:SHOW_TASKS])}{more}" if solved else ""))


def _puzzles(n: int, data_file: str | None) -> str:
    """``"100 puzzles of mine.csv"``: what an evaluation ran on, so that a cut is never silent."""
    return f"{n} puzzles of {data_file}" if data_file else f"{n} puzzles of the profile's test set"


def add_eval(sub) -> None:
    from ..evaluation import PRECISIONS, PUZZLE_IDS, WEIGHT_CHOICES

    p = sub.add_parser("eval", help="evaluate a run to any depth; perturbation with --perturb-at", epilog=EVAL_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="the run folder printed by `train`")
    p.add_argument("--updates", type=cli_args.count, default=None,
                   help="outer updates (after the perturbation with --perturb-at; default: the profile's)")
    p.add_argument("--every", type=cli_args.count, default=None, help="record every K updates (default: the profile's)")
    p.add_argument("--limit", type=cli_args.count, default=None,
                   help="evaluate the first N puzzles (default: the profile's limit; all of a --data file; every "
                        "test input of an ARC run, whose pass@k is over whole tasks)")
    p.add_argument("--data", default=None, help="a test file in the public CSV format instead of the profile's")
    p.add_argument("--per-token", action="store_true", help="also record gamma and score per cell")
    p.add_argument("--budgets", default=None,
                   help="comma-separated budgets: accuracy after exactly N updates, each run told N "
                        "(what a timestep-conditioned model needs)")
    p.add_argument("--perturb-at", type=cli_args.count, default=None, help="perturb the state at this update")
    p.add_argument("--eps", default="0,1e-4,1e-3,1e-2,0.1,0.3", help="relative perturbation sizes")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="auto: bf16 autocast on CUDA (TF32 for what stays float32), float32 elsewhere; fp32, tf32 or "
                        "bf16 asked for explicitly (cached apart)")
    p.add_argument("--weights", choices=WEIGHT_CHOICES, default="auto", help="auto: the final weights (their EMA where "
                   "training kept one); ema; last: the last step's, from the last checkpoint; best: the checkpoint "
                   "chosen on the validation split (cached apart)")
    p.add_argument("--puzzle-ids", choices=PUZZLE_IDS, default="own", help="the puzzle-embedding prefix's ids: each "
                   "puzzle's own, blank (0) or another's at random: how much of a score is recall of identity")
    p.add_argument("--threads", type=cli_args.threads, default=0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_eval)

