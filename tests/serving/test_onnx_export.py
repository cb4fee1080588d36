"""ONNX exports (keras_bert_zoo/serving/formats/onnx.py), run by ONNX Runtime and checked
against the Keras model.

Every family's ONNX model answers as the Keras model on the same random ids (to 1e-5),
with the SavedModel's `serve_ids` inputs and outputs, and with the task's answers on raw
text through the sidecar's vocabulary; the graph's GELU is the `Erf` form ONNX Runtime
runs, every op in the standard domain. Dynamic int8 keeps the answers close (on the
real MiniLM too: test_int8_minilm.py). A quantization the ONNX export does not offer,
and a converter failure, end with one line naming the family.
"""

from __future__ import annotations

import pathlib

import child_process
import onnx
import onnxruntime
import pytest
import tensorflow as tf

from keras_bert_zoo import serving
from keras_bert_zoo.serving import portable
from keras_bert_zoo.serving.formats import onnx as onnx_format

HERE = pathlib.Path(__file__).resolve().parent
ph = child_process.import_by_path("kbz_portable_test_helpers", HERE / "portable_test_helpers.py")


@pytest.fixture(scope="module")
def tokenizer(minilm_tokenizer):
    return minilm_tokenizer  # the session's (conftest.py)


@pytest.fixture(scope="module")
def family_exports(tmp_path_factory, helpers, tokenizer):
    """`{family: (task, model, PortableExport)}`: each family's float ONNX export."""
    base = tmp_path_factory.mktemp("onnx")
    exports = {}
    for family in ph.FAMILIES:
        task, model = ph.family_model(family, helpers, tokenizer.vocabulary_size())
        exported = serving.export(
            serving.ModelSource(task, model, tokenizer),
            str(base / family),
            format="onnx",
            verify=False,  # the tests compare each with the Keras model themselves
        )
        exports[family] = (task, model, exported)
    return exports


def _session(path):
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])


def _run(session, ids):
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, ids), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("family", ph.FAMILIES)
def test_each_family_answers_as_the_keras_model(family, family_exports, tokenizer):
    task, model, exported = family_exports[family]
    session = _session(exported.model_path)
    assert sorted(i.name for i in session.get_inputs()) == sorted(
        ph.random_ids(model, tokenizer.vocabulary_size())
    )
    assert sorted(o.name for o in session.get_outputs()) == ph.serve_ids_output_names(model)
    for seed in range(2):
        ids = ph.random_ids(model, tokenizer.vocabulary_size(), seed=seed)
        ph.assert_same_answers(ph.keras_outputs(model, ids), _run(session, ids))
    request = ph.text_request(task)
    answers = serving.load_portable_model(exported.path)(**request)
    ph.assert_same_answers(ph.eager_answers(task, model, tokenizer, request), answers)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["sentence_classification", "encoder"])
def test_gelu_is_the_erf_form_and_every_op_standard(family, family_exports):
    _, _, exported = family_exports[family]
    graph = onnx.load(exported.model_path).graph
    ops = {node.op_type for node in graph.node}
    assert "Erf" in ops and "Erfc" not in ops, sorted(ops)
    assert not [node.op_type for node in graph.node if node.domain not in ("", "ai.onnx")]
    onnx.checker.check_model(onnx.load(exported.model_path))


def test_dynamic_int8_keeps_the_answers(tmp_path, family_exports, tokenizer):
    """Int8 weights: about a quarter of the float file, outputs close to the Keras
    model's on random ids (the tiny models' weights are large: a loose bound). The
    matmuls with a weight are ONNX Runtime's `MatMulNBits` (8 bits), the embedding
    tables quantized, no matmul left in float but the two of attention per layer."""
    task, model, exported = family_exports["encoder"]
    small = serving.export(
        serving.ModelSource(task, model, tokenizer),
        str(tmp_path / "int8"),
        format="onnx",
        quantize="dynamic_int8",
    )
    # Plus the word-embedding rows' int32 scales: 4 bytes a row, a quarter of this tiny
    # model's 16-wide int8 row (3% of a 128-wide one).
    row_scales = 4 * tokenizer.vocabulary_size()
    assert small.size_bytes <= 0.3 * exported.size_bytes + row_scales
    nodes = onnx.load(small.model_path).graph.node
    nbits = [node for node in nodes if node.op_type == "MatMulNBits"]
    assert nbits and {node.domain for node in nbits} == {"com.microsoft"}
    assert all(
        onnx.helper.get_attribute_value(a) == 8
        for n in nbits
        for a in n.attribute
        if a.name == "bits"
    )
    float_matmuls = [node for node in nodes if node.op_type == "MatMul"]
    assert len(float_matmuls) == 2 * len(model.transformer_layers), [n.name for n in float_matmuls]
    # The word-embedding table: int8 rows gathered (serving/formats/int8_rows.py).
    graph = onnx.load(small.model_path).graph
    int8_tables = {
        tensor.name
        for tensor in graph.initializer
        if tensor.data_type == onnx.TensorProto.INT8
        and list(tensor.dims) == [tokenizer.vocabulary_size(), model.bert_config.hidden_size]
    }
    gathered = {node.input[0] for node in nodes if node.op_type == "Gather"}
    assert int8_tables & gathered, (int8_tables, sorted(gathered))
    ids = ph.random_ids(model, tokenizer.vocabulary_size(), batch=8)
    got, want = _run(_session(small.model_path), ids), ph.keras_outputs(model, ids)
    assert ph.cosines(want["pooled_output"], got["pooled_output"]).min() > 0.99


def test_float16_is_refused_in_one_line(tmp_path, family_exports, tokenizer):
    task, model, _ = family_exports["encoder"]
    with pytest.raises(ValueError) as raised:
        serving.export(
            serving.ModelSource(task, model, tokenizer),
            str(tmp_path / "f16"),
            format="onnx",
            quantize="float16",
        )
    message = str(raised.value)
    # Refused before the model is read: the line names the format and the choices.
    assert "\n" not in message and message.startswith(
        "ONNX: quantize must be one of none, dynamic_int8; got 'float16'"
    ), message
    assert not (tmp_path / "f16").exists()


def test_converter_failure_is_one_line_naming_it():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def no_onnx_form(text):
        return {"ids": tf.strings.to_hash_bucket_fast(tf.strings.lower(text), 7)}

    with pytest.raises(portable.ConversionError) as raised:
        onnx_format.convert(
            no_onnx_form, [tf.TensorSpec([None], tf.string, name="text")], "my_family (ONNX)"
        )
    message = str(raised.value)
    assert "\n" not in message and message.startswith("my_family (ONNX): "), message
