"""`data.teacher_outputs`: the distillation teacher's outputs written once and read back
in feature order, checked against the arrays that went in and TensorFlow's own parser."""

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data.teacher_outputs import TeacherOutputsCache
from keras_bert_zoo.inputs import TEACHER_OUTPUTS

INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _features(rows=10, seq_len=6, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_word_ids": rng.integers(0, 50, (rows, seq_len)).astype(np.int32),
        "input_mask": np.ones((rows, seq_len), np.int32),
        "input_type_ids": np.zeros((rows, seq_len), np.int32),
        "label": np.arange(rows, dtype=np.int32),
    }


def _span_outputs(features):
    """A stand-in teacher with two outputs of different shapes (SQuAD's span heads)."""
    ids = features["input_word_ids"].astype(np.float32)
    return {"start_logits": ids * 0.5, "end_logits": ids[:, :3] - 1.25}


def _batches(features, outputs_of, batch_size):
    dataset = tf.data.Dataset.from_tensor_slices(features).batch(batch_size)
    for batch in dataset.as_numpy_iterator():
        yield batch, outputs_of(batch)


def test_outputs_come_back_in_feature_order_beside_their_features(tmp_path):
    features = _features()
    cache = TeacherOutputsCache(str(tmp_path))
    meta = cache.write(_batches(features, _span_outputs, 4), INPUTS, num_rows=10)
    assert meta["rows"] == 10
    assert meta["outputs"] == {"start_logits": [6], "end_logits": [3]}
    assert json.loads((tmp_path / "teacher_outputs.json").read_text()) == meta

    expected = _span_outputs(features)
    attached = list(cache.attach(tf.data.Dataset.from_tensor_slices(features)).as_numpy_iterator())
    assert len(attached) == 10
    for index, row in enumerate(attached):
        np.testing.assert_array_equal(row["input_word_ids"], features["input_word_ids"][index])
        assert row["label"] == index
        for name in ("start_logits", "end_logits"):
            np.testing.assert_array_equal(row[TEACHER_OUTPUTS][name], expected[name][index])

    # The records are plain tf.train.Examples, one per feature.
    spec = {"end_logits": tf.io.FixedLenFeature([3], tf.float32)}
    records = tf.data.TFRecordDataset(str(tmp_path / "teacher_outputs.tfrecord"))
    parsed = [tf.io.parse_single_example(r, spec)["end_logits"].numpy() for r in records]
    np.testing.assert_array_equal(np.stack(parsed), expected["end_logits"])


def test_a_single_output_model_reads_back_as_one_tensor(tmp_path):
    features = _features(rows=5)
    logits = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    cache = TeacherOutputsCache(str(tmp_path))
    cache.write([(features, logits)], INPUTS)
    read = np.stack(list(cache.dataset().as_numpy_iterator()))
    np.testing.assert_array_equal(read, logits)


def test_the_cache_matches_the_same_features_at_any_batch_size_and_no_others(tmp_path):
    features = _features(rows=9)
    cache = TeacherOutputsCache(str(tmp_path))
    assert not cache.matches(tf.data.Dataset.from_tensor_slices(features), INPUTS)
    cache.write(_batches(features, _span_outputs, 2), INPUTS)
    assert cache.matches(tf.data.Dataset.from_tensor_slices(features), INPUTS)

    changed = {**features, "input_word_ids": features["input_word_ids"].copy()}
    changed["input_word_ids"][4, 2] += 1
    assert not cache.matches(tf.data.Dataset.from_tensor_slices(changed), INPUTS)
    fewer = {key: value[:8] for key, value in features.items()}
    assert not cache.matches(tf.data.Dataset.from_tensor_slices(fewer), INPUTS)
    # Labels are not the teacher's input: they may change.
    relabelled = {**features, "label": features["label"][::-1].copy()}
    assert cache.matches(tf.data.Dataset.from_tensor_slices(relabelled), INPUTS)


def test_a_write_that_fails_leaves_neither_file_and_the_old_cache_unreadable(tmp_path):
    features = _features(rows=8)
    cache = TeacherOutputsCache(str(tmp_path))
    cache.write(_batches(features, _span_outputs, 4), INPUTS)

    def failing():
        batches = _batches(_features(rows=8, seed=5), _span_outputs, 4)
        yield next(batches)
        raise KeyboardInterrupt  # as a Ctrl-C in the middle of the teacher's pass

    with pytest.raises(KeyboardInterrupt):
        cache.write(failing(), INPUTS)
    # The old records stay under their name, but without their description they are
    # never read as a cache: a rerun computes them again.
    assert not (tmp_path / "teacher_outputs.json").exists()
    assert cache.meta() is None
    assert not cache.matches(tf.data.Dataset.from_tensor_slices(features), INPUTS)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_progress_rate_starts_at_the_first_batch(tmp_path, monkeypatch, caplog):
    """The pipeline's wait for its first batch (sorted windows filling) is not part of
    the rate: 100 s of wait, then 4 rows a second, must log 4/s and the ETA of the rest."""
    from keras_bert_zoo.data import teacher_outputs

    clock = iter([0.0, 100.0, 101.0, 102.0])  # start, then after each of 3 batches
    monkeypatch.setattr(teacher_outputs.time, "monotonic", lambda: next(clock, 103.0))
    monkeypatch.setattr(teacher_outputs, "_LOG_EVERY_SECONDS", 0)
    features = _features(rows=12)
    with caplog.at_level("INFO", logger=teacher_outputs.__name__):
        TeacherOutputsCache(str(tmp_path)).write(
            _batches(features, _span_outputs, 4), INPUTS, num_rows=20
        )
    lines = [r.getMessage() for r in caplog.records if "of 20 training features" in r.message]
    assert lines == [
        "Teacher outputs: 8 of 20 training features (4/s), ETA 3 s",
        "Teacher outputs: 12 of 20 training features (4/s), ETA 2 s",
    ]
