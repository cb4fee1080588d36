"""`PaddingFreeEncoder`: BERT inference on the real tokens of a batch only."""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from keras_bert_zoo.inputs import (
    ENCODER_INPUT_NAMES,
    INPUT_MASK,
    INPUT_TYPE_IDS,
    INPUT_WORD_IDS,
)
from keras_bert_zoo.layers.token_layout import TokenLayout
from keras_bert_zoo.models.encoder import BertEncoder
from keras_bert_zoo.utils.errors import UserError


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PaddingFreeEncoder(keras.Model):
    """Runs a `BertEncoder` for inference without computing its padding.

    Real batches are padded to their longest (or a fixed) length, and everything but
    attention treats each position on its own, so the padded positions of a batch are
    pure waste: a third of the work for sentences of 64 to 128 tokens padded to 128,
    most of it for short sentences padded to 128. This wrapper gathers the real tokens
    (`input_mask == 1`), runs the embeddings, projections and feed-forward layers on
    them alone, takes attention scores in the padded layout, and scatters the results
    back. It runs the encoder's own layer loop (`BertEncoder.run_layers`) with its
    weights; each real token's outputs equal the encoder's at its position (to float
    rounding), and padded positions are zeros.

    It is a Keras model: `predict`, `.keras` files (it stores the encoder) and
    `export` / `keras.export.ExportArchive` work as for any model. Compile it, if at
    all, without `jit_compile`: which tokens are real is worked out outside XLA, and
    only the token computation is compiled (`jit_compile` below).

    The number of tokens is rounded up to a multiple of `token_bucket`, so that XLA
    compiles one program per `(batch, seq_len, rounded tokens)`, not per batch.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        token_bucket: int. Granularity of the token count: larger means fewer XLA
            programs, smaller means less filler work.
        jit_compile: bool. Compile the token computation with XLA (fastest on CPU
            and GPU); `False` runs it as a TensorFlow graph.

    Call arguments:
        inputs: dict of int tensors or arrays `[batch, seq_len]`: `input_word_ids`,
            `input_mask`, `input_type_ids`. Position 0 of each row must be a real token
            (`[CLS]`): the pooled output is read there.

    Returns:
        dict like `BertEncoder`'s: `sequence_output` `[batch, seq_len, hidden]`,
        `pooled_output` `[batch, hidden]`, `encoder_outputs` (one per block), with
        zeros at padded positions. Inference only: dropout is off.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder, PaddingFreeEncoder

    encoder = BertEncoder.untrained("bert_tiny_uncased")
    inputs = {
        "input_word_ids": np.array([[101, 7592, 102, 0], [101, 2088, 2003, 102]]),
        "input_mask": np.array([[1, 1, 1, 0], [1, 1, 1, 1]]),
        "input_type_ids": np.zeros((2, 4), "int32"),
    }
    fast = PaddingFreeEncoder(encoder)
    outputs = fast(inputs)  # equals encoder(inputs) at the 7 real tokens
    outputs = fast.predict(inputs, batch_size=32, verbose=0)  # numpy, batch by batch
    print(outputs["sequence_output"].shape)  # (2, 4, 128)
    ```
    """

    def __init__(self, encoder, token_bucket: int = 64, jit_compile: bool = True, **kwargs):
        if int(token_bucket) < 1:
            raise UserError(f"token_bucket must be >= 1, got {token_bucket}")
        super().__init__(**kwargs)
        # === Layers ===
        self.encoder = encoder
        # === Config ===
        self.token_bucket = int(token_bucket)
        self.jit_compile_tokens = bool(jit_compile)
        # The dynamic part (which tokens are real) cannot run under XLA; Keras' own
        # predict/evaluate functions must not be compiled with it.
        self.jit_compile = False
        self._run_tokens_function = tf.function(
            self._run_tokens,
            jit_compile=self.jit_compile_tokens,
            reduce_retracing=True,
            autograph=False,
        )
        self._call_function = tf.function(self._call, reduce_retracing=True, autograph=False)
        # The encoder is built; nothing for build() to create.
        self.built = True

    def call(self, inputs, training=None):
        """Inference only: dropout is off whatever `training` says."""
        missing = [name for name in ENCODER_INPUT_NAMES if name not in inputs]
        if missing:
            raise KeyError(f"PaddingFreeEncoder inputs lack {missing}; got {sorted(inputs)}")
        tensors = {name: tf.cast(inputs[name], tf.int32) for name in ENCODER_INPUT_NAMES}
        shapes = {name: tuple(tensor.shape) for name, tensor in tensors.items()}
        if len(set(shapes.values())) != 1 or len(shapes[INPUT_MASK]) != 2:
            raise UserError(f"inputs must all be [batch, seq_len]; got shapes {shapes}")
        seq_len = shapes[INPUT_MASK][1]
        if seq_len is not None and seq_len > self.encoder.max_position_embeddings:
            # Under XLA an out-of-range position would be clamped, not reported.
            raise UserError(
                f"input_word_ids has {seq_len} positions, more than the encoder's "
                f"max_position_embeddings ({self.encoder.max_position_embeddings})"
            )
        return self._call_function(tensors)

    # Dynamic shapes (which tokens are real) are worked out here, outside XLA.
    def _call(self, inputs):
        mask = inputs[INPUT_MASK]
        seq_len = tf.shape(mask)[1]
        positions = tf.size(mask)
        real = tf.cast(tf.where(tf.reshape(mask, [-1]) > 0)[:, 0], tf.int32)
        count = tf.size(real)
        rounded = (count + self.token_bucket - 1) // self.token_bucket * self.token_bucket
        token_index = tf.concat([real, tf.fill([rounded - count], positions)], axis=0)

        def tokens_of(name):
            flat = tf.concat([tf.reshape(inputs[name], [-1]), tf.zeros([1], tf.int32)], axis=0)
            return tf.gather(flat, token_index)[tf.newaxis]

        return self._run_tokens_function(
            tokens_of(INPUT_WORD_IDS),
            tokens_of(INPUT_TYPE_IDS),
            (token_index % seq_len)[tf.newaxis],
            token_index,
            mask,
        )

    # Static shapes from here on: one XLA program per (batch, seq_len, rounded tokens).
    def _run_tokens(self, word_ids, type_ids, position_ids, token_index, mask):
        return self.encoder.run_layers(
            word_ids,
            type_ids,
            mask,
            layout=TokenLayout(mask, token_index),
            position_ids=position_ids,
            training=False,
        )

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "token_bucket": self.token_bucket,
            "jit_compile": self.jit_compile_tokens,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


@contextlib.contextmanager
def padding_free_inference(model):
    """While open, every `BertEncoder` in `model` (or `model` itself) answers inference
    calls (`training` false) through a `PaddingFreeEncoder` as a TensorFlow graph
    (`BertEncoder.route_inference`): the exporter traces the served graph inside it,
    for models that declare `supports_padding_free_inference`. Training calls and
    everything after the block run the padded graph as before.

    Outputs at padded positions are zeros instead of the values computed there, which
    no head reads (every task masks or drops them); at real positions the outputs
    equal the padded graph's to float rounding.
    """
    encoders = [
        layer
        for layer in [model, *model._flatten_layers(include_self=False)]
        if isinstance(layer, BertEncoder)
    ]
    with contextlib.ExitStack() as routes:
        for encoder in encoders:
            # No XLA and no token buckets: a graph runs any token count as it comes.
            padding_free = PaddingFreeEncoder(encoder, token_bucket=1, jit_compile=False)
            routes.enter_context(encoder.route_inference(padding_free.__call__))
        yield model
