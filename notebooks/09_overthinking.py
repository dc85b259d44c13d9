# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Overthinking: iterating on instances larger than the training ones
#
# The paper's thesis is that replacing the state with the newest block output (carry-last) is what makes looped
# models degrade with more iterations. The recurrent-reasoning literature names the setting in which small recurrent
# networks are known to fail by iterating: train on small instances, run on much larger ones for many more
# iterations than in training. Without *recall* (the input fed again at every step) and without a progressive loss,
# their accuracy rises, then collapses as iterations continue, "overthinking" (Bansal et al. 2022, arXiv
# 2202.05826; Schwarzschild et al. 2021). TRM's (the Tiny Recursive Model's) recipe feeds the input at every inner
# update and supervises detached segments; without recall, that training taught a model nothing here, so at the
# `overthink` profile every model trains as the literature's networks do: one segment from the initial state,
# gradients through every outer update (`docs/overthinking.md` has the probes; `train.progressive` adds the
# literature's progressive loss).
#
# This notebook trains six models with the same settings on one size-agnostic block (attention without positions
# plus the depthwise 3x3 convolution): carry-last, FPRM (the Fixed-Point Reasoning Model) and InfiLoop, each with
# recall and without it. Each runs to `max_updates` outer updates on test sets at several sizes: bit strings of
# several lengths (prefix sums: each position's running parity) or mazes of several sides. Every number is a mean over
# the training seeds with a 95 % interval; the two claims are decided by the intervals of their effects
# (`infiloop/analysis/intervals.py`).

# %% tags=["parameters"]
profile = "overthink"  # smoke | overthink: the profiles whose data have test sets at several sizes
task = "prefix_sums"  # prefix_sums | maze
device = "cpu"  # torch device for training and evaluation
seeds = ""  # training seeds, e.g. "0,1,2" ("": the profile's)
max_updates = 0  # outer updates to evaluate at every test size (0: the profile's depth)
limit = 0  # test instances per size (0: the profile's default)
arms = True  # also the content-free fixed-β average and carry-last with the progressive loss (recipes.OVERTHINK_ARMS)

# %%
import matplotlib.pyplot as plt

from infiloop.analysis import overthinking, plotting
from infiloop.experiments.notebooks.helper import Notebook, check
from infiloop.experiments.settings.recipes import OVERTHINK_ARMS, OVERTHINK_RECIPES

nb = Notebook("09_overthinking", "Overthinking", profile, device, 0)
check("task", task, str, lambda v: v in ("prefix_sums", "maze"), "prefix_sums or maze")
check("seeds", seeds, (str, int), expected='training seeds separated by commas, e.g. "0,1,2"')
check("arms", arms, bool, expected="True or False")
check("max_updates", max_updates, int, lambda v: v >= 0, "an integer >= 0 (0: the profile's depth)")
check("limit", limit, int, lambda v: v >= 0, "an integer >= 0")
plotting.use_style()

# %% [markdown]
# ## The six models
# Trained once per configuration and seed, cached under `runs/`; each is evaluated on every test size with the same
# weights (the block does not depend on the grid's size).

# %%
need = nb.needs(globals())  # the runs and evaluations this notebook reads (experiments/notebooks/declarations.py)
max_updates, sizes, seed_list = need.params["max_updates"], need.derived["sizes"], need.seeds
models = [*OVERTHINK_RECIPES, *(OVERTHINK_ARMS if arms else ())]  # the six, then the further arms
runs = {r: need.run(r, device) for r in models}
depth = runs["carry_last_no_recall"].training_depth
train_size = runs["carry_last_no_recall"].model_config().grid
labels = {r: overthinking.label(r, plotting.LABELS) for r in models}
print(f"{task}: trained at grid {train_size[0]}x{train_size[1]}, training depth {depth} outer updates; test sizes "
      f"{', '.join(map(str, sizes))}; evaluated to {max_updates} updates ({max_updates / depth:.0f}x the training "
      f"depth); seeds {', '.join(map(str, seed_list))}")

# %%
trajs = {(s, r): list(need.results(f"{s}/{r}", device).values()) for s in sizes for r in models}
ms = {key: overthinking.measures(t) for key, t in trajs.items()}
n_items = trajs[(sizes[-1], "carry_last_no_recall")][0]["correct"].shape[1]
print(f"{n_items} test instances per size and seed")

