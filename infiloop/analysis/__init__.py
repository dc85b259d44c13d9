"""The paper's side: its reported numbers (``paper``), the analyses of evaluation trajectories
(``trajectories``), intervals over seeds and puzzles and the verdict rule (``intervals``, with ``quantiles``), each
claim's effect (``claims``), the coverage simulation behind the intervals (``coverage``), figures (``plotting``) and
the animated loop (``animation``). Reads trajectories and training records as data; knows nothing of run folders.
"""
