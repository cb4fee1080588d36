"""The TF Serving SavedModel of a task model: raw text in, answers out.

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
(ids -> raw head outputs), the task's `extra_signatures` (raw strings, as
`serving_default`: an embedding model's `query` and `document`, which prepend their
prompts) and, for a task that declares a `serving_api`, `serve_examples` (serialized
`tf.Example` -> TF Serving's Classify/Regress API shape). The model they run is the
task's `serving_model` of the trained one (an embedding model's: ids -> `embedding`,
cut to `truncate_dim` components when given).
Label names, sequence length, window stride, thresholds: every setting is a constant
in the graph.

What the exporter reads of the task is the serving contract,
`keras_bert_zoo.tasks.servable.Servable`, and nothing else: `text_fields`,
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

exported = serving.export("runs/sst2/best", "exports", model_name="sst2")
print(exported.path)  # exports/sst2/1
served = serving.load_served_model(exported.path)
print(served.answer(["a gripping, funny film", "a tedious mess"]))
```
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.padding_free import padding_free_inference
from keras_bert_zoo.serving import common, signatures, warmup
from keras_bert_zoo.serving.exporter import Exporter, Option, OptionError
from keras_bert_zoo.serving.layout import existing_versions
from keras_bert_zoo.serving.padding_free import (
    PADDING_FREE,
    check_padding_free_choice,
    serves_padding_free,
)
from keras_bert_zoo.serving.precision import (
    FLOAT32,
    PRECISIONS,
    model_in_precision,
    resolve_precision,
)
from keras_bert_zoo.serving.sources import ENCODER, MASKED_LM, SENTENCE_EMBEDDING, TASK
from keras_bert_zoo.tasks.servable import PROBABILITIES_ANSWER, SCORE_ANSWER, Servable
from keras_bert_zoo.text.tokenizer import DEFAULT_EXPORT_TOKENIZER_OPS, check_tokenizer_ops
from keras_bert_zoo.text.tokenizer import tokenizer_ops as text_tokenizer_ops
from keras_bert_zoo.utils.errors import UserError
from keras_bert_zoo.utils.stages import stage

logger = logging.getLogger(__name__)

EXPORT_BASE = Option("export_base", None, "TF Serving base directory.")
MODEL_NAME = Option(
    "model_name", None, "Model directory under --export_base (default: the task name)."
)
VERSION = Option("version", None, "Version number (default: highest + 1).", type=int)
WARMUP_FILE = Option(
    "warmup_file",
    None,
    "UTF-8 TSV of warmup rows, one text field per column in the task's order "
    "(default: built-in texts).",
)
WARMUP_INPUTS = Option(
    "warmup_inputs",
    None,
    "`{text_field: [texts]}` for the warmup records (default: DEFAULT_WARMUP_TEXTS).",
    flag=False,
)
PRECISION = Option(
    "precision",
    "float32",
    "Precision the export computes in: bfloat16 stores the encoder's weights in bfloat16 "
    "and runs its matmuls in bfloat16; auto picks bfloat16 on a GPU or a CPU with AMX / "
    "AVX512_BF16, float32 elsewhere.",
    choices=PRECISIONS,
)


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
        raise UserError(
            f"model_name {model_name!r} must be a plain directory name (no path separators, "
            "no leading dot or surrounding spaces)"
        )
    return model_name


def _version_dir(export_base, model_name, version, overwrite) -> tuple[str, int]:
    """The new version's directory and number, refused when it exists (unless
    `overwrite`) or is not a non-negative integer."""
    model_dir = os.path.join(os.fspath(export_base), _check_name(model_name))
    if version is None:
        version = next_version(model_dir)
    if isinstance(version, bool) or not isinstance(version, int | np.integer) or version < 0:
        raise UserError(f"version must be a non-negative integer, got {version!r}")
    version_dir = os.path.abspath(os.path.join(model_dir, str(int(version))))
    if os.path.lexists(version_dir) and not overwrite:
        raise FileExistsError(
            f"{version_dir} already exists: a version is never overwritten unless asked "
            "(overwrite=True, --overwrite), or pick another version"
        )
    return version_dir, int(version)


# === The graph ===


@dataclasses.dataclass
class _Graph:
    """The signatures of the export and what they were built from."""

    functions: dict[str, Any]  # signature name -> tf.function
    method_names: dict[str, str]  # signatures that are not Predict's
    api: str | None  # the task's TF Serving example API, if any
    label_names: list[str] | None
    preprocessor: Any  # the served preprocessor
    module: tf.Module
    extra: dict[str, Any]  # the task's other raw-text signatures: name -> answer function


def _build_graph(task, model, tokenizer, preprocessor) -> _Graph:
    """`serving_default`, `serve_ids` and, for a task with a `serving_api`,
    `serve_examples`, in a module that tracks the tokenizer and the variables."""
    served_preprocessor = common.serving_preprocessor(preprocessor)
    text_fields = tuple(task.text_fields)
    answer = signatures.traced_once(
        text_fields,
        signatures.replace_invalid_utf8(task.serving_outputs(model, served_preprocessor)),
    )
    functions = {
        signatures.DEFAULT_SIGNATURE: signatures.text_signature(text_fields, answer),
        signatures.IDS_SIGNATURE: signatures.ids_signature(model),
    }
    extra = _extra_signatures(task, model, served_preprocessor)
    for name, extra_answer in extra.items():
        functions[name] = signatures.text_signature(text_fields, extra_answer)
    default_outputs = functions[signatures.DEFAULT_SIGNATURE].get_concrete_function()
    label_names = common.label_names(task)
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
    return _Graph(functions, method_names, api, label_names, served_preprocessor, module, extra)


def _extra_signatures(task, model, preprocessor) -> dict[str, Any]:
    """The task's raw-text signatures beside `serving_default` (`extra_signatures`),
    invalid UTF-8 replaced as in `serving_default`; refused when one takes a name the
    export gives another signature."""
    extra = task.extra_signatures(model, preprocessor)
    reserved = (
        signatures.DEFAULT_SIGNATURE,
        signatures.IDS_SIGNATURE,
        signatures.EXAMPLES_SIGNATURE,
    )
    taken = sorted(set(extra) & set(reserved))
    if taken:
        raise UserError(f"{task.task_name}: extra signatures {taken} take the export's own names")
    return {name: signatures.replace_invalid_utf8(fn) for name, fn in extra.items()}


# === Warmup requests and the answers they must get ===


def _warmup_requests(model_name, task, model, graph: _Graph, texts, precision):
    """`(PredictionLog records, the answers each must get or None)`: `serving_default`
    on the warmup batch and on its first row, `serve_ids` on the ids the model got, and
    `serve_examples` on the same texts."""
    text_fields = tuple(task.text_fields)
    reference = common.reference_run(task, model, graph.preprocessor, texts)
    feed = reference.texts
    answers = reference.answers
    if precision != FLOAT32:
        # In bfloat16 the graph's fused kernels round differently from eager ops: the
        # reload is checked against the same graph run here (tests check the answers
        # against the float32 model's).
        default = graph.functions[signatures.DEFAULT_SIGNATURE]
        answers = common.numpy_outputs(default(*[tf.constant(feed[f]) for f in text_fields]))
    first_row = {field: value[:1] for field, value in feed.items()}
    logs = [
        warmup.predict_log(model_name, signatures.DEFAULT_SIGNATURE, feed),
        warmup.predict_log(model_name, signatures.DEFAULT_SIGNATURE, first_row),
    ]
    expected = [answers, None]
    for name, extra_answer in graph.extra.items():
        logs.append(warmup.predict_log(model_name, name, feed))
        if precision != FLOAT32:
            extra_function = graph.functions[name]
            outputs = extra_function(*[tf.constant(feed[f]) for f in text_fields])
        else:
            outputs = extra_answer(**{f: tf.constant(feed[f]) for f in text_fields})
        expected.append(common.numpy_outputs(outputs))
    if reference.ids is not None:
        ids = reference.ids
        logs.append(warmup.predict_log(model_name, signatures.IDS_SIGNATURE, ids))
        if precision != FLOAT32:
            serve_ids = graph.functions[signatures.IDS_SIGNATURE]
            expected.append(common.numpy_outputs(serve_ids(*ids.values())))
        else:
            expected.append(reference.outputs)
    if graph.api is not None:
        logs.append(warmup.example_log(model_name, signatures.EXAMPLES_SIGNATURE, graph.api, texts))
        if graph.api == "classify":
            names = np.array([str(name).encode("utf-8") for name in graph.label_names], object)
            rows = len(feed[text_fields[0]])
            expected.append(
                {"classes": np.tile(names, (rows, 1)), "scores": answers[PROBABILITIES_ANSWER]}
            )
        else:
            expected.append({"outputs": answers[SCORE_ANSWER]})
    return logs, expected


# === Write, verify, publish ===


def _verify(saved_model_dir: str, expected: Sequence[Mapping[str, np.ndarray] | None]) -> None:
    loaded = tf.saved_model.load(saved_model_dir)
    results = warmup.replay(loaded, warmup.read_warmup_records(saved_model_dir))
    problems = []
    for (name, outputs), want in zip(results, expected, strict=True):
        if want is not None:
            problems += common.output_problems(want, outputs, name)
    del loaded
    if problems:
        raise common.ExportVerificationError(
            f"{saved_model_dir}: the reloaded SavedModel answers differently from the "
            "in-memory model:\n  " + "\n  ".join(problems)
        )


def _publish(version_dir, graph: _Graph, logs, expected, description, *, overwrite, verify):
    """Saves, writes the warmup records and manifests, verifies, then renames into
    place; returns the op manifest."""
    with common.publish_directory(version_dir, overwrite=overwrite) as temp_dir:
        with stage(logger, "Writing the SavedModel %s (tracing its signatures)", version_dir):
            tf.saved_model.save(
                graph.module, temp_dir, signatures=signatures.concrete_signatures(graph.functions)
            )
        signatures.set_method_names(temp_dir, graph.method_names)
        warmup.write_warmup_records(temp_dir, logs)
        manifest = common.write_export_manifests(temp_dir, description)
        if verify:
            with stage(logger, "Loading the export back to check its answers against the model's"):
                _verify(temp_dir, expected)
    return manifest


def _servable(task):
    if not isinstance(task, Servable):
        raise TypeError(
            f"a SavedModel serves a keras_bert_zoo.tasks.servable.Servable (a Task, "
            f"EncoderServable or MaskedLMServable), got {type(task).__name__}"
        )
    return task


def _served_model(model, precision: str, padding_free: str, graph_contexts):
    """`(the model the graph runs, whether its encoder runs padding-free)`: `model` in
    `precision`, padding-free inside `graph_contexts` where `padding_free` asks."""
    # After the option checks: the bfloat16 copy of a large model takes a while.
    padding_free = serves_padding_free(model, padding_free)
    model = model_in_precision(model, precision)
    if padding_free:
        graph_contexts.enter_context(padding_free_inference(model))
    return model, padding_free


class SavedModelExporter(Exporter):
    """A TF Serving SavedModel version (see the module docstring).

    Options: `model_name` (default: the source's, the task name of a fine-tuned
    model), `version` (default one more than the highest existing), `overwrite`,
    `warmup_file` / `warmup_inputs` (default `common.DEFAULT_WARMUP_TEXTS`),
    `precision` (`precision.py`), `padding_free` (`padding_free.py`), `truncate_dim`
    (embedding models: the vectors' first components, `common.TRUNCATE_DIM`), `tokenizer_ops`
    (`"core"`: the graph holds core TensorFlow ops only, it loads with no
    tensorflow-text) and `verify` (reload and compare before publishing).
    """

    name = "saved_model"
    title = "SavedModel"
    summary = "a TF Serving SavedModel (raw text in)"
    kinds = (TASK, ENCODER, MASKED_LM, SENTENCE_EMBEDDING)
    output = EXPORT_BASE
    options = (
        MODEL_NAME,
        VERSION,
        common.OVERWRITE,
        WARMUP_FILE,
        PRECISION,
        PADDING_FREE,
        common.TOKENIZER_OPS,
        common.TRUNCATE_DIM,
        WARMUP_INPUTS,
        common.VERIFY,
    )

    def check(self, values, *, kind, source):
        if values["model_name"] is None and not source.names_itself:
            if kind is None:
                raise OptionError("this source names no model: give {model_name}")
            raise OptionError(f"{{kind}}={kind} needs {{model_name}}")

    def export(
        self,
        source,
        export_base,
        *,
        model_name,
        version,
        overwrite,
        warmup_file,
        precision,
        padding_free,
        tokenizer_ops,
        truncate_dim,
        warmup_inputs,
        verify,
    ) -> ExportedModel:
        task, tokenizer = _servable(source.task), source.tokenizer
        ops_name = check_tokenizer_ops(tokenizer_ops or DEFAULT_EXPORT_TOKENIZER_OPS)
        precision = resolve_precision(precision)
        check_padding_free_choice(padding_free)
        model_name = model_name if model_name is not None else source.name
        version_dir, version = _version_dir(export_base, model_name, version, overwrite)
        if warmup_file:
            warmup_inputs = common.read_warmup_file(warmup_file, task.text_fields)
        preprocessor = source.task_preprocessor()
        with (
            text_tokenizer_ops(ops_name, tokenizer, preprocessor),
            contextlib.ExitStack() as graph_contexts,
        ):
            # Another precision copies the weights: a large model takes a while.
            making = stage(logger, "Making the %s model", precision)
            with making if precision != FLOAT32 else contextlib.nullcontext():
                model, padding_free = _served_model(
                    source.model, precision, padding_free, graph_contexts
                )
            model = task.serving_model(model, truncate_dim=truncate_dim)
            text_fields = tuple(task.text_fields)
            texts = common.check_warmup_inputs(
                text_fields, warmup_inputs or common.default_warmup_inputs(text_fields)
            )
            with stage(logger, "Tracing the signature %s", signatures.DEFAULT_SIGNATURE):
                graph = _build_graph(task, model, tokenizer, preprocessor)
            with stage(logger, "Answering the warmup texts with the model, for the checks"):
                logs, expected = _warmup_requests(model_name, task, model, graph, texts, precision)
            description = {
                "format_version": common.FORMAT_VERSION,
                "model_name": model_name,
                "version": version,
                **common.task_fields(task, tokenizer),
                "tokenizer_ops": ops_name,
                "precision": precision,
                "padding_free": padding_free,
            }
            if truncate_dim is not None:
                description["truncate_dim"] = truncate_dim
            manifest = _publish(
                version_dir,
                graph,
                logs,
                expected,
                description,
                overwrite=overwrite,
                verify=verify,
            )
        return ExportedModel(
            path=version_dir,
            version=version,
            signatures={name: s["method_name"] for name, s in description["signatures"].items()},
            op_manifest=manifest,
            description=description,
        )

    def report(self, exported: ExportedModel) -> str:
        from keras_bert_zoo.serving.client import describe_export

        return (
            f"exported version {exported.version} to {exported.path}\n"
            f"{describe_export(exported.path)}"
        )
