"""The tf.data glue between a task and the training loop: batches of a task's features.

Generic over the task contract (`tasks.task`): the runner and the tests use these,
tasks do not override them.

Two layouts of a batch (`batching`):

- `"padded"`: every row as long as the task's `max_seq_length` (the features' own
  shape);
- `"bucketed"`: training batches of similar lengths (`data.bucketing.length_grouped`:
  windows of the shuffled stream sorted by length), every batch cut to its longest row
  rounded up to a few lengths (`data.bucketing.length_buckets`), so the step computes
  (almost) no padding; other batches keep the feature order and are cut the same way.
  The per-position features are cut with the model inputs (`per_position_keys`): tag
  labels, the metadata of each token, a teacher's per-position outputs; span positions
  point inside the real tokens, which a cut keeps.

A job's `--batching=packed` trains on padded batches that the `Trainer` packs
(`runners.loss_and_weights.packing_transform`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf

from keras_bert_zoo.data.bucketing import (
    has_leading_shape,
    length_buckets,
    length_grouped,
    trim_batch,
)
from keras_bert_zoo.inputs import INPUT_MASK, TEACHER_OUTPUTS
from keras_bert_zoo.tasks.distillation import SOFT_POSITIONS, SOFT_TOKEN_CLASSES
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils.errors import UserError

# The layouts a task's batches take here (a job's `packed` is padded batches packed).
DATASET_BATCHINGS = ("padded", "bucketed")


def outputs_per_position(task: Task) -> bool:
    """Whether `task`'s model answers per position (span and tag heads), read from its
    soft-target kinds; True when it declares none (the shapes decide alone)."""
    try:
        kinds = task.soft_targets()
    except NotImplementedError:
        return True
    kinds = kinds.values() if isinstance(kinds, Mapping) else [kinds]
    return any(kind in (SOFT_POSITIONS, SOFT_TOKEN_CLASSES) for kind in kinds)


def per_position_keys(task: Task, element_spec: Mapping) -> list[str]:
    """The keys of `task`'s (unbatched) features that hold one value per position: those
    whose leading axes are the `input_mask`'s (`[seq_len]`, or `[choices, seq_len]`).
    Labels, sample weights and a teacher's outputs count only for a task whose outputs
    are per position (`outputs_per_position`): a multi-label task's `[num_labels]`
    labels are not cut when `num_labels` happens to equal `max_seq_length`."""
    mask_shape = element_spec[INPUT_MASK].shape
    targets = {*task.label_keys, "sample_weight", TEACHER_OUTPUTS}
    per_position_targets = outputs_per_position(task)
    return [
        key
        for key, spec in element_spec.items()
        if has_leading_shape(spec, mask_shape) and (per_position_targets or key not in targets)
    ]


def _check_batching(batching: str) -> None:
    if batching not in DATASET_BATCHINGS:
        raise UserError(f"batching must be one of {DATASET_BATCHINGS}, got {batching!r}")


def batched_dataset(
    task: Task,
    examples: Sequence,
    preprocessor,
    batch_size: int,
    *,
    training: bool = False,
    seed: int | None = None,
    input_context: tf.distribute.InputContext | None = None,
    repeat: bool | None = None,
    shuffle_buffer: int = 10_000,
    drop_remainder: bool | None = None,
    features: tf.data.Dataset | None = None,
    batching: str = "padded",
) -> tf.data.Dataset:
    """Batches of the task's feature dicts (of `examples`, or the given `features`).

    Training batches are cached after featurization, shuffled with `seed` (the same
    order in every run), repeated and drop the remainder, so the stream is a
    deterministic function of the step; evaluation batches keep feature order and the
    last partial batch. With an `input_context` each input pipeline keeps every n-th
    feature (and groups its own by length). `batching`: `"padded"` or `"bucketed"`
    (see the module docstring).
    """
    _check_batching(batching)
    repeat = training if repeat is None else repeat
    drop_remainder = training if drop_remainder is None else drop_remainder
    if features is None:
        features = task.features(examples, preprocessor, training=training)
    dataset = features
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if training:
        dataset = dataset.cache()
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    if batching == "padded":
        return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
    keys = per_position_keys(task, dataset.element_spec)
    padded_length = dataset.element_spec[INPUT_MASK].shape[-1]
    buckets = None if padded_length is None else length_buckets(padded_length)
    if training:
        dataset = length_grouped(dataset, batch_size, seed=seed, drop_remainder=drop_remainder)
    else:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(
        tf.autograph.experimental.do_not_convert(
            lambda batch: trim_batch(batch, buckets, keys=keys)
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def training_dataset_fn(
    task: Task,
    examples: Sequence,
    preprocessor,
    global_batch_size: int,
    *,
    seed: int | None = None,
    features_fn: Callable[[], tf.data.Dataset] | None = None,
    shuffle_buffer: int = 10_000,
    split_features: Callable | None = None,
    batching: str = "padded",
) -> Callable[[tf.distribute.InputContext | None], tf.data.Dataset]:
    """`fn(input_context)` yielding `(x, y)` or `(x, y, sample_weight)` batches of the
    per-replica size, for `strategy.distribute_datasets_from_function` (or called with
    None without a strategy). `features_fn` makes the feature dicts instead of
    `task.features(examples)` (distillation adds its unlabelled transfer set), and
    `split_features` splits them instead of `task.split_features` (distillation passes
    cached teacher outputs in `x`). `batching`: `"padded"` rows of `max_seq_length`, or
    `"bucketed"` batches of similar lengths cut to their longest row (the module
    docstring); the batch dimension is static either way."""
    _check_batching(batching)
    split = task.split_features if split_features is None else split_features

    def dataset_fn(input_context=None):
        batch_size = global_batch_size
        if input_context is not None:
            batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = batched_dataset(
            task,
            examples,
            preprocessor,
            batch_size,
            training=True,
            seed=seed,
            input_context=input_context,
            shuffle_buffer=shuffle_buffer,
            features=None if features_fn is None else features_fn(),
            batching=batching,
        )

        def to_training_tuple(features):
            x, y, sample_weight = split(features)
            if sample_weight is None:
                return x, y
            return x, y, sample_weight

        return dataset.map(
            tf.autograph.experimental.do_not_convert(to_training_tuple),
            num_parallel_calls=tf.data.AUTOTUNE,
        )

    return dataset_fn
