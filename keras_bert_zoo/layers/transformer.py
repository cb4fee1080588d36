"""The post-LayerNorm Transformer encoder block of BERT."""

import keras
import tensorflow as tf
from keras import ops

from keras_bert_zoo.layers._arguments import constructor_arguments
from keras_bert_zoo.layers.activations import (
    apply_activation,
    check_activation,
    fusable_activation,
)
from keras_bert_zoo.layers.attention import (
    BertSelfAttention,
    attention_head_size,
    gather_positions,
)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TransformerEncoderBlock(keras.layers.Layer):
    """One BERT encoder block.

    ```
    x = LayerNorm(x + Dropout(SelfAttention(x, mask)))
    x = LayerNorm(x + Dropout(Dense(activation(Dense(x)))))
    ```

    Args:
        num_heads: int. Number of attention heads; must divide the hidden size.
        intermediate_size: int. Width of the feed-forward layer.
        activation: str. `"gelu"` (exact), `"gelu_approximate"` (tanh), `"relu"`, ...
        hidden_dropout: float. Dropout after the attention and feed-forward outputs.
        attention_dropout: float. Dropout on the attention probabilities.
        layer_norm_epsilon: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the truncated-normal initializer.

    Call arguments:
        hidden_states: float tensor `[batch, seq_len, hidden]`.
        attention_mask: optional `[batch, seq_len]` padding mask (1 = real token).

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.layers import TransformerEncoderBlock

    block = TransformerEncoderBlock(num_heads=2, intermediate_size=16)
    x = np.random.rand(2, 5, 8).astype("float32")
    print(block(x, np.ones((2, 5))).shape)  # (2, 5, 8)
    ```
    """

    def __init__(
        self,
        num_heads,
        intermediate_size,
        activation="gelu_approximate",
        hidden_dropout=0.1,
        attention_dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.activation = check_activation(activation)
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

    def build(self, hidden_states_shape, attention_mask_shape=None):
        hidden_size = hidden_states_shape[-1]
        head_size = attention_head_size(hidden_size, self.num_heads)
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        intermediate_shape = tuple(hidden_states_shape[:-1]) + (self.intermediate_size,)

        # === Layers ===
        self.attention = BertSelfAttention(
            num_heads=self.num_heads,
            head_size=head_size,
            dropout=self.attention_dropout,
            initializer_range=self.initializer_range,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention.build(hidden_states_shape)

        def dense(units, input_shape, name):
            layer = keras.layers.Dense(
                units, kernel_initializer=initializer, dtype=self.dtype_policy, name=name
            )
            layer.build(input_shape)
            return layer

        def residual_dropout():
            return keras.layers.Dropout(self.hidden_dropout, dtype=self.dtype_policy)

        def layer_norm(name):
            layer = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )
            layer.build(hidden_states_shape)
            return layer

        self.attention_dropout_layer = residual_dropout()
        self.attention_layer_norm = layer_norm("attention_layer_norm")
        self.intermediate_dense = dense(
            self.intermediate_size, hidden_states_shape, "intermediate_dense"
        )
        self.output_dense = dense(hidden_size, intermediate_shape, "output_dense")
        self.output_dropout_layer = residual_dropout()
        self.output_layer_norm = layer_norm("output_layer_norm")
        self.built = True

    def call(self, hidden_states, attention_mask=None, training=None):
        attention_output = self.attention(hidden_states, attention_mask, training=training)
        return self._add_and_feed_forward(hidden_states, attention_output, training)

    def call_packed(self, tokens, layout, training=None):
        """The same block over the real tokens of a batch only.

        Args:
            tokens: float tensor `[1, num_tokens, hidden]` (see
                `keras_bert_zoo.layers.TokenLayout`).
            layout: `TokenLayout` saying where each token sits in the batch.
            training: bool. Dropout.

        Returns:
            `[1, num_tokens, hidden]`: every token's output equals what `call` gives
            at its position in the padded batch.
        """
        attention_output = self.attention.call_packed(tokens, layout, training=training)
        return self._add_and_feed_forward(tokens, attention_output, training)

    def call_at(self, hidden_states, positions, attention_mask=None, training=None):
        """The block's outputs at `positions` only: `call(...)` gathered there.

        Every position still serves as a key and value; queries, the residual, the
        feed-forward layer and the LayerNorms run on the chosen positions alone. A
        model whose heads read a few positions of the last block (the [CLS] token
        for classification, the masked positions for pretraining) needs no more.

        Args:
            hidden_states: float tensor `[batch, seq_len, hidden]`.
            positions: int tensor `[batch, num_positions]`, positions in each row.
            attention_mask: as in `call`.
            training: bool. Dropout.

        Returns:
            `[batch, num_positions, hidden]`.
        """
        attention_output = self.attention.call_at(
            hidden_states, positions, attention_mask, training=training
        )
        gathered = gather_positions(hidden_states, positions)
        return self._add_and_feed_forward(gathered, attention_output, training)

    def _add_and_feed_forward(self, hidden_states, attention_output, training):
        """Everything after the attention; it acts on each position on its own."""
        attention_output = self.attention_dropout_layer(attention_output, training=training)
        # Keras LayerNormalization computes its moments in float32 even under a mixed
        # policy, which is what keeps the residual stream stable in bfloat16/float16.
        hidden_states = self.attention_layer_norm(hidden_states + attention_output)

        if training:
            intermediate = apply_activation(self.activation, self.intermediate_dense(hidden_states))
            layer_output = self.output_dense(intermediate)
        else:
            intermediate = self._dense(self.intermediate_dense, hidden_states, self.activation)
            layer_output = self._dense(self.output_dense, intermediate, "linear")
        layer_output = self.output_dropout_layer(layer_output, training=training)
        return self.output_layer_norm(hidden_states + layer_output)

    @staticmethod
    def _dense(dense, inputs, activation):
        """`activation(dense(inputs))` at inference, as one 2-D matmul + bias + activation.

        TensorFlow's CPU graph rewriter fuses MatMul + BiasAdd + GELU (or ReLU) into one
        oneDNN kernel when they are 2-D and share a dtype; `Dense` on a 3-D input lowers to
        Tensordot, whose reshapes keep the bias apart, and the float32 GELU that training
        in bfloat16 needs (`activations.py`) adds casts and a dozen elementwise kernels.
        On [1632, 384] x [384, 1536] in bfloat16 the fused form took 6.9 ms against 10.6
        (2-core AVX512_BF16 CPU, TF graph mode). oneDNN
        computes the activation in float32 before rounding, so bfloat16 loses nothing.
        Training keeps the unfused layers: their gradients need the pre-activation; so do
        eager calls, where nothing fuses.
        """
        fused = fusable_activation(activation)
        # Eagerly nothing fuses: a bfloat16 activation would run (and round) in bfloat16.
        if fused is None or dense.quantization_mode is not None or tf.executing_eagerly():
            return apply_activation(activation, dense(inputs))
        kernel = dense.kernel
        rows = ops.reshape(inputs, (-1, kernel.shape[0]))
        outputs = ops.matmul(rows, kernel)
        if dense.bias is not None:
            # BiasAdd, not AddV2: the rewriter fuses the activation only behind a BiasAdd.
            outputs = tf.nn.bias_add(outputs, ops.cast(dense.bias, outputs.dtype))
        outputs = fused(outputs)
        return ops.reshape(outputs, (*ops.shape(inputs)[:-1], kernel.shape[1]))

    def compute_output_shape(self, hidden_states_shape, attention_mask_shape=None):
        return hidden_states_shape

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self)}
