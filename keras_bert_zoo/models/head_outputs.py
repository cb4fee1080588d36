"""The task heads of `BertClassifier` and `BertPretrainer` over encoder outputs that
another forward pass computed (packed rows, or the last block run at the heads'
positions only): one place for what those passes hand the heads."""

from __future__ import annotations

from keras_bert_zoo.models.classifier import BertClassifier
from keras_bert_zoo.models.pretrainer import BertPretrainer

# The models whose heads read the [CLS] token (and, pretraining, the masked positions)
# only: the other task models read every position or take other inputs.
SUPPORTED_MODELS = (BertClassifier, BertPretrainer)


def head_outputs(model, pooled_output, masked_lm_outputs=None, training=None):
    """What `model(x)` returns, from the encoder outputs its heads read.

    Args:
        model: `BertClassifier` or `BertPretrainer`.
        pooled_output: `[batch, hidden]`, the pooler's output.
        masked_lm_outputs: `BertPretrainer` only: `[batch, predictions, hidden]`, the
            last block's outputs at `masked_lm_positions`.
        training: bool. Dropout.
    """
    if isinstance(model, BertClassifier):
        return model.classification_head(pooled_output, training=training)
    return {
        "masked_lm_logits": model.masked_lm_head.gathered_logits(masked_lm_outputs),
        "next_sentence_logits": model.next_sentence_head(pooled_output, training=training),
    }
