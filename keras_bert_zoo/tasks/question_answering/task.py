"""Extractive question answering tasks: SQuAD v1.1, SQuAD v2.0 and any SQuAD-format JSON.

Data flows as in every task (see `tasks/task.py`); the task holds the settings and
the contract, each step's work lives in the module named beside it:

```
read(split)              -> QuestionAnsweringExample list (official JSON or tfds; `reader`)
make_preprocessor(tok)   -> SquadPreprocessor: (question, context) -> windows, in TF ops
                            (`features`)
features(examples, pre)  -> one element per window: model inputs, start/end positions,
                            example_index, per-token character offsets, max-context flags
                            (`dataset`)
model                    -> BertSpanLabeler: start_logits, end_logits
postprocess              -> decode_spans (TF ops, run eagerly): n-best spans per example,
                            mapped back to the original context through the offsets
                            (`answers`, `decoding`)
evaluate                 -> the official v1.1 / v2.0 evaluation (`evaluation`, `metrics`)
write_predictions        -> predictions.json, nbest_predictions.json, null_odds.json (v2)
                            (`evaluation`, `predictions`)
serving_outputs          -> the same preprocessor, model and decoder in one graph
                            (`serving`)
```

The options (`doc_stride`, `n_best_size`, ...) are declared in `options`.

Example:

```python
from keras_bert_zoo import from_pretrained, tasks
from keras_bert_zoo.text import BertTokenizer

task = tasks.create_task("squad_v2.0", data_dir="squad")  # train-v2.0.json, dev-v2.0.json
tokenizer = BertTokenizer("uncased_L-12_H-768_A-12/vocab.txt")
preprocessor = task.make_preprocessor(tokenizer)
model = task.build_model(from_pretrained("uncased_L-12_H-768_A-12"))
model.compile(optimizer="adam", loss=task.loss())
train = task.read("train")
model.fit(tasks.training_dataset_fn(task, train, preprocessor, 32)(None), steps_per_epoch=100)
dev = task.read("dev")
answers = tasks.predict(task, model, dev, preprocessor)
print(task.evaluate(answers, dev))  # {"exact": ..., "f1": ..., "best_f1": ..., ...}
task.write_predictions(answers, dev, "out", "dev")
```
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert_zoo.models import BertSpanLabeler
from keras_bert_zoo.tasks.distillation import SOFT_POSITIONS, TRANSFER_EXAMPLE_ID, SoftTargetKind
from keras_bert_zoo.tasks.question_answering.answers import (
    SpanSettings,
    decode_windows,
    predictions_from_logits,
)
from keras_bert_zoo.tasks.question_answering.dataset import window_dataset
from keras_bert_zoo.tasks.question_answering.evaluation import (
    evaluate_answers,
    write_prediction_files,
)
from keras_bert_zoo.tasks.question_answering.features import (
    END_POSITIONS,
    START_POSITIONS,
    SquadPreprocessor,
)
from keras_bert_zoo.tasks.question_answering.options import (
    NULL_SCORE_DIFF_THRESHOLD,
    VERSION_2_WITH_NEGATIVE,
    WINDOW_AND_ANSWER_OPTIONS,
    check_options,
)
from keras_bert_zoo.tasks.question_answering.predictions import QuestionAnsweringPrediction
from keras_bert_zoo.tasks.question_answering.reader import (
    QuestionAnsweringExample,
    read_squad_json,
    read_squad_tfds,
)
from keras_bert_zoo.tasks.question_answering.serving import answer_fn
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.task import Task, TaskOption
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError

# The window and answer options moved to `options`, beside their checks (docs/api-changes.md,
# changes); the old names warn for one release.
__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.tasks.question_answering.options"],
    only=("DOC_STRIDE", "MAX_QUERY_LENGTH", "N_BEST_SIZE", "MAX_ANSWER_LENGTH"),
)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanPositionLoss(keras.losses.Loss):
    """Half the sparse cross-entropy of a start (or end) position, from logits.

    Compiled on both outputs, the two halves add up to google-research/bert's SQuAD
    loss, the mean of the start and end cross-entropies.
    """

    def __init__(self, name="span_position_loss", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        return 0.5 * keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)


class QuestionAnsweringTask(Task):
    """Extractive QA over SQuAD-format data (see the module docstring).

    Subclasses set `version_2_with_negative`, `file_template` (the file of a split
    in `data_dir`), `tfds_name` and `expected_version`.
    """

    text_fields: ClassVar[tuple[str, ...]] = ("question", "context")
    primary_metric: ClassVar[str] = "f1"
    default_max_seq_length: ClassVar[int] = 384
    label_keys: ClassVar[tuple[str, ...]] = (START_POSITIONS, END_POSITIONS)
    options: ClassVar[tuple[TaskOption, ...]] = WINDOW_AND_ANSWER_OPTIONS
    version_2_with_negative: ClassVar[bool] = False
    file_template: ClassVar[str] = "{split}.json"
    tfds_name: ClassVar[str | None] = None
    expected_version: ClassVar[str | None] = None
    tfds_splits: ClassVar[dict[str, str]] = {"train": "train", "dev": "validation"}

    def __init__(self, task_name=None, data_dir=None, **kwargs):
        super().__init__(task_name, data_dir, **kwargs)
        check_options(self.option_values, self.max_seq_length)
        self.skipped_questions: dict[str, int] = {}

    # === Options ===

    @property
    def with_null_answer(self) -> bool:
        """SQuAD v2.0 rules: unanswerable questions and the null answer."""
        return self.version_2_with_negative

    doc_stride = property(lambda self: int(self.option_values["doc_stride"]))
    max_query_length = property(lambda self: int(self.option_values["max_query_length"]))
    n_best_size = property(lambda self: int(self.option_values["n_best_size"]))
    max_answer_length = property(lambda self: int(self.option_values["max_answer_length"]))

    @property
    def null_score_diff_threshold(self) -> float:
        return float(self.option_values.get("null_score_diff_threshold", 0.0))

    @property
    def span_settings(self) -> SpanSettings:
        """How answers are read from the logits: this task's options."""
        return SpanSettings(
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            with_null_answer=self.with_null_answer,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )

    # === Data ===

    def split_names(self) -> dict[str, tuple[str, ...]]:
        # SQuAD's test sets are hidden: predictions are made for the dev set.
        return {"train": ("train",), "eval": ("dev",), "predict": ("dev",)}

    def read(self, split: str) -> list[QuestionAnsweringExample]:
        training = split == "train"
        if self.data_dir is not None:
            path = os.path.join(self.data_dir, self.file_template.format(split=split))
            examples, skipped = read_squad_json(
                path,
                version_2_with_negative=self.with_null_answer,
                training=training,
                encoding=self.encoding,
                expected_version=self.expected_version,
            )
        elif self.tfds_name is not None:
            if split not in self.tfds_splits:
                raise UserError(
                    f"{self.task_name}: split {split!r} is not in tensorflow-datasets "
                    f"{self.tfds_name} (splits: {sorted(self.tfds_splits)})"
                )
            examples, skipped = read_squad_tfds(
                self.tfds_name,
                self.tfds_splits[split],
                data_dir=self.tfds_data_dir,
                version_2_with_negative=self.with_null_answer,
                training=training,
            )
        else:
            raise UserError(f"{self.task_name} needs data_dir (a directory of SQuAD-format JSON)")
        self.skipped_questions[split] = skipped
        logging.info(
            "%s %s: %d questions (%d training questions skipped)",
            self.task_name,
            split,
            len(examples),
            skipped,
        )
        return examples

    def read_transfer_file(self, path: str) -> list[QuestionAnsweringExample]:
        """Unlabelled questions for a teacher to answer (distillation's transfer set).

        Either one question per line, `question<TAB>context`, or (a path ending in
        `.json`) a SQuAD-format JSON file read as the task's own files are, whose
        answers, if any, are dropped: the teacher gives the targets. Example `n` (from
        0) is `transfer-{n}`, without answers (`has_gold` false), as a SQuAD test
        question.

        Args:
            path: the file.

        Raises:
            FileNotFoundError: `path` does not exist.
            ValueError: naming `path:line` for a line without exactly two tab-separated
                fields or with an empty question or context; the JSON reader's errors
                for a malformed JSON file; an empty file.
        """
        if not path.lower().endswith(".json"):
            return super().read_transfer_file(path)
        # Unanswerable questions are allowed whatever the task's version: their
        # answers are dropped anyway.
        examples, _ = read_squad_json(
            path, version_2_with_negative=True, training=False, encoding=self.encoding
        )
        if not examples:
            raise UserError(f"{path}: no questions (expected the {self.task_name} transfer file)")
        return [
            dataclasses.replace(
                example,
                example_id=TRANSFER_EXAMPLE_ID.format(n),
                answers=(),
                is_impossible=False,
                plausible_answers=(),
                has_gold=False,
            )
            for n, example in enumerate(examples)
        ]

    def transfer_example(
        self, example_id: str, fields: tuple[str, ...], source: str
    ) -> QuestionAnsweringExample:
        """An unanswered `QuestionAnsweringExample` of a transfer line
        `question<TAB>context`.

        Args:
            example_id: `transfer-{n}`, unique in the file.
            fields: `(question, context)`.
            source: `"path:line"`, for the error.

        Raises:
            ValueError: naming `source`, for an empty question or context (the JSON
                reader refuses them too).
        """
        question, context = fields
        for name, text in (("question", question), ("context", context)):
            if not text.strip():
                raise UserError(f"{source}: empty {name}")
        return QuestionAnsweringExample(
            example_id=example_id, question=question, context=context, has_gold=False
        )

    # === Features ===

    def make_preprocessor(self, tokenizer) -> SquadPreprocessor:
        return SquadPreprocessor(
            tokenizer,
            max_seq_length=self.max_seq_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
        )

    def features(
        self,
        examples: Sequence[QuestionAnsweringExample],
        preprocessor,
        *,
        training: bool,
        batch_size: int = 64,
    ) -> tf.data.Dataset:
        """One element per window, in example order (`dataset.window_dataset`): the
        model inputs, the labels (when some example has gold answers) and the metadata
        decoding needs."""
        return window_dataset(
            examples,
            preprocessor,
            training=training,
            batch_size=batch_size,
            task_name=self.task_name,
        )

    def split_features(self, features: Mapping[str, tf.Tensor]):
        """Targets keyed by the model's outputs (`start_logits`, `end_logits`)."""
        x = {name: features[name] for name in self.model_input_names()}
        y = None
        if START_POSITIONS in features and END_POSITIONS in features:
            y = {"start_logits": features[START_POSITIONS], "end_logits": features[END_POSITIONS]}
        return x, y, features.get("sample_weight")

    # === Model ===

    def build_model(self, encoder) -> BertSpanLabeler:
        return BertSpanLabeler(encoder)

    def soft_targets(self) -> dict[str, SoftTargetKind]:
        """`"positions"` for each of `BertSpanLabeler`'s outputs, `start_logits` and
        `end_logits` (`[windows, seq_len]`; their padded positions are not masked in
        the logits, so the softmax must exclude them)."""
        return {"start_logits": SOFT_POSITIONS, "end_logits": SOFT_POSITIONS}

    def loss(self):
        return {
            "start_logits": SpanPositionLoss(name="start_position_loss"),
            "end_logits": SpanPositionLoss(name="end_position_loss"),
        }

    def metrics(self):
        # A dict: Keras 3 needs metrics matched to the model's two outputs.
        return {
            "start_logits": [keras.metrics.SparseCategoricalAccuracy(name="start_accuracy")],
            "end_logits": [keras.metrics.SparseCategoricalAccuracy(name="end_accuracy")],
        }

    # === Answers ===

    def decode(self, windows: Mapping[str, Any], contexts, *, null_score_diff_threshold=None):
        """`decode_spans` with this task's settings: window logits + metadata -> answers
        (`answers.decode_windows`)."""
        return decode_windows(
            windows,
            contexts,
            self.span_settings,
            null_score_diff_threshold=null_score_diff_threshold,
        )

    def postprocess(
        self,
        outputs: Mapping[str, np.ndarray],
        meta: Mapping[str, np.ndarray],
        examples: Sequence[QuestionAnsweringExample],
    ) -> list[QuestionAnsweringPrediction]:
        """Window logits -> one `QuestionAnsweringPrediction` per example, in order
        (`answers.predictions_from_logits`)."""
        return predictions_from_logits(outputs, meta, examples, self.span_settings)

    def evaluate(
        self,
        answers: Sequence[QuestionAnsweringPrediction],
        examples: Sequence[QuestionAnsweringExample],
    ) -> dict[str, float]:
        """The official evaluation of `answers` (v1.1 or v2.0, `with_null_answer`; see
        `evaluation.evaluate_answers` for how v2's best threshold is searched)."""
        return evaluate_answers(answers, examples, with_null_answer=self.with_null_answer)

    def write_predictions(
        self,
        answers: Sequence[QuestionAnsweringPrediction],
        examples: Sequence[QuestionAnsweringExample],
        output_dir: str,
        split: str,
    ) -> list[str]:
        """Writes the official files (`predictions.json`, `nbest_predictions.json`, and
        for v2 `null_odds.json`, `predictions_best_threshold.json`,
        `best_threshold.json`; see `evaluation.write_prediction_files`)."""
        return write_prediction_files(
            answers,
            examples,
            output_dir,
            split,
            with_null_answer=self.with_null_answer,
            null_score_diff_threshold=self.null_score_diff_threshold,
            task_name=self.task_name,
        )

    # === Serving ===

    def serving_outputs(self, model, preprocessor):
        """`fn(question, context)` (string `[batch]` each) -> the answers, in TF ops.

        Returns `answer_text` (string), `answer_start`, `answer_end` (int64
        character offsets into the context, -1 for no answer), `answer_score` (the
        best span's start + end logit) and, for v2, `null_score_diff` and
        `best_text` (the best non-null span); see `serving.answer_fn`.
        """
        return answer_fn(
            model,
            preprocessor,
            input_names=self.model_input_names(),
            decode=self.decode,
            with_null_answer=self.with_null_answer,
        )


