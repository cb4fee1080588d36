"""`SentenceTask`: what every sentence and sentence-pair task shares.

One or two texts in, one label (or one score) out: GLUE and `text_classification`
differ only in how they read their files and which metrics are official, so the
features, the model, the answers and the prediction files live here once.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.base import (
    CLASSIFY_API,
    PROBABILITIES_ANSWER,
    REGRESS_API,
    SCORE_ANSWER,
    ServingApi,
    Task,
)
from keras_bert_zoo.tasks.sentence import metrics as metric_functions
from keras_bert_zoo.utils.atomic import atomic_open

# Texts are tokenized this many at a time inside `features()`: one preprocessor call
# per example costs a graph dispatch each.
PREPROCESS_BATCH_SIZE = 256

_METRICS = {
    "accuracy": metric_functions.accuracy,
    "f1": metric_functions.f1_score,
    "matthews_corrcoef": metric_functions.matthews_corrcoef,
    "pearson": metric_functions.pearson,
    "spearman": metric_functions.spearman,
}


@dataclasses.dataclass(frozen=True)
class SentenceExample:
    """One example of a sentence or sentence-pair task.

    Attributes:
        example_id: unique within its split (`"dev-17"`).
        texts: the texts, in the task's `text_fields` order.
        label: the gold label name, the gold score (regression), or None (test sets).
        index: the id the submission file uses (the file's `index`/`id` column, or the
            row number when the file has none).
        source: where it came from (`"path:line"`), for error messages.
    """

    example_id: str
    texts: tuple[str, ...]
    label: str | float | None = None
    index: str = ""
    source: str = ""


@dataclasses.dataclass(frozen=True)
class SentenceAnswer:
    """The model's answer for one example.

    Attributes:
        label: the predicted label name (classification), else None.
        probabilities: softmax probability of every label, by label name.
        score: the predicted score (regression), else None.
    """

    label: str | None = None
    probabilities: dict[str, float] | None = None
    score: float | None = None

    @property
    def prediction(self) -> str | float:
        """What the submission file holds: the label name, or the score."""
        return self.score if self.label is None else self.label


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=-1, keepdims=True)


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

    @property
    def is_regression(self) -> bool:
        return self.label_names is None

    @property
    def num_outputs(self) -> int:
        return 1 if self.is_regression else len(self.label_names)

    # === Data ===

    def _check_split(self, split: str) -> None:
        known = sorted({name for names in self.split_names().values() for name in names})
        if split not in known:
            raise ValueError(f"{self.task_name} has no split {split!r}; its splits are {known}")

    def examples_from_texts(
        self, texts: Sequence[str | Sequence[str]], split: str = "input"
    ) -> list[SentenceExample]:
        """Unlabelled examples from raw texts (a string, or a tuple of `text_fields`)."""
        examples = []
        for position, item in enumerate(texts):
            item = (item,) if isinstance(item, str) else tuple(item)
            if len(item) != len(self.text_fields):
                raise ValueError(
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

    # === Features ===

    def make_preprocessor(self, tokenizer):
        from keras_bert_zoo.text import BertPreprocessor

        # "longest_first" trims the longer text a token at a time: google-research/bert's
        # _truncate_seq_pair.
        return BertPreprocessor(
            tokenizer, sequence_length=self.max_seq_length, truncate="longest_first"
        )

    def encode_label(self, example: SentenceExample):
        if self.is_regression:
            return float(example.label)
        try:
            return self.label_names.index(example.label)
        except ValueError:
            raise ValueError(
                f"{example.source}: label {example.label!r} is not one of "
                f"{list(self.label_names)} ({self.task_name})"
            ) from None

    def features(self, examples, preprocessor, *, training: bool) -> tf.data.Dataset:
        """Flat dicts: the three model inputs, `label` (when every example has one) and
        `example_index` (the example's position in `examples`)."""
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
            dtype = tf.float32 if self.is_regression else tf.int32
            columns["label"] = tf.constant(labels, dtype, shape=[count])
        elif len(unlabelled) != count:
            raise ValueError(
                f"{unlabelled[0].source}: example without a label among labelled ones "
                f"({len(unlabelled)} of {count} unlabelled)"
            )
        elif training:
            raise ValueError(f"{self.task_name}: the training examples have no labels")
        pack = self._packing_function(preprocessor)
        num_texts = len(self.text_fields)

        def preprocess(batch):
            batch = dict(batch)
            segments = [batch.pop(f"text_{position}") for position in range(num_texts)]
            return {**pack(*segments), **batch}

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
            raise ValueError(
                f"max_seq_length={self.max_seq_length} exceeds the encoder's "
                f"max_position_embeddings={max_positions}"
            )
        return BertClassifier(encoder, num_classes=self.num_outputs)

    def loss(self):
        import keras

        if self.is_regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def metrics(self) -> list:
        import keras

        if self.is_regression:
            return [keras.metrics.MeanAbsoluteError(name="mean_absolute_error")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    # === Answers ===

    def postprocess(self, outputs, meta, examples) -> list[SentenceAnswer]:
        logits = np.asarray(outputs, np.float64).reshape(-1, self.num_outputs)
        example_indices = np.asarray(meta["example_index"]).reshape(-1)
        if logits.shape[0] != example_indices.shape[0]:
            raise ValueError(
                f"{logits.shape[0]} model outputs for {example_indices.shape[0]} features"
            )
        answers: list[SentenceAnswer | None] = [None] * len(examples)
        if self.is_regression:
            for example_index, row in zip(example_indices, logits, strict=True):
                answers[example_index] = SentenceAnswer(score=float(row[0]))
        else:
            probabilities = softmax(logits)
            predicted = probabilities.argmax(axis=-1)
            for example_index, row, label_id in zip(
                example_indices, probabilities, predicted, strict=True
            ):
                answers[example_index] = SentenceAnswer(
                    label=self.label_names[label_id],
                    probabilities={
                        name: float(p) for name, p in zip(self.label_names, row, strict=True)
                    },
                )
        missing = [position for position, answer in enumerate(answers) if answer is None]
        if missing:
            raise ValueError(f"No model output for {len(missing)} examples (first: {missing[0]})")
        return answers

    def evaluate(self, answers, examples) -> dict[str, float]:
        if len(answers) != len(examples):
            raise ValueError(f"{len(answers)} answers for {len(examples)} examples")
        unlabelled = [example for example in examples if example.label is None]
        if unlabelled:
            raise ValueError(
                f"{unlabelled[0].source}: cannot evaluate examples without gold labels "
                f"({len(unlabelled)} of {len(examples)})"
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

    # === Prediction files ===

    def submission_file_name(self, split: str) -> str | None:
        """The benchmark's file for `split` (GLUE: `CoLA.tsv`), or None."""
        return None

    @staticmethod
    def predictions_file_name(split: str) -> str:
        """`predictions.jsonl` for the test split, `predictions_<split>.jsonl` otherwise."""
        return "predictions.jsonl" if split == "test" else f"predictions_{split}.jsonl"

    def _format_prediction(self, answer: SentenceAnswer) -> str:
        return f"{answer.score:.6f}" if self.is_regression else answer.label

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions[_<split>].jsonl` (texts, probabilities or score, label)
        and, for a split the benchmark scores, its submission TSV (`index\\tprediction`).
        """
        if len(answers) != len(examples):
            raise ValueError(f"{len(answers)} answers for {len(examples)} examples")
        paths = []
        jsonl_path = os.path.join(output_dir, self.predictions_file_name(split))
        with atomic_open(jsonl_path) as f:
            for example, answer in zip(examples, answers, strict=True):
                record: dict[str, Any] = {
                    "index": example.index,
                    "example_id": example.example_id,
                    "text": dict(zip(self.text_fields, example.texts, strict=True)),
                }
                if self.is_regression:
                    record["score"] = answer.score
                else:
                    record["label"] = answer.label
                    record["probabilities"] = answer.probabilities
                if example.label is not None:
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
        `{"probabilities", "label_id", "label"}` (classification) or `{"score"}`."""
        text_fields = tuple(self.text_fields)
        label_names = None if self.is_regression else tf.constant(list(self.label_names))

        def answer(**texts):
            unknown = sorted(set(texts) - set(text_fields))
            if unknown or len(texts) != len(text_fields):
                raise ValueError(f"Expected the texts {list(text_fields)}, got {sorted(texts)}")
            segments = tuple(tf.convert_to_tensor(texts[name]) for name in text_fields)
            inputs = preprocessor(segments if len(segments) > 1 else segments[0])
            logits = tf.cast(model(inputs, training=False), tf.float32)
            if label_names is None:
                return {SCORE_ANSWER: logits[:, 0]}
            probabilities = tf.nn.softmax(logits, axis=-1)
            label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
            return {
                PROBABILITIES_ANSWER: probabilities,
                "label_id": label_id,
                "label": tf.gather(label_names, label_id),
            }

        return answer
