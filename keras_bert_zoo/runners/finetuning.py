"""The fine-tuning job: everything `tools/run_finetuning.py` does, callable in-process.

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
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from keras_bert_zoo.runners import flags as job_flags
from keras_bert_zoo.runners import run_dir, sources
from keras_bert_zoo.runners.run_dir import (
    EVAL_RESULTS_FILE,
    EXPORT_DIRS,
    EXPORT_FORMATS,
    json_safe,
    remove_stale_temporaries,
)
from keras_bert_zoo.runners.runner import Job, Runner, setup_strategy
from keras_bert_zoo.runners.sources import (
    BEST_DIR,
    FINETUNED_DIR,
    is_finetuned_dir,
    make_tokenizer,
)
from keras_bert_zoo.tasks import base
from keras_bert_zoo.tasks.saving import (
    TASK_FILE,
    VOCAB_FILE,
    load_finetuned,
    read_task_description,
    save_finetuned,
    task_description,
)
from keras_bert_zoo.training.flags import TrainingOptions
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically

logger = logging.getLogger(__name__)

MODES = ("train", "eval", "predict", "train_and_eval")
PREDICTIONS_DIR = "predictions"
METRICS_FILE = "metrics.json"

__all__ = [
    "BEST_DIR",
    "EVAL_RESULTS_FILE",
    "EXPORT_DIRS",
    "EXPORT_FORMATS",
    "FINETUNED_DIR",
    "FinetuningConfig",
    "FinetuningJob",
    "FinetuningResult",
    "METRICS_FILE",
    "MODES",
    "PREDICTIONS_DIR",
    "config_from_flags",
    "define_flags",
    "explicit_flag_values",
    "json_safe",
    "make_tokenizer",
    "remove_stale_temporaries",
    "run_finetuning",
    "runner_flag_names",
]

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
        self.export_formats = run_dir.check_export_formats(self.export_formats)
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

    flag_values = flags.FLAGS if flag_values is None else flag_values
    defaults = FinetuningConfig()
    job_flags.define_training_flags(flag_values, defaults)
    define = functools.partial(job_flags.define_field_flag, flag_values, defaults)

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
    job_flags.define_export_formats_flag(
        flag_values,
        "Checkpoint layouts written beside the Keras model (export_google/, export_huggingface/).",
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
    settings = job_flags.field_values(flag_values, runner_flag_names())
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


# === Tasks and their data ===


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


def _check_saved_task(config: FinetuningConfig, description: Mapping[str, Any], where: str):
    """A fine-tuned model's task and casing must be the ones the flags ask for."""
    saved_name = description["task_name"]
    if config.task is not None and config.task != saved_name:
        raise ValueError(
            f"--task={config.task} but {where} holds a model fine-tuned on {saved_name}"
        )
    saved_lowercase = bool(description["lowercase"])
    if config.do_lower_case is not None and bool(config.do_lower_case) != saved_lowercase:
        raise ValueError(
            f"--do_lower_case={config.do_lower_case} contradicts "
            f"{os.path.join(where, TASK_FILE)}: the model was fine-tuned with "
            f"lowercase={saved_lowercase}"
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


def _write_predictions(task, answers, examples, output_dir, split) -> list[str]:
    directory = os.path.join(output_dir, PREDICTIONS_DIR)
    os.makedirs(directory, exist_ok=True)
    remove_stale_temporaries(directory)
    paths = task.write_predictions(answers, examples, directory, split)
    logger.info("%s %s: wrote %s", task.task_name, split, ", ".join(paths))
    return list(paths)


# === Exports ===


def huggingface_label_config(task, model) -> dict:
    """`id2label` / `label2id` for config.json when the task names one label per
    output of the model's classification head (`Task.label_names`), and the
    `problem_type` the task declares (`Task.huggingface_problem_type`)."""
    num_classes = getattr(model, "num_classes", None)  # only classification heads have it
    names = task.label_names
    update = {}
    if num_classes and task.huggingface_problem_type is not None:
        update["problem_type"] = task.huggingface_problem_type
    if not num_classes or not names or len(names) != int(num_classes):
        return update
    return {
        **update,
        "id2label": {str(i): str(name) for i, name in enumerate(names)},
        "label2id": {str(name): i for i, name in enumerate(names)},
    }


def export_checkpoint(directory: str, task, model, tokenizer, export_format: str) -> str:
    """Writes the encoder and the task head in a checkpoint layout (`google` or
    `huggingface`), with `vocab.txt` and `task.json`, atomically.

    `from_pretrained(directory, model=<the task's model class>, ...)` reads it back,
    and so does `transformers`' `BertFor...` class that `config.json` names.
    """
    return run_dir.export_checkpoint(
        directory,
        model,
        export_format,
        vocabulary=tokenizer.get_vocabulary(),
        lowercase=tokenizer.lowercase,
        model_max_length=task.max_seq_length,
        config_update=huggingface_label_config(task, model),
        extra_files={TASK_FILE: task_description(task, tokenizer)},
    )


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


def eval_record(task, results, *, step, model_source: str, history=()) -> dict[str, Any]:
    """The content of a fine-tuning run's `eval_results.json`."""
    return {
        "task": task.task_name,
        "step": step,
        "model": model_source,
        "primary_metric": task.primary_metric,
        "higher_is_better": task.higher_is_better,
        "results": results,
        "history": list(history),
    }


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
    return run_dir.write_eval_results(
        output_dir,
        eval_record(task, results, step=step, model_source=model_source, history=history),
    )


# === Training: the job on the runner's skeleton ===


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


class FinetuningJob(Job):
    """Fine-tunes `config.task` from `config.init_checkpoint` (the training modes).

    `Runner(FinetuningJob(config)).run()` trains, evaluates every `eval_every` steps
    (`train_and_eval`), exports the best model to `best/`, and writes `finetuned/` and
    the checkpoint exports; `run_finetuning` adds the prediction files.
    """

    input_state = "skip"  # task pipelines are deterministic: skipping restores them

    def check_inputs(self) -> None:
        if not self.config.task:
            raise ValueError(f"--task is required to train; choose from {base.list_tasks()}")

    def prepare(self, strategy) -> None:
        config = self.config
        self.source = sources.resolve_weight_source(config.init_checkpoint)
        vocab_file = config.vocab_file or self.source.vocab_file
        if not vocab_file:
            raise ValueError(
                f"--init_checkpoint={config.init_checkpoint} has no vocab.txt: pass --vocab_file"
            )
        self.tokenizer = make_tokenizer(vocab_file, config.do_lower_case)
        sources.check_vocab_fits(
            vocab_file, self.source.bert_config, self.tokenizer.vocabulary_size()
        )
        self.task = task = _create_task(config.task, config)
        splits = task.split_names()
        train_sets = _read_splits(task, splits["train"])
        self.train_examples = [example for examples in train_sets.values() for example in examples]
        self.eval_sets = _read_splits(task, splits["eval"]) if self.evaluates else {}
        if self.evaluates and not self.eval_sets:
            raise ValueError(
                f"{task.task_name} has no eval split here ({splits}); use --mode=train, or "
                "give it evaluation data (e.g. --eval_file or --heldout_fraction)"
            )
        self.preprocessor = task.make_preprocessor(self.tokenizer)
        self.steps_per_epoch = len(self.train_examples) / config.train_batch_size
        self.last_answers: dict[str, Any] = {}

    def count_train_steps(self) -> int:
        config = self.config
        steps = config.num_train_steps or int(self.steps_per_epoch * config.num_train_epochs)
        if steps < 1:
            raise ValueError(
                f"{len(self.train_examples)} training examples at --train_batch_size="
                f"{config.train_batch_size} for {config.num_train_epochs} epochs make no step"
            )
        return steps

    def build_model(self):
        from keras_bert_zoo.models import BertEncoder

        model = self.task.build_model(BertEncoder.from_bert_config(self.source.bert_config))
        if self.config.packed_sequences:
            _check_packable(self.task, model)
        return model

    def compile_kwargs(self) -> dict[str, Any]:
        return {"loss": self.task.loss(), "metrics": self.task.metrics()}

    def initializer(self):
        return self.source.encoder_initializer()

    def record_run(self, *, write: bool) -> None:
        """`output_dir/task.json`: a resumed run must be the same task; written once
        every input is checked."""
        description = task_description(self.task, self.tokenizer)
        path = os.path.join(self.output_dir, TASK_FILE)
        if os.path.isfile(path):
            run_dir.check_same_run(
                path,
                read_task_description(self.output_dir),
                description,
                ("task_name", "state", "max_seq_length", "lowercase"),
            )
        if write:
            write_json_atomically(path, description)

    def dataset_fn(self):
        config = self.config
        return base.training_dataset_fn(
            self.task,
            self.train_examples,
            self.preprocessor,
            config.train_batch_size,
            seed=config.seed,
        )

    def log_plan(self) -> None:
        from keras_bert_zoo.training import flags as training_flags

        config = self.config
        logger.info(
            "%s: %d training examples, %d steps of %d (%.3g epochs), learning rate %g, "
            "warmup %d steps",
            self.task.task_name,
            len(self.train_examples),
            self.num_train_steps,
            config.train_batch_size,
            self.num_train_steps / self.steps_per_epoch,
            config.learning_rate,
            training_flags.optimizer_config(config).resolved_warmup_steps(self.num_train_steps),
        )

    @property
    def evaluates(self) -> bool:
        return self.config.mode == "train_and_eval"

    @property
    def eval_every(self) -> int:
        if self.config.eval_every is None:  # once per epoch
            return max(1, int(round(self.steps_per_epoch)))
        return int(self.config.eval_every)

    @property
    def best_metric(self) -> str | None:
        if not self.config.export_best:
            return None
        return f"{next(iter(self.eval_sets))}/{self.task.primary_metric}"

    @property
    def higher_is_better(self) -> bool:
        return self.task.higher_is_better

    def evaluate(self, model):
        results, self.last_answers = _evaluate(
            self.task, model, self.preprocessor, self.eval_sets, self.config.eval_batch_size
        )
        return results

    def trainer_metrics(self, results) -> dict[str, float]:
        return _flatten(results)

    def eval_record(self, step, results, history, model_source: str) -> dict[str, Any]:
        return eval_record(
            self.task, results, step=step, model_source=model_source, history=history
        )

    def export_best(self):
        return lambda model, directory: save_finetuned(directory, self.task, model, self.tokenizer)

    def final_model(self, model, step: int):
        best_dir = os.path.join(self.output_dir, BEST_DIR)
        if self.config.use_best_model and is_finetuned_dir(best_dir):
            best = load_finetuned(best_dir, data_dir=self.config.data_dir)
            return best.model, _read_metrics_file(best_dir).get("step"), "best"
        return model, step, "final"

    def export(self, model, step, eval_results) -> dict[str, str]:
        return save_run_model(
            self.output_dir,
            self.task,
            model,
            self.tokenizer,
            step=step,
            eval_results=eval_results,
            export_formats=self.config.export_formats,
        )


# === Eval and predict: the model to use ===


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
    from keras_bert_zoo.checkpoints import load_weights
    from keras_bert_zoo.models import BertEncoder

    given = config.init_checkpoint
    if not given:
        candidates = sources.finetuned_dirs_of_run(
            config.output_dir, prefer_best=config.use_best_model
        )
        found = [path for path in candidates if is_finetuned_dir(path)]
        if not found:
            raise FileNotFoundError(
                f"--mode={config.mode} needs a fine-tuned model: none in "
                f"{' or '.join(candidates)}; train first, or pass --init_checkpoint (a "
                "fine-tuned directory or a checkpoint with the task's head)"
            )
        given = found[0]
    source = sources.resolve_weight_source(given, prefer_best=config.use_best_model)
    if source.kind == sources.FINETUNED:
        description = read_task_description(source.path)
        _check_saved_task(config, description, source.path)
        finetuned = source.load_finetuned(data_dir=config.data_dir)
        if (
            config.vocab_file
            and _vocabulary(config.vocab_file) != finetuned.tokenizer.get_vocabulary()
        ):
            raise ValueError(
                f"--vocab_file={config.vocab_file} differs from the fine-tuned model's "
                f"{os.path.join(source.path, VOCAB_FILE)} (the model carries its vocabulary)"
            )
        task = _create_task(description["task_name"], config, description)
        preprocessor = task.make_preprocessor(finetuned.tokenizer)
        step = _read_metrics_file(source.path).get("step")
        return _LoadedModel(
            task, finetuned.model, finetuned.tokenizer, preprocessor, source.path, step
        )
    if source.kind != sources.CHECKPOINT:
        raise ValueError(
            f"--init_checkpoint={given} is a {source.kind.replace('_', ' ')}: it holds no "
            f"trained task head, and --mode={config.mode} needs a fine-tuned model"
        )

    # A checkpoint in a google-research/bert or Hugging Face layout with the task's head.
    path = source.path
    description = None
    if os.path.isfile(os.path.join(path, TASK_FILE)):
        description = read_task_description(path)
        _check_saved_task(config, description, path)
    task_name = description["task_name"] if description else config.task
    if not task_name:
        raise ValueError(f"--task is required: {path} does not say which task it was tuned on")
    vocab_file = config.vocab_file or source.vocab_file
    if not vocab_file:
        raise ValueError(f"{path} has no vocab.txt: pass --vocab_file")
    do_lower_case = config.do_lower_case
    if do_lower_case is None and description is not None:
        do_lower_case = description["lowercase"]
    tokenizer = make_tokenizer(vocab_file, do_lower_case)
    sources.check_vocab_fits(vocab_file, source.bert_config, tokenizer.vocabulary_size())
    task = _create_task(task_name, config, description)
    model = task.build_model(BertEncoder.from_bert_config(source.bert_config))
    report = load_weights(model, path)
    if report.new_heads:
        raise ValueError(
            f"{path} holds no trained {task.task_name} head (missing: "
            f"{', '.join(report.new_heads)}): --mode={config.mode} needs a fine-tuned model"
        )
    return _LoadedModel(task, model, tokenizer, task.make_preprocessor(tokenizer), path, None)


def _vocabulary(vocab_file: str) -> list[str]:
    from keras_bert_zoo.text.vocab import load_vocab

    return load_vocab(vocab_file)


# === The run ===


def run_finetuning(config: FinetuningConfig) -> FinetuningResult:
    """Runs `config.mode` (see the module docstring); returns a `FinetuningResult`.

    Training modes go through the runner's skeleton (`FinetuningJob`); `eval` and
    `predict` load the model (`_load_for_inference`). Then the eval splits' metrics
    and prediction files, and the predict splits' files, are written (by the chief).
    """
    start = time.time()
    if config.trains:
        runner = Runner(FinetuningJob(config))
        trained = runner.run()
        job = runner.job
        config, chief = job.config, runner.chief
        result = FinetuningResult(
            config=config,
            task=job.task,
            tokenizer=job.tokenizer,
            preprocessor=job.preprocessor,
            **trained.fields_for(FinetuningResult),
        )
        if job.evaluates:
            result.eval_answers = (job.eval_sets, job.last_answers)
    else:
        result, chief = _run_without_training(config)
    config = result.config
    task = result.task
    if result.eval_answers is not None:
        eval_sets, answers = result.eval_answers
        for split, examples in eval_sets.items():
            if chief:
                result.prediction_files[split] = _write_predictions(
                    task, answers[split], examples, config.output_dir, split
                )
        logger.info("eval (step %s): %s", result.step, _format_metrics(result.eval_results))

    if config.mode == "predict":
        splits = task.split_names()
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
                    task, answers, examples, config.output_dir, split
                )

    result.seconds = time.time() - start
    return result


