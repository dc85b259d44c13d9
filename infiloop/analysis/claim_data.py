"""The data a claim is decided from, kept with its record: a changed rule re-decides it, and seeds trained apart
(another machine, another sitting) merge into one verdict, without training again.

Every claim's effect is computed by one builder of ``claims.py`` (``claims.BUILDERS``) from per-seed lists: seed s's
right-or-wrong flags per puzzle, (numerator, denominator) pairs, accuracy curves. :func:`captured` wraps each builder
so that the :class:`~infiloop.analysis.intervals.Interval` it returns carries those inputs (``Interval.inputs``); a
claim whose untestability is decided from data (``claims.untestable_unless_lost``) carries its guard's inputs the same
way (:class:`Untestable`). :func:`pack` stores them in a summary's claim, the arrays compressed (booleans as bits);
:func:`decide` computes the effect and the guard again from the stored data, and :func:`merge` joins the data of
two records seed by seed (seed ids kept beside the data), so that the merged claim is the claim a single run of all
those seeds would have recorded.

Which arguments are per seed: a builder's positional arguments that are sequences (one entry per seed), in the
order of the seed ids; every other argument (a phase's name, the kind of items, a level) is a setting that two parts
must share to merge.
"""

from __future__ import annotations

import base64
import functools
import types
import zlib

import numpy as np

from ..errors import DataError

FORMAT = 1  # the encoding of :func:`encode`; a record of another format is refused, not misread


def _per_seed(arg) -> bool:
    return isinstance(arg, (list, tuple, types.GeneratorType, map, zip))


def captured(builder):
    """``builder`` whose returned interval keeps its inputs (``Interval.inputs``: the builder's name, its per-seed
    arguments and its settings); a builder that calls another keeps its own, the outermost call's."""
    @functools.wraps(builder)
    def wrapped(*args, **kwargs):
        args = tuple(list(a) if _per_seed(a) else a for a in args)  # a generator is read once, here
        iv = builder(*args, **kwargs)
        iv.inputs = {"builder": builder.__name__, "args": list(args), "kwargs": dict(kwargs)}
        return iv
    return wrapped


class Untestable(str):
    """Why a claim cannot be tested here ("" when it can), with the data that decided it: ``inputs`` = the guard's
    name, the inputs of each model's interval of a loss, and the words of the reason."""

    inputs: dict | None = None

    def __new__(cls, text: str, inputs: dict | None = None):
        out = super().__new__(cls, text)
        out.inputs = inputs
        return out


def encode(x):
    """``x`` (nested lists, tuples, dicts, arrays, numbers, strings) as JSON: each array compressed (booleans as bits)
    and base64-encoded; tuples become lists."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        kind = "bool" if x.dtype == bool else str(x.dtype)
        raw = np.packbits(x.ravel()).tobytes() if x.dtype == bool else np.ascontiguousarray(x).tobytes()
        return {"array": kind, "shape": list(x.shape), "zlib": base64.b64encode(zlib.compress(raw, 9)).decode()}
    if isinstance(x, dict):
        return {"dict": [[k, encode(v)] for k, v in x.items()]}
    if isinstance(x, (list, tuple)):
        return [encode(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"cannot keep a {type(x).__name__} in a claim's data")


def decode(x):
    """The inverse of :func:`encode` (lists stay lists)."""
    if isinstance(x, list):
        return [decode(v) for v in x]
    if isinstance(x, dict) and "dict" in x:
        return {k: decode(v) for k, v in x["dict"]}
    if isinstance(x, dict) and "array" in x:
        raw, shape = zlib.decompress(base64.b64decode(x["zlib"])), tuple(x["shape"])
        if x["array"] == "bool":
            return np.unpackbits(np.frombuffer(raw, np.uint8), count=int(np.prod(shape))).astype(bool).reshape(shape)
        return np.frombuffer(raw, np.dtype(x["array"])).reshape(shape).copy()
    return x


def pack(effect, untestable, digits: int, seeds: list[int] | None) -> dict | None:
    """What a claim's record keeps to decide it again: the effect's inputs (:func:`captured`), the guard's inputs
    (:class:`Untestable`), the digits shown and the training seed of each entry (``None`` when the builder's
    entries are not one per seed of the notebook, e.g. a claim decided on the first seed only: it re-decides, but
    does not merge). ``None`` when the effect was not computed by a captured builder."""
    inputs = getattr(effect, "inputs", None)
    if inputs is None:
        return None
    guard = getattr(untestable, "inputs", None)
    data = {"format": FORMAT, "seeds": None, "digits": digits, "effect": encode(inputs),
            "guard": None if guard is None else encode(guard)}
    return with_seeds(data, seeds, inputs)


def with_seeds(data: dict, seeds: list[int] | None, inputs: dict | None = None) -> dict:
    """``data`` with its entries' training seeds, when it has one entry per seed of ``seeds`` (else unchanged)."""
    inputs = decode(data["effect"]) if inputs is None else inputs
    n = {len(a) for a in inputs["args"] if isinstance(a, list)}
    if seeds is not None and n == {len(seeds)}:
        data = {**data, "seeds": [int(s) for s in seeds]}
    return data


