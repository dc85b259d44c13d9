"""What the nodes of a Slurm partition have, and whether the jobs of ``cluster.py`` fit them.

Slurm accepts a job that asks for more CPUs than any node of its partition has, and leaves it pending for ever
(``Reason=PartitionConfig``). So before anything is submitted the partition's nodes are read (``sinfo``: the CPUs,
memory and GPUs of each), and a job that asks for more than every node has is refused in one line naming the setting
to change. Where ``cpus_per_task`` is not set, a task asks for ``DEFAULT_CPUS`` CPUs, and never more than a node
has: on a CPU profile a node's CPUs, on a GPU profile its CPUs shared by its tasks. Where ``sinfo`` cannot tell (not
installed, failing), nothing is refused and a task asks for ``DEFAULT_CPUS``; on the local and debug clusters, for
at most this machine's CPUs.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace

from ...errors import UsageError
from ...machine import usable_cpus
from .cluster_states import _query

DEFAULT_CPUS = 8  # CPUs per task where the settings set none (one task per GPU: a GPU's data loading and Python)


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mb: int
    gpus: int


def _number(text: str) -> int:
    m = re.match(r"\d+", text.strip())
    return int(m[0]) if m else 0


def _gpus(gres: str) -> int:
    """The GPUs of a node's ``Gres`` (``gpu:4``, ``gpu:a100:4(S:0-1)``, ``gpu:a100:2,gpu:v100:2``, ``(null)``)."""
    return sum(int(m[1]) for m in re.finditer(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres))


def read_nodes(partition: str) -> tuple[list[Node] | None, list[str]]:
    """The nodes of ``partition`` (the default partition when empty) and the names of all partitions, by ``sinfo``;
    ``None`` when it cannot tell."""
    if shutil.which("sinfo") is None:
        return None, []
    text, _ = _query(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%m|%G"])
    if text is None:
        return None, []
    nodes, names = {}, []
    for line in text.splitlines():
        cells = line.strip().split("|")
        if len(cells) != 5:
            continue
        name, part, cpus, memory, gres = cells
        names.append(part.rstrip("*"))
        if part.rstrip("*") == partition or (not partition and part.endswith("*")):
            nodes[name] = Node(name, _number(cpus), _number(memory), _gpus(gres))
    return list(nodes.values()), sorted(set(names))


def fit(cfg, device: str, gpus_per_run: int, cluster: str = "slurm", submitting: bool = True):
    """``cfg`` (a ``cluster_jobs.ClusterConfig``) with ``cpus_per_task`` set where the settings left it to the
    cluster (see the module docstring); when ``submitting`` to Slurm, a :class:`UsageError` for a job that no node
    of the partition can run."""
    cuda = device.startswith("cuda")
    tasks = max(1, gpus_per_run) if cuda else cfg.cpu_tasks_per_training  # the largest job: a training, a task per GPU
    nodes, names = read_nodes(cfg.partition) if cluster == "slurm" else (None, [])
    able = [n for n in nodes or () if not cuda or n.gpus >= gpus_per_run] or nodes
    if not cfg.cpus_per_task:
        most = max((n.cpus for n in able), default=0) if able else usable_cpus() if cluster != "slurm" else 0
        cpus = DEFAULT_CPUS if not most else max(1, min(DEFAULT_CPUS, most // tasks))
        cfg = replace(cfg, cpus_per_task=cpus)
    if submitting and nodes is not None:
        _refuse_unmet(cfg, nodes, names, cuda, tasks, gpus_per_run)
    return cfg


def _refuse_unmet(cfg, nodes: list[Node], names: list[str], cuda: bool, tasks: int,
                  gpus_per_run: int) -> None:
    """A :class:`UsageError` naming the setting to change when no node of the partition has what a job asks for."""
    part = f"partition {cfg.partition}" if cfg.partition else "the default partition"
    if not nodes:
        which = f"partition '{cfg.partition}'" if cfg.partition else "a default partition"
        raise UsageError(f"--executor slurm: sinfo shows no {which} (partitions: {', '.join(names) or 'none'}): set "
                         f"--partition, or partition in {cfg.where}")
    if cuda:
        most = max(n.gpus for n in nodes)
        if most < gpus_per_run:
            raise UsageError(f"--gpus-per-run {gpus_per_run}: no node of {part} has more than {most} GPU(s) (sinfo's "
                             "Gres): " + ("choose a GPU partition (--partition), or --device cpu" if not most else
                                          f"ask for {most} or fewer"))
        nodes = [n for n in nodes if n.gpus >= gpus_per_run]
    cpus = max(n.cpus for n in nodes)
    if cfg.cpus_per_task * tasks > cpus:
        per = f"{cfg.cpus_per_task} CPUs per task x {tasks} tasks" if tasks > 1 else f"{cfg.cpus_per_task} CPUs"
        raise UsageError(f"cpus_per_task={cfg.cpus_per_task} in {cfg.where}: a job would ask for {per}, and no node of "
                         f"{part} has more than {cpus} (sinfo): set cpus_per_task to {max(1, cpus // tasks)} or less")
    memory = max(n.memory_mb for n in nodes)
    if cfg.mem_gb * 1024 > memory:
        raise UsageError(f"mem_gb={cfg.mem_gb:g} in {cfg.where}: no node of {part} has more than "
                         f"{memory / 1024:.1f} GB (sinfo): set mem_gb to {int(memory // 1024)} or less (0: the "
                         "partition's default)")


__all__ = ["DEFAULT_CPUS", "Node", "fit", "read_nodes"]
