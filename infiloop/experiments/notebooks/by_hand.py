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
    out.parent.mkdir(parents=True, exist_ok=True)
    _execute(name, out, params, args.traceback)
    from ..report.build import build_report

    print(out)
    print(build_report(profile, scratch=True))
    return 0


def _execute(name: str, out, params: dict, traceback: bool) -> None:
    """papermill's run of ``name`` into ``out``, in a kernel that writes apart (no :data:`PIPELINE` in its
    environment); a failure as one line."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from ..pipeline import ipc_kernel_manager

    before = os.environ.pop(PIPELINE, None)
    try:
        pm.execute_notebook(str(paths.NOTEBOOKS / f"{name}.ipynb"), str(out), parameters=params,
                            kernel_name="python3", cwd=str(paths.ROOT), progress_bar=sys.stderr.isatty(),
                            kernel_manager_class=ipc_kernel_manager())
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