def _run_without_training(config: FinetuningConfig) -> tuple[FinetuningResult, bool]:
    """`eval` / `predict`: the model loaded, and evaluated in `eval` mode."""
    if not config.output_dir:
        raise ValueError("--output_dir is required")
    config = dataclasses.replace(config, output_dir=os.path.abspath(config.output_dir))
    # No os.makedirs(output_dir): a mistake in the input must leave no --output_dir
    # behind, and every writer creates the directories it writes in (utils.atomic).
    strategy, chief = setup_strategy(config)
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
    if config.mode == "eval":
        task = loaded.task
        splits = task.split_names()
        if not splits["eval"]:
            raise ValueError(f"{task.task_name} has no eval split here ({splits})")
        eval_sets = _read_splits(task, splits["eval"])
        result.eval_results, answers = _evaluate(
            task, result.model, result.preprocessor, eval_sets, config.eval_batch_size
        )
        result.eval_answers = (eval_sets, answers)
        result.eval_history = run_dir.read_history(config.output_dir) + [
            {"step": result.step, "model": result.model_source, "results": result.eval_results}
        ]
        if chief:
            write_eval_results(
                config.output_dir,
                task,
                result.eval_results,
                step=result.step,
                model_source=result.model_source,
                history=result.eval_history,
            )
    return result, chief
