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
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.distillation import (
    SOFT_CLASSES,
    SOFT_LABELS,
    SOFT_SCORE,
    SoftTargetKind,
)
from keras_bert_zoo.tasks.sentence import metrics as metric_functions
from keras_bert_zoo.tasks.sentence import multi_label
from keras_bert_zoo.tasks.sentence.windows import (
    ROW_INDEX,
    WINDOW_AGGREGATIONS,
    SentenceWindowPreprocessor,
    aggregate_windows,
    aggregate_windows_tf,
)
from keras_bert_zoo.tasks.servable import (
    CLASSIFY_API,
    PROBABILITIES_ANSWER,
    REGRESS_API,
    SCORE_ANSWER,
    ServingApi,
)
from keras_bert_zoo.tasks.task import Task, TaskOption
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError

# Texts are tokenized this many at a time inside `features()`: one preprocessor call
# per example costs a graph dispatch each.
PREPROCESS_BATCH_SIZE = 256

# The options every sentence task takes for documents longer than `max_seq_length`.
WINDOW_OPTIONS = (
    TaskOption(
        "long_documents",
        "truncate",
        "Sentence tasks: texts longer than max_seq_length are truncated, or cut into "
        "overlapping windows of the (last) text whose answers are aggregated per text.",
        choices=("truncate", "windows"),
    ),
    TaskOption(
        "window_stride",
        64,
        "WordPieces between the starts of consecutive windows (capped at the window "
        "length: no overlap).",
    ),
    TaskOption(
        "window_aggregation",
        "mean",
        "Sentence tasks with --long_documents=windows: one answer per text from the mean "
        "or the per-label maximum of its windows' probabilities (regression: mean).",
        choices=WINDOW_AGGREGATIONS,
    ),
)

_METRICS = {
    "accuracy": metric_functions.accuracy,
    "f1": metric_functions.f1_score,
    "matthews_corrcoef": metric_functions.matthews_corrcoef,
    "pearson": metric_functions.pearson,
    "spearman": metric_functions.spearman,
}

# What a prediction record says besides the texts (`write_predictions`).
_PREDICTION_RECORD_KEYS = frozenset(
    (
        "index",
        "example_id",
        "label",
        "labels",
        "probabilities",
        "score",
        "gold_label",
        "gold_labels",
    )
)


