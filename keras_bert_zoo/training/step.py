"""The compiled training step and the loop of steps the `Trainer` runs between reports.

Why a loop of our own rather than `model.fit` (checked on Keras 3.15 / TF 2.21, see
`distribute.py` for the evidence): `fit` fails under `MultiWorkerMirroredStrategy`
(keras-team/keras #20585), turns XLA off under any strategy, hands the optimizer
per-replica gradients (so `global_clipnorm` clips each replica's gradient, and
`LossScaleOptimizer` checks only the local replica for inf/NaN), its
`gradient_accumulation_steps` fails under `MirroredStrategy` (#20582) and feeds the
schedule micro-steps, and `BackupAndRestore` resumes only at epoch starts, with no
input position and no dropout RNG state. The loop is one path for every strategy, and
uses Keras for everything else: the model's `compute_loss` and metrics, Keras
optimizers and schedules, `LossScaleOptimizer`'s scale variables, the progress bar.

One training step, in each replica (`strategy.run`):

1. `compute_gradients`: forward and backward pass on each of the
   `gradient_accumulation_steps` micro-batches of this replica's batch (a
   `tf.while_loop`), gradients summed in local tensors. This is the part XLA compiles
   (`jit_compile=True`), also under multi-replica strategies (for a loss that
   all-gathers, the model's passes only: see below). A faster forward pass
   (padding-free, packed, bf16) plugs in here through `loss_fn` or the model itself;
   nothing else in the loop depends on it.
2. One all-reduce of the loss and every gradient (summed: like Keras' compiled losses,
   each replica's loss is its share of the global mean).
3. Global norm (reported), unscaling and the inf/NaN check on the *global* gradient.
4. The optimizer update (`optimizer.apply`, whose `global_clipnorm` now sees the global
   gradient); with a `LossScaleOptimizer`, only for finite gradients, and the loss scale
   grows or shrinks exactly as Keras' would. On one device XLA compiles steps 1-4.

`steps_per_loop` steps run in one `tf.function` (a `tf.while_loop`) that returns every
step's loss, gradient norm and learning rate; a single worker leaves it at the next step
once a stop is requested, or once its time limit has passed (so that progress is
reported every so many seconds however long the loop; several workers stop between
loops, where they agree, and run every loop to its end).

The input side: each worker reads its own pipeline (`dataset_fn(input_context)`) through
a plain `tf.data` iterator, whose state a checkpoint can hold; a first pipeline is built
and dropped to read the element spec the model is built from (`probe_input`).

A non-finite loss (or, without loss scaling, a non-finite gradient norm) is found by
`check_finite` after each loop and raises `NonFiniteLossError` naming the first bad step.

Losses over the whole batch (in-batch negatives, CoSENT's ranking of pairs): a compiled
loss whose rows read the other rows of the batch says so with its `batch_scope`
attribute, `"replica"` (this replica's batch) or `"global"` (the global batch, which
it all-gathers across replicas; `models.embedding_losses`). Two consequences:

- Gradient accumulation is refused: each micro-batch would see only its own rows as
  negatives, not the batch's. Gradient caching (`models.gradient_cache`) is the tool
  for a batch of negatives larger than memory.
- Under several replicas the all-gather is a `merge_call`, which TensorFlow (2.21)
  refuses in a `tf.function` nested in `strategy.run` (for all its strategies but TPU:
  `ReplicaContext.all_gather` always merges, and on CPUs so does `all_reduce`), so XLA
  cannot compile a forward and backward pass that contains the loss. With
  `jit_compile` XLA then compiles the model's forward pass alone (and, through the
  function's gradient, its backward pass: `XlaForwardModel`), and the loss with its
  all-gather runs in the replica function.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.training import distribute
from keras_bert_zoo.utils.errors import UserError

LossFn = Callable  # f(model, x, y, sample_weight) -> (loss, y_pred)

# The arguments of `TrainStep.make_loop`'s function: its steps and its time limit (for
# tracing it before its first call, `get_concrete_function(*LOOP_SIGNATURE)`).
LOOP_SIGNATURE = (tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.float64))


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or Inf loss (or gradient norm); the message names the step."""


