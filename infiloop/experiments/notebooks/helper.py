"""Small helpers shared by the experiment notebooks: parameter checks, timing, the summary JSON.

A notebook calls ``nb = Notebook("02_depth_scaling", "Depth scaling", profile=..., ...)`` right after its
``parameters`` cell; every parameter is checked there with a message that names it, and a parameter that
papermill injects but the notebook does not declare (a typo such as ``-p max_update 480``) is refused. At the end,
``nb.finish(text=..., figures=..., tables=..., claims=...)`` writes ``results/<profile>/summaries/<name>.json``
for the report; its claims are built by ``nb.claim(id, ours, effect=interval)`` (the paper's side from
``infiloop/analysis/paper.py``, the effect from ``infiloop/analysis/claims.py``, the verdict by the rule of
``infiloop/analysis/intervals.py``)
and its tables by ``nb.table(title, columns, rows)``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from ... import paths
from ...analysis import paper
from ...errors import UsageError
from ...io import atomic_write_text
from ...tasks.registry import voted_tasks
from ..report.summaries import SCRATCH
from ..settings import profiles
from ..store.runs import trained_run
from .parameters import assigned


def _plain(value, root: Path):
    """JSON-ready copy: Paths become repo-relative strings, numpy scalars/arrays become Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v, root) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, root) for v in value]
    if isinstance(value, Path):
        try:
            return value.resolve().relative_to(root.resolve()).as_posix() if value.is_absolute() else value.as_posix()
        except ValueError:  # outside the repository: keep it absolute (the report reads both)
            return value.as_posix()
    if hasattr(value, "tolist"):  # numpy scalar or array
        return _plain(value.tolist(), root)
    return value


def write_summary(summary: dict, root: Path | None = None) -> Path:
    """Write a notebook's summary to ``results/<profile>/summaries/<notebook>.json`` (atomically).

    ``summary`` follows the contract of the module docstring; ``notebook`` and ``profile`` are
    required. Figure paths may be ``Path`` objects (as returned by ``plotting.save_figure``): they
    are stored relative to the repository root (absolute when outside it, e.g. ``INFILOOP_FIGURES``
    elsewhere). Unknown ``agrees`` values are refused. ``root``: another checkout (its ``results/``);
    infiloop/experiments/report/build.py only reads these files and renders them.
    """
    checkout, results = (paths.ROOT, paths.RESULTS) if root is None else (Path(root), Path(root) / "results")
    missing = [k for k in ("notebook", "profile") if not summary.get(k)]
    if missing:
        raise ValueError(f"summary lacks {', '.join(missing)}")
    for c in summary.get("claims") or []:
        if c.get("agrees") not in (True, False, None) or not c.get("id"):
            raise ValueError(f"claim {c!r}: needs an id and agrees = true, false or null")
    data = _plain({"figures": [], "tables": [], "claims": [], **summary}, checkout)
    for key in ("notebook", "profile"):
        if not paths.is_plain_name(data[key]):
            raise ValueError(f"{key} {data[key]!r} is not a plain name")
    path = results / data["profile"] / "summaries" / f"{data['notebook']}.json"
    return atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


class ParameterError(ValueError):
    """A notebook parameter with a wrong type or value; the message names it and what was expected."""


