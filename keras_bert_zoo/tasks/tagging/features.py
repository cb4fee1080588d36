"""Tagged sentences as a tf.data of windows: `TokenClassificationTask.features`.

Each sentence's words go through the task's `TaggingPreprocessor` (long sentences are
cut into windows, each word read in one of them); a window's label is its word's tag id
at the word's first piece and `IGNORED_LABEL` everywhere else.

Example:

```python
from keras_bert_zoo.tasks.tagging.features import tagged_windows

dataset = tagged_windows(sentences, preprocessor, tags=("O", "B-PER", "I-PER"))
```
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from keras_bert_zoo.tasks._shared import features_in_batches
from keras_bert_zoo.tasks.tagging.metrics import IGNORED_LABEL
from keras_bert_zoo.tasks.tagging.reader import TaggedSentence
from keras_bert_zoo.utils.errors import UserError

FEATURE_BATCH_SIZE = 64  # sentences tokenized per preprocessor call


def all_tagged(examples: Sequence[TaggedSentence]) -> bool:
    """Whether there are sentences and every one has its tags (the windows get labels)."""
    return bool(examples) and all(example.tags is not None for example in examples)


def tagged_windows(
    examples: Sequence[TaggedSentence],
    preprocessor,
    tags: Sequence[str] | None = None,
    *,
    batch_size: int = FEATURE_BATCH_SIZE,
) -> tf.data.Dataset:
    """One element per window: the model inputs, `word_index`, `example_index` and,
    with `tags`, `label`.

    Args:
        examples: the sentences.
        preprocessor: the task's `TaggingPreprocessor`.
        tags: the tag set in label order, to label the windows (every sentence must
            be tagged); None for no labels.
        batch_size: sentences per preprocessor call.

    Raises:
        UserError: a tag outside `tags`, naming the sentence and word.
    """
    lengths = [len(example.words) for example in examples]
    flat_words = [word for example in examples for word in example.words]
    columns = {
        "words": tf.RaggedTensor.from_row_lengths(
            tf.constant(flat_words, tf.string, shape=[len(flat_words)]),
            tf.constant(lengths, tf.int64, shape=[len(lengths)]),
        ),
        "example_index": tf.range(len(examples), dtype=tf.int32),
    }
    if tags is not None:
        tag_to_id = {tag: index for index, tag in enumerate(tags)}
        flat_ids = []
        for example in examples:
            for word_number, tag in enumerate(example.tags):
                if tag not in tag_to_id:
                    raise UserError(
                        f"{example.source} (word {word_number}): unknown tag {tag!r}; "
                        f"the tags are {list(tags)}"
                    )
                flat_ids.append(tag_to_id[tag])
        columns["tags"] = tf.RaggedTensor.from_row_lengths(
            tf.constant(flat_ids, tf.int32, shape=[len(flat_ids)]),
            tf.constant(lengths, tf.int64, shape=[len(lengths)]),
        )
    return features_in_batches(columns, _window_features, preprocessor, batch_size)


def _window_features(batch, preprocessor):
    """A batch of sentences -> one row per window, with labels and metadata."""
    windows = dict(preprocessor(batch["words"]))
    sentence = windows.pop("sentence_index")
    word_index = windows["word_index"]
    features = {
        **windows,
        "example_index": tf.gather(batch["example_index"], sentence),
    }
    if "tags" in batch:
        tags = batch["tags"]
        # One IGNORED_LABEL appended so positions without a word gather something.
        flat_tags = tf.concat([tags.flat_values, [IGNORED_LABEL]], axis=0)
        flat_index = tf.where(
            word_index >= 0,
            tf.cast(tf.gather(tags.row_starts(), sentence), tf.int32)[:, tf.newaxis] + word_index,
            tf.size(tags.flat_values),
        )
        features["label"] = tf.gather(flat_tags, flat_index)
    return features
