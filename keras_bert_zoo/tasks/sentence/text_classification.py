"""`text_classification`: any labelled texts in TSV, CSV, JSONL or fastText lines.

Formats (`input_format`, chosen from the file extension when `auto`):
- `tsv` / `csv`: a text column, an optional second text column (sentence pairs) and a
  label column, named by the header line or, with `has_header=False`, given as
  0-based column numbers. TSV fields are split on the delimiter only (no quoting, as
  GLUE's files); CSV fields follow the CSV quoting rules.
- `jsonl`: one JSON object a line, its keys the columns (every record holds the
  first record's keys).
- `fasttext`: one `__label__<name> <text>` per line (gensim's `pang_lee_polarity.cor`,
  fastText's supervised format). Any extension other than .tsv/.csv/.jsonl reads as
  this.

The label set is the `label_names` option, else the labels of the training file
(sorted; numerically when they are all integers). With `regression=True` the labels
are numbers and the head predicts one score (MSE; Pearson and Spearman).

Multi-label (`multi_label=True`): a text has a set of labels, read from the label
column split at `label_separator` (default `,`), from fastText lines opening with
several `__label__` tags, or from one 0/1 column per label (`label_columns`, which
implies `multi_label`; a row of zeros is an empty set). A label column or fastText line
without any label is an error in the training and dev files. The head has one sigmoid
per label (binary cross-entropy); the metrics are micro-/macro-/per-label F1 and
subset accuracy (`multi_label`, primary: `micro_f1`). A label is predicted when its
probability reaches its threshold: 0.5, or the `thresholds_file`'s (`label<TAB>threshold`
lines), or, with `tune_thresholds`, the one that maximizes the label's F1 on the dev
split at each evaluation (the `tuned_*` metrics then report the dev set under the new
thresholds). The thresholds are saved with the model (`state()`), so later
predictions and the exported model use them.

Long documents: `long_documents=windows` (see `sentence.task`).

A data set that comes as one file gets a held-out split: `heldout_fraction` of each
label's examples (rounded half up) go to `dev`, picked by a SHA-256 hash of
`heldout_seed` and the row number, so the split is the same on every machine and in
every version of every library. Examples keep their file order in both splits.

The pieces beside this module: `text_classification_options` (the options and what
they mean together), `text_classification_files` (the files, their formats and rows)
and `heldout` (the held-out split); the features, answers, metrics and serving are
`SentenceTask`'s.

Example:

```python
from keras_bert_zoo import tasks

task = tasks.create_task(
    "text_classification",
    data_dir=gensim_test_data,
    train_file="pang_lee_polarity.cor",
    encoding="latin-1",
    heldout_fraction=0.25,
)
train, held_out = task.read("train"), task.read("dev")  # 150 and 50 examples
```
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from absl import logging

from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.sentence import multi_label
from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.tasks.sentence.heldout import heldout_positions, heldout_split
from keras_bert_zoo.tasks.sentence.readers import InputFileError
from keras_bert_zoo.tasks.sentence.task import SentenceTask
from keras_bert_zoo.tasks.sentence.text_classification_files import TextClassificationFiles
from keras_bert_zoo.tasks.sentence.text_classification_options import (
    FILE_OPTIONS,
    TEXT_CLASSIFICATION_OPTIONS,
    read_settings,
)
from keras_bert_zoo.utils.errors import UserError

_INTEGER = re.compile(r"[+-]?\d+")


def _sorted_labels(labels) -> tuple[str, ...]:
    labels = set(labels)
    if all(_INTEGER.fullmatch(label) for label in labels):
        return tuple(sorted(labels, key=int))
    return tuple(sorted(labels))


@register_task("text_classification")
class TextClassificationTask(SentenceTask):
    """Sentence or sentence-pair classification (or regression) on the user's files.

    Splits: `train` (the training file, minus the held-out part), `dev` (`eval_file`,
    or the held-out part of the training file), `test` (`predict_file`; labels
    optional). File paths are relative to `data_dir` unless absolute; without a file
    option, `<split>.tsv`, `<split>.csv` or `<split>.txt` in `data_dir` is used.
    """

    primary_metric = "accuracy"
    options = TEXT_CLASSIFICATION_OPTIONS

    def __init__(self, task_name=None, data_dir=None, **kwargs):
        super().__init__(task_name, data_dir, **kwargs)
        self._settings = settings = read_settings(self.option_values)
        self.heldout_fraction = settings.heldout_fraction
        self.heldout_seed = settings.heldout_seed
        self.regression = settings.regression
        self.label_columns: tuple[str, ...] | None = settings.label_columns
        self.multi_label = settings.multi_label
        self.text_fields = settings.text_fields
        if settings.primary_metric is not None:
            self.primary_metric = settings.primary_metric
        if settings.metric_names is not None:
            self.metric_names = settings.metric_names
        self._thresholds: np.ndarray | None = None
        self._label_names: tuple[str, ...] | None = settings.label_names
        self._cache: dict[str, list[SentenceExample]] = {}

    # === Labels ===

    @property
    def is_regression(self) -> bool:
        return self.regression

    @property
    def is_multi_label(self) -> bool:
        return self.multi_label

    @property
    def label_thresholds(self) -> np.ndarray:
        """Multi-label: each label's threshold: tuned or restored, else the
        `thresholds_file`'s, else 0.5."""
        if self._thresholds is None:
            given = self.option_values["thresholds_file"]
            if given:
                path = given
                if self.data_dir and not os.path.isabs(given):
                    path = os.path.join(self.data_dir, given)
                self._thresholds = multi_label.read_thresholds_file(
                    path, self.label_names, self.encoding
                )
            else:
                return super().label_thresholds
        return self._thresholds

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """The label set in head order (None for a regression).

        The option, else a restored state, else the training file's labels.
        """
        if self.regression:
            return None
        if self._label_names is None:
            examples = self._read_file_examples("train")
            if not examples:
                raise UserError(f"{self.task_name}: the training file has no examples")
            if self.multi_label:
                self._label_names = _sorted_labels(
                    label for example in examples for label in example.label
                )
            else:
                self._label_names = _sorted_labels(example.label for example in examples)
            if self.multi_label and not self._label_names:
                raise UserError(f"{self.file_path('train')}: no example has a label")
            if not self.multi_label and len(self._label_names) < 2:
                raise UserError(
                    f"{self.file_path('train')}: every example has the label "
                    f"{self._label_names[0]!r}; classification needs two labels or more"
                )
            logging.info("%s: labels %s", self.task_name, list(self._label_names))
        return self._label_names

    def load_state(self, state: Mapping[str, Any]) -> None:
        state = dict(state)
        if not state:
            return
        self._check_saved_kind(state, "regression", ("a classifier", "a regression"))
        if self.regression:
            return
        self._check_saved_kind(state, "multi_label", ("single-label", "multi-label"))
        names = tuple(state.get("label_names") or ())
        if self._label_names is not None and self._label_names != names:
            raise UserError(
                f"{self.task_name}: label_names {list(self._label_names)} differ from the "
                f"saved model's {list(names)}"
            )
        self._label_names = names
        if self.multi_label:
            thresholds = state.get("thresholds")
            if (
                not isinstance(thresholds, list)
                or len(thresholds) != len(names)
                or not all(isinstance(t, int | float) and 0.0 < t < 1.0 for t in thresholds)
            ):
                raise UserError(
                    f"{self.task_name}: the saved thresholds {thresholds} are not one number "
                    f"in (0, 1) per label of {list(names)}"
                )
            self._thresholds = np.asarray(thresholds, np.float64)

    def _check_saved_kind(
        self, state: Mapping[str, Any], option: str, kinds: tuple[str, str]
    ) -> None:
        """A ValueError unless the saved model was made with the boolean `option` as
        this task has it; `kinds` names a model without and with it."""
        saved = bool(state.get(option))
        if saved != getattr(self, option):
            raise UserError(
                f"{self.task_name}: the saved model is {kinds[saved]} but "
                f"{option}={getattr(self, option)}"
            )

    def learned_state_keys(self) -> tuple[str, ...]:
        return ("thresholds",) if self.option_values["tune_thresholds"] else ()

    def state(self) -> dict[str, Any]:
        state = super().state()
        if self.multi_label:
            state["multi_label"] = True
            state["thresholds"] = [float(t) for t in self.label_thresholds]
        return state

    # === Prediction files ===

    @property
    def prediction_text_names(self) -> tuple[str, ...]:
        """The names the user gave the text columns (`text_column="review"`: `review`);
        `text_fields` when the columns are given by number or have no names (no
        header line, fastText lines)."""
        options = self.option_values
        given = (options["text_column"], options["text_pair_column"])
        columns = tuple(str(column) for column in given if column)
        if (
            not options["has_header"]
            or options["input_format"] == "fasttext"
            or any(column.isdigit() for column in columns)
        ):
            return super().prediction_text_names
        return columns

    # === Files ===

    def split_names(self) -> dict[str, tuple[str, ...]]:
        has_dev = self.heldout_fraction > 0 or self._find_file("dev") is not None
        has_test = self._find_file("test") is not None
        return {
            "train": ("train",),
            "eval": ("dev",) if has_dev else (),
            "predict": ("test",) if has_test else (),
        }

    @property
    def _files(self) -> TextClassificationFiles:
        return TextClassificationFiles(
            self.task_name,
            self.data_dir,
            self.option_values,
            self._settings,
            encoding=self.encoding,
        )

    def _find_file(self, split: str) -> str | None:
        return self._files.find(split)

    def file_path(self, split: str) -> str:
        """The file of `split`, or a `FileNotFoundError` naming the option to pass."""
        return self._files.path(split)

    def _read_file_examples(self, split: str) -> list[SentenceExample]:
        """Every example of the split's file (before any held-out split), read once."""
        file_split = "train" if split in ("train", "dev") and self.heldout_fraction else split
        if file_split not in self._cache:
            self._cache[file_split] = self._files.examples(file_split)
        return self._cache[file_split]

    # === Reading ===

    def heldout_positions(self, examples: list[SentenceExample]) -> set[int]:
        """Positions (in `examples`) of the held-out examples: per label (one group for a
        regression), the `heldout_fraction` share with the smallest seeded hashes."""
        return heldout_positions(
            examples, self.heldout_fraction, self.heldout_seed, by_label=not self.regression
        )

    def read(self, split: str) -> list[SentenceExample]:
        if split not in FILE_OPTIONS:
            raise UserError(
                f"{self.task_name} has no split {split!r}; its splits are {list(FILE_OPTIONS)}"
            )
        examples = self._read_file_examples(split)
        if split in ("train", "dev") and self.heldout_fraction:
            examples = heldout_split(examples, split, self.heldout_positions(examples))
        if self.multi_label:
            examples = self._checked_label_sets(examples)
            self.label_thresholds  # noqa: B018 - a bad thresholds file fails before any write
        elif not self.regression:
            label_names = self.label_names
            for example in examples:
                if example.label is not None and example.label not in label_names:
                    raise InputFileError(
                        f"{example.source}: label {example.label!r} is not one of "
                        f"{list(label_names)} (the labels of the training data or "
                        "--label_names)"
                    )
        logging.info("%s %s: %d examples", self.task_name, split, len(examples))
        return examples

    def _checked_label_sets(self, examples: list[SentenceExample]) -> list[SentenceExample]:
        """Multi-label examples with their labels checked and in `label_names` order."""
        label_names = self.label_names
        checked = []
        for example in examples:
            if example.label is None:
                checked.append(example)
                continue
            for label in example.label:
                if label not in label_names:
                    raise InputFileError(
                        f"{example.source}: label {label!r} is not one of {list(label_names)} "
                        "(the labels of the training data, --label_names or --label_columns)"
                    )
            ordered = tuple(name for name in label_names if name in example.label)
            checked.append(dataclasses.replace(example, label=ordered))
        return checked

    # === Evaluation ===

    def evaluate(self, answers, examples) -> dict[str, float]:
        """The metrics; multi-label with `tune_thresholds`, also tunes each label's
        threshold on these answers (kept in `state()`) and adds the `tuned_*` figures."""
        results = super().evaluate(answers, examples)
        if self.multi_label and self.option_values["tune_thresholds"]:
            names = self.label_names
            probabilities = np.array(
                [[answer.probabilities[name] for name in names] for answer in answers]
            )
            gold = multi_label.multi_hot([example.label for example in examples], names)
            self._thresholds = multi_label.tune_thresholds(probabilities, gold)
            tuned = multi_label.multi_label_report(
                gold, probabilities >= self._thresholds[np.newaxis, :], names
            )
            for key in ("micro_f1", "macro_f1", "subset_accuracy"):
                results[f"tuned_{key}"] = tuned[key]
            logging.info(
                "%s: tuned thresholds %s",
                self.task_name,
                dict(zip(names, np.round(self._thresholds, 4).tolist(), strict=True)),
            )
        return results
