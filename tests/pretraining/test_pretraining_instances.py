"""pretraining.instances: the original's pair algorithm, checked against the port.

References: the literal truncation loop, invariants traced through token ids that
encode their own position, and the single-process port of the original
(benchmarks/_original_create_pretraining_data.py) run on the same documents: the
distributions of instance counts, NSP labels and lengths must agree.
"""

import random

import numpy as np
import pytest
import tensorflow as tf
from pretraining_synthetic import VOCAB, synthetic_documents

from keras_bert_zoo.pretraining import instances
from keras_bert_zoo.text.masking import PretrainingMasker


def original_truncation(length_a, length_b, max_num_tokens):
    """The original's truncate_seq_pair loop, on lengths."""
    while length_a + length_b > max_num_tokens:
        if length_a > length_b:
            length_a -= 1
        else:
            length_b -= 1
    return length_a, length_b


def test_truncated_lengths_closed_form_equals_the_loop():
    grid = np.array(
        [(a, b, m) for a in range(1, 41) for b in range(1, 41) for m in range(2, 31)], np.int64
    )
    got_a, got_b = instances.truncated_lengths(grid[:, 0], grid[:, 1], grid[:, 2])
    expected = np.array([original_truncation(*row) for row in grid.tolist()])
    np.testing.assert_array_equal(np.stack([got_a, got_b], axis=1), expected)


def traceable_documents(lengths_per_document):
    """Ragged [docs, sentences, tokens] whose token ids are their global positions."""
    flat = [n for doc in lengths_per_document for n in doc]
    ids = tf.range(sum(flat), dtype=tf.int32)
    sentences = tf.RaggedTensor.from_row_lengths(ids, flat)
    return tf.RaggedTensor.from_row_lengths(sentences, [len(d) for d in lengths_per_document])


def random_lengths(num_documents, seed, max_sentences=12, max_len=40):
    rng = np.random.default_rng(seed)
    return [
        rng.integers(1, max_len, int(rng.integers(1, max_sentences))).tolist()
        for _ in range(num_documents)
    ]


@pytest.mark.parametrize("max_seq_length, short_seq_prob", [(64, 0.1), (20, 0.5), (128, 0.0)])
def test_pair_invariants(max_seq_length, short_seq_prob):
    lengths = random_lengths(60, seed=max_seq_length)
    documents = traceable_documents(lengths)
    sentence_lengths = [n for d in lengths for n in d]
    sentence_of_token = np.repeat(np.arange(len(sentence_lengths)), sentence_lengths)
    sentence_ends = np.cumsum(sentence_lengths)
    starts, ends = (
        set((sentence_ends - sentence_lengths).tolist()),
        set((sentence_ends - 1).tolist()),
    )
    document_of_sentence = np.repeat(np.arange(len(lengths)), [len(d) for d in lengths])
    document_of_token = document_of_sentence[sentence_of_token]
    max_num_tokens = max_seq_length - 3
    pairs = instances.create_segment_pairs(
        documents, tf.constant([3, 4], tf.int64), max_seq_length, short_seq_prob
    )
    tokens_a, tokens_b = pairs["tokens_a"].to_list(), pairs["tokens_b"].to_list()
    random_next = pairs["is_random_next"].numpy()
    source = pairs["document"].numpy()
    assert len(tokens_a) > 100
    assert random_next.mean() > 0.45
    assert np.all(np.diff(source) >= 0)  # document order
    untruncated = 0
    for a, b, is_random, doc in zip(tokens_a, tokens_b, random_next, source, strict=True):
        assert 1 <= len(a) and 1 <= len(b) and len(a) + len(b) <= max_num_tokens
        # Each segment is one contiguous run of a document's tokens.
        assert a == list(range(a[0], a[-1] + 1)) and b == list(range(b[0], b[-1] + 1))
        assert set(document_of_token[a]) == {doc}
        if is_random:
            assert document_of_token[b[0]] != doc  # 60 documents: ten tries never fail
        else:
            assert document_of_token[b[0]] == doc and b[0] > a[-1]
        if len(a) + len(b) < max_num_tokens:
            # Nothing was truncated: whole sentences, and an actual next B starts
            # right where A ends.
            untruncated += 1
            assert a[0] in starts and a[-1] in ends and b[0] in starts and b[-1] in ends
            if not is_random:
                assert b[0] == a[-1] + 1
    assert untruncated > 10


def test_one_sentence_documents_and_single_document_blocks():
    pairs = instances.create_segment_pairs(
        traceable_documents([[5], [7], [3]]), tf.constant([1, 1], tf.int64), 32, 0.0
    )
    assert pairs["is_random_next"].numpy().tolist() == [True, True, True]
    # One document: "random next" comes from the document itself, as in the original.
    pairs = instances.create_segment_pairs(
        traceable_documents([[5]]), tf.constant([1, 1], tf.int64), 32, 0.0
    )
    assert pairs["tokens_a"].to_list() == [[0, 1, 2, 3, 4]]
    assert pairs["is_random_next"].numpy().tolist() == [True]
    # No document at all: no instance, no error.
    empty = tf.RaggedTensor.from_row_lengths(
        tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64)),
        tf.zeros([0], tf.int64),
    )
    pairs = instances.create_segment_pairs(empty, tf.constant([1, 1], tf.int64), 32, 0.1)
    assert pairs["tokens_a"].nrows().numpy() == 0


