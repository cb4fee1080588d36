"""BERT's masked-LM masking on tensorflow-text's ``mask_language_model``.

``PretrainingMasker`` applies google-research/bert's masking to a batch of
``[CLS] A [SEP] B [SEP]`` id sequences, as TensorFlow ops (one vectorised call per
batch, usable in ``tf.data``):

* ``num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) *
  masked_lm_prob)))`` with ``len(tokens)`` counting ``[CLS]``/``[SEP]`` and Python's
  round-half-to-even, computed in float64 as the original does;
* candidates are every token but ``[CLS]`` and ``[SEP]``, taken in a random order
  until ``num_to_predict`` positions are chosen; with whole-word masking a candidate
  is a word (a piece and the ``##`` pieces after it) and a word that would overshoot
  the budget is skipped, not cut, exactly as the original's loop does;
* each chosen position independently becomes ``[MASK]`` (80%), a uniformly random
  vocabulary id (10%; any id, as the original draws from the whole vocabulary) or
  stays unchanged (10%);
* positions come out sorted, labels are the original ids.

The work is split as tensorflow-text intends: ``mask_language_model`` does the
gathering and scattering, an ``ItemSelector`` subclass chooses the positions and a
``MaskValuesChooser`` subclass the replacement values. The subclasses exist because
three features are missing from tensorflow-text's ``RandomItemSelector`` and
``MaskValuesChooser``:

* the original's count (they select ``ceil(rate * selectable items)``, which for
  whole words counts words instead of word pieces and can overshoot
  ``max_predictions_per_seq``);
* the skip rule of whole-word masking;
* stateless randomness: both draw from stateful random ops, whose results in a
  parallel ``tf.data`` map depend on thread timing; here every draw comes from
  ``tf.random.stateless_*`` under an explicit seed, so a seed fixes the masks.
  (``RandomItemSelector`` also shuffles row by row in a ``map_fn``; the selector
  here ranks all rows at once.)

One deliberate deviation: with whole-word masking the original appends a ``##`` piece
to the previous candidate word even across a ``[SEP]`` (when truncation left B
starting with a ``##`` piece, that piece joins A's last word). Here a word never
spans a special token.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.text.vocab import load_vocab
from keras_bert_zoo.utils.errors import UserError

__all__ = [
    "PretrainingMasker",
    "WholeWordBudgetSelector",
    "StatelessMaskValuesChooser",
    "num_to_predict",
]


def num_to_predict(num_tokens, masked_lm_prob: float, max_predictions_per_seq: int):
    """The original's ``min(P, max(1, round(len(tokens) * masked_lm_prob)))``, in float64."""
    count = tf.round(tf.cast(num_tokens, tf.float64) * tf.constant(masked_lm_prob, tf.float64))
    count = tf.cast(count, tf.int64)
    return tf.minimum(tf.constant(max_predictions_per_seq, tf.int64), tf.maximum(count, 1))


