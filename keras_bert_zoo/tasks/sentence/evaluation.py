"""The official scores of a sentence task's answers: `SentenceTask.evaluate` and its
confusion matrix.

Example:

```python
from keras_bert_zoo.tasks.sentence.evaluation import evaluate_answers

scores = evaluate_answers(answers, examples, metric_names=("accuracy", "f1"))
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_bert_zoo.tasks.sentence import metrics as metric_functions
from keras_bert_zoo.tasks.sentence import multi_label
from keras_bert_zoo.tasks.sentence.answers import SentenceAnswer
from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.utils.errors import UserError

# The metrics a task may list in `metric_names`, by name.
METRIC_FUNCTIONS = {
    "accuracy": metric_functions.accuracy,
    "f1": metric_functions.f1_score,
    "matthews_corrcoef": metric_functions.matthews_corrcoef,
    "pearson": metric_functions.pearson,
    "spearman": metric_functions.spearman,
}


def evaluate_answers(
    answers: Sequence[SentenceAnswer],
    examples: Sequence[SentenceExample],
    *,
    metric_names: Sequence[str],
    positive_label: str = "1",
    multi_label_names: Sequence[str] | None = None,
) -> dict[str, float]:
    """The task's metrics of `answers` against the examples' gold labels.

    Args:
        answers: one per example, in order.
        examples: the labelled examples.
        metric_names: names of `METRIC_FUNCTIONS` (single-label and regression).
        positive_label: the class `f1` scores.
        multi_label_names: multi-label: the label set, and the metrics are
            `multi_label.multi_label_report`'s (micro/macro/per-label F1, subset
            accuracy) instead of `metric_names`; None otherwise.

    Raises:
        UserError: not one answer per example, or an example without a gold label.
    """
    if len(answers) != len(examples):
        raise UserError(f"{len(answers)} answers for {len(examples)} examples")
    unlabelled = [example for example in examples if example.label is None]
    if unlabelled:
        raise UserError(
            f"{unlabelled[0].source}: cannot evaluate examples without gold labels "
            f"({len(unlabelled)} of {len(examples)})"
        )
    if multi_label_names is not None:
        return multi_label.multi_label_report(
            multi_label.multi_hot([example.label for example in examples], multi_label_names),
            multi_label.multi_hot([answer.labels for answer in answers], multi_label_names),
            multi_label_names,
        )
    gold = [example.label for example in examples]
    predicted = [answer.prediction for answer in answers]
    results = {}
    for name in metric_names:
        if name == "f1":
            results[name] = METRIC_FUNCTIONS[name](gold, predicted, positive_label=positive_label)
        else:
            results[name] = METRIC_FUNCTIONS[name](gold, predicted)
    return results


def confusion_matrix(
    answers: Sequence[SentenceAnswer],
    examples: Sequence[SentenceExample],
    label_names: Sequence[str],
) -> dict[str, Any]:
    """`{"labels": label_names, "matrix": rows gold, columns predicted}` of a
    single-label classification."""
    index = {name: position for position, name in enumerate(label_names)}
    matrix = np.zeros((len(index), len(index)), np.int64)
    for answer, example in zip(answers, examples, strict=True):
        matrix[index[example.label], index[answer.prediction]] += 1
    return {"labels": list(label_names), "matrix": matrix.tolist()}