@dataclasses.dataclass(frozen=True)
class SentenceExample:
    """One example of a sentence or sentence-pair task.

    Attributes:
        example_id: unique within its split (`"dev-17"`).
        texts: the texts, in the task's `text_fields` order.
        label: the gold label name, the gold score (regression), the tuple of gold
            label names (multi-label, in `label_names` order), or None (test sets).
        index: the id the submission file uses (the file's `index`/`id` column, or the
            row number when the file has none).
        source: where it came from (`"path:line"`), for error messages.
    """

    example_id: str
    texts: tuple[str, ...]
    label: str | float | tuple[str, ...] | None = None
    index: str = ""
    source: str = ""


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
        count = len(examples)
        columns = {
            f"text_{position}": tf.constant(
                [example.texts[position] for example in examples], tf.string, shape=[count]
            )
            for position in range(len(self.text_fields))
        }
        columns["example_index"] = tf.range(count, dtype=tf.int64)
        unlabelled = [example for example in examples if example.label is None]
        if not unlabelled:
            labels = [self.encode_label(example) for example in examples]
            if self.is_multi_label:
                columns["label"] = tf.constant(
                    np.asarray(labels, np.float32).reshape(count, len(self.label_names))
                )
            else:
                dtype = tf.float32 if self.is_regression else tf.int32
                columns["label"] = tf.constant(labels, dtype, shape=[count])
        elif len(unlabelled) != count:
            raise UserError(
                f"{unlabelled[0].source}: example without a label among labelled ones "
                f"({len(unlabelled)} of {count} unlabelled)"
            )
        elif training:
            raise UserError(f"{self.task_name}: the training examples have no labels")
        pack = self._packing_function(preprocessor)
        num_texts = len(self.text_fields)

        def preprocess(batch):
            batch = dict(batch)
            segments = [batch.pop(f"text_{position}") for position in range(num_texts)]
            packed = dict(pack(*segments))
            if ROW_INDEX in packed:
                # Windows: each carries its document's label and index.
                row_index = packed.pop(ROW_INDEX)
                batch = {key: tf.gather(value, row_index) for key, value in batch.items()}
            return {**packed, **batch}

        dataset = tf.data.Dataset.from_tensor_slices(columns)
        dataset = dataset.batch(PREPROCESS_BATCH_SIZE)
        dataset = dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return dataset.unbatch()

    def _packing_function(self, preprocessor):
        """`preprocessor` on `[batch]` string tensors, traced once per preprocessor.

        Each new `tf.data` map would trace the tokenizer's graph again (seconds per
        dataset: one per evaluation); a `tf.function` with a fixed signature is traced
        on its first call and reused by every dataset after it.
        """
        cache = self.__dict__.setdefault("_packing_functions", {})
        if id(preprocessor) not in cache:
            num_texts = len(self.text_fields)

            def pack(*segments):
                return preprocessor(tuple(segments) if num_texts > 1 else segments[0])

            signature = [tf.TensorSpec([None], tf.string)] * num_texts
            # The preprocessor is kept beside its function so that its id stays unique.
            cache[id(preprocessor)] = (preprocessor, tf.function(pack, input_signature=signature))
        return cache[id(preprocessor)][1]

    # === Model ===

    def build_model(self, encoder):
        from keras_bert_zoo.models import BertClassifier

        max_positions = getattr(encoder, "max_position_embeddings", None)
        if max_positions is not None and self.max_seq_length > max_positions:
            raise UserError(
                f"max_seq_length={self.max_seq_length} exceeds the encoder's "
                f"max_position_embeddings={max_positions}"
            )
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

    def postprocess(self, outputs, meta, examples) -> list[SentenceAnswer]:
        """One answer per example: the probabilities (or score) of its feature, or,
        windowed, the `window_aggregation` of its windows' probabilities (scores)."""
        logits = np.asarray(outputs, np.float64).reshape(-1, self.num_outputs)
        example_indices = np.asarray(meta["example_index"]).reshape(-1)
        if self.is_regression:
            values = logits
        elif self.is_multi_label:
            values = sigmoid(logits)
        else:
            values = softmax(logits)
        values = aggregate_windows(values, example_indices, len(examples), self.window_aggregation)
        if self.is_regression:
            return [SentenceAnswer(score=float(row[0])) for row in values]
        answers = []
        if self.is_multi_label:
            chosen = values >= self.label_thresholds[np.newaxis, :]
        for position, row in enumerate(values):
            probabilities = {name: float(p) for name, p in zip(self.label_names, row, strict=True)}
            if self.is_multi_label:
                labels = tuple(
                    name for name, on in zip(self.label_names, chosen[position], strict=True) if on
                )
                answers.append(SentenceAnswer(probabilities=probabilities, labels=labels))
            else:
                answers.append(
                    SentenceAnswer(
                        label=self.label_names[int(row.argmax())], probabilities=probabilities
                    )
                )
        return answers

    def evaluate(self, answers, examples) -> dict[str, float]:
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        unlabelled = [example for example in examples if example.label is None]
        if unlabelled:
            raise UserError(
                f"{unlabelled[0].source}: cannot evaluate examples without gold labels "
                f"({len(unlabelled)} of {len(examples)})"
            )
        if self.is_multi_label:
            return multi_label.multi_label_report(
                multi_label.multi_hot([example.label for example in examples], self.label_names),
                multi_label.multi_hot([answer.labels for answer in answers], self.label_names),
                self.label_names,
            )
        gold = [example.label for example in examples]
        predicted = [answer.prediction for answer in answers]
        results = {}
        for name in self.metric_names:
            if name == "f1":
                results[name] = _METRICS[name](gold, predicted, positive_label=self.positive_label)
            else:
                results[name] = _METRICS[name](gold, predicted)
        return results

    def confusion_matrix(self, answers, examples) -> dict[str, Any] | None:
        if self.is_regression or self.is_multi_label or not self.label_names:
            return None
        index = {name: position for position, name in enumerate(self.label_names)}
        matrix = np.zeros((len(index), len(index)), np.int64)
        for answer, example in zip(answers, examples, strict=True):
            matrix[index[example.label], index[answer.prediction]] += 1
        return {"labels": list(self.label_names), "matrix": matrix.tolist()}

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

    def _prediction_texts(self, example: SentenceExample) -> dict[str, str]:
        # A text named like one of the record's own keys (a column called `label`)
        # would overwrite or be overwritten by it; the prefix keeps both.
        return {
            f"text:{name}" if name in _PREDICTION_RECORD_KEYS else name: text
            for name, text in zip(self.prediction_text_names, example.texts, strict=True)
        }

    def _format_prediction(self, answer: SentenceAnswer) -> str:
        if self.is_multi_label:
            return ",".join(answer.labels)
        return f"{answer.score:.6f}" if self.is_regression else answer.label

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions_<split>.jsonl` (the texts under `prediction_text_names`,
        probabilities or score, label) and, for a split the benchmark scores, its
        submission TSV (`index\\tprediction`).
        """
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        paths = []
        jsonl_path = os.path.join(output_dir, self.predictions_file_name(split))
        with atomic_open(jsonl_path) as f:
            for example, answer in zip(examples, answers, strict=True):
                record: dict[str, Any] = {
                    "index": example.index,
                    "example_id": example.example_id,
                    **self._prediction_texts(example),
                }
                if self.is_regression:
                    record["score"] = answer.score
                elif self.is_multi_label:
                    record["labels"] = list(answer.labels)
                    record["probabilities"] = answer.probabilities
                else:
                    record["label"] = answer.label
                    record["probabilities"] = answer.probabilities
                if example.label is not None and self.is_multi_label:
                    record["gold_labels"] = list(example.label)
                elif example.label is not None:
                    record["gold_label"] = example.label
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        paths.append(jsonl_path)
        submission_name = self.submission_file_name(split)
        if submission_name is not None:
            submission_path = os.path.join(output_dir, submission_name)
            with atomic_open(submission_path) as f:
                f.write("index\tprediction\n")
                for example, answer in zip(examples, answers, strict=True):
                    f.write(f"{example.index}\t{self._format_prediction(answer)}\n")
            paths.append(submission_path)
        return paths

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
        (scores) are aggregated per text in TF ops, as `postprocess` does.
        """
        text_fields = tuple(self.text_fields)
        input_names = self.model_input_names()
        label_names = None if self.is_regression else tf.constant(list(self.label_names))
        multi = self.is_multi_label
        thresholds = tf.constant(self.label_thresholds, tf.float32) if multi else None
        aggregation = self.window_aggregation

        def answer(**texts):
            unknown = sorted(set(texts) - set(text_fields))
            if unknown or len(texts) != len(text_fields):
                raise UserError(f"Expected the texts {list(text_fields)}, got {sorted(texts)}")
            segments = tuple(tf.convert_to_tensor(texts[name]) for name in text_fields)
            inputs = preprocessor(segments if len(segments) > 1 else segments[0])
            logits = tf.cast(
                model({name: inputs[name] for name in input_names}, training=False), tf.float32
            )
            if label_names is None:
                values = logits
            elif multi:
                values = tf.sigmoid(logits)
            else:
                values = tf.nn.softmax(logits, axis=-1)
            if ROW_INDEX in inputs:
                values = aggregate_windows_tf(
                    values, inputs[ROW_INDEX], tf.shape(segments[0])[0], aggregation
                )
            if label_names is None:
                return {SCORE_ANSWER: values[:, 0]}
            if multi:
                chosen = values >= thresholds[tf.newaxis, :]
                batch = tf.shape(values)[0]
                names = tf.tile(label_names[tf.newaxis, :], [batch, 1])
                return {
                    PROBABILITIES_ANSWER: values,
                    "label_mask": tf.cast(chosen, tf.int32),
                    "label_count": tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1),
                    "labels": tf.ragged.boolean_mask(names, chosen).to_tensor(""),
                }
            label_id = tf.argmax(values, axis=-1, output_type=tf.int32)
            return {
                PROBABILITIES_ANSWER: values,
                "label_id": label_id,
                "label": tf.gather(label_names, label_id),
            }

        return answer
