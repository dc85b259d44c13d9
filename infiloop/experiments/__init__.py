"""The experiment machinery: what a profile trains (``profiles``, ``recipes``), the run cache (``cache``) and its
archives (``archives``), the jobs of each notebook (``jobs``), their cost (``cost``), the scheduler that runs them
(``scheduler``), the pipeline of ``./reproduce.sh`` (``pipeline``), the notebooks' helper (``notebook``), the
report (``report``), and the studies run through the same machinery: the search for the paper's contrast
(``contrasts``) and the study of the learned connection (``connection_study``). ``envcheck`` keeps
``environment.yml`` resolvable.
"""
