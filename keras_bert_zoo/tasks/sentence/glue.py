"""The nine GLUE tasks, read from the official TSV files or from tensorflow-datasets.

File layouts (as `download_glue_data.py` writes them, and as google-research/bert's
`run_classifier.py`, tensorflow-datasets' `glue` builder and Hugging Face's loaders
read them; columns are tab-separated, texts are not quoted):

- CoLA: train/dev have no header: source, label, mark, sentence; test: index, sentence.
  Labels 0, 1.
- SST-2: sentence, label; test: index, sentence. Labels 0, 1.
- MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String (the label is `Quality`); test:
  index, #1 ID, #2 ID, #1 String, #2 String. Labels 0, 1.
- STS-B: index, genre, filename, year, old_index, source1, source2, sentence1,
  sentence2, score; test: the same without score. A float score 0-5.
- QQP: id, qid1, qid2, question1, question2, is_duplicate; test: id, question1,
  question2. Labels 0, 1.
- MNLI: index, promptID, pairID, genre, four parse columns, sentence1, sentence2,
  label1 (dev: label1 .. label5), gold_label; test: the first ten columns. Labels
  contradiction, entailment, neutral.
- QNLI: index, question, sentence, label; test: index, question, sentence. Labels
  entailment, not_entailment.
- RTE and WNLI: index, sentence1, sentence2, label; test: index, sentence1, sentence2.
  Labels entailment, not_entailment (RTE); 0, 1 (WNLI, 1 = entailment).

MNLI has `dev_matched.tsv` / `dev_mismatched.tsv` and `test_matched.tsv` /
`test_mismatched.tsv`; the diagnostic set AX (`diagnostic.tsv`: index, sentence1,
sentence2) is predicted with the MNLI model. Columns are found by their header name, so
MNLI's dev files (five annotator labels) and train file (one) both read, and an MRPC
test file that still carries the `Quality` column keeps its labels.

Malformed input raises `InputFileError` naming the file and line: a row with the wrong
number of columns, a label outside the task's set, a score that is not a number. QQP
is the exception: its real train.tsv holds rows with missing fields, which the
reference loaders drop (tensorflow-datasets filters them, Hugging Face's
`QqpProcessor` skips them on `IndexError`), so QQP skips them too, with one logged
count.

The label orders are google-research/bert's (`MnliProcessor.get_labels`), so a
classifier fine-tuned there has its output rows in the same order.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar

from absl import logging

from keras_bert_zoo.tasks._shared import prepared_tfds_builder
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.tasks.sentence.readers import InputFileError, read_delimited
from keras_bert_zoo.tasks.sentence.scores import parse_score
from keras_bert_zoo.tasks.sentence.task import SentenceTask
from keras_bert_zoo.tasks.task import TaskOption
from keras_bert_zoo.utils.errors import UserError


@dataclasses.dataclass(frozen=True)
class GlueFileLayout:
    """The columns of one GLUE TSV file.

    Attributes:
        text_columns: the text columns in `text_fields` order (header names, or
            0-based positions for a header-less file).
        label_column: the gold label column; None for unlabelled files.
        labelled: whether `label_column` must be present (train and dev files); test
            files keep labels only when their header has the column.
        index_column: the submission id column; rows are numbered from 0 without one.
        header: whether the first line names the columns.
        num_columns: the width of a header-less file.
    """

    text_columns: tuple[str | int, ...]
    label_column: str | int | None = None
    labelled: bool = True
    index_column: str | int | None = "index"
    header: bool = True
    num_columns: int | None = None

    def unlabelled(self, **changes) -> GlueFileLayout:
        return dataclasses.replace(self, labelled=False, **changes)


class GlueTask(SentenceTask):
    """A GLUE task: the official TSV files in `data_dir`, or tensorflow-datasets.

    Class attributes a GLUE task sets (besides `SentenceTask`'s):
        glue_name: the task's name on the GLUE server (`"CoLA"`).
        files: split -> file name in `data_dir`.
        layouts: split -> `GlueFileLayout`. Default: train and dev files with the
            `text_fields` columns and a `label` column, a test file without labels.
        submission_names: split -> the submission file the GLUE server expects.
            Default: `<glue_name>.tsv` for the test split.
        tfds_sources: split -> (tensorflow-datasets name, its split). Default: the
            train, validation and test splits of `glue/<glue_name>` (lower case, no
            hyphen).
        tfds_text_keys: the tensorflow-datasets features in `text_fields` order.
            Default: `text_fields`.
        skip_malformed_rows: drop rows of the wrong width with a logged count.
    """

    glue_name: ClassVar[str] = ""
    files: ClassVar[dict[str, str]] = {
        "train": "train.tsv",
        "dev": "dev.tsv",
        "test": "test.tsv",
    }
    layouts: ClassVar[dict[str, GlueFileLayout]] = {}
    submission_names: ClassVar[dict[str, str]] = {}
    tfds_sources: ClassVar[dict[str, tuple[str, str]]] = {}
    tfds_text_keys: ClassVar[tuple[str, ...]] = ()
    skip_malformed_rows: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.glue_name:
            return  # a base of several tasks (`_ParaphraseTask`): no files of its own
        # The defaults follow the task's own names, so they are set once they exist.
        if not cls.layouts:
            cls.layouts = _file_layouts(
                GlueFileLayout(text_columns=cls.text_fields, label_column="label")
            )
        if not cls.submission_names:
            cls.submission_names = {"test": f"{cls.glue_name}.tsv"}
        if not cls.tfds_sources:
            cls.tfds_sources = _standard_sources("glue/" + cls.glue_name.lower().replace("-", ""))
        if not cls.tfds_text_keys:
            cls.tfds_text_keys = cls.text_fields

    def split_names(self) -> dict[str, tuple[str, ...]]:
        return {"train": ("train",), "eval": ("dev",), "predict": ("test",)}

    def submission_file_name(self, split: str) -> str | None:
        return self.submission_names.get(split)

    # === Reading ===

    def read(self, split: str) -> list[SentenceExample]:
        self._check_split(split)
        if self.data_dir is None:
            examples = self._read_tfds(split)
        else:
            examples = self._read_file(split, self.file_path(split))
        logging.info("%s %s: %d examples", self.task_name, split, len(examples))
        return examples

    def file_path(self, split: str) -> str:
        return os.path.join(self.data_dir, self.files[split])

    def _parse_label(self, value: str, where: str) -> str | float:
        if self.is_regression:
            return parse_score(value, where)
        if value not in self.label_names:
            raise InputFileError(
                f"{where}: label {value!r} is not one of {list(self.label_names)} "
                f"({self.task_name})"
            )
        return value

    def _read_file(self, split: str, path: str) -> list[SentenceExample]:
        layout = self.layouts[split]
        table = read_delimited(
            path,
            encoding=self.encoding,
            header=layout.header,
            num_columns=layout.num_columns,
            skip_malformed=self.skip_malformed_rows,
            description=f"{self.glue_name} {split} file of {self.task_name}",
        )
        text_positions = [table.column_index(column) for column in layout.text_columns]
        label_position = None
        if layout.label_column is not None:
            label_position = table.column_index(layout.label_column, required=layout.labelled)
        index_position = None
        if layout.index_column is not None:
            index_position = table.column_index(layout.index_column, required=False)
        examples = []
        for row_number, (line, fields) in enumerate(table.rows):
            where = f"{path}:{line}"
            label = None
            if label_position is not None:
                label = self._parse_label(fields[label_position], where)
            index = str(row_number) if index_position is None else fields[index_position]
            examples.append(
                SentenceExample(
                    example_id=f"{split}-{index}",
                    texts=tuple(fields[position] for position in text_positions),
                    label=label,
                    index=index,
                    source=where,
                )
            )
        return examples

    def _read_tfds(self, split: str) -> list[SentenceExample]:
        import tensorflow_datasets as tfds

        name, tfds_split = self.tfds_sources[split]
        builder = prepared_tfds_builder(
            name,
            self.tfds_data_dir,
            lambda builder: (
                f"tensorflow-datasets has no prepared {name!r} under {builder.data_dir} "
                f"(needed for the {split} split of {self.task_name}). Nothing is downloaded "
                f"here: prepare it yourself (`tfds build {name}`, which downloads it), pass "
                "--tfds_data_dir where it is prepared, or pass --data_dir with the GLUE TSV "
                "files."
            ),
        )
        if tfds_split not in builder.info.splits:
            raise UserError(
                f"tensorflow-datasets {name!r} has no split {tfds_split!r} "
                f"(it has {sorted(builder.info.splits)})"
            )
        label_feature = builder.info.features["label"]
        # Digit labels are stored as their value, named labels as the position in
        # tensorflow-datasets' own class list (a different order from ours for MNLI).
        digit_labels = self.label_names is not None and all(
            name.isdigit() for name in self.label_names
        )
        records = tfds.as_numpy(builder.as_dataset(split=tfds_split, shuffle_files=False))
        examples = []
        # tensorflow-datasets stores examples in hash order; `idx` is the row number.
        for record in sorted(records, key=lambda record: int(record["idx"])):
            index = str(int(record["idx"]))
            where = f"tensorflow-datasets {name} {tfds_split} idx {index}"
            value = record["label"]
            if self.is_regression:
                label = None if split.startswith("test") else float(value)
            elif int(value) < 0:
                label = None
            elif digit_labels:
                label = self._parse_label(str(int(value)), where)
            else:
                label = self._parse_label(label_feature.int2str(int(value)), where)
            examples.append(
                SentenceExample(
                    example_id=f"{split}-{index}",
                    texts=tuple(record[key].decode("utf-8") for key in self.tfds_text_keys),
                    label=label,
                    index=index,
                    source=where,
                )
            )
        return examples


def _file_layouts(
    labelled: GlueFileLayout, test: GlueFileLayout | None = None
) -> dict[str, GlueFileLayout]:
    """Train and dev files laid out as `labelled`; the test file as `test`, by default
    `labelled` without its labels."""
    if test is None:
        test = labelled.unlabelled()
    return {"train": labelled, "dev": labelled, "test": test}


def _standard_sources(tfds_name: str) -> dict[str, tuple[str, str]]:
    return {
        "train": (tfds_name, "train"),
        "dev": (tfds_name, "validation"),
        "test": (tfds_name, "test"),
    }


# === The nine tasks ===


@register_task("glue/cola")
class ColaTask(GlueTask):
    """CoLA: is the sentence grammatical? Matthews correlation."""

    glue_name = "CoLA"
    text_fields = ("sentence",)
    label_names = ("0", "1")
    metric_names = ("matthews_corrcoef",)
    primary_metric = "matthews_corrcoef"
    _labelled = GlueFileLayout(
        text_columns=(3,), label_column=1, index_column=None, header=False, num_columns=4
    )
    layouts = _file_layouts(_labelled, GlueFileLayout(text_columns=("sentence",), labelled=False))


@register_task("glue/sst2")
class Sst2Task(GlueTask):
    """SST-2: sentiment of a movie-review sentence. Accuracy."""

    glue_name = "SST-2"
    text_fields = ("sentence",)
    label_names = ("0", "1")
    _labelled = GlueFileLayout(text_columns=("sentence",), label_column="label", index_column=None)
    layouts = _file_layouts(_labelled, _labelled.unlabelled(index_column="index"))


class _ParaphraseTask(GlueTask):
    """GLUE's paraphrase tasks: is the pair a paraphrase (1) or not (0)? F1 of class 1
    (the primary metric) and accuracy."""

    label_names = ("0", "1")
    metric_names = ("f1", "accuracy")
    primary_metric = "f1"


@register_task("glue/mrpc")
class MrpcTask(_ParaphraseTask):
    """MRPC: are the two sentences paraphrases? F1 (of class 1) and accuracy."""

    glue_name = "MRPC"
    text_fields = ("sentence1", "sentence2")
    _labelled = GlueFileLayout(
        text_columns=("#1 String", "#2 String"), label_column="Quality", index_column=None
    )
    layouts = _file_layouts(_labelled, _labelled.unlabelled(index_column="index"))


@register_task("glue/stsb")
class StsbTask(GlueTask):
    """STS-B: similarity score 0-5 of two sentences (regression). Pearson, Spearman."""

    glue_name = "STS-B"
    text_fields = ("sentence1", "sentence2")
    label_names = None
    metric_names = ("pearson", "spearman")
    primary_metric = "spearman"
    layouts = _file_layouts(
        GlueFileLayout(text_columns=("sentence1", "sentence2"), label_column="score")
    )


@register_task("glue/qqp")
class QqpTask(_ParaphraseTask):
    """QQP: are the two questions duplicates? F1 (of class 1) and accuracy."""

    glue_name = "QQP"
    text_fields = ("question1", "question2")
    layouts = _file_layouts(
        GlueFileLayout(
            text_columns=("question1", "question2"), label_column="is_duplicate", index_column="id"
        )
    )
    skip_malformed_rows = True


@register_task("glue/mnli")
class MnliTask(GlueTask):
    """MultiNLI: entailment, neutral or contradiction. Accuracy on the matched and
    mismatched dev sets; predicts both test sets and the diagnostic set AX."""

    glue_name = "MNLI"
    text_fields = ("premise", "hypothesis")
    label_names = ("contradiction", "entailment", "neutral")
    options = SentenceTask.options + (
        TaskOption(
            "diagnostic_file",
            None,
            "glue/mnli: the GLUE diagnostic set (AX) to predict with the MNLI model; "
            "default: diagnostic.tsv or AX.tsv in --data_dir, or "
            "--data_dir/../diagnostic/diagnostic.tsv",
        ),
    )
    files = {
        "train": "train.tsv",
        "dev_matched": "dev_matched.tsv",
        "dev_mismatched": "dev_mismatched.tsv",
        "test_matched": "test_matched.tsv",
        "test_mismatched": "test_mismatched.tsv",
    }
    _labelled = GlueFileLayout(text_columns=("sentence1", "sentence2"), label_column="gold_label")
    layouts = {
        "train": _labelled,
        "dev_matched": _labelled,
        "dev_mismatched": _labelled,
        "test_matched": _labelled.unlabelled(),
        "test_mismatched": _labelled.unlabelled(),
        "diagnostic": GlueFileLayout(text_columns=("sentence1", "sentence2"), labelled=False),
    }
    submission_names = {
        "test_matched": "MNLI-m.tsv",
        "test_mismatched": "MNLI-mm.tsv",
        "diagnostic": "AX.tsv",
    }
    tfds_sources = {
        "train": ("glue/mnli", "train"),
        "dev_matched": ("glue/mnli", "validation_matched"),
        "dev_mismatched": ("glue/mnli", "validation_mismatched"),
        "test_matched": ("glue/mnli", "test_matched"),
        "test_mismatched": ("glue/mnli", "test_mismatched"),
        "diagnostic": ("glue/ax", "test"),
    }

    def split_names(self) -> dict[str, tuple[str, ...]]:
        predict = ("test_matched", "test_mismatched")
        if self.has_diagnostic():
            predict += ("diagnostic",)
        return {"train": ("train",), "eval": ("dev_matched", "dev_mismatched"), "predict": predict}

    def _check_split(self, split: str) -> None:
        if split != "diagnostic":
            super()._check_split(split)

    def diagnostic_path(self) -> str | None:
        """The diagnostic TSV: the `diagnostic_file` option, else the first of the usual
        places that exists, else None."""
        given = self.option_values["diagnostic_file"]
        if given:
            return given
        if self.data_dir is None:
            return None
        for candidate in (
            os.path.join(self.data_dir, "diagnostic.tsv"),
            os.path.join(self.data_dir, "AX.tsv"),
            os.path.join(
                os.path.dirname(os.path.abspath(self.data_dir)), "diagnostic", "diagnostic.tsv"
            ),
        ):
            if os.path.isfile(candidate):
                return candidate
        return None

    def has_diagnostic(self) -> bool:
        if self.data_dir is not None or self.option_values["diagnostic_file"]:
            return self.diagnostic_path() is not None
        import tensorflow_datasets as tfds

        return tfds.builder("glue/ax", data_dir=self.tfds_data_dir).is_prepared()

    def file_path(self, split: str) -> str:
        if split != "diagnostic":
            return super().file_path(split)
        path = self.diagnostic_path()
        if path is None:
            raise FileNotFoundError(
                f"No GLUE diagnostic set (AX) found for {self.task_name}: looked for "
                f"diagnostic.tsv and AX.tsv in {self.data_dir} and for "
                "../diagnostic/diagnostic.tsv; pass --diagnostic_file"
            )
        return path

    def read(self, split: str) -> list[SentenceExample]:
        if split == "diagnostic" and self.option_values["diagnostic_file"]:
            examples = self._read_file(split, self.file_path(split))
            logging.info("%s %s: %d examples", self.task_name, split, len(examples))
            return examples
        return super().read(split)


@register_task("glue/qnli")
class QnliTask(GlueTask):
    """QNLI: does the sentence answer the question? Accuracy."""

    glue_name = "QNLI"
    text_fields = ("question", "sentence")
    label_names = ("entailment", "not_entailment")


@register_task("glue/rte")
class RteTask(GlueTask):
    """RTE: does sentence 1 entail sentence 2? Accuracy."""

    glue_name = "RTE"
    text_fields = ("sentence1", "sentence2")
    label_names = ("entailment", "not_entailment")


@register_task("glue/wnli")
class WnliTask(GlueTask):
    """WNLI: Winograd schemas as entailment (1 = entailment). Accuracy."""

    glue_name = "WNLI"
    text_fields = ("sentence1", "sentence2")
    label_names = ("0", "1")


GLUE_TASK_NAMES = (
    "glue/cola",
    "glue/sst2",
    "glue/mrpc",
    "glue/stsb",
    "glue/qqp",
    "glue/mnli",
    "glue/qnli",
    "glue/rte",
    "glue/wnli",
)
