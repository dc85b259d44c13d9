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
# # γ dynamics: the learned connection verifies its own proposals
#
# InfiLoop's update is an adaptive residual step `h_t = h_{t-1} + γ_t (z_t − h_{t-1})` with
# `γ_t = e_t / (β D_{t-1} + e_t)` (eq. 5). When every score is equal, γ_t tends to `1 − β`, the
# *equal-weight baseline*. The paper reports three phases on the outer axis: while searching the mean step is
# about 0.40 (below the baseline 0.56), at the update that completes the board it jumps to 0.91, and within 6
# updates it returns to 0.56; unsolved puzzles stay suppressed. The content score `ln e_t` tracks
# correctness: median 7.25 for right boards, 2.75 at 20 wrong cells, −0.58 at 33.
#
# This notebook reads the trajectories of the depth-scaling evaluation (same cache) and draws γ aligned to
# the first solve, for both axes, and the content score against the number of wrong cells.

# %% tags=["parameters"]
profile = "quick"  # smoke | quick | tiny | search | gpu | paper (infiloop/experiments/settings/profiles.py)
device = "cpu"  # torch device
seeds = ""  # training seeds of the InfiLoop model, e.g. "0,1,2" ("": the profile's; one at tiny, three at search)
max_updates = 0  # outer updates evaluated (0: the profile's depth; as in 02_depth_scaling, whose trajectory it reads)
limit = 0  # test puzzles (0: the profile's default)
before = 6  # updates before the first solve shown (the "search" phase)
after = 18  # updates after the first solve shown
settle = 6  # updates after the solve from which the "after" phase is averaged (the paper: within 6)

# %%
import numpy as np

from infiloop.analysis import claims, gamma_figures, intervals, paper, plotting, trajectories
from infiloop.experiments.notebooks.helper import Notebook, check

nb = Notebook("03_gamma_dynamics", "γ dynamics", profile, device, 0)
check("seeds", seeds, (str, int), expected='training seeds separated by commas, e.g. "0,1,2"')
for name, value in dict(before=before, after=after, settle=settle).items():
    check(name, value, int, lambda v: v >= 1, "an integer >= 1")
check("max_updates", max_updates, int, lambda v: v >= 0, "an integer >= 0 (0: the profile's depth)")
check("limit", limit, int, lambda v: v >= 0, "an integer >= 0")
check("settle", settle, int, lambda v: v <= after, f"an integer <= after={after}")
plotting.use_style()

# %%
need = nb.needs(globals())  # the runs and evaluations this notebook reads (infiloop/experiments/notebooks/manifest.py)
max_updates = need.params["max_updates"]  # 0 became the profile's depth
seed_list = need.seeds
by_seed = need.results("depth/infiloop", device)  # {seed: trajectory}
betas = {s: trajectories.info(t)["beta"] for s, t in by_seed.items()}
n_puzzles = by_seed[seed_list[0]]["correct"].shape[1]
solved = {s: int((t["first_solve"] > 0).sum()) for s, t in by_seed.items()}
seed_note = (f"{len(seed_list)} training seeds ({', '.join(map(str, seed_list))})" if len(seed_list) > 1
             else f"one training seed ({seed_list[0]})")
for s in seed_list:
    print(f"seed {s}: learned beta outer {betas[s]['outer']:.3f}, inner {betas[s]['inner']:.3f}; "
          f"{solved[s]}/{n_puzzles} puzzles solved")
# the equal-weight baseline 1 − β of each axis, averaged over the seeds (each seed learns its own β)
baseline = {axis: float(np.mean([1 - b[axis] for b in betas.values()])) for axis in ("outer", "inner")}

# %% [markdown]
# ## γ aligned to the first solve

# %%
fig = gamma_figures.gamma_aligned(by_seed, baseline, before, after, settle, profile, n_puzzles)
fig_gamma = plotting.save_figure(fig, "gamma_dynamics", profile)[0]

