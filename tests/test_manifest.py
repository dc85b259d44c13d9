"""The experiment plan as data (experiments/notebooks/manifest.py): each notebook's runs and evaluations, declared once,
deduplicated by cache key, in the order the scheduler needs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from infiloop import paths
from infiloop.cli import main
from infiloop.errors import UsageError
from infiloop.experiments.notebooks import declarations, manifest, needs
from infiloop.experiments.settings import profiles, recipes


@pytest.fixture(scope="module")
def smoke_jobs(tmp_path_factory):
    """Every notebook's jobs at smoke, planned over an empty run cache of their own (the session's may hold runs and
    records that other files' tests computed: nothing would be left to do)."""
    with pytest.MonkeyPatch.context() as mp:
        from infiloop import paths

        mp.setattr(paths, "RUNS", tmp_path_factory.mktemp("empty-runs"))
        yield manifest.jobs(declarations.names(), "smoke")


def test_every_notebook_is_declared_with_stable_ids():
    assert declarations.undeclared_notebooks() == []
    n05 = manifest.needs("05", "smoke")
    assert set(n05.runs) == {f"ablation/{k}" for k in recipes.ABLATIONS} == set(n05.evals)
    assert set(manifest.needs("06", "smoke").runs) == set(recipes.CONDITIONING_RECIPES)
    n01 = manifest.needs("01", "smoke", tasks="sudoku,arc1")
    ablation = {f"arc1/{r}/ids-{m}" for r in recipes.MAIN_RECIPES for m in ("blank", "random")}
    # the depth-fair columns: Sudoku's test set and validation split to max_updates at every update; ARC has no
    # validation split (every training-distribution puzzle is trained on), so no evaluation of one
    fair = {f"sudoku/{r}/{x}" for r in recipes.MAIN_RECIPES for x in ("depths", "valid")}
    assert set(n01.evals) == {f"{t}/{r}" for t in ("sudoku", "arc1") for r in recipes.MAIN_RECIPES} | ablation | fair
    assert n01.evals["sudoku/infiloop/valid"].args["test_set"] == "valid"
    assert "arc1" in n01.derived["no_validation"] and "sudoku" not in n01.derived["no_validation"]
    budget, matched = n01.derived["matched"]["sudoku"]
    depth = n01.runs["sudoku/infiloop"].run.training_depth
    assert matched == {r: depth for r in recipes.MAIN_RECIPES} and budget == depth * 3  # smoke: L = 2
    # the identity ablation only where the prefix names puzzles (ARC's tasks; Sudoku shares one id)
    assert n01.derived["identity"] == [("arc1", r) for r in recipes.MAIN_RECIPES]
    for r in recipes.MAIN_RECIPES:
        own, blank = n01.evals[f"arc1/{r}"], n01.evals[f"arc1/{r}/ids-blank"]
        assert blank.args == {**own.args, "puzzle_ids": "blank"} and blank.run is own.run


def test_a_trajectory_read_by_several_notebooks_is_one_job(smoke_jobs):
    """Notebooks 02, 03 and 07 read InfiLoop's trajectory to max_updates with the same snapshots, and notebook 01's
    depth-fair columns read it too: one job; the validation split's evaluation is one job for 01 and 02."""
    infiloop_dir = manifest.needs("02", "smoke").runs["infiloop"].run.dir
    depth = [j for j in smoke_jobs if j.kind == "eval" and j.spec.run.dir == infiloop_dir
             and any(n in j.notebooks for n in ("02_depth_scaling", "03_gamma_dynamics", "07_watch_the_loop"))
             and "test_set" not in j.eval.args]
    assert len(depth) == 1 and depth[0].notebooks == ["01_main_table", "02_depth_scaling", "03_gamma_dynamics",
                                                       "07_watch_the_loop"]
    valid = [j for j in smoke_jobs if j.kind == "eval" and j.spec.run.dir == infiloop_dir
             and j.eval.args.get("test_set") == "valid"]
    assert len(valid) == 1 and valid[0].notebooks == ["01_main_table", "02_depth_scaling"]
    ids = [j.id for j in smoke_jobs]
    assert len(ids) == len(set(ids))
    keys = [j.eval.key for j in smoke_jobs if j.kind == "eval"]
    assert len(keys) == len(set(keys))  # no two jobs write the same cache file
    # the main runs are trained once for every notebook that reads them
    train = {j.spec.run.dir.name: j for j in smoke_jobs if j.kind == "train"}
    assert len(train) == len({j.spec.run.dir for j in smoke_jobs if j.spec is not None})


