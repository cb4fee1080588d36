"""The settings every sentence task takes for texts longer than `max_seq_length`."""

from __future__ import annotations

from keras_bert_zoo.tasks.sentence.windows import WINDOW_AGGREGATIONS
from keras_bert_zoo.tasks.task import TaskOption

LONG_DOCUMENTS = TaskOption(
    "long_documents",
    "truncate",
    "Sentence tasks: texts longer than max_seq_length are truncated, or cut into "
    "overlapping windows of the (last) text whose answers are aggregated per text.",
    choices=("truncate", "windows"),
)
WINDOW_STRIDE = TaskOption(
    "window_stride",
    64,
    "WordPieces between the starts of consecutive windows (capped at the window "
    "length: no overlap).",
)
WINDOW_AGGREGATION = TaskOption(
    "window_aggregation",
    "mean",
    "Sentence tasks with --long_documents=windows: one answer per text from the mean "
    "or the per-label maximum of its windows' probabilities (regression: mean).",
    choices=WINDOW_AGGREGATIONS,
)

# The options every sentence task takes for documents longer than `max_seq_length`.
WINDOW_OPTIONS = (LONG_DOCUMENTS, WINDOW_STRIDE, WINDOW_AGGREGATION)
