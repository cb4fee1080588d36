"""The command-line flags every training binary shares, and what they build.

A binary calls `define_flags()` at import time, adds its own flags, and in `main` turns
the parsed values into a strategy, an optimizer config and the `Trainer`'s settings.

Flags: `--output_dir`, `--init_checkpoint`, `--seed`, `--train_batch_size` (global,
split across replicas); `--distribution_strategy`, `--tpu`, `--num_gpus`;
`--dtype_policy`, `--mixed_precision`, `--jit_compile`; `--packed_sequences`; `--optimizer`,
`--learning_rate`, `--lr_schedule`, `--num_warmup_steps`, `--warmup_proportion`,
`--end_learning_rate`, `--decay_power`, `--decay_from_step_zero`, `--weight_decay`,
`--exclude_embeddings_from_weight_decay`, `--adam_beta_1`, `--adam_beta_2`,
`--adam_epsilon`, `--clip_norm`, `--gradient_accumulation_steps`; `--steps_per_loop`,
`--checkpoint_every`, `--keep_checkpoints`, `--eval_every`, `--progress`.

Example (a binary):

```python
from absl import app, flags

from keras_bert_zoo.training import Trainer, optimization
from keras_bert_zoo.training import flags as training_flags

training_flags.define_flags(learning_rate=2e-5, warmup_proportion=0.1)
flags.DEFINE_string("task", None, "Task name.")
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

logger = logging.getLogger(__name__)

DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def _define(flag_values, kind, name, default, help_text, **kwargs):
    if name in flag_values:
        return
    definer = getattr(flags, f"DEFINE_{kind}")
    definer(name=name, default=default, help=help_text, flag_values=flag_values, **kwargs)


def define_flags(flag_values: flags.FlagValues = flags.FLAGS, **defaults) -> None:
    """Defines the shared training flags (once; a second call changes nothing).

    Args:
        flag_values: the `FlagValues` to define them in.
        **defaults: the binary's own defaults by flag name, e.g.
            `define_flags(learning_rate=2e-5, warmup_proportion=0.1)`.
    """
    unknown = set(defaults) - set(_FLAG_DEFAULTS)
    if unknown:
        raise ValueError(f"No shared training flag(s) named {sorted(unknown)}")

    def default(name):
        return defaults.get(name, _FLAG_DEFAULTS[name])

    d = flag_values
    # === Run ===
    _define(
        d,
        "string",
        "output_dir",
        default("output_dir"),
        "Directory for checkpoints, TensorBoard summaries and the best export; rerunning "
        "the same command resumes from its newest checkpoint.",
    )
    _define(
        d,
        "string",
        "init_checkpoint",
        default("init_checkpoint"),
        "On a fresh start, load the encoder (and any heads it holds) from this checkpoint: "
        "a google-research/bert or Hugging Face directory.",
    )
    _define(
        d,
        "integer",
        "seed",
        default("seed"),
        "Seed of Python, NumPy, TensorFlow and Keras (weights, dropout, shuffling).",
    )
    _define(
        d,
        "integer",
        "train_batch_size",
        default("train_batch_size"),
        "Global batch size of one optimizer step, split evenly across replicas.",
        lower_bound=1,
    )
    # === Strategy ===
    _define(
        d,
        "enum",
        "distribution_strategy",
        default("distribution_strategy"),
        "How to distribute training.",
        enum_values=list(distribute.STRATEGIES),
    )
    _define(
        d,
        "string",
        "tpu",
        default("tpu"),
        "TPU name, grpc:// address or 'local' for --distribution_strategy=tpu.",
    )
    _define(
        d,
        "integer",
        "num_gpus",
        default("num_gpus"),
        "GPUs to use (default: all visible; 0 forces the CPU).",
        lower_bound=0,
    )
    # === Precision and compilation ===
    _define(
        d,
        "enum",
        "dtype_policy",
        default("dtype_policy"),
        "Keras dtype policy: float32, mixed_bfloat16, or mixed_float16 (loss-scaled). "
        "Default: float32, or what --mixed_precision picks.",
        enum_values=list(DTYPE_POLICIES),
    )
    _define(
        d,
        "bool",
        "mixed_precision",
        default("mixed_precision"),
        "Shorthand: mixed_float16 on GPUs, mixed_bfloat16 on TPUs and CPUs.",
    )
    _define(d, "bool", "jit_compile", default("jit_compile"), "Compile the training step with XLA.")
    # === Packing ===
    _define(
        d,
        "bool",
        "packed_sequences",
        default("packed_sequences"),
        "Train on packed batches: several examples per row, attending only within their "
        "own example (block-diagonal attention), so the step computes no padding; the "
        "losses and gradients are the padded batches' (to float rounding; dropout masks "
        "differ). Faster when most examples are much shorter than --max_seq_length "
        "(real sentences and sentence pairs); no gain on full rows. For models with one "
        "output per example: sentence and sentence-pair classification and regression "
        "(GLUE, text_classification) and pretraining; tagging, question answering and "
        "multiple choice are refused.",
    )
    # === Optimizer ===
    _define(
        d,
        "enum",
        "optimizer",
        default("optimizer"),
        "Optimizer.",
        enum_values=list(optimization.OPTIMIZERS),
    )
    _define(d, "float", "learning_rate", default("learning_rate"), "Peak learning rate.")
    _define(
        d,
        "enum",
        "lr_schedule",
        default("lr_schedule"),
        "After the linear warmup: linear (polynomial) decay, cosine decay, or constant.",
        enum_values=list(optimization.SCHEDULES),
    )
    _define(
        d,
        "integer",
        "num_warmup_steps",
        default("num_warmup_steps"),
        "Linear warmup steps (default: --warmup_proportion of the run).",
    )
    _define(
        d,
        "float",
        "warmup_proportion",
        default("warmup_proportion"),
        "Fraction of the run used for warmup when --num_warmup_steps is unset.",
    )
    _define(
        d,
        "float",
        "end_learning_rate",
        default("end_learning_rate"),
        "Learning rate at the end of the decay.",
    )
    _define(
        d,
        "float",
        "decay_power",
        default("decay_power"),
        "Exponent of the polynomial decay (1.0: linear).",
    )
    _define(
        d,
        "bool",
        "decay_from_step_zero",
        default("decay_from_step_zero"),
        "google-research/bert's schedule: the linear decay runs from step 0 (under the "
        "warmup), not from the warmup's end.",
    )
    _define(
        d,
        "float",
        "weight_decay",
        default("weight_decay"),
        "Decoupled weight decay rate (LayerNorm and bias variables are exempt).",
    )
    _define(
        d,
        "bool",
        "exclude_embeddings_from_weight_decay",
        default("exclude_embeddings_from_weight_decay"),
        "Also exempt the embedding tables from weight decay.",
    )
    _define(d, "float", "adam_beta_1", default("adam_beta_1"), "First-moment decay.")
    _define(d, "float", "adam_beta_2", default("adam_beta_2"), "Second-moment decay.")
    _define(d, "float", "adam_epsilon", default("adam_epsilon"), "Adam/LAMB epsilon.")
    _define(
        d,
        "float",
        "clip_norm",
        default("clip_norm"),
        "Clip gradients to this global norm (0 disables).",
        lower_bound=0.0,
    )
    _define(
        d,
        "integer",
        "gradient_accumulation_steps",
        default("gradient_accumulation_steps"),
        "Micro-batches per optimizer step; --train_batch_size is their sum.",
        lower_bound=1,
    )
    # === Loop ===
    _define(
        d,
        "integer",
        "steps_per_loop",
        default("steps_per_loop"),
        "Steps per compiled loop; progress and summaries are written between loops.",
        lower_bound=1,
    )
    _define(
        d,
        "integer",
        "checkpoint_every",
        default("checkpoint_every"),
        "Steps between checkpoints (0: only at the end).",
        lower_bound=0,
    )
    _define(
        d,
        "integer",
        "keep_checkpoints",
        default("keep_checkpoints"),
        "How many checkpoints to keep.",
        lower_bound=1,
    )
    _define(
        d,
        "integer",
        "eval_every",
        default("eval_every"),
        "Steps between evaluations (0: only at the end).",
        lower_bound=0,
    )
    _define(
        d,
        "enum",
        "progress",
        default("progress"),
        "Progress display: a Keras bar, log lines, none, or auto (a bar on a terminal).",
        enum_values=list(PROGRESS_MODES),
    )


@dataclasses.dataclass
class TrainingOptions:
    """The training core's settings, one field per flag of `define_flags` (with its
    default), except `output_dir` and `init_checkpoint`, which each runner declares
    beside its own input settings.

    A job's config (`runners.finetuning.FinetuningConfig`,
    `runners.pretraining.PretrainingConfig`) subclasses it and redeclares only the defaults
    it changes; `setup`, `optimizer_config` and `trainer_kwargs` read such a config as
    they read parsed flags, and `flag_defaults(config)` gives `define_flags` the
    runner's defaults.
    """

    seed: int = 12345
    train_batch_size: int = 32
    distribution_strategy: str = "one_device"
    tpu: str | None = None
    num_gpus: int | None = None
    dtype_policy: str | None = None
    mixed_precision: bool = False
    jit_compile: bool = False
    packed_sequences: bool = False
    optimizer: str = "adamw"
    learning_rate: float = 1e-4
    lr_schedule: str = "linear"
    num_warmup_steps: int | None = None
    warmup_proportion: float = 0.0
    end_learning_rate: float = 0.0
    decay_power: float = 1.0
    decay_from_step_zero: bool = False
    weight_decay: float = 0.01
    exclude_embeddings_from_weight_decay: bool = False
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.999
    adam_epsilon: float = 1e-6
    clip_norm: float = 1.0
    gradient_accumulation_steps: int = 1
    steps_per_loop: int = 100
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    eval_every: int | None = 0
    progress: str = "auto"


_FLAG_DEFAULTS = {
    "output_dir": None,
    "init_checkpoint": None,
    **{field.name: field.default for field in dataclasses.fields(TrainingOptions)},
}


def flag_defaults(config) -> dict:
    """`define_flags` keyword arguments: `config`'s values of the shared flags (a
    `TrainingOptions` subclass with `output_dir` and `init_checkpoint` fields)."""
    return {name: getattr(config, name) for name in _FLAG_DEFAULTS}


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
        "keep_checkpoints": flag_values.keep_checkpoints,
        "progress": flag_values.progress,
    }
