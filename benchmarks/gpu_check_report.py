"""The device check's report (``gpu_check.py``): each goal measured, not measured or not met, as rows of a table
(check, measured, goal, met?), the details below it, and what the parts' logs say (warnings, recompiles, graph
breaks), written as ``gpu_check.json`` and ``gpu_check.md`` after every section of every part."""

from __future__ import annotations

import math
import re
from pathlib import Path

import _common as C
from gpu_check_parts import PILOT_CONNECTIONS, write_json

GOAL_BW = 0.80  # kernel forward bandwidth, share of the measured copy bandwidth
GOAL_MODEL = 1.03  # InfiLoop's whole-model step / carry-last's
GOAL_STEP_S = 0.25  # the gpu profile's training step
LOSS_DROP = 0.05  # the pilot's loss falls: last logged at most 95 % of the first
LOSS_LIKE = 1.05  # and InfiLoop's at the last common logged step at most 5 % above carry-last's

# What the parts' logs say: Python's warnings and the package's "warning:" lines, and what TORCH_LOGS=recompiles,
# graph_breaks makes Dynamo write (one line opens each recompile and each graph break).
LOG_PATTERNS = {"warnings": re.compile(r"(^|\s)(\w*Warning|warning): "),
                "recompiles": re.compile(r"\[__recompiles\] Recompiling function"),
                "graph_breaks": re.compile(r"\[__graph_breaks\] Graph break\b")}


def count_log(path: Path) -> dict:
    """Warnings, recompiles and graph breaks in a part's log, with the first few of each (as written)."""
    counts = {k: 0 for k in LOG_PATTERNS}
    first: dict[str, list[str]] = {k: [] for k in LOG_PATTERNS}
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            for k, pat in LOG_PATTERNS.items():
                if pat.search(line):
                    counts[k] += 1
                    if len(first[k]) < 3:
                        first[k].append(line.strip()[:300])
    return {**counts, "first": {k: v for k, v in first.items() if v}}


def _row(check: str, measured: str, goal: str = "", met: bool | None = None) -> dict:
    measured = measured.replace("|", "/")  # a compile error's text must not break the markdown table
    return {"check": check, "measured": measured, "goal": goal,
            "met?": "-" if met is None else ("yes" if met else "NO")}


def _result(parts: dict, name: str) -> tuple[dict, str]:
    p = parts.get(name) or {}
    return (p.get("result") or {}), p.get("status", "not run")


def _missing(check: str, status: str, goal: str = "") -> dict:
    return _row(check, f"not measured (part {status})", goal)


def goals_kernels(parts: dict) -> list[dict]:
    r, status = _result(parts, "kernels")
    check = "kernels = reference (fp32, bf16; forward and every gradient)"
    cases = r.get("cases") or []
    if not cases:
        return [_missing(check, status)]
    worst = max(cases, key=lambda c: c["worst_ratio"])
    ok = sum(c["passed"] for c in cases)
    measured = (f"{ok}/{len(cases)} cases within tolerance; worst err/allowed {worst['worst_ratio']:.2f} "
                f"({worst['name']}: {worst['worst_at']})")
    return [_row(check, measured, "err <= 2 err_eager + tol (1 + max abs truth), dtypes equal",
                 ok == len(cases) and status == "ok")]


def _step_rows(r: dict, dn: str, status: str) -> list[dict]:
    s = (r.get("step") or {}).get(dn)
    check = f"fused step forward {dn} ({r.get('rows', '?')}x{r.get('d', '?')}), bandwidth / copy"
    if not s:
        return [_missing(check, status, f">= {GOAL_BW:.0%}")]
    share = s["triton_fwd_share_of_copy"]
    rows = [_row(check, f"{share:.0%} ({s['impls']['triton']['fwd_gb_s']:.0f} GB/s)", f">= {GOAL_BW:.0%}",
                 share >= GOAL_BW),
            _row(f"fused step {dn} vs eager", f"fwd {s['triton_speedup_fwd']:.1f}x, fwd+bwd "
                 f"{s['triton_speedup_fwd_bwd']:.1f}x")]
    c = (r.get("compile") or {}).get(dn)
    if isinstance(c, dict):
        rows.append(_row(f"fused step {dn} vs torch.compile of the reference",
                         f"fwd {c['compile_over_triton_fwd']:.2f}x, fwd+bwd {c['compile_over_triton_fwd_bwd']:.2f}x"))
    elif c:
        rows.append(_row(f"fused step {dn} vs torch.compile of the reference", c))
    return rows


