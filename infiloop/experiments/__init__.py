"""The experiment machinery: what a profile trains (``profiles``, ``recipes``), the run cache (``cache``) and its
archives (``archives``), the jobs of each notebook (``jobs``), their cost (``cost``), the scheduler that runs them
on this machine (``scheduler``) or as Slurm jobs (``cluster``), the pipeline of ``./reproduce.sh``
(``pipeline``), the notebooks' helper (``notebook``), the report (``report``), and the studies run through the
same machinery: the search for the paper's contrast (``contrasts``), the study of the learned connection
(``connection_study``) and the looped decoder's training and probe (``looplm``). ``envcheck`` keeps
``environment.yml`` resolvable.
"""
