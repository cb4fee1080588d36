"""The answers of a sentence task: `SentenceAnswer`, and the head's logits read as one
answer per example (`SentenceTask.postprocess`).

A classification answers the label of the highest softmax probability; a regression
its score; multi-label every label whose sigmoid probability reaches its threshold. A
windowed document answers from the `window_aggregation` of its windows'
probabilities (scores).

Example:

```python
import numpy as np
from keras_bert_zoo.tasks.sentence.answers import answers_from_logits

answers = answers_from_logits(
    np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([0, 1]), 2, label_names=("no", "yes")
)
answers[0].label  # "no"
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.tasks.sentence.windows import aggregate_windows


@dataclasses.dataclass(frozen=True)
class SentenceAnswer:
    """The model's answer for one example.

    Attributes:
        label: the predicted label name (classification), else None.
        probabilities: probability of every label, by label name (softmax; sigmoid
            for multi-label; aggregated over the windows of a windowed document).
        score: the predicted score (regression), else None.
        labels: the predicted label set (multi-label), in `label_names` order.
    """

    label: str | None = None
    probabilities: dict[str, float] | None = None
    score: float | None = None
    labels: tuple[str, ...] | None = None

    @property
    def prediction(self) -> str | float | tuple[str, ...]:
        """What the submission file holds: the label name, the score or the labels."""
        if self.labels is not None:
            return self.labels
        return self.score if self.label is None else self.label


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=-1, keepdims=True)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(logits, np.float64)))


def answers_from_logits(
    logits,
    example_indices,
    num_examples: int,
    *,
    label_names: Sequence[str] | None,
    thresholds: np.ndarray | None = None,
    aggregation: str = "mean",
) -> list[SentenceAnswer]:
    """One answer per example: the probabilities (or score) of its feature, or,
    windowed, the `aggregation` of its windows' probabilities (scores).

    Args:
        logits: the head's outputs, `[features, num_outputs]`.
        example_indices: each feature's example, `[features]`.
        num_examples: how many examples the features come from.
        label_names: the labels in head order; None for a regression.
        thresholds: multi-label: the probability each label needs, in `label_names`
            order; None for a single-label classification or a regression.
        aggregation: how windows' values combine, `mean` or `max`.

    Returns:
        `SentenceAnswer`s in example order.
    """
    regression = label_names is None
    multi_label = thresholds is not None
    num_outputs = 1 if regression else len(label_names)
    logits = np.asarray(logits, np.float64).reshape(-1, num_outputs)
    example_indices = np.asarray(example_indices).reshape(-1)
    if regression:
        values = logits
    elif multi_label:
        values = sigmoid(logits)
    else:
        values = softmax(logits)
    values = aggregate_windows(values, example_indices, num_examples, aggregation)
    if regression:
        return [SentenceAnswer(score=float(row[0])) for row in values]
    answers = []
    if multi_label:
        chosen = values >= thresholds[np.newaxis, :]
    for position, row in enumerate(values):
        probabilities = {name: float(p) for name, p in zip(label_names, row, strict=True)}
        if multi_label:
            labels = tuple(
                name for name, on in zip(label_names, chosen[position], strict=True) if on
            )
            answers.append(SentenceAnswer(probabilities=probabilities, labels=labels))
        else:
            answers.append(
                SentenceAnswer(label=label_names[int(row.argmax())], probabilities=probabilities)
            )
    return answers
