"""What the tools print of an export, and `export_and_answer`: export a fine-tuned
model, load it back and ask it questions in raw text, as a TF Serving client would
(loading itself: `loading.py`).

Example:

```python
from keras_bert_zoo import serving

exported, answers = serving.export_and_answer(
    "runs/sst2/best", "exports", ["a gripping, funny film", "a tedious mess"]
)
for answer in answers:
    print(answer["label"], answer["probabilities"])
```
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from keras_bert_zoo.models.sentence_embedder import EMBEDDING
from keras_bert_zoo.serving import signatures
from keras_bert_zoo.serving.layout import (
    ENCODER_DIR,
    HUB_PREPROCESSOR,
    PREPROCESSOR_DIR,
    TEXT_INPUT,
    VOCAB_FILE,
    existing_versions,
    is_hub_pair,
    read_export_description,
)
from keras_bert_zoo.serving.loading import load_served_model, python_value, resolve_export
from keras_bert_zoo.tasks.servable import PROBABILITIES_ANSWER
from keras_bert_zoo.utils.deprecation import moved_names

logger = logging.getLogger(__name__)


def export_and_answer(
    finetuned,
    export_base: str,
    rows: Sequence,
    model_name: str | None = None,
    **export_kwargs,
):
    """Exports a fine-tuned model, loads the export back and answers `rows` with it.

    Args:
        finetuned: a `tasks.save_finetuned` directory or a `tasks.FinetunedModel`.
        export_base: the TF Serving base directory.
        rows: raw texts: strings (one text field) or tuples / dicts of the task's
            text fields.
        model_name: default the task name (`glue_sst2`).
        **export_kwargs: options of the SavedModel export (`version`, `overwrite`, ...).

    Returns:
        `(ExportedModel, answers)`, one dict of plain values per row, read from the
        served SavedModel, not from the Keras model.
    """
    from keras_bert_zoo.serving.registry import export

    exported = export(finetuned, export_base, model_name=model_name, **export_kwargs)
    logger.info("Answering %d rows with the export %s", len(rows), exported.path)
    return exported, load_served_model(exported.path).answer(rows)


# === What the tools print ===


def resolve_version_dir(path: str) -> str:
    """`path` itself when it holds a SavedModel or a TF Hub style pair
    (`layout.py`), else its highest integer version."""
    path = os.fspath(path)
    if os.path.isfile(os.path.join(path, "saved_model.pb")) or is_hub_pair(path):
        return path
    versions = existing_versions(path)
    if not versions:
        raise FileNotFoundError(
            f"{path}: neither a SavedModel (no saved_model.pb) nor a model directory "
            "with integer version subdirectories"
        )
    return os.path.join(path, str(versions[-1]))


def _shape_text(shape) -> str:
    if shape is None:
        return "?"
    return (
        "["
        + ", ".join(
            "batch" if i == 0 and d == -1 else ("?" if d == -1 else str(d))
            for i, d in enumerate(shape)
        )
        + "]"
    )


def _hub_part_lines(description: Mapping[str, Any]) -> list[str]:
    """What export.json says of one SavedModel of a TF Hub style pair."""
    if description["kind"] == HUB_PREPROCESSOR:
        special = description.get("special_tokens", {})
        return [
            f"hub preprocessor  seq_length: {description.get('seq_length')}  "
            f"text fields: {', '.join(description.get('text_fields', []))}  "
            f"lowercase: {description.get('lowercase')}",
            "special tokens: " + ", ".join(f"{key}={value}" for key, value in special.items()),
        ]
    config = description.get("bert_config", {})
    return [
        f"hub encoder: {description.get('model')}  mlm: {description.get('mlm')}  "
        f"layers: {config.get('num_layers')}  hidden: {config.get('hidden_size')}  "
        f"vocab: {config.get('vocab_size')}"
    ]


def _embedding_lines(description: Mapping[str, Any]) -> list[str]:
    """What export.json says of an embedding model's vectors: its prompts (the `query`
    / `document` signatures) and the width it was cut to; nothing for other tasks."""
    task = description.get("task", {})
    prompts = [
        f"{name}: {task[f'{name}_prompt']!r}"
        for name in ("query", "document")
        if task.get(f"{name}_prompt")
    ]
    lines = [f"prompts: {'  '.join(prompts)}"] if prompts else []
    if description.get("truncate_dim") is not None:
        lines.append(f"{EMBEDDING} cut to its first {description['truncate_dim']} components")
    return lines


def describe_export(path: str) -> str:
    """The export's task, signatures (inputs, outputs, method) and op manifest, and
    what this process lacks to run it, as printable lines; for a TF Hub style pair
    (`formats/hub_pair.py`), those of its preprocessor, then its encoder."""
    from keras_bert_zoo.serving import ops

    if is_hub_pair(path):
        parts = [os.path.join(path, part) for part in (PREPROCESSOR_DIR, ENCODER_DIR)]
        return "\n\n".join([f"TF Hub style pair: {path}"] + [describe_export(p) for p in parts])
    lines = [f"SavedModel: {path}"]
    try:
        description = read_export_description(path)
    except (FileNotFoundError, ValueError) as error:
        lines.append(f"  ({error})")
    else:
        if "kind" in description:
            lines += _hub_part_lines(description)
        else:
            task = description.get("task", {})
            lines.append(
                f"task: {task.get('task_name')}  max_seq_length: {task.get('max_seq_length')}  "
                f"text fields: {', '.join(description.get('text_fields', []))}"
            )
        if description.get("label_names"):
            lines.append(f"labels: {', '.join(description['label_names'])}")
        lines += _embedding_lines(description)
        if description.get("tokenizer_ops"):
            lines.append(f"tokenizer ops: {description['tokenizer_ops']}")
        if description.get("precision"):
            lines.append(f"precision: {description['precision']}")
        if "padding_free" in description:
            runs = "real tokens only" if description["padding_free"] else "padded batch"
            lines.append(f"encoder runs on: {runs}")
    for name, signature in signatures.signature_schema(path).items():
        lines.append(f"signature {name} ({signature['method_name']})")
        for direction in ("inputs", "outputs"):
            for key, info in signature[direction].items():
                shape = _shape_text(info["shape"])
                lines.append(f"  {direction[:-1]:<6} {key:<24} {info['dtype']:<8} {shape}")
    try:
        manifest = ops.read_op_manifest(path)
    except (FileNotFoundError, ValueError):
        manifest = ops.op_manifest(path)
        lines.append("op manifest (computed: the export has no assets.extra/custom_ops.json):")
    lines.append(ops.format_op_manifest(manifest))
    problems = ops.check_op_manifest(manifest)
    lines.append(
        "this process can run it" if not problems else "this process: " + "; ".join(problems)
    )
    return "\n".join(lines)


def _by_label(key: str, value: Any, label_names: Sequence[str] | None) -> bool:
    """Whether `value`, one row's `key` answer, holds one number per label."""
    return (
        key == PROBABILITIES_ANSWER
        and label_names is not None
        and isinstance(value, list)
        and len(value) == len(label_names)
    )


