"""`MultipleChoicePreprocessor`: a context and N choices -> N packed BERT pairs.

Each candidate is packed with the context as a pair `[CLS] context [SEP] choice
[SEP]` (BERT's SWAG setup: sentence A is the context, sentence B a possible
continuation). SWAG's choice i is `sent2 + " " + ending_i`: the join happens inside
the layer (`choice_prefix`), so the exported model can take the raw SWAG fields.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert_zoo.tasks.multiple_choice.reader import SWAG_NUM_CHOICES
from keras_bert_zoo.text.preprocessing_layer import TokenizingPreprocessor
from keras_bert_zoo.text.preprocessor import BertPreprocessor
from keras_bert_zoo.utils.errors import UserError


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MultipleChoicePreprocessor(TokenizingPreprocessor):
    """Context and N choices -> N packed pairs per example.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        num_choices: int. Choices per example.
        sequence_length: int. Packed length of each pair, special tokens included.
        truncate: str. How a pair too long is cut (see `BertPacker`); the default
            drops tokens from the end of the longer segment, as BERT's
            `_truncate_seq_pair`.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        context: string tensor `[batch]`.
        choices: string tensor `[batch, num_choices]`.
        choice_prefix: optional string tensor `[batch]`, joined before every choice
            with a space when not empty (SWAG's `sent2`).

    Returns:
        dict of int32 `[batch, num_choices, sequence_length]` tensors
        `input_word_ids`, `input_mask`, `input_type_ids`.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks.multiple_choice import MultipleChoicePreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "she", "runs", "sits", "."]
    layer = MultipleChoicePreprocessor(BertTokenizer(vocab), num_choices=2, sequence_length=6)
    out = layer(tf.constant(["She"]), tf.constant([["runs.", "sits."]]))
    out["input_word_ids"].numpy()  # [[[2, 5, 3, 6, 8, 3], [2, 5, 3, 7, 8, 3]]]
    ```
    """

    def __init__(
        self,
        tokenizer,
        num_choices: int = SWAG_NUM_CHOICES,
        sequence_length: int = 128,
        truncate: str = "longest_first",
        **kwargs,
    ):
        super().__init__(tokenizer, **kwargs)
        if int(num_choices) < 1:
            raise UserError(f"num_choices must be >= 1, got {num_choices}")
        self.num_choices = int(num_choices)
        # The pairs are BertPreprocessor's: it holds the packer and its special ids.
        self.pair_preprocessor = BertPreprocessor(
            self.tokenizer, sequence_length=sequence_length, truncate=truncate
        )

    @property
    def sequence_length(self) -> int:
        return self.pair_preprocessor.sequence_length

    # === Layers ===

    def call(self, context, choices, choice_prefix=None):
        context = tf.convert_to_tensor(context)
        choices = tf.convert_to_tensor(choices)
        if choices.shape.rank != 2:
            raise UserError(f"choices must be [batch, num_choices], got shape {choices.shape}")
        if choices.shape[1] is not None and choices.shape[1] != self.num_choices:
            raise UserError(
                f"choices has {choices.shape[1]} columns, the layer takes {self.num_choices}"
            )
        if choice_prefix is not None:
            prefix = tf.repeat(
                tf.convert_to_tensor(choice_prefix)[:, tf.newaxis], self.num_choices, 1
            )
            joined = tf.strings.join([prefix, choices], separator=" ")
            choices = tf.where(tf.equal(prefix, ""), choices, joined)
        packed = self.pair_preprocessor(
            (tf.repeat(context, self.num_choices), tf.reshape(choices, [-1]))
        )
        shape = [-1, self.num_choices, self.sequence_length]
        return {name: tf.reshape(value, shape) for name, value in packed.items()}

    def compute_output_spec(self, context, choices, choice_prefix=None):
        spec = keras.KerasTensor([None, self.num_choices, self.sequence_length], dtype="int32")
        return {"input_word_ids": spec, "input_mask": spec, "input_type_ids": spec}

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_choices": self.num_choices,
                "sequence_length": self.sequence_length,
                "truncate": self.pair_preprocessor.packer.truncate,
            }
        )
        return config
