"""Documents longer than the model: overlapping windows and their aggregation.

`SentenceWindowPreprocessor` cuts each document into windows of WordPieces with
google-research/bert's SQuAD `doc_spans` rule, the one `SquadPreprocessor` applies to
a context (`tasks._shared.strided_windows`): with `L` pieces of room per window and a
stride `S = min(window_stride, L)`, a document of `P` pieces gives one window when `P
<= L`, else `ceil((P - L) / S) + 1` windows starting at `0, S, 2S, ...`; the last one
ends at the document's end and may be shorter. A single text packs as `[CLS] window
[SEP]` (`L = max_seq_length - 2`); a pair keeps its first text whole in every window,
as SQuAD keeps the question (its first `(max_seq_length - 3) // 2` pieces), and windows
the second: `[CLS] first [SEP] window [SEP]` (`L = max_seq_length - 3 - len(first)`).

Each window is trained with its document's label. Answers are read back per document
by `aggregate_windows` (numpy, `postprocess`) and `aggregate_windows_tf` (TF ops, the
exported model): the mean or the per-class maximum of the windows' probabilities
(`window_aggregation`), the mean of a regression's scores.
"""

from __future__ import annotations

from typing import Literal

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.tasks._shared import strided_windows
from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.text.preprocessing_layer import TokenizingPreprocessor
from keras_bert_zoo.utils.errors import UserError

# Keys of the per-window metadata.
ROW_INDEX = "row_index"  # the window's row in the input batch
WINDOW_START = "window_start"  # the window's first piece in its (windowed) text
WINDOW_LENGTH = "window_length"  # pieces of the (windowed) text in the window

WINDOW_AGGREGATIONS = ("mean", "max")


def first_text_max_length(sequence_length: int) -> int:
    """Pieces a pair's first text keeps: at most half of the room, so that every window
    holds some of the second text."""
    return (int(sequence_length) - 3) // 2


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SentenceWindowPreprocessor(TokenizingPreprocessor):
    """One or two texts -> overlapping windows of the last text (see the module docstring).

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int. Packed length, special tokens included.
        window_stride: int. Pieces between the starts of consecutive windows (capped at
            the window's room: no overlap, no gap).
        num_texts: 1 (a text) or 2 (a pair: the first kept, the second windowed).
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: a `[batch]` string tensor, or a tuple of two for a pair.

    Returns:
        dict, one row per window in input order: `input_word_ids`, `input_mask`,
        `input_type_ids` (int32 `[windows, sequence_length]`), `row_index`,
        `window_start` and `window_length` (int32 `[windows]`).

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.tasks.sentence.windows import SentenceWindowPreprocessor
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "c", "d", "e"]
    layer = SentenceWindowPreprocessor(
        BertTokenizer(vocab), sequence_length=5, window_stride=2
    )
    out = layer(tf.constant(["a b c d e"]))
    out["input_word_ids"].numpy()  # [[2, 4, 5, 6, 3], [2, 6, 7, 8, 3]]
    out["window_start"].numpy()  # [0, 2]
    ```
    """

    def __init__(
        self,
        tokenizer,
        sequence_length: int = 128,
        window_stride: int = 64,
        num_texts: Literal[1, 2] = 1,
        **kwargs,
    ):
        super().__init__(tokenizer, **kwargs)
        self.sequence_length = int(sequence_length)
        self.window_stride = int(window_stride)
        self.num_texts = int(num_texts)
        if self.num_texts not in (1, 2):
            raise UserError(f"num_texts must be 1 or 2, got {self.num_texts}")
        minimum = 3 if self.num_texts == 1 else 5
        if self.sequence_length < minimum:
            raise UserError(
                f"sequence_length must be >= {minimum} to hold a window, got {self.sequence_length}"
            )
        if self.window_stride < 1:
            raise UserError(f"window_stride must be >= 1, got {self.window_stride}")
        # The windows are sized to fit, so the packer never trims.
        self.packer = BertPacker(self.sequence_length, dtype="int32")
        if self.tokenizer.has_vocabulary:  # else it comes with load_assets
            self._take_special_ids()

    def call(self, inputs):
        self._take_special_ids()
        if self.num_texts == 2:
            first, document = (tf.convert_to_tensor(text) for text in inputs)
            first_ids = self.tokenizer.tokenize(first)[
                :, : first_text_max_length(self.sequence_length)
            ]
            room = self.sequence_length - 3 - first_ids.row_lengths()
        else:
            document = tf.convert_to_tensor(inputs)
            first_ids = None
            room = tf.fill(tf.shape(document, out_type=tf.int64), self.sequence_length - 2)
            room = tf.cast(room, tf.int64)
        pieces = self.tokenizer.tokenize(document)
        row_index, window_start, window_length = strided_windows(
            pieces.row_lengths(), room, self.window_stride
        )
        first_piece = tf.gather(pieces.row_starts(), row_index) + window_start
        window_pieces = tf.gather(
            pieces.flat_values, tf.ragged.range(first_piece, first_piece + window_length)
        )
        if first_ids is None:
            packed = self.packer(window_pieces)
        else:
            packed = self.packer((tf.gather(first_ids, row_index), window_pieces))
        return {
            **packed,
            ROW_INDEX: tf.cast(row_index, tf.int32),
            WINDOW_START: tf.cast(window_start, tf.int32),
            WINDOW_LENGTH: tf.cast(window_length, tf.int32),
        }

    def compute_output_spec(self, inputs):
        matrix = keras.KerasTensor([None, self.sequence_length], dtype="int32")
        vector = keras.KerasTensor([None], dtype="int32")
        return {
            "input_word_ids": matrix,
            "input_mask": matrix,
            "input_type_ids": matrix,
            ROW_INDEX: vector,
            WINDOW_START: vector,
            WINDOW_LENGTH: vector,
        }

    def get_config(self):
        return {
            **super().get_config(),
            "sequence_length": self.sequence_length,
            "window_stride": self.window_stride,
            "num_texts": self.num_texts,
        }


