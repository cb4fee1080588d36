"""`BertClassifier`: sentence and sentence-pair classification or regression (GLUE)."""

from typing import ClassVar

import keras

from keras_bert_zoo.layers.heads import ClassificationHead
from keras_bert_zoo.models.head_model import OUTPUT_DENSE, EncoderHeadModel, HeadCheckpointNames


class _EncoderOutputClassifier(EncoderHeadModel):
    """Dropout + Dense(`num_classes`) over one of the encoder's outputs: the body of
    `BertClassifier` (pooled vector) and `BertTokenClassifier` (every position).

    Subclasses name the output (`encoder_output`) and declare the head
    (`checkpoint_heads`, whose attribute is also the head layer's name).
    """

    encoder_output: ClassVar[str]
    head_arguments = ("num_classes", "dropout", "initializer_range")

    def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=None, **kwargs):
        initializer_range = self._initializer_range(encoder, initializer_range)
        head_name = self.checkpoint_heads[0].attribute
        # === Layers ===
        self.encoder = encoder
        head = ClassificationHead(
            num_classes,
            dropout=dropout,
            initializer_range=initializer_range,
            dtype=encoder.dtype_policy,
            name=head_name,
        )
        setattr(self, head_name, head)

        # === Functional Model ===
        inputs = encoder.input
        logits = head(encoder(inputs)[self.encoder_output])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.initializer_range = initializer_range


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertClassifier(_EncoderOutputClassifier):
    """Dropout + Dense over the encoder's `pooled_output`.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        num_classes: int. Number of labels; `1` makes a regressor (STS-B).
        dropout: float. Dropout before the output layer.
        initializer_range: float. Stddev of the head's initializer (defaults to the
            encoder's).

    Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`).
    Output: float32 logits `[batch, num_classes]`.

    Example:

    ```python
    import numpy as np
    import keras
    from keras_bert_zoo.models import BertClassifier, BertEncoder

    model = BertClassifier(BertEncoder.untrained("bert_tiny_uncased"), num_classes=3)
    model.compile(
        optimizer=keras.optimizers.AdamW(2e-5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    x = {
        "input_word_ids": np.array([[101, 2023, 102, 0]] * 4),
        "input_mask": np.array([[1, 1, 1, 0]] * 4),
        "input_type_ids": np.zeros((4, 4), "int32"),
    }
    model.fit(x, np.array([0, 1, 2, 1]), epochs=1, verbose=0)
    ```
    """

    encoder_output = "pooled_output"
    # run_classifier.py's names; BertForSequenceClassification.
    checkpoint_heads = (HeadCheckpointNames("classification_head", OUTPUT_DENSE, "", "classifier"),)
    huggingface_architecture = "BertForSequenceClassification"
    # The head reads the pooled output, one example a row.
    outputs_from_head_positions = True
    supports_padding_free_inference = True

    def outputs_at_head_positions(self, pooled_output, masked_lm_outputs=None, training=None):
        return self.classification_head(pooled_output, training=training)
