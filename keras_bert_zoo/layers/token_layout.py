"""Where the real tokens of a padded batch sit, for running layers on them alone."""

from keras import ops


class TokenLayout:
    """Maps between a padded `[batch, seq_len, ...]` batch and its real tokens.

    Every position-wise part of BERT (embeddings, projections, feed-forward,
    LayerNorm) gives a real token the same result whether or not the padding around it
    is computed too, so it can run on the real tokens alone, packed as
    `[1, num_tokens, ...]`; only attention needs the padded layout, where each
    sequence attends to its own tokens.

    `token_index` holds, for each packed token, its flat position `row * seq_len +
    column` in the batch. It may end with filler entries equal to `batch * seq_len`
    (one past the last position), which let the number of tokens be rounded up to a
    few fixed sizes: no padded position reads a filler, so their results are dropped.

    Args:
        attention_mask: int tensor `[batch, seq_len]`, 1 for real tokens.
        token_index: int32 tensor `[num_tokens]` (see above).

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.layers import TokenLayout

    mask = np.array([[1, 1, 0], [1, 0, 0]])
    layout = TokenLayout(mask, np.array([0, 1, 3, 6], "int32"))  # one filler
    tokens = np.arange(4, dtype="float32").reshape(1, 4, 1)
    print(layout.to_padded(tokens)[..., 0])  # [[0, 1, 0], [2, 0, 0]]
    ```
    """

    def __init__(self, attention_mask, token_index):
        self.attention_mask = attention_mask
        self.token_index = token_index
        shape = ops.shape(attention_mask)
        self.batch_size, self.seq_len = shape[0], shape[1]
        positions = self.batch_size * self.seq_len
        num_tokens = ops.shape(token_index)[0]
        # For each padded position (and the filler row), the packed token it holds, or
        # `num_tokens` (a zero row) at padding: `to_padded` then gathers instead of
        # scattering. A gather reads each output once; TensorFlow's CPU ScatterNd zeroes
        # and scatters, and took 11% of a bfloat16 MiniLM batch against under 2% as a
        # gather (2-core AVX512_BF16 CPU, benchmarks/README.md).
        self._padded_index = ops.scatter_update(
            ops.full((positions + 1,), num_tokens, dtype="int32"),
            ops.cast(token_index, "int32")[:, None],
            ops.arange(num_tokens, dtype="int32"),
        )[:positions]

    def to_padded(self, tokens, zero_padding=True):
        """`[1, num_tokens, *rest]` -> `[batch, seq_len, *rest]`.

        Padded positions hold zeros, or with `zero_padding=False` a copy of some packed
        row (finite): enough for attention, whose padded keys are masked and whose padded
        queries are never read back, and it saves appending a zero row to `tokens`.
        """
        rest = tuple(tokens.shape[2:])
        if zero_padding:
            rows = ops.concatenate([tokens[0], ops.zeros((1, *rest), tokens.dtype)], axis=0)
            index = self._padded_index
        else:
            rows = tokens[0]
            index = ops.minimum(self._padded_index, ops.shape(rows)[0] - 1)
        padded = ops.take(rows, index, axis=0)
        return ops.reshape(padded, (self.batch_size, self.seq_len, *rest))

    def to_tokens(self, padded):
        """`[batch, seq_len, *rest]` -> `[1, num_tokens, *rest]`. Fillers read the
        last position (finite values; their results are dropped)."""
        rest = tuple(padded.shape[2:])
        positions = self.batch_size * self.seq_len
        flat = ops.reshape(padded, (positions, *rest))
        return ops.take(flat, ops.minimum(self.token_index, positions - 1), axis=0)[None]