class WholeWordBudgetSelector(tf_text.RandomItemSelector):
    """Chooses items (tokens, or whole words) as google-research/bert does.

    For ``input_ids`` of shape ``[batch, (tokens)]`` an item is a token; for
    ``[batch, (words), (pieces)]`` an item is a word and costs its number of pieces.
    Items holding an unselectable id (``[CLS]``, ``[SEP]``) are never chosen. Per row,
    the selectable items are ranked by a stateless random key and taken in that order
    while they fit the row's budget ``num_to_predict(pieces in the row)``; an item
    that does not fit is skipped and later, smaller items may still be taken.

    Args:
        max_predictions_per_seq: int. Upper bound of chosen pieces per row.
        masked_lm_prob: float. Fraction of the row's pieces to choose.
        unselectable_ids: list of int. Ids never chosen.
        seed: int tensor of shape ``[2]``. Stateless seed of the ranking.
    """

    def __init__(self, max_predictions_per_seq, masked_lm_prob, unselectable_ids, seed):
        # RandomItemSelector is the public ItemSelector subclass; its selection is
        # replaced below, its `get_selectable` (unselectable ids) is reused.
        super().__init__(max_predictions_per_seq, masked_lm_prob, list(unselectable_ids))
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        self.seed = seed

    def get_selection_mask(self, input_ids, axis=1):
        if axis != 1:
            raise UserError(f"WholeWordBudgetSelector selects along axis 1, got axis={axis}")
        selectable = self.get_selectable(input_ids, axis)  # [batch, (items)]
        whole_words = input_ids.ragged_rank > 1
        if whole_words:
            sizes = tf.cast(input_ids.values.row_lengths(), tf.int64)
            pieces_per_row = tf.reduce_sum(input_ids.row_lengths(axis=2), axis=1)
        else:
            sizes = tf.ones_like(selectable.flat_values, tf.int64)
            pieces_per_row = input_ids.row_lengths()
        budget = num_to_predict(pieces_per_row, self.masked_lm_prob, self.max_predictions_per_seq)

        if not whole_words:
            return self._smallest_keys(selectable, budget)
        # Rank the words by a random key; unselectable items (key 2) and padding
        # (key 3) sort last. (tf.random.experimental.index_shuffle would avoid the
        # sort, but with its 4 rounds its permutations are measurably non-uniform and
        # with more rounds it costs more than the sort.)
        keys = tf.random.stateless_uniform(tf.shape(sizes), self.seed, dtype=tf.float32)
        keys = tf.where(selectable.flat_values, keys, 2.0)
        dense_keys = selectable.with_flat_values(keys).to_tensor(default_value=3.0)
        order = tf.argsort(dense_keys, axis=1, stable=True)
        dense_sizes = selectable.with_flat_values(
            tf.where(selectable.flat_values, sizes, 0)
        ).to_tensor(default_value=0)
        sorted_sizes = tf.gather(dense_sizes, order, batch_dims=1)

        # The items before the first one that overshoots the budget are taken; with
        # single tokens that is the whole choice.
        cumulative = tf.cumsum(sorted_sizes, axis=1)
        taken = (sorted_sizes > 0) & (cumulative <= budget[:, tf.newaxis])
        if whole_words:
            taken = self._fill_after_overshoot(taken, sorted_sizes, budget)
        # Back from rank order to item order, on flat indices (cheaper than a 2-D
        # scatter and RaggedTensor.from_tensor).
        width = tf.shape(order, out_type=tf.int64)[1]
        row_base = tf.range(tf.shape(order, out_type=tf.int64)[0])[:, tf.newaxis] * width
        flat_rank_slot = tf.reshape(row_base + tf.cast(order, tf.int64), [-1, 1])
        taken_by_slot = tf.scatter_nd(
            flat_rank_slot,
            tf.reshape(tf.cast(taken, tf.int32), [-1]),
            tf.shape(flat_rank_slot[:, 0], out_type=tf.int64),
        )
        rows = selectable.value_rowids()
        item_slot = rows * width + (
            tf.range(tf.size(sizes, out_type=tf.int64)) - tf.gather(selectable.row_starts(), rows)
        )
        return selectable.with_flat_values(tf.gather(taken_by_slot, item_slot) > 0)

    def _smallest_keys(self, selectable, budget):
        """Single tokens: the `budget` selectable items with the smallest random keys.

        That is the original's "shuffle the candidates, take the first ones" without a
        sort: `top_k` finds each row's `budget`-th smallest key among at most
        `max_predictions_per_seq`, and every item at or below it is chosen (float64
        keys: ties have a probability of about 1e-12 per row).
        """
        flat = selectable.flat_values
        keys = tf.random.stateless_uniform(tf.shape(flat), self.seed, dtype=tf.float64)
        keys = tf.where(flat, keys, 2.0)
        dense = selectable.with_flat_values(keys).to_tensor(default_value=3.0)
        count = tf.minimum(self.max_predictions_per_seq, tf.shape(dense)[1])
        smallest = -tf.math.top_k(-dense, k=count, sorted=True).values
        last = tf.minimum(budget, tf.cast(count, budget.dtype)) - 1
        threshold = tf.gather(smallest, tf.maximum(last, 0), batch_dims=1)
        threshold = tf.where(last >= 0, threshold, -1.0)  # rows without items
        # Fewer selectable items than the budget: the threshold is 2 and takes them all.
        chosen = flat & (keys <= tf.gather(threshold, selectable.value_rowids()))
        return selectable.with_flat_values(chosen)

    @staticmethod
    def _fill_after_overshoot(taken, sorted_sizes, budget):
        """After the first word that overshoots, each later word that still fits.

        The original's loop skips a word that would overshoot and goes on; the next
        word it takes is always the first later one that fits the remaining budget,
        so each step takes one word per row (a few steps at most).
        """
        width = tf.shape(sorted_sizes, out_type=tf.int64)[1]
        index = tf.range(width, dtype=tf.int64)[tf.newaxis, :]
        count = tf.reduce_sum(tf.where(taken, sorted_sizes, 0), axis=1)
        first_overshoot = tf.reduce_sum(tf.cast(taken, tf.int64), axis=1)

        def step(taken, count, pointer):
            fits = (
                (sorted_sizes > 0)
                & (index > pointer[:, tf.newaxis])
                & (sorted_sizes <= (budget - count)[:, tf.newaxis])
            )
            found = tf.reduce_any(fits, axis=1)
            following = tf.argmax(tf.cast(fits, tf.int32), axis=1, output_type=tf.int64)
            newly = fits & tf.equal(index, following[:, tf.newaxis]) & found[:, tf.newaxis]
            count += tf.reduce_sum(tf.where(newly, sorted_sizes, 0), axis=1)
            pointer = tf.where(found, following, width)
            return taken | newly, count, pointer

        def condition(taken, count, pointer):
            return tf.reduce_any((pointer < width) & (count < budget))

        taken, _, _ = tf.while_loop(
            condition, step, (taken, count, first_overshoot), parallel_iterations=1
        )
        return taken


