"""The exported signatures: what TF Serving (and any SavedModel loader) calls.

* `serving_default`: one `[batch]` string tensor per text field of the task (raw UTF-8,
  any length, any bytes), tokenization, packing and the task's post-processing in the
  graph, the task's answers out (`Task.serving_outputs`).
* `serve_ids`: the model's own inputs (`input_word_ids`, `input_mask`,
  `input_type_ids`, int32, plus any other model input such as
  `masked_lm_positions`), the raw head outputs out: a model returning one tensor
  gives `logits`; a dict keeps its keys, a list under a key becomes `key_0`, `key_1`.
* `serve_examples` (tasks that declare a `serving_api`, `keras_bert_zoo.tasks.servable.
  Servable`; never guessed from the answers' keys): one string tensor `inputs` of
  serialized `tf.Example`s, each holding every text field as a bytes feature; out
  `classes` (string `[batch, num_labels]`, the label names) and `scores` (float32
  `[batch, num_labels]`, the `probabilities` answer) for the Classify API, or `outputs`
  (float32 `[batch]`, the `score` answer) for the Regress API. The declared API is
  checked against the answers first (`check_serving_api`). TF Serving's Classify/Regress APIs accept
  only a SignatureDef whose `method_name` is `tensorflow/serving/classify` /
  `tensorflow/serving/regress`; `tf.saved_model.save` writes `tensorflow/serving/predict`
  for every signature, so the exporter rewrites that field in `saved_model.pb`
  (`set_method_names`) before the version directory becomes visible.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from keras_bert_zoo.tasks.servable import (
    CLASSIFY_API,
    PROBABILITIES_ANSWER,
    REGRESS_API,
    SCORE_ANSWER,
    SERVING_API_ANSWERS,
)
from keras_bert_zoo.text.offsets import valid_utf8
from keras_bert_zoo.utils.errors import UserError

DEFAULT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "serve_ids"
EXAMPLES_SIGNATURE = "serve_examples"

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
EXAMPLES_INPUT = "inputs"


def _float32(tensor):
    tensor = tf.convert_to_tensor(tensor)
    return tf.cast(tensor, tf.float32) if tensor.dtype.is_floating else tensor


def _check_outputs(outputs: Any, what: str) -> dict[str, tf.Tensor]:
    if not isinstance(outputs, Mapping):
        raise TypeError(f"{what} must return a dict of tensors, got {type(outputs).__name__}")
    for key, value in outputs.items():
        if isinstance(value, tf.RaggedTensor | tf.SparseTensor):
            raise TypeError(
                f"{what}: output {key!r} is a {type(value).__name__}; a signature returns "
                "plain tensors (pad it and add a count, or return its row splits)"
            )
    return {key: _float32(value) for key, value in outputs.items()}


def replace_invalid_utf8(answer: Callable[..., Mapping[str, tf.Tensor]]):
    """`answer` on its texts with invalid UTF-8 replaced by U+FFFD first.

    A server takes any bytes. Replaced once at the boundary, every later step
    (tokenizer, character offsets, answer substrings) sees one valid text; the
    replacement is Python's `bytes.decode("utf-8", errors="replace")`, so the
    character offsets of an answer index that string.
    """

    def valid_answer(**texts):
        return answer(**{name: valid_utf8(text) for name, text in texts.items()})

    return valid_answer


def traced_once(text_fields: Sequence[str], answer: Callable[..., Mapping[str, tf.Tensor]]):
    """`answer` as one `tf.function` of `[batch]` string tensors, one per text field,
    called by keyword as `answer` is.

    `serving_default` and `serve_examples` both answer raw text: calling this one
    function, they share its trace (the tokenizer's and the model's graph are built
    once, and the SavedModel holds them once) instead of tracing `answer` each.
    """
    fields = tuple(text_fields)
    specs = [tf.TensorSpec([None], tf.string, name=field) for field in fields]

    def answer_texts(*texts):
        return answer(**dict(zip(fields, texts, strict=True)))

    function = tf.function(answer_texts, input_signature=specs, autograph=False)

    def call(**texts):
        return function(*[texts[field] for field in fields])

    return call


def text_signature(text_fields: Sequence[str], answer: Callable[..., Mapping[str, tf.Tensor]]):
    """`serving_default`: a tf.function of one `[batch]` string tensor per text field."""
    fields = tuple(text_fields)
    if not fields:
        raise UserError("The task declares no text_fields: nothing for serving_default to take")
    for field in fields:
        if not field.isidentifier():
            raise UserError(f"Text field {field!r} is not a valid signature input name")

    def serve(*texts):
        return _check_outputs(answer(**dict(zip(fields, texts, strict=True))), "serving_outputs")

    specs = [tf.TensorSpec([None], tf.string, name=field) for field in fields]
    return tf.function(serve, input_signature=specs, autograph=False)


def model_input_specs(model) -> dict[str, tf.TensorSpec]:
    """The Keras model's inputs as named TensorSpecs (batch and length dynamic)."""
    inputs = model.input
    if not isinstance(inputs, Mapping):
        raise TypeError(
            f"{type(model).__name__} takes {type(inputs).__name__} inputs; serve_ids needs a "
            "model with named (dict) inputs"
        )
    specs = {}
    for name, tensor in inputs.items():
        shape = [None] + list(tensor.shape[1:])
        specs[name] = tf.TensorSpec(shape, tf.as_dtype(tensor.dtype), name=name)
    return specs


