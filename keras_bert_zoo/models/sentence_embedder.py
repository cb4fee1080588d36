"""Sentence embedding models (bi-encoders): one vector per text from a shared encoder.

Two models over the same layers:

- `BertSentenceEmbedder` embeds one text a row: the encoder's inputs `[batch, seq_len]`
  give `embedding` `[batch, dim]`. It is what serves, evaluates and searches.
- `BertTextGroupEmbedder` embeds the several texts of a training example at once
  (anchor, positive, hard negatives...; or the two texts of a scored pair): inputs
  `[batch, texts, seq_len]` are folded into one batch of `batch * texts` sequences,
  run through the ONE encoder in one pass, and unfolded into `[batch, texts, dim]`,
  which the losses of `models.embedding_losses` read. It builds a
  `BertSentenceEmbedder` (its `embedder`) and calls it, so both share every weight:
  train the group model, then serve `group_model.embedder`.

Folding the texts into the batch axis (as `BertMultipleChoice` folds its choices)
keeps one encoder call per step, whatever the number of texts, and one feature layout
for every kind of training data: a pair is `texts=2`, a triplet `texts=3`, a query with
k hard negatives `texts=2+k`, and a single text `texts=1`. All texts of a row are
packed to the same `seq_len`.
"""

import keras
from keras import ops

from keras_bert_zoo.inputs import INPUT_MASK, INPUT_WORD_IDS
from keras_bert_zoo.layers.pooling import SequencePooling
from keras_bert_zoo.models.encoder import encoder_inputs
from keras_bert_zoo.models.head_model import EncoderHeadModel
from keras_bert_zoo.models.multiple_choice import FoldChoices

