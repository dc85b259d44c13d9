"""Command line: ``python -m infiloop <command> ...``.

    info        the model configuration of a preset, its parameter count and depth unit
    data        generate, validate and build datasets (see ``python -m infiloop data -h``)
    reproduce   the whole pipeline (what ``./reproduce.sh`` runs)
"""

from __future__ import annotations

import argparse
import json
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


def cmd_data(argv: list[str]) -> int:
    from .tasks.cli import main as data_main

    return data_main(argv)


def cmd_reproduce(args: argparse.Namespace) -> int:
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        print("reproduce: the experiment notebooks are not built yet (notebooks/ is empty).\n"
              "What exists today: the package (python -m infiloop info), the data commands "
              "(python -m infiloop data -h) and the test suite (./reproduce.sh test).\n"
              "Missing for a full reproduction: the training/evaluation engine and the five notebooks "
              "with the report; see README.md, 'Status'.", file=sys.stderr)
        return 2
    from .reproduce import main as reproduce_main

    return reproduce_main(args.rest)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "data":  # the data commands own their whole argument list
        return cmd_data(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m infiloop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="model preset, parameter count, depth unit")
    p.add_argument("--preset", default="paper", help="model preset: paper, tiny or smoke (default paper)")
    p.add_argument("--json", action="store_true", help="also print the full configuration as JSON")
    p.set_defaults(func=cmd_info)
    sub.add_parser("data", help="datasets: generate, validate, build (see `data -h`)")
    p = sub.add_parser("reproduce", help="run the whole pipeline (what ./reproduce.sh runs)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_reproduce)
    args = parser.parse_args(argv)
    return args.func(args)
