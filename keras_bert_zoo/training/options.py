"""`TrainingOptions`: the settings of the training core, declared once, and what they build.

Each field is one setting, with its default, help and bounds (`utils.settings.setting`):
a job's config (`runners.configs`) subclasses it and changes only the defaults it must,
and the job's binary defines its flags from that config (`utils.settings.define_flags`),
so the flag, its default and `--helpfull` come from the field. Nothing here reads the
command line: the methods read the fields of an options object, whoever filled them (a
binary's parsed flags, a test, a notebook).

- `setup()`: the strategy, then the seed and the dtype policy;
- `resolved_dtype_policy(strategy)`: the Keras dtype policy `dtype_policy` /
  `mixed_precision` ask for;
- `optimizer_config()`: the `optimization.OptimizerConfig` of the optimizer fields;
- `trainer_settings()`: `Trainer(...)` keywords of the loop fields (`model_dir` included).

What a model trains through (its loss function, packed batches) and where its initial
weights come from are the job's, not settings of the loop: the job passes them to the
`Trainer` (`runners.runner.Job.loss_fn`, `Job.initial_weights`).

Example:

```python
from keras_bert_zoo.training import Trainer, optimization
from keras_bert_zoo.training.options import TrainingOptions

options = TrainingOptions(output_dir="/tmp/run", learning_rate=2e-5, warmup_proportion=0.1)
strategy = options.setup()  # strategy, then seed and dtype policy
with strategy.scope():
    model = ...
    model.compile(
        optimizer=optimization.create_optimizer(options.optimizer_config(), num_train_steps),
        loss=...,
    )
trainer = Trainer(model, strategy=strategy, **options.trainer_settings())
trainer.train(dataset_fn, num_train_steps, eval_every=options.eval_every, ...)
```

A binary defines the flags from the class and reads them back:
`utils.settings.define_flags(TrainingOptions, flags.FLAGS)` then
`TrainingOptions(**utils.settings.flag_values_of(TrainingOptions, flags.FLAGS))`.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import ClassVar

import keras

from keras_bert_zoo.training import distribute, optimization, schedules
from keras_bert_zoo.training.reporting import PROGRESS_MODES
from keras_bert_zoo.utils import cpu_kernels, settings
from keras_bert_zoo.utils.deprecation import RenamedFields, SwitchedField
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.settings import setting

logger = logging.getLogger(__name__)

DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
# How a job lays out its training batches (`TrainingOptions.batching`).
BATCHING_MODES = ("auto", "bucketed", "packed", "padded")


@dataclasses.dataclass
class TrainingOptions(metaclass=RenamedFields):
    """The training core's settings, one field per flag every training binary shares.

    A job's config (`runners.configs.FinetuningConfig`, `PretrainingConfig`, ...)
    subclasses it and redeclares only the defaults it changes (the help stays the one
    written here). Values outside a field's choices or bounds are refused when the
    object is made, in Python as on the command line. Each field says whether another
    value trains another model (`affects_result`: a rerun into the same `output_dir`
    must keep it); the strategy, compilation and loop fields do not (the same global
    batches and steps, equal up to float rounding).
    """

    # === Run ===
    seed: int = setting(
        12345,
        help="Seed of Python, NumPy, TensorFlow and Keras (weights, dropout, shuffling).",
        affects_result=True,
    )
    train_batch_size: int = setting(
        32,
        help="Global batch size of one optimizer step, split evenly across replicas.",
        lower_bound=1,
        affects_result=True,
    )
    # === Strategy ===
    distribution_strategy: str = setting(
        "one_device",
        help="How to distribute training.",
        choices=distribute.STRATEGIES,
        affects_result=False,
    )
    tpu: str | None = setting(
        None,
        help="TPU name, grpc:// address or 'local' for --distribution_strategy=tpu.",
        affects_result=False,
    )
    num_gpus: int | None = setting(
        None,
        help="GPUs to use (default: all visible; 0 forces the CPU).",
        lower_bound=0,
        affects_result=False,
    )
    # === Precision and compilation ===
    dtype_policy: str | None = setting(
        None,
        help="Keras dtype policy: float32, mixed_bfloat16, or mixed_float16 (loss-scaled). "
        "Default: float32, or what --mixed_precision picks.",
        choices=DTYPE_POLICIES,
        affects_result=True,
    )
    mixed_precision: bool = setting(
        False,
        help="Shorthand: mixed_float16 on GPUs, mixed_bfloat16 on TPUs and CPUs.",
        affects_result=True,
    )
    # None: auto, the choice a tool made for the CPU's kind (utils.cpu_kernels).
    jit_compile: bool | None = setting(
        None,
        help="Compile the training step, and evaluation's and prediction's forward pass, with "
        "XLA. Default (auto): where measured faster on the CPU's kind: for inference, not "
        "for training (docs/speed.md); --jit_compile / --nojit_compile force it.",
        affects_result=False,
    )
    # === Batches ===
    # Affects the result: bucketed batches group other examples, packed rows draw other
    # dropout masks than padded ones.
    batching: str = setting(
        "auto",
        help="How training batches are laid out, so that a step computes no padding. "
        "bucketed: batches of similar lengths (windows of the shuffled stream sorted by "
        "length), each cut to its longest row rounded up to a multiple of 16 (64 past 128), "
        "for every task. packed: several examples per row attending only within their own "
        "example (block-diagonal attention), for models with one output per example "
        "(sentence and pair classification, regression, multi-label, long-document windows; "
        "pretraining); tagging, question answering and multiple choice are refused. "
        "padded: every row --max_seq_length long (the old behaviour, also for evaluation "
        "and prediction). auto: what was measured fastest for the task family "
        "(runners.loss_and_weights.BATCHING_BY_FAMILY: faster when most examples are much "
        "shorter than --max_seq_length); pretraining keeps its full rows. Evaluation and "
        "prediction sort by length and trim unless padded.",
        choices=BATCHING_MODES,
        old_switches={"packed_sequences": ("packed", "padded")},
        affects_result=True,
    )
    # `TrainingOptions(packed_sequences=...)` and `.packed_sequences`, for one release.
    RENAMED_FIELDS: ClassVar = {"packed_sequences": SwitchedField("batching", "packed", "padded")}
    # === Optimizer ===
    optimizer: str = setting(
        "adamw", help="Optimizer.", choices=optimization.OPTIMIZERS, affects_result=True
    )
    # google-research/bert's default, in run_classifier.py and run_pretraining.py alike.
    learning_rate: float = setting(5e-5, help="Peak learning rate.", affects_result=True)
    lr_schedule: str = setting(
        "linear",
        help="After the linear warmup: linear (polynomial) decay, cosine decay, or constant.",
        choices=schedules.SCHEDULES,
        affects_result=True,
    )
    num_warmup_steps: int | None = setting(
        None,
        help="Linear warmup steps (default: --warmup_proportion of the run).",
        affects_result=True,
    )
    warmup_proportion: float = setting(
        0.0,
        help="Fraction of the run used for warmup when --num_warmup_steps is unset.",
        affects_result=True,
    )
    end_learning_rate: float = setting(
        0.0, help="Learning rate at the end of the decay.", affects_result=True
    )
    decay_power: float = setting(
        1.0, help="Exponent of the polynomial decay (1.0: linear).", affects_result=True
    )
    decay_from_step_zero: bool = setting(
        False,
        help="google-research/bert's schedule: the linear decay runs from step 0 (under the "
        "warmup), not from the warmup's end.",
        affects_result=True,
    )
    weight_decay: float = setting(
        0.01,
        help="Decoupled weight decay rate (LayerNorm and bias variables are exempt).",
        affects_result=True,
    )
    exclude_embeddings_from_weight_decay: bool = setting(
        False,
        help="Also exempt the embedding tables from weight decay.",
        affects_result=True,
    )
    adam_beta_1: float = setting(0.9, help="First-moment decay.", affects_result=True)
    adam_beta_2: float = setting(0.999, help="Second-moment decay.", affects_result=True)
    adam_epsilon: float = setting(1e-6, help="Adam/LAMB epsilon.", affects_result=True)
    clip_norm: float = setting(
        1.0,
        help="Clip gradients to this global norm (0 disables).",
        lower_bound=0.0,
        affects_result=True,
    )
    gradient_accumulation_steps: int = setting(
        1,
        help="Micro-batches per optimizer step; --train_batch_size is their sum.",
        lower_bound=1,
        affects_result=True,
    )
    # === Loop ===
    steps_per_loop: int = setting(
        100,
        help="Steps per compiled loop; progress and summaries are written between loops.",
        lower_bound=1,
        affects_result=False,
    )
    checkpoint_every: int = setting(
        1000,
        help="Steps between checkpoints (0: only at the end).",
        lower_bound=0,
        affects_result=False,
    )
    checkpoint_every_seconds: int = setting(
        600,
        help="Also checkpoint when this many seconds passed since the last checkpoint (0: "
        "never by time). Ctrl-C or SIGTERM saves one at the step reached, whatever these.",
        lower_bound=0,
        affects_result=False,
    )
    keep_checkpoints: int = setting(
        3, help="How many checkpoints to keep.", lower_bound=1, affects_result=False
    )
    eval_every: int | None = setting(
        0,
        help="Steps between evaluations (0: only at the end).",
        lower_bound=0,
        affects_result=False,
    )
    progress: str = setting(
        "auto",
        help="Progress display: a Keras bar, log lines, none, or auto (a bar on a terminal).",
        choices=PROGRESS_MODES,
        affects_result=False,
    )
    # === Where the run goes ===
    output_dir: str | None = setting(
        None,
        help="Where the run writes: checkpoints, TensorBoard summaries, eval_results.json, "
        "the exports (utils.run_layout names them); rerunning the same training command "
        "resumes from its newest checkpoint.",
        affects_result=False,
    )

    def __post_init__(self):
        settings.check_values(self)

    def resolved_dtype_policy(self, strategy=None) -> str:
        """The dtype policy `dtype_policy` / `mixed_precision` ask for (on `strategy`'s
        devices: `mixed_precision` is float16 on GPUs, bfloat16 elsewhere)."""
        explicit = self.dtype_policy
        if self.mixed_precision:
            import tensorflow as tf

            on_gpu = not isinstance(strategy, tf.distribute.TPUStrategy) and bool(
                tf.config.list_logical_devices("GPU")
            )
            chosen = "mixed_float16" if on_gpu else "mixed_bfloat16"
            if explicit not in (None, chosen):
                raise UserError(
                    f"--mixed_precision picks {chosen} here but --dtype_policy={explicit}; "
                    "pass only one of them"
                )
            return chosen
        return explicit or "float32"

    def setup(self):
        """Strategy, seed and dtype policy; returns the strategy.

        The strategy comes first: `MultiWorkerMirroredStrategy` must be created before
        any other TensorFlow operation of the process.
        """
        strategy = distribute.get_strategy(
            self.distribution_strategy, tpu=self.tpu, num_gpus=self.num_gpus
        )
        keras.utils.set_random_seed(self.seed)
        policy = self.resolved_dtype_policy(strategy)
        keras.config.set_dtype_policy(policy)
        logger.info(
            "Strategy %s with %d replica(s), dtype policy %s, seed %d",
            type(strategy).__name__,
            strategy.num_replicas_in_sync,
            policy,
            self.seed,
        )
        return strategy

    def optimizer_config(self) -> optimization.OptimizerConfig:
        """The `OptimizerConfig` the optimizer fields describe."""
        return optimization.OptimizerConfig(
            optimizer=self.optimizer,
            learning_rate=self.learning_rate,
            schedule=self.lr_schedule,
            warmup_steps=self.num_warmup_steps,
            warmup_proportion=self.warmup_proportion,
            end_learning_rate=self.end_learning_rate,
            decay_power=self.decay_power,
            decay_from_step_zero=self.decay_from_step_zero,
            weight_decay=self.weight_decay,
            exclude_embeddings_from_weight_decay=self.exclude_embeddings_from_weight_decay,
            beta_1=self.adam_beta_1,
            beta_2=self.adam_beta_2,
            epsilon=self.adam_epsilon,
            clip_norm=self.clip_norm or None,
        )

    def trainer_settings(self) -> dict:
        """`Trainer(...)` keyword arguments of the loop fields (`model_dir` included).

        Raises:
            ValueError: no `output_dir`.
        """
        if not self.output_dir:
            raise UserError("--output_dir is required: checkpoints and summaries go there")
        return {
            "model_dir": self.output_dir,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
            "jit_compile": cpu_kernels.training_jit_compile(self.jit_compile),
            "steps_per_loop": self.steps_per_loop,
            "checkpoint_every": self.checkpoint_every,
            "checkpoint_every_seconds": self.checkpoint_every_seconds,
            "keep_checkpoints": self.keep_checkpoints,
            "progress": self.progress,
        }
