"""How figures and tables name and colour each loop connection, by the connection's name: plain data, written by
``model.registry.register_connection`` as each connection is registered, so that ``analysis`` (which imports
nothing of the model) draws every registered connection, a user's too, with the label and colour it was given."""

from __future__ import annotations

from typing import NamedTuple


class Style(NamedTuple):
    label: str
    color: str


CONNECTIONS: dict[str, Style] = {}  # in the order of registration
