"""`PreprocessingLayer`: what the tokenizer, the packer and the preprocessors share.

`TokenizingPreprocessor` is the base of every layer that holds a `BertTokenizer` and
packs its pieces into model inputs (keras-hub's `Preprocessor` plays this part there):
the tokenizer is serialized and restored here, once, and the packer's special ids are
taken from it here.
"""

import keras


class PreprocessingLayer(keras.layers.Layer):
    """Base of the text layers: int32 outputs, no weights, nothing to train.

    Their inputs (strings, ragged ids, tuples of segments) reach `call` as given:
    Keras neither converts nor autocasts them.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "int32")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        # No weights: nothing for build() to create.
        self.built = True


class TokenizingPreprocessor(PreprocessingLayer):
    """Base of the preprocessors: a `BertTokenizer` (serialized in `get_config`) and,
    usually, a `BertPacker` in `self.packer` that takes its special ids from it.

    Subclasses pass `tokenizer` through, set `self.packer` (or leave it None), and add
    their own arguments to `get_config`; `from_config` needs no override.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`, or its serialized config.
        **kwargs: Standard `keras.layers.Layer` arguments.
    """

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):  # from a serialized config
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        self.tokenizer = tokenizer
        self.packer = None

    def _take_special_ids(self):
        """Gives the packer `[CLS]`, `[SEP]` and `[PAD]` of the tokenizer's vocabulary.

        A tokenizer loaded from a `.keras` archive gets its vocabulary after the
        constructor, so subclasses call this in the constructor when
        `tokenizer.has_vocabulary` and again when the layer runs.
        """
        if self.packer is not None:
            packer = self.packer
            packer.start_value, packer.end_value, packer.pad_value = (
                self.tokenizer.packing_token_ids()
            )

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config["tokenizer"] = keras.saving.serialize_keras_object(self.tokenizer)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)
