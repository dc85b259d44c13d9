"""Training and evaluation of LoopLM on the generated text tasks (``tasks.language``), and the feasibility probe.

Notebook 08's grid of looped decoders, each probe's record cached under ``<runs>/looplm/``, and the probe's command
line. A probe's training and evaluation are the training wing's (``infiloop/training/looplm.py``), its cost is
``cost/flops.py``'s.

    python -m infiloop.experiments.looplm --task kinship --connection carry_last --steps 1500

prints the seconds of training and the accuracy per depth and r (``--json FILE`` writes them too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .. import numeric
from ..errors import UsageError
from ..machine import progress_bar
from ..model.conditioning import ConditionConfig
from ..model.connections import ConnectionConfig
from ..model.looplm import LoopLMConfig
from ..model.registry import CONNECTION_REGISTRY
from ..tasks.language import LanguageConfig
from ..training.looplm import LMTrainConfig, Probe, run

# ------------------------------------------------------------------------------------------ notebook 08's grid

# Raised whenever the looped decoder, its tasks or its training change what a probe computes: the cached records
# of an older version are then never read. 2: one model per configuration on the mixture, next-token loss over the
# text, r chosen per allocation for matched L(r).
CODE_VERSION = 2
# The content-free averaging baseline: a fixed step size gamma = 1 - beta_0 on the loop axis, beta_0 = 0.55 the
# paper's initial decay, from which InfiLoop's learned beta moved little in notebook 08's records (0.56-0.61); no
# content score, so that its weights are those of InfiLoop's eq. 2 without s_i (up to the normalisation of the first
# loops) and the same on every token.
EMA_GAMMA = round(1.0 - ConnectionConfig().beta, 4)
CONNECTIONS = {  # the loop connections (and conditioners) notebook 08 compares, by name
    "carry_last": ({"name": "carry_last"}, {}),  # the study's BaseLoop
    "infiloop": ({"name": "infiloop"}, {}),
    "ema": ({"name": "ema", "gamma": EMA_GAMMA}, {}),
    # the study's recommended conditioning (its guideline 4): channel-wise history, w = 2, with loop gating
    "history_lg": ({"name": "carry_last"}, {"history": "channel", "window": 2, "timestep": "loop_gating"}),
    # the study's rescue of extrapolation: dense history-state injection, w = 1
    "history_dense": ({"name": "carry_last"}, {"history": "dense", "window": 1}),
}
LABELS = {"carry_last": "BaseLoop (carry-last)", "infiloop": "InfiLoop",
          "ema": f"fixed-β average (γ = {EMA_GAMMA:g})", "history_lg": "history (channel, w = 2) + loop gating",
          "history_dense": "history (dense, w = 1)"}
# a connection's own colour where it is one (registered with its class, as in every figure); the conditioners' here
COLORS = {**{name: CONNECTION_REGISTRY[name].color for name in ("carry_last", "infiloop", "ema")},
          "history_lg": "#000000", "history_dense": "#56B4E9"}
TASKS = ("knowledge", "kinship")  # the kinds of the mixture, each evaluated apart (rules: docs/looplm.md's probe)
ROLES = ("balanced", "extremes", "nonloop", "coda", "prelude")  # the allocations the study's findings compare


def allocation(text: str) -> tuple[int, int, int, int]:
    """``"p+sxK+c"`` -> (p, s, K, c): a p-block prelude, an s-block core looped K times, a c-block coda."""
    try:
        p, core, c = text.split("+")
        s_, k = core.split("x")
        out = int(p), int(s_), int(k), int(c)
    except ValueError:
        raise ValueError(f"allocation {text!r}: expected p+sxK+c, e.g. 1+2x3+1") from None
    if min(out) < 0 or out[1] < 1 or out[2] < 1:
        raise ValueError(f"allocation {text!r}: expected p, c >= 0 and s, K >= 1")
    return out


def effective_depth(alloc: str, r: int | None = None) -> int:
    """The study's effective depth L(r) = p + r s + c (r = K by default)."""
    p, s_, k, c = allocation(alloc)
    return p + (k if r is None else r) * s_ + c


