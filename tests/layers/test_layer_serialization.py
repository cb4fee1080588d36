"""get_config / from_config round trips of every layer: same output given the same weights."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import (
    BertEmbeddings,
    BertSelfAttention,
    ClassificationHead,
    MaskedLMHead,
    SequencePooling,
    SpanHead,
    TransformerEncoderBlock,
)
from keras_bert_zoo.models.multiple_choice import FoldChoices

RNG = np.random.default_rng(0)
HIDDEN = np.asarray(RNG.standard_normal((2, 6, 16)), "float32")
MASK = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], "int32")
IDS = RNG.integers(0, 30, (2, 6)).astype("int32")
TYPES = (np.arange(6)[None] >= 3).astype("int32").repeat(2, axis=0)
POSITIONS = np.array([[1, 4], [0, 2]], "int32")


CASES = {
    "embeddings": (
        lambda: BertEmbeddings(
            vocab_size=30,
            hidden_size=16,
            max_position_embeddings=12,
            type_vocab_size=3,
            initializer_range=0.05,
            layer_norm_epsilon=1e-6,
            dropout=0.2,
            name="emb",
        ),
        (IDS, TYPES),
    ),
    "attention": (
        lambda: BertSelfAttention(num_heads=4, head_size=4, dropout=0.3, initializer_range=0.04),
        (HIDDEN, MASK),
    ),
    "block_exact_gelu": (
        lambda: TransformerEncoderBlock(
            num_heads=2,
            intermediate_size=24,
            activation="gelu",
            hidden_dropout=0.2,
            attention_dropout=0.15,
            layer_norm_epsilon=1e-7,
            initializer_range=0.03,
        ),
        (HIDDEN, MASK),
    ),
    "block_tanh_gelu": (
        lambda: TransformerEncoderBlock(num_heads=4, intermediate_size=8),
        (HIDDEN, MASK),
    ),
    "masked_lm_head": (
        lambda: MaskedLMHead(vocab_size=30, activation="gelu", layer_norm_epsilon=1e-6),
        (HIDDEN, POSITIONS),
    ),
    "classification_head": (
        lambda: ClassificationHead(num_classes=3, dropout=0.25, initializer_range=0.1),
        (HIDDEN[:, 0],),
    ),
    "regression_head": (lambda: ClassificationHead(num_classes=1), (HIDDEN[:, 0],)),
    "span_head": (lambda: SpanHead(initializer_range=0.07), (HIDDEN,)),
    "fold_choices": (lambda: FoldChoices(), (IDS.reshape(1, 2, 6),)),
    "mean_pooling": (lambda: SequencePooling(), (HIDDEN, MASK)),
    "cls_pooling": (lambda: SequencePooling("cls"), (HIDDEN, MASK)),
    "max_pooling": (lambda: SequencePooling("max", name="pool"), (HIDDEN, MASK)),
}


def _outputs(layer, args):
    out = layer(*args)
    if isinstance(out, (tuple, list)):
        return [keras.ops.convert_to_numpy(o) for o in out]
    return [keras.ops.convert_to_numpy(out)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_config_round_trip(case, randomize):
    make, args = CASES[case]
    layer = make()
    _outputs(layer, args)  # build
    randomize(layer, seed=1)
    before = _outputs(layer, args)

    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    _outputs(clone, args)  # build
    clone.set_weights(layer.get_weights())
    after = _outputs(clone, args)
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_registered_serialization(case):
    """serialize/deserialize_keras_object finds the class by its registered name."""
    make, _ = CASES[case]
    layer = make()
    serialized = keras.saving.serialize_keras_object(layer)
    restored = keras.saving.deserialize_keras_object(serialized)
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()


def test_config_keeps_gelu_meaning():
    exact = TransformerEncoderBlock(num_heads=2, intermediate_size=8, activation="gelu")
    approx = TransformerEncoderBlock(num_heads=2, intermediate_size=8)
    assert exact.get_config()["activation"] == "gelu"
    assert approx.get_config()["activation"] == "gelu_approximate"
    assert MaskedLMHead(10, activation="gelu").get_config()["activation"] == "gelu"


def test_fold_choices_shape():
    layer = FoldChoices()
    x = np.arange(2 * 3 * 5).reshape(2, 3, 5)
    out = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_array_equal(out, x.reshape(6, 5))
    assert layer.compute_output_shape((2, 3, 5)) == (6, 5)
    assert layer.compute_output_shape((None, 3, None)) == (None, None)