class StatelessMaskValuesChooser(tf_text.MaskValuesChooser):
    """80% ``[MASK]``, 10% a uniformly random id, 10% unchanged, from a stateless seed.

    Args:
        vocab_size: int. Random ids are drawn from ``[0, vocab_size)``.
        mask_token: int. Id of ``[MASK]``.
        seed: int tensor of shape ``[2]``.
        mask_token_rate: float. Share of chosen pieces replaced by ``[MASK]``.
        random_token_rate: float. Share replaced by a random id.
    """

    def __init__(self, vocab_size, mask_token, seed, mask_token_rate=0.8, random_token_rate=0.1):
        super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
        self.seed = seed

    def get_mask_values(self, masked_lm_ids):
        flat = masked_lm_ids.flat_values
        seeds = tf.random.experimental.stateless_split(self.seed, 2)
        draw = tf.random.stateless_uniform(tf.shape(flat), seeds[0], dtype=tf.float32)
        random_ids = tf.random.stateless_uniform(
            tf.shape(flat), seeds[1], minval=0, maxval=self.vocab_size, dtype=tf.int64
        )
        values = tf.where(
            draw < self._mask_token_rate,
            tf.cast(self.mask_token, flat.dtype),
            tf.where(
                draw < self._mask_token_rate + self.random_token_rate,
                tf.cast(random_ids, flat.dtype),
                flat,
            ),
        )
        return masked_lm_ids.with_flat_values(values)


