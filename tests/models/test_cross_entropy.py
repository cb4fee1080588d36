"""`sparse_softmax_cross_entropy` (the masked LM's loss) against a numpy restatement:
the value, its gradient, and its errors."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models.pretrainer import sparse_softmax_cross_entropy


def _numpy_loss_and_gradient(labels, logits, upstream):
    """-log softmax(logits)[label] and d(sum(upstream * loss)) / d logits, in float64."""
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    loss = -np.take_along_axis(log_softmax, labels[..., None], -1)[..., 0]
    one_hot = np.eye(logits.shape[-1])[labels]
    gradient = (np.exp(log_softmax) - one_hot) * upstream[..., None]
    return loss, gradient


@pytest.mark.parametrize("scale", [1.0, 60.0])
def test_loss_and_gradient_equal_numpy(scale):
    rng = np.random.default_rng(0)
    # [batch, predictions, vocab]; scale 60 puts exp() of the unshifted logits past
    # float32's range, so only a max-shifted implementation passes.
    logits = (rng.normal(size=(3, 4, 37)) * scale).astype(np.float32)
    labels = rng.integers(0, 37, (3, 4)).astype(np.int32)
    labels[0, 0] = int(np.argmax(logits[0, 0]))  # one confident hit, loss near 0
    upstream = rng.uniform(0.1, 2.0, (3, 4)).astype(np.float32)
    logits_variable = tf.Variable(logits)
    with tf.GradientTape() as tape:
        loss = sparse_softmax_cross_entropy(labels, logits_variable)
        weighted = tf.reduce_sum(loss * upstream)
    gradient = tape.gradient(weighted, logits_variable)

    want_loss, want_gradient = _numpy_loss_and_gradient(labels, logits, upstream)
    assert loss.shape == (3, 4) and loss.dtype == tf.float32
    np.testing.assert_allclose(loss.numpy(), want_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradient.numpy(), want_gradient, rtol=1e-5, atol=1e-6)


def test_equal_to_keras_loss_in_a_compiled_function():
    import keras

    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(size=(5, 11)).astype(np.float32))
    labels = tf.constant(rng.integers(0, 11, 5), tf.int64)  # int64 labels are cast
    ours = tf.function(sparse_softmax_cross_entropy)(labels, logits)
    theirs = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)


def test_label_out_of_range_fails():
    logits = tf.zeros((2, 5))
    with pytest.raises(tf.errors.InvalidArgumentError, match="5"):
        sparse_softmax_cross_entropy(tf.constant([1, 5]), logits)
