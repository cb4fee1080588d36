"""The exported answers of a tagging model, in TF ops: `TokenClassificationTask.serving_outputs`.

`text_fields = ("sentence",)`: raw UTF-8 sentences `[batch]`. Each is split into words
by `split_words` (whitespace separates words; punctuation and CJK ideographs are words
of their own; invalid UTF-8 becomes U+FFFD), the words go through the same
`TaggingPreprocessor` windows as in training (long sentences are windowed, never
truncated), each word gets the argmax tag of its logits (what `postprocess` answers),
and the entities are read from the tags as the task's metric reads them
(`metrics.entities`, conlleval: `I-X` after `O` or another type starts an entity; for
`raw` tags every word not tagged `O` is one). Offsets are CHARACTER (code point)
offsets into the sentence, end exclusive: Python's `sentence[start:end]` (for a
request holding invalid UTF-8, indices into `raw.decode("utf-8", errors="replace")`).
Outputs, all plain dense tensors:

| name           | dtype   | shape                   | padding |
|----------------|---------|-------------------------|---------|
| `word_count`   | int32   | `[batch]`               |         |
| `words`        | string  | `[batch, max_words]`    | `""`    |
| `word_start`   | int32   | `[batch, max_words]`    | -1      |
| `word_end`     | int32   | `[batch, max_words]`    | -1      |
| `word_tags`    | string  | `[batch, max_words]`    | `""`    |
| `word_score`   | float32 | `[batch, max_words]`    | 0       |
| `entity_count` | int32   | `[batch]`               |         |
| `entity_type`  | string  | `[batch, max_entities]` | `""`    |
| `entity_start` | int32   | `[batch, max_entities]` | -1      |
| `entity_end`   | int32   | `[batch, max_entities]` | -1      |
| `entity_text`  | string  | `[batch, max_entities]` | `""`    |
| `entity_score` | float32 | `[batch, max_entities]` | 0       |

`max_words` and `max_entities` are the largest counts in the batch (0 when there
are none). `word_score` is the softmax probability of the word's tag;
`entity_score` the mean of `word_score` over the entity's words. Entities come in
sentence order; `entity_text` is `sentence[entity_start:entity_end]`, and its type
is the tag's type (`PER`), or the whole tag for raw tags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from keras_bert_zoo.tasks._shared import named_texts
from keras_bert_zoo.tasks.tagging.preprocessor import split_words
from keras_bert_zoo.tasks.tagging.spans import entity_spans, word_logits
from keras_bert_zoo.text.offsets import valid_utf8


def answer_fn(
    model,
    preprocessor,
    *,
    text_fields: Sequence[str],
    input_names: Sequence[str],
    tags: Sequence[str],
    tag_scheme: str,
) -> Callable:
    """`fn(sentence)`: raw sentences (string `[batch]`) -> words, tags and entities.

    See the module docstring for the output schema. The words are those of
    `split_words`; their tags are what `postprocess` answers for them, and the
    entities those `metrics.entities` reads from the tags (`entity_spans`).

    Args:
        model: the `BertTokenClassifier`.
        preprocessor: the task's `TaggingPreprocessor`.
        text_fields: `("sentence",)`, the input's name.
        input_names: the model's inputs among the windows' features.
        tags: the tag set in label order.
        tag_scheme: the training data's scheme (`IOB1`, `IOB2` or `raw`: every word
            not tagged `O` is an entity of its own).
    """
    tags = list(tags)
    input_names = tuple(input_names)
    text_fields = tuple(text_fields)

    def serve(*args, **kwargs):
        (sentence,) = named_texts(text_fields, args, kwargs)
        text = valid_utf8(tf.convert_to_tensor(sentence))
        words, starts, ends = split_words(text)
        windows = preprocessor(words)
        logits = model({name: windows[name] for name in input_names}, training=False)
        logits = word_logits(windows, tf.cast(logits, tf.float32), words)
        tag_ids = tf.argmax(logits.flat_values, axis=-1, output_type=tf.int32)
        tag_probability = tf.reduce_max(tf.nn.softmax(logits.flat_values, axis=-1), axis=-1)
        tag_ids = words.with_flat_values(tag_ids)
        batch = tf.shape(text, out_type=tf.int64)[0]

        entities = entity_spans(tag_ids, tags, tag_scheme)
        first = tf.gather(words.row_starts(), entities["sentence"]) + entities["first_word"]
        last = tf.gather(words.row_starts(), entities["sentence"]) + entities["last_word"]
        entity_start = tf.gather(starts.flat_values, first)
        entity_end = tf.gather(ends.flat_values, last)
        entity_words = tf.ragged.range(first, last + 1)
        entity_score = tf.reduce_mean(
            entity_words.with_flat_values(tf.gather(tag_probability, entity_words.flat_values)),
            axis=1,
        )
        entity_text = tf.strings.substr(
            tf.gather(text, entities["sentence"]),
            entity_start,
            entity_end - entity_start,
            unit="UTF8_CHAR",
        )

        def per_entity(values, padding):
            return tf.RaggedTensor.from_value_rowids(
                values, entities["sentence"], nrows=batch
            ).to_tensor(padding)

        def per_word(ragged, padding):
            return ragged.to_tensor(padding)

        return {
            "word_count": tf.cast(words.row_lengths(), tf.int32),
            "words": per_word(words, ""),
            "word_start": per_word(tf.cast(starts, tf.int32), -1),
            "word_end": per_word(tf.cast(ends, tf.int32), -1),
            "word_tags": per_word(tf.gather(tf.constant(tags), tag_ids), ""),
            "word_score": per_word(words.with_flat_values(tag_probability), 0.0),
            "entity_count": tf.math.bincount(
                tf.cast(entities["sentence"], tf.int32),
                minlength=tf.cast(batch, tf.int32),
                maxlength=tf.cast(batch, tf.int32),
                dtype=tf.int32,
            ),
            "entity_type": per_entity(entities["type"], ""),
            "entity_start": per_entity(tf.cast(entity_start, tf.int32), -1),
            "entity_end": per_entity(tf.cast(entity_end, tf.int32), -1),
            "entity_text": per_entity(entity_text, ""),
            "entity_score": per_entity(entity_score, 0.0),
        }

    return serve
