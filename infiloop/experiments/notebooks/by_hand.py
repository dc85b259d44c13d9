"""``python -m infiloop notebook NAME [-p KEY VALUE]...``: one notebook run by hand through papermill, with what a bare
papermill line leaves to its reader done for them.

- Its executed copy goes to ``results/scratch/<profile>/<notebook>.ipynb``, outside the tracked tree; its summary and
  figures go under ``results/scratch/`` too (``helper.keep_apart``), never over the default run's.
- The scratch report, the default run's with this notebook's section in place of its own (``report --scratch``), is
  brought up to date at the end: the command prints both paths.
- A parameter the notebook does not declare, or a value it refuses, is one line on stderr (exit status 2) that names
  it; any other failure one line with the cell and the error (exit status 1); ``--traceback`` adds the notebook's
  traceback.

Models and evaluations come from the run cache, computed in the kernel where missing, as under papermill.
"""

from __future__ import annotations

import os
import sys

from ... import paths
from ...errors import DataError, Parser, UsageError
from ..report.summaries import SCRATCH
from ..settings import profiles
from . import declarations
from .helper import PIPELINE
from .parameters import declared_parameters, read_parameters

REFUSED = ("ParameterError", "UsageError")  # the notebook refused a parameter: the user's mistake, one line


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m infiloop notebook",
                description="Run one notebook by hand through papermill: its executed copy, summary and figures "
                            "under results/scratch/, the scratch report brought up to date (report --scratch), a "
                            "refused parameter in one line.")
    ap.add_argument("name", help="the notebook: 02_depth_scaling, 02 or depth_scaling")
    ap.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                    help="a parameter of the notebook (value read as YAML), as papermill's -p")
    ap.add_argument("--traceback", action="store_true", help="on a failure, print the notebook's traceback too")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    from ..pipeline import select

    name = select(declarations.names(), [args.name], profiles.DEFAULT)[0]
    params = read_parameters(args.p)
    unknown = sorted(set(params) - declared_parameters(name))
    if unknown:
        raise UsageError(f"-p {' '.join(unknown)}: not a parameter of {name} (its parameters: "
                         f"{', '.join(sorted(declared_parameters(name)))})")
    profile = profiles.check(str(params.get("profile", profiles.DEFAULT)), "parameter profile")
    out = paths.RESULTS / SCRATCH / profile / f"{name}.ipynb"
    _execute(name, profile, out, params, args.traceback)
    from ..report.build import build_report

    print(out)
    print(build_report(profile, scratch=True))
    return 0


def _execute(name: str, profile: str, out, params: dict, traceback: bool) -> None:
    """The pipeline's run of ``name`` (``pipeline.run_notebook``) into ``out``'s folder, in a kernel that writes apart
    (no :data:`PIPELINE` in its environment); a failure as one line."""
    from papermill.exceptions import PapermillExecutionError

    from ..pipeline import run_notebook

    before = os.environ.pop(PIPELINE, None)
    try:
        run_notebook(name, profile, params, out.parent, progress=sys.stderr.isatty())
    except PapermillExecutionError as e:
        if traceback:
            print(str(e), file=sys.stderr)
        evalue = " ".join(str(e.evalue).split())
        if e.ename in REFUSED:
            raise UsageError(f"{name}: {evalue}") from None
        raise DataError(f"{name} failed in cell [{e.exec_count}]: {e.ename}: {evalue} (the executed notebook: {out}"
                        f"{'' if traceback else '; --traceback prints where'})") from None
    finally:
        if before is not None:
            os.environ[PIPELINE] = before
