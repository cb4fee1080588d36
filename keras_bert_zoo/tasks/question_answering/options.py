"""The settings of the question answering tasks (`TaskOption`s) and their checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keras_bert_zoo.tasks.task import TaskOption
from keras_bert_zoo.utils.errors import UserError

DOC_STRIDE = TaskOption("doc_stride", 128, "Tokens between the starts of consecutive windows.")
MAX_QUERY_LENGTH = TaskOption(
    "max_query_length", 64, "Question word pieces kept; longer questions are truncated."
)
N_BEST_SIZE = TaskOption("n_best_size", 20, "Entries of nbest_predictions.json per question.")
MAX_ANSWER_LENGTH = TaskOption("max_answer_length", 30, "Longest answer, in word pieces.")
NULL_SCORE_DIFF_THRESHOLD = TaskOption(
    "null_score_diff_threshold",
    0.0,
    "SQuAD v2: answer '' when null_score - best_non_null_score exceeds this.",
)
VERSION_2_WITH_NEGATIVE = TaskOption(
    "version_2_with_negative",
    False,
    "extractive_qa: the data has unanswerable questions (SQuAD v2.0 rules).",
)

# The options every question answering task takes; SQuAD v2.0 and `extractive_qa` add
# the null answer's.
WINDOW_AND_ANSWER_OPTIONS = (DOC_STRIDE, MAX_QUERY_LENGTH, N_BEST_SIZE, MAX_ANSWER_LENGTH)


def check_options(option_values: Mapping[str, Any], max_seq_length: int) -> None:
    """Refuses window and answer settings that cannot work.

    Args:
        option_values: the task's options by name (`Task.option_values`).
        max_seq_length: the packed length of a window.

    Raises:
        UserError: a window or answer option that is not a positive integer, or a
            `max_seq_length` without room for the question, [CLS], two [SEP] and
            context.
    """
    for option in WINDOW_AND_ANSWER_OPTIONS:
        value = option_values[option.name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"Option {option.name} must be a positive integer, got {value!r}")
    max_query_length = int(option_values[MAX_QUERY_LENGTH.name])
    if max_seq_length <= max_query_length + 3:
        raise UserError(
            f"max_seq_length ({max_seq_length}) must exceed max_query_length "
            f"({max_query_length}) + 3"
        )