def pair_statistics(pairs, max_num_tokens):
    lengths = np.array([(len(a), len(b)) for a, b, _ in pairs])
    total = lengths.sum(axis=1)
    return {
        "count": len(pairs),
        "random_next": np.mean([r for _, _, r in pairs]),
        "mean_tokens": total.mean(),
        "short": np.mean(total < max_num_tokens - 20),
        "share_a": np.mean(lengths[:, 0] / total),
    }


def test_pair_distribution_matches_the_port(port, monkeypatch):
    """Ours and the port on the same tokenized documents, many passes each."""
    tokenizer_vocab = {t: i for i, t in enumerate(VOCAB)}
    documents = [
        [s.lower().replace(".", " .").split() for s in doc]  # words of syllables
        for doc in synthetic_documents(80, seed=11)
    ]
    basic = port.WordpieceTokenizer(tokenizer_vocab)
    documents = [[basic.tokenize(" ".join(s)) for s in doc] for doc in documents]
    max_seq_length, passes = 64, 15
    # The port's masking plays no part in the pairs; skip it (and its cost).
    monkeypatch.setattr(
        port, "create_masked_lm_predictions", lambda tokens, *a, **k: (tokens, [], [])
    )
    rng = random.Random(5)
    port_pairs = []
    for _ in range(passes):
        for index in range(len(documents)):
            for instance in port.create_instances_from_document(
                documents, index, max_seq_length, 0.1, 0.15, 20, VOCAB, rng
            ):
                sep = instance.tokens.index("[SEP]")
                length_b = len(instance.tokens) - sep - 2
                port_pairs.append((instance.tokens[1:sep], [0] * length_b, instance.is_random_next))
    ids = [[[tokenizer_vocab[t] for t in s] for s in doc] for doc in documents]
    ragged = tf.ragged.constant(ids, tf.int32, ragged_rank=2)
    our_pairs = []
    for p in range(passes):
        out = instances.create_segment_pairs(
            ragged, tf.constant([9, p], tf.int64), max_seq_length, 0.1
        )
        our_pairs.extend(
            zip(
                out["tokens_a"].to_list(),
                out["tokens_b"].to_list(),
                out["is_random_next"].numpy(),
                strict=True,
            )
        )
    ours, theirs = pair_statistics(our_pairs, 61), pair_statistics(port_pairs, 61)
    assert abs(ours["count"] / theirs["count"] - 1) < 0.02, (ours, theirs)
    assert abs(ours["random_next"] - theirs["random_next"]) < 0.015, (ours, theirs)
    assert abs(ours["mean_tokens"] / theirs["mean_tokens"] - 1) < 0.02, (ours, theirs)
    assert abs(ours["short"] - theirs["short"]) < 0.015, (ours, theirs)
    assert abs(ours["share_a"] - theirs["share_a"]) < 0.015, (ours, theirs)


def test_pretraining_instances_layout_and_seeds(vocab_file):
    masker = PretrainingMasker(vocab_file, 10, 0.15)
    cls, sep = VOCAB.index("[CLS]"), VOCAB.index("[SEP]")
    rng = np.random.default_rng(0)
    ids = [
        [rng.integers(5, len(VOCAB), int(n)).tolist() for n in doc] for doc in random_lengths(30, 1)
    ]
    documents = tf.ragged.constant(ids, tf.int32, ragged_rank=2)
    out = instances.create_pretraining_instances(
        documents, tf.constant([1, 2], tf.int64), masker, 48, 0.1
    )
    out = {k: v.numpy() for k, v in out.items()}
    n = len(out["next_sentence_labels"])
    assert n > 50
    assert out["input_word_ids"].shape == (n, 48) and out["masked_lm_ids"].shape == (n, 10)
    assert all(
        v.dtype == (np.float32 if k == "masked_lm_weights" else np.int32) for k, v in out.items()
    )
    for row in range(n):
        length = out["input_mask"][row].sum()
        assert np.all(out["input_mask"][row, :length] == 1) and np.all(
            out["input_mask"][row, length:] == 0
        )
        tokens, segments = out["input_word_ids"][row], out["input_type_ids"][row]
        assert tokens[0] == cls and tokens[length - 1] == sep and np.all(tokens[length:] == 0)
        first_sep = int(np.flatnonzero(segments[:length] == 1)[0]) - 1
        assert tokens[first_sep] == sep and np.all(segments[: first_sep + 1] == 0)
        assert np.all(segments[first_sep + 1 : length] == 1) and np.all(segments[length:] == 0)
        count = int(out["masked_lm_weights"][row].sum())
        assert count == min(10, max(1, round(length * 0.15)), length - 3)
        positions = out["masked_lm_positions"][row, :count]
        assert np.all(np.diff(positions) > 0) and np.all(
            out["masked_lm_positions"][row, count:] == 0
        )
        assert not set(positions) & {0, first_sep, length - 1}
    again = instances.create_pretraining_instances(
        documents, tf.constant([1, 2], tf.int64), masker, 48, 0.1
    )
    assert all(np.array_equal(again[k].numpy(), out[k]) for k in out)
    other = instances.create_pretraining_instances(
        documents, tf.constant([1, 3], tf.int64), masker, 48, 0.1
    )
    assert not np.array_equal(
        other["masked_lm_positions"].numpy()[:10], out["masked_lm_positions"][:10]
    )
