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
# # The looped language model past its training horizon, with InfiLoop as its loop connection
#
# The looped-LM (looped language model) study's system is a causal decoder `M = C ∘ F^K ∘ P`: a p-block **prelude**,
# an s-block **core** whose weights are shared and which runs K times in training, and a c-block **coda**. At test
# time the core runs r loops: fewer than K (under-unrolling), K, or more (extrapolation); its effective depth is `L(r)
# = p + r·s + c`. It compares models at matched physical depth, training depth L(K) and inference depth L(r). Its
# findings, on 1B-parameter language models trained on web text and evaluated on benchmarks:
#
# * extra loops past K **help reasoning and hurt knowledge** (28.52 → 31.49 % and 62.80 → 52.11 % from
#   L(r) = 20 = L(K) to 40), and short CLUTRR (kinship-relation reasoning) chains gain more than long ones;
# * a **balanced** core and loop count (5×4, 4×5) extrapolates, the extremes (2×10, 10×2) do not, and the
#   balanced ones past their horizon beat the **non-looped** 20×1 model;
# * a **coda** protects knowledge under under-unrolling, a **prelude** helps reasoning extrapolate;
# * channel-wise **history-state injection (w = 2) + loop gating** beats the plain loop (BaseLoop) under
#   extended budgets; dense history injection (w = 1) rescues extrapolation.
#
# Here the same decoder (`infiloop/model/looplm.py`) is looped with a loop connection of this package:
# carry-last is the study's BaseLoop, **InfiLoop** makes `h_l` the attention of eq. 2 over the core's candidates
# (streamed with O(d) state per token, eqs. 4–5), and a **fixed-β average** (`ema`, γ = 1 − β₀, no content score)
# is the content-free baseline InfiLoop must beat. As in the study, one language model per configuration is
# trained on one corpus (next-token loss over the text): a mixture of **knowledge** (facts about people, asked
# with a held-out question form) and **reasoning**, kinship stories in the form of CLUTRR (relations along a
# chain of length 2–10, stated in random order; trained on lengths 2–4, the composed relation asked),
# generated here (`infiloop/tasks/language.py`), and evaluated on each kind apart.

# %% tags=["parameters"]
profile = "quick"  # smoke | quick | tiny | search | gpu | paper (infiloop/experiments/settings/profiles.py, LOOPLM)
device = "cpu"  # torch device for training and evaluation
seeds = ""  # comma-separated training seeds (empty: the profile's)
connections = ""  # comma-separated connections (empty: the profile's): carry_last, infiloop, ema, history_lg, ...
allocations = ""  # comma-separated allocations p+sxK+c of one L(K) (empty: the profile's); the first is the base
workers = 0  # models trained at a time, one process and thread each (0: one per CPU)

# %%
import matplotlib.pyplot as plt
import numpy as np

from infiloop.analysis import claims, looplm_grid, plotting
from infiloop.experiments import looplm
from infiloop.experiments.notebooks.helper import Notebook, check, pct
from infiloop.machine import usable_cpus

nb = Notebook("08_looped_lm", "The looped language model past its training horizon, with InfiLoop", profile, device, 0)
check("seeds", seeds, (str, int), expected="comma-separated training seeds, or empty")
check("connections", connections, str, expected=f"comma-separated names among {', '.join(looplm.CONNECTIONS)}")
check("allocations", allocations, str, expected="comma-separated allocations p+sxK+c, e.g. 0+2x4+0")
check("workers", workers, int, lambda v: v >= 0, "an integer >= 0 (0: one per CPU)")
need = nb.needs(globals())  # the models this notebook reads (infiloop/experiments/notebooks/manifest.py, looped_lm)
g = need.derived["grid"]
settings, seed_list, conns, allocs, base = g.settings, g.seeds, g.connections, g.allocations, g.base
plotting.use_style()
LABEL, COLOR = looplm.LABELS, looplm.COLORS

# %% [markdown]
# ## The models
# One model per configuration, each trained on the mixture: every connection at the base allocation, BaseLoop at
# every other allocation, once per training seed (the data are the same for every model). Every allocation has the
# same training depth L(K) and is evaluated at the same effective depths L(r), each with its own whole r; the
# non-looped reference (K = 1) at its own depth L(K).