# %% [markdown]
# ## Exact accuracy against iterations, at each test size
# Solid: with recall; dashed: without. With `arms`, two more: InfiLoop's content-free fixed-β average without recall
# (orange, dashed: eq. 2 without s_i, β fixed at 0.55) and carry-last with recall and the literature's progressive
# loss (dotted). The dotted grey line is the training depth.

# %%
fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.8), sharey=True, squeeze=False)
for ax, s in zip(axes[0], sizes):
    for r in models:
        m, (base, ls) = ms[(s, r)], overthinking.style(r)
        ax.plot(m.updates, 100 * m.curve.value, color=plotting.COLORS[base], ls=ls, label=labels[r])
        ax.fill_between(m.updates, 100 * m.curve.lo, 100 * m.curve.hi, color=plotting.COLORS[base], alpha=0.12, lw=0)
    ax.axvline(depth, color="grey", ls=":", lw=1)
    ax.set(xscale="log", xlabel="outer updates", title=f"test size {s}", ylim=(0, 100))
axes[0][0].set_ylabel("exact accuracy (%)")
axes[0][-1].legend(fontsize=7, loc="lower right")
plotting.profile_note(axes[0][-1], profile, n_items)
fig.tight_layout()
fig_acc = plotting.save_figure(fig, f"overthinking_{task}", profile)[0]

# %% [markdown]
# ## The overthinking measures
# Per test size: accuracy at the training depth, the peak of the mean curve and the update where it lies, the
# accuracy at the deepest update, the fall after the peak chosen on held-out puzzles (`claims.held_out_fall`: each
# half's peak is chosen on the other half, so the fall can be negative where a model keeps gaining), and the share of
# the instances solved at some update that are wrong at the end.

# %%
tables = {}
for s in sizes:
    cols, rows = overthinking.table({r: ms[(s, r)] for r in models}, labels, depth)
    tables[s] = rows
    print(f"test size {s}:")
    print(*[" | ".join(map(str, x)) for x in [cols, *rows]], sep="\n")

# %% [markdown]
# ## Solved, then wrong: read after each instance's own solve
# "Solved, then wrong at the deepest update" saturates where every model ends at 0 %: each then loses 100 % of what it
# solved, and the difference between two models is 0 whatever happened on the way. The same read, taken a fixed number
# of updates after each instance's first solve (`overthinking.WINDOWS`: 4, 12 and 36 updates; the paper's own window,
# 36 updates, is about one training depth), says how soon a model loses what it solved. Per pair of models, at the
# largest test size: each model's share of the instances it solved with that many updates left (the counts per seed
# beside it) and the paired difference, the same instances of each seed and the same resample for both models. Read
# from the trajectories above: nothing is trained or evaluated for it.

# %%
pairs = [("carry_last_no_recall", "infiloop_no_recall"), ("carry_last_recall", "infiloop_recall")]
pairs += [("average_no_recall", "infiloop_no_recall"), ("carry_last_progressive", "carry_last_recall")] if arms else []
window_cols, window_rows = overthinking.window_table({r: trajs[(sizes[-1], r)] for r in models}, pairs, labels)
print(f"test size {sizes[-1]}:")
print(*[" | ".join(map(str, x)) for x in [window_cols, *window_rows]], sep="\n")

# %% [markdown]
# ## InfiLoop's step size γ_t and content score s_t along the way (outer axis)
# Mean over instances and seeds at each update, apart for the instances right and wrong at that update (eq. 5:
# h_t = h_{t−1} + γ_t (z_t − h_{t−1}); s_t the candidate's score of eq. 2).

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for i, s in enumerate(sizes):
    shade = 0.35 + 0.65 * i / max(1, len(sizes) - 1)  # the larger the size, the darker
    g = overthinking.gamma_along(trajs[(s, "infiloop_no_recall")])
    ups = ms[(s, "infiloop_no_recall")].updates
    for ax, key in ((ax1, "gamma_outer"), (ax2, "score_outer")):
        ax.plot(ups, g[f"{key}_right"], color=plotting.COLORS["infiloop"], alpha=shade, label=f"size {s}, right")
        ax.plot(ups, g[f"{key}_wrong"], color=plotting.COLORS["carry_last"], alpha=shade, label=f"size {s}, wrong")
