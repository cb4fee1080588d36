"""Span decoding in TF ops: window logits -> n-best answers per example, with v2's null answer.

One implementation serves evaluation (`QuestionAnsweringTask.postprocess` runs it
eagerly on the host, example chunk by example chunk) and the exported model
(`serving_outputs` runs it inside the graph).

What it computes, per example, over all of the example's windows (the rules of
google-research/bert's `write_predictions`):

* a candidate span is a start token and an end token, both inside the context part of
  one window, start <= end, at most `max_answer_length` tokens long, whose start token
  has its max context in that window; its score is `start_logit + end_logit`;
* the n-best list holds the `n_best_size` best-scoring candidates with distinct
  texts; a span's text is the original context between its tokens' character
  offsets, so answers are exact substrings of the input;
* with `version_2_with_negative`, the null answer scores the smallest
  `start_logit[0] + end_logit[0]` ([CLS]) over the example's windows; it joins the
  n-best list at its rank (after `n_best_size` entries if it ranks lower), and the
  example is answered "" when `null_score - best_non_null_score >
  null_score_diff_threshold`;
* probabilities are the softmax of the n-best scores.

One deliberate difference: the original first keeps the 20 best start and the 20 best
end positions of each window (over every position, `[CLS]`, question and padding
included) and pairs only those, which can miss the best valid span. Here every valid
(start, end) pair is scored (a band of `max_answer_length` ends per start), so the
best answer is the exact argmax. Texts are de-duplicated among the best
`candidate_pool` spans (`4 * n_best_size` by default); an n-best list comes out shorter
than `n_best_size` only when those hold fewer distinct texts.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from keras_bert_zoo.utils.errors import UserError

NEG_INF = float("-inf")


def decode_spans(
    start_logits,
    end_logits,
    token_char_start,
    token_char_end,
    token_is_max_context,
    example_index,
    contexts,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold=0.0,
    candidate_pool: int | None = None,
) -> dict[str, tf.Tensor]:
    """Decodes the answers of a batch of examples from their windows' logits.

    Args:
        start_logits, end_logits: float `[windows, seq_length]`.
        token_char_start, token_char_end: int `[windows, seq_length]`, character
            offsets of each context token into its example's context, -1 elsewhere
            (`SquadPreprocessor`).
        token_is_max_context: int or bool `[windows, seq_length]`.
        example_index: int `[windows]`, the window's example in `contexts`;
            non-decreasing, every example has at least one window.
        contexts: string `[examples]`, the original contexts.
        n_best_size: int. Entries of the n-best list.
        max_answer_length: int. Longest answer, in tokens.
        version_2_with_negative: bool. Score the null answer (SQuAD v2.0).
        null_score_diff_threshold: float scalar (tensor or number).
        candidate_pool: int. Spans per example among which texts are de-duplicated.

    Returns:
        dict of tensors, `E` examples and `K = n_best_size` (+1 with the null answer):
        `answer_text` string `[E]` (the prediction; "" for no answer),
        `answer_start`, `answer_end` int64 `[E]` (character span, -1 for ""),
        `best_text`, `best_start`, `best_end`, `best_score` (the best non-null
        span; "" / -1 / 0.0 when the context has no token), `null_score_diff`
        float64 `[E]` (0.0 without the null answer), `nbest_text` `[E, K]`,
        `nbest_start_logit`, `nbest_end_logit`, `nbest_probability` float64
        `[E, K]`, `nbest_start`, `nbest_end` int64 `[E, K]` (-1 for the null
        answer), and `nbest_size` int32 `[E]` (valid leading entries).
    """
    n_best_size = int(n_best_size)
    max_answer_length = int(max_answer_length)
    if n_best_size < 1 or max_answer_length < 1:
        raise UserError(
            f"n_best_size ({n_best_size}) and max_answer_length ({max_answer_length}) must be >= 1"
        )
    pool = int(candidate_pool or 4 * n_best_size)
    pool = max(pool, n_best_size)
    start = tf.cast(start_logits, tf.float64)
    end = tf.cast(end_logits, tf.float64)
    char_start = tf.cast(token_char_start, tf.int64)
    char_end = tf.cast(token_char_end, tf.int64)
    example_index = tf.cast(example_index, tf.int64)
    contexts = tf.convert_to_tensor(contexts, tf.string)
    num_examples = tf.shape(contexts, out_type=tf.int64)[0]
    seq_length = tf.shape(start, out_type=tf.int64)[1]
    span_width = max_answer_length
    in_context = char_start >= 0
    can_start = in_context & (tf.cast(token_is_max_context, tf.int64) > 0)

    # === Every valid span of every window: [windows, seq_length, max_answer_length] ===
    end_by_length = tf.signal.frame(
        end, span_width, 1, axis=-1, pad_end=True, pad_value=tf.constant(NEG_INF, tf.float64)
    )
    end_in_context = tf.signal.frame(
        tf.cast(in_context, tf.int32), span_width, 1, axis=-1, pad_end=True, pad_value=0
    )
    valid = can_start[:, :, tf.newaxis] & (end_in_context > 0)
    scores = tf.where(
        valid, start[:, :, tf.newaxis] + end_by_length, tf.constant(NEG_INF, tf.float64)
    )
    flat_scores = tf.reshape(scores, [tf.shape(scores)[0], -1])
    per_window = tf.minimum(tf.constant(pool, tf.int64), seq_length * span_width)
    window_scores, window_spans = tf.math.top_k(flat_scores, k=tf.cast(per_window, tf.int32))
    window_spans = tf.cast(window_spans, tf.int64)

    # === The best `pool` spans of each example, over its windows ===
    num_windows = tf.shape(start, out_type=tf.int64)[0]
    window_ids = tf.broadcast_to(tf.range(num_windows)[:, tf.newaxis], tf.shape(window_spans))

    def by_example(values, fill):
        ragged = tf.RaggedTensor.from_value_rowids(values, example_index, nrows=num_examples)
        return ragged.merge_dims(1, 2).to_tensor(default_value=fill)

    example_scores = by_example(window_scores, tf.constant(NEG_INF, tf.float64))
    example_spans = by_example(window_spans, tf.constant(0, tf.int64))
    example_windows = by_example(window_ids, tf.constant(0, tf.int64))
    taken = tf.minimum(tf.constant(pool, tf.int32), tf.shape(example_scores)[1])
    pool_scores, order = tf.math.top_k(example_scores, k=taken)
    pool_spans = tf.gather(example_spans, order, batch_dims=1)
    pool_windows = tf.gather(example_windows, order, batch_dims=1)
    pool_valid = pool_scores > NEG_INF
    start_token = pool_spans // span_width
    end_token = start_token + pool_spans % span_width
    safe_end_token = tf.minimum(end_token, seq_length - 1)
    start_at = tf.stack([pool_windows, start_token], axis=-1)
    end_at = tf.stack([pool_windows, safe_end_token], axis=-1)
    pool_start_logit = tf.gather_nd(start, start_at)
    pool_end_logit = tf.gather_nd(end, end_at)
    pool_char_start = tf.where(pool_valid, tf.gather_nd(char_start, start_at), 0)
    pool_char_end = tf.where(pool_valid, tf.gather_nd(char_end, end_at), 0)
    pool_contexts = tf.broadcast_to(contexts[:, tf.newaxis], tf.shape(pool_char_start))
    pool_text = tf.strings.substr(
        pool_contexts, pool_char_start, pool_char_end - pool_char_start, unit="UTF8_CHAR"
    )

    # === De-duplicate texts (first, i.e. best, occurrence wins) ===
    same_text = tf.equal(pool_text[:, :, tf.newaxis], pool_text[:, tf.newaxis, :])
    pool_size = tf.shape(pool_text)[1]
    earlier = tf.linalg.band_part(tf.ones([pool_size, pool_size], tf.bool), -1, 0) & ~tf.eye(
        pool_size, dtype=tf.bool
    )
    duplicate = tf.reduce_any(same_text & earlier & pool_valid[:, tf.newaxis, :], axis=2)
    keep = pool_valid & ~duplicate
    rank = tf.range(pool_size)[tf.newaxis, :]
    compact = tf.argsort(tf.where(keep, rank, rank + pool_size), axis=1, stable=True)
    width = tf.minimum(pool_size, n_best_size)

    def best_first(values):
        values = tf.gather(values, compact, batch_dims=1)[:, :width]
        padding = [[0, 0], [0, n_best_size - width]]
        return tf.pad(values, padding)

    num_kept = tf.minimum(tf.reduce_sum(tf.cast(keep, tf.int32), axis=1), n_best_size)
    slot = tf.range(n_best_size)[tf.newaxis, :]
    kept = slot < num_kept[:, tf.newaxis]
    nbest_score = tf.where(kept, best_first(pool_scores), tf.constant(NEG_INF, tf.float64))
    nbest_start_logit = tf.where(kept, best_first(pool_start_logit), 0.0)
    nbest_end_logit = tf.where(kept, best_first(pool_end_logit), 0.0)
    nbest_text = tf.where(kept, best_first(pool_text), "")
    nbest_start = tf.where(kept, best_first(pool_char_start), -1)
    nbest_end = tf.where(kept, best_first(pool_char_end), -1)

    has_best = num_kept > 0
    best_text = nbest_text[:, 0]
    best_start = nbest_start[:, 0]
    best_end = nbest_end[:, 0]
    # The original scores a missing non-null answer as a nonce entry with logits 0.
    best_score = tf.where(has_best, nbest_score[:, 0], 0.0)

    if version_2_with_negative:
        null_by_window = start[:, 0] + end[:, 0]
        null_score = tf.math.unsorted_segment_min(null_by_window, example_index, num_examples)
        null_window = tf.math.unsorted_segment_min(
            tf.where(
                tf.equal(null_by_window, tf.gather(null_score, example_index)),
                tf.range(num_windows),
                tf.fill([num_windows], num_windows),
            ),
            example_index,
            num_examples,
        )
        null_start_logit = tf.gather(start[:, 0], null_window)
        null_end_logit = tf.gather(end[:, 0], null_window)
        # The null entry goes after every non-null entry scoring at least as much
        # (the original's stable sort sees it last).
        null_rank = tf.reduce_sum(
            tf.cast(kept & (nbest_score >= null_score[:, tf.newaxis]), tf.int32), axis=1
        )
        merged_slot = tf.range(n_best_size + 1)[tf.newaxis, :]
        before = merged_slot < null_rank[:, tf.newaxis]
        is_null = tf.equal(merged_slot, null_rank[:, tf.newaxis])
        source = tf.clip_by_value(
            tf.where(before, merged_slot, merged_slot - 1), 0, n_best_size - 1
        )

        def merged(values, null_values):
            non_null = tf.gather(values, source, batch_dims=1)
            return tf.where(is_null, null_values[:, tf.newaxis], non_null)

        # The original stops at n_best_size entries and appends the null answer if it
        # has not been reached by then.
        merged_size = tf.where(
            null_rank < n_best_size, tf.minimum(num_kept + 1, n_best_size), num_kept + 1
        )
        merged_kept = merged_slot < merged_size[:, tf.newaxis]
        nbest_score = tf.where(
            merged_kept,
            merged(nbest_score, null_score),
            tf.constant(NEG_INF, tf.float64),
        )
        nbest_start_logit = tf.where(merged_kept, merged(nbest_start_logit, null_start_logit), 0.0)
        nbest_end_logit = tf.where(merged_kept, merged(nbest_end_logit, null_end_logit), 0.0)
        empty = tf.fill(tf.shape(null_score), "")
        nbest_text = tf.where(merged_kept, merged(nbest_text, empty), "")
        minus_one = -tf.ones_like(null_window)
        nbest_start = tf.where(merged_kept, merged(nbest_start, minus_one), -1)
        nbest_end = tf.where(merged_kept, merged(nbest_end, minus_one), -1)
        num_kept = merged_size
        kept = merged_kept
        null_score_diff = null_score - best_score
        answer_is_null = ~has_best | (
            null_score_diff > tf.cast(null_score_diff_threshold, tf.float64)
        )
    else:
        null_score_diff = tf.zeros_like(best_score)
        answer_is_null = ~has_best

    # Softmax over the n-best scores (the original's _compute_softmax).
    top = tf.reduce_max(nbest_score, axis=1, keepdims=True)
    exp = tf.where(kept, tf.exp(nbest_score - tf.where(tf.math.is_finite(top), top, 0.0)), 0.0)
    total = tf.reduce_sum(exp, axis=1, keepdims=True)
    nbest_probability = tf.math.divide_no_nan(exp, total)

    return {
        "answer_text": tf.where(answer_is_null, "", best_text),
        "answer_start": tf.where(answer_is_null, tf.constant(-1, tf.int64), best_start),
        "answer_end": tf.where(answer_is_null, tf.constant(-1, tf.int64), best_end),
        "best_text": best_text,
        "best_start": best_start,
        "best_end": best_end,
        "best_score": best_score,
        "null_score_diff": null_score_diff,
        "nbest_text": nbest_text,
        "nbest_start_logit": nbest_start_logit,
        "nbest_end_logit": nbest_end_logit,
        "nbest_probability": nbest_probability,
        "nbest_start": nbest_start,
        "nbest_end": nbest_end,
        "nbest_size": tf.cast(num_kept, tf.int32),
    }


@functools.lru_cache(maxsize=16)
def host_decoder(n_best_size: int, max_answer_length: int, version_2_with_negative: bool):
    """`decode_spans` as a tf.function traced once per setting (shared by every task
    instance), taking `(start_logits, end_logits, token_char_start, token_char_end,
    token_is_max_context, example_index, contexts, null_score_diff_threshold)`."""
    matrix_float = tf.TensorSpec([None, None], tf.float32)
    matrix_int = tf.TensorSpec([None, None], tf.int32)

    @tf.function(
        input_signature=[
            matrix_float,
            matrix_float,
            matrix_int,
            matrix_int,
            matrix_int,
            tf.TensorSpec([None], tf.int32),
            tf.TensorSpec([None], tf.string),
            tf.TensorSpec([], tf.float64),
        ],
        autograph=False,
    )
    def decode(start, end, char_start, char_end, max_context, example_index, contexts, threshold):
        return decode_spans(
            start,
            end,
            char_start,
            char_end,
            max_context,
            example_index,
            contexts,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
            version_2_with_negative=version_2_with_negative,
            null_score_diff_threshold=threshold,
        )

    return decode
