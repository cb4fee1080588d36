"""What a fine-tuning run reads and writes through the task contract.

The splits it reads (`read_splits`), the evaluation of a model on them
(`evaluate_splits`), the prediction files (`write_predictions`), the model of the run
with its metrics (`save_run_model`: `finetuned/`, `metrics.json`) and its checkpoint
layouts with the task's labels (`export_task_checkpoint`), and the record of
`eval_results.json` (`eval_record`). The job (`runners.finetuning`) decides when; this
module knows how, for any task, by the names of `utils.run_layout`. It lives with the
jobs because it reads their configs (`data_dir`, `task_options`, `do_lower_case`, ...).
"""

from __future__ import annotations

import filecmp
import json
import logging
import os
import re
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

from keras_bert_zoo.runners import eval_summaries
from keras_bert_zoo.tasks import prediction, registry
from keras_bert_zoo.tasks.saving import (
    MODEL_FILE,
    TASK_FILE,
    VOCAB_FILE,
    save_finetuned,
    task_description,
)
from keras_bert_zoo.training.reporting import format_metric, metric_value
from keras_bert_zoo.utils import run_layout
from keras_bert_zoo.utils.atomic import (
    atomic_directory,
    json_safe,
    remove_stale_temporaries,
    write_json_atomically,
)
from keras_bert_zoo.utils.deprecation import REMOVAL
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.keras_archive import same_keras_archive

logger = logging.getLogger(__name__)


# === The task of a run ===


def _task_kwargs(config, saved: Mapping[str, Any] | None = None) -> dict:
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


def create_task(name: str, config, saved: Mapping[str, Any] | None = None):
    """The task `name` with a run's settings (`config`: `data_dir`, `tfds_data_dir`,
    `max_seq_length`, `encoding`, `task_options`) over a fine-tuned model's saved
    description (`task.json`: its options and state)."""
    task = registry.create_task(name, **_task_kwargs(config, saved))
    if saved is not None:
        task.load_state(saved["state"])
    return task


def check_saved_task(config, description: Mapping[str, Any], where: str) -> None:
    """A fine-tuned model's task and casing (`description`, read from `where`) must be
    the ones the run asks for (`config.task`, `config.do_lower_case`)."""
    saved_name = description["task_name"]
    if config.task is not None and config.task != saved_name:
        raise UserError(
            f"--task={config.task} but {where} holds a model fine-tuned on {saved_name}"
        )
    saved_lowercase = bool(description["lowercase"])
    if config.do_lower_case is not None and bool(config.do_lower_case) != saved_lowercase:
        raise UserError(
            f"--do_lower_case={config.do_lower_case} contradicts "
            f"{os.path.join(where, TASK_FILE)}: the model was fine-tuned with "
            f"lowercase={saved_lowercase}"
        )


# === Reading and evaluating ===


# A split's name is a file name's part (predictions_<split>.jsonl) and a TensorBoard tag's.
_SPLIT_NAME = re.compile(r"^[\w.-]+$")


def eval_split_names(task, eval_split: str | None = None) -> dict[str, str]:
    """`{name: the task's split}` of the splits an evaluation reads: the task's eval
    splits under their own names, or its one eval split under `eval_split` (`--eval_split`)
    or else the stem of the task's `eval_file` (`--eval_file=test.csv` is `test`).

    Raises:
        UserError: an `eval_split` that is no name (`[A-Za-z0-9_.-]`), or one for a task
            that evaluates several splits (MNLI's matched and mismatched).
    """
    splits = tuple(task.split_names()["eval"])
    name = eval_split
    if name is not None and not _SPLIT_NAME.match(name):
        raise UserError(f"--eval_split={name!r}: a split name is letters, digits, _ . and -")
    if name is not None and len(splits) > 1:
        raise UserError(
            f"--eval_split={name}: {task.task_name} evaluates {len(splits)} splits "
            f"({', '.join(splits)}), each under its own name; leave --eval_split out"
        )
    eval_file = getattr(task, "option_values", {}).get("eval_file")
    if name is None and eval_file and len(splits) == 1:
        stem = os.path.splitext(os.path.basename(str(eval_file)))[0]
        name = re.sub(r"[^\w.-]", "_", stem) or None
    if name is None or len(splits) != 1:
        return {split: split for split in splits}
    return {name: splits[0]}


