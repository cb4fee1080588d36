"""What the LiteRT and ONNX exports share: the frozen ids function, the sidecar, and
answering raw text with an exported file.

An export is a directory (written under a temporary name, then renamed into place):

```
OUTPUT_DIR/
  model.tflite | model.onnx   the model (litert.py, onnx_export.py)
  export.json                 the sidecar (below)
  vocab.txt                   the tokenizer's vocabulary, one token a line (id = line)
```

The sidecar (`export.json`) says what an app needs to feed the model: `format`
(`"litert"` or `"onnx"`), `model_file`, `input` (`"ids"`: the model takes
`input_word_ids`, `input_mask`, `input_type_ids` as `serve_ids` does; `"text"`: raw
strings, one per text field, as `serving_default` does), `signature` (the LiteRT
signature: `serve_ids` or `serving_default`), `inputs` and `outputs` (`{name: {"dtype",
"shape"}}`, -1 for a dynamic size, in the model's order), `quantize`, `text_fields`,
`max_seq_length`, `lowercase`, `max_chars_per_token`, `vocab_file`, `special_tokens`
(`{"[CLS]": 101, ...}`), `label_names`, `task` (the task's description, what
`tasks.task_from_description` rebuilds it from) and `keras_outputs` (how the
flat outputs nest in the Keras model's: `None` for one tensor, else `{key: count}` with
count None for a tensor and N for a list of N flattened as `key_0` ... `key_{N-1}`).

`load_portable_model` answers raw text with an export, in Python: for an ids-in export
the text is tokenized with the sidecar's vocabulary and casing by the task's own
preprocessor, and the task's serving function (the one the SavedModel's
`serving_default` holds) turns the model's outputs into answers, so the answers have the
SavedModel's keys and meaning. A raw-text `.tflite` answers by itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving import signatures
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically

SIDECAR_FILE = "export.json"
VOCAB_FILE = "vocab.txt"
SIDECAR_FORMAT_VERSION = 1
LITERT_FORMAT = "litert"
ONNX_FORMAT = "onnx"
MODEL_FILES = {LITERT_FORMAT: "model.tflite", ONNX_FORMAT: "model.onnx"}
IDS_INPUT = "ids"
TEXT_INPUT = "text"
QUANTIZE_NONE = "none"
QUANTIZE_DYNAMIC_INT8 = "dynamic_int8"
QUANTIZE_FLOAT16 = "float16"
QUANTIZE_CHOICES = (QUANTIZE_NONE, QUANTIZE_DYNAMIC_INT8, QUANTIZE_FLOAT16)
# The masked LM's positions input (see `litert.py`: a fixed number of slots).
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_LOGITS = "masked_lm_logits"
_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class ConversionError(ValueError):
    """A model that the converter cannot turn into the asked format (one line naming
    the family and the reason). A `ValueError`, so a tool ends on it with one line."""


@dataclasses.dataclass(frozen=True)
class PortableExport:
    """Where a LiteRT or ONNX export landed.

    Attributes:
        path: the export directory.
        model_path: the `.tflite` / `.onnx` file in it.
        sidecar: the content of its `export.json`.
    """

    path: str
    model_path: str
    sidecar: dict[str, Any]

    @property
    def size_bytes(self) -> int:
        return os.path.getsize(self.model_path)


def check_quantize(quantize: str, supported: Sequence[str] = QUANTIZE_CHOICES) -> str:
    if quantize not in supported:
        raise ValueError(f"quantize must be one of {', '.join(supported)}; got {quantize!r}")
    return quantize


# === The model as a function of ids ===


def keras_output_structure(outputs) -> dict[str, int | None] | None:
    """How `signatures.flatten_outputs` flattened a model's outputs (see the module
    docstring's `keras_outputs`)."""
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