def _embeddings(outputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The `embedding` answer of an embedding model's export (floating `[batch, dim]`),
    or None."""
    vectors = outputs.get(EMBEDDING)
    if vectors is None:
        return None
    vectors = np.asarray(vectors)
    return vectors if vectors.ndim == 2 and vectors.dtype.kind == "f" else None


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """`[rows, rows]` cosines between the rows of `vectors` (float64; NaN beside a zero
    vector)."""
    vectors = np.asarray(vectors, np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (vectors @ vectors.T) / np.outer(norms, norms)


def format_cosines(vectors: np.ndarray) -> str:
    """The matrix of cosines between the rows' vectors, as printed lines (row `[i]`,
    column `[j]`: the cosine of inputs i and j; 6 decimals)."""
    cosines = cosine_matrix(vectors)
    label = len(f"[{len(cosines) - 1}]")
    lines = [
        f"cosines between the {EMBEDDING} vectors (row i, column j):",
        " " * label + "".join(f"{f'[{j}]':>11}" for j in range(len(cosines))),
    ]
    for i, row in enumerate(cosines):
        lines.append(f"{f'[{i}]':<{label}}" + "".join(f"{value:>11.6f}" for value in row))
    return "\n".join(lines)


def format_answers(
    outputs: Mapping[str, np.ndarray],
    max_chars: int = 400,
    label_names: Sequence[str] | None = None,
) -> str:
    """One block per row of a batch of outputs: `key: value` lines; with `label_names`
    (the export's, `label_names_of`), the probabilities again beside their labels. An
    `embedding` answer (an embedding model's) adds each vector's L2 norm to its row and,
    after the rows, the matrix of cosines between the rows (`format_cosines`)."""
    rows = len(next(iter(outputs.values()))) if outputs else 0
    vectors = _embeddings(outputs)
    lines = []
    for row in range(rows):
        lines.append(f"[{row}]")
        for key in sorted(outputs):
            value = python_value(np.asarray(outputs[key])[row])
            text = repr(value)
            if len(text) > max_chars:
                text = text[: max_chars - 3] + "..."
            lines.append(f"  {key}: {text}")
            if _by_label(key, value, label_names):
                pairs = "  ".join(
                    f"{name} {number:.4f}" for name, number in zip(label_names, value, strict=True)
                )
                lines.append(f"  {key} by label: {pairs}")
        if vectors is not None:
            norm = np.linalg.norm(vectors[row].astype(np.float64))
            lines.append(f"  {EMBEDDING} norm: {norm:.6f}  dim: {vectors.shape[1]}")
    if vectors is not None and rows:
        lines.append(format_cosines(vectors))
    return "\n".join(lines)


def answers_as_json(
    outputs: Mapping[str, np.ndarray], label_names: Sequence[str] | None = None
) -> list[str]:
    """One JSON object per row of a batch of outputs (`--output=json`): each answer as
    plain JSON values, the probabilities as `{label: probability}` when `label_names`
    (the export's) name them."""
    rows = len(next(iter(outputs.values()))) if outputs else 0
    lines = []
    for row in range(rows):
        answer = {}
        for key in sorted(outputs):
            value = python_value(np.asarray(outputs[key])[row])
            if _by_label(key, value, label_names):
                value = dict(zip(label_names, value, strict=True))
            answer[key] = value
        lines.append(json.dumps(answer, ensure_ascii=False))
    return lines


def label_names_of(path: str) -> tuple[str, ...] | None:
    """The label names an export describes (a SavedModel's `export.json`, a LiteRT /
    ONNX sidecar), in the order of its probabilities; None when it has none."""
    try:
        if os.path.isfile(os.path.join(path, "saved_model.pb")):
            description = read_export_description(path)
        else:
            description = resolve_export(path)[1]
    except (FileNotFoundError, ValueError):
        return None
    names = description.get("label_names")
    return tuple(names) if names else None


def read_requests(path: str) -> dict[str, list[str]]:
    """The rows of a request file, `{field: [text per row]}`, by its extension: `.csv`
    (CSV, quoted fields as a spreadsheet writes them), `.jsonl` / `.json` / `.ndjson`
    (one JSON object a line, `{"field": "text", ...}`), else TSV; the delimited files
    name the fields on their first line. A malformed file is an `InputFileError`
    naming its line."""
    from keras_bert_zoo.tasks.sentence.readers import (
        InputFileError,
        numbered_lines,
        read_delimited,
        read_text,
    )

    extension = os.path.splitext(path)[1].lower()
    if extension in (".jsonl", ".json", ".ndjson"):
        rows = []
        for number, line in numbered_lines(read_text(path, description="JSON lines request")):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputFileError(f"{path}:{number}: not a JSON object ({error})") from None
            if not isinstance(row, dict) or not all(isinstance(v, str) for v in row.values()):
                raise InputFileError(
                    f'{path}:{number}: expected an object of texts, {{"field": "text", ...}}'
                )
            if rows and set(row) != set(rows[0][1]):
                raise InputFileError(
                    f"{path}:{number}: fields {sorted(row)}, line {rows[0][0]} has "
                    f"{sorted(rows[0][1])}"
                )
            rows.append((number, row))
        return {field: [row[field] for _, row in rows] for field in rows[0][1]}
    csv_file = extension == ".csv"
    table = read_delimited(
        path,
        delimiter="," if csv_file else "\t",
        quoting=csv_file,
        description=f"request {'CSV' if csv_file else 'TSV'} file (the field names, then rows)",
    )
    return {
        field: [fields[position] for _, fields in table.rows]
        for position, field in enumerate(table.header)
    }


def describe_portable(path: str) -> str:
    """What a LiteRT / ONNX export is, takes and answers, as printable lines."""
    directory, sidecar = resolve_export(path)
    task = sidecar.get("task", {})
    model_path = os.path.join(directory, sidecar["model_file"])
    lines = [
        f"{sidecar['format']} export: {model_path} ({os.path.getsize(model_path) / 1e6:.1f} MB, "
        f"quantize: {sidecar.get('quantize')})",
        f"task: {task.get('task_name')}  max_seq_length: {sidecar.get('max_seq_length')}  "
        f"text fields: {', '.join(sidecar.get('text_fields', []))}  "
        f"lowercase: {sidecar.get('lowercase')}",
    ]
    if sidecar.get("label_names"):
        lines.append(f"labels: {', '.join(sidecar['label_names'])}")
    lines += _embedding_lines(sidecar)
    takes = "raw text" if sidecar["input"] == TEXT_INPUT else f"ids (vocabulary {VOCAB_FILE})"
    lines.append(f"signature {sidecar['signature']}: {takes} in")
    for direction in ("inputs", "outputs"):
        for key, info in sidecar[direction].items():
            shape = "[" + ", ".join("?" if d == -1 else str(d) for d in info["shape"]) + "]"
            lines.append(f"  {direction[:-1]:<6} {key:<24} {info['dtype']:<8} {shape}")
    if sidecar.get("prediction_slots"):
        lines.append(f"masked LM prediction slots: {sidecar['prediction_slots']}")
    if sidecar.get("custom_ops"):
        lines.append(
            "custom ops (tensorflow-text TFLite kernels): " + ", ".join(sidecar["custom_ops"])
        )
    return "\n".join(lines)


# Moved to loading.py (loading an export back).
__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.serving.loading"],
    only=["ServedModel", "check_input_names", "check_request"],
)
