"""The task contract: one shape for every fine-tuning task.

A task is the only place that knows its data set and its answers: the file layout it
reads, how its texts are packed, its head, loss and metric, how raw model outputs
become answers and how answers are written in the benchmark's official format. The
binaries (`tools/run_finetuning.py`, `tools/export_saved_model.py`) and the training
loop loop over this contract and know no task by name.

Data flows one way:

```
task.read(split)                          -> examples (plain Python records with `example_id`)
task.make_preprocessor(tokenizer)         -> the Keras layer that packs raw text (also served)
task.features(examples, preprocessor)     -> unbatched tf.data of flat dicts of fixed-shape tensors
task.split_features(batch)                -> (x, y, sample_weight), the rest is `meta`
task.use_init_checkpoint(path)            -> defaults read from the initial weights' directory
task.build_model(encoder), loss(), metrics()
task.training_loss_fn()                   -> the Trainer loss function, or None (the job's)
model outputs + meta -> task.postprocess  -> answers, one per example, in example order
task.evaluate(answers, examples)          -> the official metric dict
task.write_predictions(answers, ...)      -> the official prediction files
task.serving_outputs(model, preprocessor) -> raw strings in, answers out, in TF ops (export)
task.state() / task.load_state(state)     -> what a trained model needs from the task (label
                                             names read from the data), saved with it
task.read_transfer_file(path)             -> unlabelled examples for a teacher to label
task.soft_targets()                       -> how the teacher's outputs become soft targets
                                             (a `SOFT_TARGET_KINDS` kind per output)
```

The contract's halves live beside it: the serving half is `Servable`
(`tasks.servable`, which the exporter takes), the distillation half `Distillable`
(`tasks.distillation`). Tasks are registered and created by name in `tasks.registry`;
the generic glue the runner uses, which tasks do not reimplement, is
`tasks.datasets` (`batched_dataset`, `training_dataset_fn`) and `tasks.prediction`
(`predict`, `predict_raw`).

Example:

```python
from keras_bert_zoo import tasks

task = tasks.create_task("glue/mrpc", data_dir="glue_data/MRPC")
examples = task.read("dev")
preprocessor = task.make_preprocessor(tokenizer)
model = task.build_model(encoder)
answers = tasks.predict(task, model, examples, preprocessor, batch_size=32)
print(task.evaluate(answers, examples))  # {"accuracy": ..., "f1": ...}
```
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from keras_bert_zoo.inputs import ENCODER_INPUT_NAMES
from keras_bert_zoo.tasks.distillation import Distillable
from keras_bert_zoo.tasks.servable import Servable
from keras_bert_zoo.utils import suggestions
from keras_bert_zoo.utils.errors import UserError

# The version of `Task.description`'s JSON (the task.json of a fine-tuned directory,
# `tasks.saving`): a reader refuses a newer one.
TASK_DESCRIPTION_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class TaskOption:
    """A task-specific setting, surfaced by the binaries as a command-line flag.

    Attributes:
        name: flag and constructor keyword (`doc_stride`, `n_best_size`, ...). Two tasks
            that declare the same name must agree on its type and default.
        default: bool, int, float or str (or None for an optional string).
        help: one line for `--helpfull`.
        choices: allowed values for a string option, or None.
    """

    name: str
    default: bool | int | float | str | None
    help: str
    choices: tuple[str, ...] | None = None


class Task(Servable, Distillable):
    """Base of every fine-tuning task. Subclasses fill in the abstract methods
    (`make_preprocessor` and the serving defaults come from `Servable`, the
    distillation defaults from `Distillable`).

    Class attributes a subclass sets:
        text_fields: names of the raw string inputs, in packing order: `("sentence",)`,
            `("sentence1", "sentence2")`, `("question", "context")`, `("context",
            "ending0", ...)`. The exported `serving_default` signature takes these.
        primary_metric: the key of `evaluate()`'s dict that picks the best checkpoint.
        higher_is_better: direction of `primary_metric`.
        options: task-specific settings (`TaskOption`), passed to `__init__` as keywords.
        default_max_seq_length: the paper's sequence length for the task.
        label_keys: feature keys that form `y` in `split_features`.

    Args:
        task_name: the registry name (set by `create_task`).
        data_dir: directory of the official files, or None to read from
            tensorflow-datasets (`tfds_data_dir`) when the task supports it.
        max_seq_length: packed length; None takes `default_max_seq_length`.
        encoding: text encoding of the input files.
        tfds_data_dir: tensorflow-datasets data directory (prepared data only; nothing
            is downloaded).
        **options: values for the task's `options`.
    """

    text_fields: ClassVar[tuple[str, ...]] = ()
    primary_metric: ClassVar[str] = "accuracy"
    higher_is_better: ClassVar[bool] = True
    options: ClassVar[tuple[TaskOption, ...]] = ()
    default_max_seq_length: ClassVar[int] = 128
    label_keys: ClassVar[tuple[str, ...]] = ("label",)

    def __init__(
        self,
        task_name: str | None = None,
        data_dir: str | None = None,
        *,
        max_seq_length: int | None = None,
        encoding: str = "utf-8",
        tfds_data_dir: str | None = None,
        **options: Any,
    ):
        known = {option.name: option for option in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise UserError(
                f"{type(self).__name__} has no option(s) {unknown}; "
                f"its options are {sorted(known) or 'none'}"
            )
        self.task_name = task_name or type(self).__name__
        self.data_dir = data_dir
        self.max_seq_length = int(max_seq_length or self.default_max_seq_length)
        self.encoding = encoding
        self.tfds_data_dir = tfds_data_dir
        self.option_values = {
            name: options.get(name, option.default) for name, option in known.items()
        }
        for name, value in self.option_values.items():
            choices = known[name].choices
            if choices is not None and value not in choices:
                hint = suggestions.did_you_mean(value, choices)
                raise UserError(f"Option {name}={value!r} is not one of {choices}{hint}")

    # === Data ===

    def split_names(self) -> dict[str, tuple[str, ...]]:
        """The splits each mode reads: `{"train": ..., "eval": ..., "predict": ...}`.

        MNLI, for example, evaluates on `("dev_matched", "dev_mismatched")`.
        """
        return {"train": ("train",), "eval": ("dev",), "predict": ("test",)}

    @abc.abstractmethod
    def read(self, split: str) -> list:
        """The examples of `split`, each with an `example_id` attribute.

        Raises a `ValueError` naming the file and line for malformed input, or logs
        and counts a skip where the official tooling skips.
        """

    # === Features ===

    @abc.abstractmethod
    def features(self, examples: Sequence, preprocessor, *, training: bool) -> tf.data.Dataset:
        """Unbatched `tf.data` of flat dicts of fixed-shape tensors.

        Each element holds the model inputs, the labels (`label_keys`; absent or
        dummy for unlabelled test sets), optionally `sample_weight`, and any metadata
        `postprocess` needs (`example_index`, offsets, ...). One example may give
        several elements (SQuAD windows, long NER sentences). Tokenize batched
        inside (`batch -> preprocessor -> unbatch`): one preprocessor call per row is
        far slower.
        """

    def model_input_names(self) -> tuple[str, ...]:
        """The feature keys that `build_model`'s model takes."""
        return ENCODER_INPUT_NAMES

    # What one training feature is called when an example makes several (logs only).
    training_unit: str | None = None

    def count_training_features(self, examples: Sequence, preprocessor) -> int:
        """What an epoch trains on: the features of `examples` (one per example unless
        the task cuts examples into several and sets `training_unit`). Steps and
        epochs are counted in these. SQuAD keeps google-research/bert's `run_squad.py`
        count, one per example."""
        del preprocessor
        return len(examples)

    def split_features(self, features: Mapping[str, tf.Tensor]):
        """`(x, y, sample_weight)` from a (batched) feature dict.

        `y` is one tensor when `label_keys` has one key, a dict otherwise, None when
        no label key is present; `sample_weight` is `features["sample_weight"]` or None.
        """
        x = {name: features[name] for name in self.model_input_names()}
        present = [key for key in self.label_keys if key in features]
        if not present:
            y = None
        elif len(self.label_keys) == 1:
            y = features[present[0]]
        else:
            y = {key: features[key] for key in present}
        return x, y, features.get("sample_weight")

    def feature_meta(self, features: Mapping[str, Any]) -> dict[str, Any]:
        """The keys of a feature dict that are neither inputs, labels nor weights."""
        used = set(self.model_input_names()) | set(self.label_keys) | {"sample_weight"}
        return {key: value for key, value in features.items() if key not in used}

    # === Model ===

    @abc.abstractmethod
    def build_model(self, encoder):
        """The task model (encoder + head), uncompiled. Call inside a strategy scope."""

    @abc.abstractmethod
    def loss(self):
        """The Keras loss (or dict of losses by output) to compile the model with."""

    def metrics(self) -> list:
        """Cheap in-graph Keras metrics for progress bars; official ones are `evaluate`."""
        return []

    def training_loss_fn(self):
        """The `Trainer` loss function `f(model, x, y, sample_weight) -> (loss, y_pred)`
        this task trains with, or None (default): the job's usual choice
        (`runners.loss_and_weights.model_loss_fn`). A task whose loss needs another
        forward pass (sentence embeddings' GradCache) returns its own."""
        return None

    def use_init_checkpoint(self, path: str) -> None:
        """Called by the fine-tuning job with the resolved `--init_checkpoint` before the
        model is built, for a task whose defaults come from the initial weights'
        directory (sentence embeddings: a sentence-transformers model's pooling).
        Default: nothing."""
        del path

    # === Answers ===

    @abc.abstractmethod
    def postprocess(
        self,
        outputs: Mapping[str, np.ndarray] | np.ndarray,
        meta: Mapping[str, np.ndarray],
        examples,
    ) -> list:
        """Raw model outputs over all features -> one answer per example, in order.

        `outputs` is the model's output (array or dict of arrays) concatenated over
        every feature in `features()` order; `meta` the matching metadata arrays.
        """

    @abc.abstractmethod
    def evaluate(self, answers: Sequence, examples: Sequence) -> dict[str, float]:
        """The official metrics of `answers` against the examples' gold labels."""

    @abc.abstractmethod
    def write_predictions(
        self, answers: Sequence, examples: Sequence, output_dir: str, split: str
    ) -> list[str]:
        """Writes the official prediction files for `split` atomically; returns paths."""

    # === State ===

    # `state()` is `Servable`'s.

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restores `state()`; a task whose state is fixed checks that it matches.

        Raises `ValueError` when `state` contradicts the task's own settings (a model
        fine-tuned on another task or label set).
        """
        if state and dict(state) != self.state():
            raise UserError(
                f"{self.task_name}: the saved task state {dict(state)} does not match "
                f"this task's {self.state()} (a model fine-tuned on another task or label set?)"
            )

    @property
    def huggingface_problem_type(self) -> str | None:
        """`problem_type` of a Hugging Face `config.json` (`"regression"`,
        `"single_label_classification"`, `"multi_label_classification"`), which picks the
        loss `transformers`' `...ForSequenceClassification` trains with; None (default):
        not a sequence classification, or `transformers`' own guess."""
        return None

    # === Distillation ===

    # `soft_targets()`, `read_transfer_file()`, `transfer_example()`: `Distillable`'s.

    # === Serving (`serving_outputs`, `label_names`, `serving_api`: `Servable`'s) ===

    def description(self, tokenizer) -> dict[str, Any]:
        """The JSON that rebuilds the task (its name, settings, options and `state()`)
        and its preprocessor without its training data: what `tasks.saving` writes to
        task.json, and export.json records as its "task".

        Args:
            tokenizer: the `BertTokenizer` the model was trained with (its casing and
                longest word are recorded).
        """
        return {
            "format_version": TASK_DESCRIPTION_FORMAT_VERSION,
            "task_name": self.task_name,
            "max_seq_length": self.max_seq_length,
            "encoding": self.encoding,
            "options": dict(self.option_values),
            "state": self.state(),
            "lowercase": bool(tokenizer.lowercase),
            "max_chars_per_token": int(tokenizer.max_chars_per_token),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task_name!r}, data_dir={self.data_dir!r})"
