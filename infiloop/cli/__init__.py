"""Command line: ``python -m infiloop <command> ...``.

    info        the model of a profile (on its Sudoku data), its parameter count and depth unit
    data        generate, validate and build datasets (see ``python -m infiloop data -h``)
    train       train a model of a profile (cached: running it again resumes or returns the run)
    eval        evaluate a trained run to any depth (trajectory file + accuracy by depth; ARC: pass@1, pass@2)
    report      compile results/<profile>/report.html from the notebooks' summaries
    reproduce   the whole pipeline (what ``./reproduce.sh`` runs)
    notebook    one notebook run by hand through papermill: its outputs under results/scratch/, its report updated
    plan        every run and evaluation of a profile's notebooks, with an estimate of their time here (on a CUDA
                device that is not here: a FLOP estimate, in GPU-hours)
    pilot       a short measured training of a GPU profile's Table-1 connections: go or no-go
    runs        trained runs that travel: export, import, pull (from the hub), list
    manifest    the runs and evaluations each notebook reads, as JSON lines
    contrasts   the search for the paper's contrast at CPU scale (docs/calibration.md)
    connection-study   the study of the learned connection (docs/connection-study.md)
    results     the README's results table, from the summaries recorded in docs/results/
    envcheck    check environment.yml against conda-forge's metadata

A bad input gets one line ``error: ...`` on stderr and exit status 2 (a bad argument or setting) or 1 (a
missing, malformed or damaged file); ``--debug`` (anywhere) or INFILOOP_DEBUG=1 also shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from ..errors import Parser, UsageError, run_command
from ..machine import cuda_problem, init_distributed, leave_process_group
from ..model.registry import CONNECTION_REGISTRY
from . import args as cli_args
from . import evaluate as cli_eval

TRAIN_EXAMPLES = """examples:
  python -m infiloop train --profile smoke --set train.lr=3e-4
  python -m infiloop train --profile smoke --recipe carry_last --max-steps 10
  python -m infiloop train --profile smoke --no-compile
"""


def cmd_info(args: argparse.Namespace) -> int:
    from ..experiments.settings import profiles
    from ..experiments.settings.recipes import profile_model
    from ..model.connections import ConnectionConfig
    from ..model.reasoner import LoopedReasoner

    profiles.check(args.profile, "--profile")
    cfg = profile_model(args.profile)
    model = LoopedReasoner(cfg)
    trm = LoopedReasoner(cfg.replace(inner=ConnectionConfig(name="carry_last"),
                                     outer=ConnectionConfig(name="carry_last")))
    if args.json:
        print(json.dumps(cfg.to_dict(), indent=2))
    print(f"profile {args.profile}: {model.n_params():,} parameters "
          f"({trm.n_params():,} with carry-last on both axes; the connections add {model.connection_params():,})")
    print(f"depth unit: (L + 1) x n_layers = ({cfg.L} + 1) x {cfg.n_layers} = "
          f"{cfg.layers_per_outer_update} layers per outer update")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    from ..experiments.store.runs import get_run

    cli_args.check_device(args.device)
    if args.no_compile:  # the same run folder: compile is not part of a run's hash
        args.set.append("train.compile=off")
    if args.threads:
        torch.set_num_threads(args.threads)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1  # launched by torchrun: one process per device
    if distributed:
        args.device = init_distributed(args.device)
    run = get_run(args.task, args.recipe, args.profile, args.set, run_dir=args.run_dir, device=args.device,
                  max_steps=args.max_steps, progress=not args.quiet)
    if distributed:
        leave_process_group()
    if distributed and int(os.environ.get("RANK", "0")) != 0:
        return 0  # the first process reports the run
    if run.done:
        s = run.summary()
        final = s.get("final", {})
        how = "trained now" if run.trained_here else "from the run cache"
        print(f"# done ({how}): {s['step']} steps, loss {final.get('loss', float('nan')):.4f}, "
              f"cell accuracy {final.get('cell_acc', float('nan')):.4f}", file=sys.stderr)
    else:
        print("# stopped before the last step (--max-steps): run the same command again to resume",
              file=sys.stderr)
    print(run.dir)
    return 0


RUNS_EXAMPLES = """examples (RUN: a run folder, as printed by `train`):
  python -m infiloop runs list
  python -m infiloop runs prune          # show the stale runs; add --yes to remove them
  python -m infiloop runs export RUN -o my_runs.tar
  python -m infiloop runs import my_runs.tar
  python -m infiloop runs pull USER/REPO --revision main
