"""Multiple choice: SWAG (`swag`) and any JSON-lines choice data (`multiple_choice`).

Each example has a context and N candidate choices; each candidate is packed with the
context as a pair `[CLS] context [SEP] choice [SEP]` (BERT's SWAG setup: sentence A
is the context, sentence B a possible continuation), `BertMultipleChoice` scores the
N pairs and a softmax across them picks one. Metric: accuracy.

SWAG: context = `sent1`, choice i = `sent2 + " " + ending_i` (`startphrase` is
`sent1 + " " + sent2`). The join happens inside `MultipleChoicePreprocessor`, so the
exported model can take the raw SWAG fields.

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

task = tasks.create_task("swag", data_dir="swagaf/data")  # train.csv, val.csv, test.csv
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
import functools
import json
import logging
import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks.base import Task, register_task
from keras_bert_zoo.tasks.tagging import (
    _as_text,
    _find_split_file,
    _named_texts,
    _prepared_tfds_builder,
)
from keras_bert_zoo.text.preprocessor import BertPreprocessor
from keras_bert_zoo.utils.atomic import atomic_open

FEATURE_BATCH_SIZE = 64  # examples tokenized per preprocessor call
SWAG_NUM_CHOICES = 4

# === Preprocessing (a Keras layer: training, evaluation and the exported model) ===


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MultipleChoicePreprocessor(keras.layers.Layer):
    """Context and N choices -> N packed pairs per example.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        num_choices: int. Choices per example.
        sequence_length: int. Packed length of each pair, special tokens included.
        truncate: str. How a pair too long is cut (see `BertPacker`); the default
            drops tokens from the end of the longer segment, as BERT's
            `_truncate_seq_pair`.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        context: string tensor `[batch]`.
        choices: string tensor `[batch, num_choices]`.
        choice_prefix: optional string tensor `[batch]`, joined before every choice
            with a space when not empty (SWAG's `sent2`).

    Returns:
        dict of int32 `[batch, num_choices, sequence_length]` tensors
        `input_word_ids`, `input_mask`, `input_type_ids`.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks.multiple_choice import MultipleChoicePreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "she", "runs", "sits", "."]
    layer = MultipleChoicePreprocessor(BertTokenizer(vocab), num_choices=2, sequence_length=6)
    out = layer(tf.constant(["She"]), tf.constant([["runs.", "sits."]]))
    out["input_word_ids"].numpy()  # [[[2, 5, 3, 6, 8, 3], [2, 5, 3, 7, 8, 3]]]
    ```
    """

    def __init__(
        self,
        tokenizer,
        num_choices: int = SWAG_NUM_CHOICES,
        sequence_length: int = 128,
        truncate: str = "longest_first",
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if isinstance(tokenizer, dict):  # from a serialized config
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if int(num_choices) < 1:
            raise ValueError(f"num_choices must be >= 1, got {num_choices}")
        self.tokenizer = tokenizer
        self.num_choices = int(num_choices)
        self.pair_preprocessor = BertPreprocessor(
            tokenizer, sequence_length=sequence_length, truncate=truncate
        )
        # No weights: nothing for build() to create.
        self.built = True

    @property
    def sequence_length(self) -> int:
        return self.pair_preprocessor.sequence_length

    # === Layers ===

    def call(self, context, choices, choice_prefix=None):
        context = tf.convert_to_tensor(context)
        choices = tf.convert_to_tensor(choices)
        if choices.shape.rank != 2:
            raise ValueError(f"choices must be [batch, num_choices], got shape {choices.shape}")
        if choices.shape[1] is not None and choices.shape[1] != self.num_choices:
            raise ValueError(
                f"choices has {choices.shape[1]} columns, the layer takes {self.num_choices}"
            )
        if choice_prefix is not None:
            prefix = tf.repeat(
                tf.convert_to_tensor(choice_prefix)[:, tf.newaxis], self.num_choices, 1
            )
            joined = tf.strings.join([prefix, choices], separator=" ")
            choices = tf.where(tf.equal(prefix, ""), choices, joined)
        packed = self.pair_preprocessor(
            (tf.repeat(context, self.num_choices), tf.reshape(choices, [-1]))
        )
        shape = [-1, self.num_choices, self.sequence_length]
        return {name: tf.reshape(value, shape) for name, value in packed.items()}

    def compute_output_spec(self, context, choices, choice_prefix=None):
        spec = keras.KerasTensor([None, self.num_choices, self.sequence_length], dtype="int32")
        return {"input_word_ids": spec, "input_mask": spec, "input_type_ids": spec}

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "num_choices": self.num_choices,
                "sequence_length": self.sequence_length,
                "truncate": self.pair_preprocessor.packer.truncate,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)


# === Examples and answers ===


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
    """One question with its candidate choices.

    Attributes:
        example_id: SWAG's `fold-ind`, the JSON record's `id`, or `{split}-{index}`.
        context: sentence A of every pair.
        choices: the candidates (sentence B without `choice_prefix`).
        label: the index of the right choice, or None when unlabelled.
        choice_prefix: text joined before every choice with a space (SWAG's `sent2`).
        source: `"path:line"` of the record.
    """

    example_id: str
    context: str
    choices: tuple[str, ...]
    label: int | None
    choice_prefix: str = ""
    source: str = ""


@dataclasses.dataclass(frozen=True)
class ChoiceAnswer:
    """The predicted choice index and the softmax probability of every choice."""

    label: int
    scores: tuple[float, ...]


# === Readers ===

SWAG_ENDINGS = tuple(f"ending{i}" for i in range(SWAG_NUM_CHOICES))


def read_swag_csv(path: str, split: str, encoding: str = "utf-8") -> list[MultipleChoiceExample]:
    """Examples of an official SWAG CSV (`train.csv`, `val.csv`, `test.csv`).

    Columns (by header name, any order; the leading unnamed index is ignored):
    `video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0..ending3,
    label`; the test file has no `label`.

    Raises:
        ValueError: naming the file and line, for a missing column, a missing or
            empty ending, or a label that is not 0-3.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    examples = []
    with open(path, encoding=encoding, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [name for name in ("sent1", "sent2", *SWAG_ENDINGS) if name not in header]
        if missing:
            raise ValueError(f"{path}:1: SWAG header lacks {missing}; header is {header}")
        labelled = "label" in header
        for row in reader:
            line = reader.line_num
            where = f"{path}:{line}"
            for name in ("sent1", *SWAG_ENDINGS):
                if row.get(name) is None or not row[name].strip():
                    raise ValueError(f"{where}: {name} is missing or empty")
            if row.get("sent2") is None:
                raise ValueError(f"{where}: sent2 is missing")
            label = None
            if labelled:
                label = _parse_label(row.get("label"), SWAG_NUM_CHOICES, where)
            example_id = (row.get("fold-ind") or "").strip() or str(len(examples))
            examples.append(
                MultipleChoiceExample(
                    example_id=example_id,
                    context=row["sent1"],
                    choices=tuple(row[name] for name in SWAG_ENDINGS),
                    label=label,
                    choice_prefix=row["sent2"],
                    source=where,
                )
            )
    return examples


def _parse_label(value, num_choices: int, where: str) -> int:
    if isinstance(value, bool):
        value = None
    try:
        label = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: label {value!r} is not a choice index 0-{num_choices - 1}"
        ) from None
    if not 0 <= label < num_choices:
        raise ValueError(f"{where}: label {label} is outside 0-{num_choices - 1}")
    return label


def read_choice_jsonl(
    path: str, split: str, num_choices: int | None = None, encoding: str = "utf-8"
) -> list[MultipleChoiceExample]:
    """Examples of a JSON-lines file: `{"context": str, "choices": [str, ...], "label":
    int, "id": optional}` per line (`label` absent in every line of an unlabelled file).

    Args:
        num_choices: choices every record must have; None takes the first record's.

    Raises:
        ValueError: naming the file and line, for invalid JSON, a missing field, a
            wrong number of choices, an empty choice, a label outside 0..N-1, or a
            label on some lines only.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    examples = []
    labelled = None
    with open(path, encoding=encoding) as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: invalid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            context = record.get("context")
            if not isinstance(context, str):
                raise ValueError(f"{where}: 'context' must be a string, got {context!r}")
            choices = record.get("choices")
            if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
                raise ValueError(f"{where}: 'choices' must be a list of strings")
            if num_choices is None:
                num_choices = len(choices)
                if num_choices < 2:
                    raise ValueError(f"{where}: {num_choices} choice(s); need at least 2")
            if len(choices) != num_choices:
                raise ValueError(
                    f"{where}: {len(choices)} choices where the data have {num_choices}"
                )
            for index, choice in enumerate(choices):
                if not choice.strip():
                    raise ValueError(f"{where}: choice {index} is empty")
            has_label = record.get("label") is not None
            if labelled is None:
                labelled = has_label
            elif has_label != labelled:
                raise ValueError(
                    f"{where}: 'label' is {'present' if has_label else 'missing'} here but "
                    f"{'present' if labelled else 'missing'} on the file's first record"
                )
            label = _parse_label(record["label"], num_choices, where) if has_label else None
            example_id = record.get("id")
            examples.append(
                MultipleChoiceExample(
                    example_id=f"{split}-{len(examples)}"
                    if example_id is None
                    else str(example_id),
                    context=context,
                    choices=tuple(choices),
                    label=label,
                    source=where,
                )
            )
    return examples


# === Tasks ===


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
        if self.data_dir is None:
            raise ValueError(f"{self.task_name}: data_dir with the data files is required")
        if split not in self.split_files:
            raise ValueError(
                f"{self.task_name}: unknown split {split!r}; splits: {sorted(self.split_files)}"
            )
        return _find_split_file(self.data_dir, self.split_files[split], split)

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
            raise ValueError(
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
                raise ValueError(f"{example.source}: {len(example.choices)} choices, expected {n}")
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
        dataset = tf.data.Dataset.from_tensor_slices(columns).batch(FEATURE_BATCH_SIZE)
        dataset = dataset.map(
            functools.partial(_choice_features, preprocessor=preprocessor),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return dataset.unbatch()

    # === Model ===

    def build_model(self, encoder):
        from keras_bert_zoo.models import BertMultipleChoice

        return BertMultipleChoice(encoder, num_choices=self.num_choices)

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
            raise ValueError(f"{len(answers)} answers for {len(examples)} examples")
        if not examples:
            raise ValueError("No examples to evaluate")
        unlabelled = [example.source for example in examples if example.label is None]
        if unlabelled:
            raise ValueError(f"Cannot evaluate unlabelled examples (first: {unlabelled[0]})")
        right = sum(a.label == e.label for a, e in zip(answers, examples, strict=True))
        return {"accuracy": right / len(examples)}

    def write_predictions(self, answers, examples, output_dir: str, split: str) -> list[str]:
        """Writes `predictions_{split}.csv` (`id,label,scores`; see the module docstring)."""
        if len(answers) != len(examples):
            raise ValueError(f"{len(answers)} answers for {len(examples)} examples")
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
            raise ValueError(
                f"{self.task_name} takes {len(self.text_fields)} texts per example "
                f"({', '.join(self.text_fields)}); item {index} has {len(item)}"
            )
        return item

    def examples_from_texts(self, texts, split: str = "input") -> list[MultipleChoiceExample]:
        """Unlabelled examples from `(context, ending0, ..., ending{N-1})` tuples."""
        examples = []
        for index, item in enumerate(texts):
            item = self._check_item(item, index)
            examples.append(
                MultipleChoiceExample(
                    example_id=f"{split}-{index}",
                    context=item[0],
                    choices=tuple(item[1:]),
                    label=None,
                    source=f"{split} item {index}",
                )
            )
        return examples

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
            raise ValueError(
                f"{self.task_name}: the saved num_choices {num_choices!r} is not a positive integer"
            )
        known = self._known_num_choices()
        if known is not None and known != num_choices:
            raise ValueError(
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
            texts = [tf.convert_to_tensor(text) for text in _named_texts(text_fields, args, kwargs)]
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


@register_task("swag")
class SwagTask(MultipleChoiceTask):
    """SWAG (`swag`): 4-way grounded commonsense inference.

    Reads the official CSVs `train.csv`, `val.csv` (split `dev`) and `test.csv`
    (unlabelled) from `data_dir`, or, without `data_dir`, a tensorflow-datasets `swag`
    prepared in `tfds_data_dir` (features `sent1`, `sent2`, `ending0..3`, `label`;
    splits `train`, `validation`, `test`; label -1 marks unlabelled records).
    """

    text_fields = ("sent1", "sent2", *SWAG_ENDINGS)
    split_files = {
        "train": ("train.csv",),
        "dev": ("val.csv", "dev.csv"),
        "test": ("test.csv",),
    }
    tfds_splits = {"train": ("train",), "dev": ("validation", "val", "dev"), "test": ("test",)}

    @property
    def num_choices(self) -> int:
        return SWAG_NUM_CHOICES

    def read(self, split: str) -> list[MultipleChoiceExample]:
        if split not in self._examples_cache:
            if self.data_dir is not None:
                examples = read_swag_csv(self.split_path(split), split, encoding=self.encoding)
            else:
                examples = self._read_tfds(split)
            self._examples_cache[split] = examples
        return list(self._examples_cache[split])

    def _known_num_choices(self) -> int | None:
        return SWAG_NUM_CHOICES

    def _serving_segments(self, texts):
        sent1, sent2, *endings = texts
        return sent1, tf.stack(endings, axis=1), sent2

    def examples_from_texts(self, texts, split: str = "input") -> list[MultipleChoiceExample]:
        """Unlabelled examples from `(sent1, sent2, ending0, ..., ending3)` tuples."""
        examples = []
        for index, item in enumerate(texts):
            item = self._check_item(item, index)
            examples.append(
                MultipleChoiceExample(
                    example_id=f"{split}-{index}",
                    context=item[0],
                    choices=tuple(item[2:]),
                    label=None,
                    choice_prefix=item[1],
                    source=f"{split} item {index}",
                )
            )
        return examples

    def _read_tfds(self, split: str) -> list[MultipleChoiceExample]:
        from keras_bert_zoo.data import tfds_dataset

        if split not in self.tfds_splits:
            raise ValueError(f"swag: unknown split {split!r}; splits: {sorted(self.tfds_splits)}")
        builder = _prepared_tfds_builder("swag", self.tfds_data_dir)
        available = set(builder.info.splits.keys())
        names = [name for name in self.tfds_splits[split] if name in available]
        if not names:
            raise ValueError(
                f"tensorflow-datasets swag has no split for {split!r} "
                f"(looked for {self.tfds_splits[split]}, found {sorted(available)})"
            )
        features = set(builder.info.features.keys())
        missing = [name for name in ("sent1", "sent2", *SWAG_ENDINGS) if name not in features]
        if missing:
            raise ValueError(f"tensorflow-datasets swag lacks features {missing}")
        id_feature = next((n for n in ("fold-ind", "fold_ind") if n in features), None)
        examples = []
        for index, record in enumerate(tfds_dataset(builder, names[0]).as_numpy_iterator()):
            where = f"tfds swag {names[0]}[{index}]"
            endings = tuple(_as_text(record[name]) for name in SWAG_ENDINGS)
            for name, ending in zip(SWAG_ENDINGS, endings, strict=True):
                if not ending.strip():
                    raise ValueError(f"{where}: {name} is empty")
            label = int(record["label"]) if "label" in record else -1
            examples.append(
                MultipleChoiceExample(
                    example_id=_as_text(record[id_feature]) if id_feature else str(index),
                    context=_as_text(record["sent1"]),
                    choices=endings,
                    label=None if label < 0 else _parse_label(label, SWAG_NUM_CHOICES, where),
                    choice_prefix=_as_text(record["sent2"]),
                    source=where,
                )
            )
        logging.info("Read %d examples of tfds swag %s", len(examples), names[0])
        return examples
