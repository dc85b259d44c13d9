"""The loop connections by name (``model.inner.name``, ``model.outer.name``): each one's class, label, colour and
recipe, one entry read by the model (``connections.build_connection``), the recipes (``experiments/settings/
recipes.py``) and, through ``infiloop/labels.py``, the figures.

``model/connections.py`` registers the package's own members when it is imported (with the package:
``infiloop/__init__.py``); :func:`register_connection` adds any other from one file (``tests/test_connection_seam.py``
adds a toy one).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .. import labels


@dataclasses.dataclass(frozen=True)
class ConnectionEntry:
    """member: the connection's class (a ``connections.Connection``); label and color: its name and colour in every
    figure and table; recipe: the model settings that make a model use it, the experiments' recipe of the same name,
    or None where it has no recipe of its own."""

    member: type
    label: str
    color: str
    recipe: dict | None


CONNECTION_REGISTRY: dict[str, ConnectionEntry] = {}


def on_both_axes(name: str, **settings: Any) -> dict:
    """The recipe of a connection on both recurrent axes: ``{"inner": {"name": name, ...}, "outer": {...}}``."""
    return {"inner": {"name": name, **settings}, "outer": {"name": name, **settings}}


def register_connection(name: str, member: type, *, label: str, color: str, recipe: dict | None) -> None:
    """Make the connection class ``member`` known as ``name``: buildable (``connections.build_connection``), drawn
    with ``label`` and ``color``, and trained by the recipe ``name`` with the model settings ``recipe`` (e.g.
    ``on_both_axes(name)``; None: no recipe). A name is registered once (:func:`unregister_connection`)."""
    if name in CONNECTION_REGISTRY:
        raise ValueError(f"connection {name!r} is registered already (by {CONNECTION_REGISTRY[name].member.__name__})")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"connection name {name!r}: use lower-case letters, digits and '_' (a run folder holds it)")
    CONNECTION_REGISTRY[name] = ConnectionEntry(member, label, color, recipe)
    labels.CONNECTIONS[name] = labels.Style(label, color)


def unregister_connection(name: str) -> None:
    """Forget the connection ``name`` (a test's own connection, once it has been tried)."""
    CONNECTION_REGISTRY.pop(name, None)
    labels.CONNECTIONS.pop(name, None)
