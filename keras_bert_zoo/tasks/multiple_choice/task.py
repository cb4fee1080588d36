"""Multiple choice over JSON lines (`multiple_choice`), and the base of `swag`.

`BertMultipleChoice` scores the N (context, choice) pairs of an example and a softmax
across them picks one. Metric: accuracy.

State (saved with a fine-tuned model): `{"num_choices": N}`, read from the data
(`multiple_choice`: the first record; `swag`: always 4, checked on load).

Serving (`serving_outputs`, the exported model) takes the raw texts as training
packs them, each a string `[batch]`:
- `multiple_choice`: `context`, `ending0`, ..., `ending{N-1}`;
- `swag`: `sent1`, `sent2`, `ending0`, ..., `ending3`: SWAG's own fields, so the
  model joins `sent2 + " " + ending_i` exactly as in training (an empty `sent2`
  leaves the ending alone).
Outputs: `scores` (float32 `[batch, N]`, the softmax over the choices) and `label`
(int32 `[batch]`, the best choice, ties to the lowest index), what `postprocess`
answers. Pairs too long for `max_seq_length` are truncated as in training (the
longer segment loses tokens from its end).

Predictions: `predictions_{split}.csv` with header `id,label,scores`, one row per
example in input order: `id` (SWAG: the row's `fold-ind`; JSON lines: the record's
`id`, else `{split}-{index}`), `label` the predicted choice index (0-based; ties go to
the lowest index) and `scores` the softmax probability of each choice in choice
order, space-separated with 6 decimals.

Example:

```python
from keras_bert_zoo import tasks

task = tasks.create_task("multiple_choice", data_dir="choices/")  # train.jsonl, dev.jsonl
examples = task.read("dev")
preprocessor = task.make_preprocessor(tokenizer)
model = task.build_model(encoder)
answers = tasks.predict(task, model, examples, preprocessor)
print(task.evaluate(answers, examples))  # {"accuracy": ...}
```
"""

from __future__ import annotations

import csv
import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks._shared import features_in_batches, named_texts, split_file_path
from keras_bert_zoo.tasks.distillation import SOFT_CLASSES, SoftTargetKind
from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_zoo.tasks.multiple_choice.reader import MultipleChoiceExample, read_choice_jsonl
from keras_bert_zoo.tasks.registry import register_task
from keras_bert_zoo.tasks.task import Task
from keras_bert_zoo.utils.atomic import atomic_open
from keras_bert_zoo.utils.errors import UserError

FEATURE_BATCH_SIZE = 64  # examples tokenized per preprocessor call


@dataclasses.dataclass(frozen=True)
class ChoiceAnswer:
    """The predicted choice index and the softmax probability of every choice."""

    label: int
    scores: tuple[float, ...]


