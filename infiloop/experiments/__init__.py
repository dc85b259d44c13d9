"""The experiment machinery, in rooms that follow the flow of the work:

- ``settings``: what a profile trains (``profiles``, ``recipes``);
- ``store``: the run store (``runs``: a trained run and its cached evaluations), its archives (``archives``,
  ``members``), the hub's runs (``hub``) and its inventory (``inventory``);
- ``notebooks``: what each notebook needs (``manifest``) and the notebooks' helper (``helper``);
- ``compute``: the scheduler that runs the jobs on this machine (``scheduler``) or as Slurm jobs (``cluster``);
- ``cost``: what the jobs cost before they run (``flops``, ``plan``, the ``plan`` command) and the pilot (``pilot``),
  a leaf that the run path does not import;
- ``studies``: the search for the paper's contrast (``contrasts``) and the study of the learned connection
  (``connection_study``);
- ``report``: the report page (``build``) and the README's results table (``results``);

beside them the pipeline of ``./reproduce.sh`` (``pipeline``; where a profile runs: ``placement``), the looped
decoder's study (``looplm``) and ``envcheck``, which keeps ``environment.yml`` resolvable.
"""