def check(name: str, value, kind: type | tuple[type, ...], ok=lambda v: True, expected: str = "") -> None:
    """Raise ``ParameterError`` unless ``value`` has type ``kind`` and ``ok(value)`` holds."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ParameterError(f"parameter {name}={value!r}: expected {expected or kind}")
    if not isinstance(value, kind) or not ok(value):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ParameterError(f"parameter {name}={value!r}: expected {expected or names}")


def reject_unknown_parameters(inputs: list[str] | None = None) -> None:
    """Refuse parameters that papermill injected but the notebook's ``parameters`` cell does not declare.

    papermill runs its injected cell (which starts with ``# Parameters``) right after the cell tagged
    ``parameters``; both are in the kernel's input history (``In``), which is read when ``inputs`` is not
    given. Outside papermill there is no injected cell and nothing to check."""
    if inputs is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
        inputs = list(shell.user_ns.get("In", [])) if shell is not None else []
    injected = [i for i, src in enumerate(inputs) if i > 0 and src.lstrip().startswith("# Parameters")]
    if not injected:
        return
    i = injected[-1]
    declared = set(assigned(inputs[i - 1]))
    unknown = sorted(n for n in set(assigned(inputs[i])) - declared if not n.startswith("PM_"))
    if declared and unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}: this notebook's parameters are "
                             f"{', '.join(sorted(declared))}")


PIPELINE = "INFILOOP_PIPELINE"  # "1" in the kernels of the notebooks the pipeline runs (``pipeline._run_notebooks``)


def keep_apart() -> Path | None:
    """Where a notebook run outside the pipeline (papermill, JupyterLab, nbconvert) writes: its summary under
    ``results/scratch/<profile>/summaries/`` and its figures under ``results/scratch/figures/<profile>/``, never over
    the default run's (``results/<profile>/``, ``figures/<profile>/``); ``python -m infiloop report --scratch`` then
    reports the default run with these sections in place of its own. None inside the pipeline (nothing moves)."""
    if os.environ.get(PIPELINE) == "1":
        return None
    if paths.RESULTS.name != SCRATCH:  # once per kernel, however often the cell runs
        paths.RESULTS = paths.RESULTS / SCRATCH
        paths.FIGURES = paths.RESULTS / "figures"
    return paths.RESULTS


class Notebook:
    def __init__(self, name: str, title: str, profile: str, device: str, seed: int):
        reject_unknown_parameters()
        try:
            profiles.check(profile, "parameter profile")
        except UsageError as e:
            raise ParameterError(str(e)) from None
        check("device", device, str, _device_ok, "'cpu' or an available CUDA device such as 'cuda'")
        check("seed", seed, int, lambda v: v >= 0, "an integer >= 0")
        self.name, self.title, self.profile, self.device, self.seed = name, title, profile, device, seed
        self.apart = keep_apart()
        self.t0 = time.time()
        self.need = None  # what :meth:`needs` declared: its runs identify the claims' data (``runs_of``)
        torch.manual_seed(seed)

    def needs(self, namespace: dict):
        """What this notebook reads at the parameters in ``namespace`` (its ``globals()``), as declared in
        notebooks/manifest.py: ``need.run(id)`` and ``need.result(id)`` load them, computing what is missing."""
        from .manifest import needs
        from .parameters import notebook_defaults

        self.need = needs(self.name, **{k: namespace[k] for k in notebook_defaults(self.name) if k in namespace})
        return self.need

    def claim(self, cid: str, ours: str, agrees=None, note: str | None = None, *, effect=None, untestable: str = "",
              digits: int = 1) -> dict:
        """One of the paper's claims (``analysis/paper.py``, ``CLAIMS``) checked by this notebook: the claim and the
        paper's number come from there, ``ours`` is what this run measured.

        ``effect``: the interval of the claim's effect (``analysis/claims.py`` computes it); the verdict is then
        decided by the rule (``analysis/intervals.py``, ``verdict``: ``RULE``) against the paper's effect, and the
        effect, the paper's value beside it and how the interval was computed are recorded (``claims.record``);
        ``untestable``: why the claim cannot be tested at this scale (no verdict). Without ``effect``, ``agrees`` is
        the verdict as given (``None``: not decided; a claim not measured here)."""
        from ...analysis import claims

        c = paper.CLAIMS_BY_ID.get(cid)
        if c is None or c.notebook != self.name:
            mine = ", ".join(c.id for c in paper.claims_for(self.name))
            raise KeyError(f"{cid!r} is not a claim of {self.name} (infiloop/analysis/paper.py); its claims: {mine}")
        return claims.claim_dict(cid, ours, agrees, note, effect=effect, untestable=untestable, digits=digits)

    @staticmethod
    def table(title: str, columns: list, rows: list, note: str | None = None) -> dict:
        """A table of the summary (rendered by report.py); every row must have one cell per column."""
        bad = [i for i, r in enumerate(rows) if len(r) != len(columns)]
        if bad:
            raise ValueError(f"table {title!r}: row(s) {bad} do not have {len(columns)} cells ({columns})")
        out = {"title": title, "columns": list(columns), "rows": [list(r) for r in rows]}
        if note:
            out["note"] = note
        return out

    def finish(self, text: str, figures: list, tables: list, claims: list) -> None:
        from ...analysis.claim_data import with_seeds
        from ...analysis.contrasts import with_contrasts

        for c in claims:
            c.setdefault("profile", self.profile)
            if c.get("data") and c["data"]["seeds"] is None and self.need is not None and self.need.runs:
                c["data"] = with_seeds(c["data"], self.need.seeds)  # a claim built outside :meth:`claim`
        summary = {"tables": tables}
        claims = with_contrasts(claims, summary)  # InfiLoop against carry-last where the paper's claim draws it
        path = write_summary({"notebook": self.name, "title": self.title, "profile": self.profile,
                              "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                              "wall_time_s": round(time.time() - self.t0, 2), "text": text, "figures": figures,
                              "tables": tables, "claims": claims,
                              "parameters": self.changed_parameters(),
                              **({"runs": runs_of(self.need), "environment": environment()} if self.need is not None
                                 and self.need.runs else {})})
        if self.apart is not None:
            print(f"run outside the pipeline: wrote {path} (the default run's results/{self.profile}/ is unchanged); "
                  f"`python -m infiloop report --profile {self.profile} --scratch` reports it in place of its section")

    def changed_parameters(self) -> dict:
        """The parameters this notebook ran with that are not its defaults (besides ``profile`` and ``device``): the
        report marks a section made with them as not the default run's. Both sides as resolved: a depth parameter's
        default 0 is the profile's depth (``manifest.needs``), so the default run is never marked."""
        return changed_parameters(self.name, self.need)


def changed_parameters(notebook: str, need) -> dict:
    """:meth:`Notebook.changed_parameters` of ``need`` (``manifest.needs``' answer; None: nothing declared)."""
    from .parameters import changed

    return {} if need is None else changed(notebook, need.profile, need.params)


def runs_of(need) -> dict:
    """The trained models behind a summary, by run id: each seed's run hash, and the settings every seed shares
    (``records.run_entry``: the run hash apart from the seed; code version, data and precision included), which
    two records must share to merge (``report/records.py``)."""
    from ..report.records import run_entry

    out = {}
    for spec in need.runs.values():
        entry = out.setdefault(spec.id, run_entry(spec.run.config))
        entry["seeds"][str(spec.seed)] = spec.run.dir.name
    return out


def environment() -> dict:
    """The machine and software a summary was computed with (``report/records.py``: ``results --compare``)."""
    from ..report.records import environment as env

    return env()


def _device_ok(device: str) -> bool:
    if device == "cpu":
        return True
    if device.startswith("cuda"):
        return torch.cuda.is_available()
    return False


def pct(x: float) -> str:
    return "–" if x != x else f"{100 * x:.1f} %"


def find_arc_runs(profile: str, seed: int, which: str = "auto", root=None) -> tuple[str, dict, str]:
    """The trained carry-last and InfiLoop ARC models of the first set in ``which`` (arc1, arc2, auto: arc1
    then arc2, none) that has a trained InfiLoop model; trains nothing. Returns (set, {recipe: run}, why not),
    with an empty set name and the reason when there is none."""
    names = {"auto": voted_tasks(), "none": []}.get(which, [which])
    for name in names:
        found = {r: trained_run(name, r, profile, {"train.seed": seed}, root=root)
                 for r in ("carry_last", "infiloop")}
        if found["infiloop"] is not None:
            return name, {r: run for r, run in found.items() if run is not None}, ""
    if not names:
        return "", {}, "the arc parameter is 'none'"
    return "", {}, (f"no trained ARC InfiLoop model ({' or '.join(names)}) at profile {profile}, seed {seed}; "
                    "notebook 01 with -p tasks sudoku,arc1 trains one")
