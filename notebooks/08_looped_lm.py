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
# The looped-LM study's system is a causal decoder `M = C ∘ F^K ∘ P`: a p-block **prelude**, an s-block
# **core** whose weights are shared and which runs K times in training, and a c-block **coda**. At test time
# the core runs r loops: fewer than K (under-unrolling), K, or more (extrapolation); its effective depth is
# `L(r) = p + r·s + c`. Its findings, on 1B-parameter models trained on web text:
#
# * extra loops past K **help reasoning and hurt knowledge** (28.52 → 31.49 % and 62.80 → 52.11 % from
#   L(r) = 20 to 40);
# * a **balanced** core and loop count (5×4, 4×5) extrapolates, extreme ones (2×10, 10×2) do not;
# * a **coda** protects knowledge under under-unrolling, a **prelude** helps reasoning extrapolate;
# * history-state injection + loop gating beats the plain loop (BaseLoop) past the horizon.
#
# Its loop is carry-last (`h_l = F(h_{l-1})`). Here the same decoder (`infiloop/model/looplm.py`) is looped
# with any loop connection of this package: carry-last is the study's BaseLoop, and **InfiLoop** makes `h_l`
# the attention of eq. 2 over the core's candidates, streamed with O(d) state per token (eqs. 4–5), the
# combination the InfiLoop paper names as its next step. The tasks are generated here
# (`infiloop/tasks/language.py`): **knowledge** (facts about people, asked with a held-out question form) and
# **reasoning**, kinship chains in the spirit of CLUTRR (relations stated along a chain of length 2–10, trained
# on lengths 2–4, the composed relation asked).

# %% tags=["parameters"]
profile = "quick"  # smoke | quick | tiny | search | gpu | paper (infiloop/experiments/settings/profiles.py, LOOPLM)
device = "cpu"  # torch device for training and evaluation
seeds = ""  # comma-separated training seeds (empty: the profile's)
connections = ""  # comma-separated loop connections (empty: the profile's): carry_last, infiloop, history_lg
allocations = ""  # comma-separated allocations p+sxK+c (empty: the profile's); the first is the base
workers = 0  # models trained at a time, one process and thread each (0: one per CPU)

# %%
import matplotlib.pyplot as plt
import numpy as np

from infiloop.analysis import claims as effects
from infiloop.analysis import looplm_grid, plotting
from infiloop.experiments import looplm
from infiloop.experiments.notebooks.helper import Notebook, check, pct
from infiloop.machine import usable_cpus

nb = Notebook("08_looped_lm", "The looped language model past its training horizon, with InfiLoop", profile, device, 0)
check("seeds", seeds, (str, int), expected="comma-separated training seeds, or empty")
check("connections", connections, str, expected=f"comma-separated names among {', '.join(looplm.CONNECTIONS)}")
check("allocations", allocations, str, expected="comma-separated allocations p+sxK+c, e.g. 1+2x3+1")
check("workers", workers, int, lambda v: v >= 0, "an integer >= 0 (0: one per CPU)")
need = nb.needs(globals())  # the models this notebook reads (infiloop/experiments/notebooks/manifest.py, looped_lm)
g = need.derived["grid"]
settings, seed_list, conns, allocs = g.settings, g.seeds, g.connections, g.allocations
plotting.use_style()
LABEL = {**plotting.LABELS, "carry_last": "carry-last (BaseLoop)"}

# %% [markdown]
# ## The models
# Every connection at the base allocation, and BaseLoop at every other allocation; each for knowledge and for
# reasoning, once per training seed (the data are the same for every model).

# %%
base = g.base
records = need.records(workers or usable_cpus(), device)  # computed by ./reproduce.sh's scheduler, else here
rec = {cell: records[looplm.cell_id(cell)] for cell in g.cells}
K = {a: looplm.allocation(a)[2] for a in allocs}
rows_models = []
for a in allocs:
    p, s_, k, c = looplm.allocation(a)
    for cn in (conns if a == base else ["carry_last"]):
        r0 = rec[("kinship", a, cn, seed_list[0])]
        fit_s = np.mean([rec[(t, a, cn, s)]["fit"]["seconds"] for t in looplm.TASKS for s in seed_list])
        rows_models.append([a, LABEL[cn], f"{r0['params']:,}", p + s_ + c, p + k * s_ + c, f"{fit_s:.0f}"])
cols_models = ["allocation p+s×K+c", "connection", "parameters", "physical depth", "training depth L(K)",
               "train time (s), mean"]
print(*[" | ".join(map(str, x)) for x in [cols_models, *rows_models]], sep="\n")


