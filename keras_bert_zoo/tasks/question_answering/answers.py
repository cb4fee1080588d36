"""Window logits -> answers: `QuestionAnsweringTask.decode` and `postprocess`.

Both run `decoding.decode_spans` with the task's settings: `decode_windows` on tensors
(in the exported graph, `serving.answer_fn`), `predictions_from_logits` eagerly on
the host over a whole split, whole examples at a time.

Example:

```python
from keras_bert_zoo.tasks.question_answering.answers import (
    SpanSettings,
    predictions_from_logits,
)

settings = SpanSettings(n_best_size=20, max_answer_length=30, with_null_answer=True)
answers = predictions_from_logits(outputs, meta, examples, settings)
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.question_answering.decoding import decode_spans, host_decoder
from keras_bert_zoo.tasks.question_answering.features import (
    EXAMPLE_INDEX,
    TOKEN_CHAR_END,
    TOKEN_CHAR_START,
    TOKEN_IS_MAX_CONTEXT,
)
from keras_bert_zoo.tasks.question_answering.predictions import (
    NBestEntry,
    QuestionAnsweringPrediction,
)
from keras_bert_zoo.tasks.question_answering.reader import QuestionAnsweringExample
from keras_bert_zoo.utils.errors import UserError

# Windows decoded per call in `predictions_from_logits`: bounds the [windows, seq, 30]
# score tensor.
_WINDOWS_PER_DECODE = 256


@dataclasses.dataclass(frozen=True)
class SpanSettings:
    """How answers are read from the logits (the task's options).

    Attributes:
        n_best_size: entries of an n-best list.
        max_answer_length: the longest answer, in word pieces.
        with_null_answer: SQuAD v2.0 rules (the null answer competes).
        null_score_diff_threshold: v2: answer "" when `null_score -
            best_non_null_score` exceeds it.
    """

    n_best_size: int
    max_answer_length: int
    with_null_answer: bool
    null_score_diff_threshold: float = 0.0


def decode_windows(
    windows: Mapping[str, Any],
    contexts,
    settings: SpanSettings,
    *,
    null_score_diff_threshold=None,
) -> dict[str, tf.Tensor]:
    """`decode_spans` with `settings`: window logits + metadata -> answers.

    Args:
        windows: `start_logits`, `end_logits` and the windows' metadata
            (`token_char_start`, `token_char_end`, `token_is_max_context`,
            `example_index`).
        contexts: string `[examples]`, the contexts the offsets point into.
        settings: the task's `SpanSettings`.
        null_score_diff_threshold: another threshold than the settings' (None: theirs).
    """
    return decode_spans(
        windows["start_logits"],
        windows["end_logits"],
        windows[TOKEN_CHAR_START],
        windows[TOKEN_CHAR_END],
        windows[TOKEN_IS_MAX_CONTEXT],
        windows[EXAMPLE_INDEX],
        contexts,
        n_best_size=settings.n_best_size,
        max_answer_length=settings.max_answer_length,
        version_2_with_negative=settings.with_null_answer,
        null_score_diff_threshold=(
            settings.null_score_diff_threshold
            if null_score_diff_threshold is None
            else null_score_diff_threshold
        ),
    )


def predictions_from_logits(
    outputs: Mapping[str, np.ndarray],
    meta: Mapping[str, np.ndarray],
    examples: Sequence[QuestionAnsweringExample],
    settings: SpanSettings,
) -> list[QuestionAnsweringPrediction]:
    """Window logits -> one `QuestionAnsweringPrediction` per example, in order.

    Args:
        outputs: `start_logits` and `end_logits`, `[windows, seq_len]`.
        meta: the windows' metadata, `example_index` non-decreasing.
        examples: the examples the windows were made from, in order.
        settings: the task's `SpanSettings`.

    Raises:
        UserError: windows and examples out of sync.
    """
    example_index = np.asarray(meta[EXAMPLE_INDEX]).astype(np.int64)
    num_windows = len(example_index)
    if num_windows == 0 or np.any(np.diff(example_index) < 0):
        raise UserError("meta['example_index'] must be non-empty and non-decreasing")
    firsts = np.searchsorted(example_index, np.arange(len(examples) + 1))
    if not np.array_equal(np.unique(example_index), np.arange(len(examples))):
        raise UserError(
            f"meta['example_index'] covers {len(np.unique(example_index))} examples in "
            f"[{example_index.min()}, {example_index.max()}], but {len(examples)} examples "
            "were given: features and examples are out of sync"
        )
    start_logits = np.asarray(outputs["start_logits"], np.float32)
    end_logits = np.asarray(outputs["end_logits"], np.float32)
    if start_logits.shape[0] != num_windows or end_logits.shape != start_logits.shape:
        raise UserError(
            f"outputs have {start_logits.shape} start and {end_logits.shape} end logits "
            f"for {num_windows} windows"
        )
    decoder = host_decoder(
        settings.n_best_size, settings.max_answer_length, settings.with_null_answer
    )
    threshold = tf.constant(settings.null_score_diff_threshold, tf.float64)
    predictions: list[QuestionAnsweringPrediction] = []
    first_example = 0
    while first_example < len(examples):
        last_example = first_example + 1
        # Whole examples per call, up to _WINDOWS_PER_DECODE windows (at least one).
        while (
            last_example < len(examples)
            and firsts[last_example + 1] - firsts[first_example] <= _WINDOWS_PER_DECODE
        ):
            last_example += 1
        lo, hi = firsts[first_example], firsts[last_example]
        decoded = decoder(
            start_logits[lo:hi],
            end_logits[lo:hi],
            np.asarray(meta[TOKEN_CHAR_START][lo:hi], np.int32),
            np.asarray(meta[TOKEN_CHAR_END][lo:hi], np.int32),
            np.asarray(meta[TOKEN_IS_MAX_CONTEXT][lo:hi], np.int32),
            (example_index[lo:hi] - first_example).astype(np.int32),
            tf.constant([e.context for e in examples[first_example:last_example]]),
            threshold,
        )
        decoded = {key: value.numpy() for key, value in decoded.items()}
        for row, example in enumerate(examples[first_example:last_example]):
            predictions.append(_prediction(example, decoded, row, settings.with_null_answer))
        first_example = last_example
    return predictions


def _prediction(example, decoded, row, with_null_answer: bool) -> QuestionAnsweringPrediction:
    """Row `row` of the decoder's numpy outputs as the answer to `example`."""

    def text(value) -> str:
        return value.decode("utf-8")

    nbest = tuple(
        NBestEntry(
            text=text(decoded["nbest_text"][row, k]),
            probability=float(decoded["nbest_probability"][row, k]),
            start_logit=float(decoded["nbest_start_logit"][row, k]),
            end_logit=float(decoded["nbest_end_logit"][row, k]),
            start=int(decoded["nbest_start"][row, k]),
            end=int(decoded["nbest_end"][row, k]),
        )
        for k in range(int(decoded["nbest_size"][row]))
    )
    return QuestionAnsweringPrediction(
        example_id=example.example_id,
        text=text(decoded["answer_text"][row]),
        start=int(decoded["answer_start"][row]),
        end=int(decoded["answer_end"][row]),
        best_text=text(decoded["best_text"][row]),
        best_start=int(decoded["best_start"][row]),
        best_end=int(decoded["best_end"][row]),
        best_score=float(decoded["best_score"][row]),
        null_score_diff=(float(decoded["null_score_diff"][row]) if with_null_answer else None),
        nbest=nbest,
    )
