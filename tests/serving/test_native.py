"""Beyond Python: a C++ program built against the tensorflow wheel's headers and
libtensorflow_cc loads each export with `tensorflow::LoadSavedModel` (TF Serving's
loader: the "serve" MetaGraphDef, its checkpoint restore op, its table initializers),
loads the tensorflow-text op libraries the manifest lists, runs `serving_default` on
raw bytes and gets the outputs the Python-loaded SavedModel gives."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.serving import native, ops


def _python_outputs(loaded, inputs):
    outputs = loaded.signatures["serving_default"](
        **{key: tf.constant(value) for key, value in inputs.items()}
    )
    return {key: value.numpy() for key, value in outputs.items()}


@pytest.mark.slow
def test_cpp_loader_answers_raw_strings_like_python(
    all_exports, tensorflow_text_export, cpp_runner, loaded, helpers
):
    """Every task family's core export runs with no op library loaded (nothing of
    tensorflow-text); the tensorflow-text export with the libraries its manifest lists."""
    for export in [*all_exports, tensorflow_text_export]:
        inputs = helpers.text_inputs(export.task.text_fields, helpers.HOSTILE_TEXTS)
        libraries = ops.library_paths(ops.read_op_manifest(export.path))
        assert (libraries == []) == (export is not tensorflow_text_export), export.name
        served = native.run_saved_model(cpp_runner, export.path, inputs, op_libraries=libraries)
        expected = _python_outputs(loaded(export), inputs)
        assert sorted(served) == sorted(expected), export.name
        for key, want in expected.items():
            got = served[key]
            assert got.shape == want.shape, (export.name, key)
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=key)
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{export.name} {key}")


@pytest.mark.slow
def test_without_the_op_libraries_the_loader_fails_as_tf_serving_does(
    tensorflow_text_export, cpp_runner
):
    """A tensorflow-text export does not load without its libraries (the failure the
    core exports avoid)."""
    manifest = ops.read_op_manifest(tensorflow_text_export.path)
    inputs = {"premise": ["a"], "hypothesis": ["b"]}
    with pytest.raises(RuntimeError, match="Op type not registered") as error:
        native.run_saved_model(cpp_runner, tensorflow_text_export.path, inputs)
    assert any(f"'{entry['op']}'" in str(error.value) for entry in manifest["custom_ops"])


def test_cpp_loader_sees_the_signatures_and_method_names(sentence_pair_export, cpp_runner):
    libraries = ops.library_paths(ops.read_op_manifest(sentence_pair_export.path))
    listing = native.list_signatures(cpp_runner, sentence_pair_export.path, libraries)
    assert "signature serve_examples tensorflow/serving/classify" in listing
    assert "signature serving_default tensorflow/serving/predict" in listing
    assert "input premise string [-1]" in listing
    assert "output classes string [-1,3]" in listing


@pytest.mark.slow
def test_cpp_loader_serves_the_real_minilm_like_hugging_face(tmp_path, cpp_runner):
    """The real pretrained all-MiniLM-L6-v2 exported as an encoder and run by the C++
    loader on raw text: its hidden states at the real tokens are Hugging Face torch's
    for the same ids."""
    import os

    import torch
    import transformers

    from keras_bert_zoo import from_pretrained, serving
    from keras_bert_zoo.tasks.feature_extraction import demo_model_dir
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    model_dir = demo_model_dir()
    tokenizer = BertTokenizer(os.path.join(model_dir, "vocab.txt"))
    servable = serving.EncoderServable(max_seq_length=64)
    exported = serving.export(
        serving.ModelSource(servable, from_pretrained(model_dir), tokenizer),
        str(tmp_path),
        model_name="minilm",
        verify=False,  # checked against Hugging Face below
    )
    sentences = [
        "A man is playing a guitar on stage.",
        "Crème brûlée is a French dessert; 中文 too.",
        "",
        "The stock market fell sharply after the announcement, " * 8,
    ]
    libraries = ops.library_paths(ops.read_op_manifest(exported.path))
    served = native.run_saved_model(
        cpp_runner, exported.path, {"sentence": sentences}, op_libraries=libraries
    )
    ids = BertPreprocessor(tokenizer, sequence_length=64)(tf.constant(sentences))
    length = served["input_mask"].shape[1]
    np.testing.assert_array_equal(served["input_mask"], ids["input_mask"].numpy()[:, :length])
    reference = transformers.BertModel.from_pretrained(model_dir, local_files_only=True).eval()
    with torch.inference_mode():
        hidden = reference(
            input_ids=torch.tensor(ids["input_word_ids"].numpy()[:, :length], dtype=torch.long),
            attention_mask=torch.tensor(ids["input_mask"].numpy()[:, :length], dtype=torch.long),
            token_type_ids=torch.tensor(
                ids["input_type_ids"].numpy()[:, :length], dtype=torch.long
            ),
        ).last_hidden_state.numpy()
    real = served["input_mask"].astype(bool)
    np.testing.assert_allclose(served["sequence_output"][real], hidden[real], atol=2e-4)
