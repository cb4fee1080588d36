"""The task heads of a model over encoder outputs that another forward pass computed
(packed rows, or the last block run at the heads' positions only): one place for what
those passes hand the heads.

A model takes part when its class declares `outputs_from_head_positions`
(`EncoderHeadModel`'s capabilities): `BertClassifier` and `BertPretrainer`, whose heads
read the [CLS] token (and, pretraining, the masked positions) only. The other task
models read every position or take other inputs.
"""

from __future__ import annotations

from keras_bert_zoo.models.head_model import EncoderHeadModel, head_models_with

CAPABILITY = "outputs_from_head_positions"


def supports_head_outputs(model) -> bool:
    """Whether `model`'s class declares `outputs_from_head_positions` (any other
    model, a bare `BertEncoder` included, declares nothing: false)."""
    return bool(getattr(type(model), CAPABILITY, False))


def supported_models() -> tuple[type[EncoderHeadModel], ...]:
    """The model classes defined so far that declare `outputs_from_head_positions`."""
    return head_models_with(CAPABILITY)


def head_outputs(model, pooled_output, masked_lm_outputs=None, training=None):
    """What `model(x)` returns, from the encoder outputs its heads read.

    Args:
        model: an `EncoderHeadModel` that declares `outputs_from_head_positions`
            (`BertClassifier`, `BertPretrainer`).
        pooled_output: `[batch, hidden]`, the pooler's output.
        masked_lm_outputs: `[batch, predictions, hidden]`, the last block's outputs at
            `masked_lm_positions`, for a model that declares `reads_masked_lm_positions`.
        training: bool. Dropout.
    """
    return model.outputs_at_head_positions(pooled_output, masked_lm_outputs, training=training)
