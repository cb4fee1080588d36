"""Serving in TF ops: the logits of each word, and the entities its tags spell.

`word_logits` reads each word's logits where `TaggingPreprocessor` reads it;
`entity_spans` reads the entities of the predicted tags exactly as the task's metric
reads them (`metrics.entities`, conlleval; `metrics.raw_entities` for raw tags), so
the exported model answers what `postprocess` and `evaluate` see.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_bert_zoo.tasks.tagging import metrics
from keras_bert_zoo.utils.errors import UserError

_OUTSIDE_PREFIX, _BEGIN_PREFIX, _INSIDE_PREFIX, _OTHER_PREFIX = 0, 1, 2, 3


def _tag_tables(tags: Sequence[str]):
    """Per tag id: conlleval's prefix code and type id; and the type names (id 0: "").

    The prefix and type are `metrics.split_tag`'s, so the TF chunker below
    compares exactly what `metrics.entities` compares.
    """
    prefix_codes = {"O": _OUTSIDE_PREFIX, "B": _BEGIN_PREFIX, "I": _INSIDE_PREFIX}
    type_names = [""]  # the type of `O`, and the "previous type" at a sentence start
    prefixes, types = [], []
    for tag in tags:
        prefix, entity_type = metrics.split_tag(tag)
        prefixes.append(prefix_codes.get(prefix, _OTHER_PREFIX))
        if entity_type not in type_names:
            type_names.append(entity_type)
        types.append(type_names.index(entity_type))
    return prefixes, types, type_names


def entity_spans(tag_ids, tags: Sequence[str], tag_scheme: str):
    """The entities of tagged sentences, in TF ops, as `metrics` reads them.

    For the IOB schemes this is `metrics.entities` (conlleval's reading: a
    chunk starts at `B-X`, at `I-X` after `O` or another type, ...); for `raw` it
    is `metrics.raw_entities` (every word not tagged `O` is a one-word
    entity of its tag), the same readings the task's metric uses.

    Args:
        tag_ids: int `tf.RaggedTensor` `[sentences, (words)]` of indices into `tags`.
        tags: the tag set.
        tag_scheme: `"IOB1"`, `"IOB2"` or `"raw"`.

    Returns:
        dict of flat tensors, one entry per entity in sentence then word order:
        `sentence` (int64), `first_word` and `last_word` (int64, inclusive, indices
        in the sentence) and `type` (string).
    """
    if tag_scheme not in metrics.TAG_SCHEMES:
        raise UserError(f"tag_scheme must be one of {metrics.TAG_SCHEMES}, got {tag_scheme!r}")
    flat = tag_ids.flat_values
    word_sentence = tag_ids.value_rowids()
    sentence_start = tf.gather(tag_ids.row_starts(), word_sentence)
    positions = tf.range(tf.size(flat, out_type=tf.int64), dtype=tf.int64)
    if tag_scheme == "raw":
        tag_names = tf.constant(list(tags), tf.string, shape=[len(tags)])
        chosen = tf.where(tf.not_equal(tf.gather(tag_names, flat), metrics.OUTSIDE))[:, 0]
        sentence = tf.gather(word_sentence, chosen)
        word = chosen - tf.gather(sentence_start, chosen)
        return {
            "sentence": sentence,
            "first_word": word,
            "last_word": word,
            "type": tf.gather(tag_names, tf.gather(flat, chosen)),
        }
    prefix_table, type_table, type_names = _tag_tables(tags)
    prefix = tf.gather(tf.constant(prefix_table, tf.int32, shape=[len(tags)]), flat)
    entity_type = tf.gather(tf.constant(type_table, tf.int32, shape=[len(tags)]), flat)
    first = tf.equal(positions, sentence_start)
    last = tf.equal(positions, tf.gather(tag_ids.row_limits(), word_sentence) - 1)
    # Neighbours within the sentence; outside it, conlleval's sentinel `O` (type "").
    previous_prefix = tf.where(first, _OUTSIDE_PREFIX, tf.roll(prefix, 1, axis=0))
    previous_type = tf.where(first, 0, tf.roll(entity_type, 1, axis=0))
    next_prefix = tf.where(last, _OUTSIDE_PREFIX, tf.roll(prefix, -1, axis=0))
    next_type = tf.where(last, 0, tf.roll(entity_type, -1, axis=0))
    outside = tf.equal(prefix, _OUTSIDE_PREFIX)
    begin_or_inside = tf.equal(prefix, _BEGIN_PREFIX) | tf.equal(prefix, _INSIDE_PREFIX)
    # metrics._start_of_chunk(previous, this) and _end_of_chunk(this, next).
    starts = (
        tf.equal(prefix, _BEGIN_PREFIX)
        | (tf.equal(previous_prefix, _OUTSIDE_PREFIX) & tf.equal(prefix, _INSIDE_PREFIX))
        | (~outside & tf.not_equal(previous_type, entity_type))
    )
    ends = (
        begin_or_inside
        & (tf.equal(next_prefix, _BEGIN_PREFIX) | tf.equal(next_prefix, _OUTSIDE_PREFIX))
    ) | (~outside & tf.not_equal(entity_type, next_type))
    start_positions = tf.where(starts)[:, 0]
    end_positions = tf.where(ends)[:, 0]
    # A chunk runs from the last start at or before its end; with none in the
    # sentence, from the sentence's first word (conlleval's `start` variable).
    latest = tf.searchsorted(start_positions[tf.newaxis], end_positions[tf.newaxis], "right")[0] - 1
    latest_start = tf.gather(
        tf.concat([[-1], start_positions], axis=0), tf.cast(latest, tf.int64) + 1
    )
    end_sentence_start = tf.gather(sentence_start, end_positions)
    return {
        "sentence": tf.gather(word_sentence, end_positions),
        "first_word": tf.maximum(latest_start, end_sentence_start) - end_sentence_start,
        "last_word": end_positions - end_sentence_start,
        "type": tf.gather(
            tf.constant(type_names, tf.string), tf.gather(entity_type, end_positions)
        ),
    }


def word_logits(windows, logits, words):
    """The logits of each word, read where `TaggingPreprocessor` reads it.

    Args:
        windows: `TaggingPreprocessor` output for `words`.
        logits: float `[windows, sequence_length, tags]`.
        words: the `[sentences, (words)]` ragged tensor the windows come from.

    Returns:
        `[sentences, (words), tags]`: one row of logits per word.
    """
    word_index = windows["word_index"]
    read = tf.where(word_index >= 0)  # [words, 2]: (window, position)
    sentence = tf.gather(tf.cast(windows["sentence_index"], tf.int64), read[:, 0])
    global_word = tf.gather(words.row_starts(), sentence) + tf.cast(
        tf.gather_nd(word_index, read), tf.int64
    )
    num_words = tf.size(words.flat_values, out_type=tf.int64)
    values = tf.gather_nd(logits, read)
    num_tags = tf.shape(logits, out_type=tf.int64)[-1]
    # Each word is read in exactly one window, so the scatter writes each row once.
    flat = tf.scatter_nd(global_word[:, tf.newaxis], values, tf.stack([num_words, num_tags]))
    return words.with_flat_values(flat)
