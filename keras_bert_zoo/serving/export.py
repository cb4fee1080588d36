"""Export a task model as a TF Serving SavedModel: raw text in, answers out.

Layout (TF Serving's): `EXPORT_BASE/MODEL_NAME/VERSION/`, `VERSION` an integer
(default: one more than the highest there). A version directory is written under a
temporary name starting with a dot (TF Serving reads integer names only) and renamed
into place once complete and verified, so it appears whole or not at all; an existing
version is never touched unless `overwrite=True`.

```
VERSION/
  saved_model.pb, variables/, fingerprint.pb   tag "serve", signatures below
  assets/vocab.txt                              the tokenizer's vocabulary (an asset)
  assets.extra/tf_serving_warmup_requests       PredictionLog records (warmup.py)
  assets.extra/custom_ops.json                  ops outside core TF, versions (ops.py)
  assets.extra/export.json                      the task, its settings and state, and
                                                each signature's inputs and outputs
```

Signatures (signatures.py): `serving_default` (raw strings -> answers), `serve_ids`
(ids -> raw head outputs) and, for a task that declares a `serving_api`,
`serve_examples` (serialized `tf.Example` -> TF Serving's Classify/Regress API shape).
Label names, sequence length, window stride, thresholds: every setting is a constant
in the graph.

What the exporter reads of the task is the serving contract,
`keras_bert_zoo.tasks.base.Servable`, and nothing else: `text_fields`,
`make_preprocessor`, `serving_outputs`, `label_names` (export.json's "label_names", the
Classify API's classes), `serving_api` (which `serve_examples`, if any; checked against
the traced answers, an answer the API needs that is missing or mis-shaped fails the
export with a `ValueError`) and `description(tokenizer)` (export.json's "task").

Before the rename the exporter reloads the SavedModel from disk, replays every warmup
record on it and compares the answers with the in-memory model's on the same inputs;
an export that does not reproduce them is not published.

Example:

```python
from keras_bert_zoo import serving

exported = serving.export_finetuned("runs/sst2/best", "exports", "sst2")
print(exported.path)  # exports/sst2/1
served = serving.load_served_model(exported.path)
print(served.answer(["a gripping, funny film", "a tedious mess"]))
```
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.head_model import head_models_with
from keras_bert_zoo.models.padding_free import padding_free_inference
from keras_bert_zoo.serving import ops, signatures, warmup
from keras_bert_zoo.serving.precision import model_in_precision, resolve_precision
from keras_bert_zoo.tasks.base import PROBABILITIES_ANSWER, SCORE_ANSWER, Servable
from keras_bert_zoo.text.tokenizer import (
    DEFAULT_EXPORT_TOKENIZER_OPS,
    check_tokenizer_ops,
)
from keras_bert_zoo.text.tokenizer import tokenizer_ops as text_tokenizer_ops
from keras_bert_zoo.utils.atomic import atomic_directory, write_json_atomically

logger = logging.getLogger(__name__)

EXPORT_DESCRIPTION_FILE = "export.json"
FORMAT_VERSION = 1

# Rows of the default warmup batch; field j of row i takes text (i + j) % len. They
# cover the paths a server meets early: plain ASCII, accents and CJK (the tokenizer's
# exact path), an empty string, a mask token, and a text over any sequence length
# (truncation, SQuAD windows).
DEFAULT_WARMUP_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve résumé: 中文 and emoji 🙂 in one sentence.",
    "",
    "Paris is the capital of [MASK].",
    " ".join(["A long text that goes on and on, well past the sequence length."] * 40),
)


class ExportVerificationError(RuntimeError):
    """The reloaded SavedModel did not answer as the in-memory model did."""


@dataclasses.dataclass(frozen=True)
class ExportedModel:
    """Where an export landed and what it holds.

    Attributes:
        path: the version directory (`EXPORT_BASE/MODEL_NAME/VERSION`).
        version: the integer version.
        signatures: `{name: method_name}`.
        op_manifest: the content of `assets.extra/custom_ops.json`.
        description: the content of `assets.extra/export.json`.
    """

    path: str
    version: int
    signatures: dict[str, str]
    op_manifest: dict[str, Any]
    description: dict[str, Any]


# === Versions ===


def existing_versions(model_dir: str) -> list[int]:
    """The integer version directories under `model_dir`, sorted (what TF Serving sees)."""
    if not os.path.isdir(model_dir):
        return []
    return sorted(
        int(name)
        for name in os.listdir(model_dir)
        if name.isdigit() and os.path.isdir(os.path.join(model_dir, name))
    )


def next_version(model_dir: str) -> int:
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def _check_name(model_name: str) -> str:
    if (
        not model_name
        or model_name.startswith(".")
        or "/" in model_name
        or os.sep in model_name
        or model_name.strip() != model_name
    ):
        raise ValueError(
            f"model_name {model_name!r} must be a plain directory name (no path separators, "
            "no leading dot or surrounding spaces)"
        )
    return model_name


# === Serving pieces ===


def serving_preprocessor(preprocessor):
    """The preprocessor the export runs: a fixed-length `BertPreprocessor` becomes one
    padding to the longest input of each request (same answers, and a short request
    no longer pays for `max_seq_length` positions); any other layer as given."""
    from keras_bert_zoo.text.preprocessor import BertPreprocessor

    if type(preprocessor) is BertPreprocessor and preprocessor.packer.pad_to == "fixed":
        return BertPreprocessor(
            preprocessor.tokenizer,
            sequence_length=preprocessor.sequence_length,
            truncate=preprocessor.packer.truncate,
            pad_to="longest",
        )
    return preprocessor


class _RecordingModel:
    """Stands in for the model in one eager call of the serving function and keeps the
    inputs the model got: the ids that `serve_ids`' warmup record sends."""

    def __init__(self, model):
        self._model = model
        self.calls: list[dict[str, tf.Tensor]] = []

    def __call__(self, inputs, *args, **kwargs):
        self.calls.append({key: tf.identity(value) for key, value in dict(inputs).items()})
        return self._model(inputs, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._model, name)


