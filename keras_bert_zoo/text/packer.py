"""Packing of one to three token segments into BERT's fixed-layout model inputs."""

from __future__ import annotations

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.inputs import ENCODER_INPUT_NAMES, INPUT_MASK, INPUT_TYPE_IDS, INPUT_WORD_IDS
from keras_bert_zoo.text.preprocessing_layer import PreprocessingLayer
from keras_bert_zoo.utils.errors import UserError

TRUNCATION_MODES = ("longest_first", "round_robin", "waterfall")
PAD_MODES = ("fixed", "longest")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPacker(PreprocessingLayer):
    """Packs segments as ``[CLS] A [SEP] B [SEP] (C [SEP])`` with masks and type ids.

    Args:
        sequence_length: int. Maximum packed length, special tokens included.
        start_value: int. Id of ``[CLS]``.
        end_value: int. Id of ``[SEP]``.
        pad_value: int. Id of ``[PAD]``.
        truncate: str. ``"longest_first"`` (BERT's ``_truncate_seq_pair``: drop the
            last token of the longest segment, the later one on ties) or
            ``"round_robin"`` (``tf_text.RoundRobinTrimmer``: every segment keeps
            tokens in turn, first segment first) or ``"waterfall"``
            (``tf_text.WaterfallTrimmer``: the first segment keeps all it can).
            The first two keep the same tokens (both end at a per-segment cap with
            one token more for the earliest segments above it), so both run
            ``RoundRobinTrimmer``.
        pad_to: str. ``"fixed"`` pads to `sequence_length`; ``"longest"`` pads to
            the longest packed sequence of the batch.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: an int ``tf.RaggedTensor`` ``[batch, (tokens)]`` (a
            ``[batch, (words), (pieces)]`` one is flattened), or a tuple/list of 1-3
            of them.

    Returns:
        dict of int32 ``[batch, length]`` tensors: ``input_word_ids``,
        ``input_mask`` (1 for real tokens) and ``input_type_ids`` (0 for
        ``[CLS] A [SEP]``, 1 for ``B [SEP]``, 2 for ``C [SEP]``; 0 on padding).

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.text import BertPacker

    packer = BertPacker(8, start_value=101, end_value=102, pad_value=0)
    a = tf.ragged.constant([[1, 2, 3, 4, 5]])
    b = tf.ragged.constant([[6, 7, 8]])
    packer((a, b))["input_word_ids"].numpy()  # [[101, 1, 2, 3, 102, 6, 7, 102]]
    ```
    """

    def __init__(
        self,
        sequence_length: int,
        start_value: int = 101,
        end_value: int = 102,
        pad_value: int = 0,
        truncate: str = "longest_first",
        pad_to: str = "fixed",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if truncate not in TRUNCATION_MODES:
            raise UserError(f"truncate must be one of {TRUNCATION_MODES}, got {truncate!r}")
        if pad_to not in PAD_MODES:
            raise UserError(f"pad_to must be one of {PAD_MODES}, got {pad_to!r}")
        if int(sequence_length) < 2:
            raise UserError(f"sequence_length must be >= 2, got {sequence_length}")
        self.sequence_length = int(sequence_length)
        self.start_value = int(start_value)
        self.end_value = int(end_value)
        self.pad_value = int(pad_value)
        self.truncate = truncate
        self.pad_to = pad_to

    # === Layers ===

    @staticmethod
    def _as_segment(x):
        if not isinstance(x, tf.RaggedTensor):
            x = tf.convert_to_tensor(x)
            if x.shape.rank == 1:  # one unbatched sequence
                x = x[tf.newaxis]
            x = tf.RaggedTensor.from_tensor(x)
        if x.ragged_rank > 1:
            x = x.merge_dims(-2, -1)
        return tf.cast(x, tf.int32)

    def _trim(self, segments, sequence_length):
        budget = sequence_length - len(segments) - 1
        if isinstance(budget, int) and budget < 0:
            raise UserError(
                f"sequence_length {sequence_length} cannot hold the special tokens "
                f"of {len(segments)} segments"
            )
        if self.truncate == "waterfall":
            return tf_text.WaterfallTrimmer(max_seq_length=budget).trim(segments)
        # "longest_first" too: tests/text/test_packer.py checks that it keeps the
        # lengths of google-research/bert's pop loop. Core ops, not
        # tf_text.RoundRobinTrimmer: the same lengths (tested) without the
        # TFText>RoundRobinTrim op, so an exported model needs one op library less
        # from the server's tensorflow-text.
        lengths = tf.stack([segment.row_lengths() for segment in segments], axis=1)
        keep = round_robin_lengths(lengths, budget)
        return [_take_prefix(segment, keep[:, i]) for i, segment in enumerate(segments)]

    def call(self, inputs, sequence_length=None):
        """Packs `inputs`; `sequence_length` (an int or an int scalar tensor) overrides
        the layer's for this call."""
        if isinstance(inputs, dict):
            raise TypeError("BertPacker takes a ragged tensor or a tuple/list of them")
        segments = list(inputs) if isinstance(inputs, tuple | list) else [inputs]
        if not 1 <= len(segments) <= 3:
            raise UserError(f"BertPacker packs 1 to 3 segments, got {len(segments)}")
        if sequence_length is None:
            sequence_length = self.sequence_length
        elif not isinstance(sequence_length, int):
            sequence_length = tf.cast(sequence_length, tf.int64)
            check = tf.debugging.assert_greater_equal(
                sequence_length,
                tf.constant(len(segments) + 1, tf.int64),
                message=f"sequence_length cannot hold the special tokens of {len(segments)} "
                "segments",
            )
            with tf.control_dependencies([check]):
                sequence_length = tf.identity(sequence_length)
        segments = [self._as_segment(s) for s in segments]
        segments = self._trim(segments, sequence_length)
        word_ids, type_ids = tf_text.combine_segments(
            segments, start_of_sequence_id=self.start_value, end_of_segment_id=self.end_value
        )
        if self.pad_to == "fixed":
            length = sequence_length
        else:
            # At least [CLS] and one [SEP] per segment, so an empty batch still has
            # the shape of one (models slice position 0).
            length = tf.reduce_max(tf.concat([word_ids.row_lengths(), [len(segments) + 1]], axis=0))
        word_ids, mask = tf_text.pad_model_inputs(word_ids, length, pad_value=self.pad_value)
        type_ids, _ = tf_text.pad_model_inputs(type_ids, length, pad_value=0)
        return {
            INPUT_WORD_IDS: tf.cast(word_ids, tf.int32),
            INPUT_MASK: tf.cast(mask, tf.int32),
            INPUT_TYPE_IDS: tf.cast(type_ids, tf.int32),
        }

    def compute_output_spec(self, inputs):
        length = self.sequence_length if self.pad_to == "fixed" else None
        # One KerasTensor per output: a functional model saved to .keras tells its
        # outputs apart by tensor.
        return {
            name: keras.KerasTensor([None, length], dtype="int32") for name in ENCODER_INPUT_NAMES
        }

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "start_value": self.start_value,
                "end_value": self.end_value,
                "pad_value": self.pad_value,
                "truncate": self.truncate,
                "pad_to": self.pad_to,
            }
        )
        return config


