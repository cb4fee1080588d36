"""The TF Hub style pair: the preprocessor packs as `BertPreprocessor` does, the
encoder and its `mlm` answer as the in-memory Keras models, after a reload."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import serving
from keras_bert_zoo.models import BertPretrainer
from keras_bert_zoo.text import BertPreprocessor

TEXTS = ["Who won the race?", "Ada did, in 1842 — naïvely.", "", "x " * 80]
PAIRS = ["Ada.", "", "a second segment here", "y"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory, minilm_tokenizer, helpers):
    model = helpers.randomize(
        BertPretrainer(helpers.tiny_encoder(minilm_tokenizer.vocabulary_size())), 11
    )
    output_dir = tmp_path_factory.mktemp("hub") / "pair"
    preprocessor_dir, encoder_dir = serving.export(
        serving.ModelSource(None, model, minilm_tokenizer, max_seq_length=32),
        str(output_dir),
        format="hub_pair",
        verify=False,  # the tests compare both halves with the Keras layers themselves
    ).paths
    with pytest.raises(FileExistsError, match="already exists"):
        serving.export(
            serving.ModelSource(None, model, minilm_tokenizer), str(output_dir), format="hub_pair"
        )
    pair_dirs[:] = [preprocessor_dir, encoder_dir]
    return model, tf.saved_model.load(preprocessor_dir), tf.saved_model.load(encoder_dir)


pair_dirs: list[str] = []


@pytest.mark.slow
def test_the_pair_holds_core_tensorflow_ops_only(pair):
    """The preprocessor tokenizes with core ops by default (`tokenizer_ops="core"`): no
    op of either SavedModel is outside `tf.raw_ops`, so neither needs tensorflow-text."""
    from keras_bert_zoo.serving import ops

    for directory in pair_dirs:
        names = ops.graph_op_names(directory)
        assert names and all(hasattr(tf.raw_ops, name) for name in names), directory
    assert "UnicodeDecode" in ops.graph_op_names(pair_dirs[0])


@pytest.mark.slow
def test_preprocessor_tokenizes_and_packs_like_the_keras_layers(pair, minilm_tokenizer):
    _, preprocessor, _ = pair
    text = tf.constant(TEXTS)
    expected = BertPreprocessor(minilm_tokenizer, sequence_length=32)(text)
    for key, value in preprocessor(text).items():
        np.testing.assert_array_equal(value, expected[key])
    signature = preprocessor.signatures["serving_default"](text=text)
    np.testing.assert_array_equal(signature["input_word_ids"], expected["input_word_ids"])
    tokens = preprocessor.tokenize(text)
    assert tokens.to_list() == minilm_tokenizer(text).to_list()
    special = {k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()}
    assert special == {
        "vocab_size": 30522,
        "start_of_sequence_id": 101,
        "end_of_segment_id": 102,
        "padding_id": 0,
        "mask_id": 103,
    }
    second = preprocessor.tokenize(tf.constant(PAIRS))
    for length in (8, 20, 64):
        packed = preprocessor.bert_pack_inputs([tokens, second], tf.constant(length))
        reference = BertPreprocessor(minilm_tokenizer, sequence_length=length)(
            (text, tf.constant(PAIRS))
        )
        for key, value in packed.items():
            np.testing.assert_array_equal(value, reference[key], err_msg=f"{length} {key}")
    # TF Hub's tokenizers give [batch, (words), (pieces)]: the same tokens, packed alike.
    words = tf.RaggedTensor.from_nested_row_lengths(
        tokens.flat_values, [tf.ones_like(tokens.flat_values, tf.int64)], validate=False
    )
    words = tf.RaggedTensor.from_row_splits(words, tokens.row_splits)
    packed = preprocessor.bert_pack_inputs([words], tf.constant(32))
    np.testing.assert_array_equal(packed["input_word_ids"], expected["input_word_ids"])


@pytest.mark.slow
def test_encoder_and_mlm_match_the_keras_model(pair, minilm_tokenizer):
    model, preprocessor, encoder = pair
    inputs = preprocessor(tf.constant(TEXTS))
    outputs = encoder(inputs)
    expected = model.encoder(inputs)
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(outputs["default"], expected["pooled_output"], atol=1e-5)
    assert len(outputs["encoder_outputs"]) == len(expected["encoder_outputs"])
    for got, want in zip(outputs["encoder_outputs"], expected["encoder_outputs"], strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)
    flat = encoder.signatures["serving_default"](**inputs)
    np.testing.assert_allclose(flat["encoder_outputs_0"], expected["encoder_outputs"][0], atol=1e-5)
    positions = tf.constant([[1, 2], [3, 0], [1, 1], [5, 9]])
    mlm = encoder.mlm({**inputs, "masked_lm_positions": positions})
    reference = model({**inputs, "masked_lm_positions": positions})
    np.testing.assert_allclose(mlm["mlm_logits"], reference["masked_lm_logits"], atol=1e-4)
    # Every weight is there to fine-tune through (TF Hub's KerasLayer reads these).
    assert len(encoder.trainable_variables) == len(model.trainable_weights)
    shapes = sorted(tuple(v.shape) for v in encoder.trainable_variables)
    assert shapes == sorted(tuple(w.shape) for w in model.trainable_weights)