def labelled(examples: Sequence) -> bool:
    """Whether every example has its gold answer, so predictions can be scored: the
    examples of every task say so by `has_gold`, or by a `label` or `tags` that is set."""

    def has_gold(example) -> bool:
        if hasattr(example, "has_gold"):
            return bool(example.has_gold)
        for attribute in ("label", "tags"):
            if hasattr(example, attribute):
                return getattr(example, attribute) is not None
        return False

    return bool(examples) and all(has_gold(example) for example in examples)


def score_answers(task, answers, examples) -> dict[str, dict[str, float]]:
    """`{split: metrics}` of `answers[split]` against `examples[split]`."""
    return {
        split: {key: metric_value(v) for key, v in task.evaluate(answers[split], rows).items()}
        for split, rows in examples.items()
    }


def read_splits(task, splits: Sequence[str]) -> dict[str, list]:
    """`{split: examples}`; a split without examples is an error naming it."""
    examples = {}
    for split in splits:
        examples[split] = task.read(split)
        if not examples[split]:
            raise UserError(f"{task.task_name}: the {split} split has no examples")
    return examples


def evaluate_splits(task, model, preprocessor, eval_sets, batch_size: int, *, batching="bucketed"):
    """`({split: metrics}, {split: answers})` of `model` on every eval split (`batching`:
    `tasks.prediction.predict`'s)."""
    results, answers = {}, {}
    for split, examples in eval_sets.items():
        answers[split] = prediction.predict(
            task, model, examples, preprocessor, batch_size, batching=batching
        )
        results[split] = {
            key: metric_value(v) for key, v in task.evaluate(answers[split], examples).items()
        }
    return results, answers