# %% [markdown]
# Each phase's mean is pooled over the solved puzzles' updates in that phase, then averaged over the training
# seeds; its 95 % interval is a t interval over the seeds with the test puzzles' variance folded in
# (`analysis/intervals.py`; with one seed, over the puzzles only). All phases are resampled with the same puzzles, so
# differences between them (the claims below) are paired. Each seed is compared with the baseline 1 − β of its own
# learned β.

# %%
AXES, PHASES = ("outer", "inner"), trajectories.GAMMA_PHASES
quantities = {axis: [trajectories.gamma_phase_quantities(t, axis, before, settle) for t in by_seed.values()]
              for axis in AXES}
phase_iv = {axis: {k: intervals.interval(q, lambda r, i=i: r[i], vectorized=True,
                                                                 bounds=intervals.SHARE) for i, k in enumerate(PHASES)}
            for axis, q in quantities.items()}
phase_cols = ["axis", "search", "at the solve", f"{settle} to {3 * settle} after", "never solved", "1 − β"]
phase_rows = [[axis, *(phase_iv[axis][k].num(".2f") for k in PHASES), f"{baseline[axis]:.2f}"] for axis in AXES]
phase_rows.append(["paper (outer)", f"{paper.GAMMA['search_mean']:.2f}", f"{paper.GAMMA['at_solve']:.2f}",
                   f"{paper.GAMMA['equal_weight_baseline']:.2f}", "suppressed",
                   f"{paper.GAMMA['equal_weight_baseline']:.2f}"])
print(*[" | ".join(map(str, x)) for x in [phase_cols, *phase_rows]], sep="\n")

# %% [markdown]
# ## The content score tracks correctness

# %%
# The score s_t belongs to the candidate z_t: paired with the wrong cells of the candidate's own readout.
fig = gamma_figures.content_score(by_seed, profile, n_puzzles)[0]
fig_score = plotting.save_figure(fig, "content_score", profile)[0]

# %% [markdown]
# ## How the connection learned
#
# The phases above are only as alive as the content score behind them. The training log records, at every
# logged step, what each axis's connection has learned: |q|, β, the raw score `qᵀ RMSNorm(z_t)` (RMSNorm:
# root-mean-square normalisation) of the step's candidates (mean, spread across a board's cells and across boards),
# the share of raw scores at or above the clip (where a hard clip passes no gradient), the mean γ and, on the outer
# axis, the rank correlation across boards of the candidate's score with its wrong cells (negative when the score
# tells right from wrong).

# %%
logs = {s: need.run("infiloop", device, seed=s).metrics() for s in seed_list}  # training logs, per seed
dynamics = {s: {axis: trajectories.connection_dynamics(log, axis) for axis in ("outer", "inner")}
            for s, log in logs.items()}
logged = any(np.isfinite(d["outer"]["q_norm"]).any() for d in dynamics.values())
if not logged:
    print("this run's training log predates the connection statistics: train it again to see them")
else:
    fig = gamma_figures.connection_training(dynamics, profile)
    fig_train = plotting.save_figure(fig, "connection_training", profile)[0]
    last = {s: {k: float(by_axis["outer"][k][-1]) for k in ("q_norm", "beta", "score_sd_cells", "score_sd_boards",
                                                             "at_clip")} for s, by_axis in dynamics.items()}
    for s, v in last.items():
        print(f"seed {s}, outer axis at the last step: |q| {v['q_norm']:.2f}, β {v['beta']:.3f}, score spread "
              f"{v['score_sd_cells']:.2f} across cells / {v['score_sd_boards']:.2f} across boards, "
              f"{100 * v['at_clip']:.0f} % at the clip")

# %% [markdown]
# ## What this run shows

