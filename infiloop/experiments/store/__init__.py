"""The run store: a trained run and its cached evaluations (``runs``: :class:`~.runs.Run`), and the archives that
carry runs between machines (``archives``: export, import, pull, list, prune)."""
