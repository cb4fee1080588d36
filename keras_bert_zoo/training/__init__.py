"""The training core every binary stands on.

- `optimization`: AdamW and LAMB with BERT's exclusions, warmup + linear/cosine
  schedules, `create_optimizer(OptimizerConfig, num_train_steps)`.
- `distribute`: `get_strategy("one_device" | "mirrored" | "multi_worker_mirrored" |
  "tpu")` and the worker layout.
- `trainer`: `Trainer`, the one loop (gradient accumulation, global clipping, loss
  scaling, progress, TensorBoard, checkpoints with exact resume, best export, NaN stop).
- `checkpointing`: the atomic, self-checking checkpoints the loop writes.
- `flags`: the absl flags the binaries share.
"""

from keras_bert_zoo.training import distribute, optimization
from keras_bert_zoo.training.checkpointing import (
    CheckpointCorruptError,
    CheckpointManager,
    CheckpointMismatchError,
    load_checkpoint_weights,
)
from keras_bert_zoo.training.distribute import StrategyError, get_strategy
from keras_bert_zoo.training.optimization import (
    AdamW,
    Lamb,
    OptimizerConfig,
    WarmupPolynomialDecay,
    create_learning_rate_schedule,
    create_optimizer,
)
from keras_bert_zoo.training.trainer import (
    NonFiniteLossError,
    Trainer,
    TrainingResult,
    default_loss_fn,
)

__all__ = [
    "AdamW",
    "CheckpointCorruptError",
    "CheckpointManager",
    "CheckpointMismatchError",
    "Lamb",
    "NonFiniteLossError",
    "OptimizerConfig",
    "StrategyError",
    "Trainer",
    "TrainingResult",
    "WarmupPolynomialDecay",
    "create_learning_rate_schedule",
    "create_optimizer",
    "default_loss_fn",
    "distribute",
    "get_strategy",
    "load_checkpoint_weights",
    "optimization",
]
