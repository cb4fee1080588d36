"""Embedding examples as a tf.data of packed features: `SentenceEmbeddingTask.features`.

Every text of an example is packed alone (`[CLS] text [SEP]`) by the task's one
single-text preprocessor (`text.BertPreprocessor`, the layer the export runs), after
its prompt is prepended (`query_prompt` to the anchor or query, `document_prompt` to
positives, negatives and documents). An example of `k` texts gives one feature of
`[k, seq_len]` encoder inputs (the layout `BertTextGroupEmbedder` folds, as multiple
choice packs `[choices, seq_len]`), its `example_index` and `label`: a scored pair's
score, else 0 (a placeholder the in-batch loss does not read).

Example:

```python
from keras_bert_zoo.tasks.sentence_embedding.features import embedding_features

dataset = embedding_features(examples, preprocessor, prompts={"query": "query: "})
next(iter(dataset))["input_word_ids"].shape  # (2, 128) for pairs
```
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import tensorflow as tf

from keras_bert_zoo.tasks._shared import features_in_batches
from keras_bert_zoo.tasks.sentence_embedding.reader import EmbeddingExample
from keras_bert_zoo.utils.errors import UserError

# Examples tokenized per preprocessor call.
FEATURE_BATCH_SIZE = 64
LABEL = "label"
EXAMPLE_INDEX = "example_index"


def prompted_texts(example: EmbeddingExample, prompts: Mapping[str, str]) -> list[str]:
    """The example's texts, each with the prompt of its role prepended."""
    return [
        prompts.get(role, "") + text
        for text, role in zip(example.texts, example.roles, strict=True)
    ]


def _pack_texts(batch, preprocessor, width: int):
    """`[batch, width]` strings -> `[batch, width, seq_len]` packed inputs, every text
    packed alone (static shapes: the batches are bucketed by the `input_mask`'s)."""
    packed = preprocessor(tf.reshape(batch["texts"], [-1]))
    shape = [-1, width, preprocessor.sequence_length]
    features = {name: tf.reshape(value, shape) for name, value in packed.items()}
    features[EXAMPLE_INDEX] = batch[EXAMPLE_INDEX]
    features[LABEL] = batch[LABEL]
    return features


def embedding_features(
    examples: Sequence[EmbeddingExample],
    preprocessor,
    *,
    prompts: Mapping[str, str],
    with_scores: bool = False,
) -> tf.data.Dataset:
    """Unbatched features of `examples`, one an example (see the module docstring).

    Args:
        examples: examples with the same number of texts each.
        preprocessor: the single-text preprocessor (`BertPreprocessor`).
        prompts: `{role: prefix}`, the roles `"query"` and `"document"`.
        with_scores: each example's score is its `label` (scored pairs); else 0.

    Returns:
        `tf.data.Dataset` of dicts: `input_word_ids`, `input_mask`, `input_type_ids`
        (int32 `[texts, seq_len]`), `example_index` (int32) and `label` (float32).

    Raises:
        UserError: examples of different numbers of texts, or a missing score.
    """
    examples = list(examples)
    widths = {len(example.texts) for example in examples}
    if len(widths) > 1:
        raise UserError(
            f"{examples[0].source}: examples of {sorted(widths)} texts in one split; every row "
            "must have the same columns"
        )
    width = widths.pop() if widths else 1
    columns = {
        "texts": tf.constant(
            [prompted_texts(example, prompts) for example in examples],
            tf.string,
            shape=[len(examples), width],
        ),
        EXAMPLE_INDEX: tf.range(len(examples), dtype=tf.int32),
    }
    if with_scores:
        unscored = [example.source for example in examples if example.score is None]
        if unscored:
            raise UserError(f"{unscored[0]}: a pair without a score among scored pairs")
    # Pairs' label is a placeholder the in-batch loss does not read: a training batch
    # of Keras' `(x, y)` needs a `y` tensor.
    scores = [example.score if with_scores else 0.0 for example in examples]
    columns[LABEL] = tf.constant(scores, tf.float32, shape=[len(examples)])
    pack = functools.partial(_pack_texts, width=width)
    return features_in_batches(columns, pack, preprocessor, FEATURE_BATCH_SIZE)
