"""One seam for each extension (issue 62): a loop connection is its class and one registration, which carries its
label and colour in figures and its recipe; the model, the recipes and the figures read that one entry."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex

from infiloop.model.connections import CONNECTIONS, Connection, ConnectionConfig, build_connection
from infiloop.model.registry import CONNECTION_REGISTRY, on_both_axes, register_connection, unregister_connection

TOY_GAMMA = 0.25


class ToyAverage(Connection):
    """A fixed-gamma average, h_t = h_{t-1} + gamma (z_t - h_{t-1}) with gamma = 1/4: a connection the package does
    not have, written as a user would write one."""

    @staticmethod
    def check_settings(cfg, bad):  # its own rule for a setting it reads, beside the shared checks
        if cfg.score_clip is not None and cfg.score_clip < 1.0:
            bad("score_clip", f"the toy average needs a clip of at least 1 or none, got {cfg.score_clip}")

    def step(self, state, z):
        h = state["h"] + TOY_GAMMA * (z - state["h"])
        gamma = z.new_full(z.shape[:-1], TOY_GAMMA)
        return {"h": h}, h, {"gamma": gamma, "score": torch.zeros_like(gamma)}


@pytest.fixture
def toy():
    register_connection("toy_average", ToyAverage, label="toy average (γ = 1/4)", color="#123456",
                        recipe=on_both_axes("toy_average"))
    try:
        yield "toy_average"
    finally:
        unregister_connection("toy_average")


def test_a_registered_connection_trains_by_its_recipe_and_is_drawn_with_its_label_and_colour(toy, tmp_path):
    from infiloop.analysis import plotting
    from infiloop.experiments.settings import recipes
    from infiloop.experiments.store.runs import get_run

    assert recipes.RECIPES[toy] == {"inner": {"name": toy}, "outer": {"name": toy}}
    run = get_run("sudoku", toy, "smoke", {"train.steps": 4}, root=tmp_path, progress=False)
    assert run.done and run.dir.parent.parent == tmp_path and run.dir.name.startswith(f"{toy}-smoke-")
    assert [run.config["model"][axis]["name"] for axis in ("inner", "outer")] == [toy, toy]
    model = run.load_model()
    assert isinstance(model.conn_outer, ToyAverage) and isinstance(model.conn_inner, ToyAverage)
    traj, _ = run.evaluate(updates=3, every=1, limit=4, progress=False)
    assert np.allclose(traj["gamma_outer"][1:], TOY_GAMMA)  # update 0 is the initial state (gamma_0 = 1)

    assert plotting.LABELS[toy] == "toy average (γ = 1/4)" and plotting.COLORS[toy] == "#123456"
    assert list(plotting.LABELS) == list(plotting.COLORS) and toy in list(plotting.COLORS)
    plotting.use_style()
    assert "#123456" in [to_hex(c["color"]) for c in mpl.rcParams["axes.prop_cycle"]]
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color=plotting.COLORS[toy], label=plotting.LABELS[toy])
    legend = ax.legend()
    assert to_hex(ax.lines[0].get_color()) == "#123456"
    assert [t.get_text() for t in legend.get_texts()] == ["toy average (γ = 1/4)"]
    plt.close(fig)


def test_an_unregistered_connection_is_known_nowhere(toy):
    from infiloop.analysis import plotting
    from infiloop.experiments.settings import recipes

    assert build_connection({"name": toy}, 8).__class__ is ToyAverage
    unregister_connection(toy)
    assert toy not in plotting.LABELS and toy not in plotting.COLORS and toy not in recipes.RECIPES
    with pytest.raises(ValueError, match="unknown connection 'toy_average'"):
        ConnectionConfig(name=toy).validate()
    with pytest.raises(Exception, match="unknown connection recipe 'toy_average'"):
        recipes.resolve_config("sudoku", toy, "smoke")


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="registered already"):
        register_connection(toy, ToyAverage, label="again", color="#654321", recipe=None)
    with pytest.raises(ValueError, match="registered already"):
        register_connection("infiloop", ToyAverage, label="again", color="#654321", recipe=None)
    with pytest.raises(ValueError, match="lower-case"):
        register_connection("Toy-2", ToyAverage, label="toy", color="#654321", recipe=None)
    assert CONNECTION_REGISTRY["infiloop"].label == "InfiLoop"


# The tables as they stood when each lived in its own module (plotting.LABELS/COLORS, recipes.RECIPES): reading
# them from the registrations changed no label, colour, recipe or order.
LABELS = {"carry_last": "carry-last (TRM)", "infiloop": "InfiLoop", "fprm": "FPRM", "full_attnres": "Full AttnRes",
          "ema": "fixed-γ EMA", "history_w1": "history injection (w = 1)", "history_w2": "history injection (w = 2)",
          "loop_gating": "loop gating", "history_lg": "history (w = 1) + loop gating",
          "inject_dense": "dense initial-state injection", "paper": "paper"}
COLORS = {"carry_last": "#D55E00", "infiloop": "#0072B2", "fprm": "#009E73", "full_attnres": "#CC79A7",
          "ema": "#E69F00", "history_w1": "#56B4E9", "history_w2": "#88CCEE", "loop_gating": "#AA7700",
          "history_lg": "#000000", "inject_dense": "#999933", "paper": "#555555"}
OWN_RECIPES = {
    "carry_last": {"inner": {"name": "carry_last"}, "outer": {"name": "carry_last"}},
    "infiloop": {"inner": {"name": "infiloop", "z0_candidate": False, "history_grad": True},
                 "outer": {"name": "infiloop", "z0_candidate": False, "history_grad": True}},
    "fprm": {"norm": "pre", "residual_scale": True, "inner": {"name": "fprm"}, "outer": {"name": "fprm"}},
    "full_attnres": {"inner": {"name": "full_attnres"}, "outer": {"name": "full_attnres"}},
}
RECIPE_ORDER = ["carry_last", "infiloop", "fprm", "full_attnres", "history_w1", "history_w2", "loop_gating",
                "history_lg", "inject_dense", "carry_last_recall", "carry_last_no_recall", "fprm_recall",
                "fprm_no_recall", "infiloop_recall", "infiloop_no_recall"]


def test_the_package_connections_keep_their_labels_colours_and_recipes():
    from infiloop.analysis import plotting
    from infiloop.experiments import looplm
    from infiloop.experiments.settings import recipes

    assert list(plotting.LABELS.items()) == list(LABELS.items())
    assert list(plotting.COLORS.items()) == list(COLORS.items())
    assert list(recipes.RECIPES) == RECIPE_ORDER
    assert {r: recipes.RECIPES[r] for r in OWN_RECIPES} == OWN_RECIPES
    assert recipes.RECIPES["history_w1"] == {**OWN_RECIPES["carry_last"], "cond": {"history": "dense", "window": 1}}
    assert set(CONNECTIONS) == {"carry_last", "infiloop", "fprm", "full_attnres", "ema"}
    assert looplm.COLORS == {"carry_last": "#D55E00", "infiloop": "#0072B2", "ema": "#E69F00",
                             "history_lg": "#000000", "history_dense": "#56B4E9"}


def test_a_connections_own_settings_are_checked_by_its_class(toy):
    """``ConnectionConfig.validate`` checks what every connection shares, then asks the connection's class
    (``check_settings``): the toy's rule applies to the toy alone, InfiLoop's beta rule to InfiLoop alone."""
    with pytest.raises(ValueError, match=r"outer.score_clip: the toy average needs a clip of at least 1"):
        ConnectionConfig(name=toy, score_clip=0.5).validate("outer")
    ConnectionConfig(name="carry_last", score_clip=0.5).validate("outer")  # no such rule for carry-last
    with pytest.raises(ValueError, match=r"beta: decay 'learned' needs beta in \(0, 1\)"):
        ConnectionConfig(name="infiloop", beta=1.5).validate()
    ConnectionConfig(name=toy, beta=1.5).validate()  # InfiLoop's rule is InfiLoop's
