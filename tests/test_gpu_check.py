"""``benchmarks/gpu_check.py``, the device check: its dry run on the CPU (every section of the device run at a size
the CPU can do: bf16 autocast, a batch of 768, an Inductor compile, the Triton kernel under its interpreter), the
report written after every section, what the parts' logs say, and one ``error:`` line where CUDA is not usable.

Everything it writes goes to the test's temporary folder (``--out``); the run cache, data and results folders point
at a folder that must stay absent."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
PARTS = ["train_eager", "kernels", "step_speed", "evaluation", "model_overhead", "train_compiled"]
PILOT_CONNECTIONS = ("carry_last", "infiloop", "fprm")


def _env(tmp_path: Path) -> dict:
    elsewhere = tmp_path / "elsewhere"
    return dict(os.environ, **{f"INFILOOP_{k}": str(elsewhere / k.lower()) for k in ("RUNS", "DATA", "RESULTS",
                                                                                      "FIGURES")})


def _table(md: str) -> list[dict[str, str]]:
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:]]


def _check_training(parts: dict) -> None:
    """Eager: every connection at the gpu profile's batch (768) in bf16 autocast, uncompiled; compiled: InfiLoop
    through Inductor (a cold cache in the work folder), on the kernel's custom operator, no graph break."""
    eager = parts["train_eager"]["result"]
    assert set(eager["runs"]) == set(PILOT_CONNECTIONS) and eager["pilot_criteria"]
    # the kernels compiled before the timed runs, in a section of their own
    assert set(eager["warmup_s"]) == set(PILOT_CONNECTIONS) and all(s > 0 for s in eager["warmup_s"].values())
    labels = [s["label"] for s in eager["sections"]]
    assert labels.index("warm-up: the Triton kernels compiled, untimed") < min(
        i for i, label in enumerate(labels) if label.startswith("eager "))
    for run in eager["runs"].values():
        assert (run["batch"], run["precision"], run["compiled"]) == (768, "bf16", False)
        assert run["steps"] >= 2 and run["s_per_step"] > 0 and run["planned_s_per_step"] > 0
        assert len(run["curve"]) >= 2 and all({"step", "loss", "cell_acc"} <= set(c) for c in run["curve"])
    compiled = parts["train_compiled"]["result"]["runs"]["infiloop"]
    assert compiled["compiled"] and compiled["compile_error"] is None and compiled["compile_seconds"] > 0
    assert compiled["precision"] == "bf16" and compiled["s_per_step"] > 0
    assert set(compiled["kernels"].values()) == {"triton"}  # the path a GPU takes, under the interpreter
    assert compiled["dynamo"]["graph_breaks"] == 0 and compiled["dynamo"]["unique_graphs"] >= 1
    assert parts["train_compiled"]["result"]["inductor_cache"].endswith("inductor")


def _check_figures(parts: dict) -> None:
    """Every figure the device run records is in the dry run's JSON, with the right form."""
    kernels = parts["kernels"]["result"]
    assert kernels["cases"] and kernels["failed_checks"] == []
    for case in kernels["cases"]:
        assert case["passed"] and case["dtypes_equal"]
        for err in case["errors"].values():
            assert 0 <= err["kernel"] <= err["allowed"] and err["eager"] >= 0
    speed = parts["step_speed"]["result"]
    for dn in ("float32", "bfloat16"):
        s = speed["step"][dn]
        t = s["impls"]["triton"]
        assert s["triton_fwd_share_of_copy"] == pytest.approx(s["bytes"] / t["fwd_s"] / (speed["copy_gb_s"] * 1e9))
    assert str(speed["block_sweep"]["default"]) in speed["block_sweep"]["share_of_copy"]
    evaluation = parts["evaluation"]["result"]
    for name in ("infiloop", "carry_last"):
        assert set(evaluation["s_per_update"][name]) == {"fp32", "tf32", "bf16"}
    for dn in ("bfloat16", "float32"):
        o = parts["model_overhead"]["result"]["by_dtype"][dn]
        for kind in ("train", "eval"):
            assert o[f"{kind}_ratio"] == pytest.approx(o[f"{kind}_infiloop"] / o[f"{kind}_carry_last"])
    _check_training(parts)


