"""The exported answers of a sentence embedding model, in TF ops: raw text -> vector.

An export of an embedding model (`models.BertSentenceEmbedder`, or the
`BertTextGroupEmbedder` a task trains, through its `embedder`) answers:

| signature         | input                   | output                                   |
|-------------------|-------------------------|------------------------------------------|
| `serving_default` | `sentence` string [b]   | `embedding` float32 `[batch, dim]`       |
| `query`           | `sentence` string [b]   | `embedding` of `query_prompt + sentence` |
| `document`        | `sentence` string [b]   | `embedding` of `document_prompt + text`  |
| `serve_ids`       | the encoder's ids       | `embedding` float32 `[batch, dim]`       |

`query` and `document` exist only when their prompt is set (E5 / BGE-style models are
trained with prefixes such as `"query: "` and `"passage: "`); `serving_default` embeds
the text as given, so a client that adds the prefix itself gets what it asks for. The
vectors are L2-normalised when the model normalises (their dot product is then the
cosine). With `truncate_dim` they are the first `truncate_dim` components, normalised
again when the model normalises: how a Matryoshka model's vectors are cut
(sentence-transformers' `truncate_dim`).

`EmbeddingServing` gives a `Servable` these answers (`serving_model`, `serving_outputs`,
`extra_signatures`) from its `query_prompt` and `document_prompt`; the exporter
(`keras_bert_zoo.serving`) reads nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import keras
import tensorflow as tf

from keras_bert_zoo.models.sentence_embedder import EMBEDDING
from keras_bert_zoo.utils.errors import UserError

# The one raw-text input of every embedding export.
EMBEDDING_TEXT_FIELD = "sentence"
# The prompted signatures, beside `serving_default`.
QUERY_SIGNATURE = "query"
DOCUMENT_SIGNATURE = "document"


class TruncateDimError(UserError):
    """A `truncate_dim` the model cannot cut its vectors to."""


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class EmbeddingPrefix(keras.layers.Layer):
    """The first `dim` components of `[batch, width]` vectors, L2-normalised again when
    `normalize` (a Matryoshka cut):

    ```
    y = x[:, :dim]
    y = y / sqrt(max(sum(y**2), 1e-12))   # if normalize (UnitNormalization's)
    ```

    Args:
        dim: int. The width kept.
        normalize: bool. Normalise the cut vectors (when the model normalises).
        **kwargs: Standard `keras.layers.Layer` arguments.

    Example:

    ```python
    import numpy as np
    from keras_bert_zoo.tasks.sentence_embedding.serving import EmbeddingPrefix

    EmbeddingPrefix(2)(np.array([[0.6, 0.0, 0.8]], "float32"))  # [[1., 0.]]
    ```
    """

    def __init__(self, dim: int, normalize: bool = True, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.dim = int(dim)
        self.normalize = bool(normalize)
        self.normalization = keras.layers.UnitNormalization(axis=-1, dtype="float32")

    def call(self, vectors):
        vectors = keras.ops.cast(vectors, "float32")[:, : self.dim]
        return self.normalization(vectors) if self.normalize else vectors

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.dim)

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "normalize": self.normalize})
        return config


def sentence_embedder_of(model):
    """The `BertSentenceEmbedder` that embeds one text: `model` itself, or the
    `embedder` of a `BertTextGroupEmbedder`."""
    return getattr(model, "embedder", model)


def check_truncate_dim(truncate_dim: int | None, width: int) -> int | None:
    """`truncate_dim` as an int (None: no cut), refused in one line when it is not
    between 1 and the vectors' `width`."""
    if truncate_dim is None:
        return None
    if isinstance(truncate_dim, bool) or int(truncate_dim) != truncate_dim:
        raise TruncateDimError(f"truncate_dim={truncate_dim!r}: expected a whole number")
    if not 1 <= int(truncate_dim) <= width:
        raise TruncateDimError(
            f"truncate_dim={truncate_dim}: the model's vectors have {width} components; "
            f"give 1 to {width}"
        )
    return int(truncate_dim)


def embedding_serving_model(model, *, truncate_dim: int | None = None) -> keras.Model:
    """The model an export runs: the encoder's inputs -> `{"embedding": [batch, dim]}`
    (what `serve_ids` answers, by name), cut to `truncate_dim` when given.

    Args:
        model: a `BertSentenceEmbedder`, or a model with one as `embedder`.
        truncate_dim: int or None. Keep the vectors' first `truncate_dim` components
            (normalised again when the model normalises).

    Raises:
        TruncateDimError: `truncate_dim` is not between 1 and the model's width.
    """
    embedder = sentence_embedder_of(model)
    truncate_dim = check_truncate_dim(truncate_dim, embedder.output_dim)
    vectors = embedder(embedder.input)
    if truncate_dim is not None:
        vectors = EmbeddingPrefix(truncate_dim, embedder.normalize, name="truncate")(vectors)
    return keras.Model(embedder.input, {EMBEDDING: vectors}, name="embedding_serving_model")


