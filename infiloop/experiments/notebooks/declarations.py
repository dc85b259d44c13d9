"""The registry of the notebooks: each notebook's spec module (``experiments/nbNN_name.py``: its title, the profiles
that run it, its declaration of what it reads), found by listing that package, in the notebooks' number order.

Every list of notebooks follows from it: :func:`names` (every notebook), :func:`profile_notebooks` (a profile's),
:func:`experiments` (each spec, its declaration ``declare`` among them), ``pipeline.notebooks()``; a new notebook is its
two files in ``notebooks/`` and its spec module, with no list to extend.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re

from ... import paths
from ...errors import UsageError
from ..settings import profiles
from . import experiments as spec_modules
from .experiments import Experiment

EXPERIMENT_MODULE = re.compile(r"nb(\d\d_\w+)")  # nb02_depth_scaling -> notebook 02_depth_scaling


@functools.cache
def experiments() -> dict[str, Experiment]:
    """Each notebook's spec by notebook name (``"02_depth_scaling"``), in number order: the ``EXPERIMENT`` of every
    module ``nbNN_name`` of the package ``experiments``, each profile it names checked."""
    found = {}
    for module in pkgutil.iter_modules(spec_modules.__path__):
        m = EXPERIMENT_MODULE.fullmatch(module.name)
        if m is None:
            continue
        spec = getattr(importlib.import_module(f"{spec_modules.__name__}.{module.name}"), "EXPERIMENT", None)
        if not isinstance(spec, Experiment):
            raise TypeError(f"{spec_modules.__name__}.{module.name}: no EXPERIMENT = Experiment(...)")
        for name in spec.profiles:
            profiles.check(name, f"profiles of notebook {m.group(1)}")
        found[m.group(1)] = spec
    return dict(sorted(found.items()))


def names() -> list[str]:
    """Every notebook, in number order."""
    return list(experiments())


def experiment(name: str) -> Experiment:
    """The spec of notebook ``name`` (``"02"``, ``"depth_scaling"`` or ``"02_depth_scaling"``)."""
    return experiments()[notebook_name(name)]


# ------------------------------------------------------------------------------------------ reading the plan


def notebook_name(name: str) -> str:
    """``"02"``, ``"depth_scaling"`` or ``"02_depth_scaling"`` -> ``"02_depth_scaling"``."""
    for full in experiments():
        if name in (full, full[:2], full[3:]):
            return full
    raise UsageError(f"unknown notebook {name!r}; valid: {', '.join(experiments())} (or their number)")


def profile_notebooks(profile: str) -> list[str]:
    """The notebooks profile ``profile`` runs by default: those whose spec names it, in number order."""
    profiles.check(profile)
    return [name for name, spec in experiments().items() if profile in spec.profiles]


def undeclared_notebooks() -> list[str]:
    """Notebooks in notebooks/ without a spec module: their runs and evaluations are not planned."""
    return [p.stem for p in sorted(paths.NOTEBOOKS.glob("[0-9][0-9]_*.py")) if p.stem not in experiments()]
