"""The settings every training binary shares, as flags, and what they build.

`TrainingOptions` declares them once (`utils.settings`: each field its flag, default and
help); a job's config subclasses it and the job's binary defines its flags from the
config. A binary that is no job of `runners/` calls `define_flags()` (the shared flags
with `--output_dir` and `--init_checkpoint`). In `main`, the parsed values (or a config)
turn into a strategy, an optimizer config and the `Trainer`'s settings.

Flags: `--output_dir`, `--init_checkpoint`, `--seed`, `--train_batch_size` (global,
split across replicas); `--distribution_strategy`, `--tpu`, `--num_gpus`;
`--dtype_policy`, `--mixed_precision`, `--jit_compile`; `--packed_sequences`; `--optimizer`,
`--learning_rate`, `--lr_schedule`, `--num_warmup_steps`, `--warmup_proportion`,
`--end_learning_rate`, `--decay_power`, `--decay_from_step_zero`, `--weight_decay`,
`--exclude_embeddings_from_weight_decay`, `--adam_beta_1`, `--adam_beta_2`,
`--adam_epsilon`, `--clip_norm`, `--gradient_accumulation_steps`; `--steps_per_loop`,
`--checkpoint_every`, `--checkpoint_every_seconds`, `--keep_checkpoints`, `--eval_every`,
`--progress`.

Example (a binary):

```python
from absl import app, flags

from keras_bert_zoo.training import Trainer, optimization
from keras_bert_zoo.training import flags as training_flags

training_flags.define_flags(learning_rate=2e-5, warmup_proportion=0.1)
FLAGS = flags.FLAGS


def main(_):
    strategy = training_flags.setup(FLAGS)  # strategy, then seed and dtype policy
    with strategy.scope():
        model = ...
        optimizer = optimization.create_optimizer(
            training_flags.optimizer_config(FLAGS), num_train_steps
        )
        model.compile(optimizer=optimizer, loss=...)
    trainer = Trainer(model, strategy=strategy, **training_flags.trainer_kwargs(FLAGS))
    trainer.train(dataset_fn, num_train_steps, eval_every=FLAGS.eval_every, ...)


if __name__ == "__main__":
    app.run(main)
```
"""

from __future__ import annotations

import dataclasses
import logging

import keras
from absl import flags

from keras_bert_zoo.training import distribute, optimization
from keras_bert_zoo.training.trainer import PROGRESS_MODES
from keras_bert_zoo.utils import settings
from keras_bert_zoo.utils.settings import setting

logger = logging.getLogger(__name__)

DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass
class TrainingOptions:
    """The training core's settings, one field per shared flag (`define_flags`), except
    `output_dir` and `init_checkpoint`, which each job declares beside its own inputs.

    A job's config (`runners.finetuning.FinetuningConfig`,
    `runners.pretraining.PretrainingConfig`) subclasses it and redeclares only the defaults
    it changes (the help stays the one written here); `setup`, `optimizer_config` and
    `trainer_kwargs` read such a config as they read parsed flags.
    """

    # === Run ===
    seed: int = setting(
        12345, help="Seed of Python, NumPy, TensorFlow and Keras (weights, dropout, shuffling)."
    )
    train_batch_size: int = setting(
        32,
        help="Global batch size of one optimizer step, split evenly across replicas.",
        lower_bound=1,
    )
    # === Strategy ===
    distribution_strategy: str = setting(
        "one_device", help="How to distribute training.", choices=distribute.STRATEGIES
    )
    tpu: str | None = setting(
        None, help="TPU name, grpc:// address or 'local' for --distribution_strategy=tpu."
    )
    num_gpus: int | None = setting(
        None, help="GPUs to use (default: all visible; 0 forces the CPU).", lower_bound=0
    )
    # === Precision and compilation ===
    dtype_policy: str | None = setting(
        None,
        help="Keras dtype policy: float32, mixed_bfloat16, or mixed_float16 (loss-scaled). "
        "Default: float32, or what --mixed_precision picks.",
        choices=DTYPE_POLICIES,
    )
    mixed_precision: bool = setting(
        False, help="Shorthand: mixed_float16 on GPUs, mixed_bfloat16 on TPUs and CPUs."
    )
    jit_compile: bool = setting(False, help="Compile the training step with XLA.")
    # === Packing ===
    packed_sequences: bool = setting(
        False,
        help="Train on packed batches: several examples per row, attending only within "
        "their own example (block-diagonal attention), so the step computes no padding; the "
        "losses and gradients are the padded batches' (to float rounding; dropout masks "
        "differ). Faster when most examples are much shorter than --max_seq_length "
        "(real sentences and sentence pairs); no gain on full rows. For models with one "
        "output per example: sentence and sentence-pair classification and regression "
        "(GLUE, text_classification) and pretraining; tagging, question answering and "
        "multiple choice are refused.",
    )
    # === Optimizer ===
    optimizer: str = setting("adamw", help="Optimizer.", choices=optimization.OPTIMIZERS)
    learning_rate: float = setting(1e-4, help="Peak learning rate.")
    lr_schedule: str = setting(
        "linear",
        help="After the linear warmup: linear (polynomial) decay, cosine decay, or constant.",
        choices=optimization.SCHEDULES,
    )
    num_warmup_steps: int | None = setting(
        None, help="Linear warmup steps (default: --warmup_proportion of the run)."
    )
    warmup_proportion: float = setting(
        0.0, help="Fraction of the run used for warmup when --num_warmup_steps is unset."
    )
    end_learning_rate: float = setting(0.0, help="Learning rate at the end of the decay.")
    decay_power: float = setting(1.0, help="Exponent of the polynomial decay (1.0: linear).")
    decay_from_step_zero: bool = setting(
        False,
        help="google-research/bert's schedule: the linear decay runs from step 0 (under the "
        "warmup), not from the warmup's end.",
    )
    weight_decay: float = setting(
        0.01, help="Decoupled weight decay rate (LayerNorm and bias variables are exempt)."
    )
    exclude_embeddings_from_weight_decay: bool = setting(
        False, help="Also exempt the embedding tables from weight decay."
    )
    adam_beta_1: float = setting(0.9, help="First-moment decay.")
    adam_beta_2: float = setting(0.999, help="Second-moment decay.")
    adam_epsilon: float = setting(1e-6, help="Adam/LAMB epsilon.")
    clip_norm: float = setting(
        1.0, help="Clip gradients to this global norm (0 disables).", lower_bound=0.0
    )
    gradient_accumulation_steps: int = setting(
        1, help="Micro-batches per optimizer step; --train_batch_size is their sum.", lower_bound=1
    )
    # === Loop ===
    steps_per_loop: int = setting(
        100,
        help="Steps per compiled loop; progress and summaries are written between loops.",
        lower_bound=1,
    )
    checkpoint_every: int = setting(
        1000, help="Steps between checkpoints (0: only at the end).", lower_bound=0
    )
    checkpoint_every_seconds: int = setting(
        600,
        help="Also checkpoint when this many seconds passed since the last checkpoint (0: "
        "never by time). Ctrl-C or SIGTERM saves one at the step reached, whatever these.",
        lower_bound=0,
    )
    keep_checkpoints: int = setting(3, help="How many checkpoints to keep.", lower_bound=1)
    eval_every: int | None = setting(
        0, help="Steps between evaluations (0: only at the end).", lower_bound=0
    )
    progress: str = setting(
        "auto",
        help="Progress display: a Keras bar, log lines, none, or auto (a bar on a terminal).",
        choices=PROGRESS_MODES,
    )


@dataclasses.dataclass
class TrainingFlags(TrainingOptions):
    """The shared flags of a binary that is not a job of `runners/` (`define_flags`):
    the training core's, and where the run goes and starts from."""

    output_dir: str | None = setting(
        None,
        help="Where the run writes: checkpoints, TensorBoard summaries, eval_results.json, "
        "the exports (utils.run_layout names them); rerunning the same training command "
        "resumes from its newest checkpoint.",
    )
    init_checkpoint: str | None = setting(
        None,
        help="On a fresh start, load the encoder (and any heads it holds) from this "
        "checkpoint: a google-research/bert or Hugging Face directory.",
    )