def round_robin_lengths(lengths, budget):
    """The lengths round-robin trimming keeps: `[batch, k]` from `[batch, k]` lengths.

    Round robin hands out `budget` tokens one per segment in turn (segment order),
    skipping exhausted segments. After `t` full rounds segment i holds `min(l_i, t)`;
    `t` is the most rounds that fit (`sum min(l_i, t) <= budget`), and the tokens left
    go one each to the first segments still longer than `t`. Between consecutive
    sorted lengths that sum is linear in `t`, so `t` is the best of `k` closed-form
    candidates.
    """
    lengths = tf.cast(lengths, tf.int64)
    budget = tf.cast(budget, tf.int64)
    k = lengths.shape[1]
    ascending = tf.sort(lengths, axis=1)
    # m = 0..k-1: the m shortest segments are whole, the others at level t in
    # [ascending[m-1], ascending[m]].
    whole = tf.cumsum(ascending, axis=1, exclusive=True)
    floor = tf.concat([tf.zeros_like(ascending[:, :1]), ascending[:, :-1]], axis=1)
    sharing = tf.range(k, 0, -1, dtype=tf.int64)[tf.newaxis, :]
    fits = whole + sharing * floor <= budget
    level = tf.minimum(ascending, (budget - whole) // sharing)
    rounds = tf.reduce_max(tf.where(fits, level, tf.zeros_like(level)), axis=1, keepdims=True)
    kept = tf.minimum(lengths, rounds)
    left = budget - tf.reduce_sum(kept, axis=1, keepdims=True)
    longer = lengths > rounds
    rank = tf.cumsum(tf.cast(longer, tf.int64), axis=1, exclusive=True)
    return kept + tf.cast(longer & (rank < left), tf.int64)


def _take_prefix(segment, keep):
    """The first `keep[row]` values of each row of a ragged `[batch, (n)]` segment."""
    keep = tf.cast(keep, segment.row_splits.dtype)
    starts = segment.row_starts()
    positions = tf.ragged.range(starts, starts + keep).flat_values
    return tf.RaggedTensor.from_row_lengths(
        tf.gather(segment.flat_values, positions), keep, validate=False
    )
