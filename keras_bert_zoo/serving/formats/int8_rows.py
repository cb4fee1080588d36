"""The word-embedding table of an int8 export: int8 rows, each with its own scale.

Both converters quantize a lookup table per tensor: LiteRT's dynamic-range quantizer
stores a `GATHER`'s table as int8 with one scale, ONNX Runtime's `quantize_dynamic` as
uint8 with one scale and zero point. A word-embedding table's rows differ in size (the
real MiniLM's: largest value 1.05, a row's largest 0.17 on average), so one scale for all
of them leaves most rows a few steps of 8 bits, and every token's embedding moves before
the first block. On the real MiniLM with a masked LM head, that alone changed the top-1
word at 219 of 771 masked positions of review sentences (per-row scales: 11).

`int8_word_embedding_rows` swaps, while an export traces the model, the encoder's
word-embedding lookup for one that gathers int8 rows and multiplies each by its scale
(builtin ops, standard ONNX ops): `GATHER` of an int8 `[vocab, hidden]` table, `CAST`,
and the scales (int32 multiples of one float unit: the converters leave integer
constants as they are, where they would quantize a float vector of scales per tensor
again). The table costs 4 bytes a row more than the converters' own int8. The masked LM
head's vocabulary projection reads the float table (the tied weights) and is quantized by
the converter per output row (LiteRT) or per block of 32 (ONNX), which keeps its answers.

Example:

```python
with int8_word_embedding_rows(model):
    function = portable.ids_function(model, specs)  # traced with the int8 rows
```
"""

from __future__ import annotations

import contextlib

import numpy as np
import tensorflow as tf

# The largest scale is this many units: int32 scales keep 31 bits of each row's scale.
_SCALE_STEPS = 2**31 - 1


def quantize_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """`(int8 rows, int32 scales, unit)`: row `i` is `rows[i] * scales[i] * unit`, each
    row's largest magnitude 127 steps of its scale (a row of zeros: scale 0)."""
    table = np.asarray(table, np.float64)
    largest = np.abs(table).max(axis=1)
    unit = float(largest.max()) / 127 / _SCALE_STEPS if largest.max() > 0 else 1.0
    scales = np.round(largest / 127 / unit).astype(np.int64)
    step = np.where(scales > 0, scales * unit, 1.0)[:, None]
    rows = np.clip(np.round(table / step), -127, 127).astype(np.int8)
    return rows, scales.astype(np.int32), unit


def _has_word_embeddings(layer) -> bool:
    return hasattr(getattr(layer, "embeddings", None), "word_embeddings")


def word_embedding_layer(model):
    """The word-embedding layer of an encoder, of a task model's `encoder`, or of the
    encoder inside a functional model (a sentence embedder's, which has no `encoder`
    attribute)."""
    encoder = getattr(model, "encoder", model)
    if _has_word_embeddings(encoder):
        return encoder.embeddings.word_embeddings
    for layer in model._flatten_layers(include_self=False):  # noqa: SLF001 (Keras' own walk)
        if _has_word_embeddings(layer):
            return layer.embeddings.word_embeddings
    raise TypeError(
        f"{type(model).__name__} {getattr(model, 'name', '')!r} holds no encoder with a "
        "word-embedding table: nothing for the int8 rows to replace"
    )


@contextlib.contextmanager
def int8_word_embedding_rows(model):
    """While inside, `model`'s word-embedding lookup reads int8 rows with a scale each
    (see the module docstring); the model itself is left as it was."""
    layer = word_embedding_layer(model)
    rows, scales, unit = quantize_rows(layer.embeddings.numpy())
    dtype = layer.compute_dtype

    def lookup(ids, *args, **kwargs):
        ids = tf.cast(ids, tf.int32)
        values = tf.cast(tf.gather(tf.constant(rows), ids), tf.float32)
        scale = tf.cast(tf.gather(tf.constant(scales), ids), tf.float32) * unit
        # expand_dims, not `[..., None]`: LiteRT has no builtin strided slice with a new
        # axis.
        return tf.cast(values * tf.expand_dims(scale, -1), dtype)

    layer.call = lookup
    try:
        yield
    finally:
        del layer.call


def tracing_lookup(model, quantize: str):
    """The lookup an export of `quantize` traces `model` with: the int8 rows for
    `dynamic_int8`, the model's own otherwise."""
    from keras_bert_zoo.serving.portable import QUANTIZE_DYNAMIC_INT8

    if quantize == QUANTIZE_DYNAMIC_INT8:
        return int8_word_embedding_rows(model)
    return contextlib.nullcontext()
