"""The fine-tuning runner: everything `tools/run_finetuning.py` does, callable in-process.

`run_finetuning(FinetuningConfig(...))` fine-tunes, evaluates and predicts any
registered task (`tasks.list_tasks()`) through the task contract (`tasks/base.py`); it
knows no task by name. `run_demo()` is the main job: the real pretrained
all-MiniLM-L6-v2 fine-tuned on the 200 labelled movie-review sentences gensim ships.

Modes:

- `train`: fine-tune `--init_checkpoint` on the task's training split, save the model.
- `train_and_eval`: the same, evaluating the eval splits every `eval_every` steps (by
  default once per epoch) and at the end; the best model by the task's
  `primary_metric` is exported to `best/`.
- `eval`: evaluate a fine-tuned model on the eval splits.
- `predict`: write the task's prediction files for its predict splits.

`eval` and `predict` load the model from `--init_checkpoint` when it is a fine-tuned
directory (one `save_finetuned` wrote: `finetuned/`, `best/`), one of our Google or
Hugging Face exports (`export_google/`, `export_huggingface/`, which carry `task.json`),
or any checkpoint that holds the task's head; without `--init_checkpoint`, from
`output_dir/finetuned/` (or `output_dir/best/` with `use_best_model`).

What `output_dir` holds after a run (every file is written through `utils.atomic`:
a kill leaves whole files, or dot-named temporaries that the next run removes):

```
task.json              the task's name, options and state(), the tokenizer's casing;
                       written before training and checked on every resume
checkpoints/ckpt-N/    training checkpoints (Trainer: exact resume; rerun the same
                       command after a crash and it continues from the newest)
train/, eval/          TensorBoard summaries (loss, learning rate, speed; eval metrics)
best/                  the best evaluated model (save_finetuned + metrics.json)
finetuned/             the model of this run, Keras format: model.keras, vocab.txt,
                       task.json, metrics.json (its step and last evaluation);
                       `tasks.load_finetuned(dir)` reads it
export_google/         the same encoder + head as a google-research/bert checkpoint
                       (bert_model.ckpt.*, bert_config.json, vocab.txt, task.json)
export_huggingface/    ... and as a Hugging Face directory (model.safetensors,
                       config.json with the task's architecture, e.g.
                       BertForSequenceClassification, and its label names;
                       vocab.txt, tokenizer_config.json, task.json)
eval_results.json      every metric of every eval split, with the step of the model
                       evaluated and the history of the periodic evaluations; a metric
                       that is NaN (e.g. a correlation of constant predictions) is null
predictions/           the task's prediction files: for eval splits
                       (`predictions_dev.jsonl`, `predictions_dev.txt`, ...) and for
                       predict splits (the GLUE submission TSVs `CoLA.tsv`,
                       `MNLI-m.tsv`, `MNLI-mm.tsv`, `AX.tsv` ..., `predictions.jsonl`;
                       SQuAD's `predictions.json`, `nbest_predictions.json`; CoNLL
                       files; SWAG's CSV)
```

Under `multi_worker_mirrored` every worker trains, evaluates and predicts (each on the
whole eval/predict set, with the same weights: the same answers); only the chief writes
the files above (the Trainer writes each worker's checkpoint shards).

"The model of this run" is the final one (as google-research/bert's `run_classifier.py`
evaluates and predicts with), or the best evaluated one with `use_best_model=True`.

Example:

```python
from keras_bert_zoo.tasks import finetuning

result = finetuning.run_finetuning(
    finetuning.FinetuningConfig(
        task="glue/mrpc",
        data_dir="glue_data/MRPC",
        init_checkpoint="uncased_L-12_H-768_A-12",
        output_dir="/tmp/mrpc",
        learning_rate=2e-5,
    )
)
print(result.eval_results)  # {"dev": {"f1": ..., "accuracy": ...}}
finetuning.run_finetuning(
    finetuning.FinetuningConfig(task="glue/mrpc", data_dir="glue_data/MRPC",
                                output_dir="/tmp/mrpc", mode="predict")
)  # /tmp/mrpc/predictions/MRPC.tsv
```
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from keras_bert_zoo.tasks import base
from keras_bert_zoo.tasks.saving import (
    MODEL_FILE,
    TASK_FILE,
    VOCAB_FILE,
    load_finetuned,
    read_task_description,
    save_finetuned,
    task_description,
)
from keras_bert_zoo.training import distribute
from keras_bert_zoo.training.flags import TrainingOptions
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically

logger = logging.getLogger(__name__)

MODES = ("train", "eval", "predict", "train_and_eval")
EXPORT_FORMATS = ("google", "huggingface")

FINETUNED_DIR = "finetuned"
BEST_DIR = "best"
PREDICTIONS_DIR = "predictions"
EVAL_RESULTS_FILE = "eval_results.json"
METRICS_FILE = "metrics.json"
EXPORT_DIRS = {"google": "export_google", "huggingface": "export_huggingface"}

# Names of the temporaries utils.atomic makes (`.name.XXXX.tmp`, `.name.tmp-XXXX`): what a
# kill in the middle of a write leaves behind.
_ATOMIC_TEMPORARY = re.compile(r"^\..+(\.tmp|\.tmp-[A-Za-z0-9_]+)$")


# === Configuration ===


@dataclasses.dataclass
class FinetuningConfig(TrainingOptions):
    """Every setting of a fine-tuning run; field names are the binary's flag names.

    The training fields are those of `keras_bert_zoo.training.flags` (the shared flags
    of every training binary); the defaults are google-research/bert's
    `run_classifier.py` ones (the paper's fine-tuning recipe).

    Attributes:
        task: registered task name (`glue/mrpc`, `text_classification`, ...). May be
            None in eval/predict runs that load a fine-tuned directory (it names its
            task).
        output_dir: where everything goes (see the module docstring).
        mode: `train`, `eval`, `predict` or `train_and_eval`.
        data_dir: the task's files; None reads a prepared tensorflow-datasets copy
            (`tfds_data_dir`) for tasks that support it.
        tfds_data_dir: tensorflow-datasets data directory (nothing is downloaded).
        init_checkpoint: training: a google-research/bert or Hugging Face directory
            (anything `from_pretrained` reads), a fine-tuned directory (its encoder),
            or a preset name (`bert_base_uncased`, see `list_presets()`) for random
            weights. eval/predict: the model to use (see the module docstring).
        vocab_file: WordPiece vocabulary; default the checkpoint's `vocab.txt`.
        do_lower_case: None reads the casing from the vocabulary; an explicit value
            that contradicts the vocabulary is an error naming the file.
        max_seq_length: packed length; None takes the task's default (128; SQuAD 384)
            or, for a fine-tuned model, the length it was trained with.
        encoding: the input files' encoding; None: the task's default (UTF-8) or the
            saved one.
        task_options: the task's own options (`TaskOption`s) by name, e.g.
            `{"train_file": "reviews.tsv", "heldout_fraction": 0.25}`; in eval/predict
            runs they override a fine-tuned model's saved options.
        num_train_epochs: epochs over the training examples.
        num_train_steps: optimizer steps; None (or 0) computes
            `int(examples / train_batch_size * num_train_epochs)`, as
            google-research/bert's `run_classifier.py` and `run_squad.py` do.
        eval_batch_size, predict_batch_size: batch sizes of evaluation and prediction.
        use_best_model: evaluate, predict and export with the best evaluated model
            (`best/`) instead of the final one.
        export_best: export the best evaluated model to `best/` during training.
        export_formats: checkpoint layouts written beside the Keras model:
            `("google", "huggingface")` or a subset.
        seed ... progress: the training core's settings (see
            `keras_bert_zoo.training.flags`); `eval_every=None` evaluates once per epoch.
    """

    # === The run ===
    task: str | None = None
    output_dir: str | None = None
    mode: str = "train_and_eval"
    data_dir: str | None = None
    tfds_data_dir: str | None = None
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    max_seq_length: int | None = None
    encoding: str | None = None
    task_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    num_train_epochs: float = 3.0
    num_train_steps: int | None = None
    eval_batch_size: int = 32
    predict_batch_size: int = 32
    use_best_model: bool = False
    export_best: bool = True
    export_formats: tuple[str, ...] = EXPORT_FORMATS
    # === Training core (keras_bert_zoo.training.flags): the defaults fine-tuning changes ===
    learning_rate: float = 5e-5
    warmup_proportion: float = 0.1
    steps_per_loop: int = 10
    eval_every: int | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        self.export_formats = tuple(self.export_formats)
        unknown = sorted(set(self.export_formats) - set(EXPORT_FORMATS))
        if unknown:
            raise ValueError(f"export_formats {unknown} unknown; choose from {EXPORT_FORMATS}")
        self.task_options = dict(self.task_options)
        for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_train_epochs <= 0 and not self.num_train_steps:
            raise ValueError(f"num_train_epochs must be positive, got {self.num_train_epochs}")
        if self.max_seq_length is not None and self.max_seq_length < 3:
            raise ValueError(f"max_seq_length must be >= 3, got {self.max_seq_length}")

    @property
    def trains(self) -> bool:
        return self.mode in ("train", "train_and_eval")


# Fields that are not flags of their own: the task options are one flag each.
_NOT_FLAGS = {"task_options"}


def runner_flag_names() -> list[str]:
    """The names of the binary's flags that map to `FinetuningConfig` fields."""
    return [f.name for f in dataclasses.fields(FinetuningConfig) if f.name not in _NOT_FLAGS]


