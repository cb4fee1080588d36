"""Servables that are not fine-tuning tasks: the bare encoder, the masked LM and a
pretrained sentence embedding model.

The exporter takes a `keras_bert_zoo.tasks.servable.Servable`, the serving half of the
task contract: `task_name`, `text_fields`, `max_seq_length`,
`make_preprocessor(tokenizer)`, `serving_outputs(model, preprocessor)`, `state()`,
`label_names`, `serving_api` and `description(tokenizer)`. Every registered task is
one; these make a pretrained `BertEncoder`, `BertPretrainer` and
`BertSentenceEmbedder` one, so they export through the same code. None has classes or
a TF Serving example API (`label_names` and `serving_api` keep their None defaults).

Answers of `serving_default`:

* `EncoderServable` (model: `BertEncoder`): `pooled_output` float32 `[batch, H]`,
  `sequence_output` float32 `[batch, length, H]` and `input_mask` int32
  `[batch, length]` (1 on real tokens), `length` = the longest packed input of the
  batch (at most `max_seq_length`).
* `MaskedLMServable` (model: `BertPretrainer`): each literal `[MASK]` in the raw text
  becomes the mask token (the tokenizer alone would split it into `[`, `mask`, `]`);
  for `M` = the most masks of any input in the batch and `K` = `top_k`:
  `mask_count` int32 `[batch]` (masks kept after truncation), `mask_positions` int32
  `[batch, M]` (token positions, -1 past `mask_count`), `fill_in_tokens` string
  `[batch, M, K]`, `fill_in_ids` int32 `[batch, M, K]` (-1 past `mask_count`),
  `fill_in_probabilities` float32 `[batch, M, K]` (0 past `mask_count`), best first,
  and `filled_text` string `[batch]`: the word pieces with every mask replaced by its
  best fill-in, joined (`##` pieces glued), special tokens dropped.
* `SentenceEmbeddingServable` (model: `BertSentenceEmbedder`, e.g. a
  sentence-transformers model such as all-MiniLM-L6-v2 with the pooling and
  normalisation its `modules.json` lists): `embedding` float32 `[batch, dim]` of the
  one text field `sentence`, and the `query` / `document` signatures when a prompt is
  set (`tasks.sentence_embedding.serving`).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import keras
import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_MASK, INPUT_WORD_IDS
from keras_bert_zoo.tasks.sentence_embedding.serving import EmbeddingServing
from keras_bert_zoo.tasks.servable import Servable
from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.text.preprocessing_layer import TokenizingPreprocessor
from keras_bert_zoo.text.preprocessor import BertPreprocessor
from keras_bert_zoo.utils.errors import UserError

# The packed length of a pretrained export that names none.
DEFAULT_MAX_SEQ_LENGTH = 128

MASK_TOKEN = "[MASK]"


def _check_text_fields(text_fields) -> tuple[str, ...]:
    fields = tuple(text_fields)
    if not 1 <= len(fields) <= 3 or len(set(fields)) != len(fields):
        raise UserError(f"text_fields must be 1 to 3 distinct names, got {text_fields!r}")
    return fields


def _segments(text_fields, texts) -> tuple[tf.Tensor, ...]:
    unknown = sorted(set(texts) - set(text_fields))
    if unknown or len(texts) != len(text_fields):
        raise UserError(f"Expected the texts {list(text_fields)}, got {sorted(texts)}")
    return tuple(tf.convert_to_tensor(texts[name]) for name in text_fields)


class EncoderServable(Servable):
    """A pretrained `BertEncoder` served on raw text (see the module docstring).

    Args:
        max_seq_length: int. Longest packed input; longer texts are truncated.
        text_fields: the names of the 1-3 text segments (`("sentence",)`, or
            `("sentence1", "sentence2")` for pairs).
    """

    task_name: ClassVar[str] = "encoder"

    def __init__(self, max_seq_length: int = 128, text_fields=("sentence",)):
        self.max_seq_length = int(max_seq_length)
        self.text_fields = _check_text_fields(text_fields)

    def make_preprocessor(self, tokenizer) -> BertPreprocessor:
        # Padded to the longest input of the batch: the outputs are the same at the
        # real tokens, and a short request costs a short run.
        return BertPreprocessor(tokenizer, sequence_length=self.max_seq_length, pad_to="longest")

    # `description`: `Servable`'s (name, length, text fields, casing).

    def serving_outputs(self, model, preprocessor):
        text_fields = self.text_fields

        def answer(**texts):
            segments = _segments(text_fields, texts)
            inputs = preprocessor(segments if len(segments) > 1 else segments[0])
            outputs = model(inputs, training=False)
            return {
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
                "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
                INPUT_MASK: inputs[INPUT_MASK],
            }

        return answer


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedTextPreprocessor(TokenizingPreprocessor):
    """Raw text with literal `[MASK]`s -> BERT inputs holding the mask token there.

    Each segment is split at the mask token's text, the parts are tokenized by the
    tokenizer and joined with the mask id between them, then packed by `BertPacker`
    (truncation may drop masks near the end of a long text).

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer` whose vocabulary has `[MASK]`.
        sequence_length: int. Packed length.
        pad_to: str. `"longest"` (default) or `"fixed"` (see `BertPacker`).
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: a `[batch]` string tensor or a tuple of 1-3 of them.

    Returns:
        dict of int32 `input_word_ids`, `input_mask`, `input_type_ids`.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.serving.servables import MaskedTextPreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "."]
    layer = MaskedTextPreprocessor(BertTokenizer(vocab, lowercase=True), sequence_length=8)
    layer(tf.constant(["The [MASK] sat."]))["input_word_ids"].numpy()  # [[2, 5, 4, 7, 8, 3]]
    ```
    """

    def __init__(self, tokenizer, sequence_length: int = 128, pad_to: str = "longest", **kwargs):
        super().__init__(tokenizer, **kwargs)
        self.packer = BertPacker(sequence_length, pad_to=pad_to, dtype="int32")
        # A tokenizer loaded from a .keras archive gets its vocabulary after this
        # constructor; the special ids are then taken when the layer first runs.
        if self.tokenizer.has_vocabulary:
            self._take_special_ids()

    def _mask_id(self) -> int:
        mask_id = self.tokenizer.mask_token_id
        if mask_id is None:
            raise UserError(f"The tokenizer's vocabulary has no {MASK_TOKEN} token")
        return mask_id

    def _tokenize_with_masks(self, text):
        parts = tf.strings.split(text, sep=MASK_TOKEN)  # [batch, (parts)]
        pieces = self.tokenizer.tokenize(parts.flat_values)  # [parts, (tokens)]
        # A mask after every part but the last of its text.
        position = tf.ragged.range(parts.row_lengths()).flat_values
        last = tf.gather(parts.row_lengths(), parts.value_rowids()) - 1
        mask_length = tf.cast(position < last, tf.int64)
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(mask_length)], tf.constant(self._mask_id(), pieces.dtype)),
            mask_length,
            validate=False,
        )
        joined = tf.concat([pieces, masks], axis=1)
        tokens = tf.RaggedTensor.from_row_splits(joined, parts.row_splits, validate=False)
        return tokens.merge_dims(1, 2)

    def call(self, inputs):
        segments = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
        segments = [tf.convert_to_tensor(segment) for segment in segments]
        for segment in segments:
            if segment.dtype != tf.string or segment.shape.rank != 1:
                raise UserError("MaskedTextPreprocessor takes [batch] string tensors")
        self._take_special_ids()
        return self.packer([self._tokenize_with_masks(segment) for segment in segments])

    def compute_output_spec(self, inputs):
        return self.packer.compute_output_spec(inputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"sequence_length": self.packer.sequence_length, "pad_to": self.packer.pad_to}
        )
        return config


class MaskedLMServable(Servable):
    """A `BertPretrainer` served as a fill-in-the-blank model (see the module docstring).

    Args:
        max_seq_length: int. Longest packed input; longer texts are truncated.
        top_k: int. Fill-ins returned per mask.
        text_fields: the names of the 1-3 text segments.
    """

    task_name: ClassVar[str] = "masked_lm"

    def __init__(self, max_seq_length: int = 128, top_k: int = 5, text_fields=("sentence",)):
        self.max_seq_length = int(max_seq_length)
        self.top_k = int(top_k)
        if self.top_k < 1:
            raise UserError(f"top_k must be >= 1, got {top_k}")
        self.text_fields = _check_text_fields(text_fields)

    def make_preprocessor(self, tokenizer) -> MaskedTextPreprocessor:
        return MaskedTextPreprocessor(tokenizer, sequence_length=self.max_seq_length)

    def description(self, tokenizer) -> dict[str, Any]:
        return {**super().description(tokenizer), "top_k": self.top_k}

    def serving_outputs(self, model, preprocessor):
        text_fields = self.text_fields
        tokenizer = preprocessor.tokenizer
        vocabulary = tokenizer.get_vocabulary()
        top_k = min(self.top_k, len(vocabulary))
        mask_id = tokenizer.mask_token_id
        if mask_id is None:
            raise UserError(f"The tokenizer's vocabulary has no {MASK_TOKEN} token")
        special_ids = [
            token_id
            for token_id in (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
            if token_id is not None
        ]
        with tf.init_scope():
            tokens = tf.constant(vocabulary, tf.string)

        def answer(**texts):
            segments = _segments(text_fields, texts)
            inputs = preprocessor(segments if len(segments) > 1 else segments[0])
            word_ids = inputs[INPUT_WORD_IDS]
            batch = tf.shape(word_ids)[0]
            is_mask = tf.equal(word_ids, mask_id) & tf.equal(inputs[INPUT_MASK], 1)
            mask_count = tf.reduce_sum(tf.cast(is_mask, tf.int32), axis=1)
            most = tf.reduce_max(tf.concat([mask_count, [0]], axis=0))
            where = tf.where(is_mask)
            positions = tf.RaggedTensor.from_value_rowids(
                tf.cast(where[:, 1], tf.int32), where[:, 0], nrows=tf.cast(batch, tf.int64)
            )
            # At least one (padding) position: Keras' take_along_axis fails on an
            # empty batch with no positions.
            gather_positions = positions.to_tensor(
                default_value=0, shape=[batch, tf.maximum(most, 1)]
            )
            outputs = model({**inputs, "masked_lm_positions": gather_positions}, training=False)
            logits = tf.cast(outputs["masked_lm_logits"], tf.float32)[:, :most]
            probabilities = tf.nn.softmax(logits)
            best, best_ids = tf.math.top_k(probabilities, k=top_k)
            valid = tf.range(most)[tf.newaxis, :] < mask_count[:, tf.newaxis]  # [batch, M]
            valid_k = tf.broadcast_to(valid[:, :, tf.newaxis], tf.shape(best_ids))
            fill_in_ids = tf.where(valid_k, best_ids, -1)
            # The best fill-in written into the text.
            filled = tf.tensor_scatter_nd_update(
                word_ids, tf.where(is_mask), tf.boolean_mask(best_ids[:, :, 0], valid)
            )
            keep = tf.equal(inputs[INPUT_MASK], 1)
            for special in special_ids:
                keep &= tf.not_equal(filled, special)
            pieces = tf.ragged.boolean_mask(tf.gather(tokens, filled), keep)
            filled_text = tf.strings.regex_replace(
                tf.strings.reduce_join(pieces, axis=1, separator=" "), " ##", ""
            )
            return {
                "mask_count": mask_count,
                "mask_positions": positions.to_tensor(default_value=-1, shape=[batch, most]),
                "fill_in_ids": fill_in_ids,
                "fill_in_tokens": tf.where(valid_k, tf.gather(tokens, best_ids), ""),
                "fill_in_probabilities": tf.where(valid_k, best, 0.0),
                "filled_text": filled_text,
            }

        return answer


class SentenceEmbeddingServable(EmbeddingServing, Servable):
    """A pretrained `BertSentenceEmbedder` served on raw text: `embedding` of
    `sentence` (see `tasks.sentence_embedding.serving`).

    Args:
        max_seq_length: int. Longest packed input; longer texts are truncated.
        query_prompt: str or None. Prepended to the texts of the `query` signature.
        document_prompt: str or None. Prepended to the texts of the `document` signature.
        pooling, normalize: what the model does (recorded in export.json).

    Example:

    ```python
    from keras_bert_zoo import serving

    serving.export(
        serving.PretrainedSource("all-MiniLM-L6-v2"),
        "exports",
        kind="sentence_embedding",
        model_name="minilm",
    )
    ```
    """

    task_name: ClassVar[str] = "sentence_embedder"

    def __init__(
        self,
        max_seq_length: int = 128,
        *,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        pooling: str | None = None,
        normalize: bool | None = None,
    ):
        self.max_seq_length = int(max_seq_length)
        self.query_prompt = query_prompt or None
        self.document_prompt = document_prompt or None
        self.pooling = pooling
        self.normalize = normalize

    def make_preprocessor(self, tokenizer) -> BertPreprocessor:
        return BertPreprocessor(tokenizer, sequence_length=self.max_seq_length, pad_to="longest")

    def description(self, tokenizer) -> dict[str, Any]:
        return {
            **super().description(tokenizer),
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "pooling": self.pooling,
            "normalize": self.normalize,
        }

    @classmethod
    def from_description(cls, description) -> SentenceEmbeddingServable:
        """The servable an export's `task` description records."""
        return cls(
            description["max_seq_length"],
            query_prompt=description.get("query_prompt"),
            document_prompt=description.get("document_prompt"),
            pooling=description.get("pooling"),
            normalize=description.get("normalize"),
        )