def default_warmup_inputs(text_fields: Sequence[str], rows: int | None = None) -> dict:
    rows = len(DEFAULT_WARMUP_TEXTS) if rows is None else rows
    texts = DEFAULT_WARMUP_TEXTS
    return {
        field: [texts[(row + column) % len(texts)] for row in range(rows)]
        for column, field in enumerate(text_fields)
    }


def _check_warmup_inputs(text_fields, inputs: Mapping[str, Sequence]) -> dict[str, list]:
    missing = [field for field in text_fields if field not in inputs]
    extra = sorted(set(inputs) - set(text_fields))
    if missing or extra:
        raise ValueError(
            f"warmup_inputs must have exactly the text fields {list(text_fields)} "
            f"(missing {missing}, unexpected {extra})"
        )
    lengths = {field: len(inputs[field]) for field in text_fields}
    if len(set(lengths.values())) != 1 or not next(iter(lengths.values())):
        raise ValueError(
            f"warmup_inputs: every field needs the same, non-zero number of texts ({lengths})"
        )
    return {field: list(inputs[field]) for field in text_fields}


def warmup_inputs_from_rows(text_fields, rows, source: str = "warmup rows") -> dict:
    """`{field: [texts]}` from rows of texts in `text_fields` order (a TSV's lines)."""
    fields = tuple(text_fields)
    columns: dict[str, list] = {field: [] for field in fields}
    for number, row in enumerate(rows, start=1):
        if len(row) != len(fields):
            raise ValueError(
                f"{source}, row {number}: {len(row)} texts for the fields {list(fields)}"
            )
        for field, text in zip(fields, row, strict=True):
            columns[field].append(text)
    return columns


def _string_array(values) -> np.ndarray:
    return np.array(
        [value.encode("utf-8") if isinstance(value, str) else bytes(value) for value in values],
        dtype=object,
    )


