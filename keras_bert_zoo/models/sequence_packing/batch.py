"""A packed batch: the examples of a padded batch, several to a row, no padding computed.

Sentences are short next to the fixed length a batch is padded to (Wikipedia sentences:
about 31 of 128 positions; sentence pairs: 60), and a padded batch spends most of its
work on the padding. `pack_batch` moves the real tokens of a batch's examples into as
few rows as hold them (first-fit decreasing, each example whole in one row), and says
where everything went, so that a model can run on the packed rows and give every example
exactly what the padded batch gives it (`sequence_packing.forward`):

- each token keeps its word id, segment id and its position in its own example
  (`position_ids`: the column it had in the padded row, so position embeddings and a
  mask with holes behave as before);
- `sequence_ids` numbers the examples within their rows (0 on the filler left at a
  row's end), and attention is block diagonal: a token attends to the tokens of its
  own example only, as it attended to its row's real tokens before;
- `first_token_index` is the flat index (`row * seq_len + column`) of each example's
  first token, `[CLS]`, where the pooled output is read;
- `masked_lm_positions`, when the batch has them, become flat indices of the same
  tokens (a masked-LM prediction at a padded position, which carries weight 0 in
  real data, reads the example's last real token before it, or its first).

Labels and sample weights stay per example and untouched: the loss and metrics of a
packed batch are those of the padded one (to float rounding; dropout draws its masks
over the packed shape).

The number of rows is rounded up to a multiple of `row_bucket` (never beyond the
batch size rounded up the same way), so an XLA-compiled training step compiles once per
row count, not once per batch. With `micro_batches > 1` (gradient accumulation) each
consecutive part of the batch is packed on its own into the same number of rows, so
that splitting every packed tensor into `micro_batches` equal parts along its first
axis gives each micro-batch its own packed rows and indices (local to its part).

Every example must start with a real token (`input_mask[:, 0] == 1`, BERT's `[CLS]`):
the padded model pools column 0 whatever the mask says, a packed one pools the first
real token; a batch that breaks this raises `InvalidArgumentError` saying so.

Example:

```python
import numpy as np
from keras_bert_zoo.models.sequence_packing import pack_batch

x = {
    "input_word_ids": np.array(
        [[101, 7, 102, 0, 0, 0], [101, 102, 0, 0, 0, 0], [101, 8, 9, 102, 0, 0]]
    ),
    "input_mask": np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]]),
    "input_type_ids": np.zeros((3, 6), "int32"),
}
packed = pack_batch(x, row_bucket=1)
packed["input_word_ids"]     # [[101, 8, 9, 102, 101, 102], [101, 7, 102, 0, 0, 0]]
packed["position_ids"]       # [[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 0, 0]]
packed["sequence_ids"]       # [[3, 3, 3, 3, 2, 2], [1, 1, 1, 0, 0, 0]]
packed["first_token_index"]  # [6, 4, 0]: row * 6 + column of each [CLS]
```

This module is the packed batch's layout, shared by the forward passes that read it
(`sequence_packing/forward.py`) and the input pipelines that make it
(`keras_bert_zoo.data.sequence_packing` maps `pack_batch` over a `tf.data.Dataset`).
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS, MASKED_LM_POSITIONS
from keras_bert_zoo.utils.errors import UserError

POSITION_IDS = "position_ids"
SEQUENCE_IDS = "sequence_ids"
FIRST_TOKEN_INDEX = "first_token_index"

PACKED_ROW_KEYS = (INPUT_WORD_IDS, INPUT_TYPE_IDS, POSITION_IDS, SEQUENCE_IDS)
"""The `[rows, seq_len]` tensors of a packed batch; the others are per example."""


def _first_fit_decreasing(lengths, capacity):
    """Row and offset of each example: longest first, into the first row it fits."""
    count = tf.shape(lengths)[0]
    order = tf.argsort(-lengths, stable=True)

    def body(i, remaining, rows, offsets):
        example = order[i]
        length = lengths[example]
        row = tf.argmax(tf.cast(remaining >= length, tf.int32), output_type=tf.int32)
        rows = tf.tensor_scatter_nd_update(rows, [[example]], [row])
        offsets = tf.tensor_scatter_nd_update(offsets, [[example]], [capacity - remaining[row]])
        remaining = tf.tensor_scatter_nd_sub(remaining, [[row]], [length])
        return i + 1, remaining, rows, offsets

    # At most one row per example, so every example finds a row.
    _, _, rows, offsets = tf.while_loop(
        lambda i, *_: i < count,
        body,
        (
            tf.constant(0),
            tf.fill([count], capacity),
            tf.zeros([count], tf.int32),
            tf.zeros([count], tf.int32),
        ),
    )
    return rows, offsets


def _round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def _pack_part(inputs, num_rows, rows, offsets):
    """Scatters one part's real tokens into `num_rows` rows; indices are local."""
    mask = tf.cast(inputs[INPUT_MASK], tf.int32)
    seq_len = tf.shape(mask)[1]
    rank = tf.cumsum(mask, axis=1) - 1  # index of each real token within its example
    flat_destination = (rows * seq_len + offsets)[:, None] + rank
    real = mask > 0
    destination = tf.boolean_mask(flat_destination, real)[:, None]
    size = [num_rows * seq_len]
    columns = tf.broadcast_to(tf.range(seq_len)[None, :], tf.shape(mask))
    example_numbers = tf.broadcast_to(tf.range(1, tf.shape(mask)[0] + 1)[:, None], tf.shape(mask))

    def scatter(values):
        flat = tf.scatter_nd(destination, tf.boolean_mask(tf.cast(values, tf.int32), real), size)
        return tf.reshape(flat, [num_rows, seq_len])

    packed = {
        INPUT_WORD_IDS: scatter(inputs[INPUT_WORD_IDS]),
        INPUT_TYPE_IDS: scatter(inputs[INPUT_TYPE_IDS]),
        POSITION_IDS: scatter(columns),
        SEQUENCE_IDS: scatter(example_numbers),
        FIRST_TOKEN_INDEX: rows * seq_len + offsets,
    }
    if MASKED_LM_POSITIONS in inputs:
        positions = tf.cast(inputs[MASKED_LM_POSITIONS], tf.int32)
        ranks = tf.maximum(tf.gather(rank, positions, batch_dims=1), 0)
        packed[MASKED_LM_POSITIONS] = (rows * seq_len + offsets)[:, None] + ranks
    return packed