def decide(data: dict, builders: dict, guard, margin: float = 0.0):
    """The claim's effect (an ``Interval``) and why it is untestable ("" when it is not), computed again from the
    data :func:`pack` kept by today's ``builders`` (by name: ``claims.BUILDERS_BY_NAME``) and ``guard``
    (``claims.untestable_unless_lost``, with the claim's ``margin``)."""
    if data.get("format") != FORMAT:
        raise DataError(f"a claim's data of format {data.get('format')!r}: this code reads format {FORMAT}")
    inputs = decode(data["effect"])
    effect = builders[inputs["builder"]](*inputs["args"], **inputs["kwargs"])
    kept = decode(data["guard"]) if data.get("guard") else None
    untestable = ""
    if kept is not None:
        losses = {k: builders[v["builder"]](*v["args"], **v["kwargs"]) for k, v in kept["losses"].items()}
        untestable = guard(losses, kept["what"], kept["beyond"], margin)
    return effect, str(untestable)


def _join(a, b, order):
    """Two parts' inputs joined seed by seed (``order``: the merged seeds' indices into a + b), settings shared."""
    if a["builder"] != b["builder"]:
        raise DataError(f"decided by {a['builder']} in one part and {b['builder']} in the other")
    if len(a["args"]) != len(b["args"]) or a["kwargs"] != b["kwargs"]:
        raise DataError(f"{a['builder']}: the parts' settings differ ({a['kwargs']} and {b['kwargs']})")
    args = []
    for x, y in zip(a["args"], b["args"]):
        if isinstance(x, list):
            both = x + y
            args.append([both[i] for i in order])
        elif x != y:
            raise DataError(f"{a['builder']}: the parts' setting {x!r} differs from {y!r}")
        else:
            args.append(x)
    return {"builder": a["builder"], "args": args, "kwargs": a["kwargs"]}


def merge(a: dict, b: dict) -> dict:
    """One claim's data from two parts with different seeds, ordered by seed id, as one run of all those seeds
    would have recorded it. A part whose entries are not one per seed, or seeds in both parts, are refused
    (:func:`merge`'s callers leave out seeds already recorded before they merge)."""
    if a.get("seeds") is None or b.get("seeds") is None:
        raise DataError("decided on fewer seeds than its run trained (not one entry per seed): it cannot merge")
    twice = sorted(set(a["seeds"]) & set(b["seeds"]))
    if twice:
        raise DataError(f"seed(s) {', '.join(map(str, twice))} in both parts")
    seeds = a["seeds"] + b["seeds"]
    order = sorted(range(len(seeds)), key=seeds.__getitem__)
    effect = _join(decode(a["effect"]), decode(b["effect"]), order)
    guard = None
    if a.get("guard") or b.get("guard"):
        ga, gb = decode(a["guard"]), decode(b["guard"])
        if set(ga["losses"]) != set(gb["losses"]):
            raise DataError("the parts' guards read different models")
        guard = {**ga, "losses": {k: _join(ga["losses"][k], gb["losses"][k], order) for k in ga["losses"]}}
    return {"format": FORMAT, "seeds": [seeds[i] for i in order], "digits": a["digits"], "effect": encode(effect),
            "guard": None if guard is None else encode(guard)}


def subset(data: dict, seeds: list[int]) -> dict:
    """``data`` with only the entries of ``seeds`` (in their recorded order)."""
    if data.get("seeds") is None:
        raise DataError("decided on fewer seeds than its run trained (not one entry per seed): it cannot be split")
    index = [i for i, s in enumerate(data["seeds"]) if s in set(seeds)]

    def pick(inputs):
        return {**inputs, "args": [[a[i] for i in index] if isinstance(a, list) else a for a in inputs["args"]]}

    guard = decode(data["guard"]) if data.get("guard") else None
    if guard is not None:
        guard = {**guard, "losses": {k: pick(v) for k, v in guard["losses"].items()}}
    return {**data, "seeds": [data["seeds"][i] for i in index], "effect": encode(pick(decode(data["effect"]))),
            "guard": None if guard is None else encode(guard)}
