"""The run store: a trained run (``runs``: :class:`~.runs.Run`) and its cached evaluations (``eval_cache``), the
archives that carry runs between machines (``archives``: export, import; ``members``: an archive's members, read
without extracting them), the hub's runs (``hub``: pull) and the run cache's inventory (``inventory``: list, prune)."""
