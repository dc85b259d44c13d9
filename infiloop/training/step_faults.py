"""What a training step does when the device fails it: a compiler that fails (the step falls back to eager mode) and
memory that runs out (the micro-batch is halved, then one line naming the setting to change); the trainer's
``_gradients`` decides, these tell the cases apart and word the error."""

from __future__ import annotations

import torch

from ..errors import UsageError


def is_compile_error(e: BaseException) -> bool:
    """Whether ``e`` is a failure of ``torch.compile`` (Dynamo's tracing, AOTAutograd, Inductor's code
    generation or the backend compiler: Triton, a C++ compiler) rather than of the computation it runs."""
    from torch._dynamo.exc import TorchDynamoException

    module = type(e).__module__ or ""
    return isinstance(e, TorchDynamoException) or module.startswith(("torch._inductor", "torch._dynamo", "triton"))


def caused_by_oom(e: BaseException) -> bool:
    """Whether ``e`` is, or wraps (a compiler error raised while autotuning, say), an out-of-memory error."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, torch.OutOfMemoryError):
            return True
        seen.add(id(e))
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return False


def out_of_memory(run: str, batch: int, world: int, micro_batch: int, device: torch.device) -> UsageError:
    """The one-line error of a step that ran out of device memory at ``micro_batch`` slots a chunk: the batch and the
    setting to change."""
    cuda = device.type == "cuda"
    where = torch.cuda.get_device_name(device) if cuda else str(device)
    fix = (f"set train.micro_batch={micro_batch // 2} (or lower) to accumulate the same batch in smaller pieces"
           if micro_batch > 1 else "one slot at a time does not fit either: use a smaller model or a device with "
                                   "more memory")
    return UsageError(f"{run}: {'CUDA' if cuda else device.type} out of memory at train.batch_size={batch} (per "
                      f"process {batch // world}, micro-batch {micro_batch}) on {where}: {fix}")
