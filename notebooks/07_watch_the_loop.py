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
# # Watch the loop: the measured trajectories, animated
#
# The paper's repository explains InfiLoop with animated GIFs (the carry-last and InfiLoop state over loop
# steps, accuracy racing against depth, an ARC-AGI-2 (Abstraction and Reasoning Corpus) grid being solved) drawn from
# illustrative numbers. Here every frame is what this run's models did, as the evaluation recorded it:
#
# 1. **one puzzle, two connections**: the board decoded from the answer state at each outer update under
#    carry-last (the rule of TRM, the Tiny Recursive Model) and InfiLoop, cells coloured given / correct / wrong, with
#    the outer axis's step size γ_t (eq. 5) and the content score s_t of the candidate, and markers at the first solve
#    and at every loss of a solved board;
# 2. **the depth race**: exact accuracy of every connection against outer updates;
# 3. **ARC**: the predicted output grid of one task per update, where an ARC run exists.
#
# It trains nothing new: the models are the main table's, the race reads notebook 02's cached trajectories,
# and the boards come from a cached evaluation of the chosen puzzle alone with a prediction snapshot at every
# frame. Frames: every outer update up to the training depth, then updates log-spaced to `max_updates`
# (each frame says so), at most `max_frames` whatever the depth.

# %% tags=["parameters"]
profile = "quick"  # smoke | quick | tiny | search | gpu | paper (infiloop/experiments/settings/profiles.py)
device = "cpu"  # torch device
seed = 0  # training seed of the models (the main table's)
task = "sudoku"  # sudoku | maze: the task of the puzzle and race animations
puzzle = -1  # test puzzle (index among the evaluated); -1: one carry-last solves then loses, else InfiLoop's hardest
fps = 8.0  # frames per second of the animations
max_updates = 0  # last outer update shown (0: the profile's depth; with limit 0 it reads notebook 02's trajectories)
max_frames = 100  # frames per animation at most, whatever max_updates
limit = 0  # test puzzles of the race (0: the profile's default, as notebook 02)
arc = "auto"  # arc1 | arc2 | auto (the first with a trained InfiLoop run) | none
arc_task = ""  # ARC task id to animate ("": the test input InfiLoop gets closest to)

# %%
from IPython.display import display

from infiloop.analysis import animation, plotting
from infiloop.experiments.notebooks.helper import Notebook, check, find_arc_runs, pct
from infiloop.experiments.settings.recipes import MAIN_RECIPES

nb = Notebook("07_watch_the_loop", "Watch the loop", profile, device, seed)
check("task", task, str, lambda v: v in ("sudoku", "maze"), "sudoku or maze")
check("puzzle", puzzle, int, lambda v: v >= -1, "an integer >= 0, or -1 for the automatic choice")
check("fps", fps, (int, float), lambda v: 0 < v <= 50, "a number of frames per second in (0, 50]")
check("max_updates", max_updates, int, lambda v: v >= 0, "an integer >= 0 (0: the profile's depth)")
check("max_frames", max_frames, int, lambda v: 2 <= v <= 1000, "an integer in [2, 1000]")
check("limit", limit, int, lambda v: v >= 0, "an integer >= 0")
check("arc", arc, str, lambda v: v in ("arc1", "arc2", "auto", "none"), "arc1, arc2, auto or none")
check("arc_task", arc_task, str, expected="an ARC task id, or '' for the automatic choice")
figs = plotting.figure_dir(profile)

# %% [markdown]
# ## The models and their recorded trajectories

# %%
need = nb.needs(globals())  # the runs and evaluations this notebook reads (infiloop/experiments/notebooks/manifest.py)
max_updates = need.params["max_updates"]  # 0 became the profile's depth
runs = {r: need.run(r, device) for r in MAIN_RECIPES}
depth = runs["infiloop"].training_depth
trajs = {r: need.result(f"depth/{r}", device) for r in MAIN_RECIPES}  # notebook 02's when the parameters agree
n_puzzles = trajs["infiloop"]["correct"].shape[1]
frames = animation.frame_updates(depth, max_updates, max_frames)
print(f"training depth {depth}; {n_puzzles} test puzzles; {animation.frame_note(frames, depth)}")

# %% [markdown]
# ## 1. One puzzle, two connections

# %%
if puzzle >= 0:
    check("puzzle", puzzle, int, lambda v: v < n_puzzles, f"an index below {n_puzzles} (the evaluated puzzles)")
    chosen, why = puzzle, "chosen by the puzzle parameter"
else:
    chosen, why = animation.choose_puzzle(trajs["carry_last"], trajs["infiloop"])
test = runs["infiloop"].test_data()
blanks = int(trajs["infiloop"]["blanks"][chosen])
boards = {r: animation.record(runs[r], chosen, frames, limit=limit or None, device=device)
          for r in ("carry_last", "infiloop")}
