"""Dynamic int8 on the real MiniLM encoder, as LiteRT and as ONNX (moved here from
test_litert.py and test_onnx_export.py, which test each format on tiny models, so that
both share the one `MiniLMReviews`: the real encoder, its float outputs on the 200 review
sentences and a sentiment head). Each export is under a third of the float size, its
pooled and sequence outputs close to float, and the head keeps the labels of the real
dev sentences (portable_test_helpers.MiniLMReviews.assert_int8_keeps_the_answers)."""

from __future__ import annotations

import pathlib
import warnings

import child_process
import numpy as np
import onnxruntime
import pytest
import tensorflow as tf

from keras_bert_zoo import serving

HERE = pathlib.Path(__file__).resolve().parent
ph = child_process.import_by_path("kbz_portable_test_helpers", HERE / "portable_test_helpers.py")
ONNX_DTYPES = {"tensor(int32)": np.int32, "tensor(int64)": np.int64}


@pytest.fixture(scope="module")
def minilm(minilm_tokenizer):
    return ph.MiniLMReviews(tokenizer=minilm_tokenizer)


def _export(minilm, tmp_path, format_):
    return serving.export(
        serving.ModelSource(serving.EncoderServable(64), minilm.encoder, minilm.tokenizer),
        str(tmp_path / "int8"),
        format=format_,
        quantize="dynamic_int8",
        verify=False,  # compared with the float model below
    )


@pytest.mark.slow
def test_litert_dynamic_int8_on_real_minilm_keeps_the_answers(tmp_path, minilm):
    """The real MiniLM encoder, dynamic-range int8 LiteRT: a quarter of the float size,
    pooled and sequence outputs close to float, and the labels of a sentiment head on
    the real dev sentences; builtin ops only."""
    exported = _export(minilm, tmp_path, "litert")
    assert not [op for op in ph.analyzer_ops(exported.model_path) if op.startswith("Flex")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        interpreter = tf.lite.Interpreter(model_path=exported.model_path)
    got = interpreter.get_signature_runner("serve_ids")(**minilm.ids)
    minilm.assert_int8_keeps_the_answers("LiteRT", exported.size_bytes, got)


@pytest.mark.slow
def test_onnx_dynamic_int8_on_real_minilm_keeps_the_answers(tmp_path, minilm):
    """The real MiniLM encoder, int8 ONNX: under a third of the float size, pooled and
    sequence outputs close to float, and the labels of a sentiment head on the real
    dev sentences (the bar `quantize_dynamic` alone missed: 0.994 pooled cosine)."""
    exported = _export(minilm, tmp_path, "onnx")
    session = onnxruntime.InferenceSession(exported.model_path, providers=["CPUExecutionProvider"])
    ids = {i.name: minilm.ids[i.name].astype(ONNX_DTYPES[i.type]) for i in session.get_inputs()}
    names = [output.name for output in session.get_outputs()]
    got = dict(zip(names, session.run(names, ids), strict=True))
    minilm.assert_int8_keeps_the_answers("ONNX", exported.size_bytes, got)
