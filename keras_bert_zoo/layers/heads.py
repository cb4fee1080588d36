"""Output heads: masked LM, classification (incl. next sentence), span, token, choice.

Every head returns float32 logits whatever the dtype policy, so losses and metrics are
computed in float32 under mixed precision.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_zoo.layers._arguments import constructor_arguments
from keras_bert_zoo.layers.activations import apply_activation, check_activation


def _initializer(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


def _logits_dense(units, initializer_range):
    """The last projection of a head, in float32 whatever the dtype policy."""
    return keras.layers.Dense(
        units,
        kernel_initializer=_initializer(initializer_range),
        dtype="float32",
        name="output_dense",
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the original tokens at the masked positions only.

    ```
    x = gather(sequence_output, masked_lm_positions)        # [batch, predictions, H]
    x = LayerNorm(activation(Dense(x)))
    logits = x @ word_embeddings^T + output_bias             # [batch, predictions, V]
    ```
    Gathering first is what makes pretraining affordable: about 20 of 128 positions
    go through the vocabulary-sized projection instead of all of them.

    Args:
        vocab_size: int. Size of the output vocabulary.
        activation: str. Activation of the transform (the encoder's `hidden_act`).
        layer_norm_epsilon: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer.
        embedding_layer: `keras.layers.Embedding` whose table is the tied decoder
            weight (the encoder's word embeddings). Not serialized: the model that owns
            both passes it again when it is rebuilt.

    Call arguments:
        sequence_output: float tensor `[batch, seq_len, hidden]`.
        masked_lm_positions: int tensor `[batch, predictions]`.
    """

    def __init__(
        self,
        vocab_size,
        activation="gelu_approximate",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        embedding_layer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.activation = check_activation(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.embedding_layer = embedding_layer

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        hidden_size = sequence_output_shape[-1]
        gathered_shape = (sequence_output_shape[0], None, hidden_size)

        # === Layers ===
        self.transform_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=_initializer(self.initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.transform_dense.build(gathered_shape)
        self.transform_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="transform_layer_norm"
        )
        self.transform_layer_norm.build(gathered_shape)
        if self.embedding_layer is None:
            # Untied decoder: used only when the head is built on its own.
            self.decoder_kernel = self.add_weight(
                name="decoder_kernel",
                shape=(self.vocab_size, hidden_size),
                initializer=_initializer(self.initializer_range),
            )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        positions = ops.cast(masked_lm_positions, "int32")
        gathered = ops.take_along_axis(sequence_output, positions[:, :, None], axis=1)
        return self.gathered_logits(gathered)

    def gathered_logits(self, gathered):
        """The logits for outputs already read at the masked positions.

        For forward passes that have them without a padded `sequence_output` to
        gather from (packed rows; the last block run at those positions only).

        Args:
            gathered: float tensor `[batch, predictions, hidden]`.

        Returns:
            float32 logits `[batch, predictions, vocab_size]`.
        """
        transformed = apply_activation(self.activation, self.transform_dense(gathered))
        transformed = self.transform_layer_norm(transformed)
        if self.embedding_layer is not None:
            table = self.embedding_layer.embeddings
        else:
            table = self.decoder_kernel
        # The vocabulary projection runs in the compute dtype, like every other Dense
        # layer under a mixed policy (keras-hub's ReversibleEmbedding, TF Model Garden's
        # MaskedLM and torch autocast do the same); only the logits go to float32. Kept
        # in float32 under mixed_bfloat16, it and the table's transpose took 170 of about
        # 1,000 ms of thread time in a bert_mini pretraining step (2-core AMX Xeon; the
        # step went from 612 to 581 ms; benchmarks/README.md).
        # tf.matmul(transpose_b=True) rather than ops.matmul with ops.transpose(table) or
        # ops.einsum("bph,vh->bpv"): the table's gradient comes out [vocab, hidden] with
        # no transpose of it (einsum's gradient cost 3x in TF graph mode).
        hidden_size = ops.shape(transformed)[-1]
        logits = tf.matmul(
            ops.reshape(transformed, (-1, hidden_size)),
            ops.cast(table, self.compute_dtype),
            transpose_b=True,
        )
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return ops.reshape(logits, (*ops.shape(transformed)[:-1], self.vocab_size))

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return (masked_lm_positions_shape[0], masked_lm_positions_shape[1], self.vocab_size)

    def compute_output_spec(self, sequence_output, masked_lm_positions):
        return keras.KerasTensor(
            self.compute_output_shape(sequence_output.shape, masked_lm_positions.shape),
            dtype="float32",
        )

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self, exclude=("embedding_layer",))}


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class ClassificationHead(keras.layers.Layer):
    """Dropout then a float32 Dense over a pooled `[batch, hidden]` vector.

    Serves sentence(-pair) classification, regression (`num_classes=1`), next sentence
    prediction (`num_classes=2, dropout=0`) and multiple-choice scoring
    (`num_classes=1`).

    Args:
        num_classes: int. Number of logits.
        dropout: float. Dropout rate before the projection.
        initializer_range: float. Stddev of the truncated-normal initializer.
    """

    def __init__(self, num_classes, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.output_dense = _logits_dense(num_classes, initializer_range)

    def build(self, pooled_shape):
        self.output_dense.build(pooled_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        return self.output_dense(self.dropout_layer(pooled_output, training=training))

    def compute_output_shape(self, pooled_shape):
        return tuple(pooled_shape[:-1]) + (self.num_classes,)

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self)}


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanHead(keras.layers.Layer):
    """Start and end logits for extractive question answering (SQuAD).

    Args:
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call arguments:
        sequence_output: float tensor `[batch, seq_len, hidden]`.

    Returns:
        `(start_logits, end_logits)`, each float32 `[batch, seq_len]`.
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.output_dense = _logits_dense(2, initializer_range)

    def build(self, sequence_output_shape):
        self.output_dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output):
        logits = self.output_dense(sequence_output)
        return logits[..., 0], logits[..., 1]

    def compute_output_shape(self, sequence_output_shape):
        shape = tuple(sequence_output_shape[:-1])
        return shape, shape

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self)}