"""


def cmd_runs_list(args: argparse.Namespace) -> int:
    from ..experiments.store import inventory

    rows = inventory.list_runs(args.root)
    root = inventory.runs_root(args.root)
    if not rows:
        print(f"# no runs in {root}")
        return 0
    n_stale = sum(bool(r["stale"]) for r in rows)
    print(f"# {len(rows)} run folders in {root}" + (f"; {n_stale} stale (`runs prune` removes them)" if n_stale
                                                       else ""))
    print(f"{'task':7s} {'recipe':13s} {'profile':8s} {'code':>4s} {'done':4s} {'size':>9s}  folder")
    for r in rows:
        print(f"{r['task']:7s} {r['recipe']:13s} {r['profile']:8s} {r['code_version']!s:>4s} "
              f"{'yes' if r['done'] else 'no':4s} {inventory.human_size(r['bytes']):>9s}  {r['name']}"
              + (f"  STALE: {r['stale']}" if r["stale"] else ""))
    return 0


def cmd_runs_prune(args: argparse.Namespace) -> int:
    from ..experiments.store import inventory

    stale = inventory.prune(args.root, dry_run=not args.yes)
    for r in stale:
        size = inventory.human_size(r["bytes"])
        print(f"{'removed' if args.yes else 'stale':8s} {r['path']}  ({r['stale']}, {size})")
    if not stale:
        print(f"# no stale runs in {inventory.runs_root(args.root)}")
    elif not args.yes:
        print(f"# {len(stale)} stale run folder(s); run again with --yes to remove them", file=sys.stderr)
    return 0


def cmd_runs_export(args: argparse.Namespace) -> int:
    from ..experiments.store import archives, inventory

    path, entries = archives.export_runs(args.run_dirs, args.output)
    n_files = sum(len(e["files"]) for e in entries)
    print(f"# {len(entries)} run(s), {n_files} files, {inventory.human_size(path.stat().st_size)}", file=sys.stderr)
    print(path)
    return 0


def _print_imported(results) -> int:
    from ..experiments.store import verify

    for dest, status in results:
        print(f"{status:15s} {dest}")
        check = verify.read_result(dest)
        if check:  # reproduced: ..., or not checked: <why> (never a silent pass)
            print(f"{'':15s} {check}")
    return 0


def cmd_runs_import(args: argparse.Namespace) -> int:
    from ..experiments.store import archives

    return _print_imported(archives.import_runs(args.archive, args.root))


def cmd_runs_pull(args: argparse.Namespace) -> int:
    from ..experiments.store import hub

    return _print_imported(hub.pull(args.repo_id, args.revision, args.root, args.cache_dir))


def cmd_plan(args: argparse.Namespace) -> int:
    """``plan``: the notebooks of ``--only`` (as ``reproduce --only`` chooses them) or the profile's; on the device
    ``reproduce`` would use, and on a CUDA device that is not here, a FLOP estimate (``args.by_flops``); a run that
    ``reproduce`` keeps apart (``placement.kept_apart``) is planned against its own run cache."""
    from ..experiments import pipeline, placement
    from ..experiments.compute import executors
    from ..experiments.cost.command import main as plan_main
    from ..experiments.settings import profiles

    profiles.check(args.profile, "--profile")
    args.notebooks = pipeline.select(pipeline.notebooks(), args.only, args.profile) if args.only else None
    if args.jobs_per_gpu is not None and args.jobs_per_gpu < 1:
        raise UsageError(f"--jobs-per-gpu: expected 1 or more, got {args.jobs_per_gpu}")
    executor = executors.executor(args.executor)
    if not executor.here:  # the jobs' device is the nodes', not this machine's
        args.device = args.device or profiles.device(args.profile)
        return plan_main(args, cluster_cfg=executor.check(args, submitting=False))
    if args.device is None:  # as reproduce: the profile's device, or the default profile's GPU where there is one
        cuda_profile = profiles.device(args.profile) == "cuda"
        args.device = "cuda" if cuda_profile else placement.default_device(args.profile)
    problem = cuda_problem() if args.device.startswith("cuda") else None
    if args.tflops is not None and not args.device.startswith("cuda"):
        raise UsageError(f"--tflops prices the jobs of a CUDA device by their FLOPs; this plan's device is "
                         f"{args.device} (add --device cuda)")
    args.by_flops = args.device.startswith("cuda") and (problem is not None or args.tflops is not None)
    if args.by_flops:
        from ..experiments.cost.calibration import device_name
        from ..experiments.cost.flops import ASSUMED_GPU_TFLOPS

        args.gpu_name = None if problem else device_name(args.device)  # this GPU's cached timings, where it has any
        args.tflops = args.tflops or ASSUMED_GPU_TFLOPS
        why = f"no CUDA device here ({problem})" if problem else "--tflops"
        print(f"# {why}: the jobs are priced by their FLOPs at {args.tflops:g} TFLOP/s", file=sys.stderr, flush=True)
    else:
        cli_args.check_device(args.device)
    with placement.kept_apart(args.profile, args.device) as home:
        if home is not None:
            print(f"# {placement.apart_note(args.profile, args.device, home)}", file=sys.stderr, flush=True)
        return plan_main(args)


# Commands that own their whole argument list: python -m infiloop <command> ARGS -> <module>.main(ARGS).
def cmd_data(argv: list[str]) -> int:
    from ..experiments.settings import profiles
    from ..tasks.cli import main as data_main

    return data_main(argv, {name: profiles.data_profile(name) for name in profiles.DATA_PROFILES})


# Commands that hand their arguments to a module's main(argv): (the module, relative to the package; help).
PASS_THROUGH = {
    "data": ("", "datasets: generate, validate, build, describe, audit (see `data -h`)"),
    "report": (".experiments.report.build", "compile results/<profile>/report.html from the notebook summaries"),
    "reproduce": (".experiments.pipeline", "run the whole pipeline (what ./reproduce.sh runs; see `reproduce -h`)"),
    "notebook": (".experiments.notebooks.by_hand", "one notebook run by hand through papermill: its outputs under "
                 "results/scratch/, the scratch report updated, a mistake in one line (`notebook -h`)"),
    "pilot": (".experiments.cost.pilot", "a short measured training of a GPU profile's connections: go or no-go "
              "(`pilot -h`)"),
    "manifest": (".experiments.notebooks.manifest", "the runs and evaluations each notebook reads, as JSON lines "
                 "(`manifest -h`)"),
    "contrasts": (".experiments.studies.contrasts", "the paper's contrast searched on a CPU (docs/calibration.md)"),
    "connection-study": (".experiments.studies.connection_study", "the study of the learned connection "
                         "(docs/connection-study.md)"),
    "results": (".experiments.report.results", "the README's results table from the recorded summaries "
                "(docs/results/)"),
    "envcheck": (".experiments.envcheck", "check environment.yml against conda-forge's metadata (cached in the "
                 "package)"),
}


def _pass_through(name: str, argv: list[str]) -> int:
    if name == "data":
        return cmd_data(argv)
    return importlib.import_module(PASS_THROUGH[name][0], "infiloop").main(argv)


def main(argv: list[str] | None = None) -> int:
    """Run a command; an error is one line ``error: ...`` on stderr and exit status 2 or 1 (``errors.py``)."""
    return run_command(_main, sys.argv[1:] if argv is None else list(argv))


def _main(argv: list[str]) -> int:
    if argv and argv[0] in PASS_THROUGH:
        return _pass_through(argv[0], argv[1:])
    args = parser().parse_args(argv)
    return args.func(args)


def parser() -> argparse.ArgumentParser:
    """The command line: each command's arguments are added by one ``_add_<command>`` function."""
    p = Parser(prog="python -m infiloop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", help="on an error, also show its traceback")
    sub = p.add_subparsers(dest="command", required=True)
    _add_info(sub)
    _add_train(sub)
    cli_eval.add_eval(sub)
    _add_plan(sub)
    _add_runs(sub)
    for name, (_, help_) in PASS_THROUGH.items():
        sub.add_parser(name, help=help_)
    return p


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="a profile's model: parameter count, depth unit")
    p.add_argument("--profile", "--preset", dest="profile", default="paper",
                   help="the profile whose model (on its Sudoku data) to describe (default paper; --preset: old name)")
    p.add_argument("--json", action="store_true", help="also print the full configuration as JSON")
    p.set_defaults(func=cmd_info)