def test_notebook_08_declares_its_looped_decoders_as_jobs(smoke_jobs):
    """Each looped decoder is one job (train and evaluate), waiting for nothing; its description rebuilds the same
    probe (same cache key, same record); the notebook's parameters choose the grid, a bad one in one line."""
    from infiloop.errors import UsageError
    from infiloop.experiments import looplm

    models = [j for j in smoke_jobs if j.kind == "looplm"]
    need = manifest.needs("08", "smoke")
    assert set(need.models) == {f"0+1x2+0/{c}@{s}" for c in ("carry_last", "infiloop", "ema") for s in (0, 1)}
    assert {j.model.probe.task.task for j in models} == {"mixture"}  # one model for both kinds of task
    assert len(models) == len(need.models) and all(j.after == [] and j.notebooks == ["08_looped_lm"] for j in models)
    for j in models:
        spec = json.loads(json.dumps(j.to_json("smoke")))
        probe = looplm.Probe.from_dict(spec["probe"])
        assert probe == j.model.probe and looplm.record_path(probe, spec["root"]) == j.model.path
        assert j.log_dir == j.model.path.parent / "logs" / j.model.path.stem and not j.finished()
    other = manifest.needs("08", "smoke", seeds="3", connections="carry_last")
    assert set(other.models) == {"0+1x2+0/carry_last@3"}
    for bad, match in ((dict(connections="fprm"), "parameter connections='fprm': expected names among"),
                       (dict(connections="infiloop"), "carry_last among them"),
                       (dict(allocations="1+x2"), r"parameter allocations: allocation '1\+x2': expected p\+sxK\+c"),
                       (dict(seeds="a"), "parameter seeds='a': expected training seeds")):
        with pytest.raises(UsageError, match=match):
            manifest.needs("08", "smoke", **bad)


def test_an_evaluation_waits_for_its_training_and_budgets_for_the_trajectories(smoke_jobs):
    by_id = {j.id: j for j in smoke_jobs}
    for j in smoke_jobs:
        if j.kind == "eval":
            assert f"train {j.spec.run.dir.name}" in j.after and all(a in by_id for a in j.after)
    budgets = {j.spec.recipe: j for j in smoke_jobs if j.kind == "eval" and j.eval.kind == "budgets"}
    assert any(by_id[a].kind == "eval" for a in budgets["carry_last"].after)  # read from 02's trajectory
    assert [a for a in budgets["loop_gating"].after if by_id[a].kind == "eval"] == []  # told each budget


def test_a_notebook_parameter_changes_its_evaluations_only():
    base = manifest.needs("02", "smoke")
    other = manifest.needs("02", "smoke", max_updates=48, limit=16, unrelated=1)
    assert other.evals["depth/infiloop"].args["updates"] == 48 and other.params["limit"] == 16
    assert base.evals["depth/infiloop"].key != other.evals["depth/infiloop"].key
    assert base.runs["infiloop"].key == other.runs["infiloop"].key
    assert other.derived == base.derived  # the snapshot depths come from the run, not from max_updates


