"""The resume fingerprint: what a run's result depends on, kept in its directory.

A training command rerun with the same `--output_dir` continues the run there (from its
newest checkpoint) only when it is the same run. `run_settings.json` records, when the
run starts:

- every setting that changes what is learned: the config fields declared with
  `utils.settings.setting(affects_result=True)` (the learning rate and schedule, every
  optimizer setting, the batch size, steps and epochs, the seed, the initial
  checkpoint, the data's settings, distillation's teacher and weights, ...), and the
  task options that do (`TASK_OPTIONS_AFFECTING_RESULT`); a path setting that exists
  is recorded as its real path (`PATH_SETTINGS`);
- the content of the training data: a SHA-256 digest of the training examples as read
  (`examples_digest`; their text and labels, not where they came from), or of the
  pretraining files (`files_digest`), and of the vocabulary (`vocab_file`).

A rerun whose values differ is refused in one line naming each setting that differs,
old -> new, and the two ways on: another `--output_dir`, or `--overwrite_output_dir`
(which removes the old run, `run_dir.clear_run`). Settings that only show, schedule or
place the work (logging, checkpoint cadence, the evaluation and prediction files,
`--eval_every`, the exports, the distribution strategy, `--cache_teacher_outputs`) are
not recorded: a rerun may change them and resume.

Compatibility: values are compared for the keys both runs recorded, so a setting added
later does not refuse a directory recorded without it. A directory written before
`run_settings.json` existed has only the older fingerprint files (`task.json`,
`bert_config.json`, `distillation.json`); the jobs check those as before, and the
resumed run then records `run_settings.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from keras_bert_zoo.runners import run_dir
from keras_bert_zoo.utils import settings
from keras_bert_zoo.utils.atomic import json_safe, write_json_atomically

RUN_SETTINGS_FILE = "run_settings.json"
# The recorded digests of what the settings do not name: the content of the data.
TRAINING_DATA = "training_data"
TRANSFER_DATA = "transfer_data"
TASK_STATE = "task_state"

# The task options (`tasks.all_task_options()`), by whether another value trains another
# model. What is evaluated or predicted, and how answers are decoded from the model's
# outputs, does not: those options may change on a rerun. A tagging task's tag scheme
# is part of its saved state, so it counts. A task option in neither set is counted as
# changing the result (and tests/runners/test_run_fingerprint.py names it).
TASK_OPTIONS_AFFECTING_RESULT = frozenset(
    {
        "train_file",
        "input_format",
        "text_column",
        "text_pair_column",
        "label_column",
        "has_header",
        "delimiter",
        "label_names",
        "regression",
        "heldout_fraction",
        "heldout_seed",
        "multi_label",
        "label_separator",
        "label_columns",
        "long_documents",
        "window_stride",
        "doc_stride",
        "max_query_length",
        "version_2_with_negative",
        "tag_scheme",
        "word_column",
        "tag_column",
        "column_delimiter",
        "tag_set",
        "anchor_column",
        "positive_column",
        "negative_columns",
        "score_column",
        "score_range",
        "loss",
        "scale",
        "symmetric_loss",
        "matryoshka_dims",
        "pooling",
        "normalize_embeddings",
        "embedding_dim",
        "gradient_cache_chunk_size",
        "query_prompt",
        "document_prompt",
    }
)
TASK_OPTIONS_NOT_AFFECTING_RESULT = frozenset(
    {
        "eval_file",
        "predict_file",
        "diagnostic_file",
        "n_best_size",
        "max_answer_length",
        "null_score_diff_threshold",
        "window_aggregation",
        "thresholds_file",
        "tune_thresholds",
        "queries_file",
        "corpus_file",
        "qrels_file",
        "predict_text_role",
    }
)


# The settings that name a file or directory: one that exists is recorded as its real
# path (the same file named from another directory is the same setting). Other strings
# (a preset's name, a column's) are kept as given.
PATH_SETTINGS = frozenset(
    {
        "init_checkpoint",
        "vocab_file",
        "data_dir",
        "tfds_data_dir",
        "bert_config_file",
        "teacher",
        "student",
        "transfer_file",
    }
)


def comparable(value: Any, *, path: bool = False) -> Any:
    """`value` as `run_settings.json` records it: JSON (tuples as lists, no NaN); with
    `path`, a string that names an existing file or directory as its real path."""
    if path and isinstance(value, str) and value and os.path.exists(value):
        return os.path.realpath(value)
    return json_safe(value)


def config_settings(config) -> dict[str, Any]:
    """`{field: value}` of the fields of `config` that change what is learned
    (`setting(affects_result=True)`), but `task_options` (see `task_option_settings`)."""
    return {
        name: comparable(getattr(config, name), path=name in PATH_SETTINGS)
        for name in settings.result_settings(type(config))
        if name != "task_options"
    }


def task_option_affects_result(name: str) -> bool:
    """Whether another value of task option `name` trains another model (an option of
    neither set counts as one that does)."""
    return name not in TASK_OPTIONS_NOT_AFFECTING_RESULT


def task_option_settings(option_values: Mapping[str, Any]) -> dict[str, Any]:
    """The task's option values (`Task.option_values`, defaults included) that change
    what is learned, by option name (each is a flag of that name)."""
    return {
        name: comparable(value)
        for name, value in option_values.items()
        if task_option_affects_result(name)
    }


# === Digests of content ===


def _sha256(chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _example_text(example: Any) -> bytes:
    """An example's content, without where it was read from (`source`: a path)."""
    if dataclasses.is_dataclass(example) and any(
        field.name == "source" for field in dataclasses.fields(example)
    ):
        example = dataclasses.replace(example, source="")
    return repr(example).encode("utf-8") + b"\n"


