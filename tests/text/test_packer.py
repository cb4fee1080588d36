"""BertPacker layouts against hand-written expectations."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertPacker

CLS, SEP = 101, 102


def ragged(rows):
    return tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)


def pack(segments, sequence_length, **kwargs):
    packer = BertPacker(sequence_length, start_value=CLS, end_value=SEP, pad_value=0, **kwargs)
    out = packer([ragged(s) for s in segments])
    assert all(v.dtype == tf.int32 for v in out.values())
    return {k: v.numpy().tolist() for k, v in out.items()}


def test_single_segment_fixed_padding():
    out = pack([[[1, 2, 3], [4]]], 6)
    assert out["input_word_ids"] == [[CLS, 1, 2, 3, SEP, 0], [CLS, 4, SEP, 0, 0, 0]]
    assert out["input_mask"] == [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]]
    assert out["input_type_ids"] == [[0] * 6, [0] * 6]


def test_single_segment_truncated():
    out = pack([[[1, 2, 3, 4, 5, 6]]], 5)
    assert out["input_word_ids"] == [[CLS, 1, 2, 3, SEP]]
    assert out["input_mask"] == [[1, 1, 1, 1, 1]]


@pytest.mark.parametrize("truncate", ["longest_first", "round_robin"])
def test_pair_truncation(truncate):
    # Budget 5 for a=5, b=3: a->4, a->3, tie -> pop b (the later segment) -> b=2.
    out = pack([[[1, 2, 3, 4, 5]], [[11, 12, 13]]], 8, truncate=truncate)
    assert out["input_word_ids"] == [[CLS, 1, 2, 3, SEP, 11, 12, SEP]]
    assert out["input_type_ids"] == [[0, 0, 0, 0, 0, 1, 1, 1]]
    assert out["input_mask"] == [[1] * 8]
    # Equal lengths, budget 4: b->2 first, then a->2.
    out = pack([[[1, 2, 3]], [[11, 12, 13]]], 7, truncate=truncate)
    assert out["input_word_ids"] == [[CLS, 1, 2, SEP, 11, 12, SEP]]
    # Budget 5 with equal lengths: only b loses a token.
    out = pack([[[1, 2, 3]], [[11, 12, 13]]], 8, truncate=truncate)
    assert out["input_word_ids"] == [[CLS, 1, 2, 3, SEP, 11, 12, SEP]]
    # The short segment is untouched when the long one absorbs the cut.
    out = pack([[[1]], [[11, 12, 13, 14, 15, 16]]], 7, truncate=truncate)
    assert out["input_word_ids"] == [[CLS, 1, SEP, 11, 12, 13, SEP]]
    assert out["input_type_ids"] == [[0, 0, 0, 1, 1, 1, 1]]


@pytest.mark.parametrize("truncate", ["longest_first", "round_robin"])
def test_triple_truncation(truncate):
    # Budget 5 for 4,2,3: a->3; a,c tie -> c->2; a->2; three-way tie -> c->1.
    out = pack([[[1, 2, 3, 4]], [[11, 12]], [[21, 22, 23]]], 9, truncate=truncate)
    assert out["input_word_ids"] == [[CLS, 1, 2, SEP, 11, 12, SEP, 21, SEP]]
    assert out["input_type_ids"] == [[0, 0, 0, 0, 1, 1, 1, 2, 2]]
    assert out["input_mask"] == [[1] * 9]


def test_triple_no_truncation_fixed_padding():
    out = pack([[[1]], [[11]], [[21, 22]]], 10)
    assert out["input_word_ids"] == [[CLS, 1, SEP, 11, SEP, 21, 22, SEP, 0, 0]]
    assert out["input_type_ids"] == [[0, 0, 0, 1, 1, 2, 2, 2, 0, 0]]
    assert out["input_mask"] == [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]]


def test_waterfall_fills_first_segment_first():
    out = pack([[[1, 2, 3, 4, 5]], [[11, 12, 13]]], 8, truncate="waterfall")
    assert out["input_word_ids"] == [[CLS, 1, 2, 3, 4, 5, SEP, SEP]]


def test_pad_to_longest():
    out = pack([[[1, 2], [3], []], [[11], [12, 13, 14], []]], 16, pad_to="longest")
    assert out["input_word_ids"] == [
        [CLS, 1, 2, SEP, 11, SEP, 0],
        [CLS, 3, SEP, 12, 13, 14, SEP],
        [CLS, SEP, SEP, 0, 0, 0, 0],
    ]
    assert out["input_type_ids"] == [
        [0, 0, 0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1, 1, 1],
        [0, 0, 1, 0, 0, 0, 0],
    ]
    assert out["input_mask"] == [
        [1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 0, 0, 0, 0],
    ]


def test_pad_to_longest_still_truncates():
    out = pack([[[1, 2, 3, 4, 5, 6, 7, 8]]], 5, pad_to="longest")
    assert out["input_word_ids"] == [[CLS, 1, 2, 3, SEP]]


def test_words_by_pieces_input_is_flattened():
    packer = BertPacker(6, start_value=CLS, end_value=SEP)
    pieces = tf.ragged.constant([[[1, 2], [3]]], dtype=tf.int32)
    assert packer(pieces)["input_word_ids"].numpy().tolist() == [[CLS, 1, 2, 3, SEP, 0]]


def truncate_seq_pair_like(lengths, budget):
    """google-research/bert's pop loop, generalised to k segments (ties: last)."""
    lengths = list(lengths)
    while sum(lengths) > budget:
        longest = max(lengths)
        last = max(i for i, n in enumerate(lengths) if n == longest)
        lengths[last] -= 1
    return lengths


