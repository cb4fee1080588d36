"""Pretraining TFRecords in the layout of google-research/bert create_pretraining_data.py.

Each ``tf.train.Example`` holds (``S = max_seq_length``, ``P = max_predictions_per_seq``):

=====================  =======  =====  ==============================================
feature                dtype    shape  meaning
=====================  =======  =====  ==============================================
input_ids              int64    [S]    token ids, ``[CLS] A [SEP] B [SEP]``, 0-padded
input_mask             int64    [S]    1 for real tokens, 0 for padding
segment_ids            int64    [S]    0 for sentence A (and padding), 1 for B
masked_lm_positions    int64    [P]    positions of masked tokens, 0-padded
masked_lm_ids          int64    [P]    original ids at those positions, 0-padded
masked_lm_weights      float32  [P]    1.0 for real predictions, 0.0 for padding
next_sentence_labels   int64    [1]    0 = B follows A (IsNext), 1 = B is random
=====================  =======  =====  ==============================================

``parse_pretraining_examples`` renames them to the model's inputs: input_word_ids,
input_mask, input_type_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights,
next_sentence_labels (all int32 except masked_lm_weights float32; next_sentence_labels
is a scalar per example, ``[B]`` per batch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data import pipeline
from keras_bert_zoo.inputs import ENCODER_INPUT_NAMES, INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS
from keras_bert_zoo.utils.atomic import atomic_path
from keras_bert_zoo.utils.errors import UserError

__all__ = [
    "ORIGINAL_TO_MODEL_NAMES",
    "make_pretraining_example",
    "parse_pretraining_examples",
    "pretraining_dataset",
    "pretraining_feature_spec",
    "pretraining_parser",
    "split_pretraining_features",
    "write_pretraining_examples",
]

MODEL_INPUT_NAMES = (*ENCODER_INPUT_NAMES, "masked_lm_positions")
LABEL_NAMES = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")

DEFAULT_MAX_SEQ_LENGTH = 128
DEFAULT_MAX_PREDICTIONS_PER_SEQ = 20

# Record feature name -> model input name.
ORIGINAL_TO_MODEL_NAMES = {
    "input_ids": INPUT_WORD_IDS,
    "input_mask": INPUT_MASK,
    "segment_ids": INPUT_TYPE_IDS,
    "masked_lm_positions": "masked_lm_positions",
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "next_sentence_labels",
}


def pretraining_feature_spec(
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ,
) -> dict[str, tf.io.FixedLenFeature]:
    """The ``tf.io.parse_example`` spec of create_pretraining_data.py records."""
    s, p = int(max_seq_length), int(max_predictions_per_seq)
    return {
        "input_ids": tf.io.FixedLenFeature([s], tf.int64),
        "input_mask": tf.io.FixedLenFeature([s], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([s], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([p], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def parse_pretraining_examples(
    serialized: tf.Tensor,
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ,
) -> dict[str, tf.Tensor]:
    """Parses one serialized record (scalar) or a batch of them (``[B]``).

    Batched parsing (``make_plain_batches(preprocess_fn=pretraining_parser(...))`` on raw
    records) is much faster than parsing record by record.
    """
    serialized = tf.convert_to_tensor(serialized, tf.string)
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    if serialized.shape.rank == 0:
        raw = tf.io.parse_single_example(serialized, spec)
    else:
        raw = tf.io.parse_example(serialized, spec)
    out = {}
    for name, value in raw.items():
        if value.dtype == tf.int64:
            value = tf.cast(value, tf.int32)
        out[ORIGINAL_TO_MODEL_NAMES[name]] = value
    out["next_sentence_labels"] = tf.squeeze(out["next_sentence_labels"], axis=-1)
    return out


def split_pretraining_features(
    features: Mapping[str, tf.Tensor],
) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
    """``(x, y)`` for ``BertPretrainer.fit``: x = encoder inputs + masked_lm_positions,
    y = masked_lm_ids, masked_lm_weights, next_sentence_labels."""
    x = {k: features[k] for k in MODEL_INPUT_NAMES}
    y = {k: features[k] for k in LABEL_NAMES}
    return x, y


def pretraining_parser(
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ,
) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """``parse_pretraining_examples`` with the two lengths bound."""

    def parse(serialized):
        return parse_pretraining_examples(serialized, max_seq_length, max_predictions_per_seq)

    return parse


def make_pretraining_example(
    instance: Mapping[str, Any],
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ,
) -> tf.train.Example:
    """One ``tf.train.Example`` from an unpadded instance, padded like the original.

    ``instance`` keys: ``input_ids`` and ``segment_ids`` (lists of equal length, at
    most ``max_seq_length``), ``masked_lm_positions`` and ``masked_lm_ids`` (equal
    length, at most ``max_predictions_per_seq``), ``next_sentence_label`` (or
    ``next_sentence_labels``; 0 IsNext, 1 random). ``input_mask`` and
    ``masked_lm_weights`` default to ones over the real entries. Padding is zeros
    (weights 0.0), as in create_pretraining_data.py's write_instance_to_example_files.
    """
    input_ids = [int(x) for x in instance["input_ids"]]
    segment_ids = [int(x) for x in instance["segment_ids"]]
    input_mask = [int(x) for x in instance.get("input_mask", [1] * len(input_ids))]
    if not len(input_ids) == len(segment_ids) == len(input_mask):
        raise UserError("input_ids, segment_ids and input_mask differ in length.")
    if len(input_ids) > max_seq_length:
        raise UserError(f"{len(input_ids)} tokens exceed max_seq_length={max_seq_length}.")
    positions = [int(x) for x in instance["masked_lm_positions"]]
    ids = [int(x) for x in instance["masked_lm_ids"]]
    weights = [float(x) for x in instance.get("masked_lm_weights", [1.0] * len(ids))]
    if not len(positions) == len(ids) == len(weights):
        raise UserError("masked_lm_positions, masked_lm_ids and masked_lm_weights differ.")
    if len(positions) > max_predictions_per_seq:
        raise UserError(
            f"{len(positions)} predictions exceed max_predictions_per_seq="
            f"{max_predictions_per_seq}."
        )
    label = instance.get("next_sentence_label", instance.get("next_sentence_labels", 0))
    label = int(np.asarray(label).reshape(-1)[0])

    def pad(values, n, value=0):
        return values + [value] * (n - len(values))

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    def floats(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    s, p = max_seq_length, max_predictions_per_seq
    features = {
        "input_ids": ints(pad(input_ids, s)),
        "input_mask": ints(pad(input_mask, s)),
        "segment_ids": ints(pad(segment_ids, s)),
        "masked_lm_positions": ints(pad(positions, p)),
        "masked_lm_ids": ints(pad(ids, p)),
        "masked_lm_weights": floats(pad(weights, p, 0.0)),
        "next_sentence_labels": ints([label]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features))


def write_pretraining_examples(
    path: str,
    instances: Iterable[Mapping[str, Any]],
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ,
    compression_type: str | None = None,
) -> int:
    """Writes instances (see ``make_pretraining_example``) to a TFRecord file.

    The file is written atomically (``keras_bert_zoo.utils.atomic``), so a reader
    never sees a half-written file. Returns the number of records written.
    """
    count = 0
    options = tf.io.TFRecordOptions(compression_type=compression_type or "")
    with atomic_path(path) as temp_path, tf.io.TFRecordWriter(temp_path, options) as writer:
        for instance in instances:
            example = make_pretraining_example(instance, max_seq_length, max_predictions_per_seq)
            writer.write(example.SerializeToString())
            count += 1
    return count


def pretraining_dataset(
    file_patterns: pipeline.FilePatterns,
    batch_size: int,
    *,
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ,
    input_context: tf.distribute.InputContext | None = None,
    shuffle: bool = False,
    shuffle_buffer: int | None = None,
    seed: int | None = None,
    compression_type: str | None = None,
    split_labels: bool = False,
    **batch_kwargs: Any,
) -> tf.data.Dataset:
    """Batches of parsed pretraining records (``batch_size`` per replica).

    Reads files (sharded per ``input_context``), shuffles files and records when
    ``shuffle`` (``shuffle_buffer`` defaults to 100 * batch_size), batches raw records
    and parses each batch at once. Extra keyword arguments go to ``make_plain_batches``
    (``repeat``, ``drop_remainder``, ``pad_to_longest``, ...). With ``split_labels``
    each batch is ``(x, y)`` as ``split_pretraining_features`` makes it, ready for
    ``BertPretrainer.fit``; otherwise one flat dict.
    """
    ds = pipeline.tfrecord_dataset(
        file_patterns,
        input_context=input_context,
        shuffle=shuffle,
        seed=seed,
        compression_type=compression_type,
    )
    if shuffle and shuffle_buffer is None:
        shuffle_buffer = 100 * batch_size
    parse = pretraining_parser(max_seq_length, max_predictions_per_seq)
    if split_labels:
        flat_parse = parse

        def parse(serialized):
            return split_pretraining_features(flat_parse(serialized))

    return pipeline._batches(
        ds,
        parse,
        batch_size,
        shuffle_buffer=shuffle_buffer if shuffle else None,
        seed=seed,
        **batch_kwargs,
    )
