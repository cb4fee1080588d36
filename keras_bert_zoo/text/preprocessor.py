"""Raw strings -> BERT model inputs: `BertTokenizer` followed by `BertPacker`."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.text.preprocessing_layer import TokenizingPreprocessor
from keras_bert_zoo.text.tokenizer import BertTokenizer
from keras_bert_zoo.utils.errors import UserError


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPreprocessor(TokenizingPreprocessor):
    """Tokenizes 1-3 string segments and packs them into BERT's inputs.

    The same layer works eagerly, in ``tf.data`` (``ds.batch(n).map(preprocessor)``
    or per example) and inside an exported SavedModel or a ``.keras`` archive (the
    tokenizer's ``vocab.txt`` travels as an asset).

    Args:
        tokenizer: `BertTokenizer`.
        sequence_length: int. Packed length, ``[CLS]``/``[SEP]`` included.
        truncate: str. ``"longest_first"`` or ``"round_robin"`` (see `BertPacker`).
        pad_to: str. ``"fixed"`` or ``"longest"`` (see `BertPacker`).
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: string tensor ``[batch]`` (or a scalar), or a tuple/list of 1-3 of
            them (sentence A, B, C).

    Returns:
        dict of int32 tensors ``input_word_ids``, ``input_mask``, ``input_type_ids``
        of shape ``[batch, sequence_length]`` (``[sequence_length]`` for scalars).

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "qu", "##ick", "."]
    preprocessor = BertPreprocessor(BertTokenizer(vocab, lowercase=True), sequence_length=8)
    out = preprocessor((tf.constant(["The quick."]), tf.constant(["the"])))
    out["input_word_ids"].numpy()  # [[2, 5, 6, 7, 8, 3, 5, 3]]
    out["input_type_ids"].numpy()  # [[0, 0, 0, 0, 0, 0, 1, 1]]
    ```
    """

    def __init__(
        self,
        tokenizer: BertTokenizer,
        sequence_length: int = 128,
        truncate: str = "longest_first",
        pad_to: str = "fixed",
        **kwargs,
    ):
        super().__init__(tokenizer, **kwargs)
        self.packer = BertPacker(sequence_length, truncate=truncate, pad_to=pad_to, dtype="int32")
        # A tokenizer loaded from a .keras archive gets its vocabulary after this
        # constructor; the special ids are then taken when the layer first runs.
        if self.tokenizer.has_vocabulary:
            self._take_special_ids()

    @property
    def sequence_length(self) -> int:
        return self.packer.sequence_length

    # === Layers ===

    def call(self, inputs):
        segments = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
        if not 1 <= len(segments) <= 3:
            raise UserError(f"BertPreprocessor takes 1 to 3 segments, got {len(segments)}")
        segments = [tf.convert_to_tensor(s) for s in segments]
        scalar = segments[0].shape.rank == 0
        if any((s.shape.rank == 0) != scalar for s in segments):
            raise UserError("All segments must be scalars or all batched")
        if scalar:
            segments = [s[tf.newaxis] for s in segments]
        self._take_special_ids()
        outputs = self.packer([self.tokenizer.tokenize(s) for s in segments])
        if scalar:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def compute_output_spec(self, inputs):
        return self.packer.compute_output_spec(inputs)

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.packer.sequence_length,
                "truncate": self.packer.truncate,
                "pad_to": self.packer.pad_to,
            }
        )
        return config
