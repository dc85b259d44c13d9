"""Training with deep supervision and adaptive halting, as in TRM (the paper's training protocol).

One optimiser step runs one supervision segment (H outer updates, gradients through the last) for
every slot of the global batch. A slot holds one puzzle and its carried state; it halts when its
halting logit q_halt > 0 (with exploration: with probability ``halt_exploration`` a random minimum of
2..``max_segments`` segments) or after ``max_segments`` segments, and then takes the next puzzle of the
data stream. Loss: stable-max cross-entropy over the answer cells + ``halt_loss_weight`` x binary
cross-entropy of q_halt against "the whole answer is right".

Runs resume exactly: a checkpoint holds the model, the optimiser, the EMA, the data position, the
slots with their carried states and every random state. With ``torchrun`` (several processes, DDP)
the global batch is fixed and each process takes an equal slice of the slots.

On a GPU: ``train.micro_batch`` accumulates the gradient of a process's slots over chunks (the same update,
in less memory; running out of memory is one ``error:`` line naming the setting), a ``torch.compile`` that
fails falls back to eager mode with one warning line (DONE.json says which mode trained), long jobs print a
progress line every 30 s (:data:`PROGRESS_LINE`), and with the optional ``tensorboard`` package the logged
records go to TensorBoard event files beside metrics.jsonl too.

The looped decoder's training and evaluation (notebook 08's probes) is :mod:`.looplm`, imported by its own name.
"""

from .batching import PuzzleStream
from .config import DECAY_GROUPS, OPTIMIZERS, PUZZLE_EMB_OPTIMIZERS, SCHEDULES, TrainConfig
from .losses import CONNECTION_STATS, connection_stats, softmax_cross_entropy, stablemax_cross_entropy
from .records import (
                      CHECKPOINT,
                      CHECKPOINT_PREV,
                      DONE,
                      METRICS,
                      PROGRESS_LINE,
                      PROGRESS_RE,
                      TENSORBOARD,
                      WEIGHTS,
                      read_checkpoint,
                      read_metrics,
)
from .trainer import train

__all__ = ["CHECKPOINT", "CHECKPOINT_PREV", "CONNECTION_STATS", "DECAY_GROUPS", "DONE", "METRICS", "OPTIMIZERS",
           "PROGRESS_LINE", "PROGRESS_RE", "PUZZLE_EMB_OPTIMIZERS", "SCHEDULES", "TENSORBOARD", "WEIGHTS",
           "PuzzleStream", "TrainConfig", "connection_stats", "read_checkpoint", "read_metrics",
           "softmax_cross_entropy", "stablemax_cross_entropy", "train"]
