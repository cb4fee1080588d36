"""The run directory: what every job writes in `--output_dir` besides checkpoints.

- the resume fingerprint: a rerun with the same `--output_dir` continues the run only
  when it is the same run (`check_same_run`);
- `eval_results.json`: the last evaluation and the history of every evaluation of the
  directory, earlier (killed) runs' included (`EvalHistory`, `write_eval_results`);
- JSON-safe values (`json_safe`: JSON has no NaN);
- the checkpoint exports `export_google/` and `export_huggingface/`, the latter with
  the `tokenizer_config.json` `transformers` needs (`export_checkpoint`);
- the clean-up of what a kill in the middle of an atomic write leaves
  (`remove_stale_temporaries`).

Every file is written through `keras_bert_zoo.utils.atomic`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically

logger = logging.getLogger(__name__)

EVAL_RESULTS_FILE = "eval_results.json"
CHECKPOINTS_DIR = "checkpoints"
EXPORT_FORMATS = ("google", "huggingface")
EXPORT_DIRS = {"google": "export_google", "huggingface": "export_huggingface"}

# Names of the temporaries utils.atomic makes (`.name.XXXX.tmp`, `.name.tmp-XXXX`): what a
# kill in the middle of a write leaves behind.
_ATOMIC_TEMPORARY = re.compile(r"^\..+(\.tmp|\.tmp-[A-Za-z0-9_]+)$")


def check_export_formats(export_formats: Sequence[str]) -> tuple[str, ...]:
    """`export_formats` as a tuple; an unknown layout is an error naming it."""
    export_formats = tuple(export_formats)
    unknown = sorted(set(export_formats) - set(EXPORT_FORMATS))
    if unknown:
        raise ValueError(f"export_formats {unknown} unknown; choose from {EXPORT_FORMATS}")
    return export_formats


def json_safe(value):
    """`value` with numpy scalars as Python numbers and every non-finite float as None
    (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
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


def check_same_run(
    path: str, saved: Mapping[str, Any], current: Mapping[str, Any], keys: Sequence[str]
) -> None:
    """Refuses to resume a different run: `saved` (read from `path`, the directory's
    fingerprint file) and `current` must agree on every key of `keys`."""
    for key in keys:
        if json_safe(saved.get(key)) != json_safe(current.get(key)):
            raise ValueError(
                f"{path}: this output directory holds a run with {key}={saved.get(key)!r}, "
                f"but this run has {current.get(key)!r}. Use another --output_dir (or "
                "delete this one) to start a different run"
            )


# === eval_results.json ===


def read_history(output_dir: str) -> list[dict]:
    """The `history` of `output_dir/eval_results.json` (empty if none or unreadable)."""
    path = os.path.join(output_dir, EVAL_RESULTS_FILE)
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            return list(json.load(f).get("history", []))
    except (OSError, ValueError, AttributeError) as error:
        logger.warning("Ignoring unreadable %s: %s", path, error)
        return []


class EvalHistory:
    """The evaluations of a run directory: earlier runs' and this run's.

    Earlier entries at or after this run's first evaluation belong to steps a killed
    run had gone past; this run redoes them, so they are dropped.
    """

    def __init__(self, output_dir: str):
        self.previous = read_history(output_dir)
        self.run: list[dict] = []

    def add(self, step: int | None, results: Mapping[str, Any], **extra) -> None:
        self.run.append({"step": step, **extra, "results": results})

    @property
    def last(self) -> dict | None:
        """This run's newest evaluation."""
        return self.run[-1] if self.run else None

    def so_far(self) -> list[dict]:
        if not self.run:
            return list(self.previous)
        first = self.run[0]["step"] or 0
        return [e for e in self.previous if (e.get("step") or 0) < first] + list(self.run)


def write_eval_results(output_dir: str, record: Mapping[str, Any]) -> str:
    """Writes `record` (`step`, `results`, `history`, and what the job adds) as
    `output_dir/eval_results.json`, NaN as null."""
    return write_json_atomically(os.path.join(output_dir, EVAL_RESULTS_FILE), json_safe(record))


# === Checkpoint exports ===


def export_checkpoint(
    directory: str,
    model,
    export_format: str,
    *,
    vocabulary: Sequence[str] | None,
    lowercase: bool | None,
    model_max_length: int,
    config_update: Mapping[str, Any] | None = None,
    extra_files: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Writes `model` in a checkpoint layout (`google` or `huggingface`), atomically.

    `from_pretrained(directory, ...)` reads it back, and so does the `transformers`
    class that a Hugging Face `config.json` names.

    Args:
        directory: where to write (replaced whole).
        model: a `BertEncoder`, `BertPretrainer` or task model (`save_pretrained`).
        export_format: `"google"` or `"huggingface"`.
        vocabulary: the WordPiece tokens, written as `vocab.txt` (None: no vocabulary).
        lowercase: the tokenizer's casing, for Hugging Face's `tokenizer_config.json`.
        model_max_length: the longest input, for `tokenizer_config.json`.
        config_update: keys set in Hugging Face's `config.json` (label names ...).
        extra_files: `{file name: JSON object}` written beside the weights.
    """
    from keras_bert_zoo.checkpoints import save_pretrained
    from keras_bert_zoo.text.vocab import write_vocab

    with atomic_directory(directory) as temp_dir:
        save_pretrained(model, temp_dir, format=export_format)
        if vocabulary is not None:
            write_vocab(os.path.join(temp_dir, "vocab.txt"), list(vocabulary))
        for name, content in (extra_files or {}).items():
            write_json_atomically(os.path.join(temp_dir, name), content)
        if export_format == "huggingface":
            if config_update:
                config_path = os.path.join(temp_dir, "config.json")
                with open(config_path, encoding="utf-8") as f:
                    hf_config = json.load(f)
                hf_config.update(config_update)
                write_json_atomically(config_path, hf_config)
            if vocabulary is not None:
                # What transformers' BertTokenizer needs to tokenize as we do.
                write_json_atomically(
                    os.path.join(temp_dir, "tokenizer_config.json"),
                    {
                        "tokenizer_class": "BertTokenizer",
                        "do_lower_case": bool(lowercase),
                        "strip_accents": None,
                        "model_max_length": int(model_max_length),
                    },
                )
    return directory