class PretrainingMasker:
    """google-research/bert's masked-LM masking of ``[CLS] A [SEP] B [SEP]`` batches.

    Args:
        vocabulary: str or list of str. A ``vocab.txt`` path or the tokens; gives the
            vocabulary size, the ids of ``[MASK]``, ``[CLS]``, ``[SEP]`` and which ids
            are ``##`` continuation pieces.
        max_predictions_per_seq: int. At most this many masked positions per row.
        masked_lm_prob: float. Fraction of a row's tokens (specials included) masked.
        whole_word_mask: bool. Mask all pieces of a chosen word.
        mask_token_rate: float. Share of chosen pieces replaced by ``[MASK]`` (0.8).
        random_token_rate: float. Share replaced by a random id (0.1); the rest keep
            their id.

    Call arguments:
        input_ids: int ``RaggedTensor`` ``[batch, (tokens)]``, unpadded.
        seed: int tensor of shape ``[2]``: the same seed gives the same masks.

    Returns:
        ``(masked_input_ids, masked_lm_positions, masked_lm_ids)``: ragged
        ``[batch, (tokens)]``, ``[batch, (predictions)]`` (sorted) and
        ``[batch, (predictions)]`` (original ids), all of ``input_ids``' dtype
        (positions int64).

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.text.masking import PretrainingMasker

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
    masker = PretrainingMasker(vocab, max_predictions_per_seq=2, masked_lm_prob=0.3)
    ids = tf.ragged.constant([[2, 5, 6, 7, 3, 8, 3]])
    masked, positions, labels = masker(ids, seed=tf.constant([1, 2]))
    ```
    """

    def __init__(
        self,
        vocabulary,
        max_predictions_per_seq: int = 20,
        masked_lm_prob: float = 0.15,
        whole_word_mask: bool = False,
        mask_token_rate: float = 0.8,
        random_token_rate: float = 0.1,
    ):
        if isinstance(vocabulary, str | os.PathLike):
            tokens = load_vocab(os.fspath(vocabulary))
            source = repr(os.fspath(vocabulary))
        else:
            tokens = [str(t) for t in vocabulary]
            source = f"(list of {len(tokens)} tokens)"
        missing = [t for t in ("[CLS]", "[SEP]", "[MASK]") if t not in tokens]
        if missing:
            raise UserError(f"Vocabulary {source} lacks {missing}, needed for masking")
        if not 0.0 < masked_lm_prob <= 1.0:
            raise UserError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}")
        if max_predictions_per_seq < 1:
            raise UserError(f"max_predictions_per_seq must be >= 1, got {max_predictions_per_seq}")
        if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
            raise UserError(
                f"mask_token_rate ({mask_token_rate}) and random_token_rate "
                f"({random_token_rate}) must be >= 0 with a sum <= 1"
            )
        self.vocab_size = len(tokens)
        self.mask_id = tokens.index("[MASK]")
        self.cls_id = tokens.index("[CLS]")
        self.sep_id = tokens.index("[SEP]")
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        self.whole_word_mask = bool(whole_word_mask)
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self._continuation = [t.startswith("##") for t in tokens]
        self._continuation_table = None

    def _continuation_flags(self):
        if self._continuation_table is None:
            with tf.init_scope():
                self._continuation_table = tf.constant(self._continuation, tf.bool)
        return self._continuation_table

    def words(self, input_ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """``[batch, (tokens)]`` -> ``[batch, (words), (pieces)]``.

        A word is a piece and the ``##`` pieces that follow it; special tokens are
        words of their own and end the word before them.
        """
        flat = input_ids.flat_values
        special = tf.equal(flat, self.cls_id) | tf.equal(flat, self.sep_id)
        continuation = tf.gather(self._continuation_flags(), tf.cast(flat, tf.int64))
        previous_special = tf.concat([[True], special[:-1]], axis=0)
        row_start = tf.scatter_nd(
            input_ids.row_starts()[:, tf.newaxis],
            tf.ones_like(input_ids.row_starts(), tf.bool),
            tf.shape(flat, out_type=tf.int64),
        )
        starts = ~continuation | special | previous_special | row_start
        word_of_piece = tf.cumsum(tf.cast(starts, tf.int64)) - 1
        num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
        words = tf.RaggedTensor.from_value_rowids(flat, word_of_piece, nrows=num_words)
        words_per_row = tf.reduce_sum(input_ids.with_flat_values(tf.cast(starts, tf.int64)), axis=1)
        word_splits = tf.concat([[0], tf.cumsum(words_per_row)], axis=0)
        return tf.RaggedTensor.from_row_splits(words, word_splits, validate=False)

    def __call__(self, input_ids: tf.RaggedTensor, seed):
        seed = tf.convert_to_tensor(seed)
        seeds = tf.random.experimental.stateless_split(seed, 2)
        selector = WholeWordBudgetSelector(
            self.max_predictions_per_seq,
            self.masked_lm_prob,
            [self.cls_id, self.sep_id],
            seeds[0],
        )
        chooser = StatelessMaskValuesChooser(
            self.vocab_size,
            self.mask_id,
            seeds[1],
            self.mask_token_rate,
            self.random_token_rate,
        )
        if self.whole_word_mask:
            # For words, mask_language_model returns the pieces merged back to
            # [batch, (tokens)].
            return tf_text.mask_language_model(self.words(input_ids), selector, chooser, axis=1)
        return _mask_single_tokens(input_ids, selector, chooser)


def _mask_single_tokens(input_ids: tf.RaggedTensor, selector, chooser):
    """``tf_text.mask_language_model(input_ids, selector, chooser)`` for single tokens.

    The same selection, values and outputs, on flat values: mask_language_model's
    ragged ``boolean_mask`` and ``batch_gather`` (row ids of every token through
    ``tf.repeat``, a segment sum per mask) cost about as much as the selection itself
    on a creator chunk. The test suite checks that both give identical results.
    """
    flat = input_ids.flat_values
    splits = tf.cast(input_ids.row_splits, tf.int64)
    chosen = selector.get_selection_mask(input_ids, axis=1).flat_values
    chosen_index = tf.where(chosen)[:, 0]  # ascending: positions come out sorted
    # Row boundaries among the chosen tokens by binary search (a cumulative count over
    # every token is slower on CPU).
    prediction_splits = tf.searchsorted(chosen_index, splits, side="left", out_type=tf.int64)
    labels = tf.RaggedTensor.from_row_splits(
        tf.gather(flat, chosen_index),
        tf.cast(prediction_splits, input_ids.row_splits.dtype),
        validate=False,
    )
    positions = labels.with_flat_values(chosen_index - tf.gather(splits, labels.value_rowids()))
    values = tf.cast(chooser.get_mask_values(labels).flat_values, flat.dtype)
    masked = tf.tensor_scatter_nd_update(flat, chosen_index[:, tf.newaxis], values)
    return input_ids.with_flat_values(masked), positions, labels
