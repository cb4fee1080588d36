"""The prediction engine: a task's model over its examples, to raw outputs and answers.

Generic over the task contract (`tasks.task`): features -> model -> `task.postprocess`,
one host-side pass in feature order, the same answers under every distribution
strategy. The runner, the demo and the distillation's teacher read models through it;
tasks do not override it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils import cpu_kernels
from keras_bert_zoo.utils.errors import UserError


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
        )
    _FORWARD_FUNCTIONS[model] = forward
    return forward


def _to_numpy(outputs):
    return tf.nest.map_structure(
        lambda value: value.numpy() if isinstance(value, tf.Tensor) else value, outputs
    )


def outputs_by_batch(
    task: Task, model, features: tf.data.Dataset, batch_size: int
) -> Iterator[tuple[dict[str, np.ndarray], Any]]:
    """`(feature batch, model outputs)` as numpy, for `features` (unbatched feature
    dicts) in order, batches of `batch_size` and the last partial one. The model runs on
    each whole batch on this process's device, under every strategy (see
    `_forward_function`): `predict_raw` and the distillation's teacher-output cache
    read a model through this one path."""
    forward = _forward_function(model)
    for batch in features.batch(batch_size).prefetch(tf.data.AUTOTUNE):
        x, _, _ = task.split_features(batch)
        yield _to_numpy(dict(batch)), _to_numpy(forward(x))


def predict_raw(
    task: Task, model, examples: Sequence, preprocessor, batch_size: int = 32
) -> tuple[Any, dict[str, np.ndarray]]:
    """`(outputs, meta)`: the model's raw outputs and the features' metadata, as numpy,
    concatenated over every feature of `examples` in order (one host-side pass).

    Under any distribution strategy, every process computes every answer, the same as
    one device (see `_forward_function`); callers decide which process writes them.
    """
    features = task.features(examples, preprocessor, training=False)
    outputs, metas = [], []
    for batch, batch_outputs in outputs_by_batch(task, model, features, batch_size):
        outputs.append(batch_outputs)
        metas.append(task.feature_meta(batch))
    if not outputs:
        raise UserError(f"{task}: no features to predict on ({len(examples)} examples)")
    return _concatenate(outputs), _concatenate(metas)


def predict(task: Task, model, examples: Sequence, preprocessor, batch_size: int = 32) -> list:
    """Answers for `examples`: features -> model -> `task.postprocess`."""
    outputs, meta = predict_raw(task, model, examples, preprocessor, batch_size)
    return task.postprocess(outputs, meta, examples)
