"""Sentence tasks on documents longer than the model (`long_documents=windows`).

References: a numpy restatement of google-research/bert's `doc_spans` for the window
boundaries and the packed ids (over a vocabulary where every word is one piece, so the
ids are read from the vocabulary, not the tokenizer); the mean / maximum over each
document's windows computed here from the model's own outputs; scikit-learn for the
metrics of a windowed run; `postprocess` for the exported model's answers on documents
of 1, 2 and 10 windows (single-label and multi-label).
"""

import json
import logging
import pathlib
import random
import sys

import keras
import numpy as np
import pytest
import sklearn.metrics
import tensorflow as tf

from keras_bert_zoo import tasks
from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.runners import finetuning
from keras_bert_zoo.tasks.sentence.windows import SentenceWindowPreprocessor
from keras_bert_zoo.text import BertTokenizer

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import finetuning_test_helpers as helpers  # noqa: E402
import sentence_fixtures as fixtures  # noqa: E402

VOCAB = fixtures.VOCABULARY
WORDS = fixtures.FILLERS + fixtures.KEYWORDS
CLS, SEP, PAD = VOCAB.index("[CLS]"), VOCAB.index("[SEP]"), VOCAB.index("[PAD]")


def reference_windows(first, document, sequence_length, stride):
    """google-research/bert's doc_spans, restated: `[(ids, type_ids, start, length)]`."""
    first_ids = [] if first is None else [VOCAB.index(w) for w in first.split()]
    first_ids = first_ids[: (sequence_length - 3) // 2]
    ids = [VOCAB.index(w) for w in document.split()]
    room = sequence_length - 2 if first is None else sequence_length - 3 - len(first_ids)
    stride = min(stride, room)
    starts = [0]
    while starts[-1] + room < len(ids):
        starts.append(starts[-1] + stride)
    windows = []
    for start in starts:
        piece = ids[start : start + room]
        if first is None:
            packed = [CLS, *piece, SEP]
            types = [0] * len(packed)
        else:
            packed = [CLS, *first_ids, SEP, *piece, SEP]
            types = [0] * (len(first_ids) + 2) + [1] * (len(piece) + 1)
        pad = sequence_length - len(packed)
        windows.append((packed + [PAD] * pad, types + [0] * pad, start, len(piece)))
    return windows


@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("sequence_length,stride", [(8, 3), (12, 12), (16, 5), (9, 100)])
def test_windows_match_a_numpy_restatement_of_doc_spans(pair, sequence_length, stride):
    rng = random.Random(sequence_length * 7 + stride + pair)
    documents = [" ".join(rng.choices(WORDS, k=n)) for n in (0, 1, 5, 6, 7, 23, 60)]
    firsts = [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in documents]
    layer = SentenceWindowPreprocessor(
        BertTokenizer(VOCAB, lowercase=True),
        sequence_length=sequence_length,
        window_stride=stride,
        num_texts=2 if pair else 1,
    )
    inputs = (tf.constant(firsts), tf.constant(documents)) if pair else tf.constant(documents)
    out = {key: value.numpy() for key, value in layer(inputs).items()}
    expected = []
    for row, (first, document) in enumerate(zip(firsts, documents, strict=True)):
        for window in reference_windows(first if pair else None, document, sequence_length, stride):
            expected.append((row, *window))
    assert out["row_index"].tolist() == [e[0] for e in expected]
    assert out["input_word_ids"].tolist() == [e[1] for e in expected]
    assert out["input_type_ids"].tolist() == [e[2] for e in expected]
    assert out["window_start"].tolist() == [e[3] for e in expected]
    assert out["window_length"].tolist() == [e[4] for e in expected]
    assert out["input_mask"].tolist() == [[int(i != PAD) for i in e[1]] for e in expected]


def google_doc_spans(length, room, stride):
    """run_squad.py's loop, as written there: `[(start, length)]`."""
    spans, start_offset = [], 0
    while start_offset < length:
        span_length = min(length - start_offset, room)
        spans.append((start_offset, span_length))
        if start_offset + span_length == length:
            break
        start_offset += min(span_length, stride)
    return spans or [(0, 0)]  # an empty text still gets its one (empty) window


def test_strided_windows_are_run_squads_doc_spans():
    from keras_bert_zoo.tasks._shared import strided_windows

    for stride in (1, 2, 3, 7, 100):
        rng = random.Random(stride)
        lengths = [0, 1, 2, 5, 9, 10, 11, 40] + [rng.randint(0, 60) for _ in range(8)]
        rooms = [rng.randint(1, 12) for _ in lengths]
        rows, starts, sizes = (
            tensor.numpy().tolist()
            for tensor in strided_windows(
                tf.constant(lengths, tf.int64), tf.constant(rooms, tf.int64), stride
            )
        )
        expected = [
            (row, start, size)
            for row, (length, room) in enumerate(zip(lengths, rooms, strict=True))
            for start, size in google_doc_spans(length, room, stride)
        ]
        assert list(zip(rows, starts, sizes, strict=True)) == expected, stride


def _labelled_documents(path, rows):
    lines = ["text\tlabel"] + [f"{text}\t{label}" for text, label in rows]
    pathlib.Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _needle_rows(count, seed, words=(20, 90)):
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label = fixtures.BINARY[str(i % 2)]
        text, _ = fixtures.long_document(rng, rng.randint(*words), label)
        rows.append((text, str(i % 2)))
    return rows


@pytest.mark.slow
def test_windowed_run_trains_on_windows_and_answers_per_document(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    _labelled_documents(root / "train.tsv", _needle_rows(32, 1))
    _labelled_documents(root / "dev.tsv", _needle_rows(12, 2))
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "tiny", VOCAB)
    run_dir = tmp_path / "run"
    result = finetuning.run_finetuning(
        helpers.quick_config(
            task="text_classification",
            mode="train_and_eval",
            data_dir=str(root),
            init_checkpoint=checkpoint,
            output_dir=str(run_dir),
            max_seq_length=16,
            train_batch_size=8,
            num_train_steps=24,
            task_options={
                "long_documents": "windows",
                "window_stride": 7,
                "window_aggregation": "max",
            },
        )
    )
    task, model, preprocessor = result.task, result.model, result.preprocessor
    dev = task.read("dev")
    # Each document's answer is the per-label maximum of its windows' softmax, computed
    # here from the model on each document's windows alone.
    records = [
        json.loads(line)
        for line in (run_dir / "predictions" / "predictions_dev.jsonl").read_text().splitlines()
    ]
    for example, record in zip(dev, records, strict=True):
        windows = preprocessor(tf.constant([example.texts[0]]))
        assert windows["input_word_ids"].shape[0] > 1
        logits = np.asarray(
            model({k: windows[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}),
            np.float64,
        )
        softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        expected = softmax.max(axis=0)
        got = [record["probabilities"][name] for name in task.label_names]
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert record["label"] == task.label_names[int(expected.argmax())]
    written = json.loads((run_dir / "eval_results.json").read_text())["results"]["dev"]
    assert written["accuracy"] == pytest.approx(
        sklearn.metrics.accuracy_score([e.label for e in dev], [r["label"] for r in records]),
        abs=1e-9,
    )
    # Training saw one row per window, each with its document's label.
    train = task.read("train")
    features = list(task.features(train, preprocessor, training=True).as_numpy_iterator())
    counts = np.bincount([f["example_index"] for f in features], minlength=len(train))
    assert (counts > 1).all()
    for feature in features:
        assert feature["label"] == task.label_names.index(train[feature["example_index"]].label)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["single_mean", "multi_label_max"])
def test_served_answer_equals_postprocess_for_1_2_and_10_windows(kind, tmp_path):
    from keras_bert_zoo import serving

    root = tmp_path / "data"
    root.mkdir()
    multi = kind.startswith("multi")
    if multi:
        fixtures.write_multi_label_tsv(str(root / "train.tsv"), fixtures.multi_label_rows(8, 1))
        options = {"multi_label": True, "label_column": "labels", "window_aggregation": "max"}
    else:
        _labelled_documents(root / "train.tsv", _needle_rows(8, 1))
        options = {"window_aggregation": "mean"}
    sequence_length, stride = 16, 10
    task = tasks.create_task(
        "text_classification",
        data_dir=str(root),
        max_seq_length=sequence_length,
        long_documents="windows",
        window_stride=stride,
        **options,
    )
    task.read("train")
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(vocab_size=len(VOCAB), **helpers.TINY_ENCODER)
    model = task.build_model(encoder)
    preprocessor = task.make_preprocessor(tokenizer)
    # 14 pieces of room, stride 10: 10 windows need 14 + 8 * 10 + 1 = 95 pieces.
    rng = random.Random(5)
    lengths = {1: 9, 2: 20, 10: 95}
    texts = [
        fixtures.long_document(rng, n, rng.choice(fixtures.KEYWORDS))[0] for n in lengths.values()
    ]
    examples = task.examples_from_texts(texts)
    windows = preprocessor(tf.constant(texts))
    assert np.bincount(windows["row_index"].numpy()).tolist() == list(lengths)
    answers = tasks.predict(task, model, examples, preprocessor)
    exported = serving.export(
        serving.ModelSource(task, model, tokenizer),
        str(tmp_path / "serving"),
        model_name="long",
        verify=False,  # compared with postprocess below
    )
    served = tf.saved_model.load(exported.path).signatures["serving_default"](
        text=tf.constant(texts)
    )
    probabilities = np.array([[a.probabilities[n] for n in task.label_names] for a in answers])
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    if multi:
        served_labels = [
            tuple(label.decode() for label in row[:count])
            for row, count in zip(
                served["labels"].numpy(), served["label_count"].numpy(), strict=True
            )
        ]
        assert served_labels == [a.labels for a in answers]
    else:
        assert [label.decode() for label in served["label"].numpy()] == [a.label for a in answers]


@pytest.mark.slow
def test_epochs_and_steps_count_windows_and_the_log_says_both(tmp_path, caplog):
    root = tmp_path / "data"
    root.mkdir()
    rows = _needle_rows(20, 3)
    _labelled_documents(root / "train.tsv", rows)
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "tiny", VOCAB)
    config = helpers.quick_config(
        task="text_classification",
        mode="train",
        data_dir=str(root),
        init_checkpoint=checkpoint,
        output_dir=str(tmp_path / "run"),
        max_seq_length=16,
        train_batch_size=8,
        num_train_steps=None,
        num_train_epochs=2.0,
        task_options={"long_documents": "windows", "window_stride": 7},
    )
    job = finetuning.FinetuningJob(config)
    job.prepare(strategy=None)
    windows = sum(len(reference_windows(None, text, 16, 7)) for text, _ in rows)
    assert windows > 2 * len(rows)
    assert job.num_training_features == windows
    assert job.count_train_steps() == int(windows / 8 * 2.0)
    job.num_train_steps = job.count_train_steps()
    with caplog.at_level(logging.INFO):
        job.log_plan()
    assert f"20 training examples in {windows} windows, {job.num_train_steps} steps" in caplog.text
    assert f"({job.num_train_steps / (windows / 8):.3g} epochs)" in caplog.text
