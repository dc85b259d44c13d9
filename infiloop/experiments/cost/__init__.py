"""The cost model: what each job of the compute stage costs before it runs, in FLOPs and in seconds on a device.

The run path (``compute/``, ``store/``, ``training/``, ``evaluation.py``, the model) does not import this package:
its callers (``pipeline.py``, ``studies/study.py``, the ``plan`` command) price the jobs here and pass the prices in,
a FLOP count to the scheduler's order, the seconds of :func:`estimates` to a cluster's time limits and a study's
order (tests/test_cost_leaf.py holds this). One idea a module:

- ``flops.py``: the FLOPs of every job (a reasoner's training and evaluation, a looped decoder's job);
- ``timer.py``: what a timer answers (``Timing``) and the ``Timer`` protocol;
- ``measure.py``: the timer that measures steps and updates on this device (``MeasuredTimer``);
- ``processes.py``: the timings of whole processes (a job's start, warm workers, the slow-down beside other jobs);
- ``arithmetic.py``: seconds from FLOPs at a rate (``FlopTimer``; ``FlopCalibration`` for a GPU that is not here);
- ``calibration.py``: the cache of measured timings, by device, torch version and shape;
- ``plan.py``: what a plan holds, its estimate and the compute stage's wall time;
- ``declared.py``: a plan from the declarations alone, no data built;
- ``memory.py``: the plan's memory section (each GPU job's peak, from ``training/memory.py``, beside the device's);
- ``command.py``: the ``plan`` command and the GPU offer; ``pilot.py``: the ``pilot`` command.
"""


def estimates(jobs: list, device: str, slots: int = 1, tflops: float | None = None) -> tuple[dict[str, float], str]:
    """Estimated seconds of each of ``jobs`` (by id, on ``slots`` slots), and how they were made: the plan's
    calibration when this machine has ``device`` (a timing it lacks measured here and kept), else the jobs' FLOPs at
    ``tflops`` TFLOP/s in bf16 (default ``flops.ASSUMED_GPU_TFLOPS``), at its share at a job's own precision
    (``flops.gpu_seconds``: the looped decoders in float32)."""
    from ...machine import cuda_problem
    from .flops import ASSUMED_GPU_TFLOPS, gpu_seconds
    from .plan import job_seconds

    if not device.startswith("cuda") or cuda_problem() is None:
        return job_seconds(jobs, device, slots), f"the plan's calibration on this machine's {device}"
    tflops = tflops or ASSUMED_GPU_TFLOPS
    return ({j.id: gpu_seconds(j, tflops) for j in jobs},
            f"FLOPs at {tflops:g} TFLOP/s (no GPU here to measure; set tflops or time_min in the settings), the "
            "float32 jobs (looped decoders) at its float32 share")