def ids_function(model, input_specs: Mapping[str, tf.TensorSpec] | None = None):
    """`serve_ids` (`signatures.ids_signature`) with its variables frozen into constants,
    as a `tf.function` of the same named inputs returning the same dict.

    Both converters get constants: converting the unfrozen function of the fine-tuned
    MiniLM wrote, without an error, a 0.1 MB `.tflite` that answered NaN (issue 38),
    and tf2onnx freezes anyway. `convert_variables_to_constants_v2` drops the output
    names, which the wrapper puts back.

    Args:
        model: the Keras model (named dict inputs).
        input_specs: `{name: TensorSpec}`; default `signatures.model_input_specs(model)`.
    """
    specs = dict(input_specs or signatures.model_input_specs(model))
    names = tuple(specs)

    def serve_ids(*tensors):
        return signatures.flatten_outputs(
            model(dict(zip(names, tensors, strict=True)), training=False)
        )

    concrete = tf.function(serve_ids).get_concrete_function(*[specs[name] for name in names])
    return frozen_function(concrete, [specs[name] for name in names])


def frozen_function(concrete, input_specs: Sequence[tf.TensorSpec]):
    """`concrete` (a concrete function of positional tensors returning a dict) with its
    variables turned into constants, as a `tf.function` with `input_specs`."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(concrete)
    structure = concrete.structured_outputs

    def call(*tensors):
        return tf.nest.pack_sequence_as(structure, frozen(*tensors))

    return tf.function(call, input_signature=list(input_specs))


def tensor_schema(specs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`{name: {"dtype", "shape"}}` of TensorSpecs (or tensors), -1 for a dynamic size."""
    return {
        name: {
            "dtype": tf.as_dtype(spec.dtype).name,
            "shape": [-1 if size is None else int(size) for size in spec.shape],
        }
        for name, spec in specs.items()
    }


# === Reference inputs: the ids the task feeds its model ===


class _RecordingModel:
    """Stands in for the model in one eager run of the task's serving function and
    keeps the ids each call got (the SavedModel exporter's warmup ids, the same way)."""

    def __init__(self, model):
        self._model = model
        self.calls: list[dict[str, np.ndarray]] = []

    def __call__(self, inputs, *args, **kwargs):
        self.calls.append({key: np.asarray(value) for key, value in dict(inputs).items()})
        return self._model(inputs, *args, **kwargs)


def reference_ids(task, model, preprocessor, texts: Mapping[str, Sequence[str]] | None = None):
    """The ids the task's serving function feeds `model` on `texts` (default: the
    SavedModel exporter's warmup texts), and the Keras model's flat outputs on them.

    Returns:
        `(ids, outputs)`: `{input name: array}` and `{output name: array}`.
    """
    from keras_bert_zoo.serving.export import default_warmup_inputs, serving_preprocessor

    fields = tuple(task.text_fields)
    texts = texts or default_warmup_inputs(fields)
    recorder = _RecordingModel(model)
    answer = task.serving_outputs(recorder, serving_preprocessor(preprocessor))
    answer(**{field: tf.constant(list(texts[field])) for field in fields})
    if not recorder.calls:
        raise ConversionError(f"{task.task_name}: its serving function never called the model")
    names = tuple(signatures.model_input_specs(model))
    ids = {name: recorder.calls[0][name] for name in names}
    outputs = signatures.flatten_outputs(model(ids, training=False))
    return ids, {key: np.asarray(value) for key, value in outputs.items()}


def check_answers(expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], what, exact):
    """Raises `ConversionError` when the converted model's outputs are not the
    Keras model's: float32 to 1e-4, quantized finite and of the same shapes."""
    problems = []
    if sorted(expected) != sorted(got):
        problems.append(f"outputs {sorted(got)}, expected {sorted(expected)}")
    for key in sorted(set(expected) & set(got)):
        want, have = np.asarray(expected[key]), np.asarray(got[key])
        if want.shape != have.shape:
            problems.append(f"{key}: shape {have.shape}, expected {want.shape}")
        elif not np.all(np.isfinite(have)):
            problems.append(f"{key}: not finite")
        elif exact and not np.allclose(want, have, rtol=1e-4, atol=1e-4):
            problems.append(f"{key}: differs by up to {np.max(np.abs(want - have)):.3g}")
    if problems:
        raise ConversionError(
            f"{what}: the converted model does not answer as the Keras model: "
            + "; ".join(problems)
        )


# === The sidecar ===


