"""The paper's side: its reported numbers (``paper``), the analyses of evaluation trajectories
(``trajectories``), intervals over seeds and puzzles (``intervals``), figures (``plotting``) and the animated loop
(``animation``). Reads trajectories and training records as data; knows nothing of run folders.
"""
