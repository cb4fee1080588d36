"""Window logits -> one tag per original word: `TokenClassificationTask.postprocess`.

Each word is read in exactly one window, at its first piece (`word_index` >= 0); its
tag is the argmax of the logits there.

Example:

```python
from keras_bert_zoo.tasks.tagging.answers import word_tags

answers = word_tags(logits, meta["example_index"], meta["word_index"], sentences, tags)
answers[0]  # ("B-PER", "I-PER", "O", ...), one tag per word
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.tasks.tagging.reader import TaggedSentence


def word_tags(
    logits,
    example_index,
    word_index,
    examples: Sequence[TaggedSentence],
    tags: Sequence[str],
    *,
    task_name: str = "token_classification",
) -> list[tuple[str, ...]]:
    """The predicted tag of every word of every example, in order.

    Args:
        logits: `[windows, seq_len, num_tags]`.
        example_index: each window's example, `[windows]`.
        word_index: `[windows, seq_len]`, the word read at each position (-1: none).
        examples: the sentences the windows were made from.
        tags: the tag set in label order.
        task_name: for the error.

    Raises:
        RuntimeError: a word read in no window or in several (features and examples
            out of sync).
    """
    logits = np.asarray(logits)
    example_index = np.asarray(example_index)
    word_index = np.asarray(word_index)
    lengths = np.array([len(example.words) for example in examples], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    rows, positions = np.nonzero(word_index >= 0)
    words = offsets[example_index[rows]] + word_index[rows, positions]
    predicted = np.full(offsets[-1], -1, np.int64)
    predicted[words] = logits[rows, positions].argmax(axis=-1)
    counts = np.bincount(words, minlength=offsets[-1])
    if offsets[-1] and (counts.min() != 1 or counts.max() != 1):
        missing = int(np.argmin(counts))
        raise RuntimeError(
            f"{task_name}: word {missing} of the batch was read "
            f"{counts[missing]} times; features and examples do not match"
        )
    tag_array = np.array(tags, dtype=object)
    return [
        tuple(tag_array[predicted[offsets[i] : offsets[i + 1]]].tolist())
        for i in range(len(examples))
    ]
