"""One file per experiment (issue 62, item 3): a notebook is its two files in notebooks/ and its spec module in
infiloop/experiments/notebooks/experiments/, and every list of notebooks (each profile's, the plan's jobs,
``./reproduce.sh``'s selection) follows from the spec modules, with no other file to edit."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from infiloop import paths
from infiloop.errors import UsageError
from infiloop.experiments import pipeline
from infiloop.experiments.notebooks import declarations, manifest
from infiloop.experiments.notebooks import experiments as spec_modules

TOY_EXPERIMENT = '''"""Notebook 99, a toy: one smoke run."""

from infiloop.experiments.notebooks.experiments import Experiment


def declare(n, p):
    """One carry-last run on Sudoku, with a training length no other notebook asks for."""
    n.add_run("toy", "sudoku", "carry_last", {"train.steps": 7})


EXPERIMENT = Experiment("A toy", ("smoke",), declare)
'''
TOY_NOTEBOOK = '''# %% [markdown]
# # A toy

# %% tags=["parameters"]
profile = "smoke"
device = "cpu"
seed = 0

# %%
'''


def _add_spec(monkeypatch, tmp_path, module: str, text: str, notebook: str | None = None) -> None:
    """Make ``text`` the spec module ``module`` of the spec package (from a folder of ``tmp_path`` added to the
    package's path) and, with ``notebook``, add that notebook's twin to a copy of notebooks/ (links to the real
    ones); the registry is read again, and again after the test (``_forget``)."""
    specs = tmp_path / "specs"
    specs.mkdir(exist_ok=True)
    (specs / f"{module}.py").write_text(text, encoding="utf-8")
    monkeypatch.setattr(spec_modules, "__path__", [*spec_modules.__path__, str(specs)])
    if notebook is not None:
        folder = tmp_path / "notebooks"
        folder.mkdir()
        for real in paths.NOTEBOOKS.glob("[0-9][0-9]_*.py"):
            (folder / real.name).symlink_to(real)
        (folder / f"{notebook}.py").write_text(TOY_NOTEBOOK, encoding="utf-8")
        monkeypatch.setattr(paths, "NOTEBOOKS", folder)
    monkeypatch.setattr(paths, "RUNS", tmp_path / "runs")  # resolving a run reads the cache: an empty one
    importlib.invalidate_caches()
    declarations.experiments.cache_clear()


@pytest.fixture
def forget():
    """After the test: the toy spec module unloaded and the registry read again from the real spec modules."""
    yield
    for name in [m for m in sys.modules if m.startswith(f"{spec_modules.__name__}.nb99_")]:
        del sys.modules[name]
    declarations.experiments.cache_clear()


def test_a_new_notebook_is_its_files_and_its_spec_module(monkeypatch, tmp_path, forget):
    before = {p: declarations.profile_notebooks(p) for p in ("smoke", "quick", "overthink")}
    assert "99_toy" not in declarations.names()
    _add_spec(monkeypatch, tmp_path, "nb99_toy", TOY_EXPERIMENT, notebook="99_toy")

    names = pipeline.notebooks()
    assert names == declarations.names() == [*before["smoke"], "99_toy"]  # after 09: number order
    assert declarations.profile_notebooks("smoke") == names == pipeline.select(names, [], "smoke")
    assert declarations.profile_notebooks("quick") == before["quick"]  # its spec names smoke only
    assert declarations.profile_notebooks("overthink") == before["overthink"]
    assert pipeline.select(names, ["99"], "quick") == ["99_toy"] and declarations.notebook_name("toy") == "99_toy"
    assert declarations.undeclared_notebooks() == [] and declarations.experiment("99").title == "A toy"
    assert set(declarations.experiments()) == set(names)

    toy = manifest.jobs(["99_toy"], "smoke")
    assert [(j.kind, j.notebooks, j.done) for j in toy] == [("train", ["99_toy"], False)]
    assert toy[0].spec.run.config["train"]["steps"] == 7 and toy[0].spec.run.dir.is_relative_to(tmp_path)
    every = manifest.jobs(declarations.profile_notebooks("smoke"), "smoke")
    assert [j.id for j in every if "99_toy" in j.notebooks] == [toy[0].id]

    monkeypatch.undo()  # the spec module and the notebook's twin taken away again
    declarations.experiments.cache_clear()
    assert declarations.names() == before["smoke"] and pipeline.notebooks() == before["smoke"]
    with pytest.raises(UsageError, match="unknown notebook '99'"):
        manifest.jobs(["99"], "smoke")


def test_a_spec_must_name_known_profiles_and_define_its_experiment(monkeypatch, tmp_path, forget):
    _add_spec(monkeypatch, tmp_path, "nb99_toy", TOY_EXPERIMENT.replace('("smoke",)', '("smoke", "nope")'))
    with pytest.raises(UsageError, match=r"unknown profile 'nope' \(profiles of notebook 99_toy\)"):
        declarations.names()
    for name in [m for m in sys.modules if m.startswith(f"{spec_modules.__name__}.nb99_")]:
        del sys.modules[name]
    _add_spec(monkeypatch, tmp_path, "nb99_toy", "TITLE = None\n")
    with pytest.raises(TypeError, match="nb99_toy: no EXPERIMENT"):
        declarations.names()


def test_each_spec_gives_its_notebooks_title_and_number():
    """The title in a spec is the one its notebook passes to ``Notebook`` (the report section's heading), and every
    notebook runs at smoke, where the tests execute them all."""
    for name, spec in declarations.experiments().items():
        text = (paths.NOTEBOOKS / f"{name}.py").read_text(encoding="utf-8")
        m = re.search(r'^nb = Notebook\("([^"]+)", "([^"]+)"', text, flags=re.M)
        assert m is not None and m.groups() == (name, spec.title), name
        assert "smoke" in spec.profiles, name
        assert importlib.import_module(spec.declare.__module__).__name__.endswith(f".nb{name}"), name
