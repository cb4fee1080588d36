"""`BertMultipleChoice`: pick one of several candidate continuations (SWAG)."""

import keras
from keras import ops

from keras_bert_zoo.layers.heads import ClassificationHead
from keras_bert_zoo.models.encoder import encoder_inputs
from keras_bert_zoo.models.head_model import OUTPUT_DENSE, EncoderHeadModel, HeadCheckpointNames


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class FoldChoices(keras.layers.Layer):
    """Reshapes `[batch, num_choices, seq_len]` to `[batch * num_choices, seq_len]`.

    A layer (not a bare `ops.reshape`) because the sequence length is only known when
    the model runs.
    """

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        batch, choices = input_shape[0], input_shape[1]
        folded = None if batch is None or choices is None else batch * choices
        return (folded, input_shape[-1])


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertMultipleChoice(EncoderHeadModel):
    """Scores each `[CLS] context [SEP] choice [SEP]` and compares across choices.

    Inputs are `[batch, num_choices, seq_len]`; choices are folded into the batch for
    the encoder, each pooled vector gets one score, and the scores are unfolded into
    `[batch, num_choices]` logits (softmax across choices, as in the paper's SWAG head).

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        num_choices: int. Number of candidates per example (4 for SWAG).
        dropout: float. Dropout before the scoring layer.
        initializer_range: float. Stddev of the head's initializer (defaults to the
            encoder's).

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder, BertMultipleChoice

    model = BertMultipleChoice(BertEncoder.untrained("bert_tiny_uncased"), num_choices=4)
    x = {
        "input_word_ids": np.full((2, 4, 6), 1000),
        "input_mask": np.ones((2, 4, 6), "int32"),
        "input_type_ids": np.zeros((2, 4, 6), "int32"),
    }
    print(model.predict(x, verbose=0).shape)  # (2, 4)
    ```
    """

    # No google-research/bert release: run_classifier.py's names. BertForMultipleChoice.
    checkpoint_heads = (HeadCheckpointNames("choice_head", OUTPUT_DENSE, "", "classifier"),)
    huggingface_architecture = "BertForMultipleChoice"
    head_arguments = ("num_choices", "dropout", "initializer_range")
    # The head reads each choice's pooled output. Its rows are `[batch, choices,
    # seq_len]`, so the training passes that take `[batch, seq_len]` rows do not apply.
    supports_padding_free_inference = True

    def __init__(self, encoder, num_choices=4, dropout=0.1, initializer_range=None, **kwargs):
        initializer_range = self._initializer_range(encoder, initializer_range)
        # === Layers ===
        self.encoder = encoder
        self.choice_head = ClassificationHead(
            1,
            dropout=dropout,
            initializer_range=initializer_range,
            dtype=encoder.dtype_policy,
            name="choice_head",
        )

        # === Functional Model ===
        inputs = encoder_inputs(batch_shape=(None, num_choices, None))
        fold = FoldChoices(name="fold_choices")
        flat_inputs = {name: fold(tensor) for name, tensor in inputs.items()}
        scores = self.choice_head(encoder(flat_inputs)["pooled_output"])
        logits = ops.reshape(scores, (-1, num_choices))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_choices = num_choices
        self.dropout = dropout
        self.initializer_range = initializer_range
