"""`SequencePooling` against numpy: mean, [CLS] and max over the real tokens, whatever
the padded positions hold, in float32 under mixed precision."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import POOLING_MODES, SequencePooling
from keras_bert_zoo.utils.errors import UserError

RNG = np.random.default_rng(0)
TOKENS = RNG.standard_normal((3, 5, 4)).astype("float32")
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], "int32")


def numpy_pooling(mode, tokens, mask):
    """One row at a time, over its real tokens only."""
    rows = []
    for row, row_mask in zip(tokens.astype(np.float64), mask, strict=True):
        real = row[row_mask.astype(bool)]
        rows.append({"mean": real.mean(0), "max": real.max(0), "cls": row[0]}[mode])
    return np.stack(rows)


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_pooling_equals_numpy_and_ignores_padding(mode):
    layer = SequencePooling(mode)
    pooled = keras.ops.convert_to_numpy(layer(TOKENS, MASK))
    np.testing.assert_allclose(pooled, numpy_pooling(mode, TOKENS, MASK), rtol=1e-6, atol=1e-6)
    # What the encoder leaves at padded positions never reaches the vector (large
    # values would win a max, or move a mean).
    noisy = np.where(MASK[..., None] == 1, TOKENS, 1e4).astype("float32")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(noisy, MASK)), pooled)
    assert layer.compute_output_shape((3, 5, 4), (3, 5)) == (3, 4)


def test_pooling_runs_in_float32_under_mixed_precision():
    layer = SequencePooling("mean")
    pooled = layer(keras.ops.cast(TOKENS, "bfloat16"), MASK)
    assert keras.backend.standardize_dtype(pooled.dtype) == "float32"
    expected = numpy_pooling(
        "mean",
        keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(TOKENS, "bfloat16"), "float32")),
        MASK,
    )
    np.testing.assert_allclose(keras.ops.convert_to_numpy(pooled), expected, rtol=1e-6, atol=1e-6)


def test_unknown_mode_is_a_user_error():
    with pytest.raises(UserError, match="pooling='sum': must be one of mean, cls, max"):
        SequencePooling("sum")
