"""One evaluation request (``evaluation.EvalRequest``) for ``Run.evaluate``, its cache key and ``evaluation.evaluate``:
every cache file keeps the name the three long signatures gave it before the request existed.

The reference below is the code of commit a428252 (``Run._evaluate_key``, ``_eval_path``, ``_limit``, ``_select``,
``_precision_arg`` and ``_scoring_args``), copied unchanged but for ``self`` -> ``run``; the requests are every
distinct argument set of a trajectory evaluation the notebooks declared at every profile (on 7349248), and each
option on its own and all at once. The runs are stand-ins (a run folder and its ``eval`` settings, a synthetic test
set): a key reads nothing else of a run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from infiloop.errors import UsageError
from infiloop.evaluation import PRECISIONS, PUZZLE_IDS, TRAJECTORY_VERSION, EvalRequest
from infiloop.experiments.store.runs import Run
from infiloop.tasks.base import TaskData

# ------------------------------------------------------------------------------ the reference (commit a428252)
WEIGHT_CHOICES = ("auto", "ema", "last", "best")


def _precision_arg(precision: str) -> dict:
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return {} if precision == "auto" else {"precision": precision}


def _scoring_args(weights: str, puzzle_ids: str) -> dict:
    if weights not in WEIGHT_CHOICES:
        raise UsageError(f"weights must be one of {', '.join(WEIGHT_CHOICES)}, got {weights!r}")
    if puzzle_ids not in PUZZLE_IDS:
        raise UsageError(f"puzzle_ids must be one of {', '.join(PUZZLE_IDS)}, got {puzzle_ids!r}")
    return {**({} if weights == "auto" else {"weights": weights}),
            **({} if puzzle_ids == "own" else {"puzzle_ids": puzzle_ids})}


def _eval_path(run, kind: str, args: dict, data, data_file: str | None) -> Path:
    ident = {"kind": kind, **args, "data": data_file or "profile-test", "n": len(data) if data else None,
             "version": TRAJECTORY_VERSION}
    if data_file:
        ident["data_sha"] = hashlib.sha256(Path(data_file).read_bytes()).hexdigest()[:16]
    h = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    return run.dir / "eval" / f"{kind}-{h}.npz"


def _limit(run, limit, data):
    return run.config["eval"]["limit"] if limit is None and data is None else limit


def _select(run, data, limit):
    if limit is not None and limit < 1:
        raise UsageError(f"limit: expected a number of puzzles >= 1, got {limit}")
    data = run.test_data() if data is None else data
    if limit is not None and limit < len(data):
        data = data.subset(slice(0, limit))
    return data


def reference_key(run, updates=None, every=None, limit=None, data=None, data_file=None, per_token=False,
                  snapshots=(), puzzles=(), precision="auto", weights="auto", puzzle_ids="own", test_set="test"):
    ev = run.config["eval"]
    updates = ev["updates"] if updates is None else updates
    every = ev["every"] if every is None else every
    limit = _limit(run, limit, data)
    if data is None and test_set != "test":
        data = run.test_data(test_set)
    data = _select(run, data, limit)
    args = {"updates": updates, "every": every, "limit": limit, "per_token": per_token,
            "snapshots": sorted(int(s) for s in snapshots), **_precision_arg(precision),
            **_scoring_args(weights, puzzle_ids), **({} if test_set == "test" else {"test_set": test_set})}
    if puzzles:
        puzzles = [int(p) for p in puzzles]
        if not all(0 <= p < len(data) for p in puzzles):
            raise ValueError(f"puzzles {puzzles} must index the {len(data)} evaluated test puzzles")
        data = data.subset(puzzles)
        args["puzzles"] = puzzles
    return args, data, _eval_path(run, "traj", args, data, data_file)


# ------------------------------------------------------------------------------ the requests
# Every distinct argument set of a trajectory evaluation the notebooks declared at every profile (smoke, quick,
# tiny, search, overthink, gpu, paper; manifest.needs at each notebook's defaults) on 2026-12-05 (commit 7349248).
DECLARED: list[dict] = [
    {"every": 1, "limit": None, "snapshots": (16, 32), "updates": 240},
    {"every": 1, "limit": None, "snapshots": (16, 32), "updates": 960},
    {"every": 1, "limit": None, "snapshots": (36, 72), "updates": 960},
    {"every": 1, "limit": None, "snapshots": (4, 8), "updates": 120},
    {"every": 1, "limit": None, "snapshots": (48, 96), "updates": 960},
    {"every": 1, "limit": None, "snapshots": (8, 16), "updates": 24},
    {"every": 1, "limit": None, "test_set": "test_10", "updates": 24},
    {"every": 1, "limit": None, "test_set": "test_16", "updates": 120},
    {"every": 1, "limit": None, "test_set": "test_20", "updates": 24},
    {"every": 1, "limit": None, "test_set": "test_24", "updates": 120},
    {"every": 1, "limit": None, "test_set": "test_32", "updates": 120},
    {"every": 1, "limit": None, "test_set": "test_40", "updates": 24},
    {"every": 1, "limit": None, "test_set": "valid", "updates": 120},
    {"every": 1, "limit": None, "test_set": "valid", "updates": 240},
    {"every": 1, "limit": None, "test_set": "valid", "updates": 24},
    {"every": 1, "limit": None, "test_set": "valid", "updates": 960}, {"every": 1, "limit": None, "updates": 171},
    {"every": 1, "limit": None, "updates": 384}, {"every": 1, "limit": None, "updates": 43},
    {"every": 1, "limit": None, "updates": 512}, {"every": 1, "limit": None, "updates": 85},
    {"every": 16, "limit": 104, "puzzle_ids": "blank", "snapshots": (16,), "updates": 16},
    {"every": 16, "limit": 104, "puzzle_ids": "random", "snapshots": (16,), "updates": 16},
    {"every": 16, "limit": 104, "snapshots": (16,), "updates": 16},
    {"every": 16, "limit": 136, "puzzle_ids": "blank", "snapshots": (16,), "updates": 16},
    {"every": 16, "limit": 136, "puzzle_ids": "random", "snapshots": (16,), "updates": 16},
    {"every": 16, "limit": 136, "snapshots": (16,), "updates": 16}, {"every": 16, "limit": None, "updates": 16},
    {"every": 36, "limit": None, "updates": 36}, {"every": 4, "limit": None, "updates": 4},
    {"every": 48, "limit": 167000, "puzzle_ids": "blank", "snapshots": (48,), "updates": 48},
    {"every": 48, "limit": 167000, "puzzle_ids": "random", "snapshots": (48,), "updates": 48},
    {"every": 48, "limit": 167000, "snapshots": (48,), "updates": 48},
    {"every": 48, "limit": 419000, "puzzle_ids": "blank", "snapshots": (48,), "updates": 48},
    {"every": 48, "limit": 419000, "puzzle_ids": "random", "snapshots": (48,), "updates": 48},
    {"every": 48, "limit": 419000, "snapshots": (48,), "updates": 48}, {"every": 48, "limit": None, "updates": 48},
    {"every": 8, "limit": None, "updates": 8},
]
# each option on its own, several at once, and the forms the command line and the animation use
OPTIONS = [
    {}, {"updates": 16, "every": 1}, {"updates": 7}, {"every": 2, "updates": 8}, {"limit": 10}, {"limit": 500},
    {"per_token": True}, {"snapshots": (9, 3)}, {"snapshots": [4]}, {"puzzles": (5, 2, 7)}, {"puzzles": [0]},
    *({"precision": p} for p in PRECISIONS), *({"weights": w} for w in WEIGHT_CHOICES),
    *({"puzzle_ids": p} for p in PUZZLE_IDS), {"test_set": "valid"}, {"test_set": "test_12"},
    {"updates": 12, "every": 3, "limit": 20, "per_token": True, "snapshots": (12, 3), "puzzles": (4, 1),
     "precision": "bf16", "weights": "best", "puzzle_ids": "random", "test_set": "test_12"},
    {"updates": 16, "every": 1, "limit": 16, "puzzles": (3,), "snapshots": tuple(range(1, 17))},
]
BAD = [{"precision": "half"}, {"weights": "newest"}, {"puzzle_ids": "none"}, {"limit": 0},
       {"puzzles": (200,)}, {"limit": 8, "puzzles": (8,)}]
ROWS = 120  # of each stand-in test set


def _test_set(name: str, rows: int = ROWS) -> TaskData:
    x = np.arange(rows * 4).reshape(rows, 4) % 5
    return TaskData(f"stand-in-{name}", x, x, (2, 2), 5)


@pytest.fixture(params=[None, 64, 1000], ids=lambda x: f"profile-limit-{x}")
def run(request, tmp_path, monkeypatch, native_mode) -> Run:
    """A run whose profile evaluates 16 updates, every update, ``limit`` puzzles; its test sets are stand-ins. Its
    cache files named natively: the names pinned here were cached before the numeric mode existed."""
    monkeypatch.setattr(Run, "test_data", lambda self, test_set="test": _test_set(test_set))
    return Run(tmp_path / "sudoku" / "infiloop-smoke-0123456789",
               {"task": "sudoku", "eval": {"updates": 16, "every": 1, "limit": request.param, "batch_size": 32}})


def _same(run: Run, args: dict, **given) -> None:
    """The keyword form (as the notebooks' declarations and the scheduler call it) and the request name the file the
    reference named, and select the same puzzles."""
    want_args, want_data, want_path = reference_key(run, **args, **given)
    for got_args, got_data, got_path in (run.eval_key("evaluate", {**args, **given}),
                                         run._evaluate_key(EvalRequest(**args), **given)):
        assert (got_args, got_path.name) == (want_args, want_path.name), args
        assert (got_data.name, len(got_data)) == (want_data.name, len(want_data))
        assert np.array_equal(got_data.inputs, want_data.inputs)


@pytest.mark.parametrize("args", DECLARED + OPTIONS, ids=lambda a: json.dumps(a, sort_keys=True))
def test_every_cache_file_keeps_its_name(run, args):
    _same(run, args)


def test_an_evaluation_in_the_reproducible_mode_is_another_file(run, monkeypatch):
    """The numeric mode (infiloop/numeric.py) names an evaluation's file beside its arguments, so that one computed
    in the reproducible mode is never read as the native one cached before, nor the reverse; native: as cached."""
    from infiloop import numeric

    native = run.eval_cache_path("evaluate", {"updates": 8})
    monkeypatch.setenv(numeric.ENV, "reproducible")
    assert run.eval_cache_path("evaluate", {"updates": 8}) != native


@pytest.mark.parametrize("args", OPTIONS, ids=lambda a: json.dumps(a, sort_keys=True))
def test_a_users_file_keeps_its_cache_file_name(run, args, tmp_path):
    """A user's test file (``--data``): its path and the hash of its bytes name the file, all its puzzles by default."""
    if args.get("test_set", "test") != "test":
        pytest.skip("a user's file is its own test set")
    data_file = tmp_path / "mine.csv"
    data_file.write_text("a stand-in user's file\n")
    _same(run, args, data=_test_set("mine", 90), data_file=str(data_file))
    _same(run, args, data=_test_set("mine", 90))


@pytest.mark.parametrize("args", BAD, ids=lambda a: json.dumps(a, sort_keys=True))
def test_a_bad_request_is_refused_as_before(run, args):
    with pytest.raises((UsageError, ValueError)) as want:
        reference_key(run, **args)
    with pytest.raises(want.type) as got:
        run.eval_key("evaluate", args)
    assert str(got.value) == str(want.value)


def test_how_a_request_runs_names_no_file(run):
    """Batch size, device and progress bar change how an evaluation runs, not what it records."""
    plain = run.eval_cache_path("evaluate", {"updates": 8})
    how = {"batch_size": 7, "device": "cuda", "progress": False}
    assert run.eval_cache_path("evaluate", {"updates": 8, **how}) == plain
    assert run.eval_cache_path("evaluate", {"updates": 8, "every": 2}) != plain


def test_a_request_is_one_value_however_written():
    """A declaration read back from JSON (lists) and one written in code (tuples) are the same request: equal, with
    one hash, and ``of`` changes a request's fields or makes one of them."""
    from_json = EvalRequest(**json.loads('{"updates": 12, "snapshots": [9, 3], "puzzles": [4, 1]}'))
    in_code = EvalRequest(updates=12, snapshots=(9, 3), puzzles=(4, 1))
    assert from_json == in_code and hash(from_json) == hash(in_code)
    assert EvalRequest.of(in_code, limit=5) == EvalRequest(12, limit=5, snapshots=(9, 3), puzzles=(4, 1))
    assert EvalRequest.of(updates=12) == EvalRequest(12) and in_code.limit is None
    with pytest.raises(TypeError):
        EvalRequest.of(in_code, update=3)  # a misspelt field is refused, not ignored
    with pytest.raises(TypeError, match="fields as keywords"):
        EvalRequest.of(12)  # the updates of a call written before the request existed
    assert EvalRequest(4).cache_args() == {"updates": 4, "every": None, "limit": None, "per_token": False,
                                           "snapshots": []}
