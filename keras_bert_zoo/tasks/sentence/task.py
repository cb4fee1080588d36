"""`SentenceTask`: what every sentence and sentence-pair task shares.

One or two texts in, one label (or one score, or a set of labels) out: GLUE and
`text_classification` differ only in how they read their files and which metrics are
official, so the features, the model, the answers and the prediction files live here
once.

Long documents (`long_documents`): `truncate` (the default) packs the first
`max_seq_length` tokens; `windows` cuts the (last) text into overlapping windows
(`windows.SentenceWindowPreprocessor`), trains every window with its document's label
and reads one answer per document from the mean or maximum of its windows'
probabilities (`window_aggregation`; a regression's scores are averaged), in
`postprocess` and, with the same windows and aggregation in TF ops, in the exported
`serving_default`, which then takes documents of any length.

Multi-label (`is_multi_label`, `text_classification`'s `multi_label`): a sigmoid per
label, binary cross-entropy, a label predicted when its probability reaches its
threshold (`label_thresholds`); see `multi_label` for the metrics.

The task holds the settings and the contract; each step's work lives beside it:
`examples` (`SentenceExample`), `options` (the long-document options), `features`
(examples -> packed features), `answers` (`SentenceAnswer`, logits -> answers),
`evaluation` (the official metrics), `prediction_files` (the JSON lines and the
submission file) and `serving` (the exported answers in TF ops).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks._shared import check_sequence_length
from keras_bert_zoo.tasks.distillation import (
    SOFT_CLASSES,
    SOFT_LABELS,
    SOFT_SCORE,
    SoftTargetKind,
)
from keras_bert_zoo.tasks.sentence import multi_label
from keras_bert_zoo.tasks.sentence.answers import SentenceAnswer, answers_from_logits
from keras_bert_zoo.tasks.sentence.evaluation import confusion_matrix, evaluate_answers
from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.tasks.sentence.features import (
    check_labelled,
    label_tensor,
    sentence_features,
    traced_packing,
)
from keras_bert_zoo.tasks.sentence.options import WINDOW_OPTIONS
from keras_bert_zoo.tasks.sentence.prediction_files import write_prediction_files
from keras_bert_zoo.tasks.sentence.serving import answer_fn
from keras_bert_zoo.tasks.sentence.windows import SentenceWindowPreprocessor
from keras_bert_zoo.tasks.servable import CLASSIFY_API, REGRESS_API, ServingApi
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError

# Names that moved to the modules of their concept (docs/api-changes.md); the old
# names warn for one release.
_ANSWERS, _FEATURES = (
    "keras_bert_zoo.tasks.sentence.answers",
    "keras_bert_zoo.tasks.sentence.features",
)
__getattr__ = moved_names(
    __name__,
    [],
    renamed={
        "softmax": (_ANSWERS, "softmax"),
        "sigmoid": (_ANSWERS, "sigmoid"),
        "PREPROCESS_BATCH_SIZE": (_FEATURES, "PREPROCESS_BATCH_SIZE"),
    },
)


class SentenceTask(Task):
    """Base of the sentence(-pair) classification and regression tasks.

    Subclasses implement `read` and set (as class or instance attributes):
        text_fields: one or two names (the serving signature's inputs).
        label_names: the label names in head order, or None for a regression.
        metric_names: the official metrics, from `accuracy`, `f1`,
            `matthews_corrcoef`, `pearson`, `spearman`.
        positive_label: the class `f1` scores.

    Served with TF Serving's Classify API (`serving_api` "classify": `probabilities`
    over `label_names`), or its Regress API for a regression (`score`).

    Subclasses may override `submission_file_name(split)`.
    """

    label_names: ClassVar[tuple[str, ...] | None] = None
    metric_names: ClassVar[tuple[str, ...]] = ("accuracy",)
    positive_label: ClassVar[str] = "1"
    options = WINDOW_OPTIONS

    @property
    def is_regression(self) -> bool:
        return self.label_names is None

    @property
    def is_multi_label(self) -> bool:
        """Whether a text has a set of labels (a sigmoid each) rather than one."""
        return False

    @property
    def label_thresholds(self) -> np.ndarray:
        """Multi-label: the probability each label needs, in `label_names` order."""
        return np.full(len(self.label_names), multi_label.DEFAULT_THRESHOLD)

    @property
    def windowed(self) -> bool:
        """Whether long texts are cut into windows (`long_documents=windows`)."""
        return self.option_values.get("long_documents", "truncate") == "windows"

    @property
    def training_unit(self) -> str | None:
        return "windows" if self.windowed else None

    def count_training_features(self, examples, preprocessor) -> int:
        if not self.windowed:
            return len(examples)
        # The windows depend on each text's WordPieces: the training features, counted.
        features = self.features(examples, preprocessor, training=True)
        return int(features.reduce(np.int64(0), lambda count, _: count + 1))

    @property
    def window_aggregation(self) -> str:
        """How windows' answers combine: `mean` or `max` (a regression: `mean`)."""
        if self.is_regression:
            return "mean"
        return self.option_values.get("window_aggregation", "mean")

    @property
    def huggingface_problem_type(self) -> str:
        return (
            "regression"
            if self.is_regression
            else "multi_label_classification"
            if self.is_multi_label
            else "single_label_classification"
        )

    @property
    def num_outputs(self) -> int:
        return 1 if self.is_regression else len(self.label_names)

    # === Data ===

    def _check_split(self, split: str) -> None:
        known = sorted({name for names in self.split_names().values() for name in names})
        if split not in known:
            raise UserError(f"{self.task_name} has no split {split!r}; its splits are {known}")

    def examples_from_texts(
        self, texts: Sequence[str | Sequence[str]], split: str = "input"
    ) -> list[SentenceExample]:
        """Unlabelled examples from raw texts (a string, or a tuple of `text_fields`)."""
        examples = []
        for position, item in enumerate(texts):
            item = (item,) if isinstance(item, str) else tuple(item)
            if len(item) != len(self.text_fields):
                raise UserError(
                    f"{self.task_name} takes {len(self.text_fields)} text(s) per example "
                    f"({', '.join(self.text_fields)}); item {position} has {len(item)}"
                )
            examples.append(
                SentenceExample(
                    example_id=f"{split}-{position}",
                    texts=item,
                    index=str(position),
                    source=f"{split} item {position}",
                )
            )
        return examples

    def transfer_example(
        self, example_id: str, fields: tuple[str, ...], source: str
    ) -> SentenceExample:
        """An unlabelled `SentenceExample` of the texts of a transfer file's line
        (`read_transfer_file`: `text_fields` separated by tabs, whatever the labels are:
        one class, several or a score).

        Args:
            example_id: `transfer-{n}`.
            fields: the texts, in `text_fields` order.
            source: `"path:line"`.
        """
        # The id as the index: unique, which is all a prediction record asks of it.
        return SentenceExample(
            example_id=example_id, texts=tuple(fields), index=example_id, source=source
        )

    # === Features ===

    def make_preprocessor(self, tokenizer):
        from keras_bert_zoo.text import BertPreprocessor

        if self.windowed:
            return SentenceWindowPreprocessor(
                tokenizer,
                sequence_length=self.max_seq_length,
                window_stride=self.option_values["window_stride"],
                num_texts=len(self.text_fields),
            )

        # "longest_first" trims the longer text a token at a time: google-research/bert's
        # _truncate_seq_pair.
        return BertPreprocessor(
            tokenizer, sequence_length=self.max_seq_length, truncate="longest_first"
        )

    def encode_label(self, example: SentenceExample):
        if self.is_regression:
            return float(example.label)
        if self.is_multi_label:
            unknown = [label for label in example.label if label not in self.label_names]
            if unknown:
                raise UserError(
                    f"{example.source}: label {unknown[0]!r} is not one of "
                    f"{list(self.label_names)} ({self.task_name})"
                )
            return multi_label.multi_hot([example.label], self.label_names)[0].astype(float)
        try:
            return self.label_names.index(example.label)
        except ValueError:
            raise UserError(
                f"{example.source}: label {example.label!r} is not one of "
                f"{list(self.label_names)} ({self.task_name})"
            ) from None

    def features(self, examples, preprocessor, *, training: bool) -> tf.data.Dataset:
        """Flat dicts: the three model inputs, `label` (when every example has one:
        int, float score, or 0/1 floats `[num_labels]` for multi-label) and
        `example_index` (the example's position in `examples`); windowed, one dict per
        window, with `window_start` and `window_length` (pieces)."""
        examples = list(examples)
        labels = None
        if check_labelled(examples, training=training, task_name=self.task_name):
            labels = label_tensor(
                [self.encode_label(example) for example in examples],
                regression=self.is_regression,
                num_labels=len(self.label_names) if self.is_multi_label else None,
            )
        pack = self._packing_function(preprocessor)
        return sentence_features(examples, pack, num_texts=len(self.text_fields), labels=labels)

    def _packing_function(self, preprocessor):
        """`preprocessor` on `[batch]` string tensors, traced once per preprocessor
        (`features.traced_packing`; the functions are kept on the task)."""
        cache = self.__dict__.setdefault("_packing_functions", {})
        return traced_packing(preprocessor, len(self.text_fields), cache)

    # === Model ===

    def build_model(self, encoder):
        from keras_bert_zoo.models import BertClassifier

        check_sequence_length(self.max_seq_length, encoder)
        return BertClassifier(encoder, num_classes=self.num_outputs)

    def loss(self):
        import keras

        if self.is_regression:
            return keras.losses.MeanSquaredError()
        if self.is_multi_label:
            return keras.losses.BinaryCrossentropy(from_logits=True)
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def metrics(self) -> list:
        import keras

        if self.is_regression:
            return [keras.metrics.MeanAbsoluteError(name="mean_absolute_error")]
        if self.is_multi_label:
            # On logits: a positive logit is a probability above 0.5.
            return [keras.metrics.BinaryAccuracy(name="binary_accuracy", threshold=0.0)]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def soft_targets(self) -> SoftTargetKind:
        """`"score"` for a regression, `"labels"` (a sigmoid each) for multi-label,
        `"classes"` (softmax over the labels) otherwise: `BertClassifier`'s one output,
        `[batch, num_outputs]` (one row per window of a windowed text)."""
        if self.is_regression:
            return SOFT_SCORE
        return SOFT_LABELS if self.is_multi_label else SOFT_CLASSES

    # === Answers ===

    @property
    def _thresholds_if_multi_label(self) -> np.ndarray | None:
        return self.label_thresholds if self.is_multi_label else None

    def postprocess(self, outputs, meta, examples) -> list[SentenceAnswer]:
        """One answer per example: the probabilities (or score) of its feature, or,
        windowed, the `window_aggregation` of its windows' probabilities (scores);
        see `answers.answers_from_logits`."""
        return answers_from_logits(
            outputs,
            meta["example_index"],
            len(examples),
            label_names=None if self.is_regression else self.label_names,
            thresholds=self._thresholds_if_multi_label,
            aggregation=self.window_aggregation,
        )

    def evaluate(self, answers, examples) -> dict[str, float]:
        """`metric_names` (multi-label: micro/macro/per-label F1 and subset accuracy);
        see `evaluation.evaluate_answers`."""
        return evaluate_answers(
            answers,
            examples,
            metric_names=self.metric_names,
            positive_label=self.positive_label,
            multi_label_names=self.label_names if self.is_multi_label else None,
        )

    def confusion_matrix(self, answers, examples) -> dict[str, Any] | None:
        if self.is_regression or self.is_multi_label or not self.label_names:
            return None
        return confusion_matrix(answers, examples, self.label_names)

    # === Prediction files ===

    def submission_file_name(self, split: str) -> str | None:
        """The benchmark's file for `split` (GLUE: `CoLA.tsv`), or None."""
        return None

    @staticmethod
    def predictions_file_name(split: str) -> str:
        """`predictions_<split>.jsonl`: every split's file is named after it, so the
        files of `eval` and `predict` runs into one directory never overwrite each other."""
        return f"predictions_{split}.jsonl"

    @property
    def prediction_text_names(self) -> tuple[str, ...]:
        """The keys of the texts in a prediction record, in `text_fields` order: the
        names the data gives them (GLUE's `sentence1`, ...), so that a record reads like
        a row of its input file."""
        return tuple(self.text_fields)

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions_<split>.jsonl` (the texts under `prediction_text_names`,
        probabilities or score, label) and, for a split the benchmark scores, its
        submission TSV (`index\\tprediction`); see `prediction_files`.
        """
        return write_prediction_files(
            answers,
            examples,
            output_dir,
            predictions_file_name=self.predictions_file_name(split),
            submission_file_name=self.submission_file_name(split),
            text_names=self.prediction_text_names,
            regression=self.is_regression,
            multi_label=self.is_multi_label,
        )

    # === State ===

    def state(self) -> dict[str, Any]:
        if self.is_regression:
            return {"regression": True}
        return {"regression": False, "label_names": list(self.label_names)}

    # === Serving ===

    @property
    def serving_api(self) -> ServingApi:
        """`"regress"` for a regression (answers: `score`), `"classify"` otherwise
        (answers: `probabilities` over `label_names`)."""
        return REGRESS_API if self.is_regression else CLASSIFY_API

    def serving_outputs(self, model, preprocessor):
        """`fn(**texts)`: raw string tensors `[batch]` named `text_fields` to
        `{"probabilities", "label_id", "label"}` (classification), `{"score"}`
        (regression) or, multi-label, `{"probabilities"` (`[batch, num_labels]`),
        `"label_mask"` (int32 0/1 `[batch, num_labels]`), `"label_count"` (int32
        `[batch]`), `"labels"` (string `[batch, max_count]`, the predicted labels in
        `label_names` order, padded with "")`}`.

        Windowed, each text's windows go through the model and their probabilities
        (scores) are aggregated per text in TF ops, as `postprocess` does (see
        `serving.answer_fn`).
        """
        return answer_fn(
            model,
            preprocessor,
            text_fields=self.text_fields,
            input_names=self.model_input_names(),
            label_names=None if self.is_regression else self.label_names,
            thresholds=self._thresholds_if_multi_label,
            aggregation=self.window_aggregation,
        )
