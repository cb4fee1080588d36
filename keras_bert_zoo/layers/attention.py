"""Multi-head self-attention as BERT computes it, with the softmax kept in float32."""

import math

import keras
import tensorflow as tf
from keras import ops

from keras_bert_zoo.layers._arguments import constructor_arguments
from keras_bert_zoo.utils.errors import UserError

# Added to the scores of padded keys. Large enough that exp() underflows to exactly 0 in
# float32, small enough that a row whose keys are all padding still gives finite numbers.
_MASK_BIAS = -1e9


def gather_positions(values, positions):
    """`values[b, positions[b, p], :]`: a `[batch, seq, width]` tensor read at
    `[batch, P]` positions of each row, `[batch, P, width]`."""
    return ops.take_along_axis(values, ops.cast(positions, "int32")[:, :, None], axis=1)


def _mask_bias(attention_mask):
    """Float32 bias added to `[batch, heads, queries, keys]` scores: 0 at keys to attend
    to, `_MASK_BIAS` at padding; from a `[batch, keys]` or `[batch, queries, keys]`
    mask."""
    attention_mask = ops.cast(attention_mask, "float32")
    # `expand_dims`, not `mask[:, None, None, :]`: the indexing form traces to a
    # StridedSlice with new-axis masks that the TFLite converter refuses; ExpandDims
    # converts to a builtin (serving/litert.py) and gives the same tensor.
    if len(attention_mask.shape) == 2:  # [batch, keys] -> [batch, 1, 1, keys]
        attention_mask = ops.expand_dims(ops.expand_dims(attention_mask, 1), 1)
    else:  # [batch, queries, keys] -> [batch, 1, queries, keys]
        attention_mask = ops.expand_dims(attention_mask, 1)
    return (1.0 - attention_mask) * _MASK_BIAS


def attention_head_size(hidden_size: int, num_heads: int, owner: str = "") -> int:
    """Width of each of `num_heads` heads splitting `hidden_size`; a ValueError if
    they do not divide (its message starts with `owner`, e.g. `"BertConfig."`)."""
    if hidden_size % num_heads:
        raise UserError(
            f"{owner}hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})"
        )
    return hidden_size // num_heads


