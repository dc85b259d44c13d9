"""One module per notebook: its spec, everything the package says about that notebook in one file.

A notebook ``notebooks/NN_name.py`` (with its ``.ipynb`` twin) is defined by the module ``nbNN_name.py`` here, which
holds ``EXPERIMENT``: an :class:`Experiment` with the notebook's title, the profiles whose ``./reproduce.sh`` runs it
and its declaration, the function of its parameters that adds the runs, evaluations and looped decoders it reads to
its :class:`~..needs.Needs`. The registry (``notebooks/declarations.py``) lists these modules; the notebooks' list,
each profile's list, the plan, the manifest and ``./reproduce.sh`` follow from them, so a new notebook is its two
notebook files and its spec module.

The claims a notebook checks are not here: they are the paper's content (its numbers and words), kept in
``infiloop/analysis/paper.py`` (``CLAIMS``, keyed by notebook name), because the analysis wing that reads them may not
import the experiments (tests/test_structure.py). A notebook that checks a claim adds it there; the paper's list of
notebooks (``paper.NOTEBOOKS``) follows from the claims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..needs import Needs


@dataclass(frozen=True)
class Experiment:
    """One notebook's spec: ``title`` as the notebook gives it (``Notebook(name, title, ...)``, its report section's
    heading), ``profiles`` the profiles that run it by default (names of ``settings/profiles.py``; smoke, the tests'
    profile, runs every notebook) and ``declare(needs, parameters)``, which adds what it reads at those parameters."""

    title: str
    profiles: tuple[str, ...]
    declare: Callable[[Needs, dict], None]
