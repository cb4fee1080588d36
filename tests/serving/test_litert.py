"""LiteRT exports (keras_bert_zoo/serving/formats/litert.py), checked against the Keras model.

Every family's ids-in `.tflite` answers as the Keras model on the same random ids (to
1e-5), under the SavedModel's `serve_ids` name and outputs, and with the task's answers
on raw text through the sidecar's vocabulary; its flatbuffer lists builtin ops only
(read by TFLite's own ModelAnalyzer). Dynamic-range int8 on the real MiniLM stays close
to float (cosine) and keeps the labels of a real dev set (test_int8_minilm.py). The
raw-text `.tflite` answers as the raw-text SavedModel on real sentences, where BERT's
tokenizer and tensorflow-text's FastBertTokenizer agree. A family without an export, and
a converter failure, end with one line naming them.
"""

from __future__ import annotations

import os
import pathlib
import unicodedata
import warnings

import child_process
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.serving import portable
from keras_bert_zoo.serving.formats import litert
from keras_bert_zoo.utils import cli

HERE = pathlib.Path(__file__).resolve().parent
ph = child_process.import_by_path("kbz_portable_test_helpers", HERE / "portable_test_helpers.py")
TF_TEXT_KERNELS = [
    "FastBertNormalize",
    "FastWordpieceTokenizeWithOffsets",
    "RaggedTensorToTensor",
    "TFText>RoundRobinTrim",
]


@pytest.fixture(scope="module")
def tokenizer(minilm_tokenizer):
    return minilm_tokenizer  # the session's (conftest.py)


@pytest.fixture(scope="module")
def family_exports(tmp_path_factory, helpers, tokenizer):
    """`{family: (task, model, PortableExport)}`: each family's float ids-in export."""
    base = tmp_path_factory.mktemp("litert")
    exports = {}
    for family in ph.FAMILIES:
        task, model = ph.family_model(family, helpers, tokenizer.vocabulary_size())
        exported = serving.export(
            serving.ModelSource(task, model, tokenizer),
            str(base / family),
            format="litert",
            verify=False,  # the tests compare each with the Keras model themselves
        )
        exports[family] = (task, model, exported)
    return exports


