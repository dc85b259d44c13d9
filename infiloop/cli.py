"""Command line: ``python -m infiloop <command> ...``.

    info        the model configuration of a preset, its parameter count and depth unit
    data        generate, validate and build datasets (see ``python -m infiloop data -h``)
    train       train a model of a profile (cached: running it again resumes or returns the run)
    eval        evaluate a trained run to any depth (trajectory file + accuracy by depth)
    report      compile results/<profile>/report.html from the notebooks' summaries
    reproduce   the whole pipeline (what ``./reproduce.sh`` runs)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cmd_info(args: argparse.Namespace) -> int:
    from .connections import ConnectionConfig
    from .model import LoopedReasoner, ModelConfig

    cfg = ModelConfig.preset(args.preset)
    model = LoopedReasoner(cfg)
    trm = LoopedReasoner(cfg.replace(inner=ConnectionConfig(name="carry_last"),
                                     outer=ConnectionConfig(name="carry_last")))
    if args.json:
        print(json.dumps(cfg.to_dict(), indent=2))
    print(f"preset {args.preset}: {model.n_params():,} parameters "
          f"({trm.n_params():,} with carry-last on both axes; the connections add {model.connection_params():,})")
    print(f"depth unit: (L + 1) x n_layers = ({cfg.L} + 1) x {cfg.n_layers} = "
          f"{cfg.layers_per_outer_update} layers per outer update")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    from .experiments import get_run

    if args.threads:
        torch.set_num_threads(args.threads)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # launched by torchrun: one process per device
        import torch.distributed as dist

        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
        if args.device.startswith("cuda"):
            args.device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    run = get_run(args.task, args.connection, args.profile, args.set, run_dir=args.run_dir, device=args.device,
                  max_steps=args.max_steps, progress=not args.quiet)
    if run.done:
        s = run.summary()
        final = s.get("final", {})
        print(f"# done: {s['step']} steps, loss {final.get('loss', float('nan')):.4f}, "
              f"cell accuracy {final.get('cell_acc', float('nan')):.4f}", file=sys.stderr)
    else:
        print("# stopped before the last step (--max-steps): run the same command again to resume",
              file=sys.stderr)
    print(run.dir)
    return 0


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as e:
        raise SystemExit(f"--eps: expected comma-separated numbers, got {text!r}") from e


def cmd_eval(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from .evaluation import accuracy_by_depth
    from .experiments import load_run
    from .tasks import sudoku

    if args.threads:
        torch.set_num_threads(args.threads)
    run = load_run(args.run_dir)
    data = None
    if args.data:
        task = run.config["task"]
        if task != "sudoku":
            from .tasks import maze

            data = maze.to_taskdata("user", maze.read_csv(args.data))
        else:
            box = run.model_config().box
            data = sudoku.to_taskdata("user", sudoku.read_csv(args.data, box))
    cfg = run.model_config()
    if args.budgets:
        try:
            budgets = tuple(int(b) for b in args.budgets.split(",") if b.strip())
        except ValueError as e:
            raise SystemExit(f"--budgets: expected comma-separated outer-update counts, got {args.budgets!r}") from e
        out, path = run.budgets(budgets, args.limit, data, args.data, device=args.device, progress=not args.quiet)
        print(f"# exact accuracy after exactly N outer updates, each run told its budget "
              f"({cfg.layers_per_outer_update} layers per outer update)")
        print("budget  layers  exact_acc")
        for b, c in zip(out["budgets"], out["correct"]):
            print(f"{b:6d}  {b * cfg.layers_per_outer_update:6d}  {c.mean():.4f}")
    elif args.perturb_at is not None:
        eps = _floats(args.eps)
        out, path = run.perturb(args.perturb_at, eps, args.updates, args.every, args.limit, data, args.data,
                                args.device, progress=not args.quiet)
        solved = out["solved_at"]
        print(f"# {int(solved.sum())}/{len(solved)} solved at update {args.perturb_at}; retention after "
              f"{args.updates} more updates, and median relative distance at the end:")
        for e, eps_v in enumerate(out["eps"]):
            kept = (out["correct"][e, -1] & solved).sum() / max(1, solved.sum())
            print(f"eps={eps_v:<8g} retention={kept:.4f} distance={np.median(out['distance'][e, -1]):.4g}")
    else:
        traj, path = run.evaluate(args.updates, args.every, args.limit, data, args.data,
                                  per_token=args.per_token, device=args.device, progress=not args.quiet)
        print(f"# exact accuracy by depth ({cfg.layers_per_outer_update} layers per outer update)")
        print("update  layers  exact_acc")
        for k, acc in accuracy_by_depth(traj):
            print(f"{k:6d}  {k * cfg.layers_per_outer_update:6d}  {acc:.4f}")
    print(path)
    return 0


def cmd_data(argv: list[str]) -> int:
    from .tasks.cli import main as data_main

    return data_main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "data":  # the data and report commands own their whole argument list
        return cmd_data(argv[1:])
    if argv and argv[0] == "report":
        from .report import main as report_main

        return report_main(argv[1:])
    if argv and argv[0] == "reproduce":
        from .reproduce import main as reproduce_main

        return reproduce_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m infiloop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="model preset, parameter count, depth unit")
    p.add_argument("--preset", default="paper", help="model preset: paper, tiny or smoke (default paper)")
    p.add_argument("--json", action="store_true", help="also print the full configuration as JSON")
    p.set_defaults(func=cmd_info)
    sub.add_parser("data", help="datasets: generate, validate, build (see `data -h`)")
    sub.add_parser("report", help="compile results/<profile>/report.html from the notebook summaries")
    p = sub.add_parser("train", help="train (or resume, or return) the run of a profile")
    p.add_argument("--profile", default="tiny", help="smoke, tiny (default) or paper")
    p.add_argument("--task", default="sudoku", help="sudoku (default), maze, arc1, arc2")
    p.add_argument("--connection", default="infiloop",
                   help="recipe: carry_last, infiloop, fprm, full_attnres, or a conditioned carry-last model: "
                        "history_w1, history_w2, loop_gating, history_lg, inject_dense")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. model.outer.beta=0.1 or train.lr=3e-4 (repeatable)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in total (resumable)")
    p.add_argument("--run-dir", default=None,
                   help="train into this folder instead of runs/<task>/<recipe>-<profile>-<hash>")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("eval", help="evaluate a run to any depth; perturbation with --perturb-at")
    p.add_argument("run_dir", help="the run folder printed by `train`")
    p.add_argument("--updates", type=int, default=None, help="outer updates (default: the profile's)")
    p.add_argument("--every", type=int, default=None, help="record every K updates (default: the profile's)")
    p.add_argument("--limit", type=int, default=None, help="evaluate the first N test puzzles")
    p.add_argument("--data", default=None, help="a test file in the public CSV format instead of the profile's")
    p.add_argument("--per-token", action="store_true", help="also record gamma and score per cell")
    p.add_argument("--budgets", default=None,
                   help="comma-separated budgets: accuracy after exactly N updates, each run told N "
                        "(what a timestep-conditioned model needs)")
    p.add_argument("--perturb-at", type=int, default=None, help="perturb the state at this update")
    p.add_argument("--eps", default="0,1e-4,1e-3,1e-2,0.1,0.3", help="relative perturbation sizes")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_eval)
    sub.add_parser("reproduce", help="run the whole pipeline (what ./reproduce.sh runs; see `reproduce -h`)")
    args = parser.parse_args(argv)
    return args.func(args)