def sidecar_description(
    *,
    export_format: str,
    input_kind: str,
    signature: str,
    task,
    tokenizer,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    quantize: str,
    keras_outputs,
    **extra,
) -> dict[str, Any]:
    """The sidecar's content (see the module docstring); `extra` keys are added."""
    vocabulary = tokenizer.get_vocabulary()
    index = {token: i for i, token in enumerate(vocabulary)}
    label_names = task.label_names
    return {
        "format_version": SIDECAR_FORMAT_VERSION,
        "format": export_format,
        "model_file": MODEL_FILES[export_format],
        "input": input_kind,
        "signature": signature,
        "inputs": dict(inputs),
        "outputs": dict(outputs),
        "quantize": quantize,
        "text_fields": list(task.text_fields),
        "max_seq_length": int(task.max_seq_length),
        "lowercase": bool(tokenizer.lowercase),
        "max_chars_per_token": int(tokenizer.max_chars_per_token),
        "vocab_file": VOCAB_FILE,
        "vocab_size": len(vocabulary),
        "special_tokens": {token: index[token] for token in _SPECIAL_TOKENS if token in index},
        "label_names": list(label_names) if label_names else None,
        "task": task.description(tokenizer),
        "keras_outputs": keras_outputs,
        "tensorflow_version": tf.__version__,
        **extra,
    }


def write_export(
    output_dir: str, model_bytes_writer, sidecar: dict[str, Any], tokenizer, overwrite: bool
) -> PortableExport:
    """Writes the export directory: `model_bytes_writer(path)` writes the model file;
    the sidecar and the vocabulary go beside it. The directory appears whole or not at
    all; an existing one is refused unless `overwrite`."""
    output_dir = os.path.abspath(os.fspath(output_dir))
    if os.path.lexists(output_dir) and not overwrite:
        raise FileExistsError(
            f"{output_dir} already exists: an export is never overwritten unless asked "
            "(overwrite=True, --overwrite)"
        )
    model_file = sidecar["model_file"]
    with atomic_directory(output_dir, merge=overwrite) as temp_dir:
        model_bytes_writer(os.path.join(temp_dir, model_file))
        with open(os.path.join(temp_dir, VOCAB_FILE), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(token + "\n" for token in tokenizer.get_vocabulary()))
        sidecar = {**sidecar, "model_bytes": os.path.getsize(os.path.join(temp_dir, model_file))}
        write_json_atomically(os.path.join(temp_dir, SIDECAR_FILE), sidecar)
    return PortableExport(output_dir, os.path.join(output_dir, model_file), sidecar)


def resolve_export(path: str) -> tuple[str, dict[str, Any]]:
    """`(export directory, sidecar)` of an export directory or its model file.

    Raises:
        FileNotFoundError: no sidecar beside the file / in the directory.
    """
    path = os.path.abspath(os.fspath(path))
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    sidecar_path = os.path.join(directory, SIDECAR_FILE)
    if not os.path.isfile(sidecar_path):
        raise FileNotFoundError(
            f"{path}: no {SIDECAR_FILE} beside it (not a LiteRT / ONNX export of "
            "tools/export_saved_model.py --format=litert|onnx)"
        )
    with open(sidecar_path, encoding="utf-8") as f:
        try:
            sidecar = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{sidecar_path}: not valid JSON ({error})") from error
    if sidecar.get("format") not in MODEL_FILES:
        raise ValueError(f"{sidecar_path}: not a LiteRT / ONNX export sidecar")
    model_path = os.path.join(directory, sidecar["model_file"])
    if not os.path.isdir(path) and os.path.abspath(path) != model_path:
        raise ValueError(f"{path}: the sidecar beside it describes {sidecar['model_file']}")
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"{model_path}: the model file the sidecar names is missing")
    return directory, sidecar


