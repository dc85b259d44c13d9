"""How settings are read: the configuration dataclasses from plain data, and ``--set KEY=VALUE`` of ``train``
and of ``data build``.

:func:`from_dict` builds a configuration dataclass (``ModelConfig``, ``ConnectionConfig``, ``ConditionConfig``,
``TrainConfig``) from plain data such as a run's ``config.json``: an unknown key is refused with the valid ones
(:func:`reject_unknown_fields`), a nested dataclass is built from its mapping, a list becomes a tuple where the
field is a tuple. ``dataclasses.asdict`` is the way back.


A value is read by the type of the setting it goes to, so that a documented example cannot be misread:

- a number in any notation (``3e-4``, ``1E3``, ``.5``, ``1_000``) is a number; ``nan`` and ``inf`` are not
  accepted where a number is expected;
- ``true``/``false`` are booleans and ``null``/``~`` is none; ``[...]`` and ``{...}`` are read as YAML lists
  and mappings, a quoted value as a YAML string;
- a setting whose type is a string keeps the text as written (``train.compile=off`` stays ``"off"``).

A value of the wrong type is refused with a message that names the key: ``--set model.outer.beta=abc:
expected a number``. Types come from the fields of the configuration dataclasses, or, for plain
settings (``data.*``, ``eval.*``), from the type of the default value.

How a setting enters a run's hash is declared on its field (:func:`hash_rule`, read by :func:`hashed_settings`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any, Union

import yaml

from .errors import UsageError

_NUMBER = re.compile(r"[+-]?(\d[\d_]*(\.[\d_]*)?|\.\d[\d_]*)([eE][+-]?\d+)?")


def parse_value(text: str) -> Any:
    """The value of ``--set KEY=TEXT`` when nothing is known about the setting's type (see the module)."""
    s = text.strip()
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~"):
        return None
    if _NUMBER.fullmatch(s):
        try:
            return int(s)
        except ValueError:
            return float(s)
    if s[:1] in "[{\"'":
        try:
            return _numbers(yaml.safe_load(s))
        except yaml.YAMLError as e:
            raise UsageError(f"{text!r}: not a valid YAML list, mapping or quoted string "
                             f"({str(e).splitlines()[0]})") from None
    return text


def _numbers(v: Any) -> Any:
    """Numbers written as text inside a YAML list or mapping (YAML 1.1 reads ``3e-4`` as text)."""
    if isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
        return parse_value(v)
    if isinstance(v, list):
        return [_numbers(x) for x in v]
    if isinstance(v, dict):
        return {k: _numbers(x) for k, x in v.items()}
    return v


def parse_setting(item: str) -> tuple[str, str]:
    """``"KEY=VALUE"`` -> ``(KEY, VALUE)``, both as text (the value is read by :func:`coerce`)."""
    if "=" not in item:
        raise UsageError(f"--set {item}: expected KEY=VALUE, e.g. model.outer.beta=0.1")
    key, value = item.split("=", 1)
    if not key.strip():
        raise UsageError(f"--set {item}: the key before '=' is empty")
    return key.strip(), value


class _Mismatch(Exception):
    def __init__(self, expected: str):
        self.expected = expected


def coerce(key: str, value: Any, hint: Any) -> Any:
    """``value`` (text from the command line, or a Python value) as a setting of type ``hint``.

    Raises :class:`UsageError` naming ``--set key=value`` and the type expected."""
    try:
        if isinstance(value, str):
            return _convert(_read(value, hint), hint)
        return _convert(value, hint)
    except _Mismatch as m:
        raise UsageError(f"--set {key}={value}: expected {m.expected}") from None
    except UsageError as e:
        raise UsageError(f"--set {key}: {e}") from None


def _read(text: str, hint: Any) -> Any:
    """Text as the type ``hint`` wants: strings stay as written (unless quoted), the rest is parsed."""
    members, s = _members(hint), text.strip()
    if str in members and not (s[:1] in "\"'" or s.lower() in ("null", "~")):
        return text
    if type(None) in members and s.lower() == "none":
        return None
    return parse_value(text)


