"""The training core every job stands on.

- `options`: `TrainingOptions`, the settings every training binary shares (one dataclass
  field per flag), and what they build: the strategy, the optimizer config, the
  Trainer's settings.
- `optimization`: AdamW and LAMB with BERT's exclusions, `create_optimizer(
  OptimizerConfig, num_train_steps)`; `schedules`: warmup + linear/cosine schedules.
- `distribute`: `get_strategy("one_device" | "mirrored" | "multi_worker_mirrored" |
  "tpu")`, the worker layout, and what the workers agree on between loops.
- `trainer`: `Trainer`, the one loop, orchestrating its parts: `step` (the compiled step:
  gradient accumulation, global clipping, loss scaling; the input; the NaN stop),
  `run_checkpoints` (exact resume, stop requests), `evaluation` (periodic evaluation,
  the best export) and `reporting` (progress, TensorBoard).
- `checkpointing`: the atomic, self-checking checkpoints the loop writes.

Nothing here reads the command line (the binaries define flags from `TrainingOptions`
with `utils.settings`), and nothing here knows a model, a checkpoint layout or an input
pipeline: the job passes the loss function, its batches' transformation and the initial
weights to the `Trainer`.
"""

from keras_bert_zoo.training import distribute, optimization, schedules
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
    create_optimizer,
)
from keras_bert_zoo.training.options import TrainingOptions
from keras_bert_zoo.training.reporting import TrainingResult
from keras_bert_zoo.training.schedules import (
    WarmupPolynomialDecay,
    create_learning_rate_schedule,
)
from keras_bert_zoo.training.step import NonFiniteLossError, default_loss_fn
from keras_bert_zoo.training.trainer import Trainer

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
    "TrainingOptions",
    "TrainingResult",
    "WarmupPolynomialDecay",
    "create_learning_rate_schedule",
    "create_optimizer",
    "default_loss_fn",
    "distribute",
    "get_strategy",
    "load_checkpoint_weights",
    "optimization",
    "schedules",
]