def is_portable_export(path: str) -> bool:
    """Whether `path` is a LiteRT / ONNX export directory or its model file."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path.endswith((".tflite", ".onnx"))
    return os.path.isfile(os.path.join(path, SIDECAR_FILE)) and not os.path.isfile(
        os.path.join(path, "saved_model.pb")
    )


# === Running an export ===


def litert_interpreter(model_path: str, custom_ops: bool = False, num_threads: int | None = None):
    """A TFLite interpreter on `model_path`; with `custom_ops`, tensorflow-text's TFLite
    kernels registered (what a raw-text `.tflite` needs)."""
    with warnings.catch_warnings():
        # tf.lite.Interpreter warns that it moves to ai-edge-litert; it still runs.
        warnings.simplefilter("ignore")
        if custom_ops:
            import tensorflow_text
            from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

            return InterpreterWithCustomOps(
                model_path=model_path,
                custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
                num_threads=num_threads,
            )
        return tf.lite.Interpreter(model_path=model_path, num_threads=num_threads)


class ModelRunner:
    """`run({input: array}) -> {output: array}` on one export's model file."""

    def __init__(self, model_path: str, sidecar: Mapping[str, Any], num_threads: int | None):
        self.sidecar = sidecar
        if sidecar["format"] == LITERT_FORMAT:
            interpreter = litert_interpreter(
                model_path, custom_ops=sidecar["input"] == TEXT_INPUT, num_threads=num_threads
            )
            self._interpreter = interpreter  # the runner reads its tensors
            self._litert = interpreter.get_signature_runner(sidecar["signature"])
        else:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            if num_threads:
                options.intra_op_num_threads = num_threads
            self._session = onnxruntime.InferenceSession(
                model_path, options, providers=["CPUExecutionProvider"]
            )
            self._output_names = [output.name for output in self._session.get_outputs()]

    def run(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = self.sidecar["inputs"]
        feed = {name: _as_input(feed[name], inputs[name]["dtype"]) for name in inputs}
        if self.sidecar["format"] == LITERT_FORMAT:
            return dict(self._litert(**feed))
        values = self._session.run(self._output_names, feed)
        return dict(zip(self._output_names, values, strict=True))


def _as_input(value, dtype: str) -> np.ndarray:
    if dtype == "string":
        return np.array(
            [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in np.ravel(value)],
            dtype=object,
        ).reshape(np.shape(value))
    return np.asarray(value).astype(dtype)


class _ExportedModelAsKeras:
    """The exported file called as the task's serving function calls a Keras model:
    `model(inputs, training=False)` with tensors in, the Keras model's output structure
    (tensors) out."""

    def __init__(self, runner: ModelRunner):
        self._runner = runner
        sidecar = runner.sidecar
        self._structure = sidecar["keras_outputs"]
        self._slots = sidecar.get("prediction_slots")

    def __call__(self, inputs, training=False):
        feed = {key: np.asarray(value) for key, value in dict(inputs).items()}
        masks = None
        if self._slots is not None and MASKED_LM_POSITIONS in feed:
            # A fixed number of prediction slots (see litert.py): pad, then cut back.
            positions = feed[MASKED_LM_POSITIONS]
            masks = positions.shape[1]
            if masks > self._slots:
                raise ValueError(
                    f"this export answers at most {self._slots} [MASK] per text; a text "
                    f"of the request has {masks}"
                )
            feed[MASKED_LM_POSITIONS] = np.pad(positions, [(0, 0), (0, self._slots - masks)])
        outputs = self._runner.run(feed)
        if masks is not None:
            outputs[MASKED_LM_LOGITS] = outputs[MASKED_LM_LOGITS][:, :masks]
        flat = {key: tf.constant(value) for key, value in outputs.items()}
        return unflatten_outputs(flat, self._structure)


def servable_from_description(description: Mapping[str, Any]):
    """The task (or servable) an export's `task` description rebuilds."""
    from keras_bert_zoo.serving.servables import EncoderServable, MaskedLMServable
    from keras_bert_zoo.tasks import task_from_description

    name = description["task_name"]
    fields = tuple(description.get("text_fields", ("sentence",)))
    if name == EncoderServable.task_name:
        return EncoderServable(description["max_seq_length"], text_fields=fields)
    if name == MaskedLMServable.task_name:
        return MaskedLMServable(
            description["max_seq_length"], top_k=description.get("top_k", 5), text_fields=fields
        )
    return task_from_description(dict(description))


class PortableModel:
    """A LiteRT or ONNX export answering raw text, in Python.

    Args:
        path: the export directory or its model file.
        num_threads: the runtime's threads (default: its own choice).

    Attributes:
        sidecar: the export's `export.json`.
        text_fields: the raw-text inputs, in the task's order.
    """

    def __init__(self, path: str, num_threads: int | None = None):
        self.path, self.sidecar = resolve_export(path)
        self.model_path = os.path.join(self.path, self.sidecar["model_file"])
        self.text_fields = tuple(self.sidecar["text_fields"])
        self._runner = ModelRunner(self.model_path, self.sidecar, num_threads)
        self._answer = None
        if self.sidecar["input"] == IDS_INPUT:
            from keras_bert_zoo.serving.export import serving_preprocessor
            from keras_bert_zoo.text import BertTokenizer

            self.task = servable_from_description(self.sidecar["task"])
            self.tokenizer = BertTokenizer(
                os.path.join(self.path, self.sidecar["vocab_file"]),
                lowercase=self.sidecar["lowercase"],
                max_chars_per_token=self.sidecar["max_chars_per_token"],
            )
            preprocessor = serving_preprocessor(self.task.make_preprocessor(self.tokenizer))
            self._answer = signatures.replace_invalid_utf8(
                self.task.serving_outputs(_ExportedModelAsKeras(self._runner), preprocessor)
            )

    def run_ids(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model file alone on `feed` (`{input: array}`, the sidecar's inputs)."""
        return self._runner.run(feed)

    def __call__(self, **texts) -> dict[str, np.ndarray]:
        """One batch of raw text: `{field: [batch] strings}` -> `{answer: array}`."""
        from keras_bert_zoo.serving.client import check_input_names

        check_input_names(self.model_path, "raw text", texts, self.text_fields)
        if self._answer is None:  # a raw-text model answers by itself
            return self._runner.run(texts)
        outputs = self._answer(**{key: tf.constant(list(value)) for key, value in texts.items()})
        return {key: np.asarray(value) for key, value in outputs.items()}


def load_portable_model(path: str, num_threads: int | None = None) -> PortableModel:
    return PortableModel(path, num_threads=num_threads)


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


def export_finetuned_with(export, finetuned, output_dir: str, **kwargs) -> PortableExport:
    """`export(output_dir, task, model, tokenizer, preprocessor=..., **kwargs)` of a
    fine-tuned directory (`tasks.save_finetuned`) or a loaded `tasks.FinetunedModel`."""
    from keras_bert_zoo.tasks.saving import FinetunedModel, load_finetuned

    if not isinstance(finetuned, FinetunedModel):
        finetuned = load_finetuned(os.fspath(finetuned))
    return export(
        output_dir,
        finetuned.task,
        finetuned.model,
        finetuned.tokenizer,
        preprocessor=finetuned.preprocessor,
        **kwargs,
    )


def export_pretrained_with(
    export,
    checkpoint_dir: str,
    output_dir: str,
    kind: str = "encoder",
    *,
    max_seq_length: int = 128,
    top_k: int = 5,
    text_fields=("sentence",),
    allow_partial: bool = False,
    **kwargs,
) -> PortableExport:
    """`export(output_dir, servable, model, tokenizer, **kwargs)` of a pretrained
    checkpoint as an `"encoder"` or a `"masked_lm"` (see `export.export_pretrained`)."""
    from keras_bert_zoo.serving.servables import pretrained_servable

    servable, model, tokenizer = pretrained_servable(
        checkpoint_dir,
        kind,
        max_seq_length=max_seq_length,
        top_k=top_k,
        text_fields=text_fields,
        allow_partial=allow_partial,
    )
    return export(output_dir, servable, model, tokenizer, **kwargs)


def start_export(output_dir: str, overwrite: bool, task, model, tokenizer, preprocessor):
    """What every portable export starts with: the absolute `output_dir` (refused when it
    exists, unless `overwrite`), the preprocessor, the reference ids and the Keras
    model's answers to them, and the structure of its outputs."""
    output_dir = os.path.abspath(os.fspath(output_dir))
    if os.path.lexists(output_dir) and not overwrite:
        raise FileExistsError(
            f"{output_dir} already exists: an export is never overwritten unless asked "
            "(overwrite=True, --overwrite)"
        )
    if preprocessor is None:
        preprocessor = task.make_preprocessor(tokenizer)
    ids, expected = reference_ids(task, model, preprocessor)
    structure = keras_output_structure(model(ids, training=False))
    return output_dir, preprocessor, ids, expected, structure
