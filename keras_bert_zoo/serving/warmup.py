"""TF Serving warmup records: `assets.extra/tf_serving_warmup_requests`.

TF Serving replays these requests when it loads a version, before the version takes
traffic, so the first user request does not pay for lazy initialization (lookup
tables, tokenizer models, kernel caches). The file is a TFRecord of
`tensorflow.serving.PredictionLog` protos (package `tensorflow-serving-api`); the
exporter writes one `predict_log` per signature taking tensors (`serving_default` at
two batch sizes, `serve_ids`) and a `classify_log` / `regress_log` for
`serve_examples`. A version whose warmup fails is not served, so the exporter replays
every record on the reloaded SavedModel before the version becomes visible.

`replay(loaded, records)` runs records on a `tf.saved_model.load`ed model the way TF
Serving feeds them: a predict request's inputs by key, a classify or regress request's
examples serialized into the `inputs` tensor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving.ops import EXTRA_DIRECTORY
from keras_bert_zoo.serving.signatures import EXAMPLES_INPUT
from keras_bert_zoo.utils.atomic import atomic_path
from keras_bert_zoo.utils.errors import UserError

WARMUP_FILE = "tf_serving_warmup_requests"


def _apis():
    try:
        from tensorflow_serving.apis import (
            classification_pb2,
            input_pb2,
            model_pb2,
            predict_pb2,
            prediction_log_pb2,
            regression_pb2,
        )
    except ImportError as error:  # pragma: no cover - an install problem
        raise ImportError(
            "Warmup records need the tensorflow-serving-api package (pip install "
            "tensorflow-serving-api), which keras_bert_zoo depends on"
        ) from error
    return classification_pb2, input_pb2, model_pb2, predict_pb2, prediction_log_pb2, regression_pb2


def warmup_path(saved_model_dir: str) -> str:
    return os.path.join(saved_model_dir, EXTRA_DIRECTORY, WARMUP_FILE)


def predict_log(model_name: str, signature_name: str, inputs: Mapping[str, np.ndarray]):
    """A `PredictionLog` holding a `PredictRequest` with `inputs` as TensorProtos."""
    _, _, model_pb2, predict_pb2, prediction_log_pb2, _ = _apis()
    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
    )
    for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )


def _text_example(texts: Mapping[str, bytes]) -> tf.train.Example:
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
                for key, value in texts.items()
            }
        )
    )


def text_examples(inputs: Mapping[str, Sequence]) -> list[tf.train.Example]:
    """One `tf.Example` per row of `{field: [batch] strings}`, a bytes feature per field."""
    fields = list(inputs)
    rows = len(inputs[fields[0]])
    return [
        _text_example({field: _as_bytes(inputs[field][row]) for field in fields})
        for row in range(rows)
    ]


def _as_bytes(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def example_log(model_name: str, signature_name: str, api: str, inputs: Mapping[str, Sequence]):
    """A `PredictionLog` holding a Classification- or RegressionRequest of the rows."""
    classification_pb2, input_pb2, model_pb2, _, prediction_log_pb2, regression_pb2 = _apis()
    spec = model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
    examples = input_pb2.Input(example_list=input_pb2.ExampleList(examples=text_examples(inputs)))
    if api == "classify":
        request = classification_pb2.ClassificationRequest(model_spec=spec, input=examples)
        return prediction_log_pb2.PredictionLog(
            classify_log=prediction_log_pb2.ClassifyLog(request=request)
        )
    if api == "regress":
        request = regression_pb2.RegressionRequest(model_spec=spec, input=examples)
        return prediction_log_pb2.PredictionLog(
            regress_log=prediction_log_pb2.RegressLog(request=request)
        )
    raise UserError(f"api must be 'classify' or 'regress', got {api!r}")


def write_warmup_records(saved_model_dir: str, logs) -> str:
    """Writes `logs` (PredictionLog protos) as the version's warmup file, atomically."""
    path = warmup_path(saved_model_dir)
    with atomic_path(path) as temp_path, tf.io.TFRecordWriter(temp_path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path


def read_warmup_records(saved_model_dir: str) -> list:
    """The PredictionLog protos of the version's warmup file."""
    _, _, _, _, prediction_log_pb2, _ = _apis()
    path = warmup_path(saved_model_dir)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{saved_model_dir}: no {EXTRA_DIRECTORY}/{WARMUP_FILE}")
    logs = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record)
        logs.append(log)
    return logs


def request_of(log) -> tuple[str, dict[str, np.ndarray]]:
    """`(signature name, feed)`: what TF Serving feeds the signature for this record."""
    kind = log.WhichOneof("log_type")
    if kind == "predict_log":
        request = log.predict_log.request
        feed = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
        return request.model_spec.signature_name or "serving_default", feed
    if kind in ("classify_log", "regress_log"):
        request = getattr(log, kind).request
        examples = request.input.example_list.examples
        if not examples:
            raise UserError(f"{kind}: only example_list inputs are replayed")
        serialized = np.array([example.SerializeToString() for example in examples], object)
        return request.model_spec.signature_name or "serving_default", {EXAMPLES_INPUT: serialized}
    raise UserError(f"Warmup record of kind {kind!r} is not replayed (TF Serving neither)")


def replay(loaded, logs) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Runs every record on `loaded` (`tf.saved_model.load`); `(signature, outputs)` each."""
    results = []
    for log in logs:
        name, feed = request_of(log)
        if name not in loaded.signatures:
            raise KeyError(f"Warmup record for signature {name!r}, which the model lacks")
        function = loaded.signatures[name]
        outputs = function(**{key: tf.constant(value) for key, value in feed.items()})
        results.append((name, {key: value.numpy() for key, value in outputs.items()}))
    return results
