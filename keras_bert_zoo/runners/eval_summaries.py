"""What TensorBoard shows of a fine-tuning run's evaluations, beyond the metrics.

After each evaluation the chief writes, for each evaluated split, into the split's run
(`training.reporting.eval_summaries_dir`: `eval/` for `dev`, `eval/test/` for `test`),
under the tags the training run uses where there is one, so TensorBoard draws them on
the same charts as `train/`:

- `loss`: the loss of the answers, as training computes it (cross-entropy of the gold
  label's probability; for multi-label, each label's binary cross-entropy; for a
  regression, the squared error), so dev loss lies on train loss's chart;
- `precision/<label>`, `recall/<label>`, `f1/<label>`: per class, from the confusion
  matrix (single-label) or the label sets (multi-label), unless the task's metrics
  already name them;
- `pr_curve/<label>`: the precision-recall curve of each class (one against the rest),
  in the PR Curves tab (`reporting.write_pr_curve`, TensorBoard's `pr_curve` format);
- `confusion_matrix`: the confusion matrix as a markdown table (the Text tab);
- `threshold/<label>`: a multi-label task's threshold of each label (in `eval/`);
- the task's metrics themselves when no `Trainer` wrote them (`--mode=eval`, `predict`).

Example:

```python
write_evaluation_summaries(
    "/tmp/run", 187, task, answers={"dev": answers}, examples={"dev": examples},
    matrices={"dev": task.confusion_matrix(answers, examples)},
)
```
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# Probabilities are clipped this far from 0 and 1 in the loss (as Keras clips them).
_EPSILON = 1e-7


def _probabilities(answers, examples) -> bool:
    """Whether the answers hold each label's probability and the examples a gold label
    (sentence classification, single- or multi-label)."""
    return (
        bool(answers)
        and all(getattr(answer, "probabilities", None) for answer in answers)
        and all(getattr(example, "label", None) is not None for example in examples)
    )


def answers_loss(task, answers: Sequence, examples: Sequence) -> float | None:
    """The mean loss of `answers` against the examples' gold labels, as the task's
    training loss computes it (see the module docstring); None for a task whose answers
    hold no probabilities or scores."""
    if not answers or len(answers) != len(examples):
        return None
    if getattr(task, "is_regression", False):
        scores = [getattr(answer, "score", None) for answer in answers]
        gold = [getattr(example, "label", None) for example in examples]
        if any(value is None for value in (*scores, *gold)):
            return None
        return float(np.mean((np.asarray(scores, np.float64) - np.asarray(gold, np.float64)) ** 2))
    if not _probabilities(answers, examples):
        return None
    losses = []
    if getattr(task, "is_multi_label", False):
        for answer, example in zip(answers, examples, strict=True):
            gold = set(example.label)
            for name, probability in answer.probabilities.items():
                p = min(max(float(probability), _EPSILON), 1 - _EPSILON)
                losses.append(-math.log(p) if name in gold else -math.log(1 - p))
    else:
        for answer, example in zip(answers, examples, strict=True):
            p = float(answer.probabilities.get(example.label, 0.0))
            losses.append(-math.log(min(max(p, _EPSILON), 1.0)))
    return float(np.mean(losses))


def _scores(true_positives, false_positives, false_negatives) -> tuple[float, float, float]:
    precision = true_positives / max(true_positives + false_positives, 1)
    recall = true_positives / max(true_positives + false_negatives, 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return float(precision), float(recall), float(f1)


def per_class_scores(
    task, answers: Sequence, examples: Sequence, matrix: Mapping[str, Any] | None
) -> dict[str, tuple[float, float, float]]:
    """`{label: (precision, recall, f1)}`: from the confusion matrix (single-label; rows
    gold, columns predicted), or from the predicted and gold label sets (multi-label);
    empty for other tasks."""
    if matrix:
        counts = np.asarray(matrix["matrix"], np.int64)
        true_positives = np.diag(counts)
        return {
            str(label): _scores(
                true_positives[i],
                counts[:, i].sum() - true_positives[i],
                counts[i, :].sum() - true_positives[i],
            )
            for i, label in enumerate(matrix["labels"])
        }
    if not (getattr(task, "is_multi_label", False) and _probabilities(answers, examples)):
        return {}
    scores = {}
    for label in task.label_names:
        predicted = [label in (answer.labels or ()) for answer in answers]
        gold = [label in example.label for example in examples]
        pairs = list(zip(predicted, gold, strict=True))
        scores[str(label)] = _scores(
            sum(p and g for p, g in pairs),
            sum(p and not g for p, g in pairs),
            sum(g and not p for p, g in pairs),
        )
    return scores


def pr_curve_inputs(task, answers: Sequence, examples: Sequence) -> dict[str, tuple]:
    """`{label: (is the label gold, its probability)}` for each class of a
    classification (one against the rest), from the answers' probabilities; empty for
    other tasks."""
    if getattr(task, "is_regression", False) or not _probabilities(answers, examples):
        return {}
    multi_label = getattr(task, "is_multi_label", False)
    inputs = {}
    for label in answers[0].probabilities:
        gold = [
            label in example.label if multi_label else example.label == label
            for example in examples
        ]
        predicted = [float(answer.probabilities.get(label, 0.0)) for answer in answers]
        inputs[str(label)] = (np.asarray(gold, bool), np.asarray(predicted, np.float32))
    return inputs


def markdown_matrix(confusion: Mapping[str, Any]) -> str:
    """A confusion matrix as a markdown table: rows the gold label, columns the
    predicted one."""
    labels = [str(label) for label in confusion["labels"]]
    lines = ["| gold \\ predicted | " + " | ".join(labels) + " |"]
    lines.append("|---" * (len(labels) + 1) + "|")
    for label, row in zip(labels, confusion["matrix"], strict=True):
        lines.append(f"| {label} | " + " | ".join(str(count) for count in row) + " |")
    return "\n".join(lines)


def _finite(value) -> bool:
    return isinstance(value, int | float | np.number) and math.isfinite(float(value))


def write_evaluation_summaries(
    output_dir: str,
    step: int,
    task,
    *,
    answers: Mapping[str, Sequence] | None = None,
    examples: Mapping[str, Sequence] | None = None,
    matrices: Mapping[str, Mapping] | None = None,
    results: Mapping[str, Mapping[str, float]] | None = None,
    write_metrics: bool = False,
) -> None:
    """Writes the summaries of one evaluation (see the module docstring).

    Args:
        output_dir: the run directory.
        step: the model's step.
        task: the task evaluated.
        answers, examples: `{split: [answer]}` and `{split: [example]}` evaluated.
        matrices: `{split: confusion matrix}` (`Task.confusion_matrix`).
        results: `{split: {metric: value}}`: the task's metrics (their names are not
            written again as per-class scalars; written themselves with `write_metrics`).
        write_metrics: also write `results` (no `Trainer` wrote them).
    """
    from keras_bert_zoo.training.reporting import (
        EvalSummaryWriters,
        write_pr_curve,
        write_scalar,
        write_text,
    )

    answers, examples = answers or {}, examples or {}
    matrices, results = matrices or {}, results or {}
    splits = list(dict.fromkeys([*answers, *matrices, *results]))
    thresholds = {}
    if getattr(task, "is_multi_label", False):
        values = [float(value) for value in task.label_thresholds]
        thresholds = dict(zip(task.label_names, values, strict=True))
    writers = EvalSummaryWriters(output_dir, active=True)
    for split in splits:
        split_answers, split_examples = answers.get(split, []), examples.get(split, [])
        metrics = dict(results.get(split, {}))
        with writers.for_split(split).as_default():
            if write_metrics:
                for name, value in metrics.items():
                    if _finite(value):
                        write_scalar(name, float(value), step)
            loss = answers_loss(task, split_answers, split_examples)
            if loss is not None and "loss" not in metrics:
                write_scalar("loss", loss, step)
            scores = per_class_scores(task, split_answers, split_examples, matrices.get(split))
            for label, values in scores.items():
                for kind, value in zip(("precision", "recall", "f1"), values, strict=True):
                    if f"{kind}/{label}" not in metrics:
                        write_scalar(f"{kind}/{label}", value, step)
            for label, (gold, probability) in pr_curve_inputs(
                task, split_answers, split_examples
            ).items():
                write_pr_curve(f"pr_curve/{label}", gold, probability, step)
            if split in matrices:
                write_text("confusion_matrix", markdown_matrix(matrices[split]), step)
    if thresholds:  # the task's, whatever the split: in eval/
        with writers.for_split(None).as_default():
            for name, threshold in thresholds.items():
                write_scalar(f"threshold/{name}", threshold, step)
    writers.close()