def test_a_depth_parameter_of_0_is_the_profiles_depth():
    """max_updates = 0 and max_budget = 0 (the notebooks' defaults) stand for the profile's eval.updates: 24 at smoke,
    240 at quick, 960 at tiny as the paper's; a given depth is kept."""
    for prof, depth in (("smoke", 24), ("quick", 240), ("tiny", 960)):
        assert profiles.depth(prof) == depth
        for nb in ("02", "03", "07"):
            need = manifest.needs(nb, prof)
            assert need.params["max_updates"] == depth
            assert need.evals["depth/infiloop"].args["updates"] == depth
        assert manifest.needs("06", prof).derived["grid"][-1] == depth
    assert manifest.needs("02", "quick", max_updates=100).evals["depth/infiloop"].args["updates"] == 100
    assert manifest.needs("06", "quick", max_budget=64).derived["grid"][-1] == 64



@pytest.mark.parametrize("notebook, key", [("01", "max_updates"), ("02", "max_updates"), ("06", "max_budget")])
def test_a_negative_depth_parameter_is_refused_by_its_own_name(notebook, key, tmp_path, monkeypatch, capsys):
    """``-p max_updates -5`` once stopped ``reproduce --only 02`` with an error about matched_blocks, a parameter the
    user never set (the budget derived from the training depth lay past max_updates = -5)."""
    with pytest.raises(UsageError) as e:
        manifest.needs(notebook, "smoke", **{key: -5})
    assert str(e.value) == f"parameter {key}=-5: expected an integer >= 0 (0: the profile's depth)"
    for name in ("RESULTS", "FIGURES", "RUNS", "DATA"):
        monkeypatch.setattr(paths, name, tmp_path / name.lower())
    assert main(["reproduce", "--profile", "smoke", "--only", notebook, "-p", key, "-5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and f"parameter {key}=-5: expected an integer >= 0" in err, err
    assert "matched_blocks" not in err and not (tmp_path / "data").exists()  # refused before any data is built

def test_the_declared_evaluation_is_the_one_the_notebook_loads(smoke_run, monkeypatch):
    """``need.result`` computes through ``Run.evaluate`` and writes the declared cache file."""
    monkeypatch.setattr(paths, "RUNS", smoke_run.dir.parents[1])
    need = manifest.needs("03", "smoke", max_updates=12, limit=8)
    spec = need.evals["depth/infiloop"]
    assert spec.run.run.dir == smoke_run.dir
    traj = need.result("depth/infiloop", progress=False)
    assert traj["correct"].shape == (12, 8) and spec.key.endswith(".npz")
    assert __import__("pathlib").Path(spec.key).is_file()


def test_manifest_command(capsys):
    assert main(["manifest", "--profile", "smoke", "06", "-p", "max_budget", "32"]) == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert {ln["kind"] for ln in lines} == {"train", "eval"}
    assert all(ln["args"]["budgets"][-1] == 32 for ln in lines if ln["kind"] == "eval")
    assert main(["manifest", "--profile", "smoke", "05", "-p", "budget_long", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: parameter budget_long=2: expected more than budget_short=8"]


def test_a_seeds_parameter_declares_every_run_and_evaluation_once_per_seed():
    from infiloop.errors import UsageError

    one, three = manifest.needs("02", "smoke"), manifest.needs("02", "smoke", seeds="0,1,2")
    assert one.seeds == [0] and three.seeds == [0, 1, 2]
    assert set(three.runs) == {f"{r}{s}" for r in recipes.MAIN_RECIPES for s in ("", "@1", "@2")}
    assert three.runs["infiloop"].run.dir == one.runs["infiloop"].run.dir  # the first seed keeps the plain id
    dirs = {three.runs[f"infiloop{s}"].run.dir for s in ("", "@1", "@2")}
    assert len(dirs) == 3 and three.runs["infiloop@2"].overrides["train.seed"] == 2
    assert three.evals["depth/infiloop@1"].run is three.runs["infiloop@1"]
    # notebook 03 (one seed) reads seed 0's trajectory of notebook 02: shared, not computed twice
    jobs = manifest.jobs(["02", "03"], "smoke", {"seeds": "0,1,2"})
    # per model and seed: the depth evaluation and the validation split's (the depth-fair marks)
    assert sum(j.kind == "train" for j in jobs) == 9 and sum(j.kind == "eval" for j in jobs) == 18
    with pytest.raises(UsageError, match="parameter seeds='0,x': expected integers"):
        manifest.needs("02", "smoke", seeds="0,x")
    with pytest.raises(KeyError, match="seed 5 is not among this notebook's seeds"):
        three.key("infiloop", 5)


def test_a_profile_runs_its_own_notebooks_by_default(monkeypatch):
    from infiloop.errors import UsageError
    from infiloop.experiments import pipeline as reproduce

    names = reproduce.notebooks()
    assert [*declarations.experiments()] == names
    assert declarations.profile_notebooks("smoke") == names  # smoke runs every notebook
    paper_nbs = [n for n in names if n != "09_overthinking"]  # 09's data (sizes) are smoke's and overthink's only
    assert declarations.profile_notebooks("tiny") == paper_nbs == reproduce.select(names, [], "tiny")
    assert declarations.profile_notebooks("overthink") == ["09_overthinking"]
    assert declarations.profile_notebooks("search") == ["01_main_table", "02_depth_scaling", "03_gamma_dynamics",
                                                    "04_perturbation", "07_watch_the_loop"]
    assert reproduce.select(names, [], "search") == declarations.profile_notebooks("search")
    assert reproduce.select(names, ["05", "depth_scaling"], "search") == ["02_depth_scaling", "05_beta0_ablation"]
    with pytest.raises(UsageError, match=r"unknown notebook '99'; valid: 01_main_table, "):
        reproduce.select(names, ["99"], "search")
    # the plan and the manifest command follow the same list: the notebooks whose specs name the profile
    only_03 = {name: spec if name == "03_gamma_dynamics" else dataclasses.replace(spec, profiles=())
               for name, spec in declarations.experiments().items()}
    monkeypatch.setattr(declarations, "experiments", lambda: only_03)
    assert {nb for j in manifest.jobs(declarations.profile_notebooks("smoke"), "smoke") for nb in j.notebooks} == {
        "03_gamma_dynamics"}


def test_the_search_profile_is_tiny_on_puzzles_that_need_search_with_three_seeds():

    search, tiny = profiles.PROFILES["search"], profiles.PROFILES["tiny"]
    assert search["model"] == tiny["model"] and search["seeds"] == [0, 1, 2]
    assert {k: v for k, v in search["train"].items() if k != "steps"} == {
        k: v for k, v in tiny["train"].items() if k != "steps"}
    data = profiles.DATA_PROFILES["search"]["sudoku"]
    assert data["needs_search"] is True and data["blanks"] == [22, 28] and data["side"] == 6
    assert needs.Needs("02_depth_scaling", "search", {"seeds": ""}).seeds == [0, 1, 2]  # no data built


def test_docs_quick_counts_the_jobs_of_the_default_run():
    """docs/quick.md and the README's profile row give the default run's trainings, evaluations and looped decoders:
    the plan's own counts (the page said 25 evaluations and 12 decoders after the plan had 28 and 9)."""
    import re
    from collections import Counter

    counts = Counter(j.kind for j in manifest.jobs(declarations.profile_notebooks("quick"), "quick"))
    text = " ".join((paths.ROOT / "docs" / "quick.md").read_text(encoding="utf-8").split())
    m = re.search(r"read (\d+) trained models \(.*?\) and (\d+) evaluations; notebook 08 reads (\d+) looped", text)
    assert m is not None, "docs/quick.md no longer states the default run's jobs: update this test"
    assert tuple(map(int, m.groups())) == (counts["train"], counts["eval"], counts["looplm"])
    readme = (paths.ROOT / "README.md").read_text(encoding="utf-8")
    row = next(ln for ln in readme.splitlines() if ln.startswith("| `quick`"))
    assert f"notebook 08: {counts['looplm']} looped decoders" in row