def _embedding(outputs) -> tf.Tensor:
    """The vectors of a model call: the `embedding` of a dict, or the one tensor."""
    vectors = outputs[EMBEDDING] if isinstance(outputs, Mapping) else outputs
    return tf.cast(vectors, tf.float32)


def embedding_serving_outputs(
    model,
    preprocessor,
    *,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
    truncate_dim: int | None = None,
    prompt: str | None = None,
) -> Callable[..., dict[str, tf.Tensor]]:
    """`serving_default`'s function: raw strings `sentence` `[batch]` ->
    `{"embedding": float32 [batch, dim]}` (see the module docstring).

    Args:
        model: a `BertSentenceEmbedder`, a model with one as `embedder`, or the model
            `embedding_serving_model` made (what an export passes); called on the
            preprocessor's dict of ids.
        preprocessor: the single-text preprocessor (`BertPreprocessor`).
        query_prompt, document_prompt: str or None. The prompts the export records;
            `serving_default` embeds the text as given (`prompted_signatures` answers
            with them).
        truncate_dim: int or None. Cut the vectors to their first `truncate_dim`
            components (normalised again when the model normalises). A model from
            `embedding_serving_model` is cut already: pass None.
        prompt: str or None. Prepend this to every text (what `query` and `document`
            run).

    Returns:
        `fn(sentence)` -> `{"embedding": tensor}`.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.models import BertEncoder, BertSentenceEmbedder
    from keras_bert_zoo.tasks.sentence_embedding.serving import embedding_serving_outputs
    from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat"]
    model = BertSentenceEmbedder(BertEncoder.untrained("bert_tiny_uncased"))
    answer = embedding_serving_outputs(model, BertPreprocessor(BertTokenizer(vocab), 16))
    answer(sentence=tf.constant(["the cat"]))["embedding"].shape  # (1, 128)
    ```
    """
    del query_prompt, document_prompt  # recorded by the servable; see prompted_signatures
    # The embedder of a group model; the model itself otherwise (an export's serving
    # model, or what stands in for it: the recorder of the ids, a LiteRT / ONNX file).
    model = sentence_embedder_of(model)
    cut = None
    if truncate_dim is not None:
        check_truncate_dim(truncate_dim, model.output_dim)
        cut = EmbeddingPrefix(truncate_dim, model.normalize)

    def answer(sentence):
        text = tf.convert_to_tensor(sentence)
        if prompt:
            text = tf.strings.join([prompt, text])
        vectors = _embedding(model(preprocessor(text), training=False))
        return {EMBEDDING: vectors if cut is None else cut(vectors)}

    return answer


def prompted_signatures(
    model,
    preprocessor,
    *,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
    truncate_dim: int | None = None,
) -> dict[str, Callable[..., dict[str, tf.Tensor]]]:
    """`{"query": fn, "document": fn}`: the signatures beside `serving_default` that
    embed `prompt + sentence`, one for each prompt set (none when neither is).

    Args: as `embedding_serving_outputs`'.
    """
    prompts = {QUERY_SIGNATURE: query_prompt, DOCUMENT_SIGNATURE: document_prompt}
    return {
        name: embedding_serving_outputs(
            model, preprocessor, truncate_dim=truncate_dim, prompt=prompt
        )
        for name, prompt in prompts.items()
        if prompt
    }


class EmbeddingServing:
    """The serving half of an embedding `Servable` (a mixin, before `Servable` or
    `Task` in the bases): its model, `serving_default` and the prompted signatures.

    The class reads `self.query_prompt` and `self.document_prompt` (str or None).
    """

    text_fields: tuple[str, ...] = (EMBEDDING_TEXT_FIELD,)
    query_prompt: str | None = None
    document_prompt: str | None = None

    def serving_model(self, model, *, truncate_dim: int | None = None):
        return embedding_serving_model(model, truncate_dim=truncate_dim)

    def serving_outputs(self, model, preprocessor):
        return embedding_serving_outputs(
            model,
            preprocessor,
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
        )

    def extra_signatures(self, model, preprocessor):
        return prompted_signatures(
            model,
            preprocessor,
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
        )