def goals_step_speed(parts: dict) -> list[dict]:
    r, status = _result(parts, "step_speed")
    rows = [_row("device-to-device copy bandwidth", f"{r['copy_gb_s']:.0f} GB/s")] if "copy_gb_s" in r else []
    for dn in ("float32", "bfloat16"):
        rows += _step_rows(r, dn, status)
    b = r.get("block_sweep")
    if b:
        txt = ", ".join(f"{k}: {v:.0%}" for k, v in b["share_of_copy"].items())
        rows.append(_row(f"rows per program (default {b['default']}), fp32 share of copy", txt))
    return rows


def goals_overhead(parts: dict) -> list[dict]:
    r, status = _result(parts, "model_overhead")
    rows = []
    for dn in ("bfloat16", "float32"):
        o = (r.get("by_dtype") or {}).get(dn)
        for kind, label in (("train", "training step"), ("eval", "evaluation outer update")):
            check = (f"whole-model {label}, InfiLoop / carry-last ({dn}, eager, {r.get('preset', 'gpu')} "
                     f"b{r.get('batch', 768)})")
            if not o:
                rows.append(_missing(check, status, f"<= {GOAL_MODEL:.2f}"))
                continue
            ratio = o[f"{kind}_ratio"]
            rows.append(_row(check, f"{C.fmt_time(o[f'{kind}_infiloop'])} / {C.fmt_time(o[f'{kind}_carry_last'])} = "
                             f"{ratio:.3f}", f"<= {GOAL_MODEL:.2f}", ratio <= GOAL_MODEL))
    return rows


def _loss_like(runs: dict) -> tuple[str, bool | None]:
    """InfiLoop's pilot loss falls (by LOSS_DROP) and ends within LOSS_LIKE of carry-last's, at their last common
    logged step."""
    a, b = (runs.get(n, {}).get("curve") or [] for n in ("infiloop", "carry_last"))
    common = sorted({c["step"] for c in a} & {c["step"] for c in b})
    if len(common) < 2:
        return "fewer than two common logged steps", None
    at = common[-1]
    la = {c["step"]: c["loss"] for c in a}
    lb = {c["step"]: c["loss"] for c in b}
    falls = all(math.isfinite(x) for x in la.values()) and la[at] <= (1 - LOSS_DROP) * la[common[0]]
    return (f"InfiLoop {la[common[0]]:.3f} -> {la[at]:.3f}, carry-last {lb[common[0]]:.3f} -> {lb[at]:.3f} "
            f"(steps {common[0]}-{at})", bool(falls and la[at] <= LOSS_LIKE * lb[at]))


def _step_row(check: str, x: dict | None, status: str) -> dict:
    if not x or x.get("s_per_step") is None:
        why = f"part {status}" if not x else "one logged window only: " + (
            "compilation took the share" if x["compiled"] else "the share was too short")
        return _row(check, f"not measured ({why})", f"<= {GOAL_STEP_S} s")
    mode = "compiled" if x["compiled"] else "eager" if not x.get("compile_error") else "eager (compile failed)"
    return _row(check, f"{x['s_per_step']:.3f} s/step ({x['steps']} steps, {x.get('precision', '?')}, {mode})",
                f"<= {GOAL_STEP_S} s", x["s_per_step"] <= GOAL_STEP_S)


