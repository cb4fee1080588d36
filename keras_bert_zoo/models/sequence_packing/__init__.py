"""Sequence packing: a padded batch's examples several to a row, and the models run on it.

Not `text/packer.py`, which packs one example's segments into a row (`[CLS] a [SEP] b
[SEP]`): this packs whole examples of a batch into as few rows as hold them, so
training computes about as many positions as there are real tokens.

- `batch`: the layout of a packed batch and `pack_batch`, which makes one;
- `forward`: a model's outputs for a packed batch (`packed_outputs`) and the trainer's
  loss function on it (`packed_loss_fn`).

The tf.data side (packing every batch of a dataset) is `keras_bert_zoo.data.sequence_packing`.
"""

from keras_bert_zoo.models.sequence_packing.batch import (
    FIRST_TOKEN_INDEX,
    PACKED_ROW_KEYS,
    POSITION_IDS,
    SEQUENCE_IDS,
    pack_batch,
)
from keras_bert_zoo.models.sequence_packing.forward import (
    block_diagonal_mask,
    check_supported,
    packed_encoder_outputs,
    packed_loss_fn,
    packed_outputs,
)

__all__ = [
    "FIRST_TOKEN_INDEX",
    "PACKED_ROW_KEYS",
    "POSITION_IDS",
    "SEQUENCE_IDS",
    "block_diagonal_mask",
    "check_supported",
    "pack_batch",
    "packed_encoder_outputs",
    "packed_loss_fn",
    "packed_outputs",
]