# %%
records = need.records(workers or usable_cpus(), device)  # computed by ./reproduce.sh's scheduler, else here
rec = {cell: records[looplm.cell_id(cell)] for cell in g.cells}
depths, lk, K = g.depths, g.train_depth, {a: looplm.allocation(a)[2] for a in allocs}
grid = looplm_grid.DecoderGrid(rec, seed_list, {a: g.loops(a) for a in allocs})
rows_models = []
for a in allocs:
    p, s_, k, c = looplm.allocation(a)
    for cn in (conns if a == base else ["carry_last"]):
        fit_s = np.mean([rec[(a, cn, s)]["fit"]["seconds"] for s in seed_list])
        rows_models.append([a, LABEL[cn], f"{rec[(a, cn, seed_list[0])]['params']:,}", p + s_ + c, k,
                            ", ".join(f"{r}" for r in g.loops(a).values()), f"{fit_s:.0f}"])
cols_models = ["allocation p+s×K+c", "connection", "parameters", "physical depth", "K",
               f"r at L(r) = {', '.join(map(str, depths))}", "train time (s), mean"]
print(f"training depth L(K) = {lk}; effective depths L(r) = {depths}; seeds {seed_list}")
print(*[" | ".join(map(str, x)) for x in [cols_models, *rows_models]], sep="\n")

# %% [markdown]
# ## Extra loops: reasoning against knowledge
# Accuracy at effective depth L(r) from L(K)/2 to 4 L(K), at the base allocation; bands are 95 % intervals over the
# training seeds and the test items. The grey cross is the non-looped reference at its depth L(K).

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
curves, nonloop = {}, (g.role("nonloop") or [None])[0]
for ax, task, title in zip(axes, looplm.TASKS, ("knowledge (held-out question form)", "reasoning (kinship, 2–10)")):
    for cn in conns:
        iv = curves[(task, cn)] = grid.curve(task, base, cn, depths)
        ax.plot(depths, 100 * iv.value, marker="o", color=COLOR[cn], label=LABEL[cn])
        ax.fill_between(depths, 100 * iv.lo, 100 * iv.hi, color=COLOR[cn], alpha=0.15)
    if nonloop:
        ax.plot([lk], [100 * grid.curve(task, nonloop, "carry_last", [lk]).value[0]], "x", ms=9, color="grey",
                label=f"non-looped {nonloop}")
    ax.axvline(lk, color="grey", ls=":", lw=1)
    ax.set(xscale="log", xlabel="blocks per token at test time, L(r)", title=title, ylim=(0, 100))
    looplm_grid.depth_ticks(ax, g.loops(base), K[base], depths)
axes[0].set_ylabel("exact accuracy (%)")
axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside the bands
plotting.profile_note(axes[1], profile, len(seed_list), "seeds")
fig.suptitle(f"Trained with {lk} blocks per token ({base}: prelude + core × loops + coda), tested with fewer and more\n"
             "the study: past the training depth, reasoning rises and knowledge falls")
fig.tight_layout()
fig_loops = plotting.save_figure(fig, "looped_lm_loops", profile)[0]

# %%
cols_loops = ["task", "connection"] + [looplm_grid.depth_label(g.loops(base), K[base], d) for d in depths]
rows_loops = [[task, LABEL[cn]] + [f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                                   for v, lo, hi in zip(iv.value, iv.lo, iv.hi)] for (task, cn), iv in curves.items()]
if nonloop:
    rows_loops += [[t, f"non-looped {nonloop}"] + [pct(grid.curve(t, nonloop, "carry_last", [lk]).value[0])
                                                   if d == lk else "–" for d in depths] for t in looplm.TASKS]
print(*[" | ".join(map(str, x)) for x in [cols_loops, *rows_loops]], sep="\n")

# %% [markdown]
# ## By reasoning depth
# Kinship accuracy by chain length (trained on 2–4) at the training depth L(K) and at 2 L(K), the study's
# extrapolation (its CLUTRR gains were large on chains of 2–3 and small or negative on 4–10).

# %%
lengths = list(rec[(base, conns[0], seed_list[0])]["kinds"]["kinship"])
fig, ax = plt.subplots(figsize=(7, 3.8))
rows_depth = []
for cn in conns:
    for d, ls in ((lk, "-"), (2 * lk, "--")):
        acc = [np.mean([grid.flags("kinship", base, cn, s, d, {n}).mean() for s in seed_list]) for n in lengths]
        ax.plot(lengths, 100 * np.array(acc), ls=ls, marker="o", ms=3, color=COLOR[cn], label=f"{LABEL[cn]}, L = {d}")
        rows_depth.append([LABEL[cn], d] + [pct(x) for x in acc])