@pytest.mark.slow  # about 75 s: every part in its own process, each compiling its Triton kernels
@needs_triton
def test_gpu_check_dry_run_exercises_every_section(tmp_path):
    """``gpu_check.py --dry-run``: the device run's parts in its order, each in its own process and all ok; the
    JSON and the markdown table in --out, nothing written elsewhere; each part's log counted (TORCH_LOGS)."""
    out = tmp_path / "out"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)], cwd=ROOT,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, f"gpu_check.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "all parts ok" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["gpu_check.json", "gpu_check.md", "logs", "parts"]
    assert not (tmp_path / "elsewhere").exists()
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["ok"] and list(report["parts"]) == PARTS and "running" not in report
    assert report["seconds"] <= report["budget_s"] and wall < 600
    for name, part in report["parts"].items():
        assert part["status"] == "ok" and part["result"]["complete"] and not part["result"].get("errors"), name
        assert part["seconds"] <= part["timeout_s"] and part["result"]["sections"]
        assert part["log_counts"]["graph_breaks"] == 0 and part["log_counts"]["recompiles"] == 0, part["log_counts"]
    _check_figures(report["parts"])
    goals = {g["check"]: g for g in report["goals"]}
    assert goals["kernels = reference (fp32, bf16; forward and every gradient)"]["met?"] == "yes"
    assert goals["graph breaks, infiloop model (compiled training step)"]["met?"] == "yes"
    for name in PILOT_CONNECTIONS:
        assert "s/step" in goals[f"training step {name}, eager (smoke profile, batch 768)"]["measured"]
    assert "compiled" in goals["training step infiloop, compiled (smoke profile)"]["measured"]
    md = (out / "gpu_check.md").read_text()
    assert [r["check"] for r in _table(md)[:len(goals)]] == list(goals)
    assert "Dry run: the timings below mean nothing" in md and "loss and cell accuracy by step" in md


@pytest.mark.slow  # about 20 s, and timed: a part cut at its 20 s limit
@needs_triton
def test_the_report_is_written_after_every_section_and_a_part_cut_short_keeps_them(tmp_path):
    """While a part runs, gpu_check.json already holds the sections it finished (status running); a part killed by
    its timeout (here the compiled step, cut during its compile) keeps them and says "timed out"."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--dry-run", "--parts", "train_compiled", "--timeout",
                             "train_compiled=20", "--out", str(out)], cwd=ROOT, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    while proc.poll() is None:
        try:
            report = json.loads((out / "gpu_check.json").read_text())
        except (OSError, ValueError):
            report = None
        if report and report.get("running") == "train_compiled":
            seen.append([s["label"] for s in (report["parts"]["train_compiled"]["result"] or {}).get("sections", [])])
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 1 and "NOT OK: train_compiled timed out" in stdout, stderr[-3000:]
    assert ["data"] in seen, seen  # a partial report, written while the compile ran
    report = json.loads((out / "gpu_check.json").read_text())
    part = report["parts"]["train_compiled"]
    assert part["status"] == "timed out" and part["result"]["train_rows"] > 0 and not part["result"]["complete"]
    rows = {g["check"]: g["measured"] for g in report["goals"]}
    assert rows["training step infiloop, compiled (smoke profile)"] == "not measured (part timed out)"


def test_without_usable_cuda_it_stops_in_one_error_line(tmp_path):
    """Not a dry run, no usable CUDA: exit 2 and one line naming the problem (before: a message and exit 0)."""
    if torch.cuda.is_available():
        pytest.skip("CUDA is usable here")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "out")], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, (proc.stdout, lines)
    assert lines[0].startswith("error: gpu_check.py: CUDA is not usable here: ") and "--dry-run" in lines[0]
    if torch.version.cuda is None:
        assert f"this PyTorch ({torch.__version__}) is a CPU build" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_device_this_build_cannot_run_is_named(monkeypatch):
    """CUDA seen as available, but a first operation fails (a GPU the build has no code for, a broken driver): the
    failure's last line, from a process of its own."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    import infiloop.machine

    monkeypatch.setattr(infiloop.machine, "cuda_problem", lambda: None)
    if torch.cuda.is_available():
        pytest.skip("CUDA works here: the first operation would succeed")
    problem = gpu_check.cuda_unusable()
    assert problem.startswith("a first CUDA operation failed (") and "CUDA" in problem[30:], problem


def test_the_logs_count_warnings_recompiles_and_graph_breaks(tmp_path):
    """What TORCH_LOGS=recompiles,graph_breaks makes this torch write (a real Dynamo run: one break, recompiles
    on a new constant and a new rank) and warning lines are counted, each once."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_check_report import count_log
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    script = ("import warnings, torch\n"
              "def f(x, n):\n    y = x * 2\n    print('break')\n    return y + n\n"
              "g = torch.compile(f, backend='eager')\n"
              "g(torch.randn(3), 1); g(torch.randn(3), 2); g(torch.randn(4, 5), 3)\n"
              "warnings.warn('a user warning')\nprint('warning: a line of the package')\n")
    log = tmp_path / "part.log"
    with open(log, "w") as f:
        subprocess.run([sys.executable, "-c", script], env=dict(os.environ, TORCH_LOGS="recompiles,graph_breaks"),
                       stdout=f, stderr=subprocess.STDOUT, timeout=120, check=True)
    c = count_log(log)
    assert c["graph_breaks"] >= 2 and c["recompiles"] >= 2 and c["warnings"] == 2, (c, log.read_text()[-2000:])
    assert "[__recompiles] Recompiling function" in c["first"]["recompiles"][0]
    assert count_log(tmp_path / "absent.log") == {"warnings": 0, "recompiles": 0, "graph_breaks": 0, "first": {}}
