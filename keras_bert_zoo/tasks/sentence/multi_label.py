"""Multi-label classification: metrics, per-label thresholds and the thresholds file.

A text carries a set of labels (possibly empty); the head gives one sigmoid
probability per label and a label is predicted when its probability is at least its
threshold (0.5 unless tuned or given).

Metrics (equal to scikit-learn's to 1e-9, its zero-division value 0 included):
- `micro_f1`: `f1_score(average="micro")`, F1 of all (text, label) decisions pooled;
- `macro_f1`: `f1_score(average="macro")`, the mean of the per-label F1s (a label
  never gold nor predicted counts as 0, as scikit-learn counts it);
- `f1/<label>`: `f1_score(average=None)`, each label's F1;
- `subset_accuracy`: `accuracy_score`, the share of texts whose predicted set is
  exactly the gold set.

Thresholds file (`thresholds_file`): one `label<TAB>threshold` line per label, every
label exactly once, thresholds in (0, 1); blank lines and `#` lines are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from keras_bert_zoo.tasks.sentence.readers import InputFileError, numbered_lines, read_text
from keras_bert_zoo.utils.errors import UserError

DEFAULT_THRESHOLD = 0.5


def multi_hot(label_sets: Sequence[Sequence[str]], label_names: Sequence[str]) -> np.ndarray:
    """`[texts, labels]` int 0/1 of each text's label set."""
    position = {name: index for index, name in enumerate(label_names)}
    matrix = np.zeros((len(label_sets), len(label_names)), np.int64)
    for row, labels in enumerate(label_sets):
        for label in labels:
            matrix[row, position[label]] = 1
    return matrix


def _f1(true_positives, false_positives, false_negatives) -> np.ndarray:
    denominator = 2 * true_positives + false_positives + false_negatives
    return np.where(denominator > 0, 2 * true_positives / np.maximum(denominator, 1), 0.0).astype(
        np.float64
    )


def multi_label_report(gold: np.ndarray, predicted: np.ndarray, label_names) -> dict[str, float]:
    """Micro-, macro- and per-label F1 and subset accuracy of 0/1 `[texts, labels]`."""
    gold, predicted = np.asarray(gold, bool), np.asarray(predicted, bool)
    if gold.shape != predicted.shape or gold.ndim != 2 or gold.shape[1] != len(label_names):
        raise UserError(
            f"gold and predicted must be [texts, {len(label_names)}], got {gold.shape} "
            f"and {predicted.shape}"
        )
    if gold.shape[0] == 0:
        raise UserError("No examples to score")
    true_positives = (gold & predicted).sum(axis=0)
    false_positives = (~gold & predicted).sum(axis=0)
    false_negatives = (gold & ~predicted).sum(axis=0)
    per_label = _f1(true_positives, false_positives, false_negatives)
    results = {
        "micro_f1": float(_f1(true_positives.sum(), false_positives.sum(), false_negatives.sum())),
        "macro_f1": float(per_label.mean()),
        "subset_accuracy": float(np.mean((gold == predicted).all(axis=1))),
    }
    for name, value in zip(label_names, per_label, strict=True):
        results[f"f1/{name}"] = float(value)
    return results


def tune_thresholds(
    probabilities: np.ndarray, gold: np.ndarray, default: float = DEFAULT_THRESHOLD
) -> np.ndarray:
    """Per label, the threshold that maximizes that label's F1 on `(probabilities, gold)`.

    Candidates are the midpoints between consecutive distinct probabilities of the
    label (and `default`); among equally good ones the nearest to `default` wins, so a
    label the data says nothing about keeps `default`.
    """
    probabilities = np.asarray(probabilities, np.float64)
    gold = np.asarray(gold, bool)
    thresholds = np.full(probabilities.shape[1], float(default))
    for label in range(probabilities.shape[1]):
        values = np.unique(probabilities[:, label])
        candidates = np.concatenate([[default], (values[:-1] + values[1:]) / 2.0])
        predicted = probabilities[:, label][:, np.newaxis] >= candidates[np.newaxis, :]
        truth = gold[:, label][:, np.newaxis]
        scores = _f1(
            (truth & predicted).sum(axis=0),
            (~truth & predicted).sum(axis=0),
            (truth & ~predicted).sum(axis=0),
        )
        best = np.flatnonzero(scores == scores.max())
        thresholds[label] = candidates[best[np.argmin(np.abs(candidates[best] - default))]]
    return thresholds


def read_thresholds_file(path: str, label_names: Sequence[str], encoding: str = "utf-8"):
    """The thresholds of `path` in `label_names` order (see the module docstring).

    Raises:
        FileNotFoundError; InputFileError naming the file and line of a malformed line,
        an unknown or repeated label, a threshold outside (0, 1); naming the file and
        the labels it lacks.
    """
    text = read_text(path, encoding, description="thresholds file (label<TAB>threshold)")
    found: dict[str, float] = {}
    for number, line in numbered_lines(text):
        if line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        where = f"{path}:{number}"
        if len(fields) != 2:
            raise InputFileError(f"{where}: expected label<TAB>threshold, found {line!r}")
        label, value = fields[0].strip(), fields[1].strip()
        if label not in label_names:
            raise InputFileError(
                f"{where}: label {label!r} is not one of the model's labels {list(label_names)}"
            )
        if label in found:
            raise InputFileError(f"{where}: label {label!r} is given a second time")
        try:
            threshold = float(value)
        except ValueError:
            threshold = float("nan")
        if not 0.0 < threshold < 1.0:
            raise InputFileError(f"{where}: threshold {value!r} is not a number in (0, 1)")
        found[label] = threshold
    missing = [name for name in label_names if name not in found]
    if missing:
        raise InputFileError(f"{path}: no threshold for the label(s) {missing}")
    return np.array([found[name] for name in label_names], np.float64)