ax.axvspan(1.5, 4.5, color="grey", alpha=0.08)
ax.text(3, 3, "trained lengths", ha="center", fontsize=8, color="grey")
ax.set(xlabel="kinship chain length", ylabel="exact accuracy (%)", ylim=(0, 100), title=f"{base}: accuracy by depth")
ax.legend(fontsize=6, ncol=2)
plotting.profile_note(ax, profile, len(seed_list), "seeds")
fig.tight_layout()
fig_depth = plotting.save_figure(fig, "looped_lm_depth", profile)[0]
cols_depth = ["connection", "L(r)"] + [f"length {n}" for n in lengths]

# %% [markdown]
# ## What the connection does on the loop axis
# Per loop l at the position that predicts a kinship answer (deepest chains, mean over seeds): InfiLoop's step size
# γ_l (eq. 5; carry-last's is 1, the fixed-β average's constant), and the relative update ‖h_l − h_{l−1}‖ / ‖h_{l−1}‖
# the study reads as convergence (its update norm falls past the horizon while the state keeps drifting).

# %%
rows_axis, axis = [], {}
fig, (ax_g, ax_u) = plt.subplots(1, 2, figsize=(11, 3.4))
for cn in conns:
    for task in looplm.TASKS:
        la = axis[(cn, task)] = looplm_grid.loop_axis(rec, base, cn, seed_list, task, K[base])
        rows_axis.append([LABEL[cn], task] + [f"{la[x]:.3f}" for x in ("gamma_in", "gamma_past", "update_in",
                                                                      "update_past", "beta", "q_norm")])
    la = axis[(cn, "kinship")]
    ax_g.plot(range(1, len(la["gamma"]) + 1), la["gamma"], marker=".", color=COLOR[cn], label=LABEL[cn])
    ax_u.plot(range(1, len(la["update"]) + 1), la["update"], marker=".", color=COLOR[cn], label=LABEL[cn])
for ax in (ax_g, ax_u):
    ax.axvline(K[base], color="grey", ls=":", lw=1)
ax_g.set(xlabel="loop l", ylabel="mean γ_l at the answer", ylim=(0, 1.05), title="step size on the loop axis (kinship)")
ax_u.set(xlabel="loop l", ylabel="relative update", yscale="log", title="relative update ‖h_l − h_{l−1}‖ / ‖h_{l−1}‖")
ax_u.legend(fontsize=7)
plotting.profile_note(ax_u, profile, len(seed_list), "seeds")
fig.tight_layout()
fig_axis = plotting.save_figure(fig, "looped_lm_gamma", profile)[0]
cols_axis = ["connection", "task", "mean γ, loops 1..K", "mean γ, loops > K", "relative update, 1..K",
             "relative update, > K", "β", "|q|"]
print(*[" | ".join(map(str, x)) for x in [cols_axis, *rows_axis]], sep="\n")

# %% [markdown]
# ## InfiLoop against a content-free average
# If InfiLoop's learned connection only averaged its candidates, a fixed-β exponential average without content
# score (γ = 1 − β₀ = 0.45 at every loop and token) would do as well. Overall accuracy (the mean of knowledge and
# kinship), InfiLoop − the fixed-β average and InfiLoop − BaseLoop, paired on the items, 95 % intervals.

# %%
rows_avg = []
for other in [c for c in ("ema", "carry_last") if c in conns and "infiloop" in conns]:
    diffs = [claims.ratio_difference([(grid.overall(base, "infiloop", s, d), grid.overall(base, other, s, d))
                                       for s in seed_list], (-1.0, 1.0)) for d in depths]
    rows_avg.append([f"InfiLoop − {LABEL[other]}"] + [iv.points() for iv in diffs])
cols_avg = ["overall accuracy (points)"] + [looplm_grid.depth_label(g.loops(base), K[base], d) for d in depths]
print(*[" | ".join(map(str, x)) for x in [cols_avg, *rows_avg]], sep="\n")