# %%
grid = looplm_grid.DecoderGrid(rec, seed_list)  # the records' flags, curves and pairs (analysis/looplm_grid.py)
loops = list(g.probe(g.cells[0]).budgets())
kb = K[base]
print(f"base allocation {base}: K = {kb}; test loops r = {loops}; seeds {seed_list}")

# %% [markdown]
# ## Extra loops: reasoning against knowledge
# Accuracy after r loops, for r from K/2 to 4K, at the base allocation; bands are 95 % intervals over the
# training seeds and the test items.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
curves = {}
for ax, task, title in zip(axes, looplm.TASKS, ("knowledge (held-out question form)", "reasoning (kinship, 2–10)")):
    for cn in conns:
        iv = curves[(task, cn)] = grid.curve(task, base, cn, loops)
        x = np.array(loops) / kb
        ax.plot(x, 100 * iv.value, marker="o", color=plotting.COLORS[cn], label=LABEL[cn])
        ax.fill_between(x, 100 * iv.lo, 100 * iv.hi, color=plotting.COLORS[cn], alpha=0.15)
    ax.axvline(1, color="grey", ls=":", lw=1)
    ax.set(xscale="log", xlabel="loops r at test time", title=title, ylim=(0, 100))
    ax.set_xticks(x, [f"{v:g}K" for v in x])
    ax.minorticks_off()
axes[0].set_ylabel("exact accuracy (%)")
axes[1].legend(fontsize=8, loc="lower left")
plotting.profile_note(axes[1], profile, len(seed_list), "seeds")
fig.suptitle(f"{base}: the core trained for K = {kb} loops, run for r (the study: reasoning ↑, knowledge ↓ past K)")
fig.tight_layout()
fig_loops = plotting.save_figure(fig, "looped_lm_loops", profile)[0]
cols_loops = ["task", "connection"] + [f"r = {r}" + (" (K)" if r == kb else "") for r in loops]
rows_loops = [[task, LABEL[cn]] + [f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                                            for v, lo, hi in zip(iv.value, iv.lo, iv.hi)]
              for (task, cn), iv in curves.items()]
print(*[" | ".join(map(str, x)) for x in [cols_loops, *rows_loops]], sep="\n")

# %% [markdown]
# ## By reasoning depth
# Kinship accuracy by chain length (trained on 2–4) at the training horizon and at 4K.

# %%
depths = sorted(int(d) for d in rec[("kinship", base, conns[0], seed_list[0])]["correct"])
r_far = max(loops)
fig, ax = plt.subplots(figsize=(7, 3.8))
rows_depth = []
for cn in conns:
    for r, ls in ((kb, "-"), (r_far, "--")):
        acc = [np.mean([grid.flags("kinship", base, cn, s, r, {d}).mean() for s in seed_list]) for d in depths]
        ax.plot(depths, 100 * np.array(acc), ls=ls, marker="o", ms=3, color=plotting.COLORS[cn],
                label=f"{LABEL[cn]}, r = {r}")
        rows_depth.append([LABEL[cn], r] + [pct(a) for a in acc])
ax.axvspan(1.5, 4.5, color="grey", alpha=0.08)
ax.text(3, 3, "trained lengths", ha="center", fontsize=8, color="grey")
ax.set(xlabel="kinship chain length", ylabel="exact accuracy (%)", ylim=(0, 100), title=f"{base}: accuracy by depth")
ax.legend(fontsize=7, ncol=2)
plotting.profile_note(ax, profile, len(seed_list), "seeds")
fig.tight_layout()
fig_depth = plotting.save_figure(fig, "looped_lm_depth", profile)[0]
cols_depth = ["connection", "r"] + [f"length {d}" for d in depths]

# %% [markdown]
# ## What the connection does on the loop axis
# InfiLoop's step size γ_l (eq. 5) and content score s_l at the position that predicts the answer, over the loops
# of the deepest test chains (mean over seeds), and its learned β and |q|. Carry-last's γ is 1 at every loop.

# %%
rows_axis = []
fig, ax = plt.subplots(figsize=(6.4, 3.4))
for cn in conns:
    for task in looplm.TASKS:
        la = [rec[(task, base, cn, s)]["loop_axis"] for s in seed_list]
        gamma = np.mean([x["gamma"] for x in la], axis=0)
        if task == "kinship":
            ax.plot(range(1, len(gamma) + 1), gamma, marker=".", color=plotting.COLORS[cn], label=LABEL[cn])
        beta = [x["beta"] for x in la if "beta" in x]
        qn = [x["q_norm"] for x in la if "q_norm" in x]
        rows_axis.append([LABEL[cn], task, f"{gamma[:kb].mean():.3f}", f"{gamma[kb:].mean():.3f}",
                          f"{np.mean(beta):.3f}" if beta else "–", f"{np.mean(qn):.3f}" if qn else "–"])