def define_flags(flag_values=None) -> None:
    """Defines the binary's flags: the runner's, every training-core flag (with the
    fine-tuning defaults) and one flag per task option (`tasks.all_task_options()`)."""
    from absl import flags

    from keras_bert_zoo.training import flags as training_flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    training_flags.define_flags(flag_values, **training_flags.flag_defaults(FinetuningConfig()))
    defaults = FinetuningConfig()

    def define(kind, name, help_text, **kwargs):
        if name in flag_values:
            return
        getattr(flags, f"DEFINE_{kind}")(
            name=name,
            default=getattr(defaults, name),
            help=help_text,
            flag_values=flag_values,
            **kwargs,
        )

    define(
        "string",
        "task",
        "The task: " + ", ".join(base.list_tasks()) + ". Without it (and in a run with no "
        "flags) the built-in main job runs: MiniLM fine-tuned on gensim's movie reviews.",
    )
    define(
        "enum",
        "mode",
        "train | train_and_eval (periodic evaluation, best export) | eval | predict.",
        enum_values=list(MODES),
    )
    define("string", "data_dir", "Directory of the task's files (official layout).")
    define(
        "string",
        "tfds_data_dir",
        "tensorflow-datasets data directory to read a prepared copy from when --data_dir "
        "is unset (nothing is downloaded).",
    )
    define(
        "string",
        "vocab_file",
        "WordPiece vocab.txt (default: the --init_checkpoint directory's).",
    )
    define(
        "bool",
        "do_lower_case",
        "Lower-case and strip accents. Default: read from the vocabulary; a value that "
        "contradicts it is an error.",
    )
    define(
        "integer",
        "max_seq_length",
        "Tokens per packed sequence (default: the task's, 128 for sentence tasks and 384 "
        "for SQuAD; for a fine-tuned model, the length it was trained with).",
        lower_bound=3,
    )
    define("string", "encoding", "Text encoding of the input files (default: UTF-8).")
    define("float", "num_train_epochs", "Epochs over the training examples.")
    define(
        "integer",
        "num_train_steps",
        "Optimizer steps (default: examples / --train_batch_size * --num_train_epochs).",
        lower_bound=0,
    )
    define("integer", "eval_batch_size", "Batch size of evaluation.", lower_bound=1)
    define("integer", "predict_batch_size", "Batch size of prediction.", lower_bound=1)
    define(
        "bool",
        "use_best_model",
        "Evaluate, predict and export with the best evaluated model (best/) instead of "
        "the final one.",
    )
    define(
        "bool",
        "export_best",
        "Export the best evaluated model to --output_dir/best/ during training.",
    )
    if "export_formats" not in flag_values:
        flags.DEFINE_multi_enum(
            "export_formats",
            list(EXPORT_FORMATS),
            list(EXPORT_FORMATS),
            "Checkpoint layouts written beside the Keras model (export_google/, "
            "export_huggingface/); repeat the flag for several.",
            flag_values=flag_values,
        )
    for option in base.all_task_options().values():
        if option.name in flag_values:
            if option.name in runner_flag_names():
                raise ValueError(
                    f"Task option {option.name!r} clashes with a flag of run_finetuning"
                )
            continue
        help_text = f"[task option] {option.help}"
        if option.choices is not None:
            flags.DEFINE_enum(
                option.name,
                option.default,
                list(option.choices),
                help_text,
                flag_values=flag_values,
            )
        elif isinstance(option.default, bool):
            flags.DEFINE_bool(option.name, option.default, help_text, flag_values=flag_values)
        elif isinstance(option.default, int):
            flags.DEFINE_integer(option.name, option.default, help_text, flag_values=flag_values)
        elif isinstance(option.default, float):
            flags.DEFINE_float(option.name, option.default, help_text, flag_values=flag_values)
        else:
            flags.DEFINE_string(option.name, option.default, help_text, flag_values=flag_values)


