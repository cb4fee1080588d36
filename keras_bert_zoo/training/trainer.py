"""`Trainer`: the one training loop of every binary (pretraining and every task).

Why a loop of our own rather than `model.fit` (checked on Keras 3.15 / TF 2.21, see
`distribute.py` for the evidence): `fit` fails under `MultiWorkerMirroredStrategy`
(keras-team/keras #20585), turns XLA off under any strategy, hands the optimizer
per-replica gradients (so `global_clipnorm` clips each replica's gradient, and
`LossScaleOptimizer` checks only the local replica for inf/NaN), its
`gradient_accumulation_steps` fails under `MirroredStrategy` (#20582) and feeds the
schedule micro-steps, and `BackupAndRestore` resumes only at epoch starts, with no
input position and no dropout RNG state. The loop below is one path for every
strategy, and uses Keras for everything else: the model's `compute_loss` and metrics,
Keras optimizers and schedules, `LossScaleOptimizer`'s scale variables, the progress bar.

One training step, in each replica (`strategy.run`):

1. `compute_gradients`: forward and backward pass on each of the
   `gradient_accumulation_steps` micro-batches of this replica's batch (a
   `tf.while_loop`), gradients summed in local tensors. This is the part XLA compiles
   (`jit_compile=True`), also under multi-replica strategies. A faster forward pass
   (padding-free, packed, bf16) plugs in here through `loss_fn` or the model itself;
   nothing else in the loop depends on it.
2. One all-reduce of the loss and every gradient (summed: like Keras' compiled losses,
   each replica's loss is its share of the global mean).
3. Global norm (reported), unscaling and the inf/NaN check on the *global* gradient.
4. The optimizer update (`optimizer.apply`, whose `global_clipnorm` now sees the global
   gradient); with a `LossScaleOptimizer`, only for finite gradients, and the loss scale
   grows or shrinks exactly as Keras' would. On one device XLA compiles steps 1-4.

`steps_per_loop` steps run in one `tf.function` (a `tf.while_loop`), then the host logs
progress (steps/s, sequences/s, ETA, loss), writes TensorBoard summaries, evaluates and
exports the best model, and checkpoints (in that order).

Exact resume: a checkpoint (see `checkpointing.py`) holds every model variable with
the dropout seed generators' states, every optimizer variable (step, slots, so the
learning-rate position; the loss scale), the global step, and the input position:
with `input_state="iterator"` each worker's plain `tf.data` iterator state (tf.distribute
iterators cannot be checkpointed, so the loop feeds replicas from plain iterators,
one input pipeline per worker, like `distribute_datasets_from_function`); with
`input_state="skip"` nothing, and on resume the rebuilt pipeline skips the batches the
restored steps consumed (for deterministic pipelines whose buffers are too big to save,
such as a `cache()`d fine-tuning set). The same command, rerun after a SIGKILL at any
point, ends with bitwise the same weights as an uninterrupted run (tested on CPU, with
and without XLA).

Stopping: SIGINT (Ctrl-C) or SIGTERM (a preemption notice) during `train` stops the
loop at the next step (`utils.interrupts`: one worker breaks out of its compiled loop
at once; several workers agree at the end of the loop, so they stop at the same step),
saves a checkpoint there and raises `utils.interrupts.Interrupted`; the same command
resumes from it exactly. A second Ctrl-C ends the process at once. Checkpoints are also
written every `checkpoint_every_seconds` (as Estimator's `save_checkpoints_secs`),
besides every `checkpoint_every` steps.

A non-finite loss (or, without loss scaling, a non-finite gradient norm) stops training
with `NonFiniteLossError` naming the first bad step; no checkpoint is written after it,
so the newest one on disk is the last good state.

Example:

```python
import keras
from keras_bert_zoo import tasks
from keras_bert_zoo.training import distribute, optimization
from keras_bert_zoo.training.trainer import Trainer

strategy = distribute.get_strategy("one_device")
with strategy.scope():
    model = task.build_model(encoder)
    optimizer = optimization.create_optimizer(
        optimization.OptimizerConfig(learning_rate=2e-5, warmup_proportion=0.1), 1000
    )
    model.compile(optimizer=optimizer, loss=task.loss(), metrics=task.metrics())
trainer = Trainer(model, strategy=strategy, model_dir="/tmp/mrpc", steps_per_loop=50,
                  checkpoint_every=200)
result = trainer.train(
    tasks.training_dataset_fn(task, train_examples, preprocessor, 32, seed=1),
    num_steps=1000,
    eval_fn=lambda model: task.evaluate(
        tasks.predict(task, model, dev_examples, preprocessor), dev_examples),
    eval_every=200,
    best_metric="f1",
    input_state="skip",
    init_checkpoint="uncased_L-12_H-768_A-12",
)
```
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from keras_bert_zoo.data import packing
from keras_bert_zoo.models import head_positions, packed
from keras_bert_zoo.models.model_files import save_inference_model
from keras_bert_zoo.training import distribute
from keras_bert_zoo.training.checkpointing import CheckpointManager
from keras_bert_zoo.utils import interrupts, run_layout
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically

logger = logging.getLogger(__name__)

INPUT_STATES = ("iterator", "skip")
PROGRESS_MODES = ("auto", "bar", "log", "none")


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or Inf loss (or gradient norm); the message names the step."""


