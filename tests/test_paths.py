"""infiloop/paths.py: the repository's folders, the writable ones moved by INFILOOP_RUNS, INFILOOP_DATA,
INFILOOP_RESULTS and INFILOOP_FIGURES (read once, at import), and this suite writing only into a temporary
folder (tests/conftest.py moves all four; its session hook checks the repository's own folders)."""

import importlib.util

from infiloop import paths

VARIABLES = {"RUNS": "INFILOOP_RUNS", "DATA": "INFILOOP_DATA", "RESULTS": "INFILOOP_RESULTS",
             "FIGURES": "INFILOOP_FIGURES"}


def _fresh_paths(monkeypatch, **env):
    """paths.py imported anew under the environment ``env`` (a variable set to None is removed)."""
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location("paths_under_test", paths.ROOT / "infiloop" / "paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_defaults_are_the_repository_folders(monkeypatch):
    p = _fresh_paths(monkeypatch, **{v: None for v in VARIABLES.values()})
    assert p.ROOT == paths.ROOT and (p.ROOT / "infiloop" / "paths.py").is_file()
    assert (p.RUNS, p.DATA, p.RESULTS, p.FIGURES) == tuple(p.ROOT / n for n in ("runs", "data", "results", "figures"))
    assert (p.DOCS, p.NOTEBOOKS) == (p.ROOT / "docs", p.ROOT / "notebooks")


def test_environment_moves_the_writable_folders(monkeypatch, tmp_path):
    p = _fresh_paths(monkeypatch, INFILOOP_RUNS=str(tmp_path / "r"), INFILOOP_DATA="elsewhere/d",
                     INFILOOP_RESULTS="", INFILOOP_FIGURES=None)
    assert p.RUNS == tmp_path / "r"
    assert p.DATA == (p.ROOT / "elsewhere" / "d").resolve()  # relative: to the repository, not the working folder
    assert p.RESULTS == p.ROOT / "results" and p.FIGURES == p.ROOT / "figures"  # empty or unset: the default


def test_this_session_writes_into_a_temporary_folder():
    for name, variable in VARIABLES.items():
        folder = getattr(paths, name)
        assert not folder.is_relative_to(paths.ROOT), f"{variable}: the suite would write into {folder}"
