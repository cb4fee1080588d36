"""The prediction engine: a task's model over its examples, to raw outputs and answers.

Generic over the task contract (`tasks.task`): features -> model -> `task.postprocess`,
one host-side pass in feature order, the same answers under every distribution
strategy. The runner, the demo and the distillation's teacher read models through it;
tasks do not override it.

No padding computed (`batching="bucketed"`, the default): the features are read in
windows of `SORT_WINDOW_BATCHES` batches, each window sorted by length and cut into
batches, each batch trimmed to its longest row (rounded up to
`data.bucketing.length_buckets`, a few lengths: one trace, and at most a dozen XLA
compilations) and run; the outputs go back to the features' order and their sequence
axes (span and tag logits) back to the features' length, zeros at the padded
positions, which no task reads (`postprocess` reads the positions of real tokens, the
teacher's soft targets mask the padding). So `postprocess` and the teacher-output cache
see what a padded batch gives, to float rounding. `batching="padded"` runs the
features' own rows, as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.bucketing import length_buckets
from keras_bert_zoo.inputs import INPUT_MASK
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils import cpu_kernels
from keras_bert_zoo.utils.errors import UserError

# Batches per window sorted by length: the window's outputs are held until it is done.
SORT_WINDOW_BATCHES = 64
PREDICTION_BATCHINGS = ("bucketed", "padded")


def _concatenate(chunks: list):
    """Per-batch outputs (arrays, or dicts, lists or tuples of them) joined along the
    batch axis, in the same structure."""
    first = chunks[0]
    if isinstance(first, Mapping):
        return {key: _concatenate([chunk[key] for chunk in chunks]) for key in first}
    if isinstance(first, list | tuple):
        return type(first)(_concatenate([chunk[i] for chunk in chunks]) for i in range(len(first)))
    return np.concatenate([np.asarray(chunk) for chunk in chunks], axis=0)


# One forward function per model, traced once per input signature (a model that is
# garbage collected takes its function with it: the function holds the model weakly).
_FORWARD_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _forward_function(model) -> Callable:
    """`fn(x) -> outputs`: `model.predict_step` on one whole batch, outside any
    distribution strategy.

    Not `model.predict_on_batch`: Keras runs that through the strategy the model was
    built under (`strategy.run` on the batch, then the per-replica outputs concatenated),
    so a batch that is not distributed comes back once per replica: 2x the rows under
    `mirrored` on two devices, and under `multi_worker_mirrored` an all-gather of every
    worker's copy ("60 model outputs for 30 features" with two workers). Here every
    process computes the answers of the whole batch on its own device from its copy of
    the (mirrored, so equal) weights: the one-device answers under every strategy, no
    collective op, so workers need not evaluate in lockstep. XLA as Keras' own predict
    function would use it (`model.jit_compile`: on GPUs, not on CPU-only machines), or as a
    tool chose it for the CPU (`utils.cpu_kernels.inference_jit_compile`).
    """
    forward = _FORWARD_FUNCTIONS.get(model)
    if forward is not None:
        return forward
    model_ref = weakref.ref(model)

    def step(x):
        return model_ref().predict_step((x,))

    if getattr(model, "run_eagerly", False):
        forward = step
    else:
        # `reduce_retracing`: the last, partial batch relaxes the batch dimension once.
        forward = tf.function(
            step,
            reduce_retracing=True,
            jit_compile=cpu_kernels.inference_jit_compile(model),
            autograph=False,
        )
    _FORWARD_FUNCTIONS[model] = forward
    return forward


def _to_numpy(outputs):
    return tf.nest.map_structure(
        lambda value: value.numpy() if isinstance(value, tf.Tensor) else value, outputs
    )


# One forward function per model of relaxed sequence lengths, by input structure.
_TRIMMED_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _TrimmedForward:
    """`model`'s forward pass over batches of any length: one trace, whose input
    signature leaves the batch and sequence axes open (`tf.function(input_signature=)`);
    its outputs' open axes past the batch's are their sequence axes.

    Args:
        model: the Keras model.
        x: a first (numpy) batch of its inputs, holding `input_mask`.
    """

    def __init__(self, model, x: Mapping[str, np.ndarray]):
        self.mask_shape = np.shape(x[INPUT_MASK])
        self.per_position = {key for key, value in x.items() if self._has_mask_shape(value)}
        model_ref = weakref.ref(model)

        def step(inputs):
            return model_ref().predict_step((inputs,))

        signature = {
            key: tf.TensorSpec(self._open_shape(np.shape(value), key), tf.as_dtype(value.dtype))
            for key, value in x.items()
        }
        self.function = tf.function(
            step,
            input_signature=[signature],
            jit_compile=cpu_kernels.inference_jit_compile(model),
            autograph=False,
        )
        traced = self.function.get_concrete_function().structured_outputs
        # The axes a trimmed batch shortens: open in the trace beyond the batch axis.
        self.sequence_axes = tf.nest.map_structure(
            lambda spec: frozenset(
                axis for axis, size in enumerate(spec.shape) if axis and size is None
            ),
            traced,
        )

    def _has_mask_shape(self, value) -> bool:
        return np.shape(value)[: len(self.mask_shape)][1:] == self.mask_shape[1:]

    def _open_shape(self, shape, key):
        shape = [None, *shape[1:]]
        if key in self.per_position:
            shape[len(self.mask_shape) - 1] = None
        return shape

    def __call__(self, x: Mapping[str, np.ndarray], length: int, padded_length: int):
        """The outputs of `x` trimmed to `length` positions, their sequence axes padded
        back to `padded_length` with zeros."""
        axis = len(self.mask_shape) - 1
        trimmed = {
            key: value[(slice(None),) * axis + (slice(None, length),)]
            if key in self.per_position
            else value
            for key, value in x.items()
        }
        outputs = _to_numpy(self.function(trimmed))

        def pad(value, axes):
            value = np.asarray(value)
            widths = [(0, 0)] * value.ndim
            for seq_axis in axes:
                widths[seq_axis] = (0, padded_length - value.shape[seq_axis])
            return np.pad(value, widths) if axes else value

        return tf.nest.map_structure(pad, outputs, self.sequence_axes)


def _trimmed_forward(model, x) -> _TrimmedForward:
    by_structure = _TRIMMED_FUNCTIONS.setdefault(model, {})
    # The trace's input signature: the axes it keeps static (the texts of a
    # `[batch, texts, seq_len]` input: a sentence-embedding split of pairs, then one of
    # single texts) are part of the key.
    mask_shape = np.shape(x[INPUT_MASK])
    key = tuple(
        sorted(
            (
                name,
                np.ndim(value),
                str(np.asarray(value).dtype),
                tuple(np.shape(value)[1 : len(mask_shape) - 1]),
            )
            for name, value in x.items()
        )
    )
    if key not in by_structure:
        by_structure[key] = _TrimmedForward(model, x)
    return by_structure[key]


def _sorted_outputs(model, x: Mapping[str, np.ndarray], batch_size: int):
    """`model`'s outputs over `x` (numpy inputs of one window), in `x`'s order: run on
    batches of rows sorted by length, each trimmed to its longest row."""
    forward = _trimmed_forward(model, x)
    mask = np.asarray(x[INPUT_MASK])
    padded_length = mask.shape[-1]
    lengths = (mask != 0).sum(axis=-1)
    if lengths.ndim > 1:  # [rows, choices]: the longest choice
        lengths = lengths.reshape(len(lengths), -1).max(axis=1)
    buckets = np.asarray(length_buckets(padded_length))
    order = np.argsort(lengths, kind="stable")
    results = None
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        longest = int(lengths[rows].max())
        length = int(buckets[min(np.searchsorted(buckets, longest), len(buckets) - 1)])
        outputs = forward({key: value[rows] for key, value in x.items()}, length, padded_length)
        if results is None:
            results = tf.nest.map_structure(
                lambda value: np.zeros((len(order), *value.shape[1:]), value.dtype), outputs
            )

        def put(result, value, rows=rows):
            result[rows] = value

        tf.nest.map_structure(put, results, outputs)
    return results


def _slice(structure, start: int, stop: int):
    return tf.nest.map_structure(lambda value: value[start:stop], structure)


def outputs_by_batch(
    task: Task, model, features: tf.data.Dataset, batch_size: int, *, batching: str = "bucketed"
) -> Iterator[tuple[dict[str, np.ndarray], Any]]:
    """`(feature batch, model outputs)` as numpy, for `features` (unbatched feature
    dicts) in order, batches of `batch_size` and the last partial one. The model runs on
    each whole batch on this process's device, under every strategy (see
    `_forward_function`): `predict_raw` and the distillation's teacher-output cache
    read a model through this one path.

    With `batching="bucketed"` (the default) the model runs on batches of similar
    lengths trimmed to their longest row, and the outputs come back in feature order,
    as long as the features (see the module docstring); `"padded"` runs the features'
    batches as they are.
    """
    if batching not in PREDICTION_BATCHINGS:
        raise UserError(f"batching must be one of {PREDICTION_BATCHINGS}, got {batching!r}")
    if batching == "padded" or getattr(model, "run_eagerly", False):
        forward = _forward_function(model)
        for batch in features.batch(batch_size).prefetch(tf.data.AUTOTUNE):
            x, _, _ = task.split_features(batch)
            yield _to_numpy(dict(batch)), _to_numpy(forward(x))
        return
    window = features.batch(batch_size * SORT_WINDOW_BATCHES).prefetch(tf.data.AUTOTUNE)
    for chunk in window:
        x, _, _ = task.split_features(chunk)
        chunk, outputs = _to_numpy(dict(chunk)), _sorted_outputs(model, _to_numpy(x), batch_size)
        rows = len(chunk[INPUT_MASK])
        for start in range(0, rows, batch_size):
            stop = min(start + batch_size, rows)
            yield _slice(chunk, start, stop), _slice(outputs, start, stop)


def predict_raw(
    task: Task,
    model,
    examples: Sequence,
    preprocessor,
    batch_size: int = 32,
    *,
    batching: str = "bucketed",
    on_features: Callable[[int], None] | None = None,
) -> tuple[Any, dict[str, np.ndarray]]:
    """`(outputs, meta)`: the model's raw outputs and the features' metadata, as numpy,
    concatenated over every feature of `examples` in order (one host-side pass).

    Under any distribution strategy, every process computes every answer, the same as
    one device (see `_forward_function`); callers decide which process writes them.
    `batching`: `"bucketed"` (sorted, trimmed batches; the outputs as long as the
    features) or `"padded"` (see the module docstring). `on_features`, when given, is
    called after each batch with the number of features answered so far (a caller's
    progress line).
    """
    features = task.features(examples, preprocessor, training=False)
    outputs, metas = [], []
    done = 0
    for batch, batch_outputs in outputs_by_batch(
        task, model, features, batch_size, batching=batching
    ):
        outputs.append(batch_outputs)
        metas.append(task.feature_meta(batch))
        done += len(batch[INPUT_MASK])
        if on_features is not None:
            on_features(done)
    if not outputs:
        raise UserError(f"{task}: no features to predict on ({len(examples)} examples)")
    return _concatenate(outputs), _concatenate(metas)


def predict(
    task: Task,
    model,
    examples: Sequence,
    preprocessor,
    batch_size: int = 32,
    *,
    batching: str = "bucketed",
    on_features: Callable[[int], None] | None = None,
) -> list:
    """Answers for `examples`: features -> model -> `task.postprocess` (`batching`,
    `on_features`: as `predict_raw`'s)."""
    outputs, meta = predict_raw(
        task, model, examples, preprocessor, batch_size, batching=batching, on_features=on_features
    )
    return task.postprocess(outputs, meta, examples)
