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
task.build_model(encoder), loss(), metrics()
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

The serving half of the contract is `Servable`, which `Task` extends and which the
exporter (`keras_bert_zoo.serving.export_saved_model`) takes; the pretrained encoder
and masked LM (`keras_bert_zoo.serving.servables`) implement it without being tasks.
Everything the exporter reads is declared there, with a default:

```
servable.task_name, .text_fields,
         .max_seq_length                   -> the name, the serving inputs, the packed length
servable.make_preprocessor(tokenizer)      -> the Keras layer the SavedModel runs
servable.serving_outputs(model, preproc.)  -> `serving_default`'s answers
servable.state()                           -> what the trained model needs of it ({})
servable.label_names                       -> one name per class of the head's output, in
                                              output order, or None (default)
servable.serving_api                       -> "classify", "regress" or None (default): the
                                              TF Serving example API (`serve_examples`)
                                              the answers support (see SERVING_API_ANSWERS)
servable.description(tokenizer)            -> export.json's "task" entry (a task: what
                                              `tasks.saving` writes to task.json)
```

`batched_dataset`, `training_dataset_fn` and `predict` below are the generic glue the
runner uses; tasks do not reimplement them.

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
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import tensorflow as tf

from keras_bert_zoo.inputs import ENCODER_INPUT_NAMES
from keras_bert_zoo.models import distillation as soft_targets
from keras_bert_zoo.tasks._shared import read_tab_separated_fields

# === Options and registry ===


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


_REGISTRY: dict[str, type[Task]] = {}