def _numpy(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {key: np.asarray(value) for key, value in outputs.items()}


def _label_names(task) -> list[str] | None:
    """`task.label_names` as export.json lists them (None for none)."""
    names = task.label_names
    return list(names) if names else None


def signature_schema(saved_model_dir: str) -> dict[str, Any]:
    """`{signature: {"method_name", "inputs", "outputs"}}` read from `saved_model.pb`;
    inputs and outputs map each key to `{"dtype", "shape"}` (-1 for a dynamic size)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())

    def describe(infos):
        described = {}
        for key, info in sorted(infos.items()):
            shape = None
            if not info.tensor_shape.unknown_rank:
                shape = [dim.size for dim in info.tensor_shape.dim]
            described[key] = {"dtype": tf.as_dtype(info.dtype).name, "shape": shape}
        return described

    schema = {}
    for meta_graph in proto.meta_graphs:
        if "serve" not in meta_graph.meta_info_def.tags:
            continue
        for name, signature in sorted(meta_graph.signature_def.items()):
            if name.startswith("__"):  # TF's internal __saved_model_init_op
                continue
            schema[name] = {
                "method_name": signature.method_name,
                "inputs": describe(signature.inputs),
                "outputs": describe(signature.outputs),
            }
    return schema


def _compare(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], what: str):
    problems = []
    if sorted(expected) != sorted(actual):
        return [f"{what}: outputs {sorted(actual)} where {sorted(expected)} were expected"]
    for key in expected:
        want, got = np.asarray(expected[key]), np.asarray(actual[key])
        if want.shape != got.shape:
            problems.append(f"{what}/{key}: shape {got.shape}, expected {want.shape}")
        elif want.dtype.kind in "fc":
            if not np.allclose(want, got, rtol=1e-4, atol=1e-5, equal_nan=True):
                difference = float(np.max(np.abs(want.astype(np.float64) - got)))
                problems.append(f"{what}/{key}: differs by up to {difference:.3g}")
        elif not np.array_equal(want, got):
            problems.append(f"{what}/{key}: {got.tolist()!r:.200} != {want.tolist()!r:.200}")
    return problems


# === Export ===


def export_saved_model(
    export_base: str,
    model_name: str,
    task,
    model,
    tokenizer,
    *,
    preprocessor=None,
    version: int | None = None,
    overwrite: bool = False,
    warmup_inputs: Mapping[str, Sequence[str]] | None = None,
    verify: bool = True,
    tokenizer_ops: str | None = None,
    precision: str = "float32",
    padding_free: str = "auto",
) -> ExportedModel:
    """Writes `EXPORT_BASE/MODEL_NAME/VERSION/` for `model` answering as `task` does.

    Args:
        export_base: the TF Serving base directory (`--model_base_path`'s parent).
        model_name: the model's directory under it (TF Serving's model name).
        task: a `keras_bert_zoo.tasks.base.Servable`: a `keras_bert_zoo.tasks.Task`
            (its `state()` already restored) or a servable from
            `keras_bert_zoo.serving.servables`.
        model: the Keras model `task.build_model` made (trained).
        tokenizer: the `BertTokenizer` the model was trained with.
        preprocessor: the task's preprocessor; default `task.make_preprocessor(tokenizer)`.
        version: integer version; default one more than the highest existing.
        overwrite: replace an existing `version` (refused otherwise). The old
            directory is moved aside right before the new one is renamed in.
        warmup_inputs: `{text_field: [texts]}` for the warmup records; default a
            built-in batch (`DEFAULT_WARMUP_TEXTS`).
        verify: reload the export and compare its answers with the in-memory model's
            before publishing it.
        tokenizer_ops: `"core"` (the graph holds core TensorFlow ops only: it loads
            with no tensorflow-text) or `"tensorflow_text"`; default
            `DEFAULT_EXPORT_TOKENIZER_OPS`. Both tokenize identically; export.json records
            which one the graph holds.
        precision: `"float32"`, `"bfloat16"` (the encoder's weights stored and its
            matmuls run in bfloat16) or `"auto"` (bfloat16 on a GPU or a CPU with
            AMX / AVX512_BF16, else float32; see `precision.py`). export.json records
            the one used.
        padding_free: `"on"`: the encoder runs on the real tokens of a request only
            (`PaddingFreeEncoder`; models whose class declares
            `supports_padding_free_inference`: they read it at [CLS] only); `"off"`: on
            the padded batch; `"auto"`: on for those models, off for the others (see
            `PADDING_FREE_CAPABILITY` for the measured trade-off). export.json records
            the outcome.

    Returns:
        `ExportedModel`.

    Raises:
        TypeError: `task` is not a `Servable`.
        ValueError: the task declares a `serving_api` its answers do not support.
        FileExistsError: the version exists and `overwrite` is false.
        ExportVerificationError: the reloaded export answers differently.
    """
    ops_name = check_tokenizer_ops(tokenizer_ops or DEFAULT_EXPORT_TOKENIZER_OPS)
    used_precision = resolve_precision(precision)
    if padding_free not in PADDING_FREE_CHOICES:
        raise ValueError(
            f"padding_free must be one of {', '.join(PADDING_FREE_CHOICES)}; got {padding_free!r}"
        )
    if preprocessor is None and isinstance(task, Servable):
        preprocessor = task.make_preprocessor(tokenizer)
    with (
        text_tokenizer_ops(ops_name, tokenizer, preprocessor),
        contextlib.ExitStack() as graph_contexts,
    ):
        return _export_saved_model(
            export_base,
            model_name,
            task,
            model,
            tokenizer,
            preprocessor=preprocessor,
            version=version,
            overwrite=overwrite,
            warmup_inputs=warmup_inputs,
            verify=verify,
            tokenizer_ops=ops_name,
            precision=used_precision,
            padding_free=padding_free,
            graph_contexts=graph_contexts,
        )


# Models whose answers read the encoder at [CLS] only can be served padding-free (the
# encoder runs on the real tokens of a request alone; `models.padding_free`), with answers
# equal to the padded graph's to float rounding; their classes declare it
# (`EncoderHeadModel.supports_padding_free_inference`). Heads that read every position
# also expose the padded ones in `serve_ids`, so they keep the padded graph. Measured on
# the served MiniLM classifier, raw movie-review sentences
# (`benchmarks/serving_latency.py`, 2-core AVX512_BF16 CPU): batch 32 (~55% real tokens)
# 1.5x the padded export's throughput in bfloat16 and in float32; batch 1 (no padding to
# skip: the padded graph runs it, behind a check) within 3% of the padded export's p50.
# So `"auto"` takes it for these models in every precision.
PADDING_FREE_CAPABILITY = "supports_padding_free_inference"
PADDING_FREE_CHOICES = ("auto", "on", "off")


def __getattr__(name: str):
    # Deprecated: the list of classes became a capability each class declares; the
    # tuple is derived from the declarations when asked for.
    if name == "PADDING_FREE_MODELS":
        warnings.warn(
            "keras_bert_zoo.serving.export.PADDING_FREE_MODELS is deprecated: read a "
            "model's supports_padding_free_inference; it will be removed in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return head_models_with(PADDING_FREE_CAPABILITY)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serves_padding_free(model, choice: str = "auto") -> bool:
    """Whether an export of `model` runs its encoder padding-free: what `choice`
    (`PADDING_FREE_CHOICES`) asks, where the model's class declares
    `supports_padding_free_inference` (a model that declares nothing, a bare
    `BertEncoder` included, does not).

    Raises:
        ValueError: `choice` is `"on"` for a model that does not declare it.
    """
    supported = bool(getattr(type(model), PADDING_FREE_CAPABILITY, False))
    if choice == "on" and not supported:
        raise ValueError(
            f"padding_free='on' serves models that read the encoder at [CLS] only "
            f"({', '.join(m.__name__ for m in head_models_with(PADDING_FREE_CAPABILITY))}); "
            f"{type(model).__name__} reads every position"
        )
    if choice == "auto":
        return supported
    return choice == "on"


def _export_saved_model(
    export_base,
    model_name,
    task,
    model,
    tokenizer,
    *,
    preprocessor,
    version,
    overwrite,
    warmup_inputs,
    verify,
    tokenizer_ops,
    precision,
    padding_free,
    graph_contexts,
) -> ExportedModel:
    if not isinstance(task, Servable):
        raise TypeError(
            f"export_saved_model serves a keras_bert_zoo.tasks.base.Servable (a Task, "
            f"EncoderServable or MaskedLMServable), got {type(task).__name__}"
        )
    model_dir = os.path.join(os.fspath(export_base), _check_name(model_name))
    if version is None:
        version = next_version(model_dir)
    if isinstance(version, bool) or not isinstance(version, int | np.integer) or version < 0:
        raise ValueError(f"version must be a non-negative integer, got {version!r}")
    version = int(version)
    version_dir = os.path.abspath(os.path.join(model_dir, str(version)))
    if os.path.lexists(version_dir) and not overwrite:
        raise FileExistsError(
            f"{version_dir} already exists: a version is never overwritten unless asked "
            "(overwrite=True, --overwrite), or pick another version"
        )
    # After the checks above: the bfloat16 copy of a large model takes a while.
    padding_free = serves_padding_free(model, padding_free)
    model = model_in_precision(model, precision)
    if padding_free:
        graph_contexts.enter_context(padding_free_inference(model))
    text_fields = tuple(task.text_fields)
    warmup_inputs = _check_warmup_inputs(
        text_fields, warmup_inputs or default_warmup_inputs(text_fields)
    )

    # === The graph ===
    served_preprocessor = serving_preprocessor(
        preprocessor if preprocessor is not None else task.make_preprocessor(tokenizer)
    )
    answer = signatures.replace_invalid_utf8(task.serving_outputs(model, served_preprocessor))
    functions = {
        signatures.DEFAULT_SIGNATURE: signatures.text_signature(text_fields, answer),
        signatures.IDS_SIGNATURE: signatures.ids_signature(model),
    }
    default_outputs = functions[signatures.DEFAULT_SIGNATURE].get_concrete_function()
    label_names = _label_names(task)
    api = signatures.check_serving_api(
        task.task_name, task.serving_api, default_outputs.structured_outputs, label_names
    )
    method_names = {}
    if api is not None:
        functions[signatures.EXAMPLES_SIGNATURE] = signatures.examples_signature(
            text_fields, answer, api, label_names
        )
        method_names[signatures.EXAMPLES_SIGNATURE] = (
            signatures.CLASSIFY_METHOD if api == "classify" else signatures.REGRESS_METHOD
        )
    module = signatures.serving_module(
        functions, preprocessor=served_preprocessor, tokenizer=tokenizer
    )

    # === Warmup requests and the answers they must get ===
    recorder = _RecordingModel(model)
    text_feed = {field: _string_array(values) for field, values in warmup_inputs.items()}
    eager_answer = signatures.replace_invalid_utf8(
        task.serving_outputs(recorder, served_preprocessor)
    )
    text_tensors = {field: tf.constant(value) for field, value in text_feed.items()}
    expected_answers = _numpy(
        signatures._check_outputs(eager_answer(**text_tensors), "serving_outputs")
    )
    if precision != "float32":
        # In bfloat16 the graph's fused kernels round differently from eager ops: the
        # reload is checked against the same graph run here (tests check the answers
        # against the float32 model's).
        expected_answers = _numpy(
            functions[signatures.DEFAULT_SIGNATURE](*[text_tensors[f] for f in text_fields])
        )
    logs = [
        warmup.predict_log(model_name, signatures.DEFAULT_SIGNATURE, text_feed),
        warmup.predict_log(
            model_name,
            signatures.DEFAULT_SIGNATURE,
            {field: value[:1] for field, value in text_feed.items()},
        ),
    ]
    expected = [expected_answers, None]
    if recorder.calls:
        names = tuple(signatures.model_input_specs(model))
        ids = {name: recorder.calls[0][name].numpy() for name in names}
        logs.append(warmup.predict_log(model_name, signatures.IDS_SIGNATURE, ids))
        if precision != "float32":
            expected.append(_numpy(functions[signatures.IDS_SIGNATURE](*[ids[n] for n in names])))
        else:
            expected.append(_numpy(signatures.flatten_outputs(model(ids, training=False))))
    if api is not None:
        logs.append(
            warmup.example_log(model_name, signatures.EXAMPLES_SIGNATURE, api, warmup_inputs)
        )
        if api == "classify":
            names = np.array([str(name).encode("utf-8") for name in label_names], object)
            expected.append(
                {
                    "classes": np.tile(names, (len(text_feed[text_fields[0]]), 1)),
                    "scores": expected_answers[PROBABILITIES_ANSWER],
                }
            )
        else:
            expected.append({"outputs": expected_answers[SCORE_ANSWER]})

    description = {
        "format_version": FORMAT_VERSION,
        "model_name": model_name,
        "version": version,
        "text_fields": list(text_fields),
        "task": task.description(tokenizer),
        "label_names": label_names,
        "tokenizer_ops": tokenizer_ops,
        "precision": precision,
        "padding_free": padding_free,
    }

    # === Write, verify, publish ===
    aside = None
    with atomic_directory(version_dir, merge=overwrite) as temp_dir:
        logger.info("Saving the SavedModel %s (tracing its signatures)", version_dir)
        tf.saved_model.save(module, temp_dir, signatures=functions)
        signatures.set_method_names(temp_dir, method_names)
        warmup.write_warmup_records(temp_dir, logs)
        manifest = write_export_manifests(temp_dir, description)
        if verify:
            logger.info("Loading the export back to check its answers against the model's")
            _verify(temp_dir, expected)
        if overwrite and os.path.lexists(version_dir):
            aside = tempfile.mkdtemp(dir=model_dir, prefix=f".{version}.replaced-")
            os.rename(version_dir, os.path.join(aside, str(version)))
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return ExportedModel(
        path=version_dir,
        version=version,
        signatures={name: info["method_name"] for name, info in description["signatures"].items()},
        op_manifest=manifest,
        description=description,
    )


def write_export_manifests(saved_model_dir: str, description: dict[str, Any]) -> dict[str, Any]:
    """Writes a saved SavedModel's `assets.extra/custom_ops.json` (the ops outside core
    TensorFlow it needs, `ops.py`) and `assets.extra/export.json` (`description`, to
    which it adds each signature's inputs and outputs and the TensorFlow and
    tensorflow-text versions it was written with; `description` is updated in place).

    Args:
        saved_model_dir: str. The directory `tf.saved_model.save` wrote.
        description: dict, what export.json records of the export (JSON values).

    Returns:
        The op manifest (custom_ops.json's content).
    """
    manifest = ops.write_op_manifest(saved_model_dir)
    description["signatures"] = signature_schema(saved_model_dir)
    description["tensorflow_version"] = manifest["tensorflow_version"]
    description["tensorflow_text_version"] = manifest["tensorflow_text_version"]
    write_json_atomically(
        os.path.join(saved_model_dir, ops.EXTRA_DIRECTORY, EXPORT_DESCRIPTION_FILE), description
    )
    return manifest


def _verify(saved_model_dir: str, expected: Sequence[Mapping[str, np.ndarray] | None]) -> None:
    loaded = tf.saved_model.load(saved_model_dir)
    results = warmup.replay(loaded, warmup.read_warmup_records(saved_model_dir))
    problems = []
    for (name, outputs), want in zip(results, expected, strict=True):
        if want is not None:
            problems += _compare(want, outputs, name)
    del loaded
    if problems:
        raise ExportVerificationError(
            f"{saved_model_dir}: the reloaded SavedModel answers differently from the "
            "in-memory model:\n  " + "\n  ".join(problems)
        )


def export_finetuned(
    finetuned,
    export_base: str,
    model_name: str | None = None,
    **kwargs,
) -> ExportedModel:
    """Exports a fine-tuned model directory (`tasks.save_finetuned`, what
    `tools/run_finetuning.py` writes) or a loaded `tasks.FinetunedModel`.

    `model_name` defaults to the task name with `/` replaced by `_` (`glue_sst2`).
    Other keywords go to `export_saved_model`.
    """
    from keras_bert_zoo.tasks.saving import FinetunedModel, load_finetuned

    if not isinstance(finetuned, FinetunedModel):
        finetuned = load_finetuned(os.fspath(finetuned))
    name = model_name or finetuned.task.task_name.replace("/", "_")
    return export_saved_model(
        export_base,
        name,
        finetuned.task,
        finetuned.model,
        finetuned.tokenizer,
        preprocessor=finetuned.preprocessor,
        **kwargs,
    )


def read_export_description(saved_model_dir: str) -> dict[str, Any]:
    """The content of `assets.extra/export.json`."""
    path = os.path.join(saved_model_dir, ops.EXTRA_DIRECTORY, EXPORT_DESCRIPTION_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{saved_model_dir}: no {ops.EXTRA_DIRECTORY}/{EXPORT_DESCRIPTION_FILE} "
            "(not exported by keras_bert_zoo.serving)"
        )
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from error


def export_pretrained(
    checkpoint_dir: str,
    export_base: str,
    model_name: str,
    kind: str = "encoder",
    *,
    max_seq_length: int = 128,
    top_k: int = 5,
    text_fields=("sentence",),
    allow_partial: bool = False,
    **kwargs,
) -> ExportedModel:
    """Exports a pretrained checkpoint (Google or Hugging Face layout, with its
    `vocab.txt`) as an `"encoder"` (pooled and sequence outputs) or a `"masked_lm"`
    (top-k fill-ins for each `[MASK]`; the checkpoint needs its MLM head unless
    `allow_partial`, which leaves missing heads random). Other keywords go to
    `export_saved_model`.
    """
    from keras_bert_zoo.serving.servables import pretrained_servable

    servable, model, tokenizer = pretrained_servable(
        checkpoint_dir,
        kind,
        max_seq_length=max_seq_length,
        top_k=top_k,
        text_fields=text_fields,
        allow_partial=allow_partial,
    )
    return export_saved_model(export_base, model_name, servable, model, tokenizer, **kwargs)
