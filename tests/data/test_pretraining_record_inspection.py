"""`data.pretraining_records`: what a set of pretraining record files holds, read before
training (moved from the pretraining runner with the functions). The records are
written by `data.pretraining.write_pretraining_examples`, so the lengths read back are
known; bad inputs must be named by file and flag.
"""

import pytest

from keras_bert_zoo.data.pretraining import write_pretraining_examples
from keras_bert_zoo.data.pretraining_records import (
    diagnose_records,
    inspect_records,
    list_input_files,
    list_text_files,
)

SEQ, PRED = 16, 4


def _instance(i):
    ids = [101, 1000 + i, 1001 + i, 102, 2000 + i, 102]
    return {
        "input_ids": ids,
        "segment_ids": [0, 0, 0, 0, 1, 1],
        "masked_lm_positions": [1, 4],
        "masked_lm_ids": [ids[1], ids[4]],
        "next_sentence_label": i % 2,
    }


def _write(path, count, seq=SEQ, predictions=PRED):
    write_pretraining_examples(str(path), (_instance(i) for i in range(count)), seq, predictions)
    return str(path)


def test_lengths_are_read_and_empty_files_set_aside(tmp_path):
    first = _write(tmp_path / "a.tfrecord", 3)
    second = _write(tmp_path / "b.tfrecord", 2)
    empty = tmp_path / "c.tfrecord"
    empty.write_bytes(b"")
    info = inspect_records(str(tmp_path / "*.tfrecord"))
    assert (info.max_seq_length, info.max_predictions_per_seq) == (SEQ, PRED)
    assert info.files == (first, second, str(empty))
    assert info.empty_files == (str(empty),)
    assert info.record_files == [first, second]
    # Given lengths must be the records'.
    assert inspect_records(first, max_seq_length=SEQ).max_seq_length == SEQ
    with pytest.raises(ValueError, match=r"--max_seq_length=32, but the records of --input_file"):
        inspect_records(first, max_seq_length=32)
    with pytest.raises(ValueError, match=r"predictions_per_seq=3, but the records of --eval_input"):
        inspect_records(first, flag="eval_input_file", max_predictions_per_seq=3)


def test_bad_record_sets_are_named(tmp_path):
    short = _write(tmp_path / "short.tfrecord", 2, seq=8)
    long = _write(tmp_path / "long.tfrecord", 2)
    with pytest.raises(ValueError, match="different lengths.*short.tfrecord"):
        inspect_records(f"{short},{long}")
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="hold no record.*empty.tfrecord"):
        inspect_records(str(empty))
    text = tmp_path / "notes.txt"
    text.write_text("not a record file\n", encoding="utf-8")
    with pytest.raises(ValueError, match="--eval_input_file: .*notes.txt is not a readable"):
        inspect_records(str(text), flag="eval_input_file")


def test_file_lists_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="--input_file is empty"):
        list_input_files(" , ", "input_file")
    with pytest.raises(FileNotFoundError, match="--input_file=.*nothing_here"):
        list_input_files(str(tmp_path / "nothing_here*"), "input_file")
    (tmp_path / "folder").mkdir()
    with pytest.raises(ValueError, match="matches directories"):
        list_input_files(str(tmp_path / "fold*"), "input_file")
    blank = tmp_path / "blank.txt"
    blank.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="every file is empty"):
        list_text_files(str(blank), "input_file")
    (tmp_path / "corpus.txt").write_text("a sentence .\n", encoding="utf-8")
    assert list_text_files(str(tmp_path / "*.txt"), "input_file") == [
        str(blank),
        str(tmp_path / "corpus.txt"),
    ]


def test_a_damaged_record_is_named_and_sound_files_pass(tmp_path):
    sound = _write(tmp_path / "sound.tfrecord", 20)
    assert diagnose_records([sound], SEQ, PRED, "input_file") is None
    raw = bytearray(open(sound, "rb").read())
    middle = len(raw) // 2
    raw[middle : middle + 64] = bytes(64)  # zeroed bytes: the record CRCs no longer match
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="--input_file: .*damaged.tfrecord.*damaged TFRecord"):
        diagnose_records([sound, str(damaged)], SEQ, PRED, "input_file")
