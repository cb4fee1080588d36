"""Sentence examples as a tf.data of packed features: `SentenceTask.features`.

The texts are packed by the task's preprocessor (`BertPreprocessor`, or
`SentenceWindowPreprocessor` for `long_documents=windows`, which cuts a document into
several windows, each carrying its document's label and index).

Example:

```python
from keras_bert_zoo.tasks.sentence.features import (
    label_tensor,
    sentence_features,
    traced_packing,
)

pack = traced_packing(preprocessor, num_texts=2, cache={})
labels = label_tensor([0, 1], regression=False, num_labels=None)
dataset = sentence_features(examples, pack, num_texts=2, labels=labels)
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.tasks.sentence.windows import ROW_INDEX
from keras_bert_zoo.utils.errors import UserError

# Texts are tokenized this many at a time inside `features()`: one preprocessor call
# per example costs a graph dispatch each.
PREPROCESS_BATCH_SIZE = 256


def check_labelled(examples: Sequence[SentenceExample], *, training: bool, task_name: str) -> bool:
    """Whether every example has a label (else none has one).

    Raises:
        UserError: labelled and unlabelled examples mixed, or training examples
            without labels.
    """
    unlabelled = [example for example in examples if example.label is None]
    if not unlabelled:
        return True
    if len(unlabelled) != len(examples):
        raise UserError(
            f"{unlabelled[0].source}: example without a label among labelled ones "
            f"({len(unlabelled)} of {len(examples)} unlabelled)"
        )
    if training:
        raise UserError(f"{task_name}: the training examples have no labels")
    return False


def label_tensor(labels: list, *, regression: bool, num_labels: int | None) -> tf.Tensor:
    """The encoded labels as one tensor: int32 class ids, float32 scores (regression),
    or float32 0/1 rows `[examples, num_labels]` (multi-label: `num_labels` given)."""
    count = len(labels)
    if num_labels is not None:
        return tf.constant(np.asarray(labels, np.float32).reshape(count, num_labels))
    dtype = tf.float32 if regression else tf.int32
    return tf.constant(labels, dtype, shape=[count])


def sentence_features(
    examples: Sequence[SentenceExample],
    pack,
    *,
    num_texts: int,
    labels: tf.Tensor | None = None,
) -> tf.data.Dataset:
    """Flat dicts: the three model inputs, `label` (when `labels` is given) and
    `example_index` (the example's position in `examples`); windowed, one dict per
    window, with `window_start` and `window_length` (pieces).

    Args:
        examples: the examples, each with `num_texts` texts.
        pack: `(*segments) -> features`, the preprocessor on `[batch]` string tensors
            (`traced_packing`).
        num_texts: texts per example.
        labels: the encoded labels, one row per example (`label_tensor`), or None.

    Returns:
        An unbatched `tf.data.Dataset`.
    """
    examples = list(examples)
    count = len(examples)
    columns = {
        f"text_{position}": tf.constant(
            [example.texts[position] for example in examples], tf.string, shape=[count]
        )
        for position in range(num_texts)
    }
    columns["example_index"] = tf.range(count, dtype=tf.int64)
    if labels is not None:
        columns["label"] = labels

    def preprocess(batch):
        batch = dict(batch)
        segments = [batch.pop(f"text_{position}") for position in range(num_texts)]
        packed = dict(pack(*segments))
        if ROW_INDEX in packed:
            # Windows: each carries its document's label and index.
            row_index = packed.pop(ROW_INDEX)
            batch = {key: tf.gather(value, row_index) for key, value in batch.items()}
        return {**packed, **batch}

    dataset = tf.data.Dataset.from_tensor_slices(columns)
    dataset = dataset.batch(PREPROCESS_BATCH_SIZE)
    dataset = dataset.map(
        tf.autograph.experimental.do_not_convert(preprocess),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return dataset.unbatch()


def traced_packing(preprocessor, num_texts: int, cache: dict):
    """`preprocessor` on `[batch]` string tensors, traced once per preprocessor.

    Each new `tf.data` map would trace the tokenizer's graph again (seconds per
    dataset: one per evaluation); a `tf.function` with a fixed signature is traced on
    its first call and reused by every dataset after it.

    Args:
        preprocessor: the task's preprocessor.
        num_texts: texts per example (one: the preprocessor takes a tensor; more: a
            tuple).
        cache: where the functions are kept (the task's), by preprocessor.
    """
    if id(preprocessor) not in cache:

        def pack(*segments):
            return preprocessor(tuple(segments) if num_texts > 1 else segments[0])

        signature = [tf.TensorSpec([None], tf.string)] * num_texts
        # The preprocessor is kept beside its function so that its id stays unique.
        cache[id(preprocessor)] = (
            preprocessor,
            tf.function(pack, input_signature=signature, autograph=False),
        )
    return cache[id(preprocessor)][1]
