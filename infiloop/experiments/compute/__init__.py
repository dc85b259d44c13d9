"""Computing the notebooks' jobs: on this machine's cores or GPUs (``scheduler``, its ``slots`` and warm ``worker``
processes), or as Slurm jobs (``cluster``, ``cluster_jobs``, ``cluster_nodes``, ``cluster_states``). What a job costs
is the cost model's (``experiments/cost/``), which nothing here imports: the callers pass the prices in (a job's
FLOPs to the scheduler's order, the seconds of ``cost.estimates`` to a cluster's time limits and a study's order)."""