ax1.set(xscale="log", xlabel="outer updates", ylabel="γ_t (outer)", title="InfiLoop without recall")
ax2.set(xscale="log", xlabel="outer updates", ylabel="content score s_t (outer)")
ax2.legend(fontsize=7)
fig.tight_layout()
fig_gamma = plotting.save_figure(fig, f"overthinking_gamma_{task}", profile)[0]

# %% [markdown]
# ## Does InfiLoop's content score tell right strings from wrong ones?
# The paper reads its content score s_t as a verifier: high on right boards, low on wrong ones (notebook 03 measures it
# on Sudoku). Here: the AUROC (area under the ROC curve: the chance that a right candidate outscores a wrong one) of
# s_t (outer axis) for right candidate strings against wrong ones, over every update, per test size (0.5: the score
# does not separate them; 1: every right string scores above every wrong one).

# %%
separation_rows = overthinking.separation_table(trajs, labels)
print(*[" | ".join(map(str, x)) for x in [overthinking.SEPARATION_COLUMNS, *separation_rows]], sep="\n")

# %% [markdown]
# ## What this run shows
# The two claims at the largest test size, both models without recall: carry-last's fall after its held-out peak
# (the literature's claim), and InfiLoop's own share of what it solved that is wrong by the deepest update (the paper's
# thesis carried to this setting: InfiLoop keeps what it solved), an absence claim set against half the paper's TRM's
# loss after the solve and testable only where some model loses more than that; carry-last's share minus InfiLoop's and
# the difference of the two falls are shown beside it (`infiloop/analysis/paper.py`).

# %%
largest = sizes[-1]
cl, inf = ms[(largest, "carry_last_no_recall")], ms[(largest, "infiloop_no_recall")]
cl_trajs, inf_trajs = trajs[(largest, "carry_last_no_recall")], trajs[(largest, "infiloop_no_recall")]
kept, falls = overthinking.lost_contrast(cl_trajs, inf_trajs), overthinking.fall_contrast(cl_trajs, inf_trajs)
own_loss, keep_guard = overthinking.infiloop_keeps(cl_trajs, inf_trajs)  # an absence claim (docs/statistics.md)
claims = [nb.claim("overthink.carry_last_overthinks", f"size {largest}: peak {cl.at(cl.peak).pct()} @ {cl.peak} → "
                   f"{cl.at(max_updates).pct()} @ {max_updates}; fall {cl.fall.points()}", effect=cl.fall),
          nb.claim("overthink.infiloop_keeps", f"size {largest}: solved, then wrong at the end: carry-last "
                   f"{cl.lost.pct()}, InfiLoop {inf.lost.pct()}; difference {kept.points()} (falls: carry-last "
                   f"{cl.fall.points()}, InfiLoop {inf.fall.points()})", effect=own_loss, untestable=keep_guard)]
after_solve = "; ".join(f"{r[1]}, {r[4]}" for r in window_rows[:len(overthinking.WINDOWS)])
text = overthinking.statement(cl, inf, kept, falls, largest, own_loss, keep_guard) + (
    f" Read after each instance's own first solve instead (carry-last's share minus InfiLoop's, no recall): "
    f"{after_solve}.\n\nSetting: {task} at profile **{profile}**, trained at {train_size[0]}x{train_size[1]}, "
    f"{n_items} test instances per size, seeds {', '.join(map(str, seed_list))}, evaluated to {max_updates} outer "
    f"updates ({max_updates / depth:.0f}x the training depth of {depth}).")
print(text)

# %%
nb.finish(text, figures=[{"path": fig_acc, "caption": "Exact accuracy against outer updates at each test size "
                          "(solid: recall; dashed: no recall; dotted: carry-last with the progressive loss; mean "
                          "over seeds, 95 % band)."},
                         {"path": fig_gamma, "caption": "InfiLoop (no recall): γ_t and the content score of the "
                          "outer axis, for instances right and wrong at each update."}],
          tables=[*(nb.table(f"Test size {s}", cols, rows) for s, rows in tables.items()),
                  nb.table(f"Test size {sizes[-1]}: solved, then wrong, read after each instance's first solve",
                           window_cols, window_rows),
                  nb.table("InfiLoop's content score: right against wrong strings", overthinking.SEPARATION_COLUMNS,
                           separation_rows)], claims=claims)