def flatten_outputs(outputs: Any) -> dict[str, tf.Tensor]:
    """A model's outputs as one flat dict of tensors (see the module docstring)."""
    if not isinstance(outputs, Mapping):
        outputs = {"logits": outputs}
    flat = {}
    for key, value in outputs.items():
        if isinstance(value, list | tuple):
            for index, item in enumerate(value):
                flat[f"{key}_{index}"] = _float32(item)
        else:
            flat[key] = _float32(value)
    return flat


def ids_signature(model):
    """`serve_ids`: the model's inputs in, its raw outputs out."""
    specs = model_input_specs(model)
    names = tuple(specs)

    def serve_ids(*tensors):
        return flatten_outputs(model(dict(zip(names, tensors, strict=True)), training=False))

    return tf.function(serve_ids, input_signature=[specs[name] for name in names], autograph=False)


def check_serving_api(
    task_name: str,
    api: str | None,
    outputs: Mapping[str, Any],
    label_names: Sequence[str] | None,
) -> str | None:
    """The TF Serving example API a task declares (`Servable.serving_api`), checked
    against its traced `serving_default` answers (tensors or `TensorSpec`s by key).

    `"classify"` needs label names and a floating `probabilities` answer
    `[batch, len(label_names)]`; `"regress"` a floating `score` answer `[batch]`.
    None (no `serve_examples`) when the task declares none, whatever its answers are.

    Raises:
        ValueError: naming the task and the missing or mis-shaped answer.
    """
    if api is None:
        return None
    if api not in SERVING_API_ANSWERS:
        raise UserError(
            f"{task_name}: serving_api must be {CLASSIFY_API!r}, {REGRESS_API!r} or None, "
            f"got {api!r}"
        )
    declared = f"{task_name} declares serving_api={api!r}"
    if api == CLASSIFY_API and not label_names:
        raise UserError(f"{declared} but no label_names (the classes the Classify API returns)")
    key = SERVING_API_ANSWERS[api]
    answer = outputs.get(key)
    if answer is None:
        raise UserError(
            f"{declared}, which needs a {key!r} answer, but its serving_outputs answer "
            f"only {sorted(outputs)}"
        )
    shape = answer.shape
    if api == CLASSIFY_API:
        expected = f"floating [batch, {len(label_names)}] (one per label name)"
        fits = shape.rank == 2 and shape[1] in (None, len(label_names))
    else:
        expected = "floating [batch]"
        fits = shape.rank == 1
    if not (answer.dtype.is_floating and fits):
        found = "unknown rank" if shape.rank is None else str(shape.as_list())
        raise UserError(
            f"{declared}: its {key!r} answer is {answer.dtype.name} {found}, expected {expected}"
        )
    return api


def examples_signature(
    text_fields: Sequence[str],
    answer: Callable[..., Mapping[str, tf.Tensor]],
    api: str,
    label_names: Sequence[str] | None = None,
):
    """`serve_examples`: serialized `tf.Example`s with one bytes feature per text field.

    A missing field fails the request with TensorFlow's message naming the feature.
    """
    fields = tuple(text_fields)
    features = {field: tf.io.FixedLenFeature([], tf.string) for field in fields}
    if api == CLASSIFY_API:
        names = tf.constant([str(name) for name in label_names], tf.string)
    elif api != REGRESS_API:
        raise UserError(f"api must be {CLASSIFY_API!r} or {REGRESS_API!r}, got {api!r}")

    def serve_examples(inputs):
        parsed = tf.io.parse_example(inputs, features)
        outputs = answer(**{field: parsed[field] for field in fields})
        if api == REGRESS_API:
            return {"outputs": tf.cast(outputs[SCORE_ANSWER], tf.float32)}
        scores = tf.cast(outputs[PROBABILITIES_ANSWER], tf.float32)
        classes = tf.tile(names[tf.newaxis, :], [tf.shape(scores)[0], 1])
        return {"classes": classes, "scores": scores}

    spec = tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)
    return tf.function(serve_examples, input_signature=[spec], autograph=False)


