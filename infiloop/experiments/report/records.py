"""A profile's record as data: seeds recorded in several sittings merge into one summary per notebook, and every
recorded claim is decided again from its data (``analysis/claim_data.py``) by today's rule.

A summary written by a notebook (``notebooks/helper.py``) keeps, beside its claims' data, ``runs``: for each run id
(``infiloop``, ``carry_last``, ...) the settings every seed shares (:func:`run_entry`: the run's configuration
without its seed, and its hash, the code version included) and each seed's run folder; and ``environment``: the
machine and software (:func:`environment`). :func:`merge` adds a summary's seeds to a recorded one when their
settings agree and refuses in one line naming what differs otherwise; a seed already recorded is not recorded twice.
Each merged claim is the claim one run of all the seeds would have recorded (``tests/test_records.py``).
"""

from __future__ import annotations

import copy
import os
import platform

from ... import paths
from ...analysis import claim_data, claims, contrasts, power
from ...errors import DataError

RECORDED = paths.DOCS / "results"  # each profile's record: docs/results/<profile>/<notebook>.json


def _seedless(cfg: dict) -> dict:
    """A run's settings as an experiment's: without its seed, nor its numeric mode (``infiloop/numeric.py``: like the
    seed it picks which model of the experiment is trained, so seeds trained in either mode merge into one record,
    each summary's environment saying which)."""
    out = copy.deepcopy({k: v for k, v in cfg.items() if k != "eval"})
    out.get("train", {}).pop("seed", None)
    out.get("train", {}).pop("numeric", None)
    return out


def run_entry(cfg: dict) -> dict:
    """What a summary keeps of one run id: its settings without the seed (``config``), their hash
    (``settings``: the run hash apart from the seed, as ``recipes.config_hash`` computes it) and, filled by the caller,
    each seed's run folder (``seeds``)."""
    from ..settings.recipes import config_hash

    return {"settings": config_hash({**_seedless(cfg), "eval": {}}), "task": cfg.get("task"),
            "recipe": cfg.get("recipe"), "code_version": cfg.get("code_version"),
            "precision": cfg.get("train", {}).get("precision"), "config": _seedless(cfg), "seeds": {}}


def environment() -> dict:
    """The machine and software a summary was computed with: CPU, threads, torch and its BLAS, the lock, the
    commit (what ``results --compare`` holds beside a record's)."""
    import torch

    from ... import numeric
    from ...machine import cpu_name, lock_status
    from .provenance import provenance

    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            line = next((ln for ln in f if ln.startswith("flags")), "")
        flags = " ".join(sorted(f for f in line.split(":", 1)[-1].split() if f.startswith(("avx", "amx", "fma"))))
    except OSError:
        pass
    return {"cpu": cpu_name(), "cpu flags": flags, "torch": torch.__version__,
            "torch threads": torch.get_num_threads(), "blas": _blas(torch),
            "python": platform.python_version(), "lock": lock_status(),
            "commit": provenance().get("git commit", "unknown"), "omp threads": os.environ.get("OMP_NUM_THREADS", ""),
            "numeric": numeric.state()}


def _blas(torch) -> str:
    show = torch.__config__.show()
    for name in ("MKL", "OpenBLAS", "BLIS", "Accelerate"):
        if f"BLAS_INFO={name.lower()}" in show.replace(" ", "") or f"USE_{name.upper()}=ON" in show:
            return name
    return "unknown"


