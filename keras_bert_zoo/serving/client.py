"""Load an export back and ask it questions in raw text, as a TF Serving client would.

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

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving.signatures import DEFAULT_SIGNATURE

logger = logging.getLogger(__name__)


def _to_python(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_to_python(item) for item in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _input_order(path: str, names: Iterable[str]) -> tuple[str, ...]:
    """`names` with the task's text fields first, in the task's order (the export
    description's), then the others sorted."""
    names = set(names)
    try:
        from keras_bert_zoo.serving.export import read_export_description

        order = read_export_description(path).get("text_fields", [])
    except (FileNotFoundError, ValueError):
        order = []
    fields = tuple(name for name in order if name in names)
    return fields + tuple(sorted(names - set(fields)))


def check_input_names(path: str, signature: str, given: Iterable[str], takes: Sequence[str]):
    """Refuses a request whose input names are not `takes`, the signature's: a
    ValueError naming what is unknown or missing, and what the export takes."""
    given = list(given)
    unknown = [name for name in given if name not in takes]
    missing = [name for name in takes if name not in given]
    # The unknown names are the likelier mistake (a misspelt field), and the list of
    # what the export takes already says what is missing.
    what, names = ("unknown", unknown) if unknown else ("missing", missing)
    if not names:
        return
    plural = "s" if len(names) > 1 else ""
    raise ValueError(
        f"{path} ({signature}): {what} input{plural} {', '.join(repr(n) for n in names)}; "
        f"the export takes: {', '.join(takes)}"
    )


def check_request(path: str, signature: str, given: Iterable[str]) -> None:
    """Refuses a request the export cannot answer (no such signature, inputs that are
    not the signature's) before anything is loaded: the signatures are read from
    saved_model.pb alone."""
    from keras_bert_zoo.serving.export import signature_schema

    schema = signature_schema(path)
    if signature not in schema:
        raise ValueError(f"{path}: no signature {signature!r}; the export has: {', '.join(schema)}")
    check_input_names(path, signature, given, _input_order(path, schema[signature]["inputs"]))


class ServedModel:
    """An export loaded with `tf.saved_model.load`, called on raw text.

    Args:
        path: a version directory (`EXPORT_BASE/MODEL_NAME/VERSION`).
        signature: the signature to call (`serving_default`).

    Attributes:
        text_fields: the signature's string inputs, in the task's order.
    """

    def __init__(self, path: str, signature: str = DEFAULT_SIGNATURE):
        self.path = os.fspath(path)
        self._loaded = tf.saved_model.load(self.path)
        if signature not in self._loaded.signatures:
            raise KeyError(
                f"{self.path} has no signature {signature!r}; it has "
                f"{sorted(self._loaded.signatures)}"
            )
        self.signature = signature
        self.function = self._loaded.signatures[signature]
        inputs = self.function.structured_input_signature[1]
        try:
            from keras_bert_zoo.serving.export import read_export_description

            order = read_export_description(self.path)["text_fields"]
        except (FileNotFoundError, KeyError, ValueError):
            order = sorted(inputs)
        self.text_fields = tuple(name for name in order if name in inputs) or tuple(sorted(inputs))
        self.input_names = _input_order(self.path, inputs)

    def __call__(self, **inputs) -> dict[str, np.ndarray]:
        """One batch: `{field: [batch] strings}` -> `{output: numpy array}`."""
        check_input_names(self.path, self.signature, inputs, self.input_names)
        feed = {key: tf.constant(value) for key, value in inputs.items()}
        return {key: value.numpy() for key, value in self.function(**feed).items()}

    def _columns(self, rows: Sequence) -> dict[str, list]:
        columns: dict[str, list] = {field: [] for field in self.text_fields}
        for position, row in enumerate(rows):
            if isinstance(row, str | bytes):
                row = (row,)
            if isinstance(row, Mapping):
                missing = [field for field in self.text_fields if field not in row]
                if missing:
                    raise ValueError(f"row {position}: missing text field(s) {missing}")
                row = tuple(row[field] for field in self.text_fields)
            if len(row) != len(self.text_fields):
                raise ValueError(
                    f"row {position}: {len(row)} text(s) for the fields {list(self.text_fields)}"
                )
            for field, text in zip(self.text_fields, row, strict=True):
                columns[field].append(text)
        return columns

    def answer(self, rows: Sequence) -> list[dict[str, Any]]:
        """Answers for `rows` (each a string, a tuple in `text_fields` order, or a dict),
        one dict of plain Python values per row."""
        rows = list(rows)
        if not rows:
            return []
        outputs = self(**self._columns(rows))
        return [
            {key: _to_python(value[index]) for key, value in outputs.items()}
            for index in range(len(rows))
        ]


def load_served_model(path: str, signature: str = DEFAULT_SIGNATURE) -> ServedModel:
    return ServedModel(path, signature)


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
        **export_kwargs: passed to `export_finetuned` (`version`, `overwrite`, ...).

    Returns:
        `(ExportedModel, answers)`, one dict of plain values per row, read from the
        served SavedModel, not from the Keras model.
    """
    from keras_bert_zoo.serving.export import export_finetuned

    exported = export_finetuned(finetuned, export_base, model_name, **export_kwargs)
    logger.info("Answering %d rows with the export %s", len(rows), exported.path)
    return exported, load_served_model(exported.path).answer(rows)


# === What the tools print ===


def resolve_version_dir(path: str) -> str:
    """`path` itself when it holds a SavedModel or a TF Hub style pair
    (`hub.export_hub_encoder_pair`), else its highest integer version."""
    from keras_bert_zoo.serving.export import existing_versions
    from keras_bert_zoo.serving.hub import is_hub_pair

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
    from keras_bert_zoo.serving.hub import HUB_PREPROCESSOR

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


def describe_export(path: str) -> str:
    """The export's task, signatures (inputs, outputs, method) and op manifest, and
    what this process lacks to run it, as printable lines; for a TF Hub style pair
    (`hub.export_hub_encoder_pair`), those of its preprocessor, then its encoder."""
    from keras_bert_zoo.serving import ops
    from keras_bert_zoo.serving.export import read_export_description, signature_schema
    from keras_bert_zoo.serving.hub import ENCODER_DIR, PREPROCESSOR_DIR, is_hub_pair

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
        if description.get("tokenizer_ops"):
            lines.append(f"tokenizer ops: {description['tokenizer_ops']}")
        if description.get("precision"):
            lines.append(f"precision: {description['precision']}")
        if "padding_free" in description:
            runs = "real tokens only" if description["padding_free"] else "padded batch"
            lines.append(f"encoder runs on: {runs}")
    for name, signature in signature_schema(path).items():
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


def format_answers(outputs: Mapping[str, np.ndarray], max_chars: int = 400) -> str:
    """One block per row of a batch of outputs: `key: value` lines."""
    rows = len(next(iter(outputs.values()))) if outputs else 0
    lines = []
    for row in range(rows):
        lines.append(f"[{row}]")
        for key in sorted(outputs):
            text = repr(_to_python(np.asarray(outputs[key])[row]))
            if len(text) > max_chars:
                text = text[: max_chars - 3] + "..."
            lines.append(f"  {key}: {text}")
    return "\n".join(lines)
