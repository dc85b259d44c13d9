"""Check ``environment.yml`` against the conda channel it names, offline, from a small cache in the repository.

    python -m infiloop envcheck            check environment.yml against infiloop/experiments/envcheck_cache.json
    python -m infiloop envcheck --fetch    refresh the cache from the channel's repodata (needs the network)

``--fetch`` downloads ``repodata.json.bz2`` of ``linux-64`` and ``noarch`` from the channel, keeps the
names, versions, subdirs and CUDA build flavours of the packages the environment file names (a few kB) and
writes the cache. The check reads the environment file and reports, for every conda package it names,
whether the cache shows a version that satisfies its constraint on linux-64 (or noarch), and names the
packages the cache cannot speak for. It also checks the rules of this environment: one channel (plus
``nodefaults``), a CUDA build of PyTorch forced by ``pytorch-gpu`` and a ``cuda-version`` pin, Triton from
the channel, and no torch or triton among the pip packages.
"""

from __future__ import annotations

import argparse
import bz2
import json
import re
import sys
import urllib.request
from datetime import date
from pathlib import Path

import yaml

from ..paths import ROOT

ENVIRONMENT = ROOT / "environment.yml"
CACHE = Path(__file__).resolve().parent / "envcheck_cache.json"
SUBDIRS = ("linux-64", "noarch")
CHANNEL_URL = "https://conda.anaconda.org/{channel}/{subdir}/repodata.json.bz2"
PIP_FORBIDDEN = ("torch", "pytorch", "triton", "pytorch-triton")
_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9_.\-]+)\s*(?P<constraint>.*?)\s*$")


# ------------------------------------------------------------------------------------------ environment file


def read_environment(path: Path = ENVIRONMENT) -> dict:
    """The environment file as ``{"channels": [...], "conda": {name: constraint}, "pip": [...]}``."""
    try:
        env = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: not a readable YAML file ({e})") from None
    if not isinstance(env, dict) or not isinstance(env.get("dependencies"), list):
        raise ValueError(f"{path}: expected a mapping with a 'dependencies' list")
    conda, pip = {}, []
    for dep in env["dependencies"]:
        if isinstance(dep, dict) and set(dep) == {"pip"}:
            pip += [str(p) for p in dep["pip"]]
        elif isinstance(dep, str):
            m = _REQUIREMENT.match(dep.split("::")[-1])
            if m is None:
                raise ValueError(f"{path}: cannot read the dependency {dep!r}")
            conda[m["name"].lower()] = m["constraint"].replace(" ", "")
        else:
            raise ValueError(f"{path}: cannot read the dependency {dep!r}")
    return {"name": env.get("name"), "channels": list(env.get("channels") or []), "conda": conda, "pip": pip}


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.+]", v))


def satisfies(version: str, constraint: str) -> bool:
    """Conda's simple constraints: ``""``, ``=X`` (X or X.*), ``==X``, ``>=X``, ``>X``, ``<=X``, ``<X``, and
    comma-separated conjunctions of them."""
    for part in filter(None, constraint.split(",")):
        m = re.fullmatch(r"(==|>=|<=|>|<|=|!=)?([0-9][0-9A-Za-z.*+]*)", part)
        if m is None:
            raise ValueError(f"constraint {constraint!r}: {part!r} is not a version constraint this check reads")
        op, want = m[1] or "==", m[2].rstrip(".*")
        v, w = _version_key(version), _version_key(want)
        if op == "=" or (op == "==" and m[2].endswith("*")):
            ok = v[:len(w)] == w
        else:
            ok = {"==": v == w, "!=": v != w, ">=": v >= w, "<=": v <= w, ">": v > w, "<": v < w}[op]
        if not ok:
            return False
    return True


# ------------------------------------------------------------------------------------------ the check