def define_flags(flag_values: flags.FlagValues = flags.FLAGS, **defaults) -> None:
    """Defines the shared training flags (once; a second call changes nothing).

    Args:
        flag_values: the `FlagValues` to define them in.
        **defaults: the binary's own defaults by flag name, e.g.
            `define_flags(learning_rate=2e-5, warmup_proportion=0.1)`.
    """
    unknown = set(defaults) - set(settings.flag_names(TrainingFlags))
    if unknown:
        raise ValueError(f"No shared training flag(s) named {sorted(unknown)}")
    settings.define_flags(TrainingFlags, flag_values, defaults=defaults)


def dtype_policy(flag_values=flags.FLAGS, strategy=None) -> str:
    """The dtype policy `--dtype_policy` / `--mixed_precision` ask for."""
    explicit = flag_values.dtype_policy
    if flag_values.mixed_precision:
        import tensorflow as tf

        on_gpu = not isinstance(strategy, tf.distribute.TPUStrategy) and bool(
            tf.config.list_logical_devices("GPU")
        )
        chosen = "mixed_float16" if on_gpu else "mixed_bfloat16"
        if explicit not in (None, chosen):
            raise ValueError(
                f"--mixed_precision picks {chosen} here but --dtype_policy={explicit}; "
                "pass only one of them"
            )
        return chosen
    return explicit or "float32"


def setup(flag_values=flags.FLAGS):
    """Strategy, seed and dtype policy from the flags; returns the strategy.

    The strategy comes first: `MultiWorkerMirroredStrategy` must be created before any
    other TensorFlow operation of the process.
    """
    strategy = distribute.get_strategy(
        flag_values.distribution_strategy, tpu=flag_values.tpu, num_gpus=flag_values.num_gpus
    )
    keras.utils.set_random_seed(flag_values.seed)
    policy = dtype_policy(flag_values, strategy)
    keras.config.set_dtype_policy(policy)
    logger.info(
        "Strategy %s with %d replica(s), dtype policy %s, seed %d",
        type(strategy).__name__,
        strategy.num_replicas_in_sync,
        policy,
        flag_values.seed,
    )
    return strategy


def optimizer_config(flag_values=flags.FLAGS) -> optimization.OptimizerConfig:
    """The `OptimizerConfig` the optimizer flags describe."""
    return optimization.OptimizerConfig(
        optimizer=flag_values.optimizer,
        learning_rate=flag_values.learning_rate,
        schedule=flag_values.lr_schedule,
        warmup_steps=flag_values.num_warmup_steps,
        warmup_proportion=flag_values.warmup_proportion,
        end_learning_rate=flag_values.end_learning_rate,
        decay_power=flag_values.decay_power,
        decay_from_step_zero=flag_values.decay_from_step_zero,
        weight_decay=flag_values.weight_decay,
        exclude_embeddings_from_weight_decay=flag_values.exclude_embeddings_from_weight_decay,
        beta_1=flag_values.adam_beta_1,
        beta_2=flag_values.adam_beta_2,
        epsilon=flag_values.adam_epsilon,
        clip_norm=flag_values.clip_norm or None,
    )


def trainer_kwargs(flag_values=flags.FLAGS) -> dict:
    """`Trainer(...)` keyword arguments from the loop flags (`model_dir` included)."""
    if not flag_values.output_dir:
        raise ValueError("--output_dir is required: checkpoints and summaries go there")
    return {
        "model_dir": flag_values.output_dir,
        "gradient_accumulation_steps": flag_values.gradient_accumulation_steps,
        "jit_compile": flag_values.jit_compile,
        "packed_sequences": flag_values.packed_sequences,
        "steps_per_loop": flag_values.steps_per_loop,
        "checkpoint_every": flag_values.checkpoint_every,
        "checkpoint_every_seconds": flag_values.checkpoint_every_seconds,
        "keep_checkpoints": flag_values.keep_checkpoints,
        "progress": flag_values.progress,
    }