def matched_loops(alloc: str, depths: list[int]) -> dict[int, int]:
    """``{L: r}``: the loop count r at which ``alloc`` reaches each effective depth L(r) = p + r s + c of ``depths``
    (the study's matched inference depth); an L it cannot reach with a whole r >= 1 is refused. A non-looped
    allocation (K = 1, the study's NonLoop reference) runs at its training depth only."""
    p, s_, k, c = allocation(alloc)
    if k == 1:
        return {p + s_ + c: 1}
    out = {}
    for depth in depths:
        r, rest = divmod(depth - p - c, s_)
        if rest or r < 1:
            raise ValueError(f"allocation {alloc!r} cannot run at L(r) = {depth}: (L - p - c) / s = "
                             f"{(depth - p - c) / s_:g} loops is not a whole number >= 1")
        out[depth] = r
    return out


def probe_for(alloc: str, connection: str, seed: int, settings: dict, depths: list[int]) -> Probe:
    """One model of the grid: the allocation ``alloc`` with ``connection`` (``CONNECTIONS``), training seed ``seed``
    (the data's seed is 0 for every model), trained on the mixture of knowledge and kinship at a profile's
    ``settings`` (``profiles.LOOPLM``) and evaluated at the r of each effective depth of ``depths``."""
    p, s_, k, c = allocation(alloc)
    conn, cond = CONNECTIONS[connection]
    if cond.get("timestep"):
        cond = {**cond, "horizon": k, "t_freqs": min(4, max(1, k - 1))}
    model = LoopLMConfig.from_dict({"d_model": settings["d_model"], "n_heads": settings["n_heads"], "prelude": p,
                                    "core": s_, "coda": c, "loops": k, "connection": conn, "cond": cond})
    task = LanguageConfig(task="mixture", seed=0, n_train=settings["n_train"], n_test=settings["n_test"],
                          n_entities=settings["n_entities"])
    return Probe(task, model, LMTrainConfig(steps=settings["steps"], batch_size=settings["batch_size"],
                                            lr=settings["lr"], seed=seed),
                 tuple(sorted(set(matched_loops(alloc, depths).values()))))