class _HeadsEinsumDense(keras.layers.EinsumDense):
    """`EinsumDense` for the two head projections, run as one 2-D matmul each.

    `"btd,dnh->btnh"` (query, key, value) and `"btnh,nhd->btd"` (attention output) are
    plain matmuls over the flattened `[batch * seq, ...]` rows. TensorFlow lowers the
    einsums to a broadcast `BatchMatMulV2` that ran forward + backward at 56-71 GFLOP/s
    against 108-128 for the 2-D matmul (bert_mini shapes, 2-core AVX2 CPU, TF graph
    mode); the whole training step ran 1.14-1.16x faster (benchmarks/README.md). Same
    weights, names and shapes as `EinsumDense`; LoRA still applies through `kernel`,
    and quantized layers never reach `call`.
    """

    # How many leading kernel axes each equation contracts with the input.
    _CONTRACTED_AXES = {"btd,dnh->btnh": 1, "btnh,nhd->btd": 2}

    def call(self, inputs, training=None):
        contracted = self._CONTRACTED_AXES.get(self.equation)
        if contracted is None:
            return super().call(inputs, training=training)
        kernel = self.kernel
        input_width = math.prod(kernel.shape[:contracted])
        output_axes = tuple(kernel.shape[contracted:])
        rows = ops.reshape(inputs, (-1, input_width))
        outputs = ops.matmul(rows, ops.reshape(kernel, (input_width, math.prod(output_axes))))
        if self.bias is not None:  # bias_axes are the output axes in both equations
            outputs = outputs + ops.reshape(self.bias, (-1,))
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        return ops.reshape(outputs, (batch, length, *output_axes))


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over `num_heads` heads.

    Projections are `EinsumDense` layers laid out like `keras.layers.MultiHeadAttention`
    (query/key/value kernels `[hidden, heads, head_size]`, output kernel
    `[heads, head_size, hidden]`). It is its own layer rather than `MultiHeadAttention`
    because mixed precision needs the scores and softmax in float32, which the Keras layer
    computes in the compute dtype.

    Args:
        num_heads: int. Number of attention heads.
        head_size: int. Width of each head; `num_heads * head_size` is usually the
            hidden size.
        dropout: float. Dropout rate on the attention probabilities.
        initializer_range: float. Stddev of the truncated-normal kernel initializer.

    Call arguments:
        hidden_states: float tensor `[batch, seq_len, hidden]`.
        attention_mask: optional tensor, `[batch, seq_len]` (1 for keys to attend to,
            0 for padding) or `[batch, seq_len, seq_len]`.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.layers import BertSelfAttention

    layer = BertSelfAttention(num_heads=2, head_size=4)
    x = np.random.rand(1, 3, 8).astype("float32")
    print(layer(x, np.array([[1, 1, 0]])).shape)  # (1, 3, 8)
    ```
    """

    def __init__(self, num_heads, head_size, dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.supports_masking = False

    def build(self, hidden_states_shape, attention_mask_shape=None):
        hidden_size = hidden_states_shape[-1]
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)

        # === Layers ===
        def projection(name):
            layer = _HeadsEinsumDense(
                "btd,dnh->btnh",
                output_shape=(None, self.num_heads, self.head_size),
                bias_axes="nh",
                kernel_initializer=initializer,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(hidden_states_shape)
            return layer

        self.query = projection("query")
        self.key = projection("key")
        self.value = projection("value")
        self.attention_output = _HeadsEinsumDense(
            "btnh,nhd->btd",
            output_shape=(None, hidden_size),
            bias_axes="d",
            kernel_initializer=initializer,
            dtype=self.dtype_policy,
            name="attention_output",
        )
        self.attention_output.build(
            (hidden_states_shape[0], hidden_states_shape[1], self.num_heads, self.head_size)
        )
        self.probability_dropout = keras.layers.Dropout(self.dropout, dtype="float32")
        self.built = True

    def call(self, hidden_states, attention_mask=None, training=None):
        if not training:
            context = self._attend_fused(self._query_key_value(hidden_states), attention_mask)
            return self.attention_output(context)
        query, key, value = self._project(hidden_states)
        context = self._attend(query, key, value, attention_mask, training)
        return self.attention_output(context)

    def call_packed(self, tokens, layout, training=None):
        """The same attention over the real tokens of a batch only.

        Args:
            tokens: float tensor `[1, num_tokens, hidden]`, the real tokens of a
                `[batch, seq_len]` batch (see `keras_bert_zoo.layers.TokenLayout`).
            layout: `TokenLayout` saying where each token sits in the batch.
            training: bool. Dropout on the attention probabilities.

        Returns:
            `[1, num_tokens, hidden]`. The projections, the bulk of the work, run on
            the tokens; only the scores are taken in the padded `[batch, seq_len]`
            layout, where each sequence attends to itself.
        """
        if not training:
            query_key_value = layout.to_padded(self._query_key_value(tokens), zero_padding=False)
            context = self._attend_fused(query_key_value, layout.attention_mask)
            return self.attention_output(layout.to_tokens(context))
        query, key, value = (layout.to_padded(t) for t in self._project(tokens))
        context = self._attend(query, key, value, layout.attention_mask, training)
        return self.attention_output(layout.to_tokens(context))

    def call_at(self, hidden_states, query_positions, attention_mask=None, training=None):
        """The attention outputs at `query_positions` only.

        Keys and values come from every position, queries from the chosen ones: the
        result equals `call(...)` gathered at `query_positions`, for a fraction of the
        query projection, the scores and the output projection.

        Args:
            hidden_states: float tensor `[batch, seq_len, hidden]`.
            query_positions: int tensor `[batch, num_queries]`, positions in each row.
            attention_mask: as in `call`; a `[batch, seq_len, seq_len]` mask is read at
                the query rows.
            training: bool. Dropout on the attention probabilities.

        Returns:
            `[batch, num_queries, hidden]`.
        """
        queries = gather_positions(hidden_states, query_positions)
        query = self.query(queries) * (1.0 / math.sqrt(self.head_size))
        if attention_mask is not None and len(attention_mask.shape) == 3:
            attention_mask = gather_positions(attention_mask, query_positions)
        key, value = self.key(hidden_states), self.value(hidden_states)
        context = self._attend(query, key, value, attention_mask, training)
        return self.attention_output(context)

    def _project(self, hidden_states):
        """Query (already scaled), key and value, each `[batch, seq, heads, head_size]`."""
        # Scaling the query (not the scores) saves a [batch, heads, seq, seq] multiply.
        query = self.query(hidden_states) * (1.0 / math.sqrt(self.head_size))
        return query, self.key(hidden_states), self.value(hidden_states)

    def _attend(self, query, key, value, attention_mask, training):
        """Softmax attention; returns the context `[batch, seq, heads, head_size]`."""
        # The product itself is taken in float32: half-precision scores overflow to inf
        # (float16 max 65504) before a later cast could help.
        scores = ops.einsum("btnh,bsnh->bnts", ops.cast(query, "float32"), ops.cast(key, "float32"))
        if attention_mask is not None:
            scores = scores + _mask_bias(attention_mask)
        probabilities = ops.softmax(scores, axis=-1)
        probabilities = self.probability_dropout(probabilities, training=training)
        probabilities = ops.cast(probabilities, self.compute_dtype)
        return ops.einsum("bnts,bsnh->btnh", probabilities, value)

    # === Inference: one transpose into heads ===
    # Training keeps the einsums above; at inference the three projections are stacked
    # and laid out into heads with one transpose instead of four, and the packed path
    # moves them to the padded layout with one gather instead of three. With
    # `TokenLayout` gathering instead of scattering, MiniLM in bfloat16 on real tokens
    # only ran 277-287 -> 310-334 seq/s (2-core AVX512_BF16 CPU, benchmarks/README.md).
    # The projections stay three matmuls: concatenating their kernels into one copied
    # every weight on every call (+9 ms per BERT-large request of 20 tokens, and even at
    # 1,000 tokens no faster than three matmuls). Through the layers, LoRA and
    # quantized projections apply as in training.

    def _query_key_value(self, hidden_states):
        """`[batch, seq, hidden]` -> `[batch, seq, 3, heads, head_size]`: query, key
        and value stacked."""
        projections = (self.query, self.key, self.value)
        return ops.stack([layer(hidden_states) for layer in projections], axis=2)

    def _attend_fused(self, query_key_value, attention_mask):
        """Softmax attention over `_query_key_value`'s output; the context
        `[batch, seq, heads, head_size]`, equal to `_attend`'s to float rounding."""
        # [3, batch, heads, seq, head_size]
        heads = ops.transpose(query_key_value, (2, 0, 3, 1, 4))
        query, key, value = ops.unstack(heads, 3, axis=0)
        # Scores in float32, as in `_attend`; scaled here rather than the query.
        scores = tf.linalg.matmul(
            ops.cast(query, "float32"), ops.cast(key, "float32"), transpose_b=True
        ) * (1.0 / math.sqrt(self.head_size))
        if attention_mask is not None:
            scores = scores + _mask_bias(attention_mask)
        probabilities = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        context = ops.matmul(probabilities, value)  # [batch, heads, seq, head_size]
        return ops.transpose(context, (0, 2, 1, 3))

    def compute_output_shape(self, hidden_states_shape, attention_mask_shape=None):
        return hidden_states_shape

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self)}