def _add_train(sub) -> None:
    from ..experiments.settings import profiles

    p = sub.add_parser("train", help="train (or resume, or return) the run of a profile", epilog=TRAIN_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", default=profiles.DEFAULT, help=profiles.choices())
    p.add_argument("--task", default="sudoku", help="sudoku (default), maze, arc1, arc2")
    own = ", ".join(name for name, entry in CONNECTION_REGISTRY.items() if entry.recipe is not None)
    p.add_argument("--recipe", "--connection", dest="recipe", default="infiloop",
                   help=f"connection recipe: {own}, or a conditioned carry-last "
                        "model: history_w1, history_w2, loop_gating, history_lg, inject_dense (--connection is "
                        "another name for --recipe)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting, e.g. model.outer.beta=0.1 or train.lr=3e-4 (repeatable)")
    p.add_argument("--max-steps", type=cli_args.count, default=None,
                   help="stop after this many steps in total (resumable)")
    p.add_argument("--run-dir", default=None,
                   help="train into this folder instead of runs/<task>/<recipe>-<profile>-<hash>")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    p.add_argument("--threads", type=cli_args.threads, default=0, help="torch CPU threads (0: default)")
    p.add_argument("--no-compile", action="store_true",
                   help="train without torch.compile (--set train.compile=off; the same run folder: compile is "
                        "not part of a run's hash)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def _add_plan(sub) -> None:
    from ..experiments.compute import executors
    from ..experiments.settings import profiles

    p = sub.add_parser("plan", help="every run and evaluation of a profile, and an estimate of their time here",
                       description="List every training run and evaluation the notebooks of a profile execute "
                                   "(with their default parameters) and estimate their time on this device from a "
                                   "short measured calibration (cached in runs/.plan-calibration.json). For a CUDA "
                                   "device that is not here (plan --profile gpu on a machine without one): each "
                                   "job's FLOPs at --tflops, in GPU-hours, a GPU's cached timings replacing them "
                                   "where the calibration file holds them; no data is built.")
    p.add_argument("--profile", default=profiles.DEFAULT, help=profiles.choices())
    p.add_argument("--only", action="append", default=[], metavar="NOTEBOOK",
                   help="plan only this notebook (02_depth_scaling, 02 or depth_scaling; repeatable), as "
                        "reproduce --only")
    p.add_argument("--device", default=None, help="the device the runs will use (cpu, cuda, cuda:1, ...; default "
                   "as reproduce: cuda for the gpu and paper profiles and for the default profile on a CUDA box, "
                   "else cpu; with --executor slurm the profile's)")
    p.add_argument("--calibrate", action="store_true",
                   help="measure again, ignoring the cached calibration of this device")
    p.add_argument("--tflops", type=cli_args.tflops, default=None,
                   help="price a CUDA plan by each job's FLOPs at this achieved throughput, measuring nothing and "
                        "building no data (what a plan for CUDA does where there is none, at flops.ASSUMED_GPU_TFLOPS: "
                        "an assumption of about a fifth of an H200's dense bf16 peak; the plan prints it)")
    p.add_argument("--jobs", type=cli_args.count, default=None,
                   help="jobs at once (default: as reproduce, one per core, or --jobs-per-gpu per visible GPU; "
                        "without CUDA here, 1)")
    p.add_argument("--jobs-per-gpu", type=int, default=None,
                   help="on CUDA, jobs side by side on each GPU (default: as reproduce)")
    p.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="a notebook parameter, as reproduce takes it (value read as YAML), e.g. -p seeds 0,1,2")
    p.add_argument("--gpus-per-run", type=int, default=1, help="with --executor slurm: GPUs per training run")
    p.add_argument("--gpu-memory", type=cli_args.gigabytes, default=None, metavar="GB",
                   help="on CUDA, the memory of the GPU the jobs will run on, in GB (default: this machine's GPU, or "
                        "80 GB where there is none); each job's estimated peak is printed beside it")
    executors.add_options(p)  # --executor process: a new process per job, each paying its start
    p.set_defaults(func=cmd_plan)


def _add_runs(sub) -> None:
    p = sub.add_parser("runs", help="trained runs that travel: export, import, pull; list and prune the cache",
                       epilog=RUNS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rsub = p.add_subparsers(dest="runs_command", required=True)
    r = rsub.add_parser("list", help="the run folders of the run cache: task, recipe, profile, code version, "
                                     "done or not, size")
    r.add_argument("--root", default=None, help="run cache (default: runs/ of this checkout)")
    r.set_defaults(func=cmd_runs_list)

    r = rsub.add_parser("prune", help="remove the run folders this code can never use (another code version, "
                                      "a diverged training, a damaged configuration); without --yes only list them")
    r.add_argument("--yes", action="store_true", help="remove them (default: only list)")
    r.add_argument("--root", default=None, help="run cache (default: runs/ of this checkout)")
    r.set_defaults(func=cmd_runs_prune)

    r = rsub.add_parser("export", help="write finished runs into a .tar or .zip archive")
    r.add_argument("run_dirs", nargs="+", metavar="RUN", help="run folders (as printed by `train`)")
    r.add_argument("-o", "--output", required=True, help="the archive to write (.tar or .zip)")
    r.set_defaults(func=cmd_runs_export)

    r = rsub.add_parser("import", help="verify an archive and add its runs to the run cache")
    r.add_argument("archive", help="a .tar or .zip written by `runs export`")
    r.add_argument("--root", default=None, help="run cache (default: runs/ of this checkout)")
    r.set_defaults(func=cmd_runs_import)

    r = rsub.add_parser("pull", help="download runs published on the Hugging Face hub and import them")
    r.add_argument("repo_id", help="hub repository (user/name) in the layout of an unpacked archive")
    r.add_argument("--revision", default=None, help="branch, tag or commit (default: main)")
    r.add_argument("--root", default=None, help="run cache (default: runs/ of this checkout)")
    r.add_argument("--cache-dir", default=None, help="hub cache folder (default: huggingface_hub's)")
    r.set_defaults(func=cmd_runs_pull)
