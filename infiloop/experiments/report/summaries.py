"""The report's inputs: the checkout and results folder they are read from (``--root``), and the notebooks'
summary files in notebook order, with the problems found reading them (``build.py``'s module docstring gives
their format)."""

from __future__ import annotations

import json
from pathlib import Path

from ... import paths
from ...analysis import paper
from ..settings import profiles


def folders(root: str | Path | None) -> tuple[Path, Path]:
    """(checkout, results folder): ``paths.ROOT`` and ``paths.RESULTS``, or, for another checkout ``root``
    (``--root``), ``root`` and ``root/results``. Relative figure paths are read from the checkout."""
    if root is None:
        return paths.ROOT, paths.RESULTS
    return Path(root), Path(root) / "results"


SCRATCH = "scratch"  # results/scratch/<profile>/: a notebook run outside the pipeline (notebooks/helper.keep_apart)


def _summary_files(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def order_by_notebook(names) -> list[str]:
    """Notebook names in report order: the paper's five first (``paper.NOTEBOOKS``), then any others by name."""
    return [n for n in paper.NOTEBOOKS if n in names] + sorted(set(names) - set(paper.NOTEBOOKS))


def load_summaries(profile: str, root: Path | None = None, scratch: bool = False) -> tuple[list[dict], list[str]]:
    """Summaries in notebook order (the paper's five first, then any others); plus problems found. ``scratch``: the
    default run's, each replaced by a notebook's run outside the pipeline where there is one (marked ``scratch``)."""
    results = folders(root)[1]
    files = _summary_files(results / profile / "summaries")
    mine = _summary_files(results / SCRATCH / profile / "summaries") if scratch else {}
    files.update(mine)
    order = order_by_notebook(files)
    summaries, problems = [], []
    for name in order:
        try:
            s = json.loads(files[name].read_text(encoding="utf-8"))
            if not isinstance(s, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            problems.append(f"{name}: summary unreadable ({e})")
            continue
        s.setdefault("notebook", name)
        if name in mine:
            s["scratch"] = True
        if s.get("profile") not in (None, profile):
            problems.append(f"{name}: summary says profile {s.get('profile')!r}, not {profile!r}")
        summaries.append(s)
    own = _profile_notebooks(profile)  # a profile with its own list does not run the others: not a problem
    problems += [f"{n}: no summary (notebook missing or not run)" for n in paper.NOTEBOOKS
                 if n not in files and n in own]
    return summaries, problems


def _profile_notebooks(profile: str) -> set[str]:
    """The notebooks ``profile`` runs (every one for a profile without its own list, or an unknown one)."""
    from ...errors import UsageError
    from ..notebooks.declarations import profile_notebooks

    try:
        return set(profile_notebooks(profiles.check(profile)))
    except UsageError:  # a list naming a notebook that does not exist: report every missing notebook
        return set(paper.NOTEBOOKS)