@register_task("multiple_choice")
class MultipleChoiceTask(Task):
    """Multiple choice over JSON lines (`multiple_choice`).

    Files in `data_dir`: `train.jsonl`, `dev.jsonl` (or `valid.jsonl`,
    `validation.jsonl`), `test.jsonl`; one record per line, `{"context": ...,
    "choices": [...], "label": i, "id": ...}`. Every record of every file has the same
    number of choices N, read from the first record of the first file found (train,
    dev, test).
    """

    primary_metric = "accuracy"
    higher_is_better = True
    label_keys = ("label",)
    default_max_seq_length = 128
    options = ()
    split_files = {
        "train": ("train.jsonl",),
        "dev": ("dev.jsonl", "valid.jsonl", "validation.jsonl"),
        "test": ("test.jsonl",),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._num_choices: int | None = None
        self._examples_cache: dict[str, list[MultipleChoiceExample]] = {}

    @property
    def text_fields(self) -> tuple[str, ...]:
        """`("context", "ending0", ..., "ending{N-1}")`: the serving inputs."""
        return ("context", *(f"ending{index}" for index in range(self.num_choices)))

    # === Data ===

    def split_path(self, split: str) -> str:
        return split_file_path(self, split, "data files")

    @property
    def num_choices(self) -> int:
        if self._num_choices is None:
            for split in self.split_files:
                try:
                    path = self.split_path(split)
                except FileNotFoundError:
                    continue
                examples = read_choice_jsonl(path, split, encoding=self.encoding)
                if examples:
                    self._num_choices = len(examples[0].choices)
                    self._examples_cache[split] = examples
                    break
            else:
                raise FileNotFoundError(
                    f"{self.task_name}: no data file with a record in {self.data_dir} to "
                    f"take the number of choices from ({self.split_files})"
                )
        return self._num_choices

    def read(self, split: str) -> list[MultipleChoiceExample]:
        if split not in self._examples_cache:
            self._examples_cache[split] = read_choice_jsonl(
                self.split_path(split), split, self.num_choices, encoding=self.encoding
            )
        examples = self._examples_cache[split]
        if examples and len(examples[0].choices) != self.num_choices:
            raise UserError(
                f"{examples[0].source}: {len(examples[0].choices)} choices where the "
                f"task has {self.num_choices}"
            )
        return list(examples)

    # === Features ===

    def make_preprocessor(self, tokenizer) -> MultipleChoicePreprocessor:
        return MultipleChoicePreprocessor(
            tokenizer, num_choices=self.num_choices, sequence_length=self.max_seq_length
        )

    def features(self, examples, preprocessor, *, training: bool) -> tf.data.Dataset:
        n = self.num_choices
        for example in examples:
            if len(example.choices) != n:
                raise UserError(f"{example.source}: {len(example.choices)} choices, expected {n}")
        columns = {
            "context": tf.constant([e.context for e in examples], tf.string, [len(examples)]),
            "choice_prefix": tf.constant(
                [e.choice_prefix for e in examples], tf.string, [len(examples)]
            ),
            "choices": tf.constant(
                [list(e.choices) for e in examples], tf.string, [len(examples), n]
            ),
            "example_index": tf.range(len(examples), dtype=tf.int32),
        }
        if examples and all(example.label is not None for example in examples):
            columns["label"] = tf.constant([e.label for e in examples], tf.int32)
        return features_in_batches(columns, _choice_features, preprocessor, FEATURE_BATCH_SIZE)

    # === Model ===

    def build_model(self, encoder):
        from keras_bert_zoo.models import BertMultipleChoice

        return BertMultipleChoice(encoder, num_choices=self.num_choices)

    def soft_targets(self) -> SoftTargetKind:
        """`"classes"`: `BertMultipleChoice`'s `[batch, num_choices]` logits, a softmax
        over the choices."""
        return SOFT_CLASSES

    def loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    # === Answers ===

    def postprocess(self, outputs, meta, examples) -> list[ChoiceAnswer]:
        logits = np.asarray(outputs, np.float64)
        example_index = np.asarray(meta["example_index"])
        if logits.shape[0] != len(examples) or sorted(example_index.tolist()) != list(
            range(len(examples))
        ):
            raise RuntimeError(
                f"{self.task_name}: {logits.shape[0]} outputs do not match {len(examples)} examples"
            )
        ordered = np.empty_like(logits)
        ordered[example_index] = logits
        shifted = ordered - ordered.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        return [
            ChoiceAnswer(label=int(np.argmax(row)), scores=tuple(float(p) for p in probs))
            for row, probs in zip(ordered, probabilities, strict=True)
        ]

    def evaluate(self, answers, examples) -> dict[str, float]:
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        if not examples:
            raise UserError("No examples to evaluate")
        unlabelled = [example.source for example in examples if example.label is None]
        if unlabelled:
            raise UserError(f"Cannot evaluate unlabelled examples (first: {unlabelled[0]})")
        right = sum(a.label == e.label for a, e in zip(answers, examples, strict=True))
        return {"accuracy": right / len(examples)}

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions_{split}.csv` (`id,label,scores`; see the module docstring)."""
        if len(answers) != len(examples):
            raise UserError(f"{len(answers)} answers for {len(examples)} examples")
        path = os.path.join(output_dir, f"predictions_{split}.csv")
        with atomic_open(path, encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["id", "label", "scores"])
            for example, answer in zip(examples, answers, strict=True):
                scores = " ".join(f"{score:.6f}" for score in answer.scores)
                writer.writerow([example.example_id, answer.label, scores])
        return [path]

    # === Raw text ===

    def _check_item(self, item, index: int) -> tuple:
        item = tuple(item)
        if len(item) != len(self.text_fields):
            raise UserError(
                f"{self.task_name} takes {len(self.text_fields)} texts per example "
                f"({', '.join(self.text_fields)}); item {index} has {len(item)}"
            )
        return item

    def _item_fields(self, item: tuple) -> dict:
        """The `MultipleChoiceExample` fields of one `text_fields` tuple."""
        return {"context": item[0], "choices": tuple(item[1:])}

    def examples_from_texts(self, texts, split: str = "input") -> list[MultipleChoiceExample]:
        """Unlabelled examples from `text_fields` tuples (here `(context, ending0, ...,
        ending{N-1})`)."""
        return [
            MultipleChoiceExample(
                example_id=f"{split}-{index}",
                label=None,
                source=f"{split} item {index}",
                **self._item_fields(self._check_item(item, index)),
            )
            for index, item in enumerate(texts)
        ]

    def transfer_example(
        self, example_id: str, fields: tuple[str, ...], source: str
    ) -> MultipleChoiceExample:
        """An unlabelled `MultipleChoiceExample` of a transfer line: the `text_fields`
        separated by tabs (`multiple_choice`: `context`, `ending0`, ...; `swag`:
        `sent1`, `sent2`, `ending0`, ..., `ending3`, an empty `sent2` allowed).

        Args:
            example_id: `transfer-{n}`.
            fields: the texts, in `text_fields` order.
            source: `"path:line"`, for the error.

        Raises:
            ValueError: naming `source` and the field, for an empty choice (the data
                files' readers refuse them too).
        """
        item = self._item_fields(tuple(fields))
        for index, choice in enumerate(item["choices"]):
            if not choice.strip():
                raise UserError(f"{source}: ending{index} is empty")
        return MultipleChoiceExample(example_id=example_id, label=None, source=source, **item)

    # === State ===

    def _known_num_choices(self) -> int | None:
        """The number of choices without reading any data (None if not yet known)."""
        return self._num_choices

    def state(self) -> dict:
        """`{"num_choices": N}`: the head's width, read from the data."""
        return {"num_choices": self.num_choices}

    def load_state(self, state) -> None:
        state = dict(state)
        if not state:
            return
        num_choices = state.get("num_choices")
        if isinstance(num_choices, bool) or not isinstance(num_choices, int) or num_choices < 1:
            raise UserError(
                f"{self.task_name}: the saved num_choices {num_choices!r} is not a positive integer"
            )
        known = self._known_num_choices()
        if known is not None and known != num_choices:
            raise UserError(
                f"{self.task_name}: the saved model takes {num_choices} choices, this task "
                f"{known} (a model fine-tuned on other data?)"
            )
        self._num_choices = num_choices

    # === Serving ===

    def _serving_segments(self, texts):
        """(context `[batch]`, choices `[batch, N]`, choice prefix or None)."""
        context, *endings = texts
        return context, tf.stack(endings, axis=1), None

    def serving_outputs(self, model, preprocessor):
        """`fn(*texts)`: string tensors `[batch]` named `text_fields` -> `scores` (float32
        `[batch, N]`, the softmax over the choices) and `label` (int32 `[batch]`, the
        best choice, ties to the lowest index): what `postprocess` answers."""
        text_fields = self.text_fields

        def serve(*args, **kwargs):
            texts = [tf.convert_to_tensor(text) for text in named_texts(text_fields, args, kwargs)]
            context, choices, prefix = self._serving_segments(texts)
            logits = tf.cast(
                model(preprocessor(context, choices, prefix), training=False), tf.float32
            )
            return {
                "scores": tf.nn.softmax(logits, axis=-1),
                "label": tf.argmax(logits, axis=-1, output_type=tf.int32),
            }

        return serve


def _choice_features(batch, preprocessor):
    features = dict(preprocessor(batch["context"], batch["choices"], batch["choice_prefix"]))
    features["example_index"] = batch["example_index"]
    if "label" in batch:
        features["label"] = batch["label"]
    return features
