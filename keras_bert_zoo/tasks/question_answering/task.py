"""Extractive question answering tasks: SQuAD v1.1, SQuAD v2.0 and any SQuAD-format JSON.

Data flows as in every task (see `tasks/task.py`):

```
read(split)              -> QuestionAnsweringExample list (official JSON or tfds)
make_preprocessor(tok)   -> SquadPreprocessor: (question, context) -> windows, in TF ops
features(examples, pre)  -> one element per window: model inputs, start/end positions,
                            example_index, per-token character offsets, max-context flags
model                    -> BertSpanLabeler: start_logits, end_logits
postprocess              -> decode_spans (TF ops, run eagerly): n-best spans per example,
                            mapped back to the original context through the offsets
evaluate                 -> the official v1.1 / v2.0 evaluation
write_predictions        -> predictions.json, nbest_predictions.json, null_odds.json (v2)
serving_outputs          -> the same preprocessor, model and decoder in one graph
```

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
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_bert_zoo.models import BertSpanLabeler
from keras_bert_zoo.tasks.distillation import SOFT_POSITIONS, TRANSFER_EXAMPLE_ID, SoftTargetKind
from keras_bert_zoo.tasks.question_answering import metrics as official
from keras_bert_zoo.tasks.question_answering.decoding import decode_spans, host_decoder
from keras_bert_zoo.tasks.question_answering.features import (
    END_POSITIONS,
    EXAMPLE_INDEX,
    START_POSITIONS,
    TOKEN_CHAR_END,
    TOKEN_CHAR_START,
    TOKEN_IS_MAX_CONTEXT,
    SquadPreprocessor,
)
from keras_bert_zoo.tasks.question_answering.predictions import (
    NBestEntry,
    QuestionAnsweringPrediction,
    nbest_json,
    null_odds_json,
    prediction_file_names,
    predictions_json,
    write_json,
)
from keras_bert_zoo.tasks.question_answering.reader import (
    QuestionAnsweringExample,
    read_squad_json,
    read_squad_tfds,
)
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.task import Task, TaskOption
from keras_bert_zoo.utils.errors import UserError

DOC_STRIDE = TaskOption("doc_stride", 128, "Tokens between the starts of consecutive windows.")
MAX_QUERY_LENGTH = TaskOption(
    "max_query_length", 64, "Question word pieces kept; longer questions are truncated."
)
N_BEST_SIZE = TaskOption("n_best_size", 20, "Entries of nbest_predictions.json per question.")
MAX_ANSWER_LENGTH = TaskOption("max_answer_length", 30, "Longest answer, in word pieces.")
NULL_SCORE_DIFF_THRESHOLD = TaskOption(
    "null_score_diff_threshold",
    0.0,
    "SQuAD v2: answer '' when null_score - best_non_null_score exceeds this.",
)
VERSION_2_WITH_NEGATIVE = TaskOption(
    "version_2_with_negative",
    False,
    "extractive_qa: the data has unanswerable questions (SQuAD v2.0 rules).",
)

# preprocessor -> {with_answers: its tf.function}, traced once for all the datasets
# built from it.
_FEATURIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# Windows decoded per call in `postprocess`: bounds the [windows, seq, 30] score tensor.
_WINDOWS_PER_DECODE = 256


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
    options: ClassVar[tuple[TaskOption, ...]] = (
        DOC_STRIDE,
        MAX_QUERY_LENGTH,
        N_BEST_SIZE,
        MAX_ANSWER_LENGTH,
    )
    version_2_with_negative: ClassVar[bool] = False
    file_template: ClassVar[str] = "{split}.json"
    tfds_name: ClassVar[str | None] = None
    expected_version: ClassVar[str | None] = None
    tfds_splits: ClassVar[dict[str, str]] = {"train": "train", "dev": "validation"}

    def __init__(self, task_name=None, data_dir=None, **kwargs):
        super().__init__(task_name, data_dir, **kwargs)
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            value = self.option_values[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"Option {name} must be a positive integer, got {value!r}")
        if self.max_seq_length <= self.max_query_length + 3:
            raise UserError(
                f"max_seq_length ({self.max_seq_length}) must exceed max_query_length "
                f"({self.max_query_length}) + 3"
            )
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
        """One element per window (see `SquadPreprocessor`), in example order.

        Every window keeps its labels (windows without the answer point at [CLS], as
        in the original) and the metadata decoding needs: `example_index` (the
        example's position in `examples`), `token_char_start`, `token_char_end`,
        `token_is_max_context`. When no example has gold answers (`has_gold`: test
        questions, a transfer set) and `training` is false, the windows have no labels
        (`label_keys`): pointing every window at [CLS] would read as "no answer".

        Raises:
            ValueError: no examples, or training examples none of which has gold
                answers.
        """
        if not examples:
            raise UserError(f"{self.task_name}: no examples to featurize")
        labelled = any(example.has_gold for example in examples)
        if training and not labelled:
            raise UserError(f"{self.task_name}: the training questions have no gold answers")
        columns = {
            "question": [example.question for example in examples],
            "context": [example.context for example in examples],
            EXAMPLE_INDEX: np.arange(len(examples), dtype=np.int32),
        }
        if labelled:
            spans = np.array([example.answer_span for example in examples], np.int64)
            columns["answer_start"] = spans[:, 0]
            columns["answer_end"] = spans[:, 1]
        dataset = tf.data.Dataset.from_tensor_slices(columns)

        featurize = self._featurizer(preprocessor, with_answers=labelled)

        def to_windows(batch):
            answers = (batch["answer_start"], batch["answer_end"]) if labelled else ()
            windows = featurize(batch["question"], batch["context"], *answers)
            windows[EXAMPLE_INDEX] = tf.gather(batch[EXAMPLE_INDEX], windows[EXAMPLE_INDEX])
            return windows

        dataset = dataset.batch(batch_size).map(
            to_windows, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        )
        return dataset.unbatch()

    def _featurizer(self, preprocessor, *, with_answers: bool = True):
        """`preprocessor` as a tf.function traced once: every dataset built from it
        (training, evaluation, prediction) reuses the trace. `with_answers`: it takes
        the answers' character spans and makes the labels; without, only the texts."""
        featurizers = _FEATURIZERS.setdefault(preprocessor, {})
        featurize = featurizers.get(with_answers)
        if featurize is None:
            strings = tf.TensorSpec([None], tf.string)
            offsets = tf.TensorSpec([None], tf.int64)
            if with_answers:

                @tf.function(input_signature=[strings, strings, offsets, offsets])
                def featurize(question, context, answer_start, answer_end):
                    return preprocessor(
                        {
                            "question": question,
                            "context": context,
                            "answer_start": answer_start,
                            "answer_end": answer_end,
                        }
                    )

            else:

                @tf.function(input_signature=[strings, strings])
                def featurize(question, context):
                    return preprocessor({"question": question, "context": context})

            featurizers[with_answers] = featurize
        return featurize

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
        """`decode_spans` with this task's settings: window logits + metadata -> answers."""
        return decode_spans(
            windows["start_logits"],
            windows["end_logits"],
            windows[TOKEN_CHAR_START],
            windows[TOKEN_CHAR_END],
            windows[TOKEN_IS_MAX_CONTEXT],
            windows[EXAMPLE_INDEX],
            contexts,
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            version_2_with_negative=self.with_null_answer,
            null_score_diff_threshold=(
                self.null_score_diff_threshold
                if null_score_diff_threshold is None
                else null_score_diff_threshold
            ),
        )

    def postprocess(
        self,
        outputs: Mapping[str, np.ndarray],
        meta: Mapping[str, np.ndarray],
        examples: Sequence[QuestionAnsweringExample],
    ) -> list[QuestionAnsweringPrediction]:
        """Window logits -> one `QuestionAnsweringPrediction` per example, in order."""
        example_index = np.asarray(meta[EXAMPLE_INDEX]).astype(np.int64)
        num_windows = len(example_index)
        if num_windows == 0 or np.any(np.diff(example_index) < 0):
            raise UserError("meta['example_index'] must be non-empty and non-decreasing")
        firsts = np.searchsorted(example_index, np.arange(len(examples) + 1))
        if not np.array_equal(np.unique(example_index), np.arange(len(examples))):
            raise UserError(
                f"meta['example_index'] covers {len(np.unique(example_index))} examples in "
                f"[{example_index.min()}, {example_index.max()}], but {len(examples)} examples "
                "were given: features and examples are out of sync"
            )
        start_logits = np.asarray(outputs["start_logits"], np.float32)
        end_logits = np.asarray(outputs["end_logits"], np.float32)
        if start_logits.shape[0] != num_windows or end_logits.shape != start_logits.shape:
            raise UserError(
                f"outputs have {start_logits.shape} start and {end_logits.shape} end logits "
                f"for {num_windows} windows"
            )
        decoder = host_decoder(self.n_best_size, self.max_answer_length, self.with_null_answer)
        threshold = tf.constant(self.null_score_diff_threshold, tf.float64)
        predictions: list[QuestionAnsweringPrediction] = []
        first_example = 0
        while first_example < len(examples):
            last_example = first_example + 1
            # Whole examples per call, up to _WINDOWS_PER_DECODE windows (at least one).
            while (
                last_example < len(examples)
                and firsts[last_example + 1] - firsts[first_example] <= _WINDOWS_PER_DECODE
            ):
                last_example += 1
            lo, hi = firsts[first_example], firsts[last_example]
            decoded = decoder(
                start_logits[lo:hi],
                end_logits[lo:hi],
                np.asarray(meta[TOKEN_CHAR_START][lo:hi], np.int32),
                np.asarray(meta[TOKEN_CHAR_END][lo:hi], np.int32),
                np.asarray(meta[TOKEN_IS_MAX_CONTEXT][lo:hi], np.int32),
                (example_index[lo:hi] - first_example).astype(np.int32),
                tf.constant([e.context for e in examples[first_example:last_example]]),
                threshold,
            )
            decoded = {key: value.numpy() for key, value in decoded.items()}
            for row, example in enumerate(examples[first_example:last_example]):
                predictions.append(self._prediction(example, decoded, row))
            first_example = last_example
        return predictions

    def _prediction(self, example, decoded, row) -> QuestionAnsweringPrediction:
        def text(value) -> str:
            return value.decode("utf-8")

        nbest = tuple(
            NBestEntry(
                text=text(decoded["nbest_text"][row, k]),
                probability=float(decoded["nbest_probability"][row, k]),
                start_logit=float(decoded["nbest_start_logit"][row, k]),
                end_logit=float(decoded["nbest_end_logit"][row, k]),
                start=int(decoded["nbest_start"][row, k]),
                end=int(decoded["nbest_end"][row, k]),
            )
            for k in range(int(decoded["nbest_size"][row]))
        )
        return QuestionAnsweringPrediction(
            example_id=example.example_id,
            text=text(decoded["answer_text"][row]),
            start=int(decoded["answer_start"][row]),
            end=int(decoded["answer_end"][row]),
            best_text=text(decoded["best_text"][row]),
            best_start=int(decoded["best_start"][row]),
            best_end=int(decoded["best_end"][row]),
            best_score=float(decoded["best_score"][row]),
            null_score_diff=(
                float(decoded["null_score_diff"][row]) if self.with_null_answer else None
            ),
            nbest=nbest,
        )

    @staticmethod
    def _check_aligned(answers, examples) -> None:
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        for answer, example in zip(answers, examples, strict=True):
            if answer.example_id != example.example_id:
                raise UserError(
                    f"answer for {answer.example_id!r} where example {example.example_id!r} "
                    "was expected: answers must follow the examples' order"
                )

    def evaluate(
        self,
        answers: Sequence[QuestionAnsweringPrediction],
        examples: Sequence[QuestionAnsweringExample],
    ) -> dict[str, float]:
        """The official evaluation of `answers`.

        v1.1: `evaluate-v1.1.py` (`exact_match`, `f1`). v2.0: `evaluate-v2.0.py` with
        `--na-prob-file null_odds.json` on `predictions.json` (made with
        `null_score_diff_threshold`), except that `best_*` sweep the threshold over
        the best non-null answers (`best_text`), so every threshold is searched: the
        script run on already-thresholded predictions cannot see what a threshold
        above the one used would gain (those answers are already ""). When the best
        threshold lies below the flag's value (the usual case at the default 0.0),
        both agree.
        """
        self._check_aligned(answers, examples)
        unlabelled = [e.example_id for e in examples if not e.has_gold]
        if unlabelled:
            raise UserError(
                f"{len(unlabelled)} question(s) have no gold answers (e.g. {unlabelled[:3]}): "
                "nothing to evaluate against"
            )
        predictions = predictions_json(answers)
        if not self.with_null_answer:
            gold = {e.example_id: e.gold_texts for e in examples}
            return official.evaluate_v1(gold, predictions)
        gold = {e.example_id: [] if e.is_impossible else e.gold_texts for e in examples}
        return official.evaluate_v2(
            gold,
            predictions,
            na_probs=null_odds_json(answers),
            threshold_predictions={a.example_id: a.best_text for a in answers},
        )

    def write_predictions(
        self,
        answers: Sequence[QuestionAnsweringPrediction],
        examples: Sequence[QuestionAnsweringExample],
        output_dir: str,
        split: str,
    ) -> list[str]:
        """Writes the official files (`predictions.json`, `nbest_predictions.json`, and
        for v2 `null_odds.json`; prefixed with the split unless it is "dev").

        For v2 on labelled data it also finds the best threshold (`best_f1_thresh`,
        see `evaluate`) and writes the predictions made with it,
        `predictions_best_threshold.json`, and `best_threshold.json` (the thresholds,
        the scores they reach, and the flag's value that `predictions.json` used).
        """
        self._check_aligned(answers, examples)
        names = prediction_file_names(split)
        paths = [
            write_json(os.path.join(output_dir, names["predictions"]), predictions_json(answers)),
            write_json(os.path.join(output_dir, names["nbest"]), nbest_json(answers)),
        ]
        if self.with_null_answer:
            paths.append(
                write_json(os.path.join(output_dir, names["null_odds"]), null_odds_json(answers))
            )
            if all(example.has_gold for example in examples):
                scores = self.evaluate(answers, examples)
                threshold = scores["best_f1_thresh"]
                best = [answer.with_null_threshold(threshold) for answer in answers]
                paths.append(
                    write_json(
                        os.path.join(output_dir, names["best_threshold_predictions"]),
                        predictions_json(best),
                    )
                )
                summary = {
                    key: scores[key]
                    for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")
                }
                summary["null_score_diff_threshold"] = self.null_score_diff_threshold
                summary["f1"] = scores["f1"]
                summary["exact"] = scores["exact"]
                paths.append(write_json(os.path.join(output_dir, names["best_threshold"]), summary))
                logging.info(
                    "%s %s: best_f1 %.3f at null_score_diff_threshold %.4f (f1 %.3f at %.4f)",
                    self.task_name,
                    split,
                    scores["best_f1"],
                    threshold,
                    scores["f1"],
                    self.null_score_diff_threshold,
                )
        return paths

    # === Serving ===

    def serving_outputs(self, model, preprocessor):
        """`fn(question, context)` (string `[batch]` each) -> the answers, in TF ops.

        Returns `answer_text` (string), `answer_start`, `answer_end` (int64
        character offsets into the context, -1 for no answer), `answer_score` (the
        best span's start + end logit) and, for v2, `null_score_diff` and
        `best_text` (the best non-null span).
        """

        def serve(question, context):
            windows = preprocessor({"question": question, "context": context})
            logits = model(
                {name: windows[name] for name in self.model_input_names()}, training=False
            )
            decoded = self.decode({**windows, **logits}, context)
            outputs = {
                "answer_text": decoded["answer_text"],
                "answer_start": decoded["answer_start"],
                "answer_end": decoded["answer_end"],
                "answer_score": decoded["best_score"],
            }
            if self.with_null_answer:
                outputs["null_score_diff"] = decoded["null_score_diff"]
                outputs["best_text"] = decoded["best_text"]
            return outputs

        return serve


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