def _interpreter(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(model_path=path)


@pytest.mark.slow
@pytest.mark.parametrize("family", ph.FAMILIES)
def test_each_family_answers_as_the_keras_model(family, family_exports, tokenizer):
    task, model, exported = family_exports[family]
    interpreter = _interpreter(exported.model_path)
    listed = interpreter.get_signature_list()
    assert list(listed) == ["serve_ids"]
    assert sorted(listed["serve_ids"]["inputs"]) == sorted(
        serving.signatures.model_input_specs(model)
    )
    assert sorted(listed["serve_ids"]["outputs"]) == ph.serve_ids_output_names(model)
    run = interpreter.get_signature_runner("serve_ids")
    for seed in range(2):
        ids = ph.random_ids(model, tokenizer.vocabulary_size(), seed=seed)
        if family == "masked_lm":  # its fixed number of positions (the sidecar's)
            slots = exported.sidecar["prediction_slots"]
            ids["masked_lm_positions"] = np.pad(
                ids["masked_lm_positions"], [(0, 0), (0, slots - 4)]
            )
        ph.assert_same_answers(ph.keras_outputs(model, ids), run(**ids))
    # Raw text through the sidecar's vocabulary: the task's own answers.
    request = ph.text_request(task)
    answers = serving.load_portable_model(exported.path)(**request)
    ph.assert_same_answers(ph.eager_answers(task, model, tokenizer, request), answers)


@pytest.mark.slow
@pytest.mark.parametrize("family", ph.FAMILIES)
def test_no_flex_or_custom_op_in_the_ids_graph(family, family_exports):
    _, _, exported = family_exports[family]
    ops = ph.analyzer_ops(exported.model_path)
    assert "FULLY_CONNECTED" in ops and "SOFTMAX" in ops, ops
    assert not [op for op in ops if op.startswith("Flex")], ops
    assert exported.sidecar["custom_ops"] == [] and sorted(set(ops)) == sorted(
        exported.sidecar["builtin_ops"]
    )


def test_sidecar_says_how_to_tokenize(family_exports, tokenizer):
    task, _, exported = family_exports["sentence_classification"]
    sidecar = exported.sidecar
    vocabulary = (pathlib.Path(exported.path) / sidecar["vocab_file"]).read_text("utf-8")
    assert vocabulary.splitlines() == tokenizer.get_vocabulary()
    assert sidecar["lowercase"] is True and sidecar["max_seq_length"] == 24
    assert sidecar["label_names"] == list(task.label_names)
    assert sidecar["special_tokens"]["[CLS]"] == tokenizer.token_to_id("[CLS]")
    assert sidecar["input"] == "ids" and sidecar["signature"] == "serve_ids"


def test_float16_is_half_the_size_and_close(tmp_path, family_exports, tokenizer):
    task, model, exported = family_exports["encoder"]
    half = serving.export(
        serving.ModelSource(task, model, tokenizer),
        str(tmp_path / "f16"),
        format="litert",
        quantize="float16",
    )
    assert half.size_bytes < 0.6 * exported.size_bytes
    ids = ph.random_ids(model, tokenizer.vocabulary_size())
    got = _interpreter(half.model_path).get_signature_runner("serve_ids")(**ids)
    want = ph.keras_outputs(model, ids)
    assert ph.cosines(want["pooled_output"], got["pooled_output"]).min() > 0.9999


# === Raw text in ===


def _differs_by_cause(text: str) -> bool:
    """Whether `text` holds a character on which FastBertTokenizer's normalizer is known
    to depart from BERT's (README, "Serving"): compatibility folding, case folding
    beyond lower-casing, or a code point Python's Unicode does not assign."""
    for char in text:
        if unicodedata.category(char) == "Cn":
            return True
        if unicodedata.normalize("NFKD", char) != unicodedata.normalize("NFD", char):
            return True
        if char.casefold() != char.lower():
            return True
    return False


@pytest.fixture(scope="module")
def raw_text_pair(tmp_path_factory, helpers, tokenizer):
    """A sentence-pair classifier exported as the raw-text SavedModel and the raw-text
    `.tflite` (float and int8)."""
    base = tmp_path_factory.mktemp("raw_text")
    task = tasks.create_task("glue/mnli", max_seq_length=32)
    model = helpers.randomize(
        task.build_model(helpers.tiny_encoder(tokenizer.vocabulary_size())), 7
    )
    saved = serving.export(
        serving.ModelSource(task, model, tokenizer),
        str(base),
        model_name="mnli",
        verify=False,
        tokenizer_ops="tensorflow_text",
    )
    tflite = serving.export(
        serving.ModelSource(task, model, tokenizer),
        str(base / "litert"),
        format="litert",
        raw_text=True,
    )
    return task, model, saved, tflite


@pytest.mark.slow
def test_raw_text_litert_answers_as_the_raw_text_saved_model(raw_text_pair, wiki_lines):
    task, _, saved, exported = raw_text_pair
    assert exported.sidecar["custom_ops"] == TF_TEXT_KERNELS
    ops = ph.analyzer_ops(exported.model_path)
    assert not [op for op in ops if op.startswith("Flex")] and set(TF_TEXT_KERNELS) <= set(ops)
    texts, _ = ph.review_sentences()
    # Real sentence pairs: reviews with reviews, Wikipedia lines (often longer than the
    # model: truncation of both segments) with the next line.
    first = texts[:100] + wiki_lines[:300]
    second = texts[100:200] + wiki_lines[1:301]
    served = tf.saved_model.load(saved.path).signatures["serving_default"]
    model = serving.load_portable_model(exported.path)
    exact = other = 0
    for start in range(0, len(first), 50):
        batch = {"premise": first[start : start + 50], "hypothesis": second[start : start + 50]}
        want = {
            k: v.numpy() for k, v in served(**{k: tf.constant(v) for k, v in batch.items()}).items()
        }
        got = model(**batch)
        for row in range(len(batch["premise"])):
            same = np.allclose(got["probabilities"][row], want["probabilities"][row], atol=1e-5)
            if _differs_by_cause(batch["premise"][row] + batch["hypothesis"][row]):
                other += 1
                continue
            assert same, (batch["premise"][row], batch["hypothesis"][row])
            assert got["label"][row] == want["label"][row]
            exact += 1
    print(f"raw-text LiteRT: {exact} pairs equal, {other} with a known tokenizer difference")
    assert exact >= 380, (exact, other)


@pytest.fixture(scope="module")
def wiki_lines():
    import bz2
    import xml.etree.ElementTree as ET

    import gensim

    name = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    path = pathlib.Path(gensim.__file__).parent / "test" / "test_data" / name
    lines = []
    with bz2.open(path) as f:
        for _, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] == "text" and element.text:
                lines.extend(line for line in element.text.split("\n") if line.strip())
            if len(lines) > 400:
                break
            element.clear()
    return lines


def test_unsupported_family_is_one_line_naming_it(family_exports, tokenizer, tmp_path):
    task, model, _ = family_exports["span"]
    with pytest.raises(portable.ConversionError) as raised:
        serving.export(
            serving.ModelSource(task, model, tokenizer),
            str(tmp_path / "x"),
            format="litert",
            raw_text=True,
        )
    message = str(raised.value)
    assert "\n" not in message and message.startswith("squad_v2.0 (raw-text LiteRT): ")
    assert not (tmp_path / "x").exists()


def test_converter_failure_is_one_line_naming_it():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def needs_flex(text):
        return {"length": tf.strings.length(tf.strings.lower(text))}

    with pytest.raises(portable.ConversionError) as raised:
        litert.convert(needs_flex, "serve_ids", "my_family (LiteRT)", "none")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("my_family (LiteRT): "), message


def test_export_tool_refuses_an_unsupported_family_in_one_line(
    tmp_path, family_exports, tokenizer, load_tool
):
    """The tool's user error: one line naming the family (cli.run prints it and exits
    1), and no output directory."""
    task, model, _ = family_exports["tagging"]
    tasks.save_finetuned(str(tmp_path / "conll"), task, model, tokenizer)
    with load_tool("export_saved_model") as tool:
        flags = tool.flags.FLAGS
        try:
            flags(
                [
                    "tool",
                    f"--finetuned_dir={tmp_path / 'conll'}",
                    "--format=litert",
                    "--raw_text",
                    f"--output_dir={tmp_path / 'out'}",
                ]
            )
            with pytest.raises(ValueError) as raised:
                tool.main(["tool"])
        finally:
            flags.unparse_flags()
    assert cli.is_user_error(raised.value, (str(child_process.REPO_ROOT / "tools"),))
    message = cli.user_error_message(raised.value)
    assert "\n" not in message and message.startswith(
        "conll2003 (raw-text LiteRT): only tasks packed by"
    ), message
    assert not os.path.exists(tmp_path / "out")
