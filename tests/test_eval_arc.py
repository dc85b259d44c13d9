"""``python -m infiloop eval RUN`` on an ARC run: exact accuracy, pass@1 and pass@2 by depth and the tasks
pass@2 solves, read from prediction snapshots in the cached evaluation (a second call evaluates nothing);
Sudoku and Maze keep their table (infiloop/cli.py, analysis.pass_depths / arc_pass_by_depth)."""

import numpy as np
import pytest

from infiloop.analysis import trajectories as analysis
from infiloop.cli import main
from infiloop.evaluation import load_trajectory, save_trajectory
from infiloop.experiments.store import eval_cache
from infiloop.experiments.store import runs as experiments
from infiloop.tasks import attempts_from_predictions, solutions_from_data, vote_pass_at_k


@pytest.fixture(scope="module")
def arc_run(tmp_path_factory):
    """A smoke ARC-AGI-1 run (4 evaluation tasks in 2 views each), trained in seconds."""
    return experiments.get_run("arc1", "infiloop", "smoke", root=tmp_path_factory.mktemp("arc-runs"), progress=False)


def run_eval(capsys, *argv) -> tuple[list[str], dict[int, tuple[float, float, float]], str]:
    """(comment lines, {update: (exact_acc, pass@1, pass@2)}, cache file) printed by ``eval``."""
    assert main(["eval", *map(str, argv), "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    head = lines.index("update  layers  exact_acc  pass@1  pass@2")
    table = {}
    for ln in lines[head + 1:-2]:
        update, _, acc, p1, p2 = ln.split()
        table[int(update)] = (float(acc), *(np.nan if p == "-" else float(p) for p in (p1, p2)))
    return [ln for ln in lines if ln.startswith("#")], table, lines[-1]


def independent_pass(traj: dict, test, update: int, k: int):
    """pass@k straight from the snapshot: attempts mapped back, voted (tasks/voting.py)."""
    j = list(traj["snapshot_updates"]).index(update)
    row = list(traj["updates"]).index(update)
    conf = 1 / (1 + np.exp(-traj["q_halt"][row].astype(np.float64)))
    return vote_pass_at_k(attempts_from_predictions(test, traj["pred_snapshots"][j], conf, run="check"),
                          solutions_from_data(test), k=k)


def test_arc_eval_prints_pass_at_k_from_the_cached_snapshots(arc_run, capsys, monkeypatch):
    notes, table, path = run_eval(capsys, arc_run.dir)
    test = arc_run.test_data()
    traj = load_trajectory(path)
    depths = [int(u) for u in traj["updates"]]
    assert sorted(table) == depths and [int(u) for u in traj["snapshot_updates"]] == depths  # 24 <= 32 depths
    assert traj["correct"].shape[1] == len(test)  # every test row: pass@k is over whole tasks
    assert f"on {len(test)} rows of the profile's test set (4 tasks, each test input in 2 views" in notes[0]

    # Make the answers known: at the last depth task A is right in every view; task B is wrong in view 0
    # (with the higher halting confidence) and right in view 1, so pass@1 misses it and pass@2 solves it.
    sols = solutions_from_data(test)
    names, m = test.info["tasks"], test.meta
    single = [t for t in sols if len(sols[t]) == 1][:2]
    rows = {t: np.flatnonzero(np.asarray([names[i] for i in m["task"]]) == t) for t in single}
    last = depths[-1]
    pred, q = traj["pred_snapshots"][-1], traj["q_halt"][-1]
    a, b = rows[single[0]], rows[single[1]]
    pred[a] = test.labels[a]
    pred[b] = test.labels[b]
    wrong = pred[b[0]].copy()
    wrong[0] = 2 + (wrong[0] - 2 + 1) % 10  # another colour in the first cell: a well-formed, wrong grid
    pred[b[0]] = wrong
    q[b[0]], q[b[1]] = 5.0, -5.0
    save_trajectory(path, traj)  # the cache now holds these answers

    monkeypatch.setattr(eval_cache, "evaluate", lambda *a, **k: pytest.fail("evaluated again"))
    monkeypatch.setattr(experiments.Run, "load_model", lambda *a, **k: pytest.fail("model loaded again"))
    notes, table, again = run_eval(capsys, arc_run.dir)
    assert again == path
    for u in depths:
        acc, p1, p2 = table[u]
        assert p2 >= p1
        assert (p1, p2) == pytest.approx((independent_pass(traj, test, u, 1).score,
                                          independent_pass(traj, test, u, 2).score), abs=5e-5)
        assert acc == pytest.approx(traj["correct"][depths.index(u)].mean(), abs=5e-5)
    assert table[last][1:] == pytest.approx((1 / len(sols), 2 / len(sols)), abs=5e-5)
    assert notes[-1] == f"# pass@2 at update {last}: 2 of {len(sols)} tasks solved: {', '.join(sorted(single))}"

    # a limit that cuts the test set says so; its evaluation is a new cache file
    monkeypatch.undo()
    notes, table, cut = run_eval(capsys, arc_run.dir, "--limit", 5, "--updates", 8, "--every", 2)
    assert cut != path and sorted(table) == [2, 4, 6, 8]
    assert any(n.startswith("# the limit cuts the test set: task ") for n in notes)


def test_pass_depths_are_bounded():
    assert analysis.pass_depths(24, 1, 10, 36) == tuple(range(1, 25))
    many = analysis.pass_depths(960, 1, 150, 100)
    assert len(many) == analysis.PASS_DEPTHS and many[0] == 1 and many[-1] == 960
    tens = analysis.pass_depths(960, 10, 10, 36)
    assert tens[-1] == 960 and all(u % 10 == 0 for u in tens)
    huge = analysis.pass_depths(960, 1, 420_000, 900)  # ARC at the paper's scale: about 380 MB a snapshot
    assert huge[-1] == 960 and len(huge) * 420_000 * 900 <= analysis.PASS_SNAPSHOT_BYTES
    assert analysis.pass_depths(8, 1, 10**9, 900) == (8,)  # always the last depth


def test_sudoku_eval_keeps_its_table(smoke_run, capsys):
    assert main(["eval", str(smoke_run.dir), "--updates", "4", "--limit", "8", "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("# exact accuracy by depth on 8 puzzles of the profile's test set")
    assert lines[1] == "update  layers  exact_acc" and len(lines) == 2 + 4 + 1
    assert lines[2].split()[0] == "1" and len(lines[2].split()) == 3 and lines[-1].endswith(".npz")