ax.axvline(kb, color="grey", ls=":", lw=1)
ax.set(xlabel="loop l", ylabel="mean γ_l at the answer", ylim=(0, 1.05), title="step size on the loop axis (kinship)")
ax.legend(fontsize=8)
plotting.profile_note(ax, profile, len(seed_list), "seeds")
fig.tight_layout()
fig_axis = plotting.save_figure(fig, "looped_lm_gamma", profile)[0]
cols_axis = ["connection", "task", "mean γ, loops 1..K", "mean γ, loops > K", "β", "|q|"]
print(*[" | ".join(map(str, x)) for x in [cols_axis, *rows_axis]], sep="\n")

# %% [markdown]
# ## Allocations at matched depth
# BaseLoop at every allocation of the profile, each with the same physical depth p + s + c and training depth
# p + s·K + c (only at the profiles that list several).

# %%
alloc_rows, alloc_curves = [], {}
if len(allocs) > 1:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, task in zip(axes, looplm.TASKS):
        for i, a in enumerate(allocs):
            ls_a = sorted({max(1, round(m * K[a])) for m in settings["loops"]})
            iv = alloc_curves[(task, a)] = grid.curve(task, a, "carry_last", ls_a)
            ax.plot(np.array(ls_a) / K[a], 100 * iv.value, marker="o", color=f"C{i}", label=a)
            alloc_rows.append([task, a] + [pct(v) for v in iv.value])
        ax.axvline(1, color="grey", ls=":", lw=1)
        ax.set(xscale="log", xlabel="r / K", title=task, ylim=(0, 100))
        ax.minorticks_off()
    axes[0].set_ylabel("exact accuracy (%), BaseLoop")
    axes[1].legend(fontsize=8, title="p+s×K+c")
    plotting.profile_note(axes[1], profile, len(seed_list), "seeds")
    fig.tight_layout()
    fig_alloc = plotting.save_figure(fig, "looped_lm_allocations", profile)[0]
cols_alloc = ["task", "allocation"] + [f"r = {m:g}K" for m in settings["loops"]]

# %% [markdown]
# ## What this run shows

# %%
verdicts = looplm_grid.study_verdicts(grid, curves, loops, base, conns, {a: looplm.allocation(a) for a in allocs})
claims = looplm_grid.study_claims(verdicts, nb.claim)
il, il_know = (effects.difference(grid.pairs(t, base, "infiloop", r_far, base, "carry_last", r_far), "items")
               if "infiloop" in conns else None for t in ("kinship", "knowledge"))
verdict_of = {c["id"]: c for c in claims}
finding = looplm_grid.first_finding(verdict_of["study.loops_help_reasoning"], verdict_of["study.loops_hurt_knowledge"])

# %%
text = (f"At profile **{profile}** ({len(seed_list)} training seeds per model, base allocation {base}, K = {kb}; "
        f"d = {settings['d_model']}, {settings['steps']} training steps, {settings['n_test']} test items per depth): "
        + "; ".join(f"{LABEL[cn]} {task} {pct(curves[(task, cn)].value[loops.index(kb)])} @ K → "
                    f"{pct(curves[(task, cn)].value[-1])} @ 4K" for (task, cn) in curves) + ". "
        + finding
        + (f"On the extrapolation curve, InfiLoop − BaseLoop at r = 4K: reasoning {il.points()}, knowledge "
           f"{il_know.points()} (mean over seeds, 95 % interval). " if il is not None else "")
        + "The study measured 1B-parameter language models on benchmark averages; here the tasks are generated and "
        "the models have about 0.1 M parameters, so compare directions, not levels. Each claim is decided by the 95 % "
        "interval of its effect over the training seeds and the test items, beside the study's effect (the rule: "
        "`infiloop/analysis/intervals.py`, in the report).")
print(text)
tables = [nb.table("Models", cols_models, rows_models),
          nb.table("Accuracy (%) against loops r, mean over seeds [95 % interval]", cols_loops, rows_loops),
          nb.table("Kinship accuracy by chain length", cols_depth, rows_depth),
          nb.table("The loop axis: step size γ, β and |q|", cols_axis, rows_axis)]
figures = [{"path": fig_loops, "caption": "Accuracy after r loops for knowledge and reasoning, every connection."},
           {"path": fig_depth, "caption": "Kinship accuracy by chain length at r = K and 4K."},
           {"path": fig_axis, "caption": "Mean step size γ_l at the answer position over the loops."}]
if alloc_rows:
    tables.append(nb.table("BaseLoop accuracy by allocation", cols_alloc, alloc_rows))
    figures.append({"path": fig_alloc, "caption": "BaseLoop at allocations of matched physical and training depth."})
nb.finish(text, figures=figures, tables=tables, claims=claims)