@dataclasses.dataclass
class TrainingResult:
    """What `Trainer.train` returns.

    Attributes:
        step: the global step reached.
        restored_step: the step the run resumed from, or None for a fresh start.
        losses: the loss of every step this call ran, in order (`float32`).
        learning_rates: the learning rate of each of those steps.
        gradient_norms: the global gradient norm of each of those steps.
        history: one dict per logged loop (step, loss, metrics, speed).
        eval_history: `(step, metrics)` for every evaluation.
        best_step, best_value: the best evaluation of `best_metric` so far (this run or
            an earlier one of the same `model_dir`).
    """

    step: int
    restored_step: int | None
    losses: np.ndarray
    learning_rates: np.ndarray
    gradient_norms: np.ndarray
    history: list[dict]
    eval_history: list[tuple[int, dict]]
    best_step: int | None = None
    best_value: float | None = None


@dataclasses.dataclass
class _Run:
    """The state one `Trainer.train` call carries from loop to loop."""

    num_steps: int
    input_state: str
    batch_size: int | None
    manager: CheckpointManager
    restored_step: int | None
    eval_fn: Callable[[keras.Model], Mapping[str, float]] | None
    eval_every: int
    best_metric: str | None
    higher_is_better: bool
    export_fn: Callable[[keras.Model, str], Any]
    best_step: int | None
    best_value: float | None
    callbacks: keras.callbacks.CallbackList
    writer: Any  # tf.summary writers (a no-op one off the chief)
    eval_writer: Any
    step: int
    progress_bar: keras.utils.Progbar | None = None
    bar_line_open: bool = False
    start_step: int = 0
    run_start: float = 0.0
    last_checkpoint_time: float = 0.0
    losses: list[np.ndarray] = dataclasses.field(default_factory=list)
    norms: list[np.ndarray] = dataclasses.field(default_factory=list)
    rates: list[np.ndarray] = dataclasses.field(default_factory=list)
    history: list[dict] = dataclasses.field(default_factory=list)
    eval_history: list[tuple[int, dict]] = dataclasses.field(default_factory=list)

    def result(self) -> TrainingResult:
        def concat(chunks):
            return np.concatenate(chunks) if chunks else np.zeros((0,), np.float32)

        return TrainingResult(
            step=self.step,
            restored_step=self.restored_step,
            losses=concat(self.losses),
            learning_rates=concat(self.rates),
            gradient_norms=concat(self.norms),
            history=self.history,
            eval_history=self.eval_history,
            best_step=self.best_step,
            best_value=self.best_value,
        )


def _check_train_arguments(num_steps, input_state, eval_fn, best_metric):
    if input_state not in INPUT_STATES:
        raise ValueError(f"input_state must be one of {INPUT_STATES}, got {input_state!r}")
    if best_metric is not None and eval_fn is None:
        raise ValueError("best_metric needs an eval_fn")
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")


def _save_model_keras(model, directory):
    save_inference_model(model, os.path.join(directory, "model.keras"))


def default_loss_fn(model, x, y, sample_weight):
    """`(loss, y_pred)` of one micro-batch: the model's forward pass and `compute_loss`.

    Replace it (`Trainer(loss_fn=...)`) to train through another forward pass; the loss
    must follow Keras' convention (under a strategy, this replica's share of the mean).
    """
    y_pred = model(x, training=True)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    return loss, y_pred


def _already_reduced(grads_and_vars):
    return list(grads_and_vars)


def write_scalar(name: str, value: float, step: int):
    # What `tf.summary.scalar` writes, without the `tensorboard` package it needs (the
    # tensorflow 2.21 wheel does not depend on it): TensorBoard's scalars plugin reads
    # these events as its own.
    tf.summary.write(
        name,
        tf.constant(value, tf.float32),
        step=step,
        metadata=summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
        ),
    )


# The progress bar fits an 80-column terminal: "step/steps", a 20-column bar, the time
# ("12s 345ms/step", about 15 columns), then the loss and as many of the model's
# metrics as fit.
BAR_WIDTH = 20
_BAR_COLUMNS = 79
_BAR_TIME_COLUMNS = 15
# Logged and written to TensorBoard, but not worth a place on the bar.
_NOT_ON_BAR = frozenset(
    ("step", "learning_rate", "gradient_norm", "steps_per_second", "sequences_per_second")
)


def _bar_values(logs: dict, num_steps: int) -> list[tuple[str, float]]:
    """The loss, then as many of the model's metrics as fit `_BAR_COLUMNS`."""
    columns = min(_BAR_COLUMNS, shutil.get_terminal_size((80, 24)).columns - 1)
    values, used = [], 2 * len(str(num_steps)) + 2 + BAR_WIDTH + _BAR_TIME_COLUMNS
    for name, value in logs.items():
        width = len(name) + 11  # " - name: 0.1234"
        fits = name == "loss" or used + width <= columns  # the loss is always shown
        if name in _NOT_ON_BAR or name == "loss_scale" or not fits:
            continue
        values.append((name, value))
        used += width
    return values


def write_text(name: str, markdown: str, step: int):
    """A text summary (TensorBoard's Text tab renders its markdown), written as
    `tf.summary.text` would, without the `tensorboard` package."""
    tf.summary.write(
        name,
        tf.constant(markdown),
        step=step,
        metadata=summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text")
        ),
    )


def _format_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    return str(datetime.timedelta(seconds=int(seconds)))


def _first_leaf(structure):
    return tf.nest.flatten(structure)[0]


def _uses_float16(model) -> bool:
    return any(
        getattr(layer, "compute_dtype", None) == "float16" for layer in model._flatten_layers()
    )