def goals_train_eager(parts: dict) -> list[dict]:
    r, status = _result(parts, "train_eager")
    runs, prof = r.get("runs") or {}, r.get("profile", "gpu")
    rows = [_step_row(f"training step {n}, eager ({prof} profile, batch {runs.get(n, {}).get('batch', 768)})",
                      runs.get(n), status) for n in PILOT_CONNECTIONS]
    a, b = runs.get("infiloop", {}).get("s_per_step"), runs.get("carry_last", {}).get("s_per_step")
    rows.append(_row("training step, InfiLoop / carry-last (eager)", f"{a / b:.3f}" if a and b else "not measured",
                     f"<= {GOAL_MODEL:.2f}", a / b <= GOAL_MODEL if a and b else None))
    for n in PILOT_CONNECTIONS:
        x = runs.get(n)
        if x:
            mem = "-" if x["peak_memory_gb"] is None else f"{x['peak_memory_gb']:.1f} GiB"
            rows.append(_row(f"{n}: peak memory, eager", f"{mem}; kernels {sorted(set(x['kernels'].values()))}"))
    measured, met = _loss_like(runs)
    rows.append(_row("InfiLoop's pilot loss falls like carry-last's", measured,
                     f"falls >= {LOSS_DROP:.0%}, ends <= {LOSS_LIKE:.2f} x carry-last's", met))
    return rows


def goals_train_compiled(parts: dict) -> list[dict]:
    r, status = _result(parts, "train_compiled")
    x = (r.get("runs") or {}).get("infiloop")
    prof = r.get("profile", "gpu")
    rows = [_step_row(f"training step infiloop, compiled ({prof} profile)", x, status)]
    logs = (parts.get("train_compiled") or {}).get("log_counts") or {}
    if not x:
        rows.append(_missing("graph breaks, infiloop model (compiled training step)", status, "0"))
        return rows
    d = x["dynamo"]
    breaks = max(d["graph_breaks"], logs.get("graph_breaks", 0))
    rows.append(_row("graph breaks, infiloop model (compiled training step)",
                     f"{breaks} breaks, {d['unique_graphs']} graph(s); {logs.get('recompiles', 0)} recompiles in "
                     "the log", "0", breaks == 0))
    first = "not measured" if x["compile_seconds"] is None else f"{x['compile_seconds']} s"
    mode = "yes" if x["compiled"] else f"no ({x['compile_error'] or 'eager'})"
    mem = "-" if x["peak_memory_gb"] is None else f"{x['peak_memory_gb']:.1f} GiB"
    rows.append(_row("infiloop: compiled, cold compile to the first step, peak memory",
                     f"compiled {mode}; {first}; peak {mem}"))
    eager = (_result(parts, "train_eager")[0].get("runs") or {}).get("infiloop") or {}
    if eager.get("s_per_step") and x.get("s_per_step") and eager.get("batch") == x.get("batch"):
        rows.append(_row("training step infiloop, eager / compiled", f"{eager['s_per_step'] / x['s_per_step']:.2f}x"))
    return rows


def goals_evaluation(parts: dict) -> list[dict]:
    r, status = _result(parts, "evaluation")
    s = r.get("s_per_update") or {}
    if not s:
        return [_missing("evaluation s/update (fp32, TF32, bf16)", status)]
    rows = [_row(f"evaluation {n} b{r.get('batch')}, s/update", ", ".join(f"{p} {C.fmt_time(t)}" for p, t in v.items()))
            for n, v in s.items()]
    inf = s.get("infiloop", {})
    if "fp32" in inf and "tf32" in inf:
        rows.append(_row("evaluation TF32 speed-up over fp32 (InfiLoop)", f"{inf['fp32'] / inf['tf32']:.2f}x"))
    return rows


GOAL_FNS = {"train_eager": goals_train_eager, "kernels": goals_kernels, "step_speed": goals_step_speed,
            "evaluation": goals_evaluation, "model_overhead": goals_overhead, "train_compiled": goals_train_compiled}


def goal_rows(parts: dict) -> list[dict]:
    """The table's rows, for the parts this run asked for (run, running, timed out or skipped), then the logs'."""
    rows = [row for name, fn in GOAL_FNS.items() if name in parts for row in fn(parts)]
    for name, p in parts.items():
        c = p.get("log_counts")
        if c:
            rows.append(_row(f"log of {name}: warnings, recompiles, graph breaks",
                             f"{c['warnings']}, {c['recompiles']}, {c['graph_breaks']}"))
    return rows


