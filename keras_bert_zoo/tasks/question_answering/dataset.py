"""Questions as a tf.data of windows: `QuestionAnsweringTask.features`.

Each example goes through the task's `SquadPreprocessor` (one window per `doc_stride`
of its context); the windows keep their labels and the metadata the decoder needs.

Example:

```python
from keras_bert_zoo.tasks.question_answering.dataset import window_dataset

windows = window_dataset(task.read("dev"), task.make_preprocessor(tokenizer), training=False)
```
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.question_answering.features import EXAMPLE_INDEX
from keras_bert_zoo.tasks.question_answering.reader import QuestionAnsweringExample
from keras_bert_zoo.utils.errors import UserError

# preprocessor -> {with_answers: its tf.function}, traced once for all the datasets
# built from it.
_FEATURIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def window_dataset(
    examples: Sequence[QuestionAnsweringExample],
    preprocessor,
    *,
    training: bool,
    batch_size: int = 64,
    task_name: str = "question answering",
) -> tf.data.Dataset:
    """One element per window (see `SquadPreprocessor`), in example order.

    Every window keeps its labels (windows without the answer point at [CLS], as in
    the original) and the metadata decoding needs: `example_index` (the example's
    position in `examples`), `token_char_start`, `token_char_end`,
    `token_is_max_context`. When no example has gold answers (`has_gold`: test
    questions, a transfer set) and `training` is false, the windows have no labels:
    pointing every window at [CLS] would read as "no answer".

    Args:
        examples: the questions.
        preprocessor: the task's `SquadPreprocessor`.
        training: whether the windows train a model (they must then have answers).
        batch_size: examples windowed per preprocessor call.
        task_name: for the error messages.

    Returns:
        An unbatched `tf.data.Dataset` of flat dicts.

    Raises:
        UserError: no examples, or training examples none of which has gold answers.
    """
    if not examples:
        raise UserError(f"{task_name}: no examples to featurize")
    labelled = any(example.has_gold for example in examples)
    if training and not labelled:
        raise UserError(f"{task_name}: the training questions have no gold answers")
    columns = {
        "question": [example.question for example in examples],
        "context": [example.context for example in examples],
        EXAMPLE_INDEX: np.arange(len(examples), dtype=np.int32),
    }
    if labelled:
        spans = np.array([example.answer_span for example in examples], np.int64)
        columns["answer_start"] = spans[:, 0]
        columns["answer_end"] = spans[:, 1]
    dataset = tf.data.Dataset.from_tensor_slices(columns)

    featurize = _featurizer(preprocessor, with_answers=labelled)

    def to_windows(batch):
        answers = (batch["answer_start"], batch["answer_end"]) if labelled else ()
        windows = featurize(batch["question"], batch["context"], *answers)
        windows[EXAMPLE_INDEX] = tf.gather(batch[EXAMPLE_INDEX], windows[EXAMPLE_INDEX])
        return windows

    dataset = dataset.batch(batch_size).map(
        to_windows, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    return dataset.unbatch()


def _featurizer(preprocessor, *, with_answers: bool = True):
    """`preprocessor` as a tf.function traced once: every dataset built from it
    (training, evaluation, prediction) reuses the trace. `with_answers`: it takes the
    answers' character spans and makes the labels; without, only the texts."""
    featurizers = _FEATURIZERS.setdefault(preprocessor, {})
    featurize = featurizers.get(with_answers)
    if featurize is None:
        strings = tf.TensorSpec([None], tf.string)
        offsets = tf.TensorSpec([None], tf.int64)
        if with_answers:

            @tf.function(input_signature=[strings, strings, offsets, offsets], autograph=False)
            def featurize(question, context, answer_start, answer_end):
                return preprocessor(
                    {
                        "question": question,
                        "context": context,
                        "answer_start": answer_start,
                        "answer_end": answer_end,
                    }
                )

        else:

            @tf.function(input_signature=[strings, strings], autograph=False)
            def featurize(question, context):
                return preprocessor({"question": question, "context": context})

        featurizers[with_answers] = featurize
    return featurize
