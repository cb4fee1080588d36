"""Training forward passes that run the last encoder block only where the heads read it.

`BertClassifier` reads one position of the last block (the [CLS] token, through the
pooler) and `BertPretrainer` 1 + `max_predictions_per_seq` (the [CLS] token and the
masked positions). Every position of the last block still serves as a key and value,
but its queries, attention output, feed-forward layer and LayerNorms are needed at those
positions only (`BertEncoder.run_layers(output_positions=...)`). TF Model Garden's
`output_range` does this for the [CLS] token.

`head_position_outputs(model, x)` returns what `model(x)` returns, to float rounding.
With dropout, the last block's masks are drawn over the read positions only: the same
distribution, other draws.

Example:

```python
import numpy as np
from keras_bert_zoo.models import BertClassifier, BertEncoder
from keras_bert_zoo.models.head_positions import head_position_outputs

model = BertClassifier(BertEncoder.untrained("bert_tiny_uncased"), num_classes=2)
x = {
    "input_word_ids": np.array([[101, 7592, 102, 0], [101, 2088, 2003, 102]]),
    "input_mask": np.array([[1, 1, 1, 0], [1, 1, 1, 1]]),
    "input_type_ids": np.zeros((2, 4), "int32"),
}
logits = head_position_outputs(model, x, training=False)  # == model(x) to rounding
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
from keras_bert_zoo.models.head_outputs import SUPPORTED_MODELS, head_outputs
from keras_bert_zoo.models.pretrainer import BertPretrainer


def supports(model) -> bool:
    """Whether `head_position_outputs` can run `model`: one of `SUPPORTED_MODELS`
    over a `BertEncoder` (whose `run_layers` takes `output_positions`)."""
    return isinstance(model, SUPPORTED_MODELS) and isinstance(
        getattr(model, "encoder", None), BertEncoder
    )


def head_position_outputs(model, x: Mapping, training=None):
    """`model`'s outputs, with the last block computed at the positions the heads read.

    Args:
        model: `BertClassifier` or `BertPretrainer` over a `BertEncoder`.
        x: the model's input dict (padded batch).
        training: bool. Dropout.

    Raises:
        TypeError: for other models.
    """
    if not supports(model):
        raise TypeError(
            f"head_position_outputs supports {[m.__name__ for m in SUPPORTED_MODELS]} "
            f"over a BertEncoder, not {type(model).__name__} over "
            f"{type(getattr(model, 'encoder', None)).__name__}"
        )
    word_ids = x[INPUT_WORD_IDS]
    first_token = ops.zeros((ops.shape(word_ids)[0], 1), "int32")
    if isinstance(model, BertPretrainer):
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