def default_loss_fn(model, x, y, sample_weight):
    """`(loss, y_pred)` of one micro-batch: the model's forward pass and `compute_loss`.

    Replace it (`Trainer(loss_fn=...)`) to train through another forward pass; the loss
    must follow Keras' convention (under a strategy, this replica's share of the mean).
    """
    y_pred = model(x, training=True)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    return loss, y_pred


# === The model and optimizer the step drives ===


def build_training_state(model: keras.Model, strategy, element_spec):
    """Creates what a step creates on its first run, so that a checkpoint can be
    restored before it: what `fit` does (`_symbolic_build`), the compiled metrics' and
    losses' state and the optimizer slots, in the strategy's scope."""
    with strategy.scope():
        model._symbolic_build(data_batch=element_spec)  # noqa: SLF001
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)


def _uses_float16(model) -> bool:
    return any(
        getattr(layer, "compute_dtype", None) == "float16" for layer in model._flatten_layers()
    )


def step_optimizers(model: keras.Model):
    """`(optimizer, loss_scale_optimizer)` of a compiled model: the optimizer the step
    updates with, and the `LossScaleOptimizer` around it (or None), checked for what the
    step needs.

    Raises:
        ValueError: Keras' own `gradient_accumulation_steps`, or float16 without loss
            scaling.
        TypeError: an optimizer that is not a Keras TensorFlow-backend one.
    """
    optimizer, loss_scale_optimizer = model.optimizer, None
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        loss_scale_optimizer, optimizer = optimizer, optimizer.inner_optimizer
    if optimizer.gradient_accumulation_steps:
        raise UserError(
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
    if loss_scale_optimizer is None and _uses_float16(model):
        raise UserError(
            f"{model.name!r} computes in float16 but its optimizer is not a "
            "keras.optimizers.LossScaleOptimizer: gradients would underflow. Use "
            "optimization.create_optimizer (it wraps one under mixed_float16) or wrap "
            "the optimizer yourself"
        )
    return optimizer, loss_scale_optimizer


def _already_reduced(grads_and_vars):
    return list(grads_and_vars)


@contextlib.contextmanager
def gradients_reduced_by_the_step(optimizer):
    """While active, `optimizer` does not sum the gradients across replicas: the
    replica step all-reduces them itself."""
    optimizer._all_reduce_sum_gradients = _already_reduced  # noqa: SLF001
    try:
        yield
    finally:
        del optimizer._all_reduce_sum_gradients  # noqa: SLF001


# === The step ===


def split_micro_batches(data, steps: int):
    """Each tensor of `data` reshaped to `[steps, batch / steps, ...]`."""

    def split(tensor):
        if tensor is None:
            return None
        batch = tensor.shape[0]
        if batch is not None and batch % steps:
            raise UserError(
                f"The per-replica batch ({batch}) is not divisible by "
                f"gradient_accumulation_steps={steps}"
            )
        return tf.reshape(tensor, tf.concat([[steps, -1], tf.shape(tensor)[1:]], 0))

    return tf.nest.map_structure(split, data)


# A compiled loss's `batch_scope` (see the module docstring); a loss without one is a
# mean of independent rows.
ROW_SCOPE, REPLICA_SCOPE, GLOBAL_SCOPE = "row", "replica", "global"


def batch_scopes(model: keras.Model) -> dict[str, str]:
    """`{loss name: batch_scope}` of `model`'s compiled losses that read more than their
    own row (`"replica"` or `"global"`)."""
    scopes = {}
    for loss in tf.nest.flatten(getattr(model, "loss", None)):
        scope = getattr(loss, "batch_scope", ROW_SCOPE)
        if scope != ROW_SCOPE:
            scopes[getattr(loss, "name", type(loss).__name__)] = scope
    return scopes


def check_accumulation(model: keras.Model, gradient_accumulation_steps: int) -> None:
    """Raises `UserError` when `model`'s loss reads the whole batch and the step would
    split the batch into micro-batches."""
    scopes = batch_scopes(model)
    if gradient_accumulation_steps > 1 and scopes:
        raise UserError(
            f"gradient_accumulation_steps={gradient_accumulation_steps} cannot train "
            f"{', '.join(scopes)}: its rows read the whole batch (in-batch negatives), and "
            "each micro-batch would see only its own; for a large batch on small memory "
            "use --gradient_cache_chunk_size instead (gradient caching)"
        )


class XlaForwardModel:
    """`model`, whose forward pass `model(x, training=...)` XLA compiles (its gradient
    too: a tape differentiates a compiled function through its compiled gradient
    function); every other attribute is the model's.

    The training step passes it to the loss function in place of the model when the
    loss must stay outside XLA (the module docstring).

    Args:
        model: the Keras model.
    """

    def __init__(self, model: keras.Model):
        self._model = model
        self._forward = tf.function(
            lambda x, training: model(x, training=training),
            jit_compile=True,
            autograph=False,
        )

    def __call__(self, x, training=None):
        return self._forward(x, training)

    def __getattr__(self, name):
        return getattr(self._model, name)


class TrainStep:
    """Builds the compiled loop of training steps (see the module docstring).

    Args:
        model: the compiled model.
        strategy: the strategy it was built in.
        loss_fn: `f(model, x, y, sample_weight) -> (loss, y_pred)` of one micro-batch.
        gradient_accumulation_steps: micro-batches per optimizer step.
        jit_compile: compile with XLA (the whole step on one device, the forward and
            backward pass elsewhere; the model's alone when the loss all-gathers).

    Attributes:
        optimizer, loss_scale_optimizer: as `step_optimizers` gives them.
        global_step: the step variable the loop advances (checkpointed).
        stop_requested: a host boolean variable; a single worker's loop stops at the next
            step once it is true.
    """

    def __init__(
        self,
        model: keras.Model,
        *,
        strategy: tf.distribute.Strategy,
        loss_fn: LossFn,
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
    ):
        self.model = model
        self.strategy = strategy
        self.loss_fn = loss_fn
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.jit_compile = jit_compile
        self.optimizer, self.loss_scale_optimizer = step_optimizers(model)
        check_accumulation(model, gradient_accumulation_steps)
        # The loss all-gathers: XLA may compile the model's passes, not the loss.
        self.gathers = strategy.num_replicas_in_sync > 1 and GLOBAL_SCOPE in set(
            batch_scopes(model).values()
        )
        with strategy.scope():
            self.global_step = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
        # Set from the signal watcher's thread; the compiled loop of a single worker reads
        # it before every step. A host variable outside the strategy: not replicated.
        with tf.device("/cpu:0"):
            self.stop_requested = tf.Variable(False, trainable=False, name="stop_requested")

    def _compute_gradients_fn(self, forward_model=None):
        model = self.model
        # What the loss function runs the forward pass of (`XlaForwardModel`, or the model).
        forward_model = forward_model or model
        variables = model.trainable_variables
        loss_scale = self.loss_scale_optimizer
        steps = self.gradient_accumulation_steps

        def forward_backward(data):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            with tf.GradientTape() as tape:
                loss, y_pred = self.loss_fn(forward_model, x, y, sample_weight)
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
            micro = split_micro_batches(data, steps)
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

    def _replica_step_fn(self, whole_step_jit: bool):
        variables = self.model.trainable_variables
        optimizer = self.optimizer
        loss_scale = self.loss_scale_optimizer
        num_replicas = self.strategy.num_replicas_in_sync
        on_tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
        if self.jit_compile and not whole_step_jit and not on_tpu and self.gathers:
            compute_gradients = self._compute_gradients_fn(XlaForwardModel(self.model))
        else:
            compute_gradients = self._compute_gradients_fn()
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

        # The step is written with TensorFlow's own control flow (tf.cond above), so
        # AutoGraph has nothing to convert in it, or in the model, losses and optimizer
        # it calls; converting them anyway cost a fresh process over a second of its
        # first trace (the README's MRPC fine-tune at 2 steps, tiny model, six
        # interleaved runs each: median 13.9 s -> 12.6 s).
        replica_step = tf.autograph.experimental.do_not_convert(replica_step)
        if whole_step_jit:
            return tf.function(replica_step, jit_compile=True)
        return replica_step

    def make_loop(self, next_batch: Callable[[tf.distribute.InputReplicaContext], object]):
        """`fn(num_steps, max_seconds) -> (losses, gradient_norms, learning_rates)`: a
        `tf.function` running up to `num_steps` steps on the batches `next_batch(context)`
        gives; a single worker ends it after any step once `max_seconds` (a `float64`;
        `inf`, the default: no limit) have passed since its first step started."""
        strategy = self.strategy
        # On one device XLA can take the whole step (the optimizer update too). Under
        # mirrored strategies a merge_call inside a nested tf.function fails, so the
        # all-reduce and the update stay outside it; TPU functions are compiled anyway.
        whole_step_jit = self.jit_compile and distribute.is_single_device(strategy)
        replica_step = self._replica_step_fn(whole_step_jit=whole_step_jit)
        optimizer = self.optimizer
        global_step = self.global_step
        # Several workers must run the same steps (their collectives pair up): they stop
        # between loops, where they agree (`distribute.WorkerAgreement`).
        stops_inside = distribute.num_workers(strategy) == 1
        stop_requested = self.stop_requested

        @tf.function
        def train_loop(num_steps, max_seconds=float("inf")):
            losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            norms = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            rates = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            # Stateful: ordered before the loop (the function's automatic control
            # dependencies), after the function's instantiation.
            start = tf.timestamp()
            for i in tf.range(num_steps):
                if stops_inside and stop_requested.read_value():
                    break
                if stops_inside and i > 0 and tf.timestamp() - start >= max_seconds:
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


def check_finite(step: int, losses, norms, *, loss_scaled: bool, kept: Callable[[], str]):
    """Raises `NonFiniteLossError` at the first non-finite loss of a loop (without loss
    scaling, also at a non-finite gradient norm: it has already reached the weights).

    Args:
        step: the global step before the loop.
        losses, norms: the loop's values, one per step.
        loss_scaled: whether a `LossScaleOptimizer` skipped non-finite gradients.
        kept: `fn() -> str`, what is left on disk (for the message).
    """
    bad = ~np.isfinite(losses)
    what = "loss"
    if not loss_scaled:
        bad_norms = ~np.isfinite(norms)
        if bad_norms.any() and (not bad.any() or np.argmax(bad_norms) < np.argmax(bad)):
            bad, what = bad_norms, "gradient norm"
    if not bad.any():
        return
    index = int(np.argmax(bad))
    value = (losses if what == "loss" else norms)[index]
    raise NonFiniteLossError(
        f"The {what} is {value} at step {step + index + 1}; training stopped. {kept()}"
    )


# === Input ===


def make_dataset(strategy, dataset_fn, skip_batches: int = 0) -> tf.data.Dataset:
    """This worker's pipeline: `dataset_fn(input_context)`, its first `skip_batches`
    batches skipped."""
    dataset = dataset_fn(distribute.input_context(strategy))
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"dataset_fn must return a tf.data.Dataset, got {type(dataset).__name__}")
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    return dataset


