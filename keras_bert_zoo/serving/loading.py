"""Loading an export back: a served SavedModel, or a LiteRT / ONNX export, called on
raw text.

* `load_served_model` (`ServedModel`): a SavedModel version loaded with
  `tf.saved_model.load`, one signature called on `{field: [batch] strings}`, or on rows
  (`answer`).
* `load_portable_model` (`PortableModel`): a LiteRT or ONNX export (its directory or
  model file) answering raw text in Python: for an ids-in export the text is tokenized
  with the sidecar's vocabulary and casing by the task's own preprocessor, and the
  task's serving function (the one the SavedModel's `serving_default` holds) turns the
  model's outputs into answers, so the answers have the SavedModel's keys and meaning.
  A raw-text `.tflite` answers by itself.

Both refuse a request whose inputs are not the export's in one line
(`check_input_names`), before anything runs.

Example:

```python
from keras_bert_zoo import serving

served = serving.load_served_model("exports/sst2/1")
print(served.answer(["a gripping, funny film", "a tedious mess"]))
print(serving.load_portable_model("exports/sst2_onnx")(sentence=["a tedious mess"]))
```
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving import common, signatures
from keras_bert_zoo.serving.layout import (
    IDS_INPUT,
    LITERT_FORMAT,
    MASKED_LM_LOGITS,
    MASKED_LM_POSITIONS,
    MODEL_FILES,
    SIDECAR_FILE,
    TEXT_INPUT,
    read_description,
    read_export_description,
    unflatten_outputs,
)
from keras_bert_zoo.utils import extras
from keras_bert_zoo.utils.errors import UserError

# === Served SavedModels ===


def python_value(value: Any) -> Any:
    """A numpy value as plain Python (arrays as lists, bytes decoded as UTF-8)."""
    if isinstance(value, np.ndarray):
        return [python_value(item) for item in value]
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
        order = read_export_description(path).get("text_fields", [])
    except (FileNotFoundError, ValueError):
        order = []
    fields = tuple(name for name in order if name in names)
    return fields + tuple(sorted(names - set(fields)))


def check_input_names(path: str, signature: str, given: Iterable[str], takes: Sequence[str]):
    """Refuses a request whose input names are not `takes`, the signature's: a
    `UserError` naming what is unknown or missing, and what the export takes."""
    given = list(given)
    unknown = [name for name in given if name not in takes]
    missing = [name for name in takes if name not in given]
    # The unknown names are the likelier mistake (a misspelt field), and the list of
    # what the export takes already says what is missing.
    what, names = ("unknown", unknown) if unknown else ("missing", missing)
    if not names:
        return
    plural = "s" if len(names) > 1 else ""
    raise UserError(
        f"{path} ({signature}): {what} input{plural} {', '.join(repr(n) for n in names)}; "
        f"the export takes: {', '.join(takes)}"
    )


def check_request(path: str, signature: str, given: Iterable[str]) -> None:
    """Refuses a request the export cannot answer (no such signature, inputs that are
    not the signature's) before anything is loaded: the signatures are read from
    saved_model.pb alone."""
    schema = signatures.signature_schema(path)
    if signature not in schema:
        raise UserError(f"{path}: no signature {signature!r}; the export has: {', '.join(schema)}")
    check_input_names(path, signature, given, _input_order(path, schema[signature]["inputs"]))


class ServedModel:
    """An export loaded with `tf.saved_model.load`, called on raw text.

    Args:
        path: a version directory (`EXPORT_BASE/MODEL_NAME/VERSION`).
        signature: the signature to call (`serving_default`).

    Attributes:
        text_fields: the signature's string inputs, in the task's order.
    """

    def __init__(self, path: str, signature: str = signatures.DEFAULT_SIGNATURE):
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
                    raise UserError(f"row {position}: missing text field(s) {missing}")
                row = tuple(row[field] for field in self.text_fields)
            if len(row) != len(self.text_fields):
                raise UserError(
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
            {key: python_value(value[index]) for key, value in outputs.items()}
            for index in range(len(rows))
        ]


def load_served_model(path: str, signature: str = signatures.DEFAULT_SIGNATURE) -> ServedModel:
    """A SavedModel version loaded, its `signature` called on raw text."""
    return ServedModel(path, signature)


# === LiteRT and ONNX exports ===


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
    sidecar = read_description(sidecar_path)
    if sidecar.get("format") not in MODEL_FILES:
        raise UserError(f"{sidecar_path}: not a LiteRT / ONNX export sidecar")
    model_path = os.path.join(directory, sidecar["model_file"])
    if not os.path.isdir(path) and os.path.abspath(path) != model_path:
        raise UserError(f"{path}: the sidecar beside it describes {sidecar['model_file']}")
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"{model_path}: the model file the sidecar names is missing")
    return directory, sidecar


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
            extras.require("onnx", f"running {model_path}", modules=("onnxruntime",))
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
                raise UserError(
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
    from keras_bert_zoo.serving.servables import (
        EncoderServable,
        MaskedLMServable,
        SentenceEmbeddingServable,
    )
    from keras_bert_zoo.tasks import task_from_description

    name = description["task_name"]
    fields = tuple(description.get("text_fields", ("sentence",)))
    if name == EncoderServable.task_name:
        return EncoderServable(description["max_seq_length"], text_fields=fields)
    if name == MaskedLMServable.task_name:
        return MaskedLMServable(
            description["max_seq_length"], top_k=description.get("top_k", 5), text_fields=fields
        )
    if name == SentenceEmbeddingServable.task_name:
        return SentenceEmbeddingServable.from_description(description)
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
            from keras_bert_zoo.text import BertTokenizer

            self.task = servable_from_description(self.sidecar["task"])
            self.tokenizer = BertTokenizer(
                os.path.join(self.path, self.sidecar["vocab_file"]),
                lowercase=self.sidecar["lowercase"],
                max_chars_per_token=self.sidecar["max_chars_per_token"],
            )
            preprocessor = common.serving_preprocessor(self.task.make_preprocessor(self.tokenizer))
            self._answer = signatures.replace_invalid_utf8(
                self.task.serving_outputs(_ExportedModelAsKeras(self._runner), preprocessor)
            )

    def run_ids(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model file alone on `feed` (`{input: array}`, the sidecar's inputs)."""
        return self._runner.run(feed)

    def __call__(self, **texts) -> dict[str, np.ndarray]:
        """One batch of raw text: `{field: [batch] strings}` -> `{answer: array}`."""
        check_input_names(self.model_path, "raw text", texts, self.text_fields)
        if self._answer is None:  # a raw-text model answers by itself
            return self._runner.run(texts)
        outputs = self._answer(**{key: tf.constant(list(value)) for key, value in texts.items()})
        return {key: np.asarray(value) for key, value in outputs.items()}


def load_portable_model(path: str, num_threads: int | None = None) -> PortableModel:
    """A LiteRT or ONNX export (its directory or model file) answering raw text."""
    return PortableModel(path, num_threads=num_threads)
