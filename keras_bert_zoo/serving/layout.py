"""What an export looks like on disk: the names its writer and its readers share.

* A SavedModel: integer version directories under a model directory
  (`existing_versions`), its description in `assets.extra/export.json`
  (`read_export_description`).
* A TF Hub style pair: `preprocessor/` and `encoder/`, each a SavedModel whose
  `export.json` names its half (`HUB_PREPROCESSOR`, `HUB_ENCODER`).
* A LiteRT or ONNX export: the model file, its sidecar `export.json` and `vocab.txt`
  (`portable.py`); the sidecar's `keras_outputs` says how the flat outputs nest in the
  Keras model's (`keras_output_structure`, `unflatten_outputs`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from keras_bert_zoo.serving.ops import EXTRA_DIRECTORY
from keras_bert_zoo.utils.errors import UserError

DESCRIPTION_FILE = "export.json"


def read_description(path: str) -> dict[str, Any]:
    """An export's description (`export.json`, a SavedModel's or a sidecar) at `path`."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise UserError(f"{path}: not valid JSON ({error})") from error


# === SavedModel versions ===


def existing_versions(model_dir: str) -> list[int]:
    """The integer version directories under `model_dir`, sorted (what TF Serving sees)."""
    if not os.path.isdir(model_dir):
        return []
    return sorted(
        int(name)
        for name in os.listdir(model_dir)
        if name.isdigit() and os.path.isdir(os.path.join(model_dir, name))
    )


def read_export_description(saved_model_dir: str) -> dict[str, Any]:
    """The content of a SavedModel's `assets.extra/export.json`."""
    path = os.path.join(saved_model_dir, EXTRA_DIRECTORY, DESCRIPTION_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{saved_model_dir}: no {EXTRA_DIRECTORY}/{DESCRIPTION_FILE} "
            "(not exported by keras_bert_zoo.serving)"
        )
    return read_description(path)


# === The TF Hub style pair ===

PREPROCESSOR_DIR = "preprocessor"
ENCODER_DIR = "encoder"
# export.json's "kind" of each half (task exports have none).
HUB_PREPROCESSOR = "hub_preprocessor"
HUB_ENCODER = "hub_encoder"


def is_hub_pair(path: str) -> bool:
    """Whether `path` holds the two SavedModels of a TF Hub style pair."""
    return all(
        os.path.isfile(os.path.join(os.fspath(path), part, "saved_model.pb"))
        for part in (PREPROCESSOR_DIR, ENCODER_DIR)
    )


# === LiteRT and ONNX exports ===

SIDECAR_FILE = DESCRIPTION_FILE
VOCAB_FILE = "vocab.txt"
LITERT_FORMAT = "litert"
ONNX_FORMAT = "onnx"
MODEL_FILES = {LITERT_FORMAT: "model.tflite", ONNX_FORMAT: "model.onnx"}
IDS_INPUT = "ids"
TEXT_INPUT = "text"
# The masked LM's positions input (see `formats/litert.py`: a fixed number of slots).
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_LOGITS = "masked_lm_logits"


def is_portable_export(path: str) -> bool:
    """Whether `path` is a LiteRT / ONNX export directory or its model file."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path.endswith((".tflite", ".onnx"))
    return os.path.isfile(os.path.join(path, SIDECAR_FILE)) and not os.path.isfile(
        os.path.join(path, "saved_model.pb")
    )


def keras_output_structure(outputs) -> dict[str, int | None] | None:
    """How `signatures.flatten_outputs` flattened a model's outputs: None for one
    tensor, else `{key: count}` with count None for a tensor and N for a list of N
    flattened as `key_0` ... `key_{N-1}`."""
    if not isinstance(outputs, Mapping):
        return None
    return {
        key: (len(value) if isinstance(value, list | tuple) else None)
        for key, value in outputs.items()
    }


def unflatten_outputs(flat: Mapping[str, Any], structure) -> Any:
    """The Keras model's outputs back from `signatures.flatten_outputs`' flat dict."""
    if structure is None:
        return flat["logits"]
    return {
        key: (flat[key] if count is None else [flat[f"{key}_{i}"] for i in range(count)])
        for key, count in structure.items()
    }
