"""`SquadPreprocessor`: question and context strings -> overlapping BERT windows, in TF ops.

The same layer builds the training features, the evaluation features and the inputs
of the exported model, so there is one definition of the windows and of the offsets
that map a predicted span back to the original text.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert_zoo.inputs import INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS
from keras_bert_zoo.tasks._shared import strided_windows
from keras_bert_zoo.text.offsets import char_offsets
from keras_bert_zoo.text.preprocessing_layer import TokenizingPreprocessor
from keras_bert_zoo.utils.errors import UserError

# Keys of the per-window metadata that decoding needs.
EXAMPLE_INDEX = "example_index"
TOKEN_CHAR_START = "token_char_start"
TOKEN_CHAR_END = "token_char_end"
TOKEN_IS_MAX_CONTEXT = "token_is_max_context"
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SquadPreprocessor(TokenizingPreprocessor):
    """Splits (question, context) pairs into windows `[CLS] question [SEP] context [SEP]`.

    The question keeps its first `max_query_length` word pieces. The context's word
    pieces are cut into windows of `max_seq_length - len(question) - 3` tokens that
    start every `doc_stride` tokens (google-research/bert's `doc_spans`), so every
    context token lies in at least one window. Of the windows holding a token, the one
    where it has the most context (`min(left, right) + 0.01 * window length`, the
    first window on ties) is its "max context" window: only there may an answer
    start at it.

    Every context token carries its character offsets into the ORIGINAL context
    (Python string indices, from `BertTokenizer.tokenize_with_offsets`' byte
    offsets), so `context[token_char_start[i]:token_char_end[j]]` is the exact text
    of the span `i..j`, whitespace, accents, CJK and emoji included. For uncased
    tokenizers, which drop combining marks, a token's end also covers the combining
    marks (Unicode category Mn) right after it (`BertTokenizer.tokenize_with_offsets`
    gives them to the token before), so "é" written as "e" + U+0301 or "❤️" (with
    U+FE0F) comes back whole.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        max_seq_length: int. Window length, special tokens included (BERT: 384).
        doc_stride: int. Tokens between the starts of consecutive windows (128).
        max_query_length: int. Question word pieces kept (64).
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: dict with string tensors `question` and `context` (`[batch]`), and
            optionally int tensors `answer_start` and `answer_end` (`[batch]`,
            character span `[start, end)` of the answer, -1 for none); or a tuple
            `(question, context)`.

    Returns:
        dict of tensors over the windows of the whole batch, in example order:
        `input_word_ids`, `input_mask`, `input_type_ids` (int32 `[windows,
        max_seq_length]`); `example_index` (int32 `[windows]`, the row of the input
        batch); `token_char_start`, `token_char_end` (int32 `[windows,
        max_seq_length]`, -1 outside the context); `token_is_max_context` (int32, 1
        where the window is the token's max-context window); with answers also
        `start_positions`, `end_positions` (int32 `[windows]`: the answer's token
        positions in the window, 0 = `[CLS]` when the window does not hold the whole
        answer or there is none).

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks.question_answering import SquadPreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "who", "won", "?", "ada", "did", "."]
    preprocessor = SquadPreprocessor(
        BertTokenizer(vocab, lowercase=True), max_seq_length=16, max_query_length=8
    )
    windows = preprocessor({"question": tf.constant(["Who won?"]),
                            "context": tf.constant(["Ada did."])})
    windows["input_word_ids"].numpy()[0, :9]  # [2, 4, 5, 6, 3, 7, 8, 9, 3]
    windows["token_char_start"].numpy()[0, :9]  # [-1, -1, -1, -1, -1, 0, 4, 7, -1]
    ```
    """

    def __init__(
        self,
        tokenizer,
        max_seq_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        **kwargs,
    ):
        super().__init__(tokenizer, **kwargs)
        max_seq_length, doc_stride, max_query_length = (
            int(max_seq_length),
            int(doc_stride),
            int(max_query_length),
        )
        if max_query_length < 1:
            raise UserError(f"max_query_length must be >= 1, got {max_query_length}")
        if doc_stride < 1:
            raise UserError(f"doc_stride must be >= 1, got {doc_stride}")
        if max_seq_length - max_query_length - 3 < 1:
            raise UserError(
                f"max_seq_length={max_seq_length} leaves no room for context after a "
                f"question of max_query_length={max_query_length} tokens and 3 special "
                "tokens"
            )
        # No packer (`call` scatters the ids into the windows itself); reading the
        # special ids here only checks the vocabulary early.
        if self.tokenizer.has_vocabulary:  # else it comes with load_assets, before the first call
            self.tokenizer.packing_token_ids()
        self.max_seq_length = max_seq_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length

    # === Layers ===

    def call(self, inputs):
        if isinstance(inputs, tuple | list):
            inputs = dict(zip(("question", "context"), inputs, strict=True))
        question = tf.convert_to_tensor(inputs["question"])
        context = tf.convert_to_tensor(inputs["context"])
        for name, tensor in (("question", question), ("context", context)):
            if tensor.dtype != tf.string or tensor.shape.rank != 1:
                raise UserError(f"SquadPreprocessor: `{name}` must be a [batch] string tensor")
        with_answers = "answer_start" in inputs
        seq_length = self.max_seq_length
        cls_id, sep_id, pad_id = self.tokenizer.packing_token_ids()

        # === Tokens ===
        # One tokenizer call for questions and contexts: half the graph, and one pass.
        num_questions = tf.shape(question)[0]
        ids, byte_starts, byte_ends = self.tokenizer.tokenize_with_offsets(
            tf.concat([question, context], axis=0)
        )
        question_ids = ids[:num_questions, : self.max_query_length]
        context_ids = ids[num_questions:]
        byte_starts = byte_starts[num_questions:]
        byte_ends = byte_ends[num_questions:]
        token_char_start, token_char_end = (
            offsets.flat_values for offsets in char_offsets(context, byte_starts, byte_ends)
        )
        context_rows = context_ids.value_rowids()
        context_row_start = context_ids.row_starts()
        num_examples = tf.shape(context, out_type=tf.int64)[0]
        num_tokens = tf.size(context_rows, out_type=tf.int64)

        # === Windows (google-research/bert's doc_spans) ===
        query_length = question_ids.row_lengths()
        window_example, window_start, window_length = strided_windows(
            context_ids.row_lengths(), seq_length - query_length - 3, self.doc_stride
        )
        num_windows_total = tf.size(window_example, out_type=tf.int64)
        # One entry per (window, context token in it).
        in_window = tf.ragged.range(window_length)
        entry_window = in_window.value_rowids()
        entry_offset = in_window.flat_values
        entry_token = (
            tf.gather(tf.gather(context_row_start, window_example) + window_start, entry_window)
            + entry_offset
        )

        # === Packing: [CLS] question [SEP] context-window [SEP] [PAD]... ===
        # The windows are sized to fit, so no trimming: ids go straight to their slots
        # (a scatter traces and runs far lighter than a general packer).
        window_query_length = tf.gather(query_length, window_example)
        entry_position = tf.gather(window_query_length, entry_window) + 2 + entry_offset
        window_questions = tf.gather(question_ids, window_example)
        question_window = window_questions.value_rowids()
        question_position = 1 + tf.ragged.range(window_questions.row_lengths()).flat_values
        windows = tf.range(num_windows_total)
        used_length = window_query_length + window_length + 3
        slot_window = tf.concat([question_window, entry_window, windows, windows, windows], axis=0)
        slot_position = tf.concat(
            [
                question_position,
                entry_position,
                tf.zeros_like(windows),
                window_query_length + 1,
                used_length - 1,
            ],
            axis=0,
        )
        slot_id = tf.concat(
            [
                tf.cast(window_questions.flat_values, tf.int64),
                tf.cast(tf.gather(context_ids.flat_values, entry_token), tf.int64),
                tf.fill(tf.shape(windows), tf.constant(cls_id, tf.int64)),
                tf.fill(tf.shape(windows), tf.constant(sep_id, tf.int64)),
                tf.fill(tf.shape(windows), tf.constant(sep_id, tf.int64)),
            ],
            axis=0,
        )
        dense_shape = tf.stack([num_windows_total, tf.constant(seq_length, tf.int64)])
        word_ids = tf.tensor_scatter_nd_update(
            tf.fill(dense_shape, tf.constant(pad_id, tf.int64)),
            tf.stack([slot_window, slot_position], axis=1),
            slot_id,
        )
        column = tf.range(seq_length, dtype=tf.int64)[tf.newaxis, :]
        input_mask = column < used_length[:, tf.newaxis]
        type_ids = input_mask & (column >= window_query_length[:, tf.newaxis] + 2)
        scatter_at = tf.stack([entry_window, entry_position], axis=1)

        def to_dense(values, fill):
            base = tf.fill(dense_shape, tf.constant(fill, values.dtype))
            return tf.cast(tf.tensor_scatter_nd_update(base, scatter_at, values), tf.int32)

        # === Max context ===
        entry_window_length = tf.gather(window_length, entry_window)
        # 100 * (min(left, right) + 0.01 * length), exact in integers.
        score = 100 * tf.minimum(entry_offset, entry_window_length - 1 - entry_offset) + (
            entry_window_length
        )
        best_score = tf.math.unsorted_segment_max(score, entry_token, num_tokens)
        first_best_window = tf.math.unsorted_segment_min(
            tf.where(
                tf.equal(score, tf.gather(best_score, entry_token)),
                entry_window,
                tf.fill(tf.shape(entry_window), num_windows_total),
            ),
            entry_token,
            num_tokens,
        )
        is_max_context = tf.cast(
            tf.equal(entry_window, tf.gather(first_best_window, entry_token)), tf.int64
        )

        outputs = {
            INPUT_WORD_IDS: tf.cast(word_ids, tf.int32),
            INPUT_MASK: tf.cast(input_mask, tf.int32),
            INPUT_TYPE_IDS: tf.cast(type_ids, tf.int32),
            EXAMPLE_INDEX: tf.cast(window_example, tf.int32),
            TOKEN_CHAR_START: to_dense(tf.gather(token_char_start, entry_token), -1),
            TOKEN_CHAR_END: to_dense(tf.gather(token_char_end, entry_token), -1),
            TOKEN_IS_MAX_CONTEXT: to_dense(is_max_context, 0),
        }

        # === Training positions ===
        if with_answers:
            answer_start = tf.cast(tf.convert_to_tensor(inputs["answer_start"]), tf.int64)
            answer_end = tf.cast(tf.convert_to_tensor(inputs["answer_end"]), tf.int64)
            token_answer_start = tf.gather(answer_start, context_rows)
            overlaps = (
                (token_answer_start >= 0)
                & (token_char_start < tf.gather(answer_end, context_rows))
                & (token_char_end > token_answer_start)
            )
            token_in_row = tf.range(num_tokens) - tf.gather(context_row_start, context_rows)
            big = tf.fill(tf.shape(token_in_row), tf.int64.max)
            first_token = tf.math.unsorted_segment_min(
                tf.where(overlaps, token_in_row, big), context_rows, num_examples
            )
            last_token = tf.math.unsorted_segment_max(
                tf.where(overlaps, token_in_row, -tf.ones_like(token_in_row)),
                context_rows,
                num_examples,
            )
            first_token = tf.gather(first_token, window_example)
            last_token = tf.gather(last_token, window_example)
            inside = (
                (last_token >= 0)
                & (first_token >= window_start)
                & (last_token < window_start + window_length)
            )
            shift = window_query_length + 2 - window_start
            zeros = tf.zeros_like(first_token)
            outputs[START_POSITIONS] = tf.cast(
                tf.where(inside, first_token + shift, zeros), tf.int32
            )
            outputs[END_POSITIONS] = tf.cast(tf.where(inside, last_token + shift, zeros), tf.int32)
        return outputs

    def compute_output_spec(self, inputs):
        length = self.max_seq_length
        matrix = keras.KerasTensor([None, length], dtype="int32")
        vector = keras.KerasTensor([None], dtype="int32")
        spec = {
            INPUT_WORD_IDS: matrix,
            INPUT_MASK: matrix,
            INPUT_TYPE_IDS: matrix,
            EXAMPLE_INDEX: vector,
            TOKEN_CHAR_START: matrix,
            TOKEN_CHAR_END: matrix,
            TOKEN_IS_MAX_CONTEXT: matrix,
        }
        if isinstance(inputs, dict) and "answer_start" in inputs:
            spec[START_POSITIONS] = vector
            spec[END_POSITIONS] = vector
        return spec

    # === Config ===

    def get_config(self):
        return {
            **super().get_config(),
            "max_seq_length": self.max_seq_length,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
        }
