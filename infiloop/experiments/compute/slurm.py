"""The ``slurm`` executor (``executors.py``): a Slurm job per training, evaluation and bundle of looped decoders,
through submitit (``cluster.py``, docs/cluster.md). Its options, its settings refused in one line before any data is
built, and the compute stage as cluster jobs.

The jobs run on the nodes, not here: the notebooks and the report run once every job is done (``--wait``, or the
same command again later; it submits nothing twice).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from ... import paths
from ...errors import UsageError
from ...io import lock_problem
from .cluster import CLUSTERS, describe, run_cluster
from .cluster_jobs import ClusterConfig, clock, read_config, say, submitit
from .cluster_nodes import fit
from .executors import register

CPU_BUILD = ("--executor slurm: the jobs run this interpreter ({python}) on the nodes, and its PyTorch {version} is a "
             "CPU build, so every {device} job would fail (\"Torch not compiled with CUDA enabled\"); install the "
             "CUDA build: ./reproduce.sh setup --cuda (in .venv; or pip install --force-reinstall 'torch>=2.4' "
             "from PyPI), or give --device cpu")


# ------------------------------------------------------------------------------------------ the command line


def add_options(ap) -> None:
    """The Slurm executor's options (``reproduce`` and ``plan``)."""
    ap.add_argument("--cluster", choices=CLUSTERS, default="slurm",
                    help="with --executor slurm: submitit's backend; local or debug run the same jobs on this "
                         "machine (to try a setup)")
    ap.add_argument("--slurm-config", default=None, metavar="FILE",
                    help="YAML settings of the cluster's jobs (default slurm.yaml when it exists; docs/cluster.md)")
    ap.add_argument("--partition", default=None, help="Slurm partition (wins over the settings file)")
    ap.add_argument("--account", default=None, help="Slurm account (wins over the settings file)")
    ap.add_argument("--wait", action="store_true",
                    help="with --executor slurm: wait for the jobs, then run the notebooks and the report")


def settings(args, submitting: bool = True) -> ClusterConfig:
    """The cluster settings of the command line (``add_options``), once submitit is known to be installed; when
    ``submitting`` (``reproduce``, not ``plan``), once the jobs are known to be able to run
    (:func:`check_submitter`)."""
    submitit()
    cfg = read_config(args.slurm_config, args.partition, args.account)
    if submitting:
        check_submitter(args.device, args.cluster)
    return fit(cfg, args.device, getattr(args, "gpus_per_run", 1), args.cluster, submitting)


def check_submitter(device: str, cluster: str) -> None:
    """Refuse in one line what would make every job fail: CUDA jobs run by a CPU build of PyTorch (on Slurm), or
    without a usable GPU here (the local and debug clusters); a run cache where no file lock can be taken. Says in
    one line when its locks hold on one node only."""
    if device.startswith("cuda"):
        import torch

        if cluster == "slurm" and torch.version.cuda is None:
            raise UsageError(CPU_BUILD.format(python=sys.executable, version=torch.__version__, device=device))
        from ...machine import cuda_problem

        if cluster != "slurm" and (problem := cuda_problem()):
            raise UsageError(f"--device {device}: CUDA is not usable here ({problem}), and --cluster {cluster} runs "
                             "the jobs on this machine; use --device cpu")
    if cluster != "slurm":
        return
    problem = lock_problem(paths.RUNS)
    if problem and problem[0] == "none":
        raise UsageError(f"--executor slurm: the run cache {problem[1]}; every job locks its run folder there and "
                         "would fail: mount it with flock (Lustre: -o flock), or move the run cache (INFILOOP_RUNS) "
                         "to a file system that locks across nodes")
    if problem:
        say(f"warning: the run cache {problem[1]}: the submission records alone keep two jobs of one run apart")


def render(subs: list, how: str, cluster: str = "slurm") -> str:
    """``plan --executor slurm``: the jobs that would be submitted, their resources and what each waits for
    (by row number)."""
    row = {j.id: i for i, s in enumerate(subs, 1) for j in s.jobs}
    lines = [f"## {len(subs)} job(s) to submit to {cluster} (time limits from {how})",
             "  #  job                                                         GPUs tasks CPUs    limit  after"]
    for i, s in enumerate(subs, 1):
        after = ",".join(str(row[a]) for a in s.job.after if a in row) or "-"
        lines.append(f"{i:3d}  {s.label[:59]:59s} {s.gpus:4d} {s.tasks:5d} {s.parameters['cpus_per_task']:4d} "
                     f"{clock(s.timeout_min):>8s}  {after}")
    total = sum(s.timeout_min * max(1, s.gpus) for s in subs)
    lines.append(f"asked for in all: {total / 60:.1f} {'GPU' if any(s.gpus for s in subs) else 'node'}-hours of "
                 "time limits (an upper bound: a job ends when it is done)")
    return "\n".join(lines)


@dataclass(frozen=True)
class Slurm:
    name: str = "slurm"
    help: str = "a Slurm job per training and evaluation, through submitit (docs/cluster.md)"
    here: bool = False
    warm: bool = False
    priced_by: str = "seconds"  # each job's time limit

    def add_options(self, ap) -> None:
        add_options(ap)

    def check(self, args, submitting: bool = True) -> ClusterConfig:
        return settings(args, submitting)

    def compute(self, planned: list, args, settings: ClusterConfig, cost: Callable[[list], dict[str, float]]) -> dict:
        todo = [j for j in planned if not j.done]
        print(f"[reproduce] {len(todo)} of {len(planned)} jobs to run on {args.cluster} ({len(planned) - len(todo)} "
              "cached)", file=sys.stderr, flush=True)
        seconds = None if settings.time_min else cost(todo)
        memory = None if settings.mem_gb or not hasattr(cost, "memory") else cost.memory(todo)
        out = run_cluster(planned, args.profile, args.device, settings, args.cluster, args.gpus_per_run, args.wait,
                          max_running=args.jobs, seconds=seconds, memory=memory)
        if out.failed or out.skipped:
            logs = "; ".join(f"{k}: {v}" for k, v in out.failed.items())
            raise RuntimeError(f"{len(out.failed)} cluster jobs failed ({logs}), {len(out.skipped)} not started; run "
                               "the same command again to resubmit them")
        return describe(out)


register(Slurm())
