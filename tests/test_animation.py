"""Animations of measured trajectories (infiloop.analysis.animation, notebook 07), at the smoke profile.

Every frame of each written GIF is decoded with Pillow; the frame count must be the number of frame updates,
and the boards of the first and the last frame, read back from the cells' pixels, must be the boards the
trajectory recorded at those updates. Runs, evaluations and animations are written into temporary folders
(the smoke data sets are built into the shared data cache, as in the other tests)."""

import numpy as np
import pytest

from infiloop.analysis import animation as A
from infiloop.experiments.notebooks.helper import find_arc_runs
from infiloop.experiments.store.runs import get_run

LAST, MAX_FRAMES, LIMIT = 48, 20, 16


@pytest.fixture(scope="module")
def sudoku(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    runs = {r: get_run("sudoku", r, "smoke", root=root, progress=False) for r in ("carry_last", "infiloop")}
    depth = runs["infiloop"].training_depth
    trajs = {r: run.evaluate(updates=LAST, every=1, limit=LIMIT, progress=False)[0] for r, run in runs.items()}
    puzzle, _ = A.choose_puzzle(trajs["carry_last"], trajs["infiloop"])
    frames = A.frame_updates(depth, LAST, MAX_FRAMES)
    boards = {r: A.record(run, puzzle, frames, limit=LIMIT) for r, run in runs.items()}
    return runs, trajs, puzzle, frames, boards, depth


def test_frame_updates_every_update_to_the_training_depth_then_log_spaced():
    f = A.frame_updates(16, 960, 100)
    assert list(f[:16]) == list(range(1, 17)) and f[-1] == 960 and len(f) <= 100
    assert np.all(np.diff(f) > 0) and np.all(np.diff(np.log(f[16:])) > 0)
    assert "every outer update 1–" in A.frame_note(f, 16) and "log-spaced to 960" in A.frame_note(f, 16)
    for depth, last in ((48, 24_960), (16, 10**6), (500, 10**5), (3, 2)):  # bounded at any depth
        f = A.frame_updates(depth, last, 100)
        assert 1 <= len(f) <= 100 and f[0] == 1 and f[-1] == last and np.all(np.diff(f) > 0)
    assert list(A.frame_updates(16, 10)) == list(range(1, 11))
    assert "log-spaced from 1" in A.frame_note(A.frame_updates(500, 10**5, 100), 500)
    with pytest.raises(ValueError):
        A.frame_updates(16, 0)


def test_cell_classes_and_events():
    inputs = np.array([3, 1, 1, 0])  # a given 2, two blanks, a cell without a label
    labels = np.array([3, 4, 5, 0])
    assert list(A.cell_classes(np.array([3, 4, 2, 7]), inputs, labels)) == [A.GIVEN, A.CORRECT, A.WRONG, A.NO_LABEL]
    assert A.cell_classes(np.array([2, 4, 5, 0]), inputs, labels)[0] == A.WRONG  # a given predicted wrong
    traj = {"correct": np.array([[0], [1], [1], [0], [1], [0]], bool), "updates": np.arange(1, 7),
            "first_solve": np.array([2])}
    assert A.events(traj) == (2, [4, 6])
    assert A.event_text(2, [4, 6]) == "first solved at update 2, lost at 4, 6"
    assert A.event_text(-1, []) == "never solved"


def test_choose_puzzle_prefers_a_lost_board():
    correct = np.array([[0, 1, 0], [1, 1, 0], [0, 1, 1]], bool)  # [update, puzzle]
    carry = {"updates": np.arange(1, 4), "correct": correct, "first_solve": np.array([2, 1, 3])}
    inf = {"correct": np.ones((3, 3), bool), "blanks": np.array([5, 9, 7]), "first_solve": np.array([1, 1, 2]),
           "wrong_cells": np.zeros((3, 3))}
    assert A.choose_puzzle(carry, inf)[0] == 0  # solved at 2, lost at 3
    carry["correct"][2, 0] = True
    p, why = A.choose_puzzle(carry, inf)
    assert p == 1 and "hardest" in why  # no loss: most blanks among InfiLoop's solved puzzles


def test_one_puzzle_is_recorded_at_every_frame(sudoku):
    runs, trajs, puzzle, frames, boards, _ = sudoku
    for r, b in boards.items():
        assert list(b["snapshot_updates"]) == list(frames) and b["pred_snapshots"].shape[1] == 1
        assert b["correct"].shape == (LAST, 1)
        assert np.array_equal(b["blanks"], trajs[r]["blanks"][[puzzle]])
    other = (puzzle + 1) % LIMIT
    _, p1 = runs["infiloop"].evaluate(updates=LAST, every=1, limit=LIMIT, snapshots=tuple(frames), puzzles=(puzzle,))
    _, p2 = runs["infiloop"].evaluate(updates=LAST, every=1, limit=LIMIT, snapshots=tuple(frames), puzzles=(other,),
                                      progress=False)
    assert p1 != p2  # the cache is keyed by the puzzles
    with pytest.raises(ValueError, match="must index"):
        runs["infiloop"].evaluate(updates=LAST, limit=LIMIT, puzzles=(LIMIT,))


def _check_frames(anim, n_frames):
    frames = A.read_frames(anim.path)
    assert len(frames) == anim.frames == n_frames
    assert len({f.shape for f in frames}) == 1
    assert anim.nbytes == anim.path.stat().st_size and anim.path.read_bytes()[:6] == b"GIF89a"
    return frames


def test_puzzle_animation_shows_the_recorded_boards(sudoku, tmp_path):
    runs, _, puzzle, frames, boards, depth = sudoku
    test = runs["infiloop"].test_data()
    anim = A.render_puzzle(boards, test.inputs[puzzle], test.labels[puzzle], test.grid, test.box, "sudoku", depth,
                           tmp_path / "watch_puzzle.gif", fps=10, profile="smoke", video=False)
    decoded = _check_frames(anim, len(frames))
    assert list(anim.updates) == list(frames) and sorted(p.name for p in tmp_path.iterdir()) == ["watch_puzzle.gif"]
    for r, b in boards.items():
        for k in (0, -1):
            want = A.cell_classes(b["pred_snapshots"][k, 0], test.inputs[puzzle], test.labels[puzzle])
            got = A.read_board(decoded[k], anim.samples[r], A.CLASS_COLORS)
            assert np.array_equal(got, want), (r, k, got, want)



def _ink(frame: np.ndarray, samples: tuple, k: int) -> np.ndarray:
    """The pixels of cell ``k`` of a decoded frame that differ from its fill (read where ``samples`` read it, clear of
    the symbol), the cell's lines left out: its symbol's ink, [N, 3]."""
    xy = samples[0]
    cell = int(xy[1, 0] - xy[0, 0])
    x, y = xy[k] - int(0.22 * cell)
    fill = frame[xy[k, 1], xy[k, 0], :3].astype(int)
    block = frame[y + 3:y + cell - 3, x + 3:x + cell - 3, :3].reshape(-1, 3).astype(int)
    return block[np.abs(block - fill).sum(1) > 150]


def test_a_wrong_cell_shows_its_predicted_digit_in_the_wrong_ink(sudoku, tmp_path):
    """watch_puzzle.gif drew a wrong cell with no digit: a wrong cell shows the digit predicted in dark red, a
    prediction that is no digit (the blank token) a "?", and a right cell its digit in black."""
    runs, _, puzzle, frames, boards, depth = sudoku
    test = runs["infiloop"].test_data()
    inputs, labels = (np.asarray(x).astype(np.int64) for x in (test.inputs[puzzle], test.labels[puzzle]))
    a, b, right = np.flatnonzero(inputs != labels)[:3]  # cells the model fills
    boards = {r: {**t, "pred_snapshots": t["pred_snapshots"].copy()} for r, t in boards.items()}
    last = boards["infiloop"]["pred_snapshots"][-1, 0]
    last[:] = labels
    last[a] = 2 + (labels[a] - 2 + 1) % test.grid[0]  # another digit
    last[b] = 1  # the blank token: no digit to draw
    anim = A.render_puzzle(boards, test.inputs[puzzle], test.labels[puzzle], test.grid, test.box, "sudoku", depth,
                           tmp_path / "watch_puzzle.gif", fps=10, profile="smoke", video=False)
    frame = A.read_frames(anim.path)[-1]
    got = A.read_board(frame, anim.samples["infiloop"], A.CLASS_COLORS)
    assert got[a] == got[b] == A.WRONG and got[right] == A.CORRECT
    for k in (a, b):  # a glyph in dark red, not an empty fill
        ink = _ink(frame, anim.samples["infiloop"], k)
        assert len(ink) > 20, (k, len(ink))
        assert ink[:, 0].mean() - ink[:, 1].mean() > 60, (k, ink.mean(0))
    ink = _ink(frame, anim.samples["infiloop"], right)
    assert len(ink) > 20 and ink.mean(0).max() < 90, ink.mean(0)  # black

def test_race_animation(sudoku, tmp_path):
    _, trajs, _, frames, _, depth = sudoku
    anim = A.render_race(trajs, depth, tmp_path / "watch_race.gif", profile="smoke", frames=frames, video=False)
    decoded = _check_frames(anim, len(frames))
    assert not np.array_equal(decoded[0], decoded[-1])


@pytest.mark.slow  # trains the smoke ARC model: about 35 s
def test_arc_animation_shows_the_recorded_grids(tmp_path_factory, tmp_path):
    root = tmp_path_factory.mktemp("arc_runs")
    assert find_arc_runs("smoke", 0, "auto", root=root)[0] == ""  # trains nothing
    run = get_run("arc1", "infiloop", "smoke", root=root, progress=False)
    name, found, _ = find_arc_runs("smoke", 0, "auto", root=root)
    assert name == "arc1" and set(found) == {"infiloop"}
    test, depth = run.test_data(), run.training_depth
    at_depth, _ = run.evaluate(updates=depth, every=depth, limit=len(test), snapshots=(depth,), progress=False)
    row, task_id, _ = A.choose_arc_row(at_depth, test)
    assert A.choose_arc_row(at_depth, test, task_id)[0] == row
    frames = A.frame_updates(depth, 24, 12)
    boards = {"infiloop": A.record(run, row, frames, limit=len(test))}
    anim = A.render_arc(boards, test.inputs[row], test.labels[row], test.grid[0], depth, tmp_path / "watch_arc.gif",
                        profile="smoke", video=False)
    decoded = _check_frames(anim, len(frames))
    xy, cells = anim.samples["infiloop"]
    assert len(cells) >= 4  # the target grid and its border
    for k in (0, -1):
        want = boards["infiloop"]["pred_snapshots"][k, 0][cells]
        assert np.array_equal(A.read_board(decoded[k], (xy, cells), A.ARC_COLORS), want), k


def test_notebook_07_reuses_the_main_tables_runs_and_notebook_02s_trajectories():
    from infiloop.experiments.notebooks import manifest

    n07 = manifest.needs("07", "smoke")
    assert {s.recipe for s in n07.runs.values()} == {"carry_last", "fprm", "infiloop"}
    without = {j.id for j in manifest.jobs(["01", "02", "03", "04", "05", "06"], "smoke")}
    assert {j.id for j in manifest.jobs(["01", "02", "03", "04", "05", "06", "07"], "smoke")} == without


def test_video_beside_the_gif_where_ffmpeg_exists(sudoku, tmp_path):
    """FFMpegWriter gets every frame at the GIF's size (a stand-in ffmpeg keeps the raw RGBA it is sent)."""
    import matplotlib as mpl
    from IPython.display import Image, Video

    _, trajs, _, frames, _, depth = sudoku
    fake = tmp_path / "ffmpeg"
    fake.write_text('#!/bin/sh\nfor last; do :; done\ncat > "$last"\n')
    fake.chmod(0o755)
    with mpl.rc_context({"animation.ffmpeg_path": str(fake)}):
        from infiloop.analysis.animation_canvas import ffmpeg_available

        assert ffmpeg_available()
        anim = A.render_race(trajs, depth, tmp_path / "race.gif", profile="smoke", frames=frames[:5])
    height, width, _ = A.read_frames(anim.path)[0].shape
    assert anim.video == tmp_path / "race.mp4" and anim.video.stat().st_size == 5 * width * height * 4
    assert isinstance(A.show(anim), Video)
    anim.video.unlink()
    assert isinstance(A.show(anim), Image)
