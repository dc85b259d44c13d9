"""Computing the notebooks' jobs: on this machine's cores or GPUs (``scheduler``), as Slurm jobs (``cluster``,
``cluster_jobs``, ``cluster_states``), their cost before they run (``plan``, the ``plan`` command) and the short
measured run before a GPU profile (``pilot``)."""
