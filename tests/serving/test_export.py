"""The export's layout and version rules: what TF Serving finds on disk.

Signatures and method names are read back from `saved_model.pb` with the protobuf
classes, the warmup records with tensorflow-serving-api's, the vocabulary from
`assets/` as text: the formats themselves, not our readers.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import prediction_log_pb2

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.text import load_vocab


def _signature_defs(path):
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    (meta_graph,) = proto.meta_graphs
    assert list(meta_graph.meta_info_def.tags) == ["serve"]
    return {k: v for k, v in meta_graph.signature_def.items() if not k.startswith("__")}


def _warmup_logs(path):
    logs = []
    warmup_file = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
    for record in tf.data.TFRecordDataset(warmup_file):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        logs.append(log)
    return logs


@pytest.mark.slow
def test_layout_signatures_and_method_names(all_exports):
    expected_inputs = {
        "mnli": ["hypothesis", "premise"],
        "stsb": ["sentence1", "sentence2"],
        "squad": ["context", "question"],
        "conll": ["sentence"],
        "choice": ["context", "ending0", "ending1", "ending2"],
        "masked_lm": ["sentence"],
        "encoder": ["sentence"],
    }
    for export in all_exports:
        path = export.path
        assert (
            os.path.basename(path) == "1" and os.path.basename(os.path.dirname(path)) == export.name
        )
        assert sorted(os.listdir(path)) == [
            "assets",
            "assets.extra",
            "fingerprint.pb",
            "saved_model.pb",
            "variables",
        ]
        assert sorted(os.listdir(os.path.join(path, "assets.extra"))) == [
            "custom_ops.json",
            "export.json",
            "tf_serving_warmup_requests",
        ]
        # The vocabulary is an asset, token for token the tokenizer's.
        assert load_vocab(os.path.join(path, "assets", "vocab.txt")) == (
            export.tokenizer.get_vocabulary()
        )
        # The fingerprint hashes the final saved_model.pb (rewritten for method names).
        fingerprint = tf.saved_model.experimental.read_fingerprint(path)
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

        fresh = tf.saved_model.experimental.Fingerprint.from_proto(
            __import__(
                "tensorflow.core.protobuf.fingerprint_pb2", fromlist=["x"]
            ).FingerprintDef.FromString(fingerprinting.CreateFingerprintDef(path))
        )
        assert fingerprint.saved_model_checksum == fresh.saved_model_checksum

        defs = _signature_defs(path)
        default = defs["serving_default"]
        assert sorted(default.inputs) == expected_inputs[export.name]
        assert all(info.dtype == tf.string.as_datatype_enum for info in default.inputs.values())
        assert default.method_name == "tensorflow/serving/predict"
        ids = defs["serve_ids"]
        assert {"input_word_ids", "input_mask", "input_type_ids"} <= set(ids.inputs)
        assert all(info.dtype == tf.int32.as_datatype_enum for info in ids.inputs.values())
        description = serving.read_export_description(path)
        assert description["text_fields"] == list(export.task.text_fields)
        assert description["task"]["task_name"] == export.task.task_name

    # Classify / Regress signatures in the shape TF Serving's APIs check.
    classify = _signature_defs(all_exports[0].path)["serve_examples"]
    assert classify.method_name == "tensorflow/serving/classify"
    assert list(classify.inputs) == ["inputs"]
    assert sorted(classify.outputs) == ["classes", "scores"]
    assert classify.outputs["classes"].dtype == tf.string.as_datatype_enum
    assert classify.outputs["scores"].dtype == tf.float32.as_datatype_enum
    regress = _signature_defs(all_exports[1].path)["serve_examples"]
    assert regress.method_name == "tensorflow/serving/regress"
    assert list(regress.inputs) == ["inputs"] and list(regress.outputs) == ["outputs"]
    for export in all_exports[2:]:
        assert "serve_examples" not in _signature_defs(export.path)
    choice_ids = _signature_defs(all_exports[4].path)["serve_ids"]
    dims = [d.size for d in choice_ids.inputs["input_word_ids"].tensor_shape.dim]
    assert dims == [-1, 3, -1]  # [batch, choices, length]
    # Label names and settings live in the model: the classify signature returns the
    # names, and export.json keeps the task's state.
    description = serving.read_export_description(all_exports[0].path)
    assert description["label_names"] == ["contradiction", "entailment", "neutral"]
    assert description["task"]["state"]["label_names"] == description["label_names"]


@pytest.mark.slow
def test_warmup_records_are_prediction_logs_for_every_signature(all_exports):
    for export in all_exports:
        logs = _warmup_logs(export.path)
        kinds = [(log.WhichOneof("log_type"), _signature_of(log)) for log in logs]
        assert ("predict_log", "serving_default") in kinds
        assert ("predict_log", "serve_ids") in kinds
        for log in logs:
            kind = log.WhichOneof("log_type")
            request = getattr(log, kind).request
            assert request.model_spec.name == export.name
        if export.name == "mnli":
            assert ("classify_log", "serve_examples") in kinds
        if export.name == "stsb":
            assert ("regress_log", "serve_examples") in kinds
        default = next(
            log.predict_log.request
            for log in logs
            if log.WhichOneof("log_type") == "predict_log"
            and log.predict_log.request.model_spec.signature_name == "serving_default"
        )
        texts = {key: tf.make_ndarray(value) for key, value in default.inputs.items()}
        assert sorted(texts) == sorted(export.task.text_fields)
        assert b"" in set(np.concatenate(list(texts.values())).tolist())


def _signature_of(log):
    kind = log.WhichOneof("log_type")
    return getattr(log, kind).request.model_spec.signature_name


def test_core_exports_need_no_op_outside_core_tensorflow(all_exports):
    """Every task family's default export: no custom op, no tensorflow-text version to
    match, every graph op in `tf.raw_ops`, and export.json names the implementation."""
    for export in all_exports:
        manifest = json.loads(
            open(os.path.join(export.path, "assets.extra", "custom_ops.json")).read()
        )
        assert manifest["custom_ops"] == [] and manifest["libraries"] == [], export.name
        assert manifest["tensorflow_text_version"] is None
        assert manifest["tensorflow_version"] == tf.__version__
        graph_ops = serving.ops.graph_op_names(export.path)
        assert graph_ops and all(hasattr(tf.raw_ops, op) for op in graph_ops), export.name
        assert set(manifest["core_ops"]) == graph_ops
        assert export.exported.description["tokenizer_ops"] == "core"
        assert "tensorflow-text not needed" in serving.ops.format_op_manifest(manifest)
        assert serving.ops.check_op_manifest(manifest) == []


@pytest.mark.slow
def test_every_family_exports_in_bfloat16_answering_as_float32(
    all_exports, loaded, tmp_path, helpers
):
    """`precision="bfloat16"` for every task family: the export completes, keeps the
    answers float32 and stays within bfloat16's rounding of the float32 export (8
    significant bits per matmul input: about 1% through these two-layer models). The
    sentence classifier's export also runs the exporter's own reload check in bfloat16
    and answers the hostile texts as the float32 export does (below)."""
    from keras_bert_zoo.serving.common import default_warmup_inputs

    # stsb shares mnli's model class and head; the test reloads and compares itself, so
    # the exporter's own reload (verify) is skipped but for mnli: together they halve
    # the test's time.
    for export in [export for export in all_exports if export.name != "stsb"]:
        exported = serving.export(
            serving.ModelSource(
                export.task, export.model, export.tokenizer, preprocessor=export.preprocessor
            ),
            str(tmp_path),
            model_name=export.name,
            precision="bfloat16",
            verify=export.name == "mnli",
        )
        assert exported.description["precision"] == "bfloat16"
        assert export.model.compute_dtype == "float32"  # the caller's model is left alone
        # The [CLS]-reading models run their encoder on the real tokens only
        # (padding_free="auto"), in either precision; the others keep the padded graph.
        padding_free = export.name in {"mnli", "choice"}
        assert exported.description["padding_free"] is padding_free, export.name
        assert export.exported.description["padding_free"] is padding_free, export.name
        feed = {
            field: tf.constant(values)
            for field, values in default_warmup_inputs(tuple(export.task.text_fields)).items()
        }
        narrow = tf.saved_model.load(exported.path).signatures["serving_default"](**feed)
        wide = loaded(export).signatures["serving_default"](**feed)
        assert sorted(narrow) == sorted(wide), export.name
        for key, value in wide.items():
            assert narrow[key].dtype == value.dtype, (export.name, key)
            if value.dtype.is_floating:
                np.testing.assert_allclose(
                    narrow[key].numpy(),
                    value.numpy(),
                    atol=0.05,
                    rtol=0.05,
                    err_msg=f"{export.name}: {key}",
                )
        if export.name == "mnli":
            _check_bfloat16_classifier(exported, export, loaded, helpers)


def _check_bfloat16_classifier(exported, export, loaded, helpers):
    """Tolerance: bfloat16 keeps 8 significant bits, so each matmul's inputs move by up to
    2**-9 relatively; on this tiny model the probabilities stay within 0.02 and every
    label agrees, on the hostile texts. The served answers stay float32."""
    feed = {
        field: tf.constant(values)
        for field, values in helpers.text_inputs(
            export.task.text_fields, helpers.HOSTILE_TEXTS
        ).items()
    }
    answers = {
        "bfloat16": tf.saved_model.load(exported.path).signatures["serving_default"](**feed),
        "float32": loaded(export).signatures["serving_default"](**feed),
    }
    answers = {name: {k: v.numpy() for k, v in a.items()} for name, a in answers.items()}
    assert answers["bfloat16"]["probabilities"].dtype == np.float32
    np.testing.assert_allclose(
        answers["bfloat16"]["probabilities"], answers["float32"]["probabilities"], atol=0.02
    )
    assert (answers["bfloat16"]["label"] == answers["float32"]["label"]).all()
    assert not np.array_equal(
        answers["bfloat16"]["probabilities"], answers["float32"]["probabilities"]
    )  # it did compute in bfloat16
    assert "precision: bfloat16" in serving.describe_export(exported.path)
    assert "precision: float32" in serving.describe_export(export.path)


def test_padding_free_follows_what_the_model_class_declares(helpers):
    """`padding_free="auto"` and `"on"` read `supports_padding_free_inference` off the
    model's class: a classifier that withdraws it is served padded, a span labeler that
    declares it padding-free, whatever class they derive from."""
    from keras_bert_zoo.models import (
        BertClassifier,
        BertEncoder,
        BertMultipleChoice,
        BertSpanLabeler,
    )
    from keras_bert_zoo.serving.padding_free import serves_padding_free

    class PaddedClassifier(BertClassifier):
        supports_padding_free_inference = False

    class DeclaredSpanLabeler(BertSpanLabeler):
        supports_padding_free_inference = True

    encoder = helpers.tiny_encoder(20)
    assert serves_padding_free(BertClassifier(encoder, num_classes=2))
    assert not serves_padding_free(PaddedClassifier(encoder, num_classes=2))
    assert serves_padding_free(DeclaredSpanLabeler(encoder), "on")
    assert not serves_padding_free(DeclaredSpanLabeler(encoder), "off")
    assert not serves_padding_free(encoder)  # declares nothing
    with pytest.raises(ValueError, match="PaddedClassifier reads every position"):
        serves_padding_free(PaddedClassifier(encoder, num_classes=2), "on")
    with pytest.raises(ValueError, match="BertEncoder reads every position"):
        serves_padding_free(encoder, "on")
    with pytest.warns(DeprecationWarning, match="PADDING_FREE_MODELS is deprecated"):
        listed = serving.export.PADDING_FREE_MODELS
    assert {BertClassifier, BertMultipleChoice, DeclaredSpanLabeler} <= set(listed)
    assert not {PaddedClassifier, BertSpanLabeler, BertEncoder} & set(listed)


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory, small_tokenizer, helpers):
    """A sentence-pair classifier exported twice to one base: version 1 with the default
    `padding_free="auto"` (its encoder runs on the real tokens only), version 2 padded
    (`"off"`), a leftover temporary directory between them. The tests read these
    exports and copy the base before changing anything in it."""
    task = tasks.create_task("glue/mnli", max_seq_length=24)
    vocabulary = helpers.sentence_fixtures.VOCABULARY
    model = helpers.randomize(task.build_model(helpers.tiny_encoder(len(vocabulary))), 7)
    base = str(tmp_path_factory.mktemp("versions") / "base")
    source = serving.ModelSource(task, model, small_tokenizer)
    first = serving.export(source, base, model_name="mnli", verify=False)
    versions_after_first = serving.existing_versions(os.path.join(base, "mnli"))
    os.makedirs(os.path.join(base, "mnli", ".7.tmp-leftover"))  # ignored, as TF Serving does
    second = serving.export(source, base, model_name="mnli", padding_free="off", verify=False)
    return task, model, base, first, versions_after_first, second


@pytest.mark.slow
def test_padding_free_export_answers_as_the_padded_one(
    two_versions, squad_export, small_tokenizer, tmp_path
):
    """A float32 classifier export whose encoder runs on the real tokens only (the
    default, `padding_free="auto"`) answers what the `"off"` (padded) export answers, on
    batches with padding and without; a model that reads every position, or an unknown
    choice, is refused."""
    task, model, _, fast_export, _, padded_export = two_versions
    assert padded_export.description["padding_free"] is False
    assert "encoder runs on: padded batch" in serving.describe_export(padded_export.path)
    assert fast_export.description["padding_free"] is True
    assert "encoder runs on: real tokens only" in serving.describe_export(fast_export.path)
    padded = tf.saved_model.load(padded_export.path).signatures["serving_default"]
    fast = tf.saved_model.load(fast_export.path).signatures["serving_default"]
    premises = ["a b c d e f g h i j", "a", "", "a b"]
    hypotheses = ["a", "a b c d e f g h i j k l", "a b", ""]
    for rows in (slice(0, 4), slice(0, 1), slice(2, 3)):
        feed = {"premise": tf.constant(premises[rows]), "hypothesis": tf.constant(hypotheses[rows])}
        want, got = padded(**feed), fast(**feed)
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-5)
        np.testing.assert_array_equal(got["label"], want["label"])
    with pytest.raises(ValueError, match="BertSpanLabeler reads every position"):
        serving.export(
            serving.ModelSource(squad_export.task, squad_export.model, squad_export.tokenizer),
            str(tmp_path),
            model_name="squad_padding_free",
            padding_free="on",
        )
    with pytest.raises(ValueError, match="padding_free must be one of auto, on, off"):
        serving.export(
            serving.ModelSource(task, model, small_tokenizer),
            str(tmp_path),
            model_name="mnli_x",
            padding_free="yes",
        )
    assert not os.path.exists(os.path.join(str(tmp_path), "squad_padding_free", "1"))


@pytest.mark.slow
def test_op_manifest_lists_the_tensorflow_text_ops(tensorflow_text_export):
    import tensorflow_text

    export = tensorflow_text_export
    manifest = json.loads(open(os.path.join(export.path, "assets.extra", "custom_ops.json")).read())
    assert manifest["tensorflow_text_version"] == tensorflow_text.__version__
    assert manifest["tensorflow_version"] == tf.__version__
    assert export.exported.description["tokenizer_ops"] == "tensorflow_text"
    ops = {entry["op"]: entry for entry in manifest["custom_ops"]}
    # Our tokenizer's ops by design; no trimmer op (the packer trims with core ops).
    assert {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8"} == set(ops)
    for entry in ops.values():
        assert entry["package"] == "tensorflow-text"
        library = os.path.join(
            os.path.dirname(os.path.dirname(tensorflow_text.__file__)), entry["library"]
        )
        assert os.path.isfile(library)
    assert manifest["libraries"] == sorted({entry["library"] for entry in ops.values()})
    text = serving.ops.format_op_manifest(manifest)
    for op in ops:
        assert op in text
    assert serving.ops.check_op_manifest(manifest) == []


@pytest.mark.slow
def test_versions_increment_existing_ones_are_refused_overwrite_replaces(
    two_versions, tmp_path, small_tokenizer, helpers
):
    task, _, made, first, versions_after_first, second = two_versions
    assert first.version == 1
    assert versions_after_first == [1]
    assert second.version == 2  # the leftover ".7.tmp-leftover" was ignored
    base = str(tmp_path / "base")
    shutil.copytree(made, base)
    vocabulary = helpers.sentence_fixtures.VOCABULARY
    model = helpers.randomize(task.build_model(helpers.tiny_encoder(len(vocabulary))), 8)
    marker = os.path.join(base, "mnli", "2", "assets.extra", "marker")
    open(marker, "w").close()
    with pytest.raises(FileExistsError, match="2 already exists.*overwrite"):
        serving.export(
            serving.ModelSource(task, model, small_tokenizer),
            base,
            model_name="mnli",
            version=2,
            verify=False,
        )
    assert os.path.exists(marker)  # untouched
    replaced = serving.export(
        serving.ModelSource(task, model, small_tokenizer),
        base,
        model_name="mnli",
        version=2,
        overwrite=True,
        verify=False,
    )
    assert not os.path.exists(marker)
    pair = {"premise": ["good film"], "hypothesis": ["a bad film"]}
    served = serving.load_served_model(replaced.path)(
        **{key: np.array([text.encode() for text in texts], object) for key, texts in pair.items()}
    )
    expected = task.serving_outputs(model, task.make_preprocessor(small_tokenizer))(
        **{key: tf.constant(texts) for key, texts in pair.items()}
    )
    np.testing.assert_allclose(served["probabilities"], expected["probabilities"], atol=1e-5)
    assert sorted(os.listdir(os.path.join(base, "mnli"))) == [".7.tmp-leftover", "1", "2"]
    for bad in ("", ".hidden", "a/b", " x"):
        with pytest.raises(ValueError, match="model_name"):
            serving.export(serving.ModelSource(task, model, small_tokenizer), base, model_name=bad)
    with pytest.raises(ValueError, match="version"):
        serving.export(
            serving.ModelSource(task, model, small_tokenizer), base, model_name="mnli", version=-1
        )
    with pytest.raises(ValueError, match="warmup_inputs"):
        serving.export(
            serving.ModelSource(task, model, small_tokenizer),
            base,
            model_name="mnli",
            warmup_inputs={"text": ["x"]},
        )


_KILLED_EXPORT = textwrap.dedent(
    """
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("helpers", sys.argv[2])
    helpers = importlib.util.module_from_spec(spec)
    sys.modules["helpers"] = helpers
    spec.loader.exec_module(helpers)
    from keras_bert_zoo import serving, tasks
    from keras_bert_zoo.text import BertTokenizer

    sentence_fixtures, tiny_encoder = helpers.sentence_fixtures, helpers.tiny_encoder

    task = tasks.create_task("glue/sst2", max_seq_length=16)
    model = task.build_model(tiny_encoder(len(sentence_fixtures.VOCABULARY)))
    tokenizer = BertTokenizer(sentence_fixtures.VOCABULARY, lowercase=True)
    original = serving.warmup.write_warmup_records

    def stall(*args, **kwargs):
        path = original(*args, **kwargs)
        print("WRITING", flush=True)
        import time
        time.sleep(600)
        return path

    serving.warmup.write_warmup_records = stall
    serving.export(serving.ModelSource(task, model, tokenizer), sys.argv[1], model_name="sst2")
    """
)


@pytest.mark.slow
def test_an_interrupted_export_leaves_no_version_tf_serving_would_load(tmp_path):
    """A SIGKILL midway (SavedModel written, warmup being written) leaves only a
    dot-named directory, which TF Serving's integer version scan skips."""
    here = os.path.dirname(os.path.abspath(__file__))
    base = tmp_path / "base"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_EXPORT, str(base), os.path.join(here, "serving_helpers.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 600
        line = b""
        while b"WRITING" not in line and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
        assert b"WRITING" in line, "the export never reached the warmup records"
        model_dir = base / "sst2"
        entries = os.listdir(model_dir)
        assert len(entries) == 1 and entries[0].startswith(".1.tmp-")
        assert (model_dir / entries[0] / "saved_model.pb").exists()  # midway indeed
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    entries = os.listdir(base / "sst2")
    assert [name for name in entries if not name.startswith(".")] == []
    assert serving.existing_versions(str(base / "sst2")) == []
    assert serving.next_version(str(base / "sst2")) == 1
