"""Sequence packing in tf.data: datasets of padded batches turned into packed batches.

`packed_dataset` maps `pack_batch` over the batches of a dataset (a job's
`--batching=packed` passes it as `Trainer(dataset_transform=...)`); labels and
sample weights pass through untouched, per example. What a packed batch holds, and the
packing itself, live with the models that read it: `keras_bert_zoo.models.sequence_packing`
(models import nothing from `data/`).

Example:

```python
import tensorflow as tf
from keras_bert_zoo.data.sequence_packing import packed_dataset

x = {
    "input_word_ids": [[101, 7, 102, 0, 0, 0], [101, 102, 0, 0, 0, 0]],
    "input_mask": [[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]],
    "input_type_ids": [[0] * 6, [0] * 6],
}
batches = tf.data.Dataset.from_tensors((x, [0, 1]))
x_packed, y = next(iter(packed_dataset(batches, row_bucket=1)))
x_packed["input_word_ids"]  # [[101, 7, 102, 101, 102, 0]]: both examples in one row
y                           # [0, 1], untouched
```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tensorflow as tf

from keras_bert_zoo.models.sequence_packing.batch import pack_batch

__all__ = ["packed_dataset", "packed_dataset_fn"]


def packed_dataset(
    dataset: tf.data.Dataset, *, row_bucket: int = 4, micro_batches: int = 1
) -> tf.data.Dataset:
    """Maps `pack_batch` over a dataset of `x`, `(x, y)` or `(x, y, sample_weight)` batches."""

    def pack(*element):
        x, rest = element[0], element[1:]
        if not isinstance(x, Mapping):
            raise TypeError(
                f"packed_dataset needs batches whose x is a dict of model inputs, got {type(x)}"
            )
        packed = pack_batch(x, row_bucket=row_bucket, micro_batches=micro_batches)
        return (packed, *rest) if rest else packed

    return dataset.map(
        tf.autograph.experimental.do_not_convert(pack),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def packed_dataset_fn(
    dataset_fn: Callable[..., tf.data.Dataset], *, row_bucket: int = 4, micro_batches: int = 1
) -> Callable[..., tf.data.Dataset]:
    """`fn(input_context)` of packed batches from one of padded batches."""

    def fn(*args, **kwargs):
        return packed_dataset(
            dataset_fn(*args, **kwargs), row_bucket=row_bucket, micro_batches=micro_batches
        )

    return fn
