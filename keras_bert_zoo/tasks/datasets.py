"""The tf.data glue between a task and the training loop: batches of a task's features.

Generic over the task contract (`tasks.task`): the runner and the tests use these,
tasks do not override them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from keras_bert_zoo.tasks.task import Task


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
) -> tf.data.Dataset:
    """Batches of the task's feature dicts (of `examples`, or the given `features`).

    Training batches are cached after featurization, shuffled with `seed` (the same
    order in every run), repeated and drop the remainder, so the stream is a
    deterministic function of the step; evaluation batches keep feature order and the
    last partial batch. With an `input_context` each input pipeline keeps every n-th
    feature.
    """
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
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
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
) -> Callable[[tf.distribute.InputContext | None], tf.data.Dataset]:
    """`fn(input_context)` yielding `(x, y)` or `(x, y, sample_weight)` batches of the
    per-replica size, for `strategy.distribute_datasets_from_function` (or called with
    None without a strategy). `features_fn` makes the feature dicts instead of
    `task.features(examples)` (distillation adds its unlabelled transfer set), and
    `split_features` splits them instead of `task.split_features` (distillation passes
    cached teacher outputs in `x`)."""
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
        )

        def to_training_tuple(features):
            x, y, sample_weight = split(features)
            if sample_weight is None:
                return x, y
            return x, y, sample_weight

        return dataset.map(to_training_tuple, num_parallel_calls=tf.data.AUTOTUNE)

    return dataset_fn
