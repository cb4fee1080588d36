"""Length-grouped batches trimmed to a bounded set of lengths: no padding computed.

A padded batch is as long as the longest sequence the task allows (`max_seq_length`);
real sentences fill a quarter of it (movie reviews: 27 of 128 WordPieces), and a step
spends the rest on padding, attention's share growing with the square of the length.
Here a stream of examples becomes batches of similar lengths, each cut to its longest
row:

1. `length_grouped`: the (shuffled) stream is read in windows of `window_batches`
   batches; each window is sorted by length and cut into batches, whose order within
   the window is permuted (a stateless draw from `seed` and the window's number), so
   that a window's batches do not always run from short to long. Every batch is full,
   and the stream is a deterministic function of its input: a rebuilt pipeline skipped
   to a step gives the batches an uninterrupted one gives (exact resume), and every
   input pipeline groups its own shard (several workers).
2. `trim_batch`: each batch is cut to its longest row rounded up to one of
   `length_buckets(max_seq_length)`: multiples of 16 up to 128, of 64 beyond, and
   `max_seq_length` itself; so a compiled step sees at most a dozen sequence lengths
   (one XLA compilation each) however many batches it trains on.

Hugging Face's `group_by_length` (`LengthGroupedSampler`: windows of 50 batches sorted
by length) and `DataCollatorWithPadding` (each batch padded to its longest row) do the
same in PyTorch.

Example:

```python
import tensorflow as tf
from keras_bert_zoo.data.bucketing import length_buckets, length_grouped, trim_batch

length_buckets(128)  # (16, 32, 48, 64, 80, 96, 112, 128)
batches = length_grouped(features, batch_size=32, window_batches=8, seed=1)
batches = batches.map(lambda batch: trim_batch(batch, length_buckets(128)))
```
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_MASK
from keras_bert_zoo.utils.errors import UserError

# Lengths are rounded up to multiples of this up to `_FINE_UP_TO`, of `_COARSE_STEP`
# beyond: 8 lengths for 128, 12 for 384, 14 for 512.
LENGTH_MULTIPLE = 16
_FINE_UP_TO = 128
_COARSE_STEP = 64

# Batches per window sorted by length (`length_grouped`'s default): the figures of
# `benchmarks/batching_choice.py` choose it.
WINDOW_BATCHES = 8


def length_buckets(max_seq_length: int) -> tuple[int, ...]:
    """The lengths batches are trimmed to: multiples of 16 up to 128, multiples of 64
    beyond, and `max_seq_length` (the longest), all `<= max_seq_length`."""
    max_seq_length = int(max_seq_length)
    if max_seq_length < 1:
        raise UserError(f"max_seq_length must be >= 1, got {max_seq_length}")
    fine = range(LENGTH_MULTIPLE, min(_FINE_UP_TO, max_seq_length) + 1, LENGTH_MULTIPLE)
    coarse = range(_FINE_UP_TO + _COARSE_STEP, max_seq_length + 1, _COARSE_STEP)
    return tuple(sorted({*fine, *coarse, max_seq_length}))


def bucket_length(longest, buckets: Sequence[int]):
    """The smallest of `buckets` that holds `longest` (a scalar tensor or int); the
    largest bucket for anything longer."""
    table = tf.constant(list(buckets), tf.int32)
    index = tf.searchsorted(table, tf.reshape(tf.cast(longest, tf.int32), [1]), side="left")
    return tf.gather(table, tf.minimum(index[0], len(buckets) - 1))


def row_lengths(mask) -> tf.Tensor:
    """Real tokens of each row of a batched mask, `[batch]`: of `[batch, seq_len]`, or
    the longest choice of `[batch, choices, seq_len]` (multiple choice)."""
    mask = tf.convert_to_tensor(mask)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(mask, 0), tf.int32), axis=-1)
    if mask.shape.rank > 2:
        lengths = tf.reduce_max(lengths, axis=list(range(1, mask.shape.rank - 1)))
    return lengths


def cut_to(tensor, length, axis: int):
    """`tensor` cut to its first `length` entries along `axis`."""
    return tensor[(slice(None),) * axis + (slice(None, length),)]


def trim_batch(
    batch: Mapping,
    buckets: Sequence[int] | None,
    *,
    keys: Iterable[str] | None = None,
    mask_key: str = INPUT_MASK,
) -> dict:
    """A batched feature dict with its per-position features cut to the batch's longest
    row, rounded up to `buckets` (`length_buckets`).

    Args:
        batch: dict of batched tensors (nested dicts are cut leaf by leaf), holding
            `mask_key` (`[batch, seq_len]` or `[batch, choices, seq_len]`).
        buckets: the lengths a batch may have (None: its longest row's, exactly).
        keys: the keys whose values have the mask's shape as their leading axes and are
            cut along its last axis; default: every key whose values do.
        mask_key: the feature whose nonzero entries are the real tokens.
    """
    mask = batch[mask_key]
    axis = mask.shape.rank - 1
    length = tf.reduce_max(row_lengths(mask))
    if buckets:
        length = bucket_length(length, buckets)
    if keys is None:
        keys = [key for key in batch if has_leading_shape(batch[key], mask.shape)]
    keys = set(keys)

    def cut(value):
        return cut_to(value, length, axis)

    return {
        key: tf.nest.map_structure(cut, value) if key in keys else value
        for key, value in batch.items()
    }


def has_leading_shape(value, shape) -> bool:
    """Whether every tensor of `value` (a tensor or a nest) starts with `shape`'s axes
    (a per-position feature of a mask of that shape)."""
    shape = tf.TensorShape(shape)
    leaves = tf.nest.flatten(value)

    def starts_with(leaf):
        leaf_shape = tf.TensorShape(leaf.shape)
        return leaf_shape.rank is not None and leaf_shape[: shape.rank].as_list() == (
            shape.as_list()
        )

    return bool(leaves) and all(starts_with(leaf) for leaf in leaves)


def length_grouped(
    dataset: tf.data.Dataset,
    batch_size: int,
    *,
    window_batches: int = WINDOW_BATCHES,
    seed: int | None = None,
    drop_remainder: bool = True,
    mask_key: str = INPUT_MASK,
) -> tf.data.Dataset:
    """Batches of `batch_size` examples of similar lengths from a stream of unbatched
    feature dicts (see the module docstring), not yet trimmed (`trim_batch`).

    Args:
        dataset: unbatched feature dicts (each with `mask_key`), typically shuffled and
            repeated.
        batch_size: examples per batch.
        window_batches: batches per window sorted by length.
        seed: the permutation of each window's batches (None: 0).
        drop_remainder: drop a last partial batch (a finite stream).
        mask_key: the feature whose nonzero entries are the real tokens.
    """
    if window_batches < 1:
        raise UserError(f"window_batches must be >= 1, got {window_batches}")
    window = batch_size * window_batches
    seed_value = 0 if seed is None else int(seed)

    def sort_window(number, features):
        order = tf.argsort(row_lengths(features[mask_key]), stable=True)
        rows = tf.shape(order)[0]
        full = rows // batch_size
        # The window's full batches in a drawn order, a partial one (a finite stream's
        # last window) last.
        draw = tf.random.stateless_uniform(
            [full], seed=tf.stack([tf.constant(seed_value, tf.int64), number]), dtype=tf.float32
        )
        blocks = tf.reshape(order[: full * batch_size], [full, batch_size])
        order = tf.concat(
            [tf.reshape(tf.gather(blocks, tf.argsort(draw)), [-1]), order[full * batch_size :]],
            axis=0,
        )
        return tf.nest.map_structure(lambda value: tf.gather(value, order), features)

    grouped = dataset.batch(window).enumerate().map(sort_window).unbatch()
    return grouped.batch(batch_size, drop_remainder=drop_remainder)