# The version of `Task.description`'s JSON (the task.json of a fine-tuned directory,
# `tasks.saving`): a reader refuses a newer one.
TASK_DESCRIPTION_FORMAT_VERSION = 1


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: registers a `Task` subclass under `name` (`"glue/mrpc"`, ...)."""

    def decorator(cls: type[Task]) -> type[Task]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"Task {name!r} is already registered by {_REGISTRY[name]}")
        _REGISTRY[name] = cls
        # A class may be registered under several names (one per GLUE task); each
        # registered subclass knows its own.
        return cls

    return decorator


def list_tasks() -> list[str]:
    """The registered task names, sorted."""
    return sorted(_REGISTRY)


def get_task_class(name: str) -> type[Task]:
    if name not in _REGISTRY:
        raise ValueError(f"Unknown task {name!r}. Known tasks: {', '.join(list_tasks())}")
    return _REGISTRY[name]


def create_task(name: str, **kwargs) -> Task:
    """An instance of the task registered as `name`; `kwargs` go to its constructor."""
    cls = get_task_class(name)
    return cls(task_name=name, **kwargs)


def all_task_options() -> dict[str, TaskOption]:
    """Every option any registered task declares, by name (for the binaries' flags)."""
    options: dict[str, TaskOption] = {}
    for name in list_tasks():
        for option in _REGISTRY[name].options:
            known = options.get(option.name)
            if known is not None and (
                type(known.default) is not type(option.default) or known.default != option.default
            ):
                raise ValueError(
                    f"Task option {option.name!r} is declared twice with different defaults: "
                    f"{known.default!r} and {option.default!r} ({name})"
                )
            options[option.name] = option
    return options


# === The serving contract ===

ServingApi = Literal["classify", "regress"]

CLASSIFY_API: ServingApi = "classify"
REGRESS_API: ServingApi = "regress"

# The answers of `serving_default` that each TF Serving example API needs:
# * "classify": `PROBABILITIES_ANSWER`, floating `[batch, len(label_names)]`, one
#   probability per label name (in `label_names` order); `serve_examples` returns the
#   label names as `classes` and these as `scores`.
# * "regress": `SCORE_ANSWER`, floating `[batch]`; `serve_examples` returns it as
#   `outputs`.
PROBABILITIES_ANSWER = "probabilities"
SCORE_ANSWER = "score"
SERVING_API_ANSWERS: Mapping[str, str] = {
    CLASSIFY_API: PROBABILITIES_ANSWER,
    REGRESS_API: SCORE_ANSWER,
}

# === Distillation: soft targets ===

# How a teacher's output becomes the soft targets a student is trained on
# (`Task.soft_targets`), one kind per model output:
# * "classes": softmax over the last axis, one distribution per row: logits
#   `[batch, num_classes]` (sentence classification) or `[batch, num_choices]`
#   (multiple choice, a distribution over the choices).
# * "labels": an independent sigmoid per unit of `[batch, num_labels]` logits
#   (multi-label classification).
# * "score": a regression score `[batch, 1]`, matched by squared error, without a
#   temperature.
# * "positions": softmax over the sequence axis of `[batch, seq_len]` logits, the
#   padded positions (`input_mask == 0`) excluded (span heads: SQuAD start/end).
# * "token_classes": softmax over the last axis at every position of
#   `[batch, seq_len, num_classes]` logits, averaged over the real tokens
#   (`input_mask == 1`) (tagging).
SoftTargetKind = Literal["classes", "labels", "score", "positions", "token_classes"]

# The names are the distillation losses' own (`models.distillation.KINDS`).
SOFT_CLASSES: SoftTargetKind = soft_targets.CLASSES
SOFT_LABELS: SoftTargetKind = soft_targets.LABELS
SOFT_SCORE: SoftTargetKind = soft_targets.SCORE
SOFT_POSITIONS: SoftTargetKind = soft_targets.POSITIONS
SOFT_TOKEN_CLASSES: SoftTargetKind = soft_targets.TOKEN_CLASSES
SOFT_TARGET_KINDS: tuple[str, ...] = soft_targets.KINDS

# The example id of the n-th example (from 0) of `Task.read_transfer_file`.
TRANSFER_EXAMPLE_ID = "transfer-{}"


class Servable(abc.ABC):
    """The serving half of the contract: what the exporter reads of anything it serves.

    `Task` extends it; `keras_bert_zoo.serving.servables` gives it to a pretrained
    encoder and masked LM. The exporter reads exactly these and nothing else (no
    attribute is probed for): a subclass overrides a default to declare more.

    Attributes:
        task_name: the name export.json records (a task's registry name).
        text_fields: the raw string inputs of `serving_default`, in packing order.
        max_seq_length: the packed length.
    """

    task_name: str
    text_fields: tuple[str, ...] = ()
    max_seq_length: int

    @abc.abstractmethod
    def make_preprocessor(self, tokenizer) -> Any:
        """The Keras layer that turns this task's raw text into model inputs.

        The same layer runs in the training pipeline and in the exported SavedModel.
        """

    def serving_outputs(self, model, preprocessor) -> Callable[..., dict[str, tf.Tensor]]:
        """A function from the raw string tensors named `text_fields` (each `[batch]`)
        to a dict of answer tensors, with the post-processing in TF ops, so that an
        exported SavedModel answers what `postprocess` answers."""
        raise NotImplementedError(f"{type(self).__name__} does not export a serving function yet")

    def state(self) -> dict[str, Any]:
        """What a trained model needs from the task to be used without its training data.

        JSON-serializable: label names read from the training files, a label set given
        as an option, ... The runner saves it beside each checkpoint (the exporter with
        the SavedModel) and hands it to `load_state` before it evaluates, predicts or
        exports in a new process.
        """
        return {}

    def confusion_matrix(self, answers, examples) -> dict[str, Any] | None:
        """A single-label classifier's `{"labels": [...], "matrix": [[count]]}` (rows: the
        gold label, columns: the predicted one, in `labels` order) of `answers` to
        `examples`; None (default) for tasks that do not pick one label per example."""
        return None

    def learned_state_keys(self) -> tuple[str, ...]:
        """The keys of `state()` that training changes (e.g. tuned thresholds): they
        belong to a trained model's task.json, not to the run's fingerprint, which a
        resumed run must match before it has learned them again."""
        return ()

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """One name per class of the head's output, in output order, or None (default:
        no classes, or none known). Export.json lists them; the "classify" API returns
        them as `classes`."""
        return None

    @property
    def serving_api(self) -> ServingApi | None:
        """Which TF Serving example API the `serving_default` answers support:
        `"classify"` (answers carry `PROBABILITIES_ANSWER`, floating
        `[batch, len(label_names)]`), `"regress"` (answers carry `SCORE_ANSWER`,
        floating `[batch]`) or None (default: no `serve_examples` signature).

        The exporter checks a declared API against the traced answers and refuses an
        export whose answers lack what the API needs.
        """
        return None

    def description(self, tokenizer) -> dict[str, Any]:
        """The JSON export.json records as its "task": enough to tell what was exported
        and with which settings. Default: the name, length, text fields and casing."""
        return {
            "task_name": self.task_name,
            "max_seq_length": self.max_seq_length,
            "text_fields": list(self.text_fields),
            "lowercase": bool(tokenizer.lowercase),
        }


# === The contract ===


class Task(Servable):
    """Base of every fine-tuning task. Subclasses fill in the abstract methods
    (`make_preprocessor` and the serving defaults come from `Servable`).

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
            raise ValueError(
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
                raise ValueError(f"Option {name}={value!r} is not one of {choices}")

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
            raise ValueError(
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

    def soft_targets(self) -> SoftTargetKind | dict[str, SoftTargetKind]:
        """How a teacher's outputs become soft targets for a student of the same task.

        Returns:
            One kind of `SOFT_TARGET_KINDS` for a model with one output, or a dict
            `{output_name: kind}` with the keys of the model's output dict (SQuAD:
            `{"start_logits": "positions", "end_logits": "positions"}`). See the
            `SOFT_*` constants for what each kind means.

        Raises:
            NotImplementedError: the task declares none (the default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} declares no soft targets; distillation needs them"
        )

    def read_transfer_file(self, path: str) -> list:
        """Unlabelled in-domain examples for a teacher to label (distillation's transfer
        set): one example per line, the task's `text_fields` separated by tabs.

        The file is decoded with `self.encoding`; blank lines are skipped. Example `n`
        (from 0) is `transfer-{n}` and has no label, as the task's own unlabelled test
        examples, so `features(examples, preprocessor, training=False)` takes them. A
        family may accept its own format as well (see its override).

        Args:
            path: the file.

        Returns:
            The examples, in file order.

        Raises:
            FileNotFoundError: `path` does not exist (the message names it).
            ValueError: the file is empty (naming it), or a line has another number of
                fields than `text_fields` (naming `path:line`, the number expected and
                the field names), or an example is malformed (the family's check).
        """
        rows = read_tab_separated_fields(
            path,
            self.text_fields,
            encoding=self.encoding,
            description=f"{self.task_name} transfer file",
        )
        return [
            self.transfer_example(TRANSFER_EXAMPLE_ID.format(n), fields, source)
            for n, (source, fields) in enumerate(rows)
        ]

    def transfer_example(self, example_id: str, fields: tuple[str, ...], source: str):
        """One unlabelled example from the `text_fields` of a transfer file's line.

        Args:
            example_id: the example's id (`transfer-{n}`).
            fields: the line's texts, one per name of `text_fields`, in that order.
            source: `"path:line"`, for error messages.

        Raises:
            NotImplementedError: the task reads no transfer files (the default).
        """
        raise NotImplementedError(
            f"{type(self).__name__} reads no transfer files; distillation needs them"
        )

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