def _members(hint: Any) -> tuple:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _convert(value: Any, hint: Any) -> Any:
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        expected = []
        for a in (a for a in args if a is not type(None)):
            try:
                return _convert(value, a)
            except _Mismatch as m:
                expected.append(m.expected)
        raise _Mismatch(" or ".join(expected + (["null"] if type(None) in args else [])))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch("true or false")
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch("an integer")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value  # an int stays an int: the run's hash is what it was before this check
        raise _Mismatch("a number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Mismatch("a string")
    if origin in (tuple, list) or hint in (tuple, list):
        return _sequence(value, args)
    if dataclasses.is_dataclass(hint) or hint is dict or origin is dict:
        if isinstance(value, dict):
            return value
        raise _Mismatch("a mapping {key: value, ...}")
    return value


def _sequence(value: Any, args: tuple) -> list:
    if not isinstance(value, (list, tuple)):
        raise _Mismatch("a list like [1, 2]")
    if not args:
        return list(value)
    if len(args) == 2 and args[1] is Ellipsis:
        return [_convert(v, args[0]) for v in value]
    if len(value) != len(args):
        raise _Mismatch(f"a list of {len(args)} values")
    return [_convert(v, a) for v, a in zip(value, args)]


def reject_unknown_fields(cls, d: dict, where: str) -> None:
    """Raise a ValueError naming ``where``, the unknown keys of ``d`` and the fields of dataclass ``cls``."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; valid fields: {sorted(known)}")


def from_dict(cls: type, d: dict, where: str) -> Any:
    """The dataclass ``cls`` from plain data ``d`` (see the module); ``where`` names it in messages
    (``model``, ``model.inner``, ``train``)."""
    reject_unknown_fields(cls, d, where)
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in d.items():
        hint = hints.get(name, Any)
        if isinstance(value, dict) and dataclasses.is_dataclass(hint):
            value = from_dict(hint, value, f"{where}.{name}")
        elif isinstance(value, list) and any(m is tuple or typing.get_origin(m) is tuple for m in _members(hint)):
            value = tuple(value)
        values[name] = value
    return cls(**values)


def field_type(cls: type, path: list[str]) -> Any:
    """The type of the field at ``path`` in dataclass ``cls`` (nested dataclasses followed), or ``Any``."""
    hint: Any = cls
    for name in path:
        if not dataclasses.is_dataclass(hint):
            return Any
        hint = typing.get_type_hints(hint).get(name, Any)
    return hint


def type_of_default(default: Any) -> Any:
    """The type a plain setting's value must have, from its default (``None``: anything)."""
    if default is None:
        return Any
    if isinstance(default, (list, tuple)):
        return list
    return type(default)


# ------------------------------------------------------------------------------------ what a run's hash covers

def hash_rule(*, hashed: bool = True, at_default: bool = False, neutral: Any = dataclasses.MISSING,
              only_for: tuple[str, ...] = (), idle_with_outer: tuple[str, ...] = ()) -> dict:
    """The metadata of a configuration field that says how it enters a run's hash (``recipes.config_hash``), e.g.
    ``progressive: float = field(default=0.0, metadata=hash_rule(neutral=0.0))``. A field without it is hashed as it is.

    hashed=False: never (how the same update is computed: CPU threads, the micro-batch);
    at_default: hashed at its default whatever its value (so that the runs cached before it existed keep their folders);
    neutral: a setting added after runs were cached, left out at the value that reproduces those runs, so that adding
        it trains nothing again (a new setting needs it, or every cached run's hash moves);
    only_for: a connection's setting, left out where the connection on its axis is none of these;
    idle_with_outer: left out where the outer connection is one of these (the setting does nothing there).
    """
    rule = {"hashed": hashed, "at_default": at_default, "only_for": tuple(only_for),
            "idle_with_outer": tuple(idle_with_outer)}
    if neutral is not dataclasses.MISSING:
        rule["neutral"] = neutral
    return {"hash": rule}


def hashed_settings(node: dict, cls: type, outer: str | None) -> None:
    """Apply the hash rules of dataclass ``cls``'s fields (:func:`hash_rule`) to its settings ``node`` (plain data, in
    place, nested dataclasses followed); ``outer``: the name of the run's outer connection."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in node:  # a configuration written before the field existed
            continue
        value, rule = node[f.name], f.metadata.get("hash", {})
        if dataclasses.is_dataclass(hints.get(f.name)) and isinstance(value, dict):
            hashed_settings(value, hints[f.name], outer)
        if rule.get("at_default"):
            node[f.name] = f.default
        elif (not rule.get("hashed", True) or ("neutral" in rule and value == rule["neutral"])
              or (rule.get("only_for") and node.get("name") not in rule["only_for"])
              or outer in rule.get("idle_with_outer", ())):
            del node[f.name]
