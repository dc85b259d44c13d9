"""A training of two gloo processes reduces its gradients once per step, compiled or not (``training/ddp.py``):
with micro-batches every chunk but the last runs under DDP's ``no_sync()``, on the compiled path too (a compiled
DDP module runs DDP's forward eagerly around the compiled inner module); and the puzzle embedding trained by its
own sign-SGD stays out of DDP's dense all-reduce (its touched rows are reduced alone), the weights equal to one
process's. The syncs are counted by a comm hook on the DDP module. Compiled here with Dynamo's ``eager`` backend
(the same DDP path as Inductor's, without minutes of C++ compilation on a CPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import functools, json, os, sys, torch, torch.distributed as dist
from safetensors.torch import save_file
sys.path.insert(0, {root!r})
torch.set_num_threads(1)
torch.compile = functools.partial(torch.compile, backend="eager")
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from infiloop.experiments.store.runs import resolve
from infiloop.training import train

buckets = []  # (bucket index, values) of every bucket DDP all-reduced, in order


def counted(state, bucket):
    buckets.append((bucket.index(), bucket.buffer().numel()))
    return allreduce_hook(None, bucket)


class Counting(torch.nn.parallel.DistributedDataParallel):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.register_comm_hook(None, counted)


torch.nn.parallel.DistributedDataParallel = Counting
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    dist.init_process_group("gloo")
run = resolve("sudoku", "infiloop", "smoke", {{"train.steps": 3, "train.ema": 0.0, "model.puzzle_emb_len": 1,
                                              "model.d_model": 32, "train.warmup_steps": 1,
                                              **json.loads(sys.argv[2])}})
out = sys.argv[1]
_, model = train(run.model_config(), run.train_config(), run.train_data(), out, progress=False, return_model=True)
rank = dist.get_rank() if world > 1 else 0
save_file({{k: v.contiguous() for k, v in model.state_dict().items()}}, os.path.join(out, f"rank{{rank}}.safetensors"))
dense = sum(p.numel() for n, p in model.named_parameters() if p.requires_grad and not n.startswith("puzzle_emb"))
with open(os.path.join(out, f"rank{{rank}}.json"), "w") as f:
    json.dump({{"buckets": buckets, "dense": dense, "emb": model.puzzle_emb.weight.numel()}}, f)
if world > 1:  # the gloo teardown of the entry points (machine.leave_process_group): no abort at finalization
    from infiloop.machine import end_process, leave_process_group
    leave_process_group()
    end_process(0)
"""


def _syncs(record: dict) -> list[int]:
    """The values all-reduced by each of DDP's gradient syncs (a sync: its buckets from index 0 on)."""
    out: list[int] = []
    for index, n in record["buckets"]:
        if index == 0:
            out.append(0)
        out[-1] += n
    return out


def _launch(script: Path, out: Path, settings: dict, port: int | None = None) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
                if port else [sys.executable])
    done = subprocess.run([*launcher, str(script), str(out), json.dumps(settings)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow  # three trainings of three steps, two of them two processes under torchrun: about 60 s
def test_one_gradient_all_reduce_per_step_compiled_or_not_and_the_puzzle_embedding_apart(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    _launch(script, tmp_path / "one", {"train.micro_batch": 3})
    one = load_file(tmp_path / "one" / "rank0.safetensors")
    for port, compiled in ((29561, "off"), (29562, "on")):
        out = tmp_path / compiled
        _launch(script, out, {"train.micro_batch": 3, "train.compile": compiled}, port)
        for rank in (0, 1):
            record = json.loads((out / f"rank{rank}.json").read_text())
            # 16 slots a process in chunks of 3: six chunks, one sync a step, of the dense parameters alone
            assert _syncs(record) == [record["dense"]] * 3, (compiled, rank, _syncs(record)[:8])
        r0, r1 = (load_file(out / f"rank{r}.safetensors") for r in (0, 1))
        assert r0.keys() == one.keys()
        for k in one:
            assert torch.equal(r0[k], r1[k]), (compiled, k)
            assert torch.allclose(r0[k], one[k], atol=1e-5, rtol=1e-4), (compiled, k)
        assert not torch.equal(r0["puzzle_emb.weight"], torch.zeros_like(r0["puzzle_emb.weight"]))  # it trained


def test_the_gpu_memory_model_counts_ddps_buckets_without_the_puzzle_embedding():
    """With several processes DDP keeps a copy of the gradients it all-reduces (its buckets): the memory model counts
    it, without the puzzle embedding's rows where its sign-SGD trains it (reduced apart, a row per puzzle)."""
    from infiloop.experiments.store.runs import resolve
    from infiloop.training import memory

    run = resolve("sudoku", "infiloop", "smoke", {"model.puzzle_emb_len": 1})
    model_cfg, train_cfg = run.model_config().replace(n_puzzles=100_000), run.train_config()
    total, emb = memory._param_bytes(model_cfg)
    assert emb == 100_000 * model_cfg.d_model * 4 and train_cfg.puzzle_emb_optimizer == "sign_sgd"
    one, two = (memory.train_memory(model_cfg, train_cfg, on_cuda=True, world=w) for w in (1, 2))
    assert one.buckets == 0 and two.buckets == total - emb
    assert two.state == one.state + total - emb