# === Generic glue: the runner and the tests use these, tasks do not override them ===


def batched_dataset(
    task: Task,
    examples: Sequence,
    preprocessor,
    batch_size: int,
    *,
    training: bool = False,
    seed: int | None = None,
    input_context: tf.distribute.InputContext | None = None,
    repeat: bool | None = None,
    shuffle_buffer: int = 10_000,
    drop_remainder: bool | None = None,
    features: tf.data.Dataset | None = None,
) -> tf.data.Dataset:
    """Batches of the task's feature dicts (of `examples`, or the given `features`).

    Training batches are cached after featurization, shuffled with `seed` (the same
    order in every run), repeated and drop the remainder, so the stream is a
    deterministic function of the step; evaluation batches keep feature order and the
    last partial batch. With an `input_context` each input pipeline keeps every n-th
    feature.
    """
    repeat = training if repeat is None else repeat
    drop_remainder = training if drop_remainder is None else drop_remainder
    if features is None:
        features = task.features(examples, preprocessor, training=training)
    dataset = features
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if training:
        dataset = dataset.cache()
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(tf.data.AUTOTUNE)


def training_dataset_fn(
    task: Task,
    examples: Sequence,
    preprocessor,
    global_batch_size: int,
    *,
    seed: int | None = None,
    features_fn: Callable[[], tf.data.Dataset] | None = None,
    shuffle_buffer: int = 10_000,
    split_features: Callable | None = None,
) -> Callable[[tf.distribute.InputContext | None], tf.data.Dataset]:
    """`fn(input_context)` yielding `(x, y)` or `(x, y, sample_weight)` batches of the
    per-replica size, for `strategy.distribute_datasets_from_function` (or called with
    None without a strategy). `features_fn` makes the feature dicts instead of
    `task.features(examples)` (distillation adds its unlabelled transfer set), and
    `split_features` splits them instead of `task.split_features` (distillation passes
    cached teacher outputs in `x`)."""
    split = task.split_features if split_features is None else split_features

    def dataset_fn(input_context=None):
        batch_size = global_batch_size
        if input_context is not None:
            batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = batched_dataset(
            task,
            examples,
            preprocessor,
            batch_size,
            training=True,
            seed=seed,
            input_context=input_context,
            shuffle_buffer=shuffle_buffer,
            features=None if features_fn is None else features_fn(),
        )

        def to_training_tuple(features):
            x, y, sample_weight = split(features)
            if sample_weight is None:
                return x, y
            return x, y, sample_weight

        return dataset.map(to_training_tuple, num_parallel_calls=tf.data.AUTOTUNE)

    return dataset_fn