def _sentence_embedder(checkpoint_dir: str, allow_partial: bool):
    """The checkpoint as a `BertSentenceEmbedder`: the pooling and normalisation of its
    sentence-transformers files (`modules.json`), else mean pooling, normalised; and
    those settings."""
    from keras_bert_zoo.checkpoints import from_pretrained
    from keras_bert_zoo.checkpoints.sentence_transformers import (
        SentenceTransformersSettings,
        read_sentence_transformers_settings,
    )
    from keras_bert_zoo.models import BertSentenceEmbedder

    settings = read_sentence_transformers_settings(checkpoint_dir)
    if settings is None:
        settings = SentenceTransformersSettings(pooling="mean", normalize=True)
    model = from_pretrained(
        checkpoint_dir,
        model=BertSentenceEmbedder,
        allow_partial=allow_partial,
        **settings.model_kwargs(),
    )
    return model, settings


def sentence_embedding_length(checkpoint_dir: str, max_seq_length: int | None) -> int:
    """The packed length of a sentence embedding export: `max_seq_length` when given,
    else the sentence-transformers model's own (`sentence_bert_config.json`), else 128."""
    from keras_bert_zoo.checkpoints.sentence_transformers import (
        read_sentence_transformers_settings,
    )

    if max_seq_length is not None:
        return int(max_seq_length)
    settings = read_sentence_transformers_settings(checkpoint_dir)
    if settings is not None and settings.max_seq_length:
        return settings.max_seq_length
    return DEFAULT_MAX_SEQ_LENGTH