events = {r: animation.events(b) for r, b in boards.items()}
differs = sum(int((boards[r]["correct"][:, 0] != trajs[r]["correct"][:, chosen]).sum()) for r in boards)
anim_puzzle = animation.render_puzzle(boards, test.inputs[chosen], test.labels[chosen], test.grid, test.box, task,
                                      depth, figs / "watch_puzzle.gif", fps, profile,
                                      title=f"{task} puzzle {chosen}, {blanks} cells to fill")
print(f"puzzle {chosen} ({blanks} cells to fill): {why}")
for r, ev in events.items():
    print(f"  {plotting.LABELS[r]}: {animation.event_text(*ev)}")
agreement = (f"differs from the batch evaluation's at {differs} update(s) (float rounding can depend on the batch)"
             if differs else "matches the batch evaluation's at every update")
print(f"evaluated alone, this puzzle's solved/unsolved record {agreement}")
print(anim_puzzle.describe())
display(animation.show(anim_puzzle))

# %% [markdown]
# ## 2. The depth race

# %%
anim_race = animation.render_race(trajs, depth, figs / "watch_race.gif", fps, profile, frames=frames)
print(anim_race.describe())
display(animation.show(anim_race))

# %% [markdown]
# ## 3. ARC: one task's predicted output per update
# Only where an ARC InfiLoop model of this profile and seed is already trained (notebook 01 with
# `-p tasks sudoku,arc1` trains one); nothing is trained here.

# %%
anim_arc = None
arc_set, arc_runs, arc_note = find_arc_runs(profile, seed, arc)
if arc_set:
    arc_test = arc_runs["infiloop"].test_data()
    arc_depth = arc_runs["infiloop"].training_depth
    at_depth, _ = arc_runs["infiloop"].evaluate(updates=arc_depth, every=arc_depth, limit=len(arc_test),
                                                snapshots=(arc_depth,), device=device)  # notebook 01's evaluation
    row, arc_id, arc_why = animation.choose_arc_row(at_depth, arc_test, arc_task)
    arc_frames = animation.frame_updates(arc_depth, max_updates, max_frames)
    arc_boards = {r: animation.record(run, row, arc_frames, limit=len(arc_test), device=device)
                  for r, run in arc_runs.items()}
    anim_arc = animation.render_arc(arc_boards, arc_test.inputs[row], arc_test.labels[row], arc_test.grid[0],
                                    arc_depth, figs / "watch_arc.gif", fps, profile, title=f"{arc_set} task {arc_id}")
    arc_note = f"{arc_set} task {arc_id} ({arc_why}): " + "; ".join(
        f"{plotting.LABELS[r]} {animation.event_text(*animation.events(b))}" for r, b in arc_boards.items())
    print(anim_arc.describe())
print(arc_note)
if anim_arc is not None:
    display(animation.show(anim_arc))

# %% [markdown]
# ## What the animations show

# %%
anims = [a for a in (anim_puzzle, anim_race, anim_arc) if a is not None]
acc = {r: (float(t["correct"][depth - 1].mean()) if depth <= max_updates else float("nan"),
           float(t["correct"][-1].mean())) for r, t in trajs.items()}
story = "; ".join(f"{plotting.LABELS[r]}: {animation.event_text(*ev)}" for r, ev in events.items())
race = ", ".join(f"{plotting.LABELS[r]} {pct(a)} at the training depth ({depth}), {pct(b)} at {max_updates}"
                 for r, (a, b) in acc.items())
text = (f"At profile **{profile}**, puzzle {chosen} of the {task} test set ({blanks} cells to fill; {why}). {story}. "
        f"Race over {n_puzzles} puzzles: {race}. ARC: {arc_note}. Frames: {animation.frame_note(frames, depth)}. "
        "Every board is the model's prediction recorded at that update, from an evaluation of the chosen puzzle "
        f"alone; its solved/unsolved record differs from the batch evaluation's at {differs} update(s).")
print(text)
rows = [[a.path.name, a.frames, round(a.nbytes / 1e6, 2), round(a.seconds, 1)] for a in anims]
captions = {"watch_puzzle.gif": f"Puzzle {chosen}, carry-last and InfiLoop side by side: the decoded board per outer "
                                "update (grey given, green filled in right, orange wrong), γ_t and s_t of the outer "
                                "axis, first solve (dot) and losses (cross).",
            "watch_race.gif": "Exact accuracy of each connection against outer updates, the training depth dashed.",
            "watch_arc.gif": "The predicted output grid per outer update beside the input and target (wrong cells "
                             "outlined in red)."}
nb.finish(text, figures=[{"path": a.path, "caption": captions[a.path.name]} for a in anims],
          tables=[nb.table("Animations", ["file", "frames", "size (MB)", "render time (s)"], rows,
                           note=animation.frame_note(frames, depth))], claims=[])