def aggregate_windows(
    values: np.ndarray, example_index: np.ndarray, num_examples: int, aggregation: str
) -> np.ndarray:
    """Per-window rows `[windows, k]` -> per-example rows `[num_examples, k]`: the mean
    or the maximum over each example's windows (every example needs one)."""
    values = np.asarray(values, np.float64)
    example_index = np.asarray(example_index).reshape(-1)
    if values.shape[0] != example_index.shape[0]:
        raise ValueError(f"{values.shape[0]} model outputs for {example_index.shape[0]} features")
    counts = np.bincount(example_index, minlength=num_examples)
    if counts.shape[0] != num_examples or (num_examples and counts.min() == 0):
        missing = int(np.argmin(counts)) if counts.shape[0] == num_examples else num_examples
        raise ValueError(f"No model output for example {missing} of {num_examples}")
    if aggregation == "mean":
        totals = np.zeros((num_examples, values.shape[1]), np.float64)
        np.add.at(totals, example_index, values)
        return totals / counts[:, np.newaxis]
    if aggregation == "max":
        result = np.full((num_examples, values.shape[1]), -np.inf)
        np.maximum.at(result, example_index, values)
        return result
    raise UserError(f"window_aggregation must be one of {WINDOW_AGGREGATIONS}, got {aggregation!r}")


def aggregate_windows_tf(values, row_index, num_rows, aggregation: str):
    """`aggregate_windows` in TF ops (the exported model): `values` `[windows, k]`."""
    if aggregation == "mean":
        return tf.math.unsorted_segment_mean(values, row_index, num_rows)
    if aggregation == "max":
        return tf.math.unsorted_segment_max(values, row_index, num_rows)
    raise UserError(f"window_aggregation must be one of {WINDOW_AGGREGATIONS}, got {aggregation!r}")
