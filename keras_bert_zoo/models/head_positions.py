"""Training forward passes that run the last encoder block only where the heads read it.

`BertClassifier` reads one position of the last block (the [CLS] token, through the
pooler) and `BertPretrainer` 1 + `max_predictions_per_seq` (the [CLS] token and the
masked positions). Every position of the last block still serves as a key and value,
but its queries, attention output, feed-forward layer and LayerNorms are needed at those
positions only (`BertEncoder.run_layers(output_positions=...)`). TF Model Garden's
`output_range` does this for the [CLS] token.

`head_position_outputs(model, x)` returns what `model(x)` returns, to float rounding,
for the models that declare `outputs_from_head_positions` (`EncoderHeadModel`).
With dropout, the last block's masks are drawn over the read positions only: the same
distribution, other draws.

Example:

```python
import numpy as np
from keras_bert_zoo.models import BertEncoder, BertPretrainer
from keras_bert_zoo.models.head_positions import head_position_outputs

model = BertPretrainer(BertEncoder.untrained("bert_tiny_uncased"))
word_ids = np.array([[101, 103, 2003, 102, 0]])
x = {
    "input_word_ids": word_ids,
    "input_mask": (word_ids != 0).astype("int32"),
    "input_type_ids": np.zeros_like(word_ids),
    "masked_lm_positions": np.array([[1, 0]]),
}
# The last block runs at positions 0 ([CLS]) and 1 only; == model(x) to rounding.
outputs = head_position_outputs(model, x, training=False)
```
"""

from __future__ import annotations

from collections.abc import Mapping

from keras import ops

from keras_bert_zoo.inputs import (
    INPUT_MASK,
    INPUT_TYPE_IDS,
    INPUT_WORD_IDS,
    MASKED_LM_POSITIONS,
)
from keras_bert_zoo.models.encoder import BertEncoder
from keras_bert_zoo.models.head_outputs import head_outputs, supported_models, supports_head_outputs


def supports(model) -> bool:
    """Whether `head_position_outputs` can run `model`: its class declares
    `outputs_from_head_positions`, and its encoder is a `BertEncoder` (whose
    `run_layers` takes `output_positions`)."""
    return supports_head_outputs(model) and isinstance(getattr(model, "encoder", None), BertEncoder)


def head_position_outputs(model, x: Mapping, training=None):
    """`model`'s outputs, with the last block computed at the positions the heads read.

    Args:
        model: a model whose class declares `outputs_from_head_positions`
            (`BertClassifier`, `BertPretrainer`), over a `BertEncoder`.
        x: the model's input dict (padded batch).
        training: bool. Dropout.

    Raises:
        TypeError: for other models.
    """
    if not supports(model):
        raise TypeError(
            f"head_position_outputs supports {[m.__name__ for m in supported_models()]} "
            f"over a BertEncoder, not {type(model).__name__} over "
            f"{type(getattr(model, 'encoder', None)).__name__}"
        )
    word_ids = x[INPUT_WORD_IDS]
    first_token = ops.zeros((ops.shape(word_ids)[0], 1), "int32")
    if model.reads_masked_lm_positions:
        masked_lm_positions = ops.cast(x[MASKED_LM_POSITIONS], "int32")
        positions = ops.concatenate([first_token, masked_lm_positions], axis=1)
    else:
        positions = first_token
    outputs = model.encoder.run_layers(
        word_ids, x[INPUT_TYPE_IDS], x[INPUT_MASK], output_positions=positions, training=training
    )
    masked_lm_outputs = outputs["sequence_output"][:, 1:, :]
    return head_outputs(model, outputs["pooled_output"], masked_lm_outputs, training=training)


def head_positions_loss_fn(model, x, y, sample_weight):
    """`Trainer` loss function: `(loss, y_pred)` of one micro-batch, through
    `head_position_outputs` and the model's own `compute_loss`."""
    y_pred = head_position_outputs(model, x, training=True)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    return loss, y_pred
