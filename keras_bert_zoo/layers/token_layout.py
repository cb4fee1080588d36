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
    few fixed sizes: fillers read zeros and their results are dropped.

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

    def to_padded(self, tokens):
        """`[1, num_tokens, *rest]` -> `[batch, seq_len, *rest]`, zeros at padding."""
        rest = tuple(tokens.shape[2:])
        positions = self.batch_size * self.seq_len
        # One extra row receives the fillers and is cut off.
        flat = ops.scatter(self.token_index[:, None], tokens[0], (positions + 1, *rest))
        return ops.reshape(flat[:positions], (self.batch_size, self.seq_len, *rest))

    def to_tokens(self, padded):
        """`[batch, seq_len, *rest]` -> `[1, num_tokens, *rest]` (fillers read zeros)."""
        rest = tuple(padded.shape[2:])
        flat = ops.reshape(padded, (self.batch_size * self.seq_len, *rest))
        flat = ops.concatenate([flat, ops.zeros((1, *rest), padded.dtype)], axis=0)
        return ops.take(flat, self.token_index, axis=0)[None]
