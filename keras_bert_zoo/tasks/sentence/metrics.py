"""The official GLUE metrics in numpy.

Each function matches its reference to floating-point rounding (the tests compare
them with scikit-learn and scipy to 1e-9), including the degenerate cases:

- `f1_score`: 0.0 when there is no true and no predicted positive (scikit-learn's
  value, which it returns with an `UndefinedMetricWarning`).
- `matthews_corrcoef`: 0.0 when either the gold or the predicted labels hold a single
  class (scikit-learn's value).
- `pearson` / `spearman`: NaN when either input is constant (scipy's value, which
  it returns with a `ConstantInputWarning`), and NaN for fewer than two pairs or a
  non-finite input (where scipy raises or propagates NaN). `eval_results.json` then
  holds `NaN`: the metric is undefined, not zero.
"""

from __future__ import annotations

import numpy as np

from keras_bert_zoo.utils.errors import UserError


def _pair(gold, predicted) -> tuple[np.ndarray, np.ndarray]:
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    if gold.shape != predicted.shape or gold.ndim != 1:
        raise UserError(
            f"gold and predicted must be 1-D and of the same length, got shapes "
            f"{gold.shape} and {predicted.shape}"
        )
    if gold.size == 0:
        raise UserError("No examples to score")
    return gold, predicted


def accuracy(gold, predicted) -> float:
    """Fraction of predictions equal to the gold label."""
    gold, predicted = _pair(gold, predicted)
    return float(np.mean(gold == predicted))


def f1_score(gold, predicted, positive_label=1) -> float:
    """Binary F1 of `positive_label` (MRPC and QQP: the paraphrase / duplicate class)."""
    gold, predicted = _pair(gold, predicted)
    gold_positive, predicted_positive = gold == positive_label, predicted == positive_label
    true_positives = int(np.sum(gold_positive & predicted_positive))
    denominator = int(np.sum(gold_positive)) + int(np.sum(predicted_positive))
    return 0.0 if denominator == 0 else 2.0 * true_positives / denominator


def matthews_corrcoef(gold, predicted) -> float:
    """Matthews correlation coefficient (CoLA), multiclass form (Gorodkin, 2004)."""
    gold, predicted = _pair(gold, predicted)
    classes, encoded = np.unique(np.concatenate([gold, predicted]), return_inverse=True)
    gold_ids, predicted_ids = encoded[: gold.size], encoded[gold.size :]
    confusion = np.zeros((classes.size, classes.size), np.float64)
    np.add.at(confusion, (gold_ids, predicted_ids), 1.0)
    gold_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    total, correct = confusion.sum(), np.trace(confusion)
    covariance = correct * total - gold_counts @ predicted_counts
    gold_variance = total**2 - gold_counts @ gold_counts
    predicted_variance = total**2 - predicted_counts @ predicted_counts
    if gold_variance * predicted_variance == 0:
        return 0.0
    return float(covariance / np.sqrt(gold_variance * predicted_variance))


def _as_scores(gold, predicted) -> tuple[np.ndarray, np.ndarray]:
    gold, predicted = _pair(gold, predicted)
    return gold.astype(np.float64), predicted.astype(np.float64)


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return float("nan")
    if (x == x[0]).all() or (y == y[0]).all():
        return float("nan")
    x_centered, y_centered = x - x.mean(), y - y.mean()
    x_unit = x_centered / np.linalg.norm(x_centered)
    y_unit = y_centered / np.linalg.norm(y_centered)
    return float(np.clip(x_unit @ y_unit, -1.0, 1.0))


def average_ranks(values) -> np.ndarray:
    """Ranks from 1, ties sharing the mean of their positions (`rankdata`'s "average")."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts_group = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    boundaries = np.append(np.flatnonzero(starts_group), values.size)
    group_ranks = (boundaries[:-1] + boundaries[1:] - 1) / 2.0 + 1.0
    ranks = np.empty(values.size, np.float64)
    ranks[order] = group_ranks[np.cumsum(starts_group) - 1]
    return ranks


def pearson(gold, predicted) -> float:
    """Pearson correlation of the scores (STS-B)."""
    return _correlation(*_as_scores(gold, predicted))


def spearman(gold, predicted) -> float:
    """Spearman rank correlation of the scores (STS-B): Pearson of average ranks."""
    gold, predicted = _as_scores(gold, predicted)
    if not (np.isfinite(gold).all() and np.isfinite(predicted).all()):
        return float("nan")
    return _correlation(average_ranks(gold), average_ranks(predicted))