# %%
po = {k: phase_iv["outer"][k].value for k in PHASES}
base = baseline["outer"]
outer = quantities["outer"]  # per seed: the four phases and 1 − β, one draw of the puzzles for all: paired
below = claims.phase_contrast(outer, "below")  # 1 − β − γ(search)
jump = claims.phase_contrast(outer, "jump")  # γ(solve) − max(γ(search), 1 − β)
# Does the score tell right boards from wrong ones: its AUROC (area under the ROC curve: 0.5 is chance) for right
# against wrong candidates over every update (claims.score_separation), and the paper's own measure beside it, the
# median score by wrong cells at the same shares of the board (gamma_figures.score_medians).
separation = claims.score_separation([trajectories.separation_terms(t, "outer") for t in by_seed.values()])
cells = int(np.prod(need.run("infiloop", device, seed=seed_list[0]).model_config().grid))
medians = gamma_figures.score_medians_text(gamma_figures.score_medians(by_seed, cells), cells)
auroc = f"{0.5 + separation.value:.2f} [{0.5 + separation.lo:.2f}, {0.5 + separation.hi:.2f}]"

# %% [markdown]
# A right board is also a late one (a board is right after its solve), so a score that only drifted with the update
# would separate right from wrong over every update too. Held at one update, and within one puzzle, by seed:

# %%
held = {s: trajectories.separation_held(t, "outer") for s, t in by_seed.items()}
held_cols = ["seed", "AUROC, every update", "AUROC within an update (updates with both)",
             "puzzles scored higher when right"]
held_rows = [[str(s), "–" if h["every_update"] != h["every_update"] else f"{h['every_update']:.2f}",
              "–" if not h["updates"] else f"{h['within_update']:.2f} ({h['updates']})",
              "–" if not h["puzzles"] else f"{100 * h['higher_when_right']:.0f} % of {h['puzzles']}"]
             for s, h in held.items()]  # –: no right (or no wrong) candidate to compare
for row in held_rows:
    print(" · ".join(f"{c}: {v}" for c, v in zip(held_cols, row)))

# %% [markdown]
# The three claims, each decided by the interval of its effect beside the paper's effect.

# %%
decided = [
    nb.claim("gamma.search_below_baseline",
             f"mean γ before the solve {phase_iv['outer']['search'].num('.2f')} vs 1 − β = {base:.2f}", effect=below),
    nb.claim("gamma.jump_at_solve", f"before the solve {po['search']:.2f} → at the solve {po['solve']:.2f} → after "
             f"{po['after']:.2f} (mean over seeds)", effect=jump),
    nb.claim("gamma.score_tracks_correctness", f"{medians}; AUROC right against wrong candidates {auroc}",
             effect=separation, digits=2),
]
text = (f"At profile **{profile}** ({n_puzzles} puzzles, {seed_note}; solved "
        f"{' / '.join(str(solved[s]) for s in seed_list)}), the outer-axis step size averages "
        f"{po['search']:.2f} in the {before} updates before the first solve, {po['solve']:.2f} at the solving update "
        f"and {po['after']:.2f} from {settle} to {3 * settle} updates after it; the equal-weight baseline of the "
        f"learned β is {base:.2f}; never-solved puzzles average {po['unsolved']:.2f} (means over seeds). The paper "
        f"reports 0.40, 0.91 and 0.56 (baseline 0.56). The content score, pooled over seeds: {medians}; its AUROC for "
        f"right against wrong candidates is {auroc} (0.5: it does not tell them apart). Intervals: 95 %, "
        f"{next((iv for iv in [*phase_iv['outer'].values(), separation] if iv.seeds), separation).describe(1.0, '')}; "
        "each claim is decided by its effect's interval beside the paper's effect (the rule: "
        "`infiloop/analysis/intervals.py`, in the report).")
print(text)

# %%
figures = [{"path": fig_gamma, "caption": "Mean γ_t of both axes aligned to the first solve."},
           {"path": fig_score, "caption": "Median content score s_t against the wrong cells of the candidate z_t it "
            "scores."}]
if logged:
    figures.append({"path": fig_train, "caption": "The connection during training (training log): |q|, β, mean γ, "
                    "the raw content score with its spread over cells, the share at the clip and the score's rank "
                    "correlation with the candidate's wrong cells."})
nb.finish(text, figures=figures,
          tables=[nb.table("Mean γ by phase", phase_cols, phase_rows),
                  nb.table("The content score's separation by seed", held_cols, held_rows)], claims=decided)
