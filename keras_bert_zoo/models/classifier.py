"""`BertClassifier`: sentence and sentence-pair classification or regression (GLUE)."""

import keras

from keras_bert_zoo.layers.heads import ClassificationHead
from keras_bert_zoo.models._task import EncoderTask


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertClassifier(EncoderTask):
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

    model = BertClassifier(BertEncoder.from_preset("bert_tiny_uncased"), num_classes=3)
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

    def __init__(self, encoder, num_classes, dropout=0.1, initializer_range=None, **kwargs):
        initializer_range = (
            encoder.initializer_range if initializer_range is None else initializer_range
        )
        # === Layers ===
        self.encoder = encoder
        self.classification_head = ClassificationHead(
            num_classes,
            dropout=dropout,
            initializer_range=initializer_range,
            dtype=encoder.dtype_policy,
            name="classification_head",
        )

        # === Functional Model ===
        inputs = encoder.input
        logits = self.classification_head(encoder(inputs)["pooled_output"])
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