def probe_input(strategy, dataset_fn, dataset_transform=None):
    """`(dataset_fn, element_spec)`: the spec of a first pipeline (built, then dropped),
    and the `dataset_fn` the loop reads (each pipeline passed through
    `dataset_transform`, e.g. packing, when given)."""
    probe_dataset = make_dataset(strategy, dataset_fn)
    element_spec = probe_dataset.element_spec
    del probe_dataset
    if dataset_transform is not None:
        # The model is built (and the batch size read) from `dataset_fn`'s batches.
        def transformed_fn(*args, **kwargs):
            return dataset_transform(dataset_fn(*args, **kwargs))

        return transformed_fn, element_spec
    return dataset_fn, element_spec


def sequences_per_step(
    element_spec, num_replicas: int, gradient_accumulation_steps: int, given: int | None = None
) -> int | None:
    """Sequences per step: `given`, else the static batch dimension of `element_spec`
    times the replicas (None when unknown), checked against the accumulation."""
    batch_size = given
    if not batch_size:
        x, _, _ = keras.utils.unpack_x_y_sample_weight(element_spec)
        batch = tf.nest.flatten(x)[0].shape[0]
        batch_size = None if batch is None else int(batch) * num_replicas
    if batch_size is not None:
        per_replica = batch_size // num_replicas
        if per_replica % gradient_accumulation_steps:
            raise UserError(
                f"The per-replica batch ({per_replica}) is not divisible by "
                f"gradient_accumulation_steps={gradient_accumulation_steps}"
            )
    return batch_size