def _curves_table(runs: dict) -> str:
    names = [n for n in PILOT_CONNECTIONS if runs.get(n, {}).get("curve")]
    if not names:
        return "(no loss curve)"
    by = {n: {c["step"]: c for c in runs[n]["curve"]} for n in names}
    rows = []
    for st in sorted(set().union(*(by[n] for n in names))):
        row = {"step": st}
        for n in names:
            c = by[n].get(st)
            row[f"{n} loss"] = f"{c['loss']:.4f}" if c else ""
            row[f"{n} cell acc"] = f"{c['cell_acc']:.3f}" if c else ""
        rows.append(row)
    return C.table(rows)


def _training_details(parts: dict) -> list[str]:
    out = []
    r, _ = _result(parts, "train_eager")
    if r.get("runs"):
        out += ["", f"### Eager training: loss and cell accuracy by step ({r.get('data')})", "",
                _curves_table(r["runs"])]
    for part in ("train_eager", "train_compiled"):
        runs = _result(parts, part)[0].get("runs") or {}
        rows = [{"part": part, "connection": n, "steps": x["steps"], "budget s": x["budget_s"],
                 "s/step": "-" if x["s_per_step"] is None else f"{x['s_per_step']:.3g}",
                 "planned s/step": f"{x['planned_s_per_step']:.3g}", "peak GiB": x["peak_memory_gb"],
                 "compile s": x["compile_seconds"], "kernels": ", ".join(sorted(set(x["kernels"].values()))) or "-"}
                for n, x in runs.items()]
        if rows:
            out += ["", C.table(rows)]
    for c in r.get("pilot_criteria") or []:
        out.append(f"- pilot criterion [{'met' if c['met'] else 'NOT met'}] {c['criterion']}: {c['measured']}")
    return out


def _detail_sections(parts: dict) -> list[str]:
    out = _training_details(parts)
    k, _ = _result(parts, "kernels")
    if k.get("cases"):
        rows = [{"case": c["name"], "shape": "x".join(map(str, c["shape"])), "clamped": c["clamped"],
                 "worst err/allowed": f"{c['worst_ratio']:.2f} ({c['worst_at']})",
                 "fwd h err": f"{c['errors']['h']['kernel']:.1e}",
                 "grad z err": f"{c['errors']['grad z']['kernel']:.1e}",
                 "passed": c["passed"]} for c in k["cases"]]
        out += ["", "### Kernel errors (against float64; the reference's own error sets the allowance)", "",
                C.table(rows)]
    return out


def render_md(report: dict) -> str:
    h = report["header"]
    lines = [f"## GPU check: {report['mode']}", "",
             f"date {h['date']}; GPU {h['gpu']}; driver {h['nvidia driver']}, CUDA {h['cuda (torch build)']}; "
             f"torch {h['torch']}, Triton {h['triton']}; host {h['host']}", "",
             f"command: `{report['command']}`", ""]
    if report["mode"] != "device":
        lines += ["**Dry run: the timings below mean nothing** (CPU, interpreter, small shapes).", ""]
    if report.get("interrupted"):
        lines += ["**Interrupted** (SIGTERM: the outer timeout) before every part had run.", ""]
    if report.get("running"):
        lines += [f"**Partial**: written while part {report['running']} runs.", ""]
    lines.append(C.table(goal_rows(report["parts"])))
    parts = [{"part": n, "status": p.get("status"), "seconds": p.get("seconds", "-"),
              "timeout s": p.get("timeout_s", "-"), "log": p.get("log", "-")} for n, p in report["parts"].items()]
    lines += ["", C.table(parts), *_detail_sections(report["parts"])]
    return "\n".join(lines) + "\n"


def write_report(report: dict, out: Path) -> None:
    report["goals"] = goal_rows(report["parts"])
    report["ok"] = bool(report["parts"]) and all(p.get("status") == "ok" for p in report["parts"].values()) \
        and not report.get("interrupted") and not report.get("running")
    write_json(out / "gpu_check.json", report)
    (out / "gpu_check.md").write_text(render_md(report))
