"""What the LiteRT and ONNX exports share: the frozen ids function, the reference ids,
the sidecar and the export directory.

An export is a directory (written under a temporary name, then renamed into place):

```
OUTPUT_DIR/
  model.tflite | model.onnx   the model (formats/litert.py, formats/onnx.py)
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

`loading.load_portable_model` answers raw text with an export.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving import common, signatures
from keras_bert_zoo.serving.exporter import Exporter, Option
from keras_bert_zoo.serving.layout import (
    MODEL_FILES,
    SIDECAR_FILE,
    VOCAB_FILE,
    keras_output_structure,
)
from keras_bert_zoo.utils.atomic import write_json_atomically
from keras_bert_zoo.utils.deprecation import moved_names
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

SIDECAR_FORMAT_VERSION = 1
QUANTIZE_NONE = "none"
QUANTIZE_DYNAMIC_INT8 = "dynamic_int8"
QUANTIZE_FLOAT16 = "float16"
QUANTIZE_CHOICES = (QUANTIZE_NONE, QUANTIZE_DYNAMIC_INT8, QUANTIZE_FLOAT16)
_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

QUANTIZE = Option(
    "quantize",
    QUANTIZE_NONE,
    "litert / onnx: none (float32), dynamic_int8 (int8 weights, about a quarter of the "
    "size) or float16 (litert only: float16 weights).",
    choices=QUANTIZE_CHOICES,
)


class ConversionError(UserError):
    """A model that the converter cannot turn into the asked format (one line naming
    the family and the reason). A `UserError`, so a tool ends on it with one line."""


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
        raise UserError(f"quantize must be one of {', '.join(supported)}; got {quantize!r}")
    return quantize


# === The model as a function of ids ===


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

    concrete = tf.function(serve_ids, autograph=False).get_concrete_function(
        *[specs[name] for name in names]
    )
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

    return tf.function(call, input_signature=list(input_specs), autograph=False)


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


def reference_ids(task, model, preprocessor, texts: Mapping[str, Sequence[str]] | None = None):
    """The ids the task's serving function feeds `model` on `texts` (default the
    warmup texts, `common.DEFAULT_WARMUP_TEXTS`), and the Keras model's flat outputs
    on them (`common.reference_run`).

    Returns:
        `(ids, outputs)`: `{input name: array}` and `{output name: array}`.
    """
    reference = common.reference_run(task, model, preprocessor, texts)
    if reference.ids is None:
        raise ConversionError(f"{task.task_name}: its serving function never called the model")
    return reference.ids, reference.outputs


def check_answers(expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], what, exact):
    """Raises `ConversionError` when the converted model's outputs are not the
    Keras model's: float32 to 1e-4, quantized finite and of the same shapes."""
    problems = common.output_problems(expected, got, atol=1e-4, close=exact, finite=True)
    if problems:
        raise ConversionError(
            f"{what}: the converted model does not answer as the Keras model: "
            + "; ".join(problems)
        )


def start_export(output_dir: str, overwrite: bool, task, model, tokenizer, preprocessor):
    """What every portable export starts with: the absolute `output_dir` (refused when it
    exists, unless `overwrite`), the preprocessor, the reference ids and the Keras
    model's answers to them, and the structure of its outputs."""
    output_dir = common.check_new_output(output_dir, overwrite)
    if preprocessor is None:
        preprocessor = task.make_preprocessor(tokenizer)
    with stage(logger, "Answering the warmup texts with the model, for the checks"):
        ids, expected = reference_ids(task, model, preprocessor)
        structure = keras_output_structure(model(ids, training=False))
    return output_dir, preprocessor, ids, expected, structure


# === The sidecar and the directory ===


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
    return {
        "format_version": SIDECAR_FORMAT_VERSION,
        "format": export_format,
        "model_file": MODEL_FILES[export_format],
        "input": input_kind,
        "signature": signature,
        "inputs": dict(inputs),
        "outputs": dict(outputs),
        "quantize": quantize,
        **common.task_fields(task, tokenizer),
        "max_seq_length": int(task.max_seq_length),
        "lowercase": bool(tokenizer.lowercase),
        "max_chars_per_token": int(tokenizer.max_chars_per_token),
        "vocab_file": VOCAB_FILE,
        "vocab_size": len(vocabulary),
        "special_tokens": {token: index[token] for token in _SPECIAL_TOKENS if token in index},
        "keras_outputs": keras_outputs,
        "tensorflow_version": tf.__version__,
        **extra,
    }


def write_export(
    output_dir: str, model_bytes_writer, sidecar: dict[str, Any], tokenizer, overwrite: bool
) -> PortableExport:
    """Writes the export directory: `model_bytes_writer(path)` writes the model file
    (and verifies it); the sidecar and the vocabulary go beside it. The directory
    appears whole or not at all; an existing one is refused unless `overwrite`, which
    replaces the export's files in it."""
    model_file = sidecar["model_file"]
    with common.publish_directory(output_dir, overwrite=overwrite, replace=False) as temp_dir:
        model_bytes_writer(os.path.join(temp_dir, model_file))
        with open(os.path.join(temp_dir, VOCAB_FILE), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(token + "\n" for token in tokenizer.get_vocabulary()))
        sidecar = {**sidecar, "model_bytes": os.path.getsize(os.path.join(temp_dir, model_file))}
        write_json_atomically(os.path.join(temp_dir, SIDECAR_FILE), sidecar)
    output_dir = os.path.abspath(os.fspath(output_dir))
    return PortableExport(output_dir, os.path.join(output_dir, model_file), sidecar)


class PortableExporter(Exporter):
    """What the LiteRT and ONNX exporters share: one directory (`OUTPUT_DIR`) with the
    model file, its sidecar and the vocabulary, reported as the tool prints it."""

    output = common.OUTPUT_DIR

    def report(self, exported: PortableExport) -> str:
        from keras_bert_zoo.serving.client import describe_portable

        return (
            f"exported {self.format} to {exported.model_path}\n{describe_portable(exported.path)}"
        )


# Moved: reading and running an export (`loading.py`), the names of its files
# (`layout.py`), describing one (`client.py`), the fine-tuned / pretrained wrappers
# (`serving.export` takes any source).
__getattr__ = moved_names(
    __name__,
    [
        "keras_bert_zoo.serving.layout",
        "keras_bert_zoo.serving.loading",
        "keras_bert_zoo.serving.client",
        "keras_bert_zoo.serving.deprecated",
    ],
    only=[
        "IDS_INPUT",
        "TEXT_INPUT",
        "LITERT_FORMAT",
        "ONNX_FORMAT",
        "MASKED_LM_POSITIONS",
        "MASKED_LM_LOGITS",
        "unflatten_outputs",
        "is_portable_export",
        "resolve_export",
        "litert_interpreter",
        "ModelRunner",
        "servable_from_description",
        "PortableModel",
        "load_portable_model",
        "describe_portable",
        "export_finetuned_with",
        "export_pretrained_with",
    ],
)