def captured_variables(functions) -> list[tf.Variable]:
    """The `tf.Variable`s the functions' concrete traces read, each once, in order."""
    seen, variables = set(), []
    for function in functions:
        for concrete in function._list_all_concrete_functions():
            for variable in concrete.variables:
                if id(variable) not in seen:
                    seen.add(id(variable))
                    variables.append(variable)
    return variables


def serving_module(functions: Mapping[str, Any], **resources) -> tf.Module:
    """The object `tf.saved_model.save` writes: the signature functions, the
    `resources` (layers holding lookup tables and assets: the preprocessor and its
    tokenizer) and the variables the functions read.

    The variables are tracked as the plain `tf.Variable`s the graphs capture, not
    through the Keras model: a Keras 3 variable saves a second copy of itself under
    another name (`Variable_N`), and the checkpoint restore op of the SavedModel's
    graph (what TF Serving and every TF1-style C++ loader run) restores that copy
    while the functions read the original, which then fails with "Could not find
    variable ...". Tracking the captured variables directly restores exactly what the
    graphs read, once.
    """
    module = tf.Module()
    for name, resource in resources.items():
        setattr(module, name, resource)
    for function in functions.values():
        function.get_concrete_function()
    module.captured_variables = captured_variables(list(functions.values()))
    return module


def concrete_signatures(functions: Mapping[str, Any]) -> dict[str, Any]:
    """The signature functions as the concrete functions already traced, for
    `tf.saved_model.save(..., signatures=)`.

    Given the `tf.function`s themselves, `tf.saved_model.save` traces each one again:
    a trace's cache key holds whether it runs in a save context, so the traces made to
    build the module do not count. Given their concrete functions, it wraps and calls
    them. Measured on a tiny sentence-pair export: the tokenizer and the encoder were
    traced 13 times in all, 5 of them by the save.
    """
    return {name: function.get_concrete_function() for name, function in functions.items()}


def set_method_names(saved_model_dir: str, method_names: Mapping[str, str]) -> None:
    """Rewrites the `method_name` of the named SignatureDefs in `saved_model.pb` (and
    the fingerprint, which hashes that file), checking the result by reading it back.

    Called on a version directory that is not yet visible: the file is rewritten in
    place inside the exporter's temporary directory.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    if not method_names:
        return
    path = os.path.join(saved_model_dir, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    for name, method in method_names.items():
        found = False
        for meta_graph in proto.meta_graphs:
            if name in meta_graph.signature_def:
                meta_graph.signature_def[name].method_name = method
                found = True
        if not found:
            raise KeyError(f"{saved_model_dir}: no signature {name!r} to set the method of")
    with open(path, "wb") as f:
        f.write(proto.SerializeToString(deterministic=True))
    _rewrite_fingerprint(saved_model_dir)
    written = read_method_names(saved_model_dir)
    wrong = {
        name: written.get(name)
        for name, method in method_names.items()
        if written.get(name) != method
    }
    if wrong:
        raise RuntimeError(f"{path}: signature method names did not stick: {wrong}")


def _rewrite_fingerprint(saved_model_dir: str) -> None:
    """`fingerprint.pb` holds a checksum of saved_model.pb: recompute it (a stale one
    would misreport the model's identity to whatever reads fingerprints)."""
    path = os.path.join(saved_model_dir, "fingerprint.pb")
    if not os.path.exists(path):
        return
    try:
        from tensorflow.python.saved_model import fingerprinting_utils

        os.remove(path)
        fingerprinting_utils.write_fingerprint(saved_model_dir)
    except (ImportError, AttributeError):
        # No fingerprint is valid (loaders treat it as optional); a wrong one is not.
        if os.path.exists(path):
            os.remove(path)


def read_method_names(saved_model_dir: str) -> dict[str, str]:
    """`{signature name: method_name}` of the SavedModel's `serve` graph."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    names = {}
    for meta_graph in proto.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            for key, signature in meta_graph.signature_def.items():
                names[key] = signature.method_name
    return names


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
