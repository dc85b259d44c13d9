"""Warm workers: one long-lived Python process per slot of the compute stage, which imports torch and the package
once and then runs the scheduler's jobs one after another, each as the new process it replaces would have run it.

Why. A job run as a new process (``python -m infiloop.experiments.compute.job ...``) imports the interpreter, torch
and the package again, for each of the default profile's 53 jobs. A warm worker pays that once per slot.

- **Protocol.** The scheduler (:class:`Pool`) starts ``python -m infiloop.experiments.compute.worker`` with the
  slot's environment and writes one JSON line per job on its stdin: the job itself (``job.JobRun``: its kind, typed
  settings, device and threads), its environment, its log and whether and what it compiles. The worker runs it by a
  call (:meth:`~infiloop.experiments.compute.job.JobRun.run`: no command line is parsed) and answers one line
  ``{"status": N}`` on its stdout when it has ended: the exit status the new process would have had (0; for an
  error its one ``error:`` line in the log and the status ``errors.exit_status`` gives it; a ``SystemExit``'s code).
- **Each job as a new process** (:class:`Baseline`): the job's environment (``os.environ``, ``paths``' folders), the
  working folder, ``sys.argv`` (as ``python -m infiloop.experiments.compute.job`` would have it), torch's threads, a
  new random seed for torch, numpy and ``random`` (a new process draws one: no job may rely on it), grad mode, default
  dtype, float32 matmul precision, deterministic algorithms and cuDNN's flags, and the warning filters are set back to
  what the worker started with before every job. The job's stdout and stderr file descriptors point to its log for its
  duration (C extensions included), after a header line that gives the command which runs the same job as a new
  process.
- **Reused across jobs** (nothing that changes a result): imported modules (frozen out of the garbage collector's
  walks, ``gc.freeze``: a job's own objects are collected after it as before), Inductor's compiled kernels (on disk,
  ``paths.inductor_cache``, for the fresh path too), and Dynamo's compiled code of a training between consecutive
  trainings of the same shape (:class:`CompiledShapes`).
- **Failures.** A job that raises or returns non-zero is reported failed and the worker goes on. A job that kills
  its worker (a crash, a signal, running out of memory) fails alone: its log says how the worker ended, and the
  slot's next job starts a new worker. A worker runs only jobs of the environment it was started with (the CUDA
  device of its slot, above all): a job with another environment gets a new worker.

Not warm: a multi-GPU training (``torchrun``, one process per device) stays a new process, as does everything with
``run_jobs(..., fresh_process=True)`` (``reproduce --executor process``).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import random
import select
import shlex
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from . import job as job_module

MODULE = "infiloop.experiments.compute.worker"
# What a job imports, imported by the worker before its first job, once (no command-line module among them).
JOB_MODULES = ("infiloop.training", "infiloop.evaluation",
               "infiloop.experiments.store.runs", "infiloop.experiments.looplm")
STOP_WAIT_S = 10.0  # how long a worker told to stop may take before it is killed


def import_job_modules() -> None:
    """Import every module a job needs (the fixed cost a warm worker pays once): torch, the job, training,
    evaluation, the run cache and the looped decoders."""
    for name in JOB_MODULES:
        importlib.import_module(name)


# ------------------------------------------------------------------------------------------ in the worker


@dataclass
class Baseline:
    """The process-wide state a new process starts with, taken when the worker has imported its modules, and set
    again before each job (:meth:`restore`)."""

    cwd: str
    threads: int
    dtype: object
    matmul: str
    deterministic: tuple[bool, bool]  # enabled, warn only
    cudnn: tuple[bool, bool, bool]  # benchmark, deterministic, allow_tf32
    cuda_tf32: bool
    warning_filters: list

    @classmethod
    def take(cls) -> Baseline:
        import torch

        cudnn = torch.backends.cudnn
        return cls(os.getcwd(), torch.get_num_threads(), torch.get_default_dtype(),
                   torch.get_float32_matmul_precision(), (torch.are_deterministic_algorithms_enabled(),
                    torch.is_deterministic_algorithms_warn_only_enabled()),
                   (cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32), torch.backends.cuda.matmul.allow_tf32,
                   list(warnings.filters))

    def restore(self, env: dict, argv: list[str]) -> None:
        """This process as a new one started with ``env`` and ``argv``: see the module docstring."""
        import numpy as np
        import torch

        from ... import paths

        os.environ.clear()
        os.environ.update(env)
        paths.read_environment()
        os.chdir(self.cwd)
        sys.argv = list(argv)
        warnings.filters[:] = self.warning_filters
        torch.set_num_threads(self.threads)
        torch.seed()  # a new process's torch generators start from a non-deterministic seed, as here
        np.random.seed()  # noqa: NPY002 - the legacy global generator, which a new process seeds from entropy
        random.seed()
        torch.set_grad_enabled(True)
        torch.set_default_dtype(self.dtype)
        torch.set_float32_matmul_precision(self.matmul)
        torch.use_deterministic_algorithms(self.deterministic[0], warn_only=self.deterministic[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32 = self.cudnn
        torch.backends.cuda.matmul.allow_tf32 = self.cuda_tf32


class CompiledShapes:
    """Dynamo's compiled code kept between consecutive compiled trainings of one shape, and dropped otherwise.

    A training compiles its model's forward (``training.trainer._Trainer``); Dynamo keeps the compiled code in the
    process, guarded by the inputs' shapes and the model's settings, and a later model of the same shape would reuse it
    without compiling again. That is the same code a new process would compile for it (and Inductor's kernels for it
    are on disk either way) only while the shapes never varied: Dynamo compiles a graph for the first shapes it
    sees and, when they vary, recompiles with those dimensions dynamic; a later job would then start with both. So
    code is kept only for a training whose ``shape`` (``compile_shape``: model, data, batch, micro-batch, precision,
    device) is that of the worker's last compiled training and whose chunks are all of one size (``shape`` is None
    otherwise); every other compiled training starts from an empty Dynamo cache, as in a new process. Jobs that
    compile nothing (evaluations, trainings on the CPU) leave it as it is."""

    def __init__(self):
        self.last: str | None = None
        self.reused = 0  # trainings that started with their shape's compiled code (counted for the tests)

    def before(self, compiles: bool, shape: str | None) -> None:
        if not compiles:
            return
        if shape is not None and shape == self.last:
            self.reused += 1
            return
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].reset()
        self.last = shape


@contextlib.contextmanager
def output_to(log: Path):
    """File descriptors 1 and 2 (and so ``sys.stdout``, ``sys.stderr`` and C code's output) appended to ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)


def run_job(job) -> int:
    """Run ``job`` (a ``job.JobRun``) in this process, and the exit status a new process would have had: an error
    is one ``error:`` line in the log (``errors.run_command``, as ``python -m infiloop.experiments.compute.job``)."""
    from ...errors import run_command

    try:
        status = run_command(lambda _: job.run() or 0, [])
    except SystemExit as e:  # a job that exits: the status Python gives it
        status = e.code
        if status is not None and not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
    return int(status or 0)


def serve() -> int:
    """The worker's loop: a request per line of stdin, an answer per line of stdout, until stdin ends."""
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    with open(os.devnull) as null:  # a job reads no input; the requests are not its to read
        os.dup2(null.fileno(), 0)
    os.dup2(2, 1)  # anything printed between jobs goes to the worker's stderr, never into the answers
    import_job_modules()  # the fixed cost, paid once
    base, compiled = Baseline.take(), CompiledShapes()
    # The imported modules live as long as the worker: kept out of the collections between jobs, each of which
    # otherwise walks them all (85 ms a job of the 0.3-0.8 s of smoke's, 2026-12-04). A job's own objects are
    # collected as before.
    gc.freeze()
    while line := requests.readline():
        req = json.loads(line)
        job = job_module.JobRun(**req["job"])
        base.restore(req["env"], [job_module.__file__, job.to_json()])
        compiled.before(req.get("compiles", False), req.get("shape"))
        with output_to(Path(req["log"])):
            status = run_job(job)
        gc.collect()
        if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
            sys.modules["torch"].cuda.empty_cache()
        answers.write(json.dumps({"status": status, "reused": compiled.reused}) + "\n")
        answers.flush()
    gc.unfreeze()  # torn down at exit as any other process's (nanobind reports frozen objects as leaked)
    return 0


# ------------------------------------------------------------------------------------------ in the scheduler


def compile_shape(job, device: str) -> tuple[bool, str | None]:
    """Whether a job compiles (a training with ``train.compile`` on, or auto on CUDA) and the shape its compiled
    code is kept by (:class:`CompiledShapes`; None where it must not be kept: chunks of unequal size)."""
    if job.kind != "train":
        return False, None
    cfg = job.spec.run.config
    train = cfg["train"]
    mode = job.spec.overrides.get("train.compile", train["compile"])  # --no-compile sets it, outside the hash
    if not (mode == "on" or (mode == "auto" and device.startswith("cuda"))):
        return False, None
    b = train["batch_size"]
    size = min(train.get("micro_batch") or b, b)
    if b % size:
        return True, None
    shape = {"task": cfg["task"], "data": [cfg.get("data_profile"), cfg.get("data_overrides")], "model": cfg["model"],
             "batch": b, "micro_batch": size, "precision": train.get("precision"), "device": device}
    return True, json.dumps(shape, sort_keys=True, default=str)


def _ended(code: int) -> str:
    """How a process ended, in words: its exit status or the signal that killed it."""
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class Worker:
    """One warm worker process, seen from the scheduler."""

    def __init__(self, env: dict):
        self.env = env
        self.proc = subprocess.Popen([sys.executable, "-m", MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, bufsize=0)
        self.alive = True
        self.reused = 0  # the worker's count of trainings that reused compiled code, as of its last answer

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, request: dict) -> None:
        """Write one request line (every byte of it: an unbuffered pipe may take a long line in parts)."""
        data = memoryview((json.dumps(request, default=str) + "\n").encode())
        try:
            while data:
                data = data[self.proc.stdin.write(data):]
        except OSError:  # it has ended: its job is reported failed when polled
            self.alive = False

    def _answer_line(self) -> bytes | None:
        """The answer waiting on the worker's stdout (b"" at its end), or None when there is none yet."""
        ready, _, _ = select.select([self.proc.stdout], [], [], 0)
        return self.proc.stdout.readline() if ready else None

    def answer(self) -> int | None:
        """The exit status of the job the worker runs, None while it runs; a worker that has ended (or closed its
        answers) ends its job with its own exit status and is not used again (:attr:`alive`)."""
        line = self._answer_line()
        if line is None and self.proc.poll() is not None:
            line = self._answer_line()  # an answer written just before the end
        if line:
            answer = json.loads(line)
            self.reused = answer.get("reused", self.reused)
            return int(answer["status"])
        if line is None and self.proc.poll() is None:
            return None
        self.alive = False
        if self.proc.poll() is None:  # it closed its answers and lives on: it cannot be trusted
            self.proc.kill()
        return self.proc.wait()

    def hang_up(self) -> None:
        """No more requests: the worker exits after its job (:meth:`stop` waits for it)."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()

    def stop(self) -> None:
        """End the worker: no more requests (it exits), killed after :data:`STOP_WAIT_S`."""
        self.hang_up()
        try:
            self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.alive = False


class WarmJob:
    """A job running in a warm worker, polled as the scheduler polls a process (``poll()``, ``returncode``)."""

    def __init__(self, worker: Worker, log: Path):
        self.worker, self.log, self.returncode = worker, log, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.worker.answer()
            if self.returncode is not None and not self.worker.alive:
                with open(self.log, "a") as f:
                    f.write(f"\n# the warm worker (pid {self.worker.pid}) ended with {_ended(self.returncode)} while "
                            "running this job: the job failed, and its slot's next job starts a new worker\n")
        return self.returncode


class Pool:
    """The warm workers of one compute stage, one per slot, started when a slot's first job comes and replaced when
    one ends; :meth:`close` ends them all."""

    def __init__(self):
        self.workers: dict[str, Worker] = {}
        self.started = 0  # workers started (a replaced one counts again)

    def start(self, slot, job, env: dict, log: Path, compiles: bool = False, shape: str | None = None) -> WarmJob:
        """Run ``job`` (a ``job.JobRun`` on one slot) in ``slot``'s worker; its log begins with the command that runs
        the same job as a new process, and the worker's pid."""
        w = self.workers.get(slot.name)
        # a worker that has ended (while idle too) or was started for another environment is not used again
        if w is not None and (not w.alive or w.proc.poll() is not None or w.env != env):
            w.stop()
            w = None
        if w is None:
            w = self.workers[slot.name] = Worker(env)
            self.started += 1
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()}: {shlex.join(job.command())} "
                    f"(in warm worker pid {w.pid})\n")
        w.send({"job": asdict(job), "env": env, "log": str(log), "compiles": compiles, "shape": shape})
        return WarmJob(w, log)

    def close(self) -> None:
        for w in self.workers.values():  # all told at once: they end side by side, not one after another
            w.hang_up()
        for w in self.workers.values():
            w.stop()
        self.workers.clear()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    from ...machine import tune_allocator

    tune_allocator()  # as python -m infiloop does (machine.py)
    sys.exit(serve())
