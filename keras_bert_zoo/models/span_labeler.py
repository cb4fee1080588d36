"""`BertSpanLabeler`: start/end logits for extractive question answering (SQuAD)."""

import keras

from keras_bert_zoo.layers.heads import SpanHead
from keras_bert_zoo.models.head_model import OUTPUT_DENSE, EncoderHeadModel, HeadCheckpointNames


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertSpanLabeler(EncoderHeadModel):
    """A Dense(2) over `sequence_output`, split into start and end logits.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        initializer_range: float. Stddev of the head's initializer (defaults to the
            encoder's).

    Outputs: dict of float32 `start_logits` and `end_logits`, each `[batch, seq_len]`.
    Train with `SparseCategoricalCrossentropy(from_logits=True)` on each against the
    gold start and end token positions (the original averages the two losses).

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder, BertSpanLabeler

    model = BertSpanLabeler(BertEncoder.untrained("bert_tiny_uncased"))
    x = {
        "input_word_ids": np.array([[101, 2054, 102, 2023, 102]]),
        "input_mask": np.ones((1, 5), "int32"),
        "input_type_ids": np.array([[0, 0, 0, 1, 1]]),
    }
    print(model.predict(x, verbose=0)["start_logits"].shape)  # (1, 5)
    ```
    """

    # run_squad.py's names; BertForQuestionAnswering.
    checkpoint_heads = (HeadCheckpointNames("span_head", OUTPUT_DENSE, "cls/squad/", "qa_outputs"),)
    huggingface_architecture = "BertForQuestionAnswering"
    head_arguments = ("initializer_range",)

    def __init__(self, encoder, initializer_range=None, **kwargs):
        initializer_range = self._initializer_range(encoder, initializer_range)
        # === Layers ===
        self.encoder = encoder
        self.span_head = SpanHead(
            initializer_range=initializer_range, dtype=encoder.dtype_policy, name="span_head"
        )

        # === Functional Model ===
        inputs = encoder.input
        start_logits, end_logits = self.span_head(encoder(inputs)["sequence_output"])
        super().__init__(
            inputs=inputs,
            outputs={"start_logits": start_logits, "end_logits": end_logits},
            **kwargs,
        )

        # === Config ===
        self.initializer_range = initializer_range
