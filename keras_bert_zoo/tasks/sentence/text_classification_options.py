"""The settings of `text_classification` (`TaskOption`s) and what they mean together.

`read_settings` checks the options against each other (a held-out split and an
evaluation file exclude each other, multi-label and regression too, ...) and derives
what the task is: its text fields, its label set when given, its primary metric.

Example:

```python
from keras_bert_zoo.tasks.sentence.text_classification_options import read_settings

settings = read_settings(task.option_values)
settings.multi_label, settings.text_fields
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from keras_bert_zoo.tasks.sentence.options import WINDOW_OPTIONS
from keras_bert_zoo.tasks.task import TaskOption
from keras_bert_zoo.utils.errors import UserError

# The option naming each split's file.
FILE_OPTIONS = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}

# The files, their columns, the labels, the held-out split, multi-label thresholds and
# long documents.
TEXT_CLASSIFICATION_OPTIONS = (
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
        "File format of the data files; auto picks tsv/csv/jsonl by extension and "
        "(text_classification) fastText lines otherwise.",
        choices=("auto", "tsv", "csv", "jsonl", "fasttext"),
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
        "text_classification: the labels are numbers; predict a score (MSE; Pearson and Spearman).",
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
        "text_classification: each text has a set of labels (a sigmoid per label; micro/macro F1).",
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


@dataclasses.dataclass(frozen=True)
class TextClassificationSettings:
    """What the options make of a `text_classification` task.

    Attributes:
        heldout_fraction: the share of each label's training examples held out as dev.
        heldout_seed: the seed of the held-out split.
        regression: the labels are numbers, the head predicts a score.
        label_columns: the 0/1 columns, one per label (multi-label), or None.
        multi_label: a text has a set of labels.
        label_names: the label set given by the options (`label_names`, or the
            `label_columns`), or None: read from the training file.
        text_fields: `("text",)`, or `("text", "text_pair")` for sentence pairs.
        primary_metric: the metric that picks the best checkpoint, when it is not
            the task's default (`accuracy`), else None.
        metric_names: the official metrics, when not the default, else None.
    """

    heldout_fraction: float
    heldout_seed: int
    regression: bool
    label_columns: tuple[str, ...] | None
    multi_label: bool
    label_names: tuple[str, ...] | None
    text_fields: tuple[str, ...]
    primary_metric: str | None = None
    metric_names: tuple[str, ...] | None = None


def read_settings(options: Mapping[str, Any]) -> TextClassificationSettings:
    """The settings of `options` (the task's option values), checked.

    Raises:
        UserError: options out of range or excluding each other, naming them.
    """
    fraction = float(options["heldout_fraction"])
    if not 0.0 <= fraction < 1.0:
        raise UserError(f"heldout_fraction must be in [0, 1), got {fraction}")
    if fraction > 0 and options["eval_file"]:
        raise UserError(
            "Pass either eval_file or heldout_fraction, not both: the held-out split "
            "becomes the dev split"
        )
    regression = bool(options["regression"])
    label_columns: tuple[str, ...] | None = None
    if options["label_columns"]:
        label_columns = tuple(
            name.strip() for name in options["label_columns"].split(",") if name.strip()
        )
        if len(set(label_columns)) != len(label_columns):
            raise UserError(f"label_columns lists a column twice: {options['label_columns']}")
    multi_label = bool(options["multi_label"]) or label_columns is not None
    if multi_label and regression:
        raise UserError("multi_label and regression exclude each other")
    if not multi_label and (options["thresholds_file"] or options["tune_thresholds"]):
        raise UserError("thresholds_file and tune_thresholds need multi_label=True")
    if multi_label and not options["label_separator"]:
        raise UserError("label_separator must not be empty")
    primary_metric = metric_names = None
    if multi_label:
        # The model is saved and answers with the tuned thresholds: the best one is
        # chosen by what it will answer with.
        primary_metric = "tuned_micro_f1" if options["tune_thresholds"] else "micro_f1"
    if regression:
        primary_metric = "spearman"
        metric_names = ("pearson", "spearman")
        if options["label_names"]:
            raise UserError("label_names makes no sense with regression=True")
    label_names = None
    if options["label_names"]:
        if label_columns is not None:
            raise UserError("Pass label_names or label_columns, not both")
        names = tuple(name.strip() for name in options["label_names"].split(","))
        fewest = 1 if multi_label else 2
        if len(set(names)) != len(names) or not all(names) or len(names) < fewest:
            raise UserError(f"label_names must list {fewest} or more distinct names, got {names}")
        label_names = names
    if label_columns is not None:
        label_names = label_columns
    return TextClassificationSettings(
        heldout_fraction=fraction,
        heldout_seed=int(options["heldout_seed"]),
        regression=regression,
        label_columns=label_columns,
        multi_label=multi_label,
        label_names=label_names,
        text_fields=("text", "text_pair") if options["text_pair_column"] else ("text",),
        primary_metric=primary_metric,
        metric_names=metric_names,
    )