# The output's name, in the model (its last layer) and in the exported signatures.
EMBEDDING = "embedding"


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class UnfoldTexts(keras.layers.Layer):
    """Reshapes `[batch * texts, dim]` vectors to `[batch, texts, dim]`, reading
    `batch` and `texts` from the `[batch, texts, seq_len]` input they were folded from
    (known only when the model runs)."""

    def call(self, vectors, folded_from):
        shape = ops.shape(folded_from)
        return ops.reshape(vectors, (shape[0], shape[1], ops.shape(vectors)[-1]))

    def compute_output_shape(self, vectors_shape, folded_from_shape):
        return (folded_from_shape[0], folded_from_shape[1], vectors_shape[-1])


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertSentenceEmbedder(EncoderHeadModel):
    """A text's vector: encoder -> pooling -> optional projection -> optional L2 norm.

    ```
    x = SequencePooling(pooling)(sequence_output, input_mask)  # [batch, hidden]
    x = Dense(embedding_dim)(x)                                  # if embedding_dim
    x = x / max(||x||, 1e-12)                                    # if normalize
    ```

    With `pooling="mean"` and `normalize=True` (the defaults) on the weights of a
    sentence-transformers model such as all-MiniLM-L6-v2 it gives
    `SentenceTransformer.encode(..., normalize_embeddings=True)`'s vectors. The encoder's
    pooler (`pooled_output`) is not used. Pooling, projection and normalization run in
    float32 whatever the encoder's dtype policy.

    Args:
        encoder: `keras_bert_zoo.models.BertEncoder`.
        pooling: str. `"mean"` over the real tokens (default), `"cls"` or `"max"` over
            the real tokens (`layers.pooling.POOLING_MODES`).
        embedding_dim: int or None. A linear projection to this width; None (default):
            the encoder's width, no projection.
        normalize: bool. L2-normalize the vectors (their dot product is then the
            cosine).
        initializer_range: float. Stddev of the projection's initializer (defaults to
            the encoder's).

    Inputs: the encoder's dict (`input_word_ids`, `input_mask`, `input_type_ids`),
        `[batch, seq_len]`.
    Output: float32 `[batch, dim]`, the `embedding` layer's.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder, BertSentenceEmbedder

    model = BertSentenceEmbedder(BertEncoder.untrained("bert_tiny_uncased"))
    x = {
        "input_word_ids": np.array([[101, 7592, 102, 0]]),
        "input_mask": np.array([[1, 1, 1, 0]]),
        "input_type_ids": np.zeros((1, 4), "int32"),
    }
    print(np.linalg.norm(model.predict(x, verbose=0), axis=-1).round(6))  # [1.]
    ```
    """

    # Masked pooling: the padded positions reach no output, so an export may run the
    # encoder on the real tokens alone (its zeros at padding are never read).
    supports_padding_free_inference = True
    head_arguments = ("pooling", "embedding_dim", "normalize", "initializer_range")

    def __init__(
        self,
        encoder,
        pooling="mean",
        embedding_dim=None,
        normalize=True,
        initializer_range=None,
        **kwargs,
    ):
        initializer_range = self._initializer_range(encoder, initializer_range)
        # === Layers ===
        self.encoder = encoder
        self.sequence_pooling = SequencePooling(pooling, name="pooling")
        self.projection = None
        if embedding_dim is not None:
            self.projection = keras.layers.Dense(
                int(embedding_dim),
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype="float32",
                name="projection",
            )
        self.normalization = None
        if normalize:
            self.normalization = keras.layers.UnitNormalization(
                axis=-1, dtype="float32", name="normalization"
            )
        # The output's name, whatever layer comes last.
        self.embedding_output = keras.layers.Identity(dtype="float32", name=EMBEDDING)

        # === Functional Model ===
        inputs = encoder.input
        sequence_output = encoder(inputs)["sequence_output"]
        embedding = self.embed_sequence(sequence_output, inputs[INPUT_MASK])
        super().__init__(inputs=inputs, outputs=self.embedding_output(embedding), **kwargs)

        # === Config ===
        self.pooling = pooling
        self.embedding_dim = embedding_dim
        self.normalize = normalize
        self.initializer_range = initializer_range

    @property
    def output_dim(self) -> int:
        """The width of the vectors."""
        return self.embedding_dim or self.encoder.hidden_size

    def embed_sequence(self, sequence_output, input_mask):
        """The vectors from the encoder's token outputs (pooling, projection,
        normalization), for forward passes that run the encoder themselves.

        Args:
            sequence_output: float tensor `[batch, seq_len, hidden]`.
            input_mask: int tensor `[batch, seq_len]`.

        Returns:
            float32 tensor `[batch, dim]`.
        """
        vectors = self.sequence_pooling(sequence_output, input_mask)
        if self.projection is not None:
            vectors = self.projection(vectors)
        if self.normalization is not None:
            vectors = self.normalization(vectors)
        return vectors


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTextGroupEmbedder(EncoderHeadModel):
    """The vectors of several texts per example, for training (see the module
    docstring): `[batch, texts, seq_len]` inputs -> `[batch, texts, dim]`.

    It takes the arguments of `BertSentenceEmbedder`, builds one (`embedder`) and runs
    it once on the `batch * texts` folded sequences: every text goes through the same
    encoder and head, in one call. The number of texts is read when the model runs, so
    the same model trains on pairs (2), triplets (3) or more negatives, and embeds
    single texts (`[batch, 1, seq_len]`).

    Args:
        encoder, pooling, embedding_dim, normalize, initializer_range: as
            `BertSentenceEmbedder`'s.

    Attributes:
        embedder: the `BertSentenceEmbedder` it runs (its weights are this model's):
            the model to evaluate, export and serve once trained.

    Inputs: the encoder's dict, each `[batch, texts, seq_len]`: row `i` holds example
        `i`'s texts in order (for `MultipleNegativesRankingLoss`: anchor, positive,
        hard negatives; for the scored-pair losses: the two texts).
    Output: float32 `[batch, texts, dim]`.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.models import BertEncoder, BertTextGroupEmbedder

    model = BertTextGroupEmbedder(BertEncoder.untrained("bert_tiny_uncased"))
    triplets = {  # anchor, positive, negative of 2 examples
        "input_word_ids": np.full((2, 3, 6), 1000),
        "input_mask": np.ones((2, 3, 6), "int32"),
        "input_type_ids": np.zeros((2, 3, 6), "int32"),
    }
    print(model.predict(triplets, verbose=0).shape)  # (2, 3, 128)
    ```
    """

    # The embedder's own: it is built from them.
    head_arguments = BertSentenceEmbedder.head_arguments

    def __init__(
        self,
        encoder,
        pooling="mean",
        embedding_dim=None,
        normalize=True,
        initializer_range=None,
        **kwargs,
    ):
        # === Layers ===
        self.encoder = encoder
        self.embedder = BertSentenceEmbedder(
            encoder,
            pooling=pooling,
            embedding_dim=embedding_dim,
            normalize=normalize,
            initializer_range=initializer_range,
            name="sentence_embedder",
        )

        # === Functional Model ===
        inputs = encoder_inputs(batch_shape=(None, None, None))
        fold = FoldChoices(name="fold_texts")
        folded = {name: fold(tensor) for name, tensor in inputs.items()}
        vectors = self.embedder(folded)
        outputs = UnfoldTexts(name=EMBEDDING)(vectors, inputs[INPUT_WORD_IDS])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        # The embedder's, as it resolved them (`initializer_range` from the encoder's).
        for name in self.head_arguments:
            setattr(self, name, getattr(self.embedder, name))

    @property
    def output_dim(self) -> int:
        """The width of the vectors."""
        return self.embedder.output_dim
