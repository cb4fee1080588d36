"""BertPreprocessor: eager, tf.data and an exported SavedModel give the same ids."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

KEYS = ("input_word_ids", "input_mask", "input_type_ids")
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve résumé",
    "",
    "中文 and emoji \U0001f600 and a very long tail " + "word " * 40,
    "Short.",
]


@pytest.fixture(scope="module")
def preprocessor(uncased_vocab_path):
    return BertPreprocessor(BertTokenizer(vocabulary=uncased_vocab_path), sequence_length=16)


def test_single_pair_and_triple_layouts(preprocessor):
    tok = preprocessor.tokenizer
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    a = tok(tf.constant(["Short."])).to_list()[0]  # ["short", "."]
    out = preprocessor(tf.constant(["Short."]))
    assert out["input_word_ids"].numpy().tolist() == [[cls_id, *a, sep_id] + [0] * 12]
    assert out["input_mask"].numpy().tolist() == [[1] * 4 + [0] * 12]
    pair = preprocessor((tf.constant(["Short."]), tf.constant(["Short."])))
    assert pair["input_word_ids"].numpy().tolist() == [[cls_id, *a, sep_id, *a, sep_id] + [0] * 9]
    assert pair["input_type_ids"].numpy().tolist() == [[0] * 4 + [1] * 3 + [0] * 9]
    triple = preprocessor([tf.constant(["Short."])] * 3)
    assert triple["input_type_ids"].numpy().tolist() == [[0] * 4 + [1] * 3 + [2] * 3 + [0] * 6]
    for value in out.values():
        assert value.dtype == tf.int32 and value.shape == (1, 16)


def test_scalar_input_and_longest_padding(uncased_vocab_path, preprocessor):
    scalar = preprocessor(tf.constant("Short."))
    assert scalar["input_word_ids"].shape == (16,)
    longest = BertPreprocessor(preprocessor.tokenizer, sequence_length=16, pad_to="longest")
    out = longest(tf.constant(["Short.", "Café naïve"]))
    assert out["input_word_ids"].shape[1] == out["input_mask"].numpy().sum(axis=1).max()
    with pytest.raises(ValueError, match="1 to 3"):
        preprocessor([tf.constant(["a"])] * 4)


@pytest.mark.slow
def test_tf_data_batched_and_per_example(preprocessor):
    eager = preprocessor(tf.constant(SENTENCES))
    ds = tf.data.Dataset.from_tensor_slices(SENTENCES)
    batched = list(ds.batch(2).map(preprocessor, num_parallel_calls=2).as_numpy_iterator())
    per_example = list(ds.map(preprocessor).as_numpy_iterator())
    for key in KEYS:
        np.testing.assert_array_equal(np.concatenate([b[key] for b in batched]), eager[key])
        np.testing.assert_array_equal(np.stack([e[key] for e in per_example]), eager[key])
    pairs = tf.data.Dataset.from_tensor_slices((SENTENCES, SENTENCES[::-1])).batch(5)
    pair_out = next(iter(pairs.map(lambda a, b: preprocessor((a, b)))))
    direct = preprocessor((tf.constant(SENTENCES), tf.constant(SENTENCES[::-1])))
    for key in KEYS:
        np.testing.assert_array_equal(pair_out[key], direct[key])


@pytest.mark.slow
def test_saved_model_round_trip_carries_vocab(tmp_path, preprocessor):
    module = tf.Module()
    module.preprocessor = preprocessor
    module.serve = tf.function(
        lambda texts: preprocessor(texts), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    module.serve_pairs = tf.function(
        lambda a, b: preprocessor((a, b)),
        input_signature=[tf.TensorSpec([None], tf.string)] * 2,
    )
    export = str(tmp_path / "export")
    tf.saved_model.save(module, export, signatures={"serving_default": module.serve})
    assert "vocab.txt" in os.listdir(os.path.join(export, "assets"))
    loaded = tf.saved_model.load(export)
    texts = tf.constant(SENTENCES)
    expected = preprocessor(texts)
    served = loaded.signatures["serving_default"](texts=texts)
    called = loaded.serve(texts)
    pairs = loaded.serve_pairs(texts, texts[::-1])
    expected_pairs = preprocessor((texts, texts[::-1]))
    for key in KEYS:
        np.testing.assert_array_equal(served[key].numpy(), expected[key].numpy())
        np.testing.assert_array_equal(called[key].numpy(), expected[key].numpy())
        np.testing.assert_array_equal(pairs[key].numpy(), expected_pairs[key].numpy())


def test_config_round_trip(preprocessor, tmp_path):
    """The config rebuilds the layer; the tokenizer's assets give it its vocabulary."""
    config = preprocessor.get_config()
    preprocessor.tokenizer.save_assets(str(tmp_path))
    clone = BertPreprocessor.from_config(config)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(preprocessor)
    )
    texts = tf.constant(SENTENCES)
    expected = preprocessor(texts)
    for layer in (clone, restored):
        layer.tokenizer.load_assets(str(tmp_path))
        assert layer.get_config() == config
        out = layer(texts)
        for key in KEYS:
            np.testing.assert_array_equal(out[key], expected[key])


def test_requires_cls_and_sep():
    tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "a"], lowercase=True)
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        BertPreprocessor(tokenizer, 8)
