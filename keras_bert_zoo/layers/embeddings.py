"""BERT input embeddings: token + segment + learned position, then LayerNorm and dropout."""

import keras
from keras import ops

from keras_bert_zoo.layers._arguments import constructor_arguments


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertEmbeddings(keras.layers.Layer):
    """Sums word, segment (token type) and position embeddings, then normalizes.

    Args:
        vocab_size: int. Number of WordPiece tokens.
        hidden_size: int. Embedding width H.
        max_position_embeddings: int. Rows of the learned position table.
        type_vocab_size: int. Number of segment ids.
        initializer_range: float. Stddev of the truncated-normal initializer.
        layer_norm_epsilon: float. LayerNorm epsilon.
        dropout: float. Dropout rate applied after the LayerNorm.

    Call arguments:
        input_word_ids: int tensor `[batch, seq_len]`.
        input_type_ids: int tensor `[batch, seq_len]`.
        position_ids: optional int tensor `[batch, seq_len]`; by default position `i`
            of every row is `i`.

    Returns:
        float tensor `[batch, seq_len, hidden_size]`.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.layers import BertEmbeddings

    layer = BertEmbeddings(vocab_size=100, hidden_size=8)
    ids = np.array([[101, 7, 102, 0]])
    print(layer(ids, np.zeros_like(ids)).shape)  # (1, 4, 8)
    ```
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_epsilon=1e-12,
        dropout=0.1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout

        # === Layers ===
        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)

        def table(rows, name):
            return keras.layers.Embedding(
                rows,
                hidden_size,
                embeddings_initializer=initializer,
                dtype=self.dtype_policy,
                name=name,
            )

        self.word_embeddings = table(vocab_size, "word_embeddings")
        self.token_type_embeddings = table(type_vocab_size, "token_type_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, input_word_ids_shape, input_type_ids_shape=None, position_ids_shape=None):
        self.word_embeddings.build(input_word_ids_shape)
        self.token_type_embeddings.build(input_word_ids_shape)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        self.layer_norm.build(tuple(input_word_ids_shape) + (self.hidden_size,))
        self.built = True

    @property
    def embedding_table(self):
        """The `[vocab_size, hidden_size]` word embedding variable (tied to the MLM decoder)."""
        return self.word_embeddings.embeddings

    def call(self, input_word_ids, input_type_ids, position_ids=None, training=None):
        if position_ids is None:
            seq_len = ops.shape(input_word_ids)[1]
            position_embeddings = self.position_embeddings[:seq_len][None]
        else:
            position_embeddings = ops.take(self.position_embeddings, position_ids, axis=0)
        embeddings = (
            self.word_embeddings(input_word_ids)
            + self.token_type_embeddings(input_type_ids)
            + ops.cast(position_embeddings, self.compute_dtype)
        )
        embeddings = self.layer_norm(embeddings)
        return self.dropout_layer(embeddings, training=training)

    def compute_output_shape(
        self, input_word_ids_shape, input_type_ids_shape=None, position_ids_shape=None
    ):
        return tuple(input_word_ids_shape) + (self.hidden_size,)

    def get_config(self):
        return {**super().get_config(), **constructor_arguments(self)}
