"""`BertTokenClassifier`: one label per token (NER, tagging)."""

import keras

from keras_bert_zoo.layers.heads import ClassificationHead
from keras_bert_zoo.models._task import EncoderTask


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenClassifier(EncoderTask):
    """Dropout + Dense over every position of `sequence_output`.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        num_classes: int. Number of tags.
        dropout: float. Dropout before the output layer.
        initializer_range: float. Stddev of the head's initializer (defaults to the
            encoder's).

    Output: float32 logits `[batch, seq_len, num_classes]`. Mask padded positions
    (`input_mask == 0`) out of the loss with `sample_weight`.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder, BertTokenClassifier

    model = BertTokenClassifier(BertEncoder.from_preset("bert_tiny_uncased"), num_classes=9)
    x = {
        "input_word_ids": np.array([[101, 2023, 102, 0]]),
        "input_mask": np.array([[1, 1, 1, 0]]),
        "input_type_ids": np.zeros((1, 4), "int32"),
    }
    print(model.predict(x, verbose=0).shape)  # (1, 4, 9)
    ```
    """

    def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=None, **kwargs):
        initializer_range = (
            encoder.initializer_range if initializer_range is None else initializer_range
        )
        # === Layers ===
        self.encoder = encoder
        self.token_classification_head = ClassificationHead(
            num_classes,
            dropout=dropout,
            initializer_range=initializer_range,
            dtype=encoder.dtype_policy,
            name="token_classification_head",
        )

        # === Functional Model ===
        inputs = encoder.input
        logits = self.token_classification_head(encoder(inputs)["sequence_output"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.initializer_range = initializer_range

    def _task_config(self):
        return {
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
        }
