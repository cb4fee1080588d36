"""The exported answers of a sentence task, in TF ops: `SentenceTask.serving_outputs`.

Raw string tensors `[batch]` named `text_fields` go through the training
preprocessor and the model; the answers are what `postprocess` answers:

| task           | outputs                                                              |
|----------------|----------------------------------------------------------------------|
| classification | `probabilities` float32 `[batch, num_labels]`, `label_id` int32       |
|                | `[batch]`, `label` string `[batch]`                                  |
| regression     | `score` float32 `[batch]`                                            |
| multi-label    | `probabilities`, `label_mask` int32 0/1 `[batch, num_labels]`,       |
|                | `label_count` int32 `[batch]`, `labels` string `[batch, max_count]`  |
|                | (the predicted labels in `label_names` order, padded with "")        |

Windowed (`long_documents=windows`), each text's windows go through the model and
their probabilities (scores) are aggregated per text, as `postprocess` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.sentence.windows import ROW_INDEX, aggregate_windows_tf
from keras_bert_zoo.tasks.servable import PROBABILITIES_ANSWER, SCORE_ANSWER
from keras_bert_zoo.utils.errors import UserError


def answer_fn(
    model,
    preprocessor,
    *,
    text_fields: Sequence[str],
    input_names: Sequence[str],
    label_names: Sequence[str] | None,
    thresholds: np.ndarray | None = None,
    aggregation: str = "mean",
) -> Callable:
    """`fn(**texts)` -> the answers, in TF ops (see the module docstring).

    Args:
        model: the `BertClassifier`.
        preprocessor: the task's preprocessor (windowed or not).
        text_fields: the names of the texts, in packing order.
        input_names: the model's inputs among the packed features.
        label_names: the labels in head order; None for a regression.
        thresholds: multi-label: each label's threshold, in `label_names` order; None
            otherwise.
        aggregation: how a windowed text's windows combine, `mean` or `max`.
    """
    text_fields = tuple(text_fields)
    label_names = None if label_names is None else tf.constant(list(label_names))
    multi = thresholds is not None
    thresholds = tf.constant(thresholds, tf.float32) if multi else None

    def answer(**texts):
        unknown = sorted(set(texts) - set(text_fields))
        if unknown or len(texts) != len(text_fields):
            raise UserError(f"Expected the texts {list(text_fields)}, got {sorted(texts)}")
        segments = tuple(tf.convert_to_tensor(texts[name]) for name in text_fields)
        inputs = preprocessor(segments if len(segments) > 1 else segments[0])
        logits = tf.cast(
            model({name: inputs[name] for name in input_names}, training=False), tf.float32
        )
        if label_names is None:
            values = logits
        elif multi:
            values = tf.sigmoid(logits)
        else:
            values = tf.nn.softmax(logits, axis=-1)
        if ROW_INDEX in inputs:
            values = aggregate_windows_tf(
                values, inputs[ROW_INDEX], tf.shape(segments[0])[0], aggregation
            )
        if label_names is None:
            return {SCORE_ANSWER: values[:, 0]}
        if multi:
            chosen = values >= thresholds[tf.newaxis, :]
            batch = tf.shape(values)[0]
            names = tf.tile(label_names[tf.newaxis, :], [batch, 1])
            return {
                PROBABILITIES_ANSWER: values,
                "label_mask": tf.cast(chosen, tf.int32),
                "label_count": tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1),
                "labels": tf.ragged.boolean_mask(names, chosen).to_tensor(""),
            }
        label_id = tf.argmax(values, axis=-1, output_type=tf.int32)
        return {
            PROBABILITIES_ANSWER: values,
            "label_id": label_id,
            "label": tf.gather(label_names, label_id),
        }

    return answer
