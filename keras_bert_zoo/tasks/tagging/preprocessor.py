"""Words -> windows of WordPieces for tagging: `split_words` and `TaggingPreprocessor`.

Words come as given by the data (one per line in the column files), or as
`split_words` cuts raw text for the exported model. Each word is split into
WordPieces; only its first piece is labelled and predicted, and a word that
normalizes to nothing (a lone control or format character, a bare combining accent
on an uncased vocabulary) is given one `[UNK]` piece so it still gets a prediction.

Long sentences are split, not truncated: the pieces of a sentence of P pieces are
cut into windows of L = `max_seq_length - 2` pieces (plus `[CLS]` and `[SEP]`) whose
starts are `window_stride` pieces apart, the last one aligned to the sentence end so
that every window holds L pieces. A word is labelled in training and read at
prediction in exactly one window: the one where its first piece has the most context,
`min(pieces to its left, pieces to its right)` in the window, as google-research/
bert's SQuAD `_check_is_max_context` chooses (its `0.01 * length` term is the same
for windows of equal length; ties go to the earlier window). With equal windows that
is the window whose centre is nearest, so each window owns a contiguous range of
piece positions, computed in closed form inside `TaggingPreprocessor`.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert_zoo.text.offsets import valid_utf8
from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.text.preprocessing_layer import TokenizingPreprocessor
from keras_bert_zoo.utils.errors import UserError


def split_words(sentences):
    """Raw sentences -> words with CHARACTER offsets, for tagging text not yet split.

    Words are separated at whitespace, and each punctuation character and CJK
    ideograph is a word of its own (CoNLL-2003's tokenization keeps `Germany` and
    `.` apart), with BERT's character classes (`text.unicode_tables`, Python's
    `unicodedata`). A run made only of characters BERT's cleaning drops (control and
    format characters, NUL, U+FFFD) is no word: it holds no text to tag. Invalid
    UTF-8 is first replaced by U+FFFD (`valid_utf8`), so it never stops a request.

    Args:
        sentences: string tensor `[batch]`.

    Returns:
        `(words, starts, ends)`: ragged `[batch, (words)]` strings (valid UTF-8) and
        int64 character offsets: `valid_utf8(sentence)` decoded, `text[start:end]`
        is the word. For valid UTF-8 these are Python string indices into the
        sentence itself.
    """
    from keras_bert_zoo.text import core_wordpiece
    from keras_bert_zoo.text.unicode_tables import unicode_tables

    text = valid_utf8(tf.convert_to_tensor(sentences))
    # Core TF ops only (no tensorflow-text), so the exported tagging model loads
    # wherever TensorFlow does.
    words, starts, ends = core_wordpiece.split_words(text)
    keep = ~tf.strings.regex_full_match(
        words.flat_values, unicode_tables().classes["control"] + "+"
    )
    keep = words.with_flat_values(keep)
    return tuple(tf.ragged.boolean_mask(value, keep) for value in (words, starts, ends))


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TaggingPreprocessor(TokenizingPreprocessor):
    """Words of sentences -> windows of WordPieces, with the word read at each position.

    Every word is tokenized on its own (so piece boundaries never cross words); a word
    with no piece gets `[UNK]`. Sentences longer than the window are split into
    overlapping windows (see the module docstring for the rule), so one input row may
    give several output rows.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int. Packed length, `[CLS]` and `[SEP]` included (>= 3).
        window_stride: int. Pieces between the starts of consecutive windows of a long
            sentence; values above the window's `sequence_length - 2` pieces mean
            adjacent windows without overlap.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        words: string `tf.RaggedTensor` `[batch, (words)]`.

    Returns:
        dict, one row per window: `input_word_ids`, `input_mask`, `input_type_ids`
        (int32 `[windows, sequence_length]`), `sentence_index` (int32 `[windows]`: the
        input row of the window) and `word_index` (int32 `[windows,
        sequence_length]`: the index, in its sentence, of the word whose prediction
        is read at that position, i.e. the word's first piece in its chosen window;
        -1 elsewhere). Each word appears exactly once in `word_index`.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks.tagging import TaggingPreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "##s"]
    layer = TaggingPreprocessor(BertTokenizer(vocab, lowercase=True), sequence_length=8)
    out = layer(tf.ragged.constant([["EU", "rejects", "Germans"]]))
    out["input_word_ids"].numpy()  # [[2, 5, 6, 7, 8, 3, 0, 0]]
    out["word_index"].numpy()  # [[-1, 0, 1, 2, -1, -1, -1, -1]]
    ```
    """

    def __init__(self, tokenizer, sequence_length: int = 128, window_stride: int = 64, **kwargs):
        super().__init__(tokenizer, **kwargs)
        if int(sequence_length) < 3:
            raise UserError(f"sequence_length must be >= 3 to hold a piece, got {sequence_length}")
        if int(window_stride) < 1:
            raise UserError(f"window_stride must be >= 1, got {window_stride}")
        self.sequence_length = int(sequence_length)
        self.window_stride = int(window_stride)
        self.packer = BertPacker(self.sequence_length, dtype="int32")
        # A tokenizer loaded from a .keras archive (or a config) gets its vocabulary
        # after this constructor; the special ids are then taken when the layer runs.
        if self.tokenizer.has_vocabulary:
            self._take_special_ids()

    @property
    def window_length(self) -> int:
        """Pieces per window (`sequence_length` minus `[CLS]` and `[SEP]`)."""
        return self.sequence_length - 2

    # === Layers ===

    def _word_pieces(self, flat_words):
        """`[words, (pieces)]` int32; an empty word becomes one `[UNK]`."""
        pieces = self.tokenizer.tokenize(flat_words)
        empty = tf.equal(pieces.row_lengths(), 0)
        # BertTokenizer itself refuses a vocabulary without its unknown token.
        unknown = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(empty, tf.int32))], self.tokenizer.unknown_token_id),
            tf.cast(empty, tf.int64),
        )
        return tf.concat([pieces, tf.cast(unknown, pieces.dtype)], axis=1)

    def call(self, words):
        if not isinstance(words, tf.RaggedTensor):
            words = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(words))
        self._take_special_ids()
        length = self.window_length
        stride = min(self.window_stride, length)

        # Pieces of every word, and where each word's first piece sits.
        pieces = self._word_pieces(words.flat_values)  # [words, (pieces)]
        piece_counts = pieces.row_lengths()  # int64, >= 1
        word_sentence = words.value_rowids()  # [words]
        word_in_sentence = tf.cast(
            tf.range(tf.size(word_sentence, out_type=tf.int64))
            - tf.gather(words.row_starts(), word_sentence),
            tf.int32,
        )
        first_piece_global = tf.cumsum(piece_counts, exclusive=True)  # over the batch
        sentence_pieces = tf.RaggedTensor.from_row_lengths(
            pieces.flat_values, tf.reduce_sum(words.with_flat_values(piece_counts), axis=1)
        )
        total = sentence_pieces.row_lengths()  # P per sentence
        sentence_first_piece = sentence_pieces.row_starts()
        first_piece = first_piece_global - tf.gather(sentence_first_piece, word_sentence)

        # Windows: n = 1 when P <= L, else ceil((P - L) / S) + 1; start_k = min(k S, P - L).
        overflow = tf.maximum(total - length, 0)
        num_windows = 1 + (overflow + stride - 1) // stride
        window_k = tf.ragged.range(num_windows)  # [sentences, (windows)]
        window_sentence = window_k.value_rowids()
        window_start = tf.minimum(
            window_k.flat_values * stride, tf.gather(overflow, window_sentence)
        )
        window_size = tf.gather(tf.minimum(total, length), window_sentence)
        piece_index = tf.ragged.range(
            tf.gather(sentence_first_piece, window_sentence) + window_start,
            tf.gather(sentence_first_piece, window_sentence) + window_start + window_size,
        )
        window_pieces = tf.gather(sentence_pieces.flat_values, piece_index)
        packed = self.packer(window_pieces)

        # The window that reads each word: window k+1 owns first pieces p with
        # 2p > start_k + start_{k+1} + L - 1 (nearest window centre, ties earlier).
        starts = window_k.with_flat_values(window_start)
        thresholds = starts[:, :-1] + starts[:, 1:] + (length - 1)  # [sentences, (n-1)]
        word_thresholds = tf.gather(thresholds, word_sentence)  # [words, (n-1)]
        later = tf.cast(2 * first_piece[:, tf.newaxis] > word_thresholds, tf.int64)
        word_window_k = tf.reduce_sum(later, axis=1)
        word_window = tf.gather(window_k.row_starts(), word_sentence) + word_window_k
        position = first_piece - tf.gather(window_start, word_window) + 1  # after [CLS]
        word_index = tf.tensor_scatter_nd_update(
            tf.fill([tf.size(window_sentence), self.sequence_length], -1),
            tf.stack([word_window, position], axis=1),
            word_in_sentence,
        )
        return {
            **packed,
            "sentence_index": tf.cast(window_sentence, tf.int32),
            "word_index": word_index,
        }

    def compute_output_spec(self, words):
        spec = keras.KerasTensor([None, self.sequence_length], dtype="int32")
        return {
            "input_word_ids": spec,
            "input_mask": spec,
            "input_type_ids": spec,
            "sentence_index": keras.KerasTensor([None], dtype="int32"),
            "word_index": spec,
        }

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "window_stride": self.window_stride,
            }
        )
        return config
