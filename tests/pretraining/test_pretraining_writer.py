"""pretraining.writer: the numpy Example encoder against protobuf, sharded atomic writing."""

import collections
import fnmatch
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data import pretraining as data_pretraining
from keras_bert_zoo.data.pretraining_records import verify_pretraining_records
from keras_bert_zoo.pretraining import writer


def random_features(count, seq, pred, vocab_size, seed=0):
    rng = np.random.default_rng(seed)
    weights = (rng.random((count, pred)) < 0.7).astype(np.float32) * rng.choice(
        [1.0, 0.5, 2.0], (count, pred)
    )
    return {
        "input_word_ids": rng.integers(0, vocab_size, (count, seq)),
        "input_mask": rng.integers(0, 2, (count, seq)),
        "input_type_ids": rng.integers(0, 2, (count, seq)),
        "masked_lm_positions": rng.integers(0, seq, (count, pred)),
        "masked_lm_ids": rng.integers(0, vocab_size, (count, pred)),
        "masked_lm_weights": weights.astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, count),
    }


def protobuf_example(features, row):
    """The same record built with tf.train.Example, as the original builds it."""

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    out = collections.OrderedDict()
    out["input_ids"] = ints(features["input_word_ids"][row])
    out["input_mask"] = ints(features["input_mask"][row])
    out["segment_ids"] = ints(features["input_type_ids"][row])
    out["masked_lm_positions"] = ints(features["masked_lm_positions"][row])
    out["masked_lm_ids"] = ints(features["masked_lm_ids"][row])
    out["masked_lm_weights"] = tf.train.Feature(
        float_list=tf.train.FloatList(value=features["masked_lm_weights"][row].tolist())
    )
    out["next_sentence_labels"] = ints([features["next_sentence_labels"][row]])
    return tf.train.Example(features=tf.train.Features(feature=out))


@pytest.mark.parametrize(
    "seq, pred, vocab_size", [(128, 20, 30522), (512, 80, 119547), (16, 3, 50), (200, 1, 2**31)]
)
def test_encoder_matches_protobuf(seq, pred, vocab_size):
    features = random_features(300, seq, pred, vocab_size)
    blob, lengths = writer.encode_pretraining_examples(features, batch_size=128)
    records = writer.split_records(blob, lengths)
    assert len(records) == 300 and sum(lengths) == len(blob)
    for row in (0, 1, 150, 299):
        assert tf.train.Example.FromString(records[row]) == protobuf_example(features, row)
    parsed = data_pretraining.parse_pretraining_examples(tf.constant(records), seq, pred)
    for name, value in features.items():
        np.testing.assert_array_equal(
            parsed[name].numpy(), value.astype(parsed[name].dtype.as_numpy_dtype)
        )


def test_encoder_order_writes_the_rows_in_that_order():
    features = random_features(300, 16, 3, 50)
    order = np.random.default_rng(4).permutation(300)
    blob, lengths = writer.encode_pretraining_examples(features, batch_size=64, order=order)
    records = writer.split_records(blob, lengths)
    assert len(records) == 300
    for position in (0, 63, 64, 299):
        expected = protobuf_example(features, order[position])
        assert tf.train.Example.FromString(records[position]) == expected


def test_expand_output_files():
    assert writer.expand_output_files("a.tfrecord") == ["a.tfrecord"]
    assert writer.expand_output_files("a, b ,c") == ["a", "b", "c"]
    assert writer.expand_output_files("out/w.tfrecord@3") == [
        "out/w.tfrecord-00000-of-00003",
        "out/w.tfrecord-00001-of-00003",
        "out/w.tfrecord-00002-of-00003",
    ]
    with pytest.raises(ValueError, match="empty"):
        writer.expand_output_files(" ")
    with pytest.raises(ValueError, match="repeat"):
        writer.expand_output_files("a,a")


def test_round_robin_and_atomic_commit(tmp_path):
    paths = [str(tmp_path / f"s{i}.tfrecord") for i in range(3)]
    with writer.ShardedRecordWriter(paths) as records:
        records.write_all([b"r%d" % i for i in range(7)])
        assert not any(os.path.exists(p) for p in paths)  # nothing under final names yet
    assert records.counts == [3, 2, 2]
    read = [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in paths]
    assert read == [[b"r0", b"r3", b"r6"], [b"r1", b"r4"], [b"r2", b"r5"]]
    assert sorted(os.listdir(tmp_path)) == ["s0.tfrecord", "s1.tfrecord", "s2.tfrecord"]


def test_failure_leaves_no_shard_and_keeps_old_files(tmp_path):
    old = tmp_path / "s0.tfrecord"
    old.write_bytes(b"previous run")
    paths = [str(old), str(tmp_path / "s1.tfrecord")]
    with pytest.raises(RuntimeError, match="crash"):
        with writer.ShardedRecordWriter(paths) as records:
            records.write_all([b"x"] * 1000)
            raise RuntimeError("crash mid-run")
    assert sorted(os.listdir(tmp_path)) == ["s0.tfrecord"]
    assert old.read_bytes() == b"previous run"


def test_verify_names_the_damaged_file_and_record(tmp_path):
    features = random_features(50, 16, 3, 100)
    blob, lengths = writer.encode_pretraining_examples(features)
    good, bad = str(tmp_path / "good.tfrecord"), str(tmp_path / "bad.tfrecord")
    with writer.ShardedRecordWriter([good, bad]) as records:
        records.write_all(writer.split_records(blob, lengths))
    assert verify_pretraining_records([good, bad], 16, 3) == {good: 25, bad: 25}
    with pytest.raises(
        ValueError, match=r"good\.tfrecord: record 0 does not match.*max_seq_length=32"
    ):
        verify_pretraining_records(good, 32, 3)
    with open(bad, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2 : len(data) // 2 + 8] = b"garbage!"
    with open(bad, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(
        ValueError, match=r"bad\.tfrecord: damaged TFRecord file after \d+ readable"
    ):
        verify_pretraining_records(str(tmp_path / "*.tfrecord"), 16, 3)


@pytest.mark.parametrize(
    "spec, expected, records_glob",
    [
        ("out/train.tfrecord@4", "out/train.stats.json", "out/train.tfrecord*"),
        ("heldout128.tfrecord", "heldout128.stats.json", "heldout128.tfrecord*"),
        ("a/x.tfrecords,b/y.tfrecords", "a/x.stats.json", "a/x.tfrecords*"),
        (
            "gs://bucket/data/train@2",
            "gs://bucket/data/train.stats.json",
            "gs://bucket/data/train-*",
        ),
    ],
)
def test_statistics_file_escapes_the_records_glob(spec, expected, records_glob):
    """Beside the records, but not among what a reader's usual glob of them matches."""
    path = writer.statistics_path(spec)
    assert path == expected
    assert all(fnmatch.fnmatch(p, records_glob) for p in writer.expand_output_files(spec)[:1])
    assert not fnmatch.fnmatch(path, records_glob)
