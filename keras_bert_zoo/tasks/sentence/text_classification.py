"""`text_classification`: any labelled texts in TSV, CSV or fastText lines.

Formats (`input_format`, chosen from the file extension when `auto`):
- `tsv` / `csv`: a text column, an optional second text column (sentence pairs) and a
  label column, named by the header line or, with `has_header=False`, given as
  0-based column numbers. TSV fields are split on the delimiter only (no quoting, as
  GLUE's files); CSV fields follow the CSV quoting rules.
- `fasttext`: one `__label__<name> <text>` per line (gensim's `pang_lee_polarity.cor`,
  fastText's supervised format). Any extension other than .tsv/.csv reads as this.

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
import hashlib
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from absl import logging

from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.sentence import multi_label
from keras_bert_zoo.tasks.sentence.readers import (
    InputFileError,
    read_delimited,
    read_fasttext,
)
from keras_bert_zoo.tasks.sentence.scores import parse_score
from keras_bert_zoo.tasks.sentence.task import WINDOW_OPTIONS, SentenceExample, SentenceTask
from keras_bert_zoo.tasks.task import TaskOption
from keras_bert_zoo.utils.errors import UserError

_FILE_OPTIONS = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}
_DELIMITER_ALIASES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
_INTEGER = re.compile(r"[+-]?\d+")


def _heldout_rank(seed: int, row: int) -> bytes:
    return hashlib.sha256(f"{seed}:{row}".encode()).digest()


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
    options = (
        TaskOption(
            "train_file",
            None,
            "Training file (text_classification: TSV, CSV or "
            "fastText __label__ lines), relative to --data_dir.",
        ),
        TaskOption("eval_file", None, "Evaluation file with labels, relative to --data_dir."),
        TaskOption("predict_file", None, "File of texts to predict, relative to --data_dir."),
        TaskOption(
            "input_format",
            "auto",
            "text_classification: file format; auto picks tsv/csv by extension and "
            "fastText lines otherwise.",
            choices=("auto", "tsv", "csv", "fasttext"),
        ),
        TaskOption(
            "text_column",
            "text",
            "text_classification: the text column (header "
            "name, or 0-based number with --has_header=false).",
        ),
        TaskOption(
            "text_pair_column",
            None,
            "text_classification: the second text column of sentence-pair data.",
        ),
        TaskOption("label_column", "label", "text_classification: the label column."),
        TaskOption(
            "has_header",
            True,
            "text_classification: the first line of a TSV/CSV file names the columns.",
        ),
        TaskOption(
            "delimiter",
            None,
            "text_classification: field separator (default: tab "
            "for TSV, comma for CSV; 'tab' and 'comma' are accepted).",
        ),
        TaskOption(
            "label_names",
            None,
            "text_classification: comma-separated label set in "
            "head order (default: the training file's labels, sorted).",
        ),
        TaskOption(
            "regression",
            False,
            "text_classification: the labels are numbers; "
            "predict a score (MSE; Pearson and Spearman).",
        ),
        TaskOption(
            "heldout_fraction",
            0.0,
            "text_classification: fraction of each label's "
            "training examples held out as the dev split (0: none).",
        ),
        TaskOption("heldout_seed", 12345, "text_classification: seed of the held-out split."),
        TaskOption(
            "multi_label",
            False,
            "text_classification: each text has a set of labels (a sigmoid per label; "
            "micro/macro F1).",
        ),
        TaskOption(
            "label_separator",
            ",",
            "text_classification --multi_label: separator of the labels inside the label column.",
        ),
        TaskOption(
            "label_columns",
            None,
            "text_classification: comma-separated 0/1 columns, one per label (implies "
            "--multi_label; the column names are the labels).",
        ),
        TaskOption(
            "thresholds_file",
            None,
            "text_classification --multi_label: label<TAB>threshold lines, one per label "
            "(default threshold: 0.5); saved with the model.",
        ),
        TaskOption(
            "tune_thresholds",
            False,
            "text_classification --multi_label: at each evaluation, set each label's "
            "threshold to the one maximizing its F1 on the dev split; saved with the model.",
        ),
        *WINDOW_OPTIONS,
    )

    def __init__(self, task_name=None, data_dir=None, **kwargs):
        super().__init__(task_name, data_dir, **kwargs)
        options = self.option_values
        fraction = float(options["heldout_fraction"])
        if not 0.0 <= fraction < 1.0:
            raise UserError(f"heldout_fraction must be in [0, 1), got {fraction}")
        if fraction > 0 and options["eval_file"]:
            raise UserError(
                "Pass either eval_file or heldout_fraction, not both: the held-out split "
                "becomes the dev split"
            )
        self.heldout_fraction = fraction
        self.heldout_seed = int(options["heldout_seed"])
        self.regression = bool(options["regression"])
        self.label_columns: tuple[str, ...] | None = None
        if options["label_columns"]:
            self.label_columns = tuple(
                name.strip() for name in options["label_columns"].split(",") if name.strip()
            )
            if len(set(self.label_columns)) != len(self.label_columns):
                raise UserError(f"label_columns lists a column twice: {options['label_columns']}")
        self.multi_label = bool(options["multi_label"]) or self.label_columns is not None
        if self.multi_label and self.regression:
            raise UserError("multi_label and regression exclude each other")
        if not self.multi_label and (options["thresholds_file"] or options["tune_thresholds"]):
            raise UserError("thresholds_file and tune_thresholds need multi_label=True")
        if self.multi_label and not options["label_separator"]:
            raise UserError("label_separator must not be empty")
        if self.multi_label:
            # The model is saved and answers with the tuned thresholds: the best one is
            # chosen by what it will answer with.
            tuned = options["tune_thresholds"]
            self.primary_metric = "tuned_micro_f1" if tuned else "micro_f1"
        self._thresholds: np.ndarray | None = None
        self.text_fields = ("text", "text_pair") if options["text_pair_column"] else ("text",)
        if self.regression:
            self.primary_metric = "spearman"
            self.metric_names = ("pearson", "spearman")
            if options["label_names"]:
                raise UserError("label_names makes no sense with regression=True")
        self._label_names: tuple[str, ...] | None = None
        if options["label_names"]:
            if self.label_columns is not None:
                raise UserError("Pass label_names or label_columns, not both")
            names = tuple(name.strip() for name in options["label_names"].split(","))
            fewest = 1 if self.multi_label else 2
            if len(set(names)) != len(names) or not all(names) or len(names) < fewest:
                raise UserError(
                    f"label_names must list {fewest} or more distinct names, got {names}"
                )
            self._label_names = names
        if self.label_columns is not None:
            self._label_names = self.label_columns
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

    def _find_file(self, split: str) -> str | None:
        given = self.option_values[_FILE_OPTIONS[split]]
        if given:
            if self.data_dir and not os.path.isabs(given):
                return os.path.join(self.data_dir, given)
            return given
        if self.data_dir:
            for extension in (".tsv", ".csv", ".txt"):
                candidate = os.path.join(self.data_dir, split + extension)
                if os.path.isfile(candidate):
                    return candidate
        return None

    def file_path(self, split: str) -> str:
        path = self._find_file(split)
        if path is None:
            option = _FILE_OPTIONS[split]
            raise FileNotFoundError(
                f"{self.task_name}: no {split} file: pass --{option} (or put {split}.tsv, "
                f"{split}.csv or {split}.txt in --data_dir={self.data_dir})"
            )
        return path

    def _format(self, path: str) -> str:
        chosen = self.option_values["input_format"]
        if chosen != "auto":
            return chosen
        extension = os.path.splitext(path)[1].lower()
        return {".tsv": "tsv", ".csv": "csv"}.get(extension, "fasttext")

    def _delimiter(self, file_format: str) -> str:
        given = self.option_values["delimiter"]
        if given is None:
            return "\t" if file_format == "tsv" else ","
        return _DELIMITER_ALIASES.get(given.lower(), given)

    def _parse_label(self, value: str, where: str) -> str | float | tuple[str, ...]:
        value = value.strip()
        if self.multi_label:
            labels = tuple(
                label.strip() for label in value.split(self.option_values["label_separator"])
            )
            if not value or not all(labels):
                raise InputFileError(
                    f"{where}: empty label in {value!r} (labels separated by "
                    f"{self.option_values['label_separator']!r})"
                )
            if len(set(labels)) != len(labels):
                raise InputFileError(f"{where}: a label is given twice in {value!r}")
            return labels
        if self.regression:
            return parse_score(value, where, column="label")
        if not value:
            raise InputFileError(f"{where}: empty label")
        return value

    def _read_file_examples(self, split: str) -> list[SentenceExample]:
        """Every example of the split's file (before any held-out split)."""
        file_split = "train" if split in ("train", "dev") and self.heldout_fraction else split
        if file_split in self._cache:
            return self._cache[file_split]
        path = self.file_path(file_split)
        labelled = file_split != "test"
        file_format = self._format(path)
        if file_format == "fasttext":
            if self.option_values["text_pair_column"]:
                raise UserError(
                    f"{path}: fastText lines hold one text; text_pair_column needs TSV or CSV"
                )
            rows = [
                (number, label, (text,))
                for number, label, text in read_fasttext(
                    path,
                    encoding=self.encoding,
                    require_labels=labelled,
                    multi_label=self.multi_label,
                )
            ]
        else:
            rows = self._read_table_rows(path, file_format, labelled)
        examples = []
        for row_number, (line, label, texts) in enumerate(rows):
            where = f"{path}:{line}"
            if label is not None and not isinstance(label, str):  # already parsed
                parsed = tuple(label)
            else:
                parsed = None if label is None else self._parse_label(label, where)
            examples.append(
                SentenceExample(
                    example_id=f"{file_split}-{row_number}",
                    texts=texts,
                    label=parsed,
                    index=str(row_number),
                    source=where,
                )
            )
        self._cache[file_split] = examples
        return examples

    def _read_table_rows(self, path: str, file_format: str, labelled: bool):
        options = self.option_values
        table = read_delimited(
            path,
            encoding=self.encoding,
            delimiter=self._delimiter(file_format),
            header=bool(options["has_header"]),
            quoting=file_format == "csv",
            description=f"{self.task_name} {file_format.upper()} file",
        )
        columns = [options["text_column"]]
        if options["text_pair_column"]:
            columns.append(options["text_pair_column"])
        text_positions = [table.column_index(column) for column in columns]
        if self.label_columns is not None:
            return self._read_label_columns(table, text_positions, labelled)
        label_position = table.column_index(options["label_column"], required=labelled)
        return [
            (
                line,
                None if label_position is None else fields[label_position],
                tuple(fields[position] for position in text_positions),
            )
            for line, fields in table.rows
        ]

    def _read_label_columns(self, table, text_positions, labelled: bool):
        """Rows of a file with one 0/1 column per label (`label_columns`)."""
        positions = [table.column_index(column, required=labelled) for column in self.label_columns]
        present = [position is not None for position in positions]
        if any(present) and not all(present):
            missing = [c for c, p in zip(self.label_columns, present, strict=True) if not p]
            raise InputFileError(f"{table.path}:1: the label column(s) {missing} are missing")
        rows = []
        for line, fields in table.rows:
            texts = tuple(fields[position] for position in text_positions)
            if not all(present):
                rows.append((line, None, texts))
                continue
            labels = []
            for column, position in zip(self.label_columns, positions, strict=True):
                value = fields[position].strip()
                if value not in ("0", "1"):
                    raise InputFileError(
                        f"{table.path}:{line}: column {column!r} holds {value!r}, not 0 or 1"
                    )
                if value == "1":
                    labels.append(column)
            rows.append((line, tuple(labels), texts))
        return rows

    # === Reading ===

    def heldout_positions(self, examples: list[SentenceExample]) -> set[int]:
        """Positions (in `examples`) of the held-out examples: per label (one group for a
        regression), the `heldout_fraction` share with the smallest seeded hashes."""
        groups: dict[Any, list[int]] = {}
        for position, example in enumerate(examples):
            key = None if self.regression else example.label
            groups.setdefault(key, []).append(position)
        held_out = set()
        for positions in groups.values():
            count = math.floor(self.heldout_fraction * len(positions) + 0.5)
            ranked = sorted(positions, key=lambda p: _heldout_rank(self.heldout_seed, p))
            held_out.update(ranked[:count])
        return held_out

    def read(self, split: str) -> list[SentenceExample]:
        if split not in _FILE_OPTIONS:
            raise UserError(
                f"{self.task_name} has no split {split!r}; its splits are {list(_FILE_OPTIONS)}"
            )
        examples = self._read_file_examples(split)
        if split in ("train", "dev") and self.heldout_fraction:
            held_out = self.heldout_positions(examples)
            keep = (lambda p: p in held_out) if split == "dev" else (lambda p: p not in held_out)
            examples = [example for p, example in enumerate(examples) if keep(p)]
            examples = [
                SentenceExample(
                    example_id=f"{split}-{example.index}",
                    texts=example.texts,
                    label=example.label,
                    index=example.index,
                    source=example.source,
                )
                for example in examples
            ]
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