def seeds_of(summary: dict) -> list[int]:
    """The training seeds a summary's runs cover (every run id's)."""
    return sorted({int(s) for r in summary.get("runs", {}).values() for s in r["seeds"]})


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _differences(a: dict, b: dict, limit: int = 3) -> str:
    fa, fb = _flat(a), _flat(b)
    keys = sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
    shown = ", ".join(f"{k} {fa.get(k)!r} vs {fb.get(k)!r}" for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _parameters(summary: dict) -> dict:
    """A summary's parameters that are not its notebook's defaults as resolved at its profile: a summary written
    before they were resolved (2026-12-07) recorded a depth's default as set (``max_updates 960`` at ``search``)."""
    from ..notebooks.parameters import changed

    return changed(summary["notebook"], summary["profile"], summary.get("parameters") or {})


def _record_parameters(summary: dict, seeds: list[int]) -> dict:
    """The parameters of a record of ``seeds``: its notebook's that are not defaults, and, for a notebook of several
    seeds, ``seeds`` those of the record (not of its first sitting) unless they are the profile's own."""
    from ..notebooks.parameters import declared_parameters
    from ..settings import profiles

    out = _parameters(summary)
    if "seeds" not in declared_parameters(summary["notebook"]):  # a notebook of one seed (``seed``)
        return out
    out.pop("seeds", None)
    return out if seeds == profiles.seeds(summary["profile"]) else {"seeds": ",".join(map(str, seeds)), **out}


def check_mergeable(recorded: dict, new: dict) -> None:
    """Refuse (DataError, one line) two summaries whose seeds cannot be one record: another notebook or profile, a
    summary kept without its data, notebook parameters that differ (besides the seeds: the depths and test puzzles of
    the evaluations), or a run id whose settings differ (code version, data, model, training)."""
    where = f"{new.get('profile')}/{new.get('notebook')}"
    for key in ("notebook", "profile"):
        if recorded.get(key) != new.get(key):
            raise DataError(f"{where}: the recorded summary is of {key} {recorded.get(key)!r}")
    for s, what in ((recorded, "the recorded summary"), (new, "the new summary")):
        if not s.get("runs"):
            raise DataError(f"{where}: {what} keeps no data of its runs (written before records were data): "
                            "record it anew with --replace")
    params = [{k: v for k, v in _parameters(s).items() if k != "seeds"} for s in (recorded, new)]
    if params[0] != params[1]:  # the evaluations (depths, test puzzles) are not in the runs' settings
        raise DataError(f"{where}: the notebook ran with other parameters ({_differences(*params)})")
    for rid in sorted(set(recorded["runs"]) | set(new["runs"])):
        a, b = recorded["runs"].get(rid), new["runs"].get(rid)
        if a is None or b is None:
            raise DataError(f"{where}: run {rid!r} is in only one of the two records")
        if a["settings"] != b["settings"]:
            raise DataError(f"{where}: run {rid!r} was trained with other settings ({a['settings']} recorded, "
                            f"{b['settings']} new: {_differences(a['config'], b['config'])})")


def _merge_claim(old: dict, new: dict, keep: list[int]) -> tuple[dict, str]:
    """One claim of two parts, and what was done in words ("" when merged)."""
    a, b = old.get("data"), new.get("data")
    if not a or not b or a.get("seeds") is None or b.get("seeds") is None:
        return old, f"{old['id']}: decided on part of its seeds, kept as first recorded (it does not merge)"
    data = claim_data.merge(a, claim_data.subset(b, keep))
    merged = claims.redecide(old, data)
    merged["ours"] = merged_ours(merged)
    return merged, ""


def merged_ours(claim: dict) -> str:
    """A merged claim's "ours", from its data: the seeds, each seed's effect alone (``power.per_seed_effects``) and
    where each part's own numbers are (a notebook's "ours" reads numbers no record keeps, such as each model's
    accuracy, so it is not written again for the seeds together)."""
    seeds, effect = claim["data"]["seeds"], claim.get("effect") or {}
    if effect.get("value") is None:
        by_seed = "undefined"
    else:
        digits, unit = effect.get("digits", 1), effect.get("unit", "")
        by_seed = ", ".join(f"{s}: {e:+.{digits}f}" if e == e else f"{s}: undefined"
                            for s, e in zip(seeds, power.per_seed_effects(claim))) + unit
    return (f"{len(seeds)} seeds, merged from records made apart; the effect by seed ({by_seed}); each part's own "
            "numbers are in the record's parts")


def merge(recorded: dict, new: dict) -> tuple[dict, list[str]]:
    """``recorded`` with ``new``'s seeds added (those not recorded yet), each claim decided again over all the
    seeds; and what was said while merging (seeds already recorded, claims that do not merge)."""
    check_mergeable(recorded, new)
    have, theirs = set(seeds_of(recorded)), seeds_of(new)
    keep = [s for s in theirs if s not in have]
    said = [f"{new['notebook']}: seed(s) {', '.join(map(str, sorted(have & set(theirs))))} already recorded, "
            "kept as recorded"] if have & set(theirs) else []
    if not keep:
        return {**recorded, "parameters": _record_parameters(recorded, sorted(have))}, \
            said + [f"{new['notebook']}: no seed to add"]
    out = {**recorded, "parameters": _record_parameters(recorded, sorted(have | set(keep)))}
    new_claims = {c["id"]: c for c in new.get("claims", [])}
    out["claims"] = []
    for c in recorded.get("claims", []):
        merged, note = _merge_claim(c, new_claims[c["id"]], keep) if c["id"] in new_claims else (c, "")
        out["claims"].append(merged)
        said += [note] if note else []
    out["claims"] = contrasts.with_contrasts(out["claims"], out)  # a contrast reads the merged claims' data
    out["runs"] = {rid: {**r, "seeds": {**r["seeds"], **{s: d for s, d in new["runs"][rid]["seeds"].items()
                                                         if int(s) in keep}}}
                   for rid, r in recorded["runs"].items()}
    out["parts"] = [*parts(recorded), *parts(new, keep)]
    cpus = {p.get("environment", {}).get("cpu") for p in out["parts"]} - {None}
    if len(cpus) > 1:  # a seed is one model only on one kind of CPU (docs/results.md, "The same seed on another CPU")
        said.append(f"{new['notebook']}: its seeds were recorded on {len(cpus)} kinds of CPU "
                    f"({', '.join(sorted(cpus))}): a seed trains to another model on another CPU, so compare the parts "
                    "before reading them as one")
    return out, said


def parts(summary: dict, seeds: list[int] | None = None) -> list[dict]:
    """The sittings a record was made in: each one's seeds, date, environment and its own claims' ``ours``."""
    if "parts" in summary:
        return summary["parts"]
    return [{"seeds": seeds if seeds is not None else seeds_of(summary), "created": summary.get("created"),
             "environment": summary.get("environment", {}),
             "ours": {c["id"]: c.get("ours") for c in summary.get("claims", [])}}]