def flatten_results(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """`{"split/metric": value}`: the flat names the Trainer logs and ranks."""
    return {
        f"{split}/{key}": value
        for split, metrics in results.items()
        for key, value in metrics.items()
    }


def format_results(results: Mapping[str, Mapping[str, float]]) -> str:
    return "; ".join(
        f"{split}: " + ", ".join(f"{k} {format_metric(v)}" for k, v in sorted(metrics.items()))
        for split, metrics in results.items()
    )


def confusion_matrices(task, answers, eval_sets) -> dict[str, dict]:
    """`{split: confusion matrix}` of the splits whose task picks one label per example
    (`Task.confusion_matrix`)."""
    matrices = {}
    for split, examples in eval_sets.items():
        matrix = task.confusion_matrix(answers[split], examples)
        if matrix:
            matrices[split] = matrix
    return matrices


def results_lines(eval_results, step, primary_metric: str | None) -> list[str]:
    """The metrics as a run's summary prints them: the primary metric (the one the best
    model is chosen by) first and marked, then the others."""
    if not eval_results:
        return []
    lines = [f"eval_results.json (step {step}):"]
    for split, metrics in eval_results.items():
        ordered = sorted(metrics.items(), key=lambda item: (item[0] != primary_metric, item[0]))
        shown = [
            f"{k} {format_metric(v)}" + (" (primary)" if k == primary_metric else "")
            for k, v in ordered
        ]
        lines.append(f"  {split}: " + ", ".join(shown))
    return lines


def write_evaluation_summaries(directory: str, step: int, task, matrices) -> None:
    """TensorBoard summaries of an evaluation beyond its metrics: each split's confusion
    matrix and a multi-label task's per-label thresholds. `directory` is the run's
    `eval/`; each split goes to its own run (`eval_summaries.write_evaluation_summaries`,
    which jobs call with the answers, for the loss, per-class scores and PR curves)."""
    eval_summaries.write_evaluation_summaries(
        os.path.dirname(os.path.abspath(directory)), step, task, matrices=matrices
    )


markdown_matrix = eval_summaries.markdown_matrix


# === Writing ===


def write_predictions(task, answers, examples, output_dir: str, split: str) -> list[str]:
    """The task's prediction files of `split` in `output_dir/predictions/`."""
    directory = os.path.join(output_dir, run_layout.PREDICTIONS_DIR)
    os.makedirs(directory, exist_ok=True)
    remove_stale_temporaries(directory)
    paths = task.write_predictions(answers, examples, directory, split)
    logger.info("%s %s: wrote %s", task.task_name, split, ", ".join(paths))
    return list(paths)


def read_metrics_file(directory: str) -> dict:
    """A saved model's `metrics.json` (its step and evaluation); empty if unreadable."""
    path = os.path.join(directory, run_layout.METRICS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        logger.warning("Ignoring unreadable %s: %s", path, error)
        return {}


def huggingface_label_config(task, model) -> dict:
    """`config.json`'s `id2label` / `label2id` and `problem_type` for `task`'s head on
    `model` (only classification heads have `num_classes`)."""
    from keras_bert_zoo.checkpoints import huggingface

    return huggingface.label_config(
        task.label_names, getattr(model, "num_classes", None), task.huggingface_problem_type
    )


def export_task_checkpoint(directory: str, task, model, tokenizer, export_format: str) -> str:
    """Writes the encoder and the task head in a checkpoint layout (`google` or
    `huggingface`), with `vocab.txt` and `task.json`, atomically.

    `from_pretrained(directory, model=<the task's model class>, ...)` reads it back,
    and so does `transformers`' `BertFor...` class that `config.json` names (with the
    task's label names and problem type).
    """
    from keras_bert_zoo.checkpoints.export import export_checkpoint

    return export_checkpoint(
        directory,
        model,
        export_format,
        vocabulary=tokenizer.get_vocabulary(),
        lowercase=tokenizer.lowercase,
        model_max_length=task.max_seq_length,
        config_update=huggingface_label_config(task, model),
        extra_files={TASK_FILE: task_description(task, tokenizer)},
    )


def _same_saved_file(path: str, other: str) -> bool:
    """Whether two files of a fine-tuned directory hold the same thing: equal bytes, or
    for `model.keras`, the same architecture and weights (saved at different times)."""
    if os.path.basename(path) == MODEL_FILE:
        try:
            return same_keras_archive(path, other)
        except (zipfile.BadZipFile, OSError):
            pass
    return filecmp.cmp(path, other, shallow=False)


def link_identical_model_files(source: str, directory: str, step: int | None) -> list[str]:
    """Replaces `directory`'s `model.keras`, `vocab.txt` and `task.json` by hard links to
    `source`'s (another fine-tuned directory, e.g. the run's `best/`) where `source` holds
    the model of the same `step` and the file's content is the same; returns the names
    linked.

    The two directories then store the weights once. Every writer replaces these files
    by renaming a new file over them (`utils.atomic`), never rewriting one in place, so
    a later write to either directory cannot change the other. Where a link is not
    possible (another file system, no hard links), the copy already written stays.
    """
    if step is None or read_metrics_file(source).get("step") != step:
        return []
    linked = []
    for name in (MODEL_FILE, VOCAB_FILE, TASK_FILE):
        original, copy = os.path.join(source, name), os.path.join(directory, name)
        if not (os.path.isfile(original) and os.path.isfile(copy)):
            continue
        if os.path.samefile(original, copy) or not _same_saved_file(original, copy):
            continue
        # Linked under a temporary name, then renamed: `copy` is whole at every moment.
        temporary = os.path.join(directory, f".{name}.link.tmp")
        try:
            if os.path.lexists(temporary):
                os.remove(temporary)
            os.link(original, temporary)
            os.replace(temporary, copy)
        except OSError as error:
            logger.info("Keeping a copy of %s (no hard link possible: %s)", original, error)
            if os.path.lexists(temporary):
                os.remove(temporary)
            continue
        linked.append(name)
    return linked


def save_run_model(
    output_dir: str,
    task,
    model,
    tokenizer,
    *,
    step: int | None,
    eval_results: Mapping[str, Mapping[str, float]] | None,
    checkpoint_layouts: Sequence[str] | None = None,
    same_model_dir: str | None = None,
    export_formats: Sequence[str] | None = None,
) -> dict[str, str]:
    """`finetuned/` (save_finetuned + metrics.json) and the checkpoint layouts
    (`checkpoint_layouts`); returns `{"keras": finetuned/, layout: directory, ...}`.

    `same_model_dir`: a fine-tuned directory that may hold this very model (the run's
    `best/`, when the final evaluation was the best or with `use_best_model`): where
    it is the same step and the same content, `finetuned/`'s files are hard links to
    its files (`link_identical_model_files`) instead of a second copy.

    `export_formats`: the old name of `checkpoint_layouts` (`--export_formats`), for one
    release, with a `DeprecationWarning`.
    """
    if export_formats is not None:
        if checkpoint_layouts is not None:
            raise TypeError("save_run_model() got both export_formats= and checkpoint_layouts=")
        warnings.warn(
            "save_run_model(export_formats=) is checkpoint_layouts= now; the old name will "
            f"be removed in {REMOVAL}",
            DeprecationWarning,
            stacklevel=2,
        )
        checkpoint_layouts = export_formats
    if checkpoint_layouts is None:
        raise TypeError("save_run_model() missing the keyword argument checkpoint_layouts=")
    exports = {}
    directory = os.path.join(output_dir, run_layout.FINETUNED_DIR)
    with atomic_directory(directory) as temp_dir:
        save_finetuned(temp_dir, task, model, tokenizer)
        if same_model_dir is not None and os.path.isdir(same_model_dir):
            linked = link_identical_model_files(same_model_dir, temp_dir, step)
            if linked:
                logger.info(
                    "%s holds the model of %s (step %s): %s linked, not stored twice",
                    directory,
                    same_model_dir,
                    step,
                    ", ".join(linked),
                )
        metrics: dict[str, Any] = {"step": step}
        if eval_results:
            first_split = next(iter(eval_results))
            primary = task.primary_metric
            metrics.update(
                metric=f"{first_split}/{primary}",
                value=eval_results[first_split].get(primary),
                metrics=flatten_results(eval_results),
            )
        write_json_atomically(os.path.join(temp_dir, run_layout.METRICS_FILE), json_safe(metrics))
    exports["keras"] = directory
    for layout in checkpoint_layouts:
        path = os.path.join(output_dir, run_layout.EXPORT_DIRS[layout])
        exports[layout] = export_task_checkpoint(path, task, model, tokenizer, layout)
        logger.info("Wrote the %s layout to %s", layout, path)
    return exports


def with_earlier_splits(record: Mapping[str, Any], earlier: Mapping[str, Any]) -> dict:
    """`record` (this evaluation's `eval_results.json`) with the results of the splits
    that `earlier` (the file before it) holds and this evaluation did not evaluate, and
    `splits`: each split's step and model. So evaluating `test` keeps `dev`'s results
    apart, beside it."""
    record = dict(record)
    splits = {
        name: {"step": record.get("step"), "model": record.get("model")}
        for name in record.get("results", {})
    }
    results = dict(record.get("results", {}))
    matrices = dict(record.get("confusion_matrices", {}))
    earlier_splits = earlier.get("splits", {})
    for name, metrics in earlier.get("results", {}).items():
        if name in results or not isinstance(metrics, Mapping):
            continue
        results[name] = metrics
        splits[name] = earlier_splits.get(
            name, {"step": earlier.get("step"), "model": earlier.get("model")}
        )
        if name in earlier.get("confusion_matrices", {}):
            matrices[name] = earlier["confusion_matrices"][name]
    record.update(results=results, splits=splits)
    if matrices:
        record["confusion_matrices"] = matrices
    return record


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