class Trainer:
    """Trains a compiled Keras model under any strategy, resumable to the step.

    Args:
        model: a compiled Keras model (built and compiled in `strategy.scope()`), whose
            `compute_loss` works: a compiled loss, or an override such as
            `BertPretrainer`'s. Its optimizer must not use Keras'
            `gradient_accumulation_steps` (use this class's).
        model_dir: where checkpoints (`checkpoints/`), TensorBoard summaries (`train/`,
            `eval/`) and the best export (`best/`) go.
        strategy: the `tf.distribute.Strategy` the model was built in (default: the
            current one).
        gradient_accumulation_steps: micro-batches per optimizer step. Each replica's
            batch is split into this many equal parts, so the global batch size stays
            the batch of one optimizer step.
        jit_compile: compile the step with XLA (see the module docstring for which part).
        steps_per_loop: steps per `tf.function` call; progress, summaries and the NaN
            check happen between loops.
        checkpoint_every: steps between checkpoints (0: only at the end).
        keep_checkpoints: how many checkpoints to keep.
        progress: `"bar"` (Keras progress bar), `"log"` (one absl/logging line per loop),
            `"none"`, or `"auto"` (a bar on a terminal, else log lines).
        loss_fn: `f(model, x, y, sample_weight) -> (loss, y_pred)` for one micro-batch;
            `default_loss_fn` calls the model and its `compute_loss`. The default is
            `default_loss_fn`, except for `BertClassifier` and `BertPretrainer`:
            `keras_bert_zoo.models.head_positions.head_positions_loss_fn`, the same
            outputs and loss with the last block computed only at the positions the
            heads read.
        packed_sequences: train on packed batches (`keras_bert_zoo.data.packing`):
            each padded batch from `dataset_fn` is packed, several examples to a row,
            before it reaches the step, and the step runs
            `keras_bert_zoo.models.packed.packed_loss_fn`, which gives the padded
            batch's loss and gradients without computing its padding. For
            `BertClassifier` and `BertPretrainer` on short examples.
        packing_row_bucket: with `packed_sequences`, the packed row count is rounded
            up to a multiple of this (fewer distinct shapes for XLA to compile).
    """

    def __init__(
        self,
        model: keras.Model,
        *,
        model_dir: str,
        strategy: tf.distribute.Strategy | None = None,
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
        steps_per_loop: int = 100,
        checkpoint_every: int = 1000,
        checkpoint_every_seconds: float = 600,
        keep_checkpoints: int = 3,
        progress: str = "auto",
        loss_fn: Callable | None = None,
        packed_sequences: bool = False,
        packing_row_bucket: int = 4,
    ):
        if getattr(model, "optimizer", None) is None:
            raise ValueError(
                f"Compile {model.name!r} with an optimizer (and its loss) before training it"
            )
        if gradient_accumulation_steps < 1:
            raise ValueError(
                f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}"
            )
        if steps_per_loop < 1:
            raise ValueError(f"steps_per_loop must be >= 1, got {steps_per_loop}")
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0, got {checkpoint_every}")
        if checkpoint_every_seconds < 0:
            raise ValueError(
                f"checkpoint_every_seconds must be >= 0, got {checkpoint_every_seconds}"
            )
        if progress not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of {PROGRESS_MODES}, got {progress!r}")
        self.model = model
        self.model_dir = os.path.abspath(model_dir)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.gradient_accumulation_steps = int(gradient_accumulation_steps)
        self.jit_compile = bool(jit_compile)
        self.steps_per_loop = int(steps_per_loop)
        self.checkpoint_every = int(checkpoint_every)
        self.checkpoint_every_seconds = float(checkpoint_every_seconds)
        self.keep_checkpoints = int(keep_checkpoints)
        if progress == "auto":
            progress = "bar" if sys.stdout.isatty() else "log"
        self.progress = progress
        self.packed_sequences = bool(packed_sequences)
        self.packing_row_bucket = int(packing_row_bucket)
        if self.packed_sequences:
            packed.check_supported(model)
            if self.packing_row_bucket < 1:
                raise ValueError(f"packing_row_bucket must be >= 1, got {packing_row_bucket}")
            loss_fn = loss_fn or packed.packed_loss_fn
        elif loss_fn is None and head_positions.supports(model):
            loss_fn = head_positions.head_positions_loss_fn
        self.loss_fn = loss_fn or default_loss_fn

        optimizer = model.optimizer
        self.loss_scale_optimizer = None
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            self.loss_scale_optimizer = optimizer
            optimizer = optimizer.inner_optimizer
        self.optimizer = optimizer
        if optimizer.gradient_accumulation_steps:
            raise ValueError(
                "The optimizer was created with gradient_accumulation_steps="
                f"{optimizer.gradient_accumulation_steps}; pass it to the Trainer instead "
                "(Keras' own fails under tf.distribute strategies, keras-team/keras #20582, "
                "and advances the learning-rate schedule per micro-batch)"
            )
        if not hasattr(type(optimizer), "_all_reduce_sum_gradients"):
            raise TypeError(
                f"{type(optimizer).__name__} is not a Keras TensorFlow-backend optimizer "
                "(it has no _all_reduce_sum_gradients): the loop all-reduces gradients "
                "itself and must stop the optimizer from summing them again"
            )
        if self.loss_scale_optimizer is None and _uses_float16(model):
            raise ValueError(
                f"{model.name!r} computes in float16 but its optimizer is not a "
                "keras.optimizers.LossScaleOptimizer: gradients would underflow. Use "
                "optimization.create_optimizer (it wraps one under mixed_float16) or wrap "
                "the optimizer yourself"
            )

        self.is_chief = distribute.is_chief(self.strategy)
        self.num_workers = distribute.num_workers(self.strategy)
        self.worker_index = distribute.worker_index(self.strategy)
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.local_replicas = self.num_replicas // self.num_workers
        with self.strategy.scope():
            self.global_step = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
        self._train_loop = None
        self._iterator = None
        self._barrier_fn = None
        self._restored_metadata: dict = {}
        # Set from the signal watcher's thread; the compiled loop of a single worker reads
        # it before every step. A host variable outside the strategy: not replicated.
        with tf.device("/cpu:0"):
            self._stop_requested = tf.Variable(False, trainable=False, name="stop_requested")

    # === Building ===

    def _build_model(self, element_spec):
        # What `fit` does before its first step (`_symbolic_build`): creates the
        # compiled metrics' and losses' state and the optimizer slots, in the strategy's
        # scope, so that checkpoints can be restored before the first step.
        with self.strategy.scope():
            self.model._symbolic_build(data_batch=element_spec)  # noqa: SLF001
            if not self.model.optimizer.built:
                self.model.optimizer.build(self.model.trainable_variables)

    def _split_micro_batches(self, data):
        steps = self.gradient_accumulation_steps

        def split(tensor):
            if tensor is None:
                return None
            batch = tensor.shape[0]
            if batch is not None and batch % steps:
                raise ValueError(
                    f"The per-replica batch ({batch}) is not divisible by "
                    f"gradient_accumulation_steps={steps}"
                )
            return tf.reshape(tensor, tf.concat([[steps, -1], tf.shape(tensor)[1:]], 0))

        return tf.nest.map_structure(split, data)

    def _make_compute_gradients(self):
        model = self.model
        variables = model.trainable_variables
        loss_scale = self.loss_scale_optimizer
        steps = self.gradient_accumulation_steps

        def forward_backward(data):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            with tf.GradientTape() as tape:
                loss, y_pred = self.loss_fn(model, x, y, sample_weight)
                loss = tf.cast(loss, tf.float32)
                scaled = loss * loss_scale.dynamic_scale if loss_scale is not None else loss
            gradients = tape.gradient(scaled, variables)
            model.compute_metrics(x, y, y_pred, sample_weight)
            # Dense: the sum across micro-batches and replicas needs one layout, and the
            # norm of an IndexedSlices with repeated rows is not the gradient's norm.
            return loss, [None if g is None else tf.convert_to_tensor(g) for g in gradients]

        def compute_gradients(data):
            if steps == 1:
                return forward_backward(data)
            micro = self._split_micro_batches(data)
            take = lambda i: tf.nest.map_structure(  # noqa: E731
                lambda t: None if t is None else t[i], micro
            )
            loss, gradients = forward_backward(take(0))
            present = [i for i, g in enumerate(gradients) if g is not None]

            def body(i, loss_sum, sums):
                micro_loss, micro_gradients = forward_backward(take(i))
                return (
                    i + 1,
                    loss_sum + micro_loss,
                    [s + micro_gradients[j] for s, j in zip(sums, present, strict=True)],
                )

            _, loss_sum, sums = tf.while_loop(
                lambda i, *_: i < steps,
                body,
                (tf.constant(1), loss, [gradients[j] for j in present]),
            )
            result = [None] * len(gradients)
            for j, total in zip(present, sums, strict=True):
                result[j] = total / steps
            return loss_sum / steps, result

        return compute_gradients

    def _make_replica_step(self, whole_step_jit: bool):
        variables = self.model.trainable_variables
        optimizer = self.optimizer
        loss_scale = self.loss_scale_optimizer
        num_replicas = self.num_replicas
        compute_gradients = self._make_compute_gradients()
        on_tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
        if self.jit_compile and not whole_step_jit and not on_tpu:
            compute_gradients = tf.function(compute_gradients, jit_compile=True)

        def apply_if_finite(strategy, gradients, present_variables, finite):
            # Cross-replica context, as in Keras' LossScaleOptimizer: a `cond` whose
            # branch reaches `merge_call` must not run in a replica context.
            finite = strategy.experimental_local_results(finite)[0]

            def apply_and_grow():
                strategy.extended.call_for_each_replica(
                    lambda g: optimizer.apply(g, present_variables), args=(gradients,)
                )
                grow = tf.equal(loss_scale.step_counter, loss_scale.dynamic_growth_steps - 1)
                loss_scale.step_counter.assign(
                    tf.where(
                        grow, tf.zeros_like(loss_scale.step_counter), loss_scale.step_counter + 1
                    )
                )
                loss_scale.dynamic_scale.assign(
                    tf.where(grow, loss_scale.dynamic_scale * 2.0, loss_scale.dynamic_scale)
                )
                return tf.constant(True)

            def shrink():
                loss_scale.step_counter.assign(tf.zeros_like(loss_scale.step_counter))
                loss_scale.dynamic_scale.assign(loss_scale.dynamic_scale * 0.5)
                return tf.constant(False)

            return tf.cond(finite, apply_and_grow, shrink)

        def replica_step(data):
            loss, gradients = compute_gradients(data)
            present = [i for i, g in enumerate(gradients) if g is not None]
            gradients = [gradients[i] for i in present]
            present_variables = [variables[i] for i in present]
            if num_replicas > 1:
                reduced = tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, [loss, *gradients]
                )
                loss, gradients = reduced[0], list(reduced[1:])
            if loss_scale is not None:
                scale = tf.cast(loss_scale.dynamic_scale, tf.float32)
                gradients = [g / tf.cast(scale, g.dtype) for g in gradients]
            gradient_norm = tf.cast(tf.linalg.global_norm(gradients), tf.float32)
            if loss_scale is None:
                optimizer.apply(gradients, present_variables)
            else:
                tf.distribute.get_replica_context().merge_call(
                    apply_if_finite,
                    args=(gradients, present_variables, tf.math.is_finite(gradient_norm)),
                )
            return {"loss": loss, "gradient_norm": gradient_norm}

        if whole_step_jit:
            return tf.function(replica_step, jit_compile=True)
        return replica_step

    def _make_train_loop(self):
        strategy = self.strategy
        # On one device XLA can take the whole step (the optimizer update too). Under
        # mirrored strategies a merge_call inside a nested tf.function fails, so the
        # all-reduce and the update stay outside it; TPU functions are compiled anyway.
        whole_step_jit = self.jit_compile and distribute.is_single_device(strategy)
        replica_step = self._make_replica_step(whole_step_jit=whole_step_jit)
        optimizer = self.optimizer
        global_step = self.global_step

        def next_batch(_):
            return next(self._iterator)

        # Several workers must run the same steps (their collectives pair up): they stop
        # between loops, where they agree (`_agree`).
        stops_inside = self.num_workers == 1
        stop_requested = self._stop_requested

        @tf.function
        def train_loop(num_steps):
            losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            norms = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            rates = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            for i in tf.range(num_steps):
                if stops_inside and stop_requested.read_value():
                    break
                rates = rates.write(i, tf.cast(optimizer.learning_rate, tf.float32))
                data = strategy.experimental_distribute_values_from_function(next_batch)
                outputs = strategy.run(replica_step, args=(data,))
                losses = losses.write(i, strategy.experimental_local_results(outputs["loss"])[0])
                norms = norms.write(
                    i, strategy.experimental_local_results(outputs["gradient_norm"])[0]
                )
                global_step.assign_add(1)
            return losses.stack(), norms.stack(), rates.stack()

        return train_loop

    def _barrier(self):
        if self.num_workers == 1:
            return
        if self._barrier_fn is None:
            strategy = self.strategy

            @tf.function
            def barrier():
                ones = strategy.run(lambda: tf.constant(1.0))
                return strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)

            self._barrier_fn = barrier
        self._barrier_fn()

    def _agree_on_step(self, step: int) -> int:
        """The smallest restored step over all workers (multi-worker runs)."""
        if self.num_workers == 1:
            return step
        strategy = self.strategy
        value = tf.constant([step], tf.int64)
        per_replica = strategy.run(lambda: tf.identity(value))
        return int(tf.reduce_min(strategy.gather(per_replica, axis=0)).numpy())

    def _agree(self, flags: Sequence[bool]) -> list[bool]:
        """Each flag, true when it is true on any worker (one collective; one worker:
        the flags as they are)."""
        if self.num_workers == 1:
            return [bool(flag) for flag in flags]
        strategy = self.strategy
        value = tf.constant([[int(bool(flag)) for flag in flags]], tf.int64)
        per_replica = strategy.run(lambda: tf.identity(value))
        gathered = strategy.gather(per_replica, axis=0)
        return [bool(flag) for flag in tf.reduce_max(gathered, axis=0).numpy()]

    # === Input ===

    def _make_iterator(self, dataset_fn, skip_batches: int):
        context = distribute.input_context(self.strategy)
        dataset = dataset_fn(context)
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(
                f"dataset_fn must return a tf.data.Dataset, got {type(dataset).__name__}"
            )
        if skip_batches:
            dataset = dataset.skip(skip_batches)
        return dataset, iter(dataset)

    def _probe_input(self, dataset_fn):
        """`(dataset_fn, element_spec)`: the spec of a first pipeline (built, then dropped),
        and the `dataset_fn` the loop reads (its batches packed with `packed_sequences`)."""
        probe_dataset = dataset_fn(distribute.input_context(self.strategy))
        if not isinstance(probe_dataset, tf.data.Dataset):
            raise TypeError(
                f"dataset_fn must return a tf.data.Dataset, got {type(probe_dataset).__name__}"
            )
        element_spec = probe_dataset.element_spec
        del probe_dataset
        if self.packed_sequences:
            # The model is built (and the batch size read) from the padded batches.
            dataset_fn = packing.packed_dataset_fn(
                dataset_fn,
                row_bucket=self.packing_row_bucket,
                micro_batches=self.gradient_accumulation_steps,
            )
        return dataset_fn, element_spec

    def _global_batch_size(self, element_spec, global_batch_size: int | None) -> int | None:
        batch_size = global_batch_size or self._batch_size(element_spec)
        if batch_size is not None:
            per_replica = batch_size // self.num_replicas
            if per_replica % self.gradient_accumulation_steps:
                raise ValueError(
                    f"The per-replica batch ({per_replica}) is not divisible by "
                    f"gradient_accumulation_steps={self.gradient_accumulation_steps}"
                )
        return batch_size

    def _batch_size(self, element_spec) -> int | None:
        x, _, _ = keras.utils.unpack_x_y_sample_weight(element_spec)
        batch = _first_leaf(x).shape[0]
        return None if batch is None else int(batch) * self.num_replicas

    # === Restore, initialize, checkpoint ===

    def _checkpoint_manager(self) -> CheckpointManager:
        return CheckpointManager(
            os.path.join(self.model_dir, run_layout.CHECKPOINTS_DIR),
            model_variables=self.model.variables,
            optimizer_variables=self.model.optimizer.variables,
            trainer_variables={"global_step": self.global_step},
            max_to_keep=self.keep_checkpoints,
            is_chief=self.is_chief,
            worker_index=self.worker_index,
            num_workers=self.num_workers,
            barrier=self._barrier,
        )

    def _restore(self, manager: CheckpointManager, dataset_fn, input_state: str) -> int | None:
        """The step restored from `model_dir`, the same on every worker, or None."""
        if input_state == "iterator":
            # The iterator must exist before the restore fills it.
            _, self._iterator = self._make_iterator(dataset_fn, 0)
            metadata = manager.restore(iterator=self._iterator)
        else:
            metadata = manager.restore()
        self._restored_metadata = metadata or {}
        restored_step = None if metadata is None else int(self.global_step.numpy())
        found = -1 if restored_step is None else restored_step
        agreed = self._agree_on_step(found)
        if agreed == found:
            return restored_step
        if agreed < 0:
            raise RuntimeError(
                "Workers disagree on the checkpoint to resume from: another worker found "
                "none it could read. Remove the unreadable checkpoints and rerun"
            )
        self._restored_metadata = manager.restore(
            iterator=self._iterator if input_state == "iterator" else None, step=agreed
        )
        return agreed

    def _initialize(self, init_checkpoint):
        with self.strategy.scope():
            if callable(init_checkpoint):
                init_checkpoint(self.model)
                return
            from keras_bert_zoo.checkpoints import load_weights

            report = load_weights(self.model, init_checkpoint)
            logger.info("Initialized from %s: %s", init_checkpoint, report.summary())

    def _checkpoints_at(self, run: _Run) -> bool:
        return run.step == run.num_steps or bool(
            self.checkpoint_every and run.step % self.checkpoint_every == 0
        )

    def _save_checkpoint(self, run: _Run, *, pending_evaluation: bool = False):
        self._end_bar_line(run)
        run.manager.save(
            run.step,
            iterator=self._iterator if run.input_state == "iterator" else None,
            extra_metadata={
                "input_mode": run.input_state,
                "gradient_accumulation_steps": self.gradient_accumulation_steps,
                "num_replicas": self.num_replicas,
                # Stopped on a signal before this step's evaluation: the rerun does it.
                "pending_evaluation": pending_evaluation,
            },
        )
        run.last_checkpoint_time = time.time()

    def _stop_on_request(self, run: _Run, signal_number: int | None):
        """Saves the step reached (unless saved already) and raises `Interrupted`."""
        if signal_number is None:  # another worker was asked; the workers stop together
            signal_number = signal.SIGTERM
        if run.manager.latest_step() != run.step:
            evaluated = bool(run.eval_history) and run.eval_history[-1][0] == run.step
            self._save_checkpoint(run, pending_evaluation=self._evaluates_at(run) and not evaluated)
        self._end_bar_line(run)
        raise interrupts.Interrupted(
            f"stopped at step {run.step} of {run.num_steps} "
            f"({interrupts.signal_name(signal_number)}); the same command resumes",
            signal_number,
        )

    # === Evaluation, the best export ===

    def _evaluates_at(self, run: _Run) -> bool:
        return run.eval_fn is not None and (
            run.step == run.num_steps or bool(run.eval_every and run.step % run.eval_every == 0)
        )

    def _evaluate(self, run: _Run):
        """Evaluates at `run.step` (on every worker; the chief writes) and exports a new best."""
        self._end_bar_line(run)
        metrics = {k: float(v) for k, v in dict(run.eval_fn(self.model)).items()}
        run.eval_history.append((run.step, metrics))
        logger.info(
            "eval at step %d: %s",
            run.step,
            ", ".join(f"{k} {v:.6g}" for k, v in sorted(metrics.items())),
        )
        with run.eval_writer.as_default():
            for name, value in metrics.items():
                write_scalar(name, value, run.step)
        if run.best_metric is None:
            return
        if run.best_metric not in metrics:
            raise KeyError(
                f"best_metric {run.best_metric!r} is not among the evaluation's "
                f"metrics {sorted(metrics)}"
            )
        value = metrics[run.best_metric]
        better = run.best_value is None or (
            value > run.best_value if run.higher_is_better else value < run.best_value
        )
        if better:
            run.best_step, run.best_value = run.step, value
            self._export_best(run.export_fn, run.step, run.best_metric, value, metrics)

    def _previous_best(self, best_metric: str | None) -> tuple[int | None, float | None]:
        """The best evaluation an earlier run exported to `best/`, if it ranks by `best_metric`."""
        best_step, best_value, saved_metric = self._read_best()
        if best_metric is not None and saved_metric not in (None, best_metric):
            logger.warning(
                "%s/best holds the best %s; this run ranks by %s and will replace it",
                self.model_dir,
                saved_metric,
                best_metric,
            )
            return None, None
        return best_step, best_value

    def _read_best(self) -> tuple[int | None, float | None, str | None]:
        path = os.path.join(self.model_dir, run_layout.BEST_DIR, run_layout.METRICS_FILE)
        if not os.path.exists(path):
            return None, None, None
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            return int(saved["step"]), float(saved["value"]), saved.get("metric")
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("Ignoring unreadable %s: %s", path, error)
            return None, None, None

    def _export_best(self, export_fn, step: int, metric: str, value: float, metrics: dict):
        if not self.is_chief:
            return
        with atomic_directory(os.path.join(self.model_dir, run_layout.BEST_DIR)) as temp:
            export_fn(self.model, temp)
            write_json_atomically(
                os.path.join(temp, run_layout.METRICS_FILE),
                {
                    "step": step,
                    "metric": metric,
                    "value": value,
                    "metrics": {k: float(v) for k, v in metrics.items()},
                },
            )
        logger.info("Exported the best model (%s=%.6g at step %d)", metric, value, step)

    # === The loop ===

    def train(
        self,
        dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
        num_steps: int,
        *,
        input_state: str = "iterator",
        eval_fn: Callable[[keras.Model], Mapping[str, float]] | None = None,
        eval_every: int = 0,
        best_metric: str | None = None,
        higher_is_better: bool = True,
        init_checkpoint: str | Callable[[keras.Model], Any] | None = None,
        export_fn: Callable[[keras.Model, str], Any] | None = None,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        global_batch_size: int | None = None,
    ) -> TrainingResult:
        """Trains to `num_steps` optimizer steps, resuming from `model_dir` if it can.

        Args:
            dataset_fn: `fn(input_context) -> tf.data.Dataset` of this worker's
                per-replica batches, `(x, y)` or `(x, y, sample_weight)` (or `x`),
                repeated (e.g. `tasks.training_dataset_fn`). With accumulation, each
                batch is split into the micro-batches.
            num_steps: the step to train to (a resumed run continues from its step).
            input_state: how the input position survives a restart: `"iterator"` saves
                the tf.data iterator in each checkpoint, `"skip"` skips the consumed
                batches of a rebuilt, deterministic pipeline (see the module docstring).
            eval_fn: `fn(model) -> {metric: value}`, run on the host every `eval_every`
                steps and at the end (on every worker; the chief writes).
            eval_every: steps between evaluations (0: only at the end).
            best_metric: the key of `eval_fn`'s dict whose best value is exported to
                `model_dir/best/` (with `metrics.json`).
            higher_is_better: direction of `best_metric`.
            init_checkpoint: on a fresh start only (no checkpoint in `model_dir`): a
                checkpoint directory in any layout `from_pretrained` reads, loaded into
                the model's encoder (and the heads it holds), or `fn(model)`.
            export_fn: `fn(model, directory)` writing the best model; the default saves
                `model.keras` without optimizer state (`keras.models.load_model`
                reads it back).
            callbacks: Keras callbacks; they get `on_train_begin`, `on_train_batch_end`
                after every loop (with the logged values) and `on_train_end`.
            global_batch_size: sequences per step, for sequences/s when the dataset's
                batch dimension is not static.

        Returns:
            A `TrainingResult`.

        Raises:
            NonFiniteLossError: a NaN or Inf loss; the message names the step.
        """
        _check_train_arguments(num_steps, input_state, eval_fn, best_metric)
        # A restore fills existing variables (metrics, optimizer slots): build them first,
        # from a first pipeline's element spec.
        dataset_fn, element_spec = self._probe_input(dataset_fn)
        self._build_model(element_spec)
        batch_size = self._global_batch_size(element_spec, global_batch_size)
        manager = self._checkpoint_manager()
        restored_step = self._restore(manager, dataset_fn, input_state)
        if restored_step is None:
            logger.info(
                "Starting at step 0 of %d (no checkpoint in %s)", num_steps, manager.directory
            )
            if init_checkpoint is not None:
                self._initialize(init_checkpoint)
        else:
            logger.info("Resuming at step %d of %d", restored_step, num_steps)
        if input_state == "skip":
            # Only now: the pipeline skips the batches that the restored steps consumed.
            skip_batches = (restored_step or 0) * self.local_replicas
            _, self._iterator = self._make_iterator(dataset_fn, skip_batches)
        best_step, best_value = self._previous_best(best_metric)

        self._train_loop = self._make_train_loop()
        run = _Run(
            num_steps=num_steps,
            input_state=input_state,
            batch_size=batch_size,
            manager=manager,
            restored_step=restored_step,
            eval_fn=eval_fn,
            eval_every=eval_every,
            best_metric=best_metric,
            higher_is_better=higher_is_better,
            export_fn=export_fn or _save_model_keras,
            best_step=best_step,
            best_value=best_value,
            callbacks=keras.callbacks.CallbackList(list(callbacks), model=self.model),
            writer=self._summary_writer(run_layout.TRAIN_SUMMARIES_DIR, self.is_chief),
            eval_writer=self._summary_writer(
                run_layout.EVAL_SUMMARIES_DIR, self.is_chief and eval_fn is not None
            ),
            step=int(self.global_step.numpy()),
        )
        run.progress_bar = self._progress_bar(run.step, num_steps)
        run.callbacks.on_train_begin()
        # The replica step all-reduces the gradients itself; the optimizer must not sum
        # them again.
        self.optimizer._all_reduce_sum_gradients = _already_reduced  # noqa: SLF001
        run.start_step, run.run_start = run.step, time.time()
        run.last_checkpoint_time = run.run_start
        self._stop_requested.assign(False)
        requests = interrupts.StopRequests(on_request=lambda: self._stop_requested.assign(True))
        try:
            requests.__enter__()
            if self._restored_metadata.get("pending_evaluation") and self._evaluates_at(run):
                self._evaluate(run)
            while run.step < num_steps:
                logs = self._run_loop(run)
                if logs is not None:
                    self._publish_logs(run, logs)
                stop, time_due = self._agree(
                    [requests.requested, self.is_chief and self._checkpoint_time_due(run)]
                )
                if stop:
                    self._stop_on_request(run, requests.signal_number)
                # The evaluation (and best export) of a step comes before its checkpoint:
                # a run killed between the two resumes from the checkpoint before and
                # evaluates this step again, instead of resuming past an evaluation that
                # never finished (it was missing from the history, and from the choice
                # of best/).
                if self._evaluates_at(run):
                    self._evaluate(run)
                if self._checkpoints_at(run) or time_due:
                    self._save_checkpoint(run)
                run.writer.flush()
        finally:
            requests.__exit__(None, None, None)
            del self.optimizer._all_reduce_sum_gradients  # noqa: SLF001
            run.writer.flush()
            run.eval_writer.flush()
        run.callbacks.on_train_end(run.history[-1] if run.history else None)
        return run.result()

    # === One loop of steps: run, check, log ===

    def _loop_steps(self, run: _Run) -> int:
        # A loop stops at the next checkpoint or evaluation: both happen between loops.
        loop_steps = min(self.steps_per_loop, run.num_steps - run.step)
        for every in (self.checkpoint_every, run.eval_every if run.eval_fn else 0):
            if every:
                loop_steps = min(loop_steps, every - run.step % every)
        return loop_steps

    def _checkpoint_time_due(self, run: _Run) -> bool:
        every = self.checkpoint_every_seconds
        return bool(every) and time.time() - run.last_checkpoint_time >= every

    def _run_loop(self, run: _Run) -> dict | None:
        """Runs one loop of steps and records it in `run`; returns its logs (None when a
        stop request ended it before its first step)."""
        loop_steps = self._loop_steps(run)
        loop_start = time.time()
        losses, norms, rates = self._train_loop(tf.constant(loop_steps, tf.int32))
        losses, norms, rates = losses.numpy(), norms.numpy(), rates.numpy()
        seconds = time.time() - loop_start
        if not len(losses):
            return None
        self._check_finite(run.step, losses, norms, run.manager)
        run.step += len(losses)
        run.losses.append(losses)
        run.norms.append(norms)
        run.rates.append(rates)
        logs = self._loop_logs(run.step, losses, norms, rates, seconds, run.batch_size)
        run.history.append(logs)
        return logs

    def _check_finite(self, step, losses, norms, manager):
        bad = ~np.isfinite(losses)
        what = "loss"
        if self.loss_scale_optimizer is None:
            # Without loss scaling a non-finite gradient has already reached the weights.
            bad_norms = ~np.isfinite(norms)
            if bad_norms.any() and (not bad.any() or np.argmax(bad_norms) < np.argmax(bad)):
                bad, what = bad_norms, "gradient norm"
        if not bad.any():
            return
        index = int(np.argmax(bad))
        value = (losses if what == "loss" else norms)[index]
        latest = manager.latest_step()
        kept = (
            f"The newest checkpoint, {manager.path(latest)} (step {latest}), holds the last "
            "good state and was left as it was."
            if latest is not None
            else "No checkpoint had been written yet."
        )
        raise NonFiniteLossError(
            f"The {what} is {value} at step {step + index + 1}; training stopped. {kept}"
        )

    def _loop_logs(self, step, losses, norms, rates, seconds, batch_size) -> dict:
        steps_per_second = len(losses) / max(seconds, 1e-9)
        logs = {
            "step": step,
            "loss": float(np.mean(losses)),
            "learning_rate": float(rates[-1]),
            "gradient_norm": float(np.mean(norms)),
            "steps_per_second": steps_per_second,
        }
        if batch_size is not None:
            logs["sequences_per_second"] = steps_per_second * batch_size
        if self.loss_scale_optimizer is not None:
            logs["loss_scale"] = float(self.loss_scale_optimizer.dynamic_scale.numpy())
        for name, value in self.model.get_metrics_result().items():
            if name == "loss":  # Keras' loss tracker; the loop reports its own loss
                continue
            if np.ndim(value) == 0:
                logs[name] = float(value)
        self.model.reset_metrics()
        return logs

    def _publish_logs(self, run: _Run, logs: dict):
        self._report(run, logs)
        with run.writer.as_default():
            # Every step's loss, learning rate and gradient norm at its own step (a short
            # run still draws a curve); the loop's metrics and speed at its last step.
            per_step = {"loss": run.losses[-1], "learning_rate": run.rates[-1]}
            per_step["gradient_norm"] = run.norms[-1]
            first_step = run.step - len(run.losses[-1]) + 1
            for name, values in per_step.items():
                for offset, value in enumerate(values):
                    write_scalar(name, float(value), first_step + offset)
            for name, value in logs.items():
                if name != "step" and name not in per_step:
                    write_scalar(name, value, run.step)
        run.callbacks.on_train_batch_end(run.step, logs)

    def _report(self, run: _Run, logs: dict):
        if not self.is_chief or self.progress == "none":
            return
        step, num_steps = run.step, run.num_steps
        done = step - run.start_step
        elapsed = time.time() - run.run_start
        eta = elapsed / done * (num_steps - step) if done else float("inf")
        if run.progress_bar is not None:
            bar_values = _bar_values(logs, run.num_steps - run.start_step)
            run.progress_bar.update(done, values=bar_values, finalize=step >= num_steps)
            run.bar_line_open = step < num_steps
            return
        parts = [f"step {step}/{num_steps}"]
        parts += [f"{k} {v:.4g}" for k, v in logs.items() if k != "step"]
        parts.append(f"ETA {_format_eta(eta)}")
        logger.info("  ".join(parts))

    def _summary_writer(self, name: str, active: bool):
        if active:
            return tf.summary.create_file_writer(os.path.join(self.model_dir, name))
        return tf.summary.create_noop_writer()

    def _progress_bar(self, step: int, num_steps: int) -> keras.utils.Progbar | None:
        if self.progress != "bar" or not self.is_chief or step >= num_steps:
            return None
        # Counts this run's steps (its time per step and ETA would be wrong from a
        # resumed step); every value shown is already its loop's mean: no averaging.
        return keras.utils.Progbar(num_steps - step, width=BAR_WIDTH, stateless_metrics=())

    def _end_bar_line(self, run: _Run):
        """Ends the bar's line before a log line, which would be glued onto it."""
        if run.progress_bar is not None and run.bar_line_open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            run.bar_line_open = False