def pack_batch(
    x: Mapping[str, tf.Tensor], *, row_bucket: int = 4, micro_batches: int = 1
) -> dict[str, tf.Tensor]:
    """Packs one padded batch (see the module docstring).

    Args:
        x: dict of `[batch, seq_len]` int tensors `input_word_ids`, `input_mask`,
            `input_type_ids`, and optionally `masked_lm_positions` `[batch, P]`.
            Other keys are not carried over.
        row_bucket: the row count is rounded up to a multiple of this.
        micro_batches: pack each of this many consecutive equal parts on its own.

    Returns:
        dict with `input_word_ids`, `input_type_ids`, `position_ids`, `sequence_ids`
        (`[micro_batches * rows, seq_len]`), `first_token_index` `[batch]`, and
        `masked_lm_positions` `[batch, P]` if given.
    """
    if row_bucket < 1:
        raise UserError(f"row_bucket must be >= 1, got {row_bucket}")
    if micro_batches < 1:
        raise UserError(f"micro_batches must be >= 1, got {micro_batches}")
    missing = [k for k in (INPUT_WORD_IDS, INPUT_MASK, INPUT_TYPE_IDS) if k not in x]
    if missing:
        raise KeyError(f"pack_batch needs {missing}; the batch has {sorted(x)}")
    keys = [INPUT_WORD_IDS, INPUT_MASK, INPUT_TYPE_IDS]
    if MASKED_LM_POSITIONS in x:
        keys.append(MASKED_LM_POSITIONS)
    inputs = {k: tf.convert_to_tensor(x[k]) for k in keys}
    mask = tf.cast(inputs[INPUT_MASK], tf.int32)
    batch, seq_len = tf.shape(mask)[0], tf.shape(mask)[1]
    checks = [
        tf.debugging.assert_equal(
            mask[:, 0],
            tf.ones_like(mask[:, 0]),
            message="pack_batch: every example must start with a real token "
            "(input_mask[:, 0] == 1, the [CLS] the pooled output is read at)",
        ),
        tf.debugging.assert_equal(
            batch % micro_batches,
            0,
            message=f"pack_batch: the batch size is not divisible by micro_batches={micro_batches}",
        ),
    ]
    with tf.control_dependencies(checks):
        part_size = batch // micro_batches
    lengths = tf.reshape(tf.reduce_sum(mask, axis=1), [micro_batches, part_size])
    placements = [_first_fit_decreasing(lengths[m], seq_len) for m in range(micro_batches)]
    used = tf.reduce_max(tf.stack([tf.reduce_max(rows) for rows, _ in placements])) + 1
    num_rows = tf.minimum(_round_up(used, row_bucket), _round_up(part_size, row_bucket))
    parts = []
    for m, (rows, offsets) in enumerate(placements):
        part = {k: v[m * part_size : (m + 1) * part_size] for k, v in inputs.items()}
        parts.append(_pack_part(part, num_rows, rows, offsets))
    if micro_batches == 1:
        return parts[0]
    return {k: tf.concat([p[k] for p in parts], axis=0) for k in parts[0]}
