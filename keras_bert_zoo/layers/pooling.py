"""`SequencePooling`: one vector per sequence from the encoder's token outputs."""

import keras
from keras import ops

from keras_bert_zoo.layers._arguments import constructor_arguments
from keras_bert_zoo.utils.errors import UserError

# The pooling modes, as sentence-transformers' `Pooling` names them
# (`pooling_mode_mean_tokens`, `pooling_mode_cls_token`, `pooling_mode_max_tokens`).
POOLING_MODES = ("mean", "cls", "max")

# What a padded position holds before the max: sentence-transformers' value. A padded
# position never wins unless a sequence has no real token at all.
_MAX_POOLING_FILL = -1e9


def check_pooling_mode(mode: str) -> str:
    """`mode` itself if it is one of `POOLING_MODES`, else a `UserError` listing them."""
    if mode not in POOLING_MODES:
        raise UserError(f"pooling={mode!r}: must be one of {', '.join(POOLING_MODES)}")
    return mode


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SequencePooling(keras.layers.Layer):
    """Pools `[batch, seq_len, hidden]` token vectors into `[batch, hidden]`.

    ```
    mean: sum_t mask[t] * x[t] / max(sum_t mask[t], 1e-9)   (the real tokens' average)
    cls:  x[0]                                              (the [CLS] position)
    max:  max_t (x[t] if mask[t] else -1e9)                 (per feature, real tokens)
    ```

    These are sentence-transformers' `Pooling` modes, computed as it computes them
    (`mean` is what all-MiniLM-L6-v2 and most embedding models use). Padded positions
    reach no output, so the values an encoder leaves there (zeros padding-free, others
    padded) do not matter.

    The pooling runs in float32 whatever the encoder's policy (the layer's default
    dtype): under mixed precision the token vectors are cast up before the sum.

    Args:
        mode: str. One of `POOLING_MODES`: `"mean"` (default), `"cls"`, `"max"`.

    Call arguments:
        sequence_output: float tensor `[batch, seq_len, hidden]`.
        input_mask: int or bool tensor `[batch, seq_len]`, 1 for real tokens.

    Returns:
        float32 tensor `[batch, hidden]`.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.layers import SequencePooling

    x = np.arange(12, dtype="float32").reshape(1, 3, 4)
    mask = np.array([[1, 1, 0]])
    print(SequencePooling("mean")(x, mask).numpy())  # [[2. 3. 4. 5.]]
    ```
    """

    def __init__(self, mode="mean", **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.mode = check_pooling_mode(mode)

    def call(self, sequence_output, input_mask):
        if self.mode == "cls":
            return sequence_output[:, 0, :]
        # expand_dims, not `[:, :, None]`: TFLite has no builtin kernel for a strided
        # slice that adds an axis (LiteRT exports take builtin ops only).
        mask = ops.expand_dims(ops.cast(input_mask, self.compute_dtype), -1)
        if self.mode == "max":
            filled = ops.where(mask > 0, sequence_output, _MAX_POOLING_FILL)
            return ops.max(filled, axis=1)
        summed = ops.sum(sequence_output * mask, axis=1)
        counts = ops.maximum(ops.sum(mask, axis=1), 1e-9)
        return summed / counts

    def compute_output_shape(self, sequence_output_shape, input_mask_shape=None):
        return (sequence_output_shape[0], sequence_output_shape[-1])

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self)}