def check(env: dict, cache: dict) -> tuple[list[str], list[str], list[str]]:
    """(problems, verified, unverifiable) of an environment against a channel cache."""
    problems, verified, unverifiable = [], [], []
    channels = [c for c in env["channels"] if c != "nodefaults"]
    if channels != [cache["channel"]]:
        problems.append(f"channels: expected exactly [{cache['channel']}] (and nodefaults), got {env['channels']}")
    if "nodefaults" not in env["channels"]:
        problems.append("channels: add 'nodefaults', so that no package comes from the defaults channel")
    for rule, ok in (("pytorch-gpu (only CUDA builds of pytorch provide it)", "pytorch-gpu" in env["conda"]),
                     ("a cuda-version pin (selects the CUDA build flavour)", bool(env["conda"].get("cuda-version"))),
                     ("triton from the channel (the CUDA pytorch build pins its version)", "triton" in env["conda"])):
        if not ok:
            problems.append(f"dependencies: missing {rule}")
    for p in env["pip"]:
        name = re.split(r"[<>=!~\[ ;]", p.strip(), maxsplit=1)[0].lower()
        if name in PIP_FORBIDDEN:
            problems.append(f"pip: {p!r}: torch and triton must come from conda ({cache['channel']}), not pip")
    packages, missing = cache.get("packages", {}), cache.get("not_verified", {})
    for name, constraint in env["conda"].items():
        if name in packages:
            entry = packages[name]
            if entry.get("subdirs") and not set(entry["subdirs"]) & set(SUBDIRS):
                problems.append(f"{name}: the cache shows it only for {entry['subdirs']}, not linux-64 or noarch")
                continue
            good = [v for v in entry["versions"] if satisfies(v, constraint)]
            if not good:
                problems.append(f"{name}{constraint}: no version in the cache satisfies it "
                                f"(cached: {', '.join(entry['versions'])})")
            else:
                verified.append(f"{name}{constraint}: {', '.join(good)}")
                if not entry.get("subdirs"):
                    unverifiable.append(f"{name}: its platform (linux-64 or noarch) is not in the cache")
        elif name in missing:
            unverifiable.append(f"{name}: {missing[name]}")
        else:
            problems.append(f"{name}: not in {CACHE.name}; run `python -m infiloop envcheck --fetch` (online) "
                            f"or list it under not_verified with the reason")
    cuda = env["conda"].get("cuda-version", "")
    flavours = packages.get("pytorch", {}).get("cuda_builds", [])
    if cuda and flavours and not any(satisfies(f[4:6] + "." + f[6:], cuda) for f in flavours if f[4:].isdigit()):
        problems.append(f"cuda-version{cuda}: no pytorch build for it in the cache "
                        f"(CUDA builds: {', '.join(flavours)})")
    return problems, verified, unverifiable


def load_cache(path: Path = CACHE) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------ fetch


def fetch(env: dict, channel: str, url: str = CHANNEL_URL) -> dict:
    """The cache of ``env``'s conda packages from ``channel``'s repodata (linux-64 and noarch)."""
    names = set(env["conda"])
    packages: dict[str, dict] = {}
    for subdir in SUBDIRS:
        src = url.format(channel=channel, subdir=subdir)
        with urllib.request.urlopen(src, timeout=120) as r:  # noqa: S310 - a fixed https (or test file://) URL
            repodata = json.loads(bz2.decompress(r.read()))
        for group in ("packages", "packages.conda"):
            for rec in (repodata.get(group) or {}).values():
                name = rec.get("name")
                if name not in names:
                    continue
                e = packages.setdefault(name, {"versions": set(), "subdirs": set(), "cuda_builds": set()})
                e["versions"].add(rec["version"])
                e["subdirs"].add(subdir)
                m = re.match(r"(cuda\d+)", rec.get("build", ""))
                if m:
                    e["cuda_builds"].add(m[1])
    out = {name: {"versions": sorted(e["versions"], key=_version_key), "subdirs": sorted(e["subdirs"]),
                  **({"cuda_builds": sorted(e["cuda_builds"])} if e["cuda_builds"] else {})}
           for name, e in sorted(packages.items())}
    return {"channel": channel, "subdirs": list(SUBDIRS), "written": date.today().isoformat(),
            "how": f"fetched from {url.format(channel=channel, subdir='<subdir>')} by `python -m infiloop envcheck "
                   f"--fetch`; regenerate the same way",
            "packages": out,
            "not_verified": {n: "not in the channel's linux-64 or noarch repodata" for n in sorted(names - set(out))}}


# ------------------------------------------------------------------------------------------ command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infiloop envcheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("--environment", default=str(ENVIRONMENT), help="the environment file (default environment.yml)")
    ap.add_argument("--cache", default=str(CACHE),
                    help="the channel cache (default infiloop/experiments/envcheck_cache.json)")
    ap.add_argument("--fetch", action="store_true", help="refresh the cache from the channel (needs the network)")
    args = ap.parse_args(argv)
    try:
        env = read_environment(Path(args.environment))
        if args.fetch:
            channels = [c for c in env["channels"] if c != "nodefaults"]
            if len(channels) != 1:
                raise ValueError(f"{args.environment}: expected one channel (plus nodefaults), got {channels}")
            cache = fetch(env, channels[0])
            Path(args.cache).write_text(json.dumps(cache, indent=1) + "\n", encoding="utf-8")
            print(f"wrote {args.cache}: {len(cache['packages'])} packages", file=sys.stderr)
        cache = load_cache(Path(args.cache))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    problems, verified, unverifiable = check(env, cache)
    print(f"# {args.environment} against {args.cache} ({cache['channel']}, written {cache['written']}: "
          f"{cache['how']})")
    for line in verified:
        print(f"ok          {line}")
    for line in unverifiable:
        print(f"unverified  {line}")
    for line in problems:
        print(f"PROBLEM     {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
