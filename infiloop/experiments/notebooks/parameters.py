"""A notebook's parameters, read here only: the cell tagged ``parameters`` (:func:`parameters_cell`), the names it
declares and their defaults (:func:`notebook_defaults`, :func:`declared_parameters`; each default is written once,
in that cell), the names any such cell assigns (:func:`assigned`: papermill's injected cell too), and the values
given on the command line (``-p KEY VALUE``: :func:`read_parameters`), typed as the defaults
(:func:`typed_parameter`).
"""

from __future__ import annotations

import ast
import re

from ... import paths
from ...errors import UsageError
from .declarations import notebook_name

CELL = re.compile(r'^# %% tags=\["parameters"\]\n(.*?)^# %%', re.S | re.M)  # in a notebook's jupytext .py


def assigned(source: str, strict: bool = False) -> dict[str, ast.expr | None]:
    """The names a cell assigns at its top level (``x = ...``, ``x: int = ...``), each with the expression assigned
    (None for a bare annotation). A cell that is not Python assigns nothing, unless ``strict``: then it raises."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        if strict:
            raise
        return {}
    out: dict[str, ast.expr | None] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        out.update({t.id: value for t in targets if isinstance(t, ast.Name)})
    return out


def parameters_cell(name: str) -> str:
    """The source of the cell tagged ``parameters`` of ``notebooks/<name>.py`` (the .ipynb's twin, kept in sync by
    jupytext: tests/test_notebooks.py)."""
    path = paths.NOTEBOOKS / f"{notebook_name(name)}.py"
    m = CELL.search(path.read_text(encoding="utf-8"))
    if m is None:
        raise ValueError(f"{path}: no cell tagged parameters")
    return m.group(1)


def notebook_defaults(name: str) -> dict:
    """The default values of the cell tagged ``parameters`` of ``notebooks/<name>.py``."""
    return {k: ast.literal_eval(v) for k, v in assigned(parameters_cell(name), strict=True).items()}


def changed(name: str, profile: str, params: dict) -> dict:
    """Those of ``params`` that are not notebook ``name``'s defaults as resolved at ``profile`` (a depth parameter's
    default 0 is the profile's depth), besides ``profile`` and ``device``: what makes a run not the default run's."""
    from ..settings import profiles

    defaults = notebook_defaults(name)
    resolved = {k: profiles.depth(profile) if k in DEPTH_PARAMETERS and v == 0 else v for k, v in defaults.items()}
    return {k: v for k, v in params.items() if k in resolved and k not in ("profile", "device") and v != resolved[k]}


def declared_parameters(name: str) -> set[str]:
    """The parameters a notebook declares in its cell tagged ``parameters``."""
    return set(assigned(parameters_cell(name), strict=True))


def read_parameters(pairs) -> dict:
    """``-p KEY VALUE`` pairs of the command line, each value read as YAML (``-p seeds 0,1,2`` is a text,
    ``-p limit 64`` a number); a value YAML cannot read is refused in one line naming it."""
    import yaml

    out = {}
    for key, text in pairs or []:
        try:
            out[key] = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise UsageError(f"-p {key} {text!r}: not a YAML value ({' '.join(str(e).split())[:80]}); a text can be "
                             f"given in double quotes inside single ones, -p {key} '\"...\"'") from None
    return out


def typed_parameter(key: str, value, default):
    """A notebook parameter given to the plan (``-p KEY VALUE``, read as YAML) as the type of the notebook's default:
    a number is accepted for a float, and for a text (``-p eps 0.1``, ``-p seeds 1``); anything else is refused in
    one line naming it. The notebook checks the value's range itself."""
    if isinstance(value, bool) != isinstance(default, bool):
        ok = False
    elif isinstance(default, str) and isinstance(value, (int, float)):
        return str(value)
    else:
        ok = isinstance(value, type(default)) or (isinstance(default, float) and isinstance(value, int))
    if not ok:
        raise UsageError(f"parameter {key}={value!r}: expected {type(default).__name__} (the notebook's default is "
                         f"{default!r})")
    return value


# Notebook parameters whose 0 means the profile's depth (profiles.depth): the longest test depth.
DEPTH_PARAMETERS = ("max_updates", "max_budget")
