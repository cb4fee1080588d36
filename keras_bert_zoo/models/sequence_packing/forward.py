"""Packed forward passes: a model's outputs for a packed batch (`sequence_packing/batch.py`).

A packed batch holds the real tokens of a padded batch's examples, several examples to a
row. `packed_outputs(model, packed_x)` runs the model's own layers on it and returns
what `model(x)` returns for the padded batch `x` (to float rounding, and with dropout
masks drawn over the packed shape when training):

- the encoder runs its one layer loop (`BertEncoder.run_layers`) on the packed rows
  with `position_ids` (each token's position in its own example) and a block-diagonal
  attention mask built from `sequence_ids` (a token attends to its own example only);
- the pooled output is read at each example's first token (`first_token_index`);
- `BertClassifier`'s head takes the pooled outputs; `BertPretrainer`'s masked-LM head
  takes the outputs at `masked_lm_positions` (flat packed indices), its
  next-sentence head the pooled outputs.

This is the training fast path for short examples (a job's `--packed_sequences`):
embeddings, projections, feed-forward layers and LayerNorms run on about as many
positions as there are real tokens, and attention on rows of mostly real tokens.
Attention is the one place the packed rows compute more than the padded batch would
per real token: scores between examples that share a row, masked out.

Example:

```python
import numpy as np
from keras_bert_zoo.models import BertClassifier, BertEncoder
from keras_bert_zoo.models.sequence_packing import pack_batch, packed_outputs

model = BertClassifier(BertEncoder.untrained("bert_tiny_uncased"), num_classes=2)
x = {
    "input_word_ids": np.array([[101, 7592, 102, 0], [101, 2088, 2003, 102]]),
    "input_mask": np.array([[1, 1, 1, 0], [1, 1, 1, 1]]),
    "input_type_ids": np.zeros((2, 4), "int32"),
}
logits = packed_outputs(model, pack_batch(x), training=False)  # == model(x) to rounding
```
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_TYPE_IDS, INPUT_WORD_IDS, MASKED_LM_POSITIONS
from keras_bert_zoo.models.head_outputs import head_outputs, supported_models, supports_head_outputs
from keras_bert_zoo.models.sequence_packing.batch import (
    FIRST_TOKEN_INDEX,
    POSITION_IDS,
    SEQUENCE_IDS,
)

# The model classes packed batches train, for messages (`check_supported` reads each
# model's own `outputs_from_head_positions`): the package's, all defined by now, since
# importing this module imports `keras_bert_zoo.models` first.
SUPPORTED_MODELS = supported_models()


def block_diagonal_mask(sequence_ids):
    """`[rows, seq_len, seq_len]` 1/0 mask: a query attends to keys of its own example.

    Filler positions (`sequence_ids == 0`) are keys to nobody; as queries they see no
    key, like the padded queries of a padded batch, and their outputs are never read.
    """
    same = tf.equal(sequence_ids[:, :, None], sequence_ids[:, None, :])
    return tf.cast(tf.logical_and(same, sequence_ids[:, None, :] > 0), tf.int32)


def packed_encoder_outputs(encoder, packed_x: Mapping[str, tf.Tensor], training=None):
    """`(sequence_output [rows, seq_len, hidden], pooled_output [batch, hidden])`."""
    outputs = encoder.run_layers(
        packed_x[INPUT_WORD_IDS],
        packed_x[INPUT_TYPE_IDS],
        block_diagonal_mask(packed_x[SEQUENCE_IDS]),
        position_ids=packed_x[POSITION_IDS],
        training=training,
    )
    sequence_output = outputs["sequence_output"]
    hidden = tf.shape(sequence_output)[-1]
    first_tokens = tf.gather(tf.reshape(sequence_output, [-1, hidden]), packed_x[FIRST_TOKEN_INDEX])
    # The same Dense the padded encoder applies to column 0 of each row.
    return sequence_output, encoder.pooler_dense(first_tokens)


def check_supported(model):
    """Raises `TypeError` unless `model`'s class declares `outputs_from_head_positions`
    (`BertClassifier`, `BertPretrainer`).

    Other models' outputs are per position (their padded positions take part in the
    loss or the outputs) or they take other inputs.
    """
    if not supports_head_outputs(model):
        raise TypeError(
            f"Packed sequences support {[m.__name__ for m in supported_models()]}, not "
            f"{type(model).__name__}: train it with padded batches"
        )


def packed_loss_fn(model, x, y, sample_weight):
    """`Trainer` loss function for packed batches: `(loss, y_pred)` of one micro-batch.

    `x` is a packed batch; `y` and `sample_weight` are the padded batch's, untouched.
    The loss is the model's own `compute_loss` (compiled loss, or `BertPretrainer`'s
    objective) on the per-example outputs, so it equals the padded batch's loss.
    """
    y_pred = packed_outputs(model, x, training=True)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    return loss, y_pred


def packed_outputs(model, packed_x: Mapping[str, tf.Tensor], training=None):
    """`model`'s outputs for a packed batch: what `model(x)` gives for the padded one.

    Args:
        model: a model whose class declares `outputs_from_head_positions`
            (`BertClassifier`, `BertPretrainer`).
        packed_x: a `keras_bert_zoo.models.sequence_packing.pack_batch` result.
        training: bool. Dropout.

    Raises:
        TypeError: for other models (see `check_supported`).
    """
    check_supported(model)
    sequence_output, pooled_output = packed_encoder_outputs(model.encoder, packed_x, training)
    if not model.reads_masked_lm_positions:
        return head_outputs(model, pooled_output, training=training)
    if MASKED_LM_POSITIONS not in packed_x:
        raise KeyError("A packed pretraining batch needs masked_lm_positions")
    hidden = tf.shape(sequence_output)[-1]
    masked_lm_outputs = tf.gather(
        tf.reshape(sequence_output, [-1, hidden]), packed_x[MASKED_LM_POSITIONS]
    )
    return head_outputs(model, pooled_output, masked_lm_outputs, training=training)