def key(probe: Probe) -> str:
    """The probe's cache key: a hash of its whole configuration, of ``CODE_VERSION`` and of the process's numeric mode
    (``infiloop/numeric.py``; left out when native, the mode of the records cached before it existed)."""
    mode = numeric.current().name
    text = json.dumps({"probe": asdict(probe), "code": CODE_VERSION, **({"numeric": mode} if mode != "native" else {})},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def record_path(probe: Probe, root: Path | str | None = None) -> Path:
    """Where the probe's record is cached: ``<root>/<task>-<key>.json`` (default root ``<runs>/looplm``)."""
    from .. import paths

    return Path(root if root is not None else paths.RUNS / "looplm") / f"{probe.task.task}-{key(probe)}.json"


def record(probe: Probe, root: Path | str | None = None, device: str = "cpu") -> dict:
    """``run(probe)``, from its cache file when it is there, else computed and written atomically (under a lock:
    two processes asking for the same probe compute it once)."""
    from ..io import atomic_write_text, locked

    path = record_path(probe, root)
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    with locked(path.parent / ".locks" / f"{path.stem}.lock"):
        if path.is_file():  # another process computed it while we waited
            return json.loads(path.read_text(encoding="utf-8"))
        rec = run(probe, device)
        atomic_write_text(path, json.dumps(rec))
    return rec


def _pool_record(probe: Probe, root: str, device: str) -> dict:
    torch.set_num_threads(1)  # one thread per process: the pool has a process per CPU
    return record(probe, root, device)


def results(probes: list[Probe], workers: int = 1, root: Path | None = None, progress: bool = True,
            device: str = "cpu") -> list[dict]:
    """Every probe's record, from the cache (``<runs>/looplm/``) or computed now, ``workers`` at a time (separate
    processes of one thread each), with a progress bar and the time left."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    tqdm = progress_bar()
    out: dict[int, dict] = {}
    todo = [i for i, p in enumerate(probes) if not record_path(p, root).is_file()]
    for i in set(range(len(probes))) - set(todo):
        out[i] = record(probes[i], root, device)
    with tqdm(total=len(todo), desc="looped decoders", unit="model", disable=not progress or not todo) as bar:
        if workers <= 1 or len(todo) <= 1:
            for i in todo:
                out[i] = record(probes[i], root, device)
                bar.update(1)
        else:
            root = str(record_path(probes[0], root).parent)
            with ProcessPoolExecutor(min(workers, len(todo)), mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(_pool_record, probes[i], root, device): i for i in todo}
                for f in as_completed(futures):
                    out[futures[f]] = f.result()
                    bar.update(1)
    return [out[i] for i in range(len(probes))]


Cell = tuple[str, str, int]  # (allocation, connection, training seed): one model


@dataclass
class Grid:
    """Notebook 08's models at one profile, one per configuration, each trained on the mixture of knowledge and
    kinship: every connection at the base allocation (the first), BaseLoop at every other allocation, once per
    training seed. Every allocation has the base's training depth L(K) and runs at the same effective depths L(r)
    (``depths``: the profile's multiples of L(K)), each at its own whole r; the non-looped reference at L(K)."""

    profile: str
    settings: dict  # profiles.LOOPLM[profile]
    seeds: list[int]
    connections: list[str]
    allocations: list[str]

    @property
    def base(self) -> str:
        return self.allocations[0]

    @property
    def train_depth(self) -> int:
        """L(K), the same for every allocation of the grid."""
        return effective_depth(self.base)

    @property
    def depths(self) -> list[int]:
        """The effective depths L(r) every looped allocation is evaluated at: the profile's ``depths`` x L(K)."""
        return sorted({int(round(m * self.train_depth)) for m in self.settings["depths"]})

    def loops(self, alloc: str) -> dict[int, int]:
        """``{L(r): r}`` of an allocation (``matched_loops``)."""
        return matched_loops(alloc, self.depths)

    def role(self, name: str) -> list[str]:
        """The grid's allocations that play a role of the study's findings (``ROLES``; the profile's ``roles``)."""
        want = self.settings.get("roles", {}).get(name, [])
        return [a for a in ([want] if isinstance(want, str) else want) if a in self.allocations]

    @property
    def cells(self) -> list[Cell]:
        """(allocation, connection, seed) of every model."""
        out = [(self.base, c, s) for c in self.connections for s in self.seeds]
        return out + [(a, "carry_last", s) for a in self.allocations[1:] for s in self.seeds]

    def probe(self, cell: Cell) -> Probe:
        return probe_for(*cell, self.settings, self.depths)


def cell_id(cell: Cell) -> str:
    """``("1+1x4+1", "infiloop", 2)`` -> ``"1+1x4+1/infiloop@2"``."""
    alloc, conn, seed = cell
    return f"{alloc}/{conn}@{seed}"


def _names(text: str) -> list[str]:
    return list(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))


def _check_allocations(allocs: list[str], depths_of) -> None:
    train_depth = None
    for a in allocs:
        try:
            allocation(a)
            train_depth = train_depth or effective_depth(a)
            if effective_depth(a) != train_depth:
                raise ValueError(f"allocation {a!r} has L(K) = {effective_depth(a)}, the first {train_depth}: "
                                 "the grid compares allocations of one training depth")
            matched_loops(a, depths_of(train_depth))
        except ValueError as e:
            raise UsageError(f"parameter allocations: {e}") from None


def grid(profile: str, seeds: str = "", connections: str = "", allocations: str = "") -> Grid:
    """The grid at notebook 08's parameters (comma-separated texts; empty: the profile's, ``profiles.LOOPLM``);
    a bad one is refused in one line naming it."""
    from .settings import profiles

    settings = profiles.looplm(profile)
    try:
        seed_list = [int(x) for x in _names(seeds)] or list(settings["seeds"])
    except ValueError:
        seed_list = [-1]
    if min(seed_list) < 0:
        raise UsageError(f"parameter seeds={seeds!r}: expected training seeds >= 0 separated by commas")
    conns = _names(connections) or list(settings["connections"])
    if any(c not in CONNECTIONS for c in conns) or "carry_last" not in conns:
        raise UsageError(f"parameter connections={connections!r}: expected names among {', '.join(CONNECTIONS)}, "
                         "carry_last among them (the study's BaseLoop)")
    allocs = _names(allocations) or list(settings["allocations"])
    _check_allocations(allocs, lambda ld: sorted({int(round(m * ld)) for m in settings["depths"]}))
    return Grid(profile, settings, seed_list, conns, allocs)


# ------------------------------------------------------------------------------------------ command line


def _probe_from_args(a: argparse.Namespace) -> Probe:
    cond = ConditionConfig(history=a.history_map if a.history else "none", window=a.history or 1,
                           timestep="loop_gating" if a.loop_gating else "none",
                           horizon=a.K if a.loop_gating else 0, t_freqs=min(4, max(1, a.K - 1)))
    model = LoopLMConfig(d_model=a.d_model, n_heads=a.heads, prelude=a.p, core=a.s, coda=a.c, loops=a.K,
                         norm=a.norm, connection=ConnectionConfig(name=a.connection, gamma=EMA_GAMMA), cond=cond)
    shuffle = {"auto": None, "yes": True, "no": False}[a.shuffle]
    task = LanguageConfig(task=a.task, seed=a.seed, n_train=a.n_train, n_test=a.n_test, n_entities=a.n_entities,
                          shuffle=shuffle, distractors=a.distractors, train_depths=tuple(a.train_depths),
                          test_depths=tuple(a.test_depths))
    train_cfg = LMTrainConfig(steps=a.steps, batch_size=a.batch, lr=a.lr, seed=a.seed, loss=a.loss)
    return Probe(task, model, train_cfg, tuple(a.loops))


def _table(rec: dict) -> str:
    acc = rec["accuracy"]
    rs = list(next(iter(acc.values())))
    lines = [f"{rec['task']['task']} {rec['model']['connection']['name']} p{rec['model']['prelude']}"
             f" s{rec['model']['core']} c{rec['model']['coda']} K{rec['model']['loops']}: {rec['params']} params, "
             f"{rec['fit']['steps']} steps in {rec['fit']['seconds']:.1f} s (loss {rec['fit']['loss']:.3f}), "
             f"eval {rec['eval_seconds']:.1f} s, train acc {rec['train_accuracy']:.3f}",
             "depth  " + "  ".join(f"r={r:>3}" for r in rs)]
    lines += [f"{d:>5}  " + "  ".join(f"{acc[d][r]:5.3f}" for r in rs) for d in acc]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m infiloop.experiments.looplm", description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="kinship", choices=("knowledge", "kinship", "rules", "mixture"))
    ap.add_argument("--loss", default="text", choices=("text", "answer"),
                    help="next-token loss over the text (the study's) or on the answer words only")
    ap.add_argument("--connection", default="carry_last")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--p", type=int, default=1)
    ap.add_argument("--s", type=int, default=1)
    ap.add_argument("--c", type=int, default=1)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--norm", default="pre")
    ap.add_argument("--history", type=int, default=0, help="history-state injection with this window")
    ap.add_argument("--history-map", default="channel", choices=("scalar", "channel", "dense"))
    ap.add_argument("--loop-gating", action="store_true")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--n-train", type=int, default=3000)
    ap.add_argument("--n-test", type=int, default=200)
    ap.add_argument("--n-entities", type=int, default=100)
    ap.add_argument("--shuffle", default="auto", choices=("auto", "yes", "no"),
                    help="the story's sentences in random order (auto: kinship in order, rules and mixture shuffled)")
    ap.add_argument("--distractors", type=int, default=1, help="rules: distractor facts per person and rules (0-2)")
    ap.add_argument("--train-depths", type=int, nargs="*", default=[], help="empty: the task's default")
    ap.add_argument("--test-depths", type=int, nargs="*", default=[], help="empty: the task's default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--loops", type=int, nargs="*", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    rec = run(_probe_from_args(a))
    print(_table(rec), flush=True)
    if a.json:
        with open(a.json, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
