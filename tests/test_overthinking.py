"""The overthinking setting (issue 47): the six recipes (carry-last, FPRM, InfiLoop, each with and without recall) on
one size-agnostic block, a smoke model run on longer strings than it was trained on, and the overthink profile."""

import pytest

from infiloop.experiments.notebooks.declarations import profile_notebooks
from infiloop.experiments.settings import profiles
from infiloop.experiments.settings.recipes import OVERTHINK_RECIPES, RECIPES, SIZE_AGNOSTIC_BLOCK, resolve_config
from infiloop.experiments.store.runs import get_run
from infiloop.model import ModelConfig


def test_six_recipes_differ_only_in_the_connection_and_recall():
    assert len(OVERTHINK_RECIPES) == 6
    models = {r: resolve_config("prefix_sums", r, "smoke")["model"] for r in OVERTHINK_RECIPES}
    for r, m in models.items():
        base = r.removesuffix("_no_recall").removesuffix("_recall")
        assert m["recall"] is (not r.endswith("_no_recall"))
        assert {k: m[k] for k in SIZE_AGNOSTIC_BLOCK} == SIZE_AGNOSTIC_BLOCK
        assert ModelConfig.from_dict(m).size_agnostic
        assert {k: m[k] for k in RECIPES[base]} == {k: m[k] for k in RECIPES[r] if k in RECIPES[base]}
    # everything but the connections' own settings (FPRM's norm and residual scale) and recall is the same
    own = set(RECIPES["carry_last"]) | set(RECIPES["fprm"]) | set(RECIPES["infiloop"]) | {"recall"}
    shared = [{k: v for k, v in m.items() if k not in own} for m in models.values()]
    assert all(s == shared[0] for s in shared)
    cfgs = [resolve_config("prefix_sums", r, "smoke") for r in OVERTHINK_RECIPES]
    assert all(c["train"] == cfgs[0]["train"] and c["data"] == cfgs[0]["data"] for c in cfgs)


def test_the_overthink_profile_trains_as_the_literature_does_for_notebook_09():
    p = profiles.profile("overthink")
    # fresh seeds: 0-2 were the first run, which chose the test lengths and the InfiLoop claim's measure
    assert profile_notebooks("overthink") == ["09_overthinking"] and profiles.seeds("overthink") == list(range(3, 13))
    assert profiles.data_of("overthink").tasks["prefix_sums"]["test_lengths"][-1] >= \
        2 * profiles.data_of("overthink").tasks["prefix_sums"]["train_length"]
    for task in ("prefix_sums", "maze"):
        cfg = resolve_config(task, "infiloop_no_recall", "overthink")
        depth = cfg["model"]["H"] * cfg["train"]["max_segments"]
        assert p["eval"]["updates"] >= 20 * depth  # many times the training depth
        # one segment from the initial state, gradients through every update (docs/overthinking.md's probes: under
        # detached deep supervision carry-last without recall learned nothing)
        assert cfg["train"]["max_segments"] == 1 and cfg["model"]["grad_outer"] == cfg["model"]["H"]
        # enough block applications to carry a parity across the training string, one position each
        blocks = cfg["model"]["H"] * (cfg["model"]["L"] + 1) * cfg["model"]["n_layers"]
        assert task != "prefix_sums" or blocks >= profiles.data_of("overthink").tasks[task]["train_length"]
    for name in ("quick", "tiny", "gpu", "paper", "search"):
        assert "09_overthinking" not in profile_notebooks(name), name  # their data has no prefix sums


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return get_run("prefix_sums", "carry_last_no_recall", "smoke", root=tmp_path_factory.mktemp("runs"),
                   progress=False)


def test_a_smoke_model_runs_on_every_test_length_with_the_same_weights(run):
    trained = run.model_config().grid
    lengths = profiles.data_of("smoke").tasks["prefix_sums"]["test_lengths"]
    paths = set()
    for n in lengths:
        traj, path = run.evaluate(updates=12, every=1, limit=16, test_set=f"test_{n}", progress=False)
        assert traj["correct"].shape == (12, 16) and traj["blanks"].tolist() == [n] * 16
        paths.add(path)
    assert len(paths) == len(lengths) and run.model_config().grid == trained
    same, path = run.evaluate(updates=12, every=1, limit=16, test_set=f"test_{lengths[-1]}", progress=False)
    assert path in paths  # cached under its test set


def test_the_plan_prices_a_longer_test_set_at_its_own_length(tmp_path):
    from infiloop.experiments.cost import arithmetic, calibration
    from infiloop.experiments.store.runs import resolve

    run = resolve("prefix_sums", "carry_last_no_recall", "smoke", root=tmp_path)
    cal = calibration.Calibration("cpu", timer=arithmetic.FlopTimer(1.0), path=tmp_path / "cal.json")
    lengths = profiles.data_of("smoke").tasks["prefix_sums"]["test_lengths"]
    seconds = [cal.eval_update(run, 32, 1, f"test_{n}").seconds for n in lengths]
    assert cal.eval_update(run, 32, 1, "test").seconds == seconds[0]  # the training length is the test set's
    for (a, n), (b, m) in zip(zip(seconds, lengths), zip(seconds[1:], lengths[1:])):
        assert b >= a * m / n  # at least linear in the length (attention adds a quadratic part)


def test_notebook_09_declares_its_runs_and_an_evaluation_per_size():
    """The six models and, with ``arms`` (the default), the two further arms: InfiLoop without recall, content score
    and learned decay (eq. 2 without s_i at beta_0), and carry-last with recall and the progressive loss at alpha = 1;
    each arm the run of its recipe with those settings and nothing else."""
    from infiloop.errors import UsageError
    from infiloop.experiments.notebooks.manifest import needs
    from infiloop.experiments.settings.recipes import OVERTHINK_ARMS

    six = needs("09", "smoke", max_updates=24, limit=32, arms=False)
    n = needs("09", "smoke", max_updates=24, limit=32)
    sizes = profiles.data_of("smoke").tasks["prefix_sums"]["test_lengths"]
    assert set(six.runs) == set(OVERTHINK_RECIPES) and set(n.runs) == {*OVERTHINK_RECIPES, *OVERTHINK_ARMS}
    assert n.derived["sizes"] == sizes
    assert set(n.evals) == {f"{s}/{r}" for s in sizes for r in n.runs}
    avg, plain = n.runs["average_no_recall"].run.config, n.runs["infiloop_no_recall"].run.config
    for axis in ("inner", "outer"):
        assert avg["model"][axis]["content_score"] is False and avg["model"][axis]["decay"] == "fixed"
        avg["model"][axis].update(content_score=True, decay=plain["model"][axis]["decay"])
    assert avg["model"] == plain["model"] and avg["train"] == plain["train"]
    prog, recall = n.runs["carry_last_progressive"].run.config, n.runs["carry_last_recall"].run.config
    assert prog["train"]["progressive"] == 1.0 and prog["model"] == recall["model"]
    e = n.evals[f"{sizes[-1]}/infiloop_no_recall"]
    assert e.args == {"updates": 24, "every": 1, "limit": 32, "test_set": f"test_{sizes[-1]}"}
    assert len({ev.key for ev in n.evals.values()}) == len(n.evals)  # one cache file per size and model
    assert set(needs("09", "overthink").seeds) == set(range(3, 13))
    assert needs("09", "smoke", task="maze").derived["sizes"] == [8, 12]
    with pytest.raises(UsageError, match="profile 'quick' has no prefix_sums data .* profiles that have: smoke, "
                                         "overthink"):
        needs("09", "quick")