def pretrained_servable(
    checkpoint_dir: str,
    kind: str = "encoder",
    *,
    max_seq_length: int | None = None,
    top_k: int = 5,
    text_fields=("sentence",),
    allow_partial: bool = False,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
):
    """`(servable, model, tokenizer)` of a pretrained checkpoint (Google or Hugging Face
    layout, with its `vocab.txt`) as an `"encoder"`, a `"masked_lm"` or a
    `"sentence_embedding"`, as `serving.export` of a `sources.PretrainedSource` serves
    it. `max_seq_length` None: 128 (a sentence embedding model: its own,
    `sentence_embedding_length`)."""
    from keras_bert_zoo.checkpoints import from_pretrained
    from keras_bert_zoo.text import BertTokenizer

    vocab = os.path.join(os.fspath(checkpoint_dir), "vocab.txt")
    if not os.path.isfile(vocab):
        raise FileNotFoundError(f"{checkpoint_dir}: no vocab.txt beside the checkpoint")
    if kind == "sentence_embedding":
        model, settings = _sentence_embedder(checkpoint_dir, allow_partial)
        servable = SentenceEmbeddingServable(
            sentence_embedding_length(checkpoint_dir, max_seq_length),
            query_prompt=query_prompt,
            document_prompt=document_prompt,
            pooling=settings.pooling,
            normalize=settings.normalize,
        )
        return servable, model, BertTokenizer(vocab)
    if max_seq_length is None:
        max_seq_length = DEFAULT_MAX_SEQ_LENGTH
    if kind == "encoder":
        servable = EncoderServable(max_seq_length, text_fields=text_fields)
        model = from_pretrained(checkpoint_dir, allow_partial=allow_partial)
    elif kind == "masked_lm":
        servable = MaskedLMServable(max_seq_length, top_k=top_k, text_fields=text_fields)
        model = from_pretrained(checkpoint_dir, model="pretrainer", allow_partial=allow_partial)
    else:
        raise UserError(
            f"kind must be 'encoder', 'masked_lm' or 'sentence_embedding', got {kind!r}"
        )
    return servable, model, BertTokenizer(vocab)
