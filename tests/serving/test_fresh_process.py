"""Acceptance: a fresh process with TensorFlow only (no keras_bert_zoo, no
tensorflow_text package, no Keras module beyond those `import tensorflow` itself
loads) loads every export, replays its warmup requests, and gets the in-memory Keras
model's outputs; the op manifest names exactly what that process lacks.

The child process blocks `import tensorflow_text` (a meta-path finder installed before
anything is imported), imports tensorflow, checks which of each graph's ops are
registered, and replays the records (parsed with tensorflow-serving-api's
PredictionLog, the TF Serving client protos) of the exports of every task family,
made with the default `tokenizer_ops="core"`, with no op library loaded. Then it loads
the tensorflow-text op libraries a `tokenizer_ops="tensorflow_text"` export's manifest
lists (by path: the package itself stays blocked) and replays that export too.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert_zoo.serving import ops, signatures, warmup

_CHILD = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoTensorflowText(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "tensorflow_text":
                raise ImportError(f"{name} is blocked in this process")
            return None

    sys.meta_path.insert(0, NoTensorflowText())
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    def keras_modules():
        return {m for m in sys.modules if m == "keras" or m.startswith("keras.")}

    # TensorFlow 2.21's own import pulls in parts of Keras 3; nothing after may add any.
    keras_at_import = keras_modules()
    request = json.loads(sys.stdin.read())
    registered = lambda op: op_def_registry.get(op) is not None
    before = {op: registered(op) for op in request["ops"]}
    try:
        import tensorflow_text
        blocked = False
    except ImportError:
        blocked = True

    from tensorflow_serving.apis import prediction_log_pb2

    def encode(array):
        array = np.asarray(array)
        if array.dtype == object:
            return {"bytes": [value.hex() for value in array.reshape(-1)], "shape": array.shape}
        values = array.reshape(-1).tolist()
        return {"values": values, "shape": array.shape, "dtype": array.dtype.name}

    results = {}
    for path in request["exports"]:
        for library in request["libraries"][path]:
            tf.load_op_library(library)
        loaded = tf.saved_model.load(path)
        records = []
        warmup_file = path + "/assets.extra/tf_serving_warmup_requests"
        for record in tf.data.TFRecordDataset(warmup_file):
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            kind = log.WhichOneof("log_type")
            request_proto = getattr(log, kind).request
            name = request_proto.model_spec.signature_name
            if kind == "predict_log":
                feed = {k: tf.make_ndarray(v) for k, v in request_proto.inputs.items()}
            else:
                examples = request_proto.input.example_list.examples
                feed = {"inputs": np.array([e.SerializeToString() for e in examples], object)}
            outputs = loaded.signatures[name](**{k: tf.constant(v) for k, v in feed.items()})
            encoded = {k: encode(v) for k, v in outputs.items()}
            records.append({"signature": name, "outputs": encoded})
        results[path] = records
    modules = sorted(m for m in sys.modules if m.startswith(("keras_bert_zoo", "tensorflow_text")))
    modules += sorted(keras_modules() - keras_at_import)
    after = {op: registered(op) for op in request["ops"]}
    print(json.dumps({
        "before": before, "after": after, "results": results, "modules": modules,
        "tensorflow_text_blocked": blocked,
    }))
    """
)


def _graph_ops(path):
    """Op types of every node of the graph and its function library, from the proto."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    names = set()
    for meta_graph in proto.meta_graphs:
        functions = {f.signature.name for f in meta_graph.graph_def.library.function}
        names |= {node.op for node in meta_graph.graph_def.node}
        for function in meta_graph.graph_def.library.function:
            names |= {node.op for node in function.node_def}
        names -= functions
    return names


def _decode(encoded):
    shape = tuple(encoded["shape"])
    if "bytes" in encoded:
        return np.array([bytes.fromhex(v) for v in encoded["bytes"]], object).reshape(shape)
    return np.array(encoded["values"], dtype=encoded["dtype"]).reshape(shape)


def _expected(export, log):
    """The in-memory model's outputs for one warmup record."""
    name, feed = warmup.request_of(log)
    if name == signatures.DEFAULT_SIGNATURE:
        return name, export.eager_answer(feed)
    if name == signatures.IDS_SIGNATURE:
        outputs = signatures.flatten_outputs(export.model(feed, training=False))
        return name, {key: np.asarray(value) for key, value in outputs.items()}
    fields = {field: tf.io.FixedLenFeature([], tf.string) for field in export.task.text_fields}
    parsed = tf.io.parse_example(tf.constant(feed["inputs"]), fields)
    answers = export.eager_answer({key: value.numpy() for key, value in parsed.items()})
    if "probabilities" in answers:
        names = np.array([n.encode() for n in export.task.label_names], object)
        classes = np.tile(names, (len(feed["inputs"]), 1))
        return name, {"classes": classes, "scores": answers["probabilities"]}
    return name, {"outputs": answers["score"]}


@pytest.mark.slow
def test_fresh_tensorflow_process_replays_warmup_with_the_manifest_libraries(
    all_exports, tensorflow_text_export
):
    # The core exports come first: they run before any op library is loaded.
    all_exports = [*all_exports, tensorflow_text_export]
    manifests = {export.path: ops.read_op_manifest(export.path) for export in all_exports}
    for export in all_exports:
        core = export is not tensorflow_text_export
        assert export.exported.description["tokenizer_ops"] == (
            "core" if core else "tensorflow_text"
        )
        assert (manifests[export.path]["custom_ops"] == []) == core, export.name
    graph_ops = {export.path: _graph_ops(export.path) for export in all_exports}
    request = {
        "exports": [export.path for export in all_exports],
        "libraries": {path: ops.library_paths(m) for path, m in manifests.items()},
        "ops": sorted(set().union(*graph_ops.values())),
    }
    result = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ, PYTHONPATH=""),  # nothing of the repository on the path
    )
    assert result.returncode == 0, result.stderr[-4000:]
    child = json.loads(result.stdout.strip().splitlines()[-1])
    assert child["modules"] == [], child["modules"]
    assert child["tensorflow_text_blocked"]

    # The manifest lists exactly the ops a TensorFlow-only process lacks, and its
    # libraries supply all of them.
    for export in all_exports:
        custom = {entry["op"] for entry in manifests[export.path]["custom_ops"]}
        missing = {op for op in graph_ops[export.path] if not child["before"][op]}
        assert custom == missing, export.name
        assert all(child["after"][op] for op in graph_ops[export.path])

    for export in all_exports:
        logs = warmup.read_warmup_records(export.path)
        records = child["results"][export.path]
        assert len(records) == len(logs) >= 3
        for log, record in zip(logs, records, strict=True):
            name, expected = _expected(export, log)
            assert record["signature"] == name
            served = {key: _decode(value) for key, value in record["outputs"].items()}
            assert sorted(served) == sorted(expected), (export.name, name)
            for key, want in expected.items():
                got = served[key]
                assert got.shape == want.shape, (export.name, name, key)
                if want.dtype.kind == "f":
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=key)
                else:
                    np.testing.assert_array_equal(got, want, err_msg=f"{export.name} {name} {key}")
