"""google-research/bert's pretraining instances as TensorFlow ops.

``create_segment_pairs`` restates ``create_instances_from_document`` of
create_pretraining_data.py for every document of a block at once, and
``create_pretraining_instances`` adds packing, masking (``text.masking``) and padding.
The same functions serve the static record creator (one call per chunk of documents
and duplicate) and the dynamic ``tf.data`` pipeline (one call per block of lines).

The algorithm, per document (``M = max_seq_length - 3``):

1. ``target = M``, or with probability ``short_seq_prob`` a uniform integer in
   ``[2, M]`` (drawn once per document, as in the original);
2. from the current sentence, take whole sentences until their tokens reach
   ``target`` (or the document ends): the chunk;
3. ``A`` = the first ``a_end`` sentences of the chunk, ``a_end`` uniform in
   ``[1, len(chunk) - 1]`` (1 for a one-sentence chunk);
4. with probability 0.5, or always for a one-sentence chunk, ``B`` is "random next":
   sentences of another document of the block (the original's ten draws to avoid the
   same document, in distribution), from a uniformly random sentence, until ``B`` reaches
   ``target - len(A)`` tokens (at least one sentence); the chunk's sentences after
   ``A`` go back and the next chunk starts right after ``A``. Otherwise ``B`` is the
   rest of the chunk;
5. while ``len(A) + len(B) > M``, drop one token from the longer of the two (``B`` on a
   tie), from its front or back with probability 1/2 each. The final lengths of
   this loop do not depend on the coin flips, so they are computed in closed form and
   the number of tokens dropped from the front of each segment is drawn as
   ``Binomial(dropped, 1/2)``: the same distribution, in O(1) per instance.

How it runs without a sequential loop over instances: the chunk, A, B and next start
that would follow from *every* sentence are computed at once (each sentence with its
own random draws), and each document's chain of chunk starts is then followed by
pointer doubling (log2 of the document length vectorised steps). Since a chain visits
a sentence at most once, every instance still uses fresh draws: the distribution is
the original's.

"Random next" is drawn from the documents of the same block (the original draws from
the whole corpus, which it holds in memory). Randomness is stateless: a seed gives
the same instances on every run, in any thread.
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert_zoo.text.masking import PretrainingMasker
from keras_bert_zoo.utils.errors import UserError

__all__ = [
    "create_pretraining_instances",
    "create_segment_pairs",
    "pack_segment_pairs",
    "truncated_lengths",
]


def _uniform_int(u, low, high):
    """Integers uniform in ``[low, high]`` from uniforms ``u`` in ``[0, 1)`` (float64)."""
    low = tf.cast(low, tf.float64)
    span = tf.cast(high, tf.float64) - low + 1.0
    return tf.cast(tf.floor(low + u * span), tf.int64)


def truncated_lengths(length_a, length_b, max_num_tokens):
    """Lengths after the original's ``truncate_seq_pair`` loop (closed form).

    The loop drops one token at a time from the longer segment (``B`` on a tie) while
    the total exceeds ``max_num_tokens``: when the longer segment can absorb the whole
    excess alone it does; otherwise both meet at ``ceil(M / 2)`` (``A``) and
    ``floor(M / 2)`` (``B``).
    """
    excess = length_a + length_b - max_num_tokens
    only_a = (length_a > length_b) & (length_a - excess >= length_b)
    only_b = (length_b >= length_a) & (length_b - excess >= length_a)
    half_b = max_num_tokens // 2
    half_a = max_num_tokens - half_b
    new_a = tf.where(only_a, length_a - excess, tf.where(only_b, length_a, half_a))
    new_b = tf.where(only_b, length_b - excess, tf.where(only_a, length_b, half_b))
    fits = excess <= 0
    return tf.where(fits, length_a, new_a), tf.where(fits, length_b, new_b)


def create_segment_pairs(
    documents: tf.RaggedTensor,
    seed,
    max_seq_length: int,
    short_seq_prob: float,
    duplicates: int = 1,
):
    """NSP segment pairs of a block of tokenized documents (see the module docstring).

    Args:
        documents: int ``RaggedTensor`` ``[documents, (sentences), (tokens)]``. Every
            sentence must hold at least one token and every document one sentence.
        seed: int tensor of shape ``[2]``.
        max_seq_length: int. Instances hold at most ``max_seq_length - 3`` segment
            tokens (room for ``[CLS]``, ``[SEP]``, ``[SEP]``).
        short_seq_prob: float. Probability of a shorter target length per document.
        duplicates: int. Passes over the documents, each with its own randomness (the
            original's ``dupe_factor``), computed together.

    Returns:
        dict: ``tokens_a`` and ``tokens_b`` (ragged ``[instances, (tokens)]``, the
        documents' dtype), ``is_random_next`` (bool ``[instances]``), ``document``
        (int64 ``[instances]``, the index of the document ``A`` comes from) and
        ``duplicate`` (int64, the pass). Instances are ordered by pass, document,
        then reading order.
    """
    max_num_tokens = int(max_seq_length) - 3
    if max_num_tokens < 2:
        raise UserError(f"max_seq_length must be >= 5, got {max_seq_length}")
    seed = tf.convert_to_tensor(seed)
    target_seed, chunk_seed, truncation_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3)
    )

    flat_tokens = documents.flat_values
    sentence_lengths = tf.cast(documents.values.row_lengths(), tf.int64)
    # cumulative[k]: tokens before sentence k (sentences numbered across documents).
    cumulative = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(sentence_lengths)], axis=0)
    doc_splits = tf.cast(documents.row_splits, tf.int64)
    original_start, original_end = doc_splits[:-1], doc_splits[1:]
    num_originals = tf.shape(original_start, out_type=tf.int64)[0]
    num_sentences = tf.shape(sentence_lengths, out_type=tf.int64)[0]
    doc_of_sentence = tf.cast(documents.value_rowids(), tf.int64)

    # One row per (pass, sentence): the instance that would start at that sentence.
    # Passes share the tokens, not the randomness; the target length is drawn once per
    # (pass, document).
    copies = num_sentences * duplicates
    sentence = tf.tile(tf.range(num_sentences, dtype=tf.int64), [duplicates])
    duplicate_of_row = tf.repeat(tf.range(duplicates, dtype=tf.int64), num_sentences)
    original = tf.tile(doc_of_sentence, [duplicates])
    doc_end = tf.gather(original_end, original)
    draws = tf.random.stateless_uniform(
        tf.stack([num_originals * duplicates, 2]), target_seed, dtype=tf.float64
    )
    target_per_document = tf.where(
        draws[:, 0] < short_seq_prob,
        _uniform_int(draws[:, 1], 2, max_num_tokens),
        tf.constant(max_num_tokens, tf.int64),
    )
    target = tf.gather(target_per_document, duplicate_of_row * num_originals + original)

    def chunk_end(start, goal_tokens, last):
        """First sentence index >= start whose end reaches goal_tokens, or `last`."""
        goal = tf.gather(cumulative, start) + goal_tokens
        end = tf.searchsorted(cumulative, goal, side="left", out_type=tf.int64) - 1
        return tf.clip_by_value(end, start, last)

    draws = tf.random.stateless_uniform(tf.stack([copies, 5]), chunk_seed, dtype=tf.float64)
    start = sentence
    end = chunk_end(start, target, doc_end - 1)
    chunk_size = end - start + 1
    a_count = tf.where(chunk_size >= 2, _uniform_int(draws[:, 0], 1, chunk_size - 1), 1)
    random_next = (chunk_size == 1) | (draws[:, 1] < 0.5)
    a_begin = tf.gather(cumulative, start)
    a_limit = tf.gather(cumulative, start + a_count)
    # Random next: the original makes ten uniform draws and keeps the first other
    # document (the last draw, itself, if all ten hit it). That is: itself with
    # probability n^-10, otherwise a uniform pick among the n - 1 others.
    other = _uniform_int(draws[:, 2], 0, num_originals - 2)
    other += tf.cast(other >= original, tf.int64)
    keep_own = (num_originals < 2) | (
        draws[:, 3] < tf.pow(tf.cast(tf.maximum(num_originals, 1), tf.float64), -10.0)
    )
    chosen = tf.where(keep_own, original, other)
    chosen_start = tf.gather(original_start, chosen)
    chosen_end = tf.gather(original_end, chosen)
    random_start = chosen_start + _uniform_int(draws[:, 4], 0, chosen_end - chosen_start - 1)
    random_last = chunk_end(random_start, target - (a_limit - a_begin), chosen_end - 1)
    b_begin = tf.where(random_next, tf.gather(cumulative, random_start), a_limit)
    b_limit = tf.where(
        random_next, tf.gather(cumulative, random_last + 1), tf.gather(cumulative, end + 1)
    )
    # The next chunk starts after A for random next (B's sentences go back), else
    # after the chunk; past the document's end the chain stops (state `copies`).
    following = tf.where(random_next, start + a_count, end + 1)
    stop = copies
    successor = tf.where(following < doc_end, duplicate_of_row * num_sentences + following, stop)
    successor = tf.concat([successor, [stop]], axis=0)

    # The instances of a document are the chain doc_start, successor(doc_start), ...
    # Instead of walking it one instance per step (as many sequential steps as the
    # longest document has instances), pointer doubling finds the i-th element of
    # every chain in log2(longest document) vectorised steps: each visited sentence
    # uses its own random draws once, so the chains have the original's distribution.
    sentences_per_document = tf.tile(original_end - original_start, [duplicates])
    step_index = tf.ragged.range(sentences_per_document)  # i < sentences bounds the chain
    first = (
        tf.tile(original_start, [duplicates])
        + tf.repeat(tf.range(duplicates, dtype=tf.int64), num_originals) * num_sentences
    )
    position = tf.repeat(first, sentences_per_document)
    remaining = step_index.flat_values

    def jump(position, remaining, table):
        position = tf.where(remaining % 2 == 1, tf.gather(table, position), position)
        return position, remaining // 2, tf.gather(table, table)

    position, _, _ = tf.while_loop(
        lambda position, remaining, table: tf.reduce_any(remaining > 0),
        jump,
        (position, remaining, successor),
    )
    on_chain = position < stop
    row = tf.boolean_mask(position, on_chain)

    # Truncation: closed-form lengths, then Binomial(dropped, 1/2) tokens off the front.
    a_begin, a_limit = tf.gather(a_begin, row), tf.gather(a_limit, row)
    b_begin, b_limit = tf.gather(b_begin, row), tf.gather(b_limit, row)
    length_a, length_b = a_limit - a_begin, b_limit - b_begin
    new_a, new_b = truncated_lengths(length_a, length_b, max_num_tokens)
    front = tf.random.stateless_binomial(
        tf.stack([2, tf.size(row, out_type=tf.int64)]),
        truncation_seed,
        counts=tf.cast(tf.stack([length_a - new_a, length_b - new_b]), tf.float64),
        probs=tf.constant(0.5, tf.float64),
        output_dtype=tf.int64,
    )
    a_begin, b_begin = a_begin + front[0], b_begin + front[1]

    def gather_ranges(begin, limit):
        indices = tf.ragged.range(begin, limit)
        return indices.with_flat_values(tf.gather(flat_tokens, indices.flat_values))

    return {
        "tokens_a": gather_ranges(a_begin, a_begin + new_a),
        "tokens_b": gather_ranges(b_begin, b_begin + new_b),
        "is_random_next": tf.gather(random_next, row),
        "document": tf.gather(original, row),
        "duplicate": tf.gather(duplicate_of_row, row),
    }


def pack_segment_pairs(tokens_a, tokens_b, cls_id: int, sep_id: int):
    """``[CLS] A [SEP] B [SEP]`` ids and their segment ids (0 on A's part, 1 on B's)."""
    rows = tokens_a.nrows()
    dtype = tokens_a.dtype

    def column(value):
        return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([rows, 1]), tf.cast(value, dtype)))

    input_ids = tf.concat(
        [column(cls_id), tokens_a, column(sep_id), tokens_b, column(sep_id)], axis=1
    )
    length_a = tokens_a.row_lengths() + 2
    length_b = tokens_b.row_lengths() + 1
    segment_ids = tf.concat(
        [tf.zeros_like(tf.ragged.range(length_a)), tf.ones_like(tf.ragged.range(length_b))],
        axis=1,
    )
    return input_ids, tf.cast(segment_ids, tf.int32)


def create_pretraining_instances(
    documents: tf.RaggedTensor,
    seed,
    masker: PretrainingMasker,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    duplicates: int = 1,
):
    """Padded, masked pretraining instances of a block of tokenized documents.

    Args:
        documents: int ``RaggedTensor`` ``[documents, (sentences), (tokens)]``.
        seed: int tensor of shape ``[2]``: the same seed gives the same instances.
        masker: ``PretrainingMasker`` (vocabulary, max_predictions_per_seq,
            masked_lm_prob, whole-word masking).
        max_seq_length: int.
        short_seq_prob: float.
        duplicates: int. Passes over the documents with different randomness
            (``dupe_factor``), made in one call.

    Returns:
        dict of dense tensors with the model's names (``N`` instances):
        ``input_word_ids``, ``input_mask``, ``input_type_ids`` (int32
        ``[N, max_seq_length]``), ``masked_lm_positions``, ``masked_lm_ids`` (int32
        ``[N, max_predictions_per_seq]``), ``masked_lm_weights`` (float32, same
        shape), ``next_sentence_labels`` (int32 ``[N]``, 1 = random next), as
        ``data.parse_pretraining_examples`` returns them from records.
    """
    seed = tf.convert_to_tensor(seed)
    pair_seed, mask_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    pairs = create_segment_pairs(documents, pair_seed, max_seq_length, short_seq_prob, duplicates)
    input_ids, segment_ids = pack_segment_pairs(
        pairs["tokens_a"], pairs["tokens_b"], masker.cls_id, masker.sep_id
    )
    masked, positions, labels = masker(input_ids, mask_seed)
    return pad_instances(
        masked,
        segment_ids,
        positions,
        labels,
        pairs["is_random_next"],
        max_seq_length,
        masker.max_predictions_per_seq,
    )


def pad_instances(
    input_ids, segment_ids, positions, labels, is_random_next, max_seq_length, max_predictions
):
    """Ragged instances -> the dense, zero-padded features of the original records."""
    rows = input_ids.nrows()
    seq_shape = tf.stack([rows, tf.cast(max_seq_length, rows.dtype)])
    pred_shape = tf.stack([rows, tf.cast(max_predictions, rows.dtype)])
    return {
        "input_word_ids": tf.cast(input_ids.to_tensor(0, shape=seq_shape), tf.int32),
        "input_mask": tf.sequence_mask(input_ids.row_lengths(), max_seq_length, tf.int32),
        "input_type_ids": tf.cast(segment_ids.to_tensor(0, shape=seq_shape), tf.int32),
        "masked_lm_positions": tf.cast(positions.to_tensor(0, shape=pred_shape), tf.int32),
        "masked_lm_ids": tf.cast(labels.to_tensor(0, shape=pred_shape), tf.int32),
        "masked_lm_weights": tf.sequence_mask(labels.row_lengths(), max_predictions, tf.float32),
        "next_sentence_labels": tf.cast(is_random_next, tf.int32),
    }