@pytest.mark.parametrize("truncate", ["longest_first", "round_robin"])
def test_truncation_keeps_the_lengths_of_the_pop_loop(truncate):
    for k in (1, 2, 3):
        rows = list(itertools.product(range(0, 6), repeat=k))
        segments = [[[7] * row[i] for row in rows] for i in range(k)]
        for budget in range(0, 10):
            out = pack(segments, budget + k + 1, truncate=truncate)
            types, mask = np.array(out["input_type_ids"]), np.array(out["input_mask"])
            # Real tokens of segment i, less its [SEP] (and [CLS] for the first).
            got = [
                [int(((t == i) & (m == 1)).sum()) - 1 - (i == 0) for i in range(k)]
                for t, m in zip(types, mask, strict=True)
            ]
            assert got == [truncate_seq_pair_like(row, budget) for row in rows], (k, budget)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="truncate"):
        BertPacker(8, truncate="middle")
    with pytest.raises(ValueError, match="pad_to"):
        BertPacker(8, pad_to="bucket")
    with pytest.raises(ValueError, match="1 to 3"):
        BertPacker(8)([ragged([[1]])] * 4)
    with pytest.raises(ValueError, match="special tokens"):
        BertPacker(3)([ragged([[1]])] * 3)


def test_config_round_trip_and_graph_mode():
    packer = BertPacker(7, start_value=2, end_value=3, pad_value=0, truncate="round_robin")
    clone = BertPacker.from_config(packer.get_config())
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(packer))
    a, b = ragged([[5, 6, 7, 8], [9]]), ragged([[10, 11, 12], []])
    fn = tf.function(lambda x, y: clone((x, y)))
    for layer_out in (packer((a, b)), fn(a, b), restored((a, b))):
        np.testing.assert_array_equal(
            layer_out["input_word_ids"], [[2, 5, 6, 3, 10, 11, 3], [2, 9, 3, 3, 0, 0, 0]]
        )


def test_round_robin_lengths_match_tensorflow_text_trimmer():
    import tensorflow_text as tf_text

    from keras_bert_zoo.text.packer import round_robin_lengths

    rng = np.random.default_rng(0)
    for k in (1, 2, 3):
        lengths = rng.integers(0, 60, size=(400, k))
        for budget in (0, 1, 7, 31, 64, 200):
            segments = [
                tf.RaggedTensor.from_row_lengths(
                    tf.zeros([int(lengths[:, i].sum())], tf.int32), lengths[:, i]
                )
                for i in range(k)
            ]
            trimmed = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
            expected = np.stack([t.row_lengths().numpy() for t in trimmed], axis=1)
            got = round_robin_lengths(tf.constant(lengths), budget).numpy()
            np.testing.assert_array_equal(got, expected, err_msg=f"k={k} budget={budget}")


def test_sequence_length_given_at_call_time_as_a_tensor():
    packer = BertPacker(16, start_value=CLS, end_value=SEP, pad_value=0)
    a, b = ragged([[1, 2, 3, 4, 5], [6]]), ragged([[11, 12, 13], []])
    fn = tf.function(
        lambda x, y, n: packer((x, y), sequence_length=n),
        input_signature=[
            tf.RaggedTensorSpec([None, None], tf.int32, 1, tf.int64),
            tf.RaggedTensorSpec([None, None], tf.int32, 1, tf.int64),
            tf.TensorSpec([], tf.int32),
        ],
    )
    for length in (5, 8, 12):
        expected = BertPacker(length, start_value=CLS, end_value=SEP, pad_value=0)((a, b))
        got = fn(a, b, tf.constant(length))
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
    with pytest.raises(tf.errors.InvalidArgumentError, match="special tokens"):
        fn(a, b, tf.constant(2))


def test_empty_batch_padded_to_longest_keeps_the_special_token_positions():
    packer = BertPacker(16, start_value=CLS, end_value=SEP, pad_to="longest")
    empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    assert packer((empty, empty))["input_word_ids"].shape == (0, 3)


def test_truncation_runs_on_core_ops_only():
    """No tensorflow-text op in the packing graph: an exported model does not need
    the server to have tensorflow-text's trimmer kernels."""
    from keras_bert_zoo.serving.ops import tensorflow_text_op_libraries

    for truncate in ("longest_first", "round_robin"):
        packer = BertPacker(8, truncate=truncate)
        spec = tf.RaggedTensorSpec([None, None], tf.int32, 1, tf.int64)
        graph = (
            tf.function(lambda x, y, packer=packer: packer((x, y)))
            .get_concrete_function(spec, spec)
            .graph.as_graph_def()
        )
        op_types = {node.op for node in graph.node}
        for function in graph.library.function:
            op_types |= {node.op for node in function.node_def}
        assert not op_types & set(tensorflow_text_op_libraries()), truncate
