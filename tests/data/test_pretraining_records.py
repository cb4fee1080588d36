"""Tests for keras_bert_zoo.data.pretraining: the create_pretraining_data.py record layout."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data import pipeline, pretraining

SEQ, PRED = 16, 4


def instance(i):
    """An unpadded instance whose values encode ``i``: [CLS] a.. [SEP] b.. [SEP]."""
    n_a, n_b = 2 + i % 3, 1 + i % 4
    ids = [101] + [1000 + i] * n_a + [102] + [2000 + i] * n_b + [102]
    segments = [0] * (n_a + 2) + [1] * (n_b + 1)
    positions = [1, n_a + 2][: 1 + i % 2]
    return {
        "input_ids": ids,
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": [ids[p] for p in positions],
        "next_sentence_label": i % 2,
    }


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def padded(values, n, fill=0):
    return list(values) + [fill] * (n - len(values))


@pytest.fixture
def record_files(tmp_path):
    paths = []
    for f in range(3):
        path = str(tmp_path / f"pretrain-{f}.tfrecord")
        n = pretraining.write_pretraining_examples(
            path, (instance(10 * f + i) for i in range(5)), SEQ, PRED
        )
        assert n == 5
        paths.append(path)
    return paths


def test_feature_spec_matches_create_pretraining_data():
    spec = pretraining.pretraining_feature_spec(128, 20)
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "input_ids": ([128], tf.int64),
        "input_mask": ([128], tf.int64),
        "segment_ids": ([128], tf.int64),
        "masked_lm_positions": ([20], tf.int64),
        "masked_lm_ids": ([20], tf.int64),
        "masked_lm_weights": ([20], tf.float32),
        "next_sentence_labels": ([1], tf.int64),
    }


def test_written_records_have_the_original_layout(record_files):
    raw = next(iter(tf.data.TFRecordDataset(record_files[0])))
    example = tf.train.Example.FromString(raw.numpy())
    f = example.features.feature
    assert set(f) == set(pretraining.pretraining_feature_spec())
    inst = instance(0)
    n = len(inst["input_ids"])
    assert list(f["input_ids"].int64_list.value) == padded(inst["input_ids"], SEQ)
    assert list(f["input_mask"].int64_list.value) == [1] * n + [0] * (SEQ - n)
    assert list(f["segment_ids"].int64_list.value) == padded(inst["segment_ids"], SEQ)
    assert list(f["masked_lm_positions"].int64_list.value) == padded([1], PRED)
    assert list(f["masked_lm_ids"].int64_list.value) == padded([1000], PRED)
    assert list(f["masked_lm_weights"].float_list.value) == [1.0, 0.0, 0.0, 0.0]
    assert list(f["next_sentence_labels"].int64_list.value) == [0]
    # No temporary files are left next to the outputs.
    assert sorted(os.listdir(os.path.dirname(record_files[0]))) == [
        os.path.basename(p) for p in record_files
    ]


def test_parse_single_and_batched(record_files):
    records = [r.numpy() for r in tf.data.TFRecordDataset(record_files[1])]
    single = pretraining.parse_pretraining_examples(records[3], SEQ, PRED)
    batched = pretraining.parse_pretraining_examples(tf.constant(records), SEQ, PRED)
    expected_names = {
        "input_word_ids": (tf.int32, [SEQ]),
        "input_mask": (tf.int32, [SEQ]),
        "input_type_ids": (tf.int32, [SEQ]),
        "masked_lm_positions": (tf.int32, [PRED]),
        "masked_lm_ids": (tf.int32, [PRED]),
        "masked_lm_weights": (tf.float32, [PRED]),
        "next_sentence_labels": (tf.int32, []),
    }
    assert {k: (v.dtype, v.shape.as_list()) for k, v in single.items()} == expected_names
    assert {k: (v.dtype, v.shape.as_list()[1:]) for k, v in batched.items()} == expected_names
    inst = instance(13)
    assert single["input_word_ids"].numpy().tolist() == padded(inst["input_ids"], SEQ)
    assert single["input_type_ids"].numpy().tolist() == padded(inst["segment_ids"], SEQ)
    assert single["masked_lm_positions"].numpy().tolist() == padded([1, 5], PRED)
    assert single["masked_lm_ids"].numpy().tolist() == padded([1013, 2013], PRED)
    assert single["masked_lm_weights"].numpy().tolist() == [1.0, 1.0, 0.0, 0.0]
    assert int(single["next_sentence_labels"]) == 1
    for key in single:
        np.testing.assert_array_equal(batched[key][3], single[key])
    assert batched["next_sentence_labels"].numpy().tolist() == [0, 1, 0, 1, 0]


def test_pretraining_dataset_batches_and_shards(record_files):
    ds = pretraining.pretraining_dataset(
        record_files, 4, max_seq_length=SEQ, max_predictions_per_seq=PRED
    )
    batches = list(ds.as_numpy_iterator())
    assert [b["input_word_ids"].shape for b in batches] == [(4, SEQ)] * 3 + [(3, SEQ)]
    firsts = sorted(int(b) for batch in batches for b in batch["input_word_ids"][:, 1])
    assert firsts == sorted(1000 + 10 * f + i for f in range(3) for i in range(5))

    seen = []
    for w in range(2):
        ctx = tf.distribute.InputContext(2, w, 2)
        shard = pretraining.pretraining_dataset(
            record_files, 2, max_seq_length=SEQ, max_predictions_per_seq=PRED,
            input_context=ctx, shuffle=True, seed=5, drop_remainder=True,
        )  # fmt: skip
        spec = shard.element_spec["input_word_ids"]
        assert spec.shape.as_list() == [2, SEQ]
        seen.append([int(x) for b in shard.as_numpy_iterator() for x in b["input_word_ids"][:, 1]])
    # 3 files, 2 workers: files sharded (0, 2) and (1); drop_remainder drops 1 of 5.
    assert len(seen[0]) == 10 and len(seen[1]) == 4
    assert {x // 10 % 10 for x in seen[0]} == {0, 2} and {x // 10 % 10 for x in seen[1]} == {1}


def test_pretraining_dataset_seeded_shuffle_and_dynamic_padding(record_files):
    def run(seed):
        ds = pretraining.pretraining_dataset(
            record_files, 5, max_seq_length=SEQ, max_predictions_per_seq=PRED,
            shuffle=True, seed=seed, pad_to_longest=True,
        )  # fmt: skip
        return list(ds.as_numpy_iterator())

    a, b, c = run(1), run(1), run(2)
    firsts = [x["input_word_ids"][:, 1].tolist() for x in a]
    assert firsts == [x["input_word_ids"][:, 1].tolist() for x in b]
    assert firsts != [x["input_word_ids"][:, 1].tolist() for x in c]
    for batch in a:
        longest = batch["input_mask"].sum(axis=1).max()
        for key in ("input_word_ids", "input_mask", "input_type_ids"):
            assert batch[key].shape == (5, longest)
        assert batch["masked_lm_positions"].shape == (5, PRED)
        assert (batch["masked_lm_positions"] < longest).all()


def test_write_validates_and_is_atomic(tmp_path):
    path = str(tmp_path / "out.tfrecord")
    pretraining.write_pretraining_examples(path, [instance(0)], SEQ, PRED)
    before = read_bytes(path)

    def bad():
        yield instance(1)
        yield dict(instance(2), input_ids=[1] * (SEQ + 1), segment_ids=[0] * (SEQ + 1))

    with pytest.raises(ValueError, match="max_seq_length"):
        pretraining.write_pretraining_examples(path, bad(), SEQ, PRED)
    assert read_bytes(path) == before  # the old file is untouched
    assert os.listdir(tmp_path) == ["out.tfrecord"]  # the temporary file is removed
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        pretraining.make_pretraining_example(
            dict(instance(0), masked_lm_positions=[1] * 5, masked_lm_ids=[1] * 5),
            SEQ,
            PRED,
        )
    with pytest.raises(ValueError, match="differ"):
        pretraining.make_pretraining_example(dict(instance(0), segment_ids=[0]), SEQ, PRED)
    # GZIP-compressed files read back through the same pipeline.
    gz = str(tmp_path / "gz.tfrecord")
    pretraining.write_pretraining_examples(gz, [instance(4)], SEQ, PRED, compression_type="GZIP")
    ds = pretraining.pretraining_dataset(
        gz, 1, max_seq_length=SEQ, max_predictions_per_seq=PRED, compression_type="GZIP"
    )
    assert next(iter(ds))["input_word_ids"].numpy()[0, 1] == 1004
    assert pipeline.list_files(gz) == [gz]


@pytest.mark.slow
def test_records_feed_bert_pretrainer(record_files):
    from keras_bert_zoo.models import BertEncoder, BertPretrainer
    from keras_bert_zoo.models.pretrainer import pretraining_losses

    ds = pretraining.pretraining_dataset(
        record_files, 4, max_seq_length=SEQ, max_predictions_per_seq=PRED,
        split_labels=True, drop_remainder=True,
    )  # fmt: skip
    x, y = next(iter(ds))
    assert sorted(x) == ["input_mask", "input_type_ids", "input_word_ids", "masked_lm_positions"]
    assert sorted(y) == ["masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]
    assert y["next_sentence_labels"].shape == (4,)

    model = BertPretrainer(BertEncoder.untrained("bert_tiny_uncased"))
    model.compile(optimizer="adamw")
    history = model.fit(ds.repeat(), steps_per_epoch=2, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])
    # The loss the model reports on a batch is BERT's objective computed from these records.
    mlm, nsp = pretraining_losses(y, model(x, training=False))
    # steps=1: on a finite dataset of unknown cardinality (any file source) Keras 3.15 adds
    # one empty step at exhaustion that halves metrics updated inside compute_loss.
    evaluated = model.evaluate(ds, steps=1, verbose=0, return_dict=True)
    np.testing.assert_allclose(evaluated["loss"], float(mlm) + float(nsp), rtol=1e-4)