@register_task("squad_v1.1")
class SquadV11Task(QuestionAnsweringTask):
    """SQuAD v1.1: `train-v1.1.json` / `dev-v1.1.json` in `data_dir`, or tfds `squad/v1.1`."""

    file_template = "{split}-v1.1.json"
    tfds_name = "squad/v1.1"
    expected_version = "1.1"


@register_task("squad_v2.0")
class SquadV20Task(QuestionAnsweringTask):
    """SQuAD v2.0: `train-v2.0.json` / `dev-v2.0.json` in `data_dir`, or tfds `squad/v2.0`."""

    primary_metric = "best_f1"
    options = QuestionAnsweringTask.options + (NULL_SCORE_DIFF_THRESHOLD,)
    version_2_with_negative = True
    file_template = "{split}-v2.0.json"
    tfds_name = "squad/v2.0"
    expected_version = "v2.0"


@register_task("extractive_qa")
class ExtractiveQATask(QuestionAnsweringTask):
    """Any SQuAD-format data: `train.json`, `dev.json` (and `test.json`) in `data_dir`.

    `version_2_with_negative=True` applies SQuAD v2.0's rules (unanswerable
    questions, the null answer, the v2.0 evaluation).
    """

    options = QuestionAnsweringTask.options + (
        NULL_SCORE_DIFF_THRESHOLD,
        VERSION_2_WITH_NEGATIVE,
    )

    def __init__(self, task_name=None, data_dir=None, **kwargs):
        super().__init__(task_name, data_dir, **kwargs)
        self.primary_metric = "best_f1" if self.with_null_answer else "f1"

    @property
    def with_null_answer(self) -> bool:
        return bool(self.option_values["version_2_with_negative"])

    def split_names(self) -> dict[str, tuple[str, ...]]:
        return {"train": ("train",), "eval": ("dev",), "predict": ("test",)}