def examples_digest(examples: Sequence[Any]) -> str:
    """A digest of examples' content, in order (their `repr`, without `source`): the
    same data read from another path has the same digest; another row, label or order
    another."""
    return _sha256(_example_text(example) for example in examples)


def vocabulary_digest(tokens: Sequence[str]) -> str:
    """A digest of a vocabulary's tokens, in id order."""
    return _sha256(f"{token}\n".encode() for token in tokens)


# Pretraining inputs may be many gigabytes: each file is known by its name, its size and
# the bytes at both ends, read in well under a second whatever its size.
_FILE_END_BYTES = 1 << 20


def files_digest(paths: Sequence[str]) -> str:
    """A digest of files, in order: each one's base name, size, and its first and last
    MiB (a file rewritten with other content of the same size and the same ends is not
    told apart)."""

    def chunks():
        for path in paths:
            size = os.path.getsize(path)
            yield f"{os.path.basename(path)}\0{size}\0".encode()
            with open(path, "rb") as f:
                yield f.read(_FILE_END_BYTES)
                if size > 2 * _FILE_END_BYTES:
                    f.seek(size - _FILE_END_BYTES)
                    yield f.read(_FILE_END_BYTES)
                elif size > _FILE_END_BYTES:
                    yield f.read()

    return _sha256(chunks())


# === The file ===


def run_settings_path(output_dir: str) -> str:
    return os.path.join(output_dir, RUN_SETTINGS_FILE)


def read_run_settings(output_dir: str) -> dict[str, Any] | None:
    """`output_dir/run_settings.json` (None: none there)."""
    path = run_settings_path(output_dir)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, ValueError) as error:
        from keras_bert_zoo.utils.errors import UserError

        raise UserError(
            f"{path}: unreadable ({error}); use another --output_dir, or "
            "--overwrite_output_dir to start over there"
        ) from error
    return dict(saved.get("settings", {}))


def write_run_settings(output_dir: str, current: Mapping[str, Any]) -> str:
    """Records `current` (the settings and digests of this run) as
    `output_dir/run_settings.json`."""
    return write_json_atomically(
        run_settings_path(output_dir), {"settings": json_safe(dict(current))}
    )


def check_run_settings(
    output_dir: str,
    current: Mapping[str, Any],
    *,
    more_differences: Sequence[tuple[str, Any, Any]] = (),
) -> None:
    """Refuses to resume another run: the values of `run_settings.json` must be
    `current`'s, for every key both have; `more_differences` (another fingerprint
    file's) are named in the same line."""
    saved = read_run_settings(output_dir) or {}
    differences = [*run_dir.setting_differences(saved, current), *more_differences]
    if differences:
        raise run_dir.other_run_error(run_settings_path(output_dir), differences)
