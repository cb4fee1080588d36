"""Multiple choice tasks (`swag`, `multiple_choice`): readers of the official SWAG CSV
and JSON lines, the pair packing, end to end training, accuracy against scikit-learn
and the `id,label,scores` prediction files."""

import csv
import json
import random
import string
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import accuracy_score

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks import multiple_choice
from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *string.ascii_lowercase,
    *(f"##{c}" for c in string.ascii_lowercase),
    ".",
    ",",
    "she",
    "he",
    "the",
]

SWAG_HEADER = [
    "",
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]
SUBJECTS = ["She", "He", "The man", "A girl"]
CONTEXTS = ["walks into the kitchen.", "picks up a guitar.", "stands on the stage."]
GOOD = ["smiles at the crowd.", "waves happily.", "smiles and waves."]
BAD = [
    "is a lamp, purple.",
    "table the eats fork.",
    "swims the desk quickly, red.",
    "car blue sleeps.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def tiny_encoder(seed=0):
    from keras_bert_zoo.models import BertEncoder

    keras.utils.set_random_seed(seed)
    return BertEncoder(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )


def swag_rows(seed, count, labelled=True):
    """Rows in the official layout; the right ending is always a plausible one."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        subject = rng.choice(SUBJECTS)
        sent1 = f"{subject} {rng.choice(CONTEXTS)}"
        sent2 = rng.choice(["She", "He", "Then the man", ""])
        label = rng.randrange(4)
        endings = rng.sample(BAD, 3)
        endings.insert(label, rng.choice(GOOD))
        row = [
            str(index),
            "anetv_x",
            str(5000 + index),
            f"{sent1} {sent2}".strip(),
            sent1,
            sent2,
            "gold",
        ]
        rows.append(row + endings + ([str(label)] if labelled else []))
    return rows


def write_swag(path, rows, labelled=True):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SWAG_HEADER if labelled else SWAG_HEADER[:-1])
        writer.writerows(rows)


# === Readers ===


def test_swag_reader_takes_the_official_csv(tmp_path):
    rows = swag_rows(0, 5)
    write_swag(tmp_path / "val.csv", rows)
    write_swag(tmp_path / "test.csv", swag_rows(1, 3, labelled=False), labelled=False)
    task = tasks.create_task("swag", data_dir=str(tmp_path))
    examples = task.read("dev")
    assert [e.example_id for e in examples] == [r[2] for r in rows]
    assert [e.context for e in examples] == [r[4] for r in rows]
    assert [e.choice_prefix for e in examples] == [r[5] for r in rows]
    assert [list(e.choices) for e in examples] == [r[7:11] for r in rows]
    assert [e.label for e in examples] == [int(r[11]) for r in rows]
    assert examples[2].source == f"{tmp_path / 'val.csv'}:4"
    assert all(e.label is None for e in task.read("test"))
    assert task.num_choices == 4 and task.primary_metric == "accuracy"


@pytest.mark.parametrize(
    "row_edit,message",
    [
        (lambda r: r[:10], r"val\.csv:3: ending3 is missing or empty"),
        (lambda r: r[:8] + ["  "] + r[9:], r"val\.csv:3: ending1 is missing or empty"),
        (lambda r: r[:11] + ["4"], r"val\.csv:3: label 4 is outside 0-3"),
        (lambda r: r[:11] + ["-1"], r"val\.csv:3: label -1 is outside 0-3"),
        (lambda r: r[:11] + ["two"], r"val\.csv:3: label 'two' is not a choice index 0-3"),
    ],
)
def test_swag_bad_rows_name_file_and_line(tmp_path, row_edit, message):
    rows = swag_rows(0, 3)
    rows[1] = row_edit(rows[1])
    write_swag(tmp_path / "val.csv", rows)
    with pytest.raises(ValueError, match=message):
        tasks.create_task("swag", data_dir=str(tmp_path)).read("dev")


def test_swag_header_without_an_ending_is_an_error(tmp_path):
    with open(tmp_path / "train.csv", "w", encoding="utf-8") as f:
        f.write("sent1,sent2,ending0,ending1,ending2,label\nA,B,c,d,e,0\n")
    with pytest.raises(ValueError, match=r"train\.csv:1: SWAG header lacks \['ending3'\]"):
        tasks.create_task("swag", data_dir=str(tmp_path)).read("train")


def _write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write((record if isinstance(record, str) else json.dumps(record)) + "\n")


@pytest.mark.parametrize(
    "bad,message",
    [
        ('{"context": "x", "choices": ["a", "b", "c"]', r"dev\.jsonl:2: invalid JSON"),
        (
            {"context": "x", "choices": ["a", "b"], "label": 0},
            r"dev\.jsonl:2: 2 choices where the data have 3",
        ),
        (
            {"context": "x", "choices": ["a", "b", "c"], "label": 3},
            r"dev\.jsonl:2: label 3 is outside 0-2",
        ),
        (
            {"context": "x", "choices": ["a", "", "c"], "label": 1},
            r"dev\.jsonl:2: choice 1 is empty",
        ),
        ({"context": "x", "choices": ["a", "b", "c"]}, r"dev\.jsonl:2: 'label' is missing here"),
        ({"choices": ["a", "b", "c"], "label": 0}, r"dev\.jsonl:2: 'context' must be a string"),
    ],
)
def test_jsonl_bad_records_name_file_and_line(tmp_path, bad, message):
    good = {"context": "x", "choices": ["a", "b", "c"], "label": 2}
    _write_jsonl(tmp_path / "train.jsonl", [good])
    _write_jsonl(tmp_path / "dev.jsonl", [good, bad])
    task = tasks.create_task("multiple_choice", data_dir=str(tmp_path))
    assert task.num_choices == 3
    with pytest.raises(ValueError, match=message):
        task.read("dev")


def test_swag_reads_a_prepared_tensorflow_datasets_copy(tmp_path):
    import tensorflow_datasets as tfds

    text = tfds.features.Text()
    features = tfds.features.FeaturesDict(
        {
            "sent1": text,
            "sent2": text,
            **{f"ending{i}": text for i in range(4)},
            "label": tf.int32,
            "fold-ind": text,
        }
    )
    rows = swag_rows(3, 3)
    records = {
        split: [
            (
                str(i),
                {
                    "sent1": r[4],
                    "sent2": r[5],
                    **{f"ending{j}": r[7 + j] for j in range(4)},
                    "label": int(r[11]) if split != "test" else -1,
                    "fold-ind": r[2],
                },
            )
            for i, r in enumerate(rows)
        ]
        for split in ("train", "validation", "test")
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # No `swag` builder ships with tensorflow-datasets: read without builder code.
        tfds.dataset_builders.store_as_tfds_dataset(
            name="swag",
            version="1.0.0",
            features=features,
            split_datasets=records,
            data_dir=str(tmp_path),
            disable_shuffling=True,
        )
    task = tasks.create_task("swag", tfds_data_dir=str(tmp_path))
    dev = task.read("dev")
    assert [(e.example_id, e.context, e.choice_prefix, e.label) for e in dev] == [
        (r[2], r[4], r[5], int(r[11])) for r in rows
    ]
    assert [list(e.choices) for e in dev] == [r[7:11] for r in rows]
    assert all(e.label is None for e in task.read("test"))


# === Preprocessing ===


def test_each_choice_is_packed_with_the_context(tokenizer, tmp_path):
    layer = multiple_choice.MultipleChoicePreprocessor(tokenizer, num_choices=3, sequence_length=20)
    pair = BertPreprocessor(tokenizer, sequence_length=20)
    context = ["She walks in.", "He sits."]
    prefix = ["She", ""]
    choices = [["smiles.", "waves.", "eats a very long sandwich slowly."], ["a", "b", "c"]]
    out = layer(tf.constant(context), tf.constant(choices), tf.constant(prefix))
    assert out["input_word_ids"].shape == (2, 3, 20)
    for i in range(2):
        for j in range(3):
            second = f"{prefix[i]} {choices[i][j]}" if prefix[i] else choices[i][j]
            expected = pair((tf.constant([context[i]]), tf.constant([second])))
            for key in expected:
                np.testing.assert_array_equal(out[key][i, j].numpy(), expected[key][0].numpy())

    # The config holds no vocabulary: the tokenizer's asset gives it back.
    clone = multiple_choice.MultipleChoicePreprocessor.from_config(layer.get_config())
    tokenizer.save_assets(str(tmp_path))
    clone.tokenizer.load_assets(str(tmp_path))
    again = clone(tf.constant(context), tf.constant(choices), tf.constant(prefix))
    np.testing.assert_array_equal(again["input_word_ids"].numpy(), out["input_word_ids"].numpy())
    with pytest.raises(ValueError, match="columns"):
        layer(tf.constant(context), tf.constant([["a", "b"], ["c", "d"]]))


# === End to end ===


def _read_predictions(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["id", "label", "scores"]
    return rows[1:]


@pytest.mark.slow
def test_swag_end_to_end_loss_falls_and_predictions_csv(tokenizer, tmp_path):
    write_swag(tmp_path / "train.csv", swag_rows(10, 48))
    write_swag(tmp_path / "val.csv", swag_rows(11, 16))
    write_swag(tmp_path / "test.csv", swag_rows(12, 5, labelled=False), labelled=False)
    task = tasks.create_task("swag", data_dir=str(tmp_path), max_seq_length=24)
    train, dev, test = task.read("train"), task.read("dev"), task.read("test")
    preprocessor = task.make_preprocessor(tokenizer)

    model = task.build_model(tiny_encoder())
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=task.loss(),
        metrics=task.metrics(),
        jit_compile=False,
    )
    dataset = tasks.training_dataset_fn(task, train, preprocessor, 8, seed=2)(None)
    losses = model.fit(dataset, steps_per_epoch=12, epochs=3, verbose=0).history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses

    answers = tasks.predict(task, model, dev, preprocessor, batch_size=8)
    metrics = task.evaluate(answers, dev)
    reference = accuracy_score([e.label for e in dev], [a.label for a in answers])
    assert metrics == {"accuracy": pytest.approx(reference, abs=1e-12)}
    assert metrics["accuracy"] > 0.5  # chance is 0.25

    (path,) = task.write_predictions(answers, dev, str(tmp_path / "out"), "dev")
    rows = _read_predictions(path)
    assert [r[0] for r in rows] == [e.example_id for e in dev]
    assert [int(r[1]) for r in rows] == [a.label for a in answers]
    for row, answer in zip(rows, answers, strict=True):
        scores = [float(s) for s in row[2].split(" ")]
        assert len(scores) == 4 and abs(sum(scores) - 1) < 1e-5
        assert int(row[1]) == int(np.argmax(answer.scores))
        np.testing.assert_allclose(scores, answer.scores, atol=1e-6)

    test_answers = tasks.predict(task, model, test, preprocessor)
    (path,) = task.write_predictions(test_answers, test, str(tmp_path / "out"), "test")
    assert len(_read_predictions(path)) == len(test)
    with pytest.raises(ValueError, match="unlabelled"):
        task.evaluate(test_answers, test)


@pytest.mark.slow
def test_multiple_choice_jsonl_end_to_end(tokenizer, tmp_path):
    rng = random.Random(4)
    records = []
    for index in range(12):
        label = rng.randrange(3)
        choices = rng.sample(BAD, 2)
        choices.insert(label, rng.choice(GOOD))
        records.append(
            {"id": f"q{index}", "context": rng.choice(CONTEXTS), "choices": choices, "label": label}
        )
    _write_jsonl(tmp_path / "train.jsonl", records)
    _write_jsonl(tmp_path / "dev.jsonl", records[:6])
    task = tasks.create_task("multiple_choice", data_dir=str(tmp_path), max_seq_length=20)
    assert task.num_choices == 3
    dev = task.read("dev")
    preprocessor = task.make_preprocessor(tokenizer)
    model = task.build_model(tiny_encoder(1))  # untrained: this checks shapes and files
    outputs, meta = tasks.predict_raw(task, model, dev, preprocessor, batch_size=4)
    assert outputs.shape == (6, 3)
    answers = task.postprocess(outputs, meta, dev)
    assert [a.label for a in answers] == list(np.argmax(outputs, axis=1))
    reference = accuracy_score([e.label for e in dev], [a.label for a in answers])
    assert task.evaluate(answers, dev)["accuracy"] == pytest.approx(reference, abs=1e-12)
    (path,) = task.write_predictions(answers, dev, str(tmp_path / "out"), "dev")
    assert [r[0] for r in _read_predictions(path)] == [f"q{i}" for i in range(6)]


def test_registered_names():
    assert {"swag", "multiple_choice"} <= set(tasks.list_tasks())
    assert tasks.get_task_class("swag").text_fields == (
        "sent1",
        "sent2",
        "ending0",
        "ending1",
        "ending2",
        "ending3",
    )
