"""The official evaluation of SQuAD answers and the files it reads:
`QuestionAnsweringTask.evaluate` and `write_predictions`.

Example:

```python
from keras_bert_zoo.tasks.question_answering.evaluation import evaluate_answers

scores = evaluate_answers(answers, dev_examples, with_null_answer=True)
scores["best_f1"], scores["best_f1_thresh"]
```
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from absl import logging

from keras_bert_zoo.tasks.question_answering import metrics as official
from keras_bert_zoo.tasks.question_answering.predictions import (
    QuestionAnsweringPrediction,
    nbest_json,
    null_odds_json,
    prediction_file_names,
    predictions_json,
    write_json,
)
from keras_bert_zoo.tasks.question_answering.reader import QuestionAnsweringExample
from keras_bert_zoo.utils.errors import UserError


def check_aligned(
    answers: Sequence[QuestionAnsweringPrediction], examples: Sequence[QuestionAnsweringExample]
) -> None:
    """Refuses answers that are not one per example, in the examples' order."""
    if len(answers) != len(examples):
        raise UserError(f"{len(answers)} answers for {len(examples)} examples")
    for answer, example in zip(answers, examples, strict=True):
        if answer.example_id != example.example_id:
            raise UserError(
                f"answer for {answer.example_id!r} where example {example.example_id!r} "
                "was expected: answers must follow the examples' order"
            )


def evaluate_answers(
    answers: Sequence[QuestionAnsweringPrediction],
    examples: Sequence[QuestionAnsweringExample],
    *,
    with_null_answer: bool,
) -> dict[str, float]:
    """The official evaluation of `answers`.

    v1.1: `evaluate-v1.1.py` (`exact_match`, `f1`). v2.0: `evaluate-v2.0.py` with
    `--na-prob-file null_odds.json` on `predictions.json` (made with
    `null_score_diff_threshold`), except that `best_*` sweep the threshold over the
    best non-null answers (`best_text`), so every threshold is searched: the script run
    on already-thresholded predictions cannot see what a threshold above the one used
    would gain (those answers are already ""). When the best threshold lies below the
    flag's value (the usual case at the default 0.0), both agree.

    Args:
        answers: one per example, in the examples' order.
        examples: the questions, every one with gold answers.
        with_null_answer: SQuAD v2.0 rules (`evaluate-v2.0.py`), else v1.1's.

    Raises:
        UserError: answers out of order, or a question without gold answers.
    """
    check_aligned(answers, examples)
    unlabelled = [e.example_id for e in examples if not e.has_gold]
    if unlabelled:
        raise UserError(
            f"{len(unlabelled)} question(s) have no gold answers (e.g. {unlabelled[:3]}): "
            "nothing to evaluate against"
        )
    predictions = predictions_json(answers)
    if not with_null_answer:
        gold = {e.example_id: e.gold_texts for e in examples}
        return official.evaluate_v1(gold, predictions)
    gold = {e.example_id: [] if e.is_impossible else e.gold_texts for e in examples}
    return official.evaluate_v2(
        gold,
        predictions,
        na_probs=null_odds_json(answers),
        threshold_predictions={a.example_id: a.best_text for a in answers},
    )


def write_prediction_files(
    answers: Sequence[QuestionAnsweringPrediction],
    examples: Sequence[QuestionAnsweringExample],
    output_dir: str,
    split: str,
    *,
    with_null_answer: bool,
    null_score_diff_threshold: float,
    task_name: str = "question answering",
) -> list[str]:
    """Writes the official files (`predictions.json`, `nbest_predictions.json`, and for
    v2 `null_odds.json`; prefixed with the split unless it is "dev").

    For v2 on labelled data it also finds the best threshold (`best_f1_thresh`, see
    `evaluate_answers`) and writes the predictions made with it,
    `predictions_best_threshold.json`, and `best_threshold.json` (the thresholds, the
    scores they reach, and the flag's value that `predictions.json` used).

    Args:
        answers: one per example, in the examples' order.
        examples: the questions.
        output_dir: where to write.
        split: the split's name (the files' prefix).
        with_null_answer: SQuAD v2.0 rules.
        null_score_diff_threshold: the threshold `answers` were made with.
        task_name: for the log line.

    Returns:
        The paths written.
    """
    check_aligned(answers, examples)
    names = prediction_file_names(split)
    paths = [
        write_json(os.path.join(output_dir, names["predictions"]), predictions_json(answers)),
        write_json(os.path.join(output_dir, names["nbest"]), nbest_json(answers)),
    ]
    if not with_null_answer:
        return paths
    paths.append(write_json(os.path.join(output_dir, names["null_odds"]), null_odds_json(answers)))
    if all(example.has_gold for example in examples):
        scores = evaluate_answers(answers, examples, with_null_answer=True)
        threshold = scores["best_f1_thresh"]
        best = [answer.with_null_threshold(threshold) for answer in answers]
        paths.append(
            write_json(
                os.path.join(output_dir, names["best_threshold_predictions"]),
                predictions_json(best),
            )
        )
        summary = {
            key: scores[key]
            for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")
        }
        summary["null_score_diff_threshold"] = null_score_diff_threshold
        summary["f1"] = scores["f1"]
        summary["exact"] = scores["exact"]
        paths.append(write_json(os.path.join(output_dir, names["best_threshold"]), summary))
        logging.info(
            "%s %s: best_f1 %.3f at null_score_diff_threshold %.4f (f1 %.3f at %.4f)",
            task_name,
            split,
            scores["best_f1"],
            threshold,
            scores["f1"],
            null_score_diff_threshold,
        )
    return paths