def _concatenate(chunks: list):
    first = chunks[0]
    if isinstance(first, Mapping):
        return {key: _concatenate([chunk[key] for chunk in chunks]) for key in first}
    if isinstance(first, list | tuple):
        return type(first)(_concatenate([chunk[i] for chunk in chunks]) for i in range(len(first)))
    return np.concatenate([np.asarray(chunk) for chunk in chunks], axis=0)


# One forward function per model, traced once per input signature (a model that is
# garbage collected takes its function with it: the function holds the model weakly).
_FORWARD_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _forward_function(model) -> Callable:
    """`fn(x) -> outputs`: `model.predict_step` on one whole batch, outside any
    distribution strategy.

    Not `model.predict_on_batch`: Keras runs that through the strategy the model was
    built under (`strategy.run` on the batch, then the per-replica outputs concatenated),
    so a batch that is not distributed comes back once per replica: 2x the rows under
    `mirrored` on two devices, and under `multi_worker_mirrored` an all-gather of every
    worker's copy ("60 model outputs for 30 features" with two workers). Here every
    process computes the answers of the whole batch on its own device from its copy of
    the (mirrored, so equal) weights: the one-device answers under every strategy, no
    collective op, so workers need not evaluate in lockstep. XLA as Keras' own predict
    function would use it (`model.jit_compile`: on GPUs, not on CPU-only machines).
    """
    forward = _FORWARD_FUNCTIONS.get(model)
    if forward is not None:
        return forward
    model_ref = weakref.ref(model)

    def step(x):
        return model_ref().predict_step((x,))

    if getattr(model, "run_eagerly", False):
        forward = step
    else:
        # `reduce_retracing`: the last, partial batch relaxes the batch dimension once.
        forward = tf.function(
            step,
            reduce_retracing=True,
            jit_compile=bool(getattr(model, "jit_compile", False)),
        )
    _FORWARD_FUNCTIONS[model] = forward
    return forward


def _to_numpy(outputs):
    return tf.nest.map_structure(
        lambda value: value.numpy() if isinstance(value, tf.Tensor) else value, outputs
    )


def outputs_by_batch(
    task: Task, model, features: tf.data.Dataset, batch_size: int
) -> Iterator[tuple[dict[str, np.ndarray], Any]]:
    """`(feature batch, model outputs)` as numpy, for `features` (unbatched feature
    dicts) in order, batches of `batch_size` and the last partial one. The model runs on
    each whole batch on this process's device, under every strategy (see
    `_forward_function`): `predict_raw` and the distillation's teacher-output cache
    read a model through this one path."""
    forward = _forward_function(model)
    for batch in features.batch(batch_size).prefetch(tf.data.AUTOTUNE):
        x, _, _ = task.split_features(batch)
        yield _to_numpy(dict(batch)), _to_numpy(forward(x))


def predict_raw(
    task: Task, model, examples: Sequence, preprocessor, batch_size: int = 32
) -> tuple[Any, dict[str, np.ndarray]]:
    """`(outputs, meta)`: the model's raw outputs and the features' metadata, as numpy,
    concatenated over every feature of `examples` in order (one host-side pass).

    Under any distribution strategy, every process computes every answer, the same as
    one device (see `_forward_function`); callers decide which process writes them.
    """
    features = task.features(examples, preprocessor, training=False)
    outputs, metas = [], []
    for batch, batch_outputs in outputs_by_batch(task, model, features, batch_size):
        outputs.append(batch_outputs)
        metas.append(task.feature_meta(batch))
    if not outputs:
        raise ValueError(f"{task}: no features to predict on ({len(examples)} examples)")
    return _concatenate(outputs), _concatenate(metas)


def predict(task: Task, model, examples: Sequence, preprocessor, batch_size: int = 32) -> list:
    """Answers for `examples`: features -> model -> `task.postprocess`."""
    outputs, meta = predict_raw(task, model, examples, preprocessor, batch_size)
    return task.postprocess(outputs, meta, examples)
