"""A notebook's parameters: the defaults of its cell tagged ``parameters`` (:func:`notebook_defaults`) and the
values given on the command line (``-p KEY VALUE``: :func:`read_parameters`), typed as the defaults
(:func:`typed_parameter`).
"""

from __future__ import annotations

import ast
import re

from ... import paths
from ...errors import UsageError
from .declarations import notebook_name


def notebook_defaults(name: str) -> dict:
    """The default values of the cell tagged ``parameters`` of ``notebooks/<name>.py``."""
    path = paths.NOTEBOOKS / f"{notebook_name(name)}.py"
    text = path.read_text(encoding="utf-8")
    m = re.search(r'^# %% tags=\["parameters"\]\n(.*?)^# %%', text, re.S | re.M)
    if m is None:
        raise ValueError(f"{path}: no cell tagged parameters")
    out = {}
    for node in ast.parse(m.group(1)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


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