# %% [markdown]
# ## Allocations at matched depth
# BaseLoop at every allocation of the profile, all of one training depth L(K) and run at the same effective depths
# L(r), each with its own whole r (the legend gives K); the non-looped reference at L(K) (only at the profiles that
# list several allocations).

# %%
alloc_rows = []
if len(allocs) > 1:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, task in zip(axes, looplm.TASKS):
        for i, a in enumerate(allocs):
            ds = list(g.loops(a))
            iv = grid.curve(task, a, "carry_last", ds)
            ax.plot(ds, 100 * iv.value, marker="o" if len(ds) > 1 else "x", ms=5 if len(ds) > 1 else 9,
                    color=f"C{i}", label=f"{a} (K = {K[a]})")
            alloc_rows.append([task, a] + [pct(iv.value[ds.index(d)]) + f" (r = {g.loops(a)[d]})" if d in ds else "–"
                                           for d in depths])
        ax.axvline(lk, color="grey", ls=":", lw=1)
        ax.set(xscale="log", xlabel="effective depth L(r)", title=task, ylim=(0, 100))
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.minorticks_off()
    axes[0].set_ylabel("exact accuracy (%), BaseLoop")
    axes[1].legend(fontsize=7, title="p+s×K+c")
    plotting.profile_note(axes[1], profile, len(seed_list), "seeds")
    fig.tight_layout()
    fig_alloc = plotting.save_figure(fig, "looped_lm_allocations", profile)[0]
cols_alloc = ["task", "allocation"] + [f"L(r) = {d}" for d in depths]

# %% [markdown]
# ## What this run shows

# %%
roles = {r: g.role(r) for r in looplm.ROLES}
verdicts = looplm_grid.study_verdicts(grid, base, conns, roles, lk)
decided = looplm_grid.study_claims(verdicts, nb.claim)
verdict_of = {c["id"]: c for c in decided}
finding = looplm_grid.first_finding(verdict_of["study.loops_help_reasoning"], verdict_of["study.loops_hurt_knowledge"])

# %%
text = (f"At profile **{profile}** ({len(seed_list)} training seeds per model, base allocation {base}, L(K) = {lk}; "
        f"d = {settings['d_model']}, {settings['steps']} training steps on the mixture, {settings['n_test']} kinship "
        f"test items per length): "
        + "; ".join(f"{LABEL[cn]} {task} {pct(curves[(task, cn)].value[depths.index(lk)])} at L(K) → "
                    f"{pct(curves[(task, cn)].value[depths.index(2 * lk)])} at 2 L(K)" for (task, cn) in curves) + ". "
        + looplm_grid.knowledge_level(curves[("knowledge", "carry_last")], depths.index(lk))
        + finding
        + (" ".join(f"{r[0]}, overall: {', '.join(r[1:])} at L(r) = {', '.join(map(str, depths))}." for r in rows_avg)
           + " ")
        + "The study measured 1B-parameter language models on benchmark averages; here the tasks are generated and "
        "the models have about 0.1 M parameters, so compare directions, not levels. Each claim is decided by the 95 % "
        "interval of its effect over the training seeds and the test items, beside the study's effect (the rule: "
        "`infiloop/analysis/intervals.py`, in the report).")
print(text)

# %%
tables = [nb.table("Models", cols_models, rows_models),
          nb.table("Accuracy (%) against effective depth L(r), mean over seeds [95 % interval]", cols_loops,
                   rows_loops),
          nb.table("Kinship accuracy by chain length", cols_depth, rows_depth),
          nb.table("The loop axis: step size γ, relative update, β and |q|", cols_axis, rows_axis),
          nb.table("InfiLoop against the content-free average and BaseLoop", cols_avg, rows_avg)]
figures = [{"path": fig_loops, "caption": "Accuracy against L(r) for knowledge and reasoning, every connection."},
           {"path": fig_depth, "caption": "Kinship accuracy by chain length at L(K) and 2 L(K)."},
           {"path": fig_axis, "caption": "Mean step size γ_l and relative update at the answer position, per loop."}]
if alloc_rows:
    tables.append(nb.table("BaseLoop accuracy by allocation at matched L(r)", cols_alloc, alloc_rows))
    figures.append({"path": fig_alloc, "caption": "BaseLoop at allocations of one training depth, at matched L(r)."})
nb.finish(text, figures=figures, tables=tables, claims=decided)