def explicit_flag_values(flag_values=None) -> dict[str, Any]:
    """The runner settings given on the command line, as `FinetuningConfig` keywords
    (task options gathered in `task_options`)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    settings: dict[str, Any] = {}
    for name in runner_flag_names():
        if name in flag_values and flag_values[name].present:
            settings[name] = flag_values[name].value
    options = {
        name: flag_values[name].value
        for name in base.all_task_options()
        if name in flag_values and flag_values[name].present
    }
    if options:
        settings["task_options"] = options
    return settings


def config_from_flags(flag_values=None) -> FinetuningConfig:
    """A `FinetuningConfig` from parsed flags: every runner and training flag, and the
    task options that were given on the command line (the others keep the task's own
    defaults, or a fine-tuned model's saved values)."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    settings = {name: flag_values[name].value for name in runner_flag_names()}
    settings["task_options"] = explicit_flag_values(flag_values).get("task_options", {})
    return FinetuningConfig(**settings)


# === Results ===


@dataclasses.dataclass
class FinetuningResult:
    """What `run_finetuning` did.

    Attributes:
        config: the configuration run.
        task: the task (with its state).
        model, tokenizer, preprocessor: the model of this run and its text pipeline.
        step: the training step of that model (None when unknown).
        model_source: `"final"`, `"best"`, or the directory it was loaded from.
        num_train_steps: the run's optimizer steps (training modes).
        training: the `Trainer`'s `TrainingResult` (training modes).
        eval_results: `{split: {metric: value}}` of the model of this run.
        eval_history: `[{"step": N, "results": {split: {metric: value}}}, ...]`.
        prediction_files: `{split: [paths]}`.
        exports: `{"keras": finetuned/, "google": ..., "huggingface": ...}`.
        seconds: wall time of the run; `training_seconds` of its training part.
        eval_answers: `({split: examples}, {split: answers})` of the evaluation.
    """

    config: FinetuningConfig
    task: base.Task
    model: Any
    tokenizer: Any
    preprocessor: Any
    step: int | None = None
    model_source: str = "final"
    num_train_steps: int | None = None
    training: Any = None
    eval_results: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    eval_history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    prediction_files: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    exports: dict[str, str] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    training_seconds: float = 0.0
    eval_answers: tuple[dict, dict] | None = dataclasses.field(default=None, repr=False)


# === Helpers ===


def json_safe(value):
    """`value` with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def remove_stale_temporaries(directory: str) -> list[str]:
    """Removes what an interrupted atomic write left in `directory` (dot-named
    `*.tmp` files and `*.tmp-*` directories, see `utils.atomic`); returns them."""
    removed = []
    if not os.path.isdir(directory):
        return removed
    for name in sorted(os.listdir(directory)):
        if not _ATOMIC_TEMPORARY.match(name):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                continue
        removed.append(path)
    if removed:
        logger.info("Removed %d temporaries of interrupted writes: %s", len(removed), removed)
    return removed


def is_finetuned_dir(path: str | None) -> bool:
    """A directory `save_finetuned` wrote (model.keras + vocab.txt + task.json)."""
    return bool(path) and all(
        os.path.isfile(os.path.join(path, name)) for name in (MODEL_FILE, VOCAB_FILE, TASK_FILE)
    )


def make_tokenizer(vocab_file: str, do_lower_case: bool | None, *, flag="--do_lower_case"):
    """A `BertTokenizer` on `vocab_file`; the casing is read from the vocabulary unless
    given, and a given casing that contradicts the vocabulary is an error naming it."""
    from keras_bert_zoo.text import BertTokenizer

    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"{vocab_file}: no such vocabulary file")
    try:
        return BertTokenizer(vocab_file, lowercase=do_lower_case)
    except ValueError as error:
        if do_lower_case is None:
            raise
        raise ValueError(f"{flag}={do_lower_case} contradicts {vocab_file}: {error}") from error


def _check_casing_matches(description: Mapping[str, Any], directory: str, do_lower_case):
    saved = bool(description["lowercase"])
    if do_lower_case is not None and bool(do_lower_case) != saved:
        raise ValueError(
            f"--do_lower_case={do_lower_case} contradicts "
            f"{os.path.join(directory, TASK_FILE)}: the model was fine-tuned with "
            f"lowercase={saved}"
        )


def _task_kwargs(config: FinetuningConfig, saved: Mapping[str, Any] | None = None) -> dict:
    """Constructor keywords of the task: the config's, over a saved description's."""
    saved = saved or {}
    kwargs: dict[str, Any] = {"data_dir": config.data_dir, "tfds_data_dir": config.tfds_data_dir}
    max_seq_length = config.max_seq_length or saved.get("max_seq_length")
    if max_seq_length:
        kwargs["max_seq_length"] = max_seq_length
    encoding = config.encoding or saved.get("encoding")
    if encoding:
        kwargs["encoding"] = encoding
    kwargs.update(saved.get("options", {}))
    kwargs.update(config.task_options)
    return kwargs


def _create_task(name: str, config: FinetuningConfig, saved: Mapping[str, Any] | None = None):
    task = base.create_task(name, **_task_kwargs(config, saved))
    if saved is not None:
        task.load_state(saved["state"])
    return task


def _check_task_name(config: FinetuningConfig, saved_name: str, where: str) -> None:
    if config.task is not None and config.task != saved_name:
        raise ValueError(
            f"--task={config.task} but {where} holds a model fine-tuned on {saved_name}"
        )


def _read_splits(task, splits: Sequence[str]) -> dict[str, list]:
    examples = {}
    for split in splits:
        examples[split] = task.read(split)
        if not examples[split]:
            raise ValueError(f"{task.task_name}: the {split} split has no examples")
    return examples


def _evaluate(task, model, preprocessor, eval_sets, batch_size):
    """`({split: metrics}, {split: answers})` of `model` on every eval split."""
    results, answers = {}, {}
    for split, examples in eval_sets.items():
        answers[split] = base.predict(task, model, examples, preprocessor, batch_size)
        results[split] = {
            key: float(value) for key, value in task.evaluate(answers[split], examples).items()
        }
    return results, answers


def _flatten(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {
        f"{split}/{key}": value
        for split, metrics in results.items()
        for key, value in metrics.items()
    }


def _unflatten(flat: Mapping[str, float]) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for key, value in flat.items():
        split, metric = key.split("/", 1)
        results.setdefault(split, {})[metric] = value
    return results


def _format_metrics(results: Mapping[str, Mapping[str, float]]) -> str:
    return "; ".join(
        f"{split}: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items()))
        for split, metrics in results.items()
    )


def _read_metrics_file(directory: str) -> dict:
    path = os.path.join(directory, METRICS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        logger.warning("Ignoring unreadable %s: %s", path, error)
        return {}


# === Exports ===


def _huggingface_label_config(task, model) -> dict:
    """`id2label` / `label2id` for config.json from the task's state, when it lists one
    name per output of a classification head (`label_names`, `tags`)."""
    num_classes = getattr(model, "num_classes", None)
    if not num_classes:
        return {}
    state = task.state()
    for key in ("label_names", "tags"):
        names = state.get(key)
        if isinstance(names, list) and len(names) == int(num_classes):
            return {
                "id2label": {str(i): str(name) for i, name in enumerate(names)},
                "label2id": {str(name): i for i, name in enumerate(names)},
            }
    return {}


def export_checkpoint(directory: str, task, model, tokenizer, export_format: str) -> str:
    """Writes the encoder and the task head in a checkpoint layout (`google` or
    `huggingface`), with `vocab.txt` and `task.json`, atomically.

    `from_pretrained(directory, model=<the task's model class>, ...)` reads it back,
    and so does `transformers`' `BertFor...` class that `config.json` names.
    """
    from keras_bert_zoo.checkpoints import save_pretrained
    from keras_bert_zoo.text.vocab import write_vocab

    with atomic_directory(directory) as temp_dir:
        save_pretrained(model, temp_dir, format=export_format)
        write_vocab(os.path.join(temp_dir, VOCAB_FILE), tokenizer.get_vocabulary())
        write_json_atomically(os.path.join(temp_dir, TASK_FILE), task_description(task, tokenizer))
        if export_format == "huggingface":
            config_path = os.path.join(temp_dir, "config.json")
            with open(config_path, encoding="utf-8") as f:
                hf_config = json.load(f)
            hf_config.update(_huggingface_label_config(task, model))
            write_json_atomically(config_path, hf_config)
            # What transformers' BertTokenizer needs to tokenize as we do.
            write_json_atomically(
                os.path.join(temp_dir, "tokenizer_config.json"),
                {
                    "tokenizer_class": "BertTokenizer",
                    "do_lower_case": bool(tokenizer.lowercase),
                    "strip_accents": None,
                    "model_max_length": int(task.max_seq_length),
                },
            )
    return directory


def save_run_model(
    output_dir: str,
    task,
    model,
    tokenizer,
    *,
    step: int | None,
    eval_results: Mapping[str, Mapping[str, float]] | None,
    export_formats: Sequence[str],
) -> dict[str, str]:
    """`finetuned/` (save_finetuned + metrics.json) and the checkpoint exports."""
    exports = {}
    directory = os.path.join(output_dir, FINETUNED_DIR)
    with atomic_directory(directory) as temp_dir:
        save_finetuned(temp_dir, task, model, tokenizer)
        metrics: dict[str, Any] = {"step": step}
        if eval_results:
            first_split = next(iter(eval_results))
            primary = task.primary_metric
            metrics.update(
                metric=f"{first_split}/{primary}",
                value=eval_results[first_split].get(primary),
                metrics=_flatten(eval_results),
            )
        write_json_atomically(os.path.join(temp_dir, METRICS_FILE), json_safe(metrics))
    exports["keras"] = directory
    for export_format in export_formats:
        path = os.path.join(output_dir, EXPORT_DIRS[export_format])
        exports[export_format] = export_checkpoint(path, task, model, tokenizer, export_format)
        logger.info("Wrote the %s layout to %s", export_format, path)
    return exports


def write_eval_results(
    output_dir: str,
    task,
    results: Mapping[str, Mapping[str, float]],
    *,
    step: int | None,
    model_source: str,
    history: Sequence[Mapping[str, Any]] = (),
) -> str:
    """`eval_results.json`: every metric of every eval split, NaN as null."""
    return write_json_atomically(
        os.path.join(output_dir, EVAL_RESULTS_FILE),
        json_safe(
            {
                "task": task.task_name,
                "step": step,
                "model": model_source,
                "primary_metric": task.primary_metric,
                "higher_is_better": task.higher_is_better,
                "results": results,
                "history": list(history),
            }
        ),
    )


def _previous_history(output_dir: str) -> list[dict]:
    path = os.path.join(output_dir, EVAL_RESULTS_FILE)
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            return list(json.load(f).get("history", []))
    except (OSError, ValueError, AttributeError) as error:
        logger.warning("Ignoring unreadable %s: %s", path, error)
        return []


# === Building the model ===


@dataclasses.dataclass
class _EncoderSource:
    """Where a training run's encoder comes from."""

    kind: str  # "checkpoint", "finetuned" or "preset"
    bert_config: Any
    vocab_file: str | None
    initialize: Any  # a path or fn(model) for Trainer(init_checkpoint=...), or None


def _encoder_source(init_checkpoint: str | None) -> _EncoderSource:
    from keras_bert_zoo.config import BertConfig, list_presets

    if not init_checkpoint:
        raise ValueError(
            "--init_checkpoint is required to train: a google-research/bert or Hugging Face "
            "checkpoint directory, a fine-tuned directory, or a preset name for random "
            f"weights ({', '.join(list_presets())})"
        )
    if is_finetuned_dir(init_checkpoint):
        finetuned = load_finetuned(init_checkpoint)
        source_encoder = finetuned.model.encoder

        def copy_encoder(model):
            model.encoder.set_weights(source_encoder.get_weights())
            logger.info("Initialized the encoder from %s", init_checkpoint)

        return _EncoderSource(
            "finetuned",
            source_encoder.bert_config,
            os.path.join(init_checkpoint, VOCAB_FILE),
            copy_encoder,
        )
    from keras_bert_zoo.pretraining import run as pretraining_run

    if pretraining_run.is_run_dir(init_checkpoint):
        # A pretraining run's output_dir: the encoder of its newest checkpoint, read the
        # way run_pretraining --init_checkpoint reads it.
        pretrained = pretraining_run.checkpoint_source(init_checkpoint)

        def copy_pretrained_encoder(model):
            model.encoder.set_weights(pretrained.load().encoder.get_weights())
            logger.info("Initialized the encoder from %s", pretrained.description)

        return _EncoderSource(
            "checkpoint", pretrained.bert_config, pretrained.vocab_file, copy_pretrained_encoder
        )
    if os.path.exists(init_checkpoint) or os.path.exists(init_checkpoint + ".index"):
        from keras_bert_zoo.checkpoints import read_checkpoint_info

        info = read_checkpoint_info(init_checkpoint)
        return _EncoderSource("checkpoint", info.config, info.vocab_file, init_checkpoint)
    if init_checkpoint in list_presets():
        return _EncoderSource("preset", BertConfig.from_preset(init_checkpoint), None, None)
    raise FileNotFoundError(
        f"--init_checkpoint={init_checkpoint}: no such file or directory, and not a preset "
        f"name ({', '.join(list_presets())})"
    )


def _check_vocab_fits(tokenizer, vocab_file: str, bert_config) -> None:
    size = tokenizer.vocabulary_size()
    if size > bert_config.vocab_size:
        raise ValueError(
            f"{vocab_file} has {size} tokens but the encoder's word-embedding table has "
            f"{bert_config.vocab_size} rows: ids past it would index out of range. Use the "
            "vocabulary the checkpoint was trained with."
        )


@dataclasses.dataclass
class _LoadedModel:
    task: Any
    model: Any
    tokenizer: Any
    preprocessor: Any
    source: str
    step: int | None


def _load_for_inference(config: FinetuningConfig) -> _LoadedModel:
    """The model an eval/predict run uses (see the module docstring)."""
    source = config.init_checkpoint
    if not source:
        candidates = [os.path.join(config.output_dir, FINETUNED_DIR)]
        if config.use_best_model:
            candidates.insert(0, os.path.join(config.output_dir, BEST_DIR))
        found = [path for path in candidates if is_finetuned_dir(path)]
        if not found:
            raise FileNotFoundError(
                f"--mode={config.mode} needs a fine-tuned model: none in "
                f"{' or '.join(candidates)}; train first, or pass --init_checkpoint (a "
                "fine-tuned directory or a checkpoint with the task's head)"
            )
        source = found[0]
    if is_finetuned_dir(source):
        description = read_task_description(source)
        _check_task_name(config, description["task_name"], source)
        _check_casing_matches(description, source, config.do_lower_case)
        finetuned = load_finetuned(source, data_dir=config.data_dir)
        if (
            config.vocab_file
            and _vocabulary(config.vocab_file) != finetuned.tokenizer.get_vocabulary()
        ):
            raise ValueError(
                f"--vocab_file={config.vocab_file} differs from the fine-tuned model's "
                f"{os.path.join(source, VOCAB_FILE)} (the model carries its vocabulary)"
            )
        task = _create_task(description["task_name"], config, description)
        preprocessor = task.make_preprocessor(finetuned.tokenizer)
        step = _read_metrics_file(source).get("step")
        return _LoadedModel(task, finetuned.model, finetuned.tokenizer, preprocessor, source, step)

    # A checkpoint in a google-research/bert or Hugging Face layout with the task's head.
    from keras_bert_zoo.checkpoints import load_weights, read_checkpoint_info
    from keras_bert_zoo.models import BertEncoder

    if not (os.path.exists(source) or os.path.exists(source + ".index")):
        raise FileNotFoundError(
            f"--init_checkpoint={source}: no such file or directory (eval and predict need "
            "a fine-tuned model: a preset has random weights)"
        )
    info = read_checkpoint_info(source)
    description = None
    if os.path.isfile(os.path.join(source, TASK_FILE)):
        description = read_task_description(source)
        _check_task_name(config, description["task_name"], source)
        _check_casing_matches(description, source, config.do_lower_case)
    task_name = description["task_name"] if description else config.task
    if not task_name:
        raise ValueError(f"--task is required: {source} does not say which task it was tuned on")
    vocab_file = config.vocab_file or info.vocab_file
    if not vocab_file:
        raise ValueError(f"{source} has no vocab.txt: pass --vocab_file")
    do_lower_case = config.do_lower_case
    if do_lower_case is None and description is not None:
        do_lower_case = description["lowercase"]
    tokenizer = make_tokenizer(vocab_file, do_lower_case)
    _check_vocab_fits(tokenizer, vocab_file, info.config)
    task = _create_task(task_name, config, description)
    model = task.build_model(BertEncoder.from_bert_config(info.config))
    report = load_weights(model, source)
    if report.new_heads:
        raise ValueError(
            f"{source} holds no trained {task.task_name} head (missing: "
            f"{', '.join(report.new_heads)}): --mode={config.mode} needs a fine-tuned model"
        )
    return _LoadedModel(task, model, tokenizer, task.make_preprocessor(tokenizer), source, None)


def _vocabulary(vocab_file: str) -> list[str]:
    from keras_bert_zoo.text.vocab import load_vocab

    return load_vocab(vocab_file)


# === The run ===


def _write_run_task_file(output_dir: str, task, tokenizer, *, write: bool = True) -> None:
    """`output_dir/task.json` before training (if `write`: the chief); a resumed run
    must be the same task."""
    description = task_description(task, tokenizer)
    path = os.path.join(output_dir, TASK_FILE)
    if os.path.isfile(path):
        saved = read_task_description(output_dir)
        for key in ("task_name", "state", "max_seq_length", "lowercase"):
            if json_safe(saved.get(key)) != json_safe(description[key]):
                raise ValueError(
                    f"{path}: this output directory holds a run with {key}="
                    f"{saved.get(key)!r}, but this run has {description[key]!r}. Use another "
                    "--output_dir (or delete this one) to start a different run"
                )
    if write:
        write_json_atomically(path, description)


def _write_predictions(task, answers, examples, output_dir, split) -> list[str]:
    directory = os.path.join(output_dir, PREDICTIONS_DIR)
    os.makedirs(directory, exist_ok=True)
    remove_stale_temporaries(directory)
    paths = task.write_predictions(answers, examples, directory, split)
    logger.info("%s %s: wrote %s", task.task_name, split, ", ".join(paths))
    return list(paths)


def run_finetuning(config: FinetuningConfig) -> FinetuningResult:
    """Runs `config.mode` (see the module docstring); returns a `FinetuningResult`."""
    from keras_bert_zoo.training import flags as training_flags

    start = time.time()
    if not config.output_dir:
        raise ValueError("--output_dir is required")
    output_dir = os.path.abspath(config.output_dir)
    config = dataclasses.replace(config, output_dir=output_dir)
    # No os.makedirs(output_dir): a mistake in the input must leave no --output_dir
    # behind, and every writer creates the directories it writes in (utils.atomic).
    strategy = training_flags.setup(config)
    # Only the chief writes output_dir (two workers writing the same files would also
    # remove each other's in-flight temporaries); every worker computes the same answers.
    chief = distribute.is_chief(strategy)
    if chief:
        remove_stale_temporaries(output_dir)

    if config.trains:
        result = _train(config, strategy)
    else:
        with strategy.scope():
            loaded = _load_for_inference(config)
        result = FinetuningResult(
            config=config,
            task=loaded.task,
            model=loaded.model,
            tokenizer=loaded.tokenizer,
            preprocessor=loaded.preprocessor,
            step=loaded.step,
            model_source=loaded.source,
        )
    task = result.task
    splits = task.split_names()

    if config.mode in ("eval", "train_and_eval"):
        if not splits["eval"]:
            raise ValueError(f"{task.task_name} has no eval split here ({splits})")
        if not result.eval_results:
            eval_sets = _read_splits(task, splits["eval"])
            result.eval_results, answers = _evaluate(
                task, result.model, result.preprocessor, eval_sets, config.eval_batch_size
            )
            result.eval_answers = (eval_sets, answers)
        eval_sets, answers = result.eval_answers
        for split, examples in eval_sets.items():
            if chief:
                result.prediction_files[split] = _write_predictions(
                    task, answers[split], examples, output_dir, split
                )
        history = result.eval_history
        if not config.trains:
            history = _previous_history(output_dir) + [
                {"step": result.step, "model": result.model_source, "results": result.eval_results}
            ]
        if chief:
            write_eval_results(
                output_dir,
                task,
                result.eval_results,
                step=result.step,
                model_source=result.model_source,
                history=history,
            )
        logger.info("eval (step %s): %s", result.step, _format_metrics(result.eval_results))

    if config.mode == "predict":
        if not splits["predict"]:
            raise ValueError(
                f"{task.task_name} has no predict split here ({splits}): give it the file "
                "to predict (e.g. --predict_file) or the test files in --data_dir"
            )
        for split, examples in _read_splits(task, splits["predict"]).items():
            answers = base.predict(
                task, result.model, examples, result.preprocessor, config.predict_batch_size
            )
            if chief:
                result.prediction_files[split] = _write_predictions(
                    task, answers, examples, output_dir, split
                )

    result.seconds = time.time() - start
    return result


def _check_packable(task, model) -> None:
    """Raises a `ValueError` naming the flag and the task unless `Trainer` can train
    `model` on packed batches (`--packed_sequences`)."""
    from keras_bert_zoo.models import packed

    try:
        packed.check_supported(model)
    except TypeError as error:
        raise ValueError(
            f"--packed_sequences does not apply to task {task.task_name!r}: it trains a "
            f"{type(model).__name__}, whose outputs or inputs are not one per example; "
            f"packed batches train {[m.__name__ for m in packed.SUPPORTED_MODELS]} only. "
            "Run it without --packed_sequences"
        ) from error


def _train(config: FinetuningConfig, strategy) -> FinetuningResult:
    from keras_bert_zoo.models import BertEncoder
    from keras_bert_zoo.training import Trainer, optimization
    from keras_bert_zoo.training import flags as training_flags

    if not config.task:
        raise ValueError(f"--task is required to train; choose from {base.list_tasks()}")
    output_dir = config.output_dir
    source = _encoder_source(config.init_checkpoint)
    vocab_file = config.vocab_file or source.vocab_file
    if not vocab_file:
        raise ValueError(
            f"--init_checkpoint={config.init_checkpoint} has no vocab.txt: pass --vocab_file"
        )
    tokenizer = make_tokenizer(vocab_file, config.do_lower_case)
    _check_vocab_fits(tokenizer, vocab_file, source.bert_config)

    task = _create_task(config.task, config)
    splits = task.split_names()
    train_examples = _read_splits(task, splits["train"])
    train_examples = [example for examples in train_examples.values() for example in examples]
    evaluate = config.mode == "train_and_eval"
    eval_sets = _read_splits(task, splits["eval"]) if evaluate else {}
    if evaluate and not eval_sets:
        raise ValueError(
            f"{task.task_name} has no eval split here ({splits}); use --mode=train, or give "
            "it evaluation data (e.g. --eval_file or --heldout_fraction)"
        )
    preprocessor = task.make_preprocessor(tokenizer)
    with strategy.scope():
        model = task.build_model(BertEncoder.from_bert_config(source.bert_config))
    if config.packed_sequences:
        _check_packable(task, model)
    # A resumed run must be the same task; task.json is written once all is checked.
    _write_run_task_file(output_dir, task, tokenizer, write=False)

    steps_per_epoch = len(train_examples) / config.train_batch_size
    num_train_steps = config.num_train_steps or int(steps_per_epoch * config.num_train_epochs)
    if num_train_steps < 1:
        raise ValueError(
            f"{len(train_examples)} training examples at --train_batch_size="
            f"{config.train_batch_size} for {config.num_train_epochs} epochs make no step"
        )
    eval_every = config.eval_every
    if eval_every is None:
        eval_every = max(1, int(round(steps_per_epoch)))
    logger.info(
        "%s: %d training examples, %d steps of %d (%.3g epochs), learning rate %g, warmup %d steps",
        task.task_name,
        len(train_examples),
        num_train_steps,
        config.train_batch_size,
        num_train_steps / steps_per_epoch,
        config.learning_rate,
        training_flags.optimizer_config(config).resolved_warmup_steps(num_train_steps),
    )

    with strategy.scope():
        model.compile(
            optimizer=optimization.create_optimizer(
                training_flags.optimizer_config(config), num_train_steps
            ),
            loss=task.loss(),
            metrics=task.metrics(),
        )
    trainer = Trainer(model, strategy=strategy, **training_flags.trainer_kwargs(config))
    chief = distribute.is_chief(strategy)
    _write_run_task_file(output_dir, task, tokenizer, write=chief)

    last_evaluation = {}
    # The evaluations of earlier runs of this output directory; those at or after this
    # run's first evaluation belong to steps a killed run had gone past, and are redone.
    previous_history = _previous_history(output_dir)
    run_history: list[dict] = []

    def history_so_far() -> list[dict]:
        if not run_history:
            return list(previous_history)
        first = run_history[0]["step"]
        return [e for e in previous_history if (e.get("step") or 0) < first] + run_history

    def eval_fn(model):
        step = int(trainer.global_step.numpy())
        results, answers = _evaluate(task, model, preprocessor, eval_sets, config.eval_batch_size)
        last_evaluation.update(step=step, results=results, answers=answers)
        run_history.append({"step": step, "results": results})
        # Written at every evaluation, so the history survives a kill and can be watched.
        if chief:
            write_eval_results(
                output_dir,
                task,
                results,
                step=step,
                model_source="training",
                history=history_so_far(),
            )
        return _flatten(results)

    first_eval_split = next(iter(eval_sets), None)
    training_start = time.time()
    training = trainer.train(
        base.training_dataset_fn(
            task, train_examples, preprocessor, config.train_batch_size, seed=config.seed
        ),
        num_train_steps,
        input_state="skip",
        eval_fn=eval_fn if evaluate else None,
        eval_every=eval_every if evaluate else 0,
        best_metric=(
            f"{first_eval_split}/{task.primary_metric}" if evaluate and config.export_best else None
        ),
        higher_is_better=task.higher_is_better,
        init_checkpoint=source.initialize,
        export_fn=lambda model, directory: save_finetuned(directory, task, model, tokenizer),
        global_batch_size=config.train_batch_size,
    )
    training_seconds = time.time() - training_start

    history = history_so_far()
    result = FinetuningResult(
        config=config,
        task=task,
        model=model,
        tokenizer=tokenizer,
        preprocessor=preprocessor,
        step=training.step,
        model_source="final",
        num_train_steps=num_train_steps,
        training=training,
        eval_history=history,
        training_seconds=training_seconds,
    )
    if config.use_best_model and is_finetuned_dir(os.path.join(output_dir, BEST_DIR)):
        best_dir = os.path.join(output_dir, BEST_DIR)
        best = load_finetuned(best_dir, data_dir=config.data_dir)
        result.model = best.model
        result.step = _read_metrics_file(best_dir).get("step")
        result.model_source = "best"
    elif evaluate and last_evaluation.get("step") == training.step:
        result.eval_results = last_evaluation["results"]
        result.eval_answers = (eval_sets, last_evaluation["answers"])
    if evaluate and not result.eval_results:
        result.eval_results, answers = _evaluate(
            task, result.model, preprocessor, eval_sets, config.eval_batch_size
        )
        result.eval_answers = (eval_sets, answers)
    if chief:
        result.exports = save_run_model(
            output_dir,
            task,
            result.model,
            tokenizer,
            step=result.step,
            eval_results=result.eval_results,
            export_formats=config.export_formats,
        )
    return result


# === The main job ===

DEMO_DATA_FILE = "pang_lee_polarity.cor"
DEMO_SENTENCES = (
    "A gripping, beautifully acted film that stays with you long after it ends.",
    "Tedious, predictable and far too long; I nearly fell asleep.",
    "The performances are wonderful and the story is genuinely moving.",
    "A clumsy mess of a movie with no laughs and no heart.",
)


def gensim_test_data_dir() -> str:
    """gensim's test-data directory (it holds `pang_lee_polarity.cor`)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "The main job's data comes from the 'gensim' package, which is not installed: "
            'run `pip install -e ".[demo]"`'
        )
    path = os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data")
    if not os.path.isfile(os.path.join(path, DEMO_DATA_FILE)):
        raise FileNotFoundError(f"{path}: no {DEMO_DATA_FILE} (gensim==4.4.0 ships it)")
    return path


def demo_config(**overrides) -> FinetuningConfig:
    """The main job's settings, for 150 training sentences on 2 CPU cores.

    all-MiniLM-L6-v2 (the `demo` extra's real pretrained BERT) on gensim's 200 labelled
    movie-review sentences (`__label__pos` / `__label__neg`, Latin-1), 50 of them held
    out (25 per label, picked by a seeded SHA-256: the same split everywhere). The
    paper's 3 epochs at batch 32 are 14 steps here, too few; 10 epochs at batch 16
    with a peak learning rate of 5e-5, linear decay without warmup, and sequences of 64
    tokens (the longest sentence has 52 words) learn it. The held-out set is evaluated
    after each epoch to show progress; the final model is reported, so nothing is
    chosen on the held-out set.

    Args:
        **overrides: `FinetuningConfig` fields to change (task options in
            `task_options` update the demo's).
    """
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir

    task_options = {
        "train_file": DEMO_DATA_FILE,
        "input_format": "fasttext",
        "heldout_fraction": 0.25,
    }
    task_options.update(overrides.pop("task_options", {}))
    settings = dict(
        task="text_classification",
        mode="train_and_eval",
        data_dir=overrides.get("data_dir") or gensim_test_data_dir(),
        encoding="latin-1",
        init_checkpoint=overrides.get("init_checkpoint") or demo_model_dir(),
        max_seq_length=64,
        train_batch_size=16,
        num_train_epochs=10.0,
        learning_rate=5e-5,
        warmup_proportion=0.0,
        steps_per_loop=3,
        checkpoint_every=0,
        keep_checkpoints=1,
        export_best=False,
        eval_batch_size=50,
        seed=12345,
        task_options=task_options,
    )
    settings.update(overrides)
    return FinetuningConfig(**settings)


@dataclasses.dataclass
class DemoResult:
    """What `run_demo` printed.

    Attributes:
        finetuning: the run's `FinetuningResult` (its `exports["keras"]` is the
            fine-tuned directory, which `tasks.load_finetuned` and the SavedModel export
            read).
        accuracy: held-out accuracy of the final model.
        num_heldout: held-out sentences.
        answers: `(sentence, label, probability)` for each raw sentence.
        seconds: wall time of the whole job.
        output_dir: where its files are.
        exported: the TF Serving SavedModel (`serving.ExportedModel`) under
            `output_dir/serving/`.
        served_answers: the export's answers for the raw sentences (dicts with
            `label`, `label_id`, `probabilities`), from the SavedModel loaded back.
    """

    finetuning: FinetuningResult
    accuracy: float
    num_heldout: int
    answers: list[tuple[str, str, float]]
    seconds: float
    output_dir: str
    exported: Any = None
    served_answers: list[dict] = dataclasses.field(default_factory=list)


def answer_sentences(task, model, preprocessor, sentences, batch_size=32):
    """`(sentence, label, probability of that label)` for raw sentences."""
    examples = task.examples_from_texts(list(sentences))
    answers = base.predict(task, model, examples, preprocessor, batch_size)
    return [
        (sentence, answer.label, float(answer.probabilities[answer.label]))
        for sentence, answer in zip(sentences, answers, strict=True)
    ]


def run_demo(
    config: FinetuningConfig | None = None,
    sentences: Sequence[str] = DEMO_SENTENCES,
    out=None,
) -> DemoResult:
    """The main job: fine-tunes MiniLM on gensim's movie reviews, prints the held-out
    accuracy, the wall time and its answers for a few raw sentences.

    Args:
        config: `demo_config()` by default; without an `output_dir`, a new temporary
            directory is used and its training checkpoint removed at the end (nobody
            resumes it), leaving the fine-tuned model and its exports.
        sentences: raw sentences to answer.
        out: where to print (default: standard output).
    """
    out = out or sys.stdout
    start = time.time()
    config = config or demo_config()
    temporary = not config.output_dir
    if temporary:
        config = dataclasses.replace(
            config, output_dir=tempfile.mkdtemp(prefix="keras_bert_zoo_finetuning_demo_")
        )

    def say(text=""):
        print(text, file=out, flush=True)

    say(
        f"Fine-tuning {config.init_checkpoint}\n  on {config.task} "
        f"{os.path.join(config.data_dir or '', config.task_options.get('train_file') or '')}\n"
        f"  lr {config.learning_rate:g}, batch {config.train_batch_size}, "
        f"{config.num_train_epochs:g} epochs, max_seq_length {config.max_seq_length}, "
        f"warmup {config.warmup_proportion:g}; output in {config.output_dir}"
    )
    result = run_finetuning(config)
    task = result.task
    first_split = next(iter(result.eval_results))
    accuracy = result.eval_results[first_split].get("accuracy", float("nan"))
    num_heldout = len(task.read(first_split))
    answers = answer_sentences(task, result.model, result.preprocessor, sentences)
    if temporary:
        shutil.rmtree(os.path.join(config.output_dir, "checkpoints"), ignore_errors=True)
    # The answers users get in production come from the SavedModel TF Serving loads, so
    # the main job exports one and asks it, not the Keras model, in raw text.
    from keras_bert_zoo import serving

    exported, served_answers = serving.export_and_answer(
        result.exports["keras"], os.path.join(config.output_dir, "serving"), list(sentences)
    )
    seconds = time.time() - start

    for entry in result.eval_history:
        split_results = entry["results"].get(first_split, {})
        if "accuracy" in split_results:
            say(f"  step {entry['step']:>4}: held-out accuracy {split_results['accuracy']:.3f}")
    say(
        f"held-out accuracy: {accuracy:.3f} on {num_heldout} sentences "
        f"(chance 0.5; model at step {result.step})"
    )
    say(
        f"wall time: {seconds:.1f} s (training {result.training_seconds:.1f} s, "
        f"{os.cpu_count()} CPU cores visible)"
    )
    say(f"exported for TF Serving: {exported.path}")
    say("answers served by the export (loaded back, raw text in):")
    for sentence, served in zip(sentences, served_answers, strict=True):
        probability = max(served["probabilities"])
        say(f"  {served['label']:>4} {probability:.3f}  {sentence}")
    difference = max(
        abs(max(served["probabilities"]) - probability)
        for (_, _, probability), served in zip(answers, served_answers, strict=True)
    )
    agree = all(
        served["label"] == label
        for (_, label, _), served in zip(answers, served_answers, strict=True)
    )
    say(
        f"  same labels as the in-memory Keras model: {'yes' if agree else 'NO'}; "
        f"largest probability difference {difference:.1e}"
    )
    say(f"fine-tuned model: {result.exports.get('keras')}")
    return DemoResult(
        result, accuracy, num_heldout, answers, seconds, config.output_dir, exported, served_answers
    )
