"""A sentence task's prediction files: `SentenceTask.write_predictions`.

`predictions_<split>.jsonl`, one record per example: `index`, `example_id`, the texts
(under the names the data gives them), the answer (`label` and `probabilities`,
`score`, or `labels` and `probabilities`) and the gold answer when known; and, for a
split the benchmark scores, its submission TSV (`index\\tprediction`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from keras_bert_zoo.tasks.sentence.answers import SentenceAnswer
from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError

# What a prediction record says besides the texts (`write_predictions`).
_PREDICTION_RECORD_KEYS = frozenset(
    (
        "index",
        "example_id",
        "label",
        "labels",
        "probabilities",
        "score",
        "gold_label",
        "gold_labels",
    )
)


def prediction_texts(text_names: Sequence[str], example: SentenceExample) -> dict[str, str]:
    """The example's texts by `text_names`, as a prediction record holds them."""
    # A text named like one of the record's own keys (a column called `label`)
    # would overwrite or be overwritten by it; the prefix keeps both.
    return {
        f"text:{name}" if name in _PREDICTION_RECORD_KEYS else name: text
        for name, text in zip(text_names, example.texts, strict=True)
    }


def submission_value(answer: SentenceAnswer, *, regression: bool, multi_label: bool) -> str:
    """The answer as the submission file writes it: the label, the score with 6
    decimals, or the labels joined by commas."""
    if multi_label:
        return ",".join(answer.labels)
    return f"{answer.score:.6f}" if regression else answer.label


def write_prediction_files(
    answers: Sequence[SentenceAnswer],
    examples: Sequence[SentenceExample],
    output_dir: str,
    *,
    predictions_file_name: str,
    submission_file_name: str | None,
    text_names: Sequence[str],
    regression: bool,
    multi_label: bool,
) -> list[str]:
    """Writes the predictions JSON lines (the texts under `text_names`, probabilities
    or score, label) and, when `submission_file_name` is given, the submission TSV
    (`index\\tprediction`).

    Args:
        answers: one per example, in order.
        examples: the examples.
        output_dir: where to write.
        predictions_file_name: the JSON lines file's name.
        submission_file_name: the benchmark's file for the split, or None.
        text_names: the keys of the texts in a record, in `text_fields` order.
        regression: the answers are scores.
        multi_label: the answers are label sets.

    Returns:
        The paths written.
    """
    if len(answers) != len(examples):
        raise UserError(f"{len(answers)} answers for {len(examples)} examples")
    paths = []
    jsonl_path = os.path.join(output_dir, predictions_file_name)
    with atomic_open(jsonl_path) as f:
        for example, answer in zip(examples, answers, strict=True):
            record: dict[str, Any] = {
                "index": example.index,
                "example_id": example.example_id,
                **prediction_texts(text_names, example),
            }
            if regression:
                record["score"] = answer.score
            elif multi_label:
                record["labels"] = list(answer.labels)
                record["probabilities"] = answer.probabilities
            else:
                record["label"] = answer.label
                record["probabilities"] = answer.probabilities
            if example.label is not None and multi_label:
                record["gold_labels"] = list(example.label)
            elif example.label is not None:
                record["gold_label"] = example.label
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    paths.append(jsonl_path)
    if submission_file_name is not None:
        submission_path = os.path.join(output_dir, submission_file_name)
        with atomic_open(submission_path) as f:
            f.write("index\tprediction\n")
            for example, answer in zip(examples, answers, strict=True):
                value = submission_value(answer, regression=regression, multi_label=multi_label)
                f.write(f"{example.index}\t{value}\n")
        paths.append(submission_path)
    return paths
