"""End to end on small fixtures in the official JSON layout: fine-tune a tiny encoder with
`model.fit`, predict, evaluate and write the official files; check the formats."""

import json
import pathlib
import random
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.tasks import create_task, predict_raw, training_dataset_fn
from keras_bert_zoo.text import BertTokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from qa_test_helpers import load_local_module, qa, write_squad  # noqa: E402

official = load_local_module("squad_official_evaluation.py")

PEOPLE = ["ada", "bob", "carla", "dmitri", "eve", "farid", "gita", "hugo"]
CITIES = ["paris", "lima", "oslo", "quito", "kyoto", "dakar", "perth", "riga"]
THINGS = ["apples", "boats", "clocks", "drums", "eggs", "flutes", "gloves", "hats"]
FILLER = ["it", "was", "a", "long", "and", "quiet", "day", "in", "the", "town", "near", "river"]


def make_paragraphs(rng, count, with_impossible):
    """Paragraphs "X lives in C. X sells T. <filler>" with who/where/what questions."""
    paragraphs = []
    for p in range(count):
        person, city, thing = rng.choice(PEOPLE), rng.choice(CITIES), rng.choice(THINGS)
        filler = " ".join(rng.choice(FILLER) for _ in range(rng.randint(15, 45)))
        context = f"{person.title()} lives in {city.title()}. {filler}. {person} sells {thing}."
        qas = [
            qa(f"p{p}-where", f"Where does {person} live?", context, [city.title()]),
            qa(f"p{p}-what", f"What does {person} sell?", context, [thing]),
        ]
        if with_impossible:
            for q in qas:
                q["is_impossible"] = False
            other = rng.choice([x for x in PEOPLE if x != person])
            qas.append(qa(f"p{p}-none", f"Where does {other} live?", context, [], True))
        paragraphs.append((context, qas))
    return paragraphs


def vocabulary():
    """The fixture paragraphs' vocabulary: special tokens, punctuation, their words."""
    words = sorted(
        set(
            PEOPLE
            + CITIES
            + THINGS
            + FILLER
            + ["lives", "sells", "where", "what", "does", "live", "sell"]
        )
    )
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?"] + words


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(vocabulary(), lowercase=True)


def tiny_encoder(vocab_size):
    keras.utils.set_random_seed(1)
    return BertEncoder(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )


def validate_official_formats(out_dir, examples, version_2, n_best_size):
    """The shapes the official scripts and the leaderboard read."""
    ids = [e.example_id for e in examples]
    predictions = json.loads((out_dir / "predictions.json").read_text("utf-8"))
    assert list(predictions) == ids
    assert all(isinstance(text, str) for text in predictions.values())
    nbest = json.loads((out_dir / "nbest_predictions.json").read_text("utf-8"))
    assert list(nbest) == ids
    for example in examples:
        entries = nbest[example.example_id]
        assert 1 <= len(entries) <= n_best_size + int(version_2)
        for entry in entries:
            assert set(entry) == {"text", "probability", "start_logit", "end_logit"}
            assert entry["text"] == "" or entry["text"] in example.context
        assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0, abs=1e-9)
        scores = [entry["start_logit"] + entry["end_logit"] for entry in entries]
        texts = [entry["text"] for entry in entries]
        assert len(set(texts)) == len(texts)
        if version_2:
            assert "" in texts
            # Sorted by score, the null answer possibly appended last.
            non_null = [s for s, t in zip(scores, texts, strict=True) if t]
            assert non_null == sorted(non_null, reverse=True)
        else:
            assert scores == sorted(scores, reverse=True)
            assert predictions[example.example_id] == texts[0]
    if version_2:
        odds = json.loads((out_dir / "null_odds.json").read_text("utf-8"))
        assert list(odds) == ids and all(isinstance(v, float) for v in odds.values())
    return predictions


SETTINGS = dict(
    max_seq_length=48, doc_stride=16, max_query_length=12, n_best_size=5, max_answer_length=8
)


def make_task(version, data_dir):
    return create_task(f"squad_{version}", data_dir=str(data_dir), **SETTINGS)


@pytest.fixture(scope="module")
def fine_tuned(tokenizer, tmp_path_factory):
    """A tiny encoder fine-tuned with `model.fit` on a v2.0 fixture (the model is the
    same for v1.1: only decoding and evaluation differ)."""
    rng = random.Random(0)
    data_dir = tmp_path_factory.mktemp("squad")
    for version, file_version in (("v1.1", "1.1"), ("v2.0", "v2.0")):
        version_2 = version == "v2.0"
        write_squad(
            data_dir / f"train-{version}.json", make_paragraphs(rng, 48, version_2), file_version
        )
        write_squad(
            data_dir / f"dev-{version}.json", make_paragraphs(rng, 6, version_2), file_version
        )
    task = make_task("v2.0", data_dir)
    train = task.read("train")
    preprocessor = task.make_preprocessor(tokenizer)
    model = task.build_model(tiny_encoder(tokenizer.vocabulary_size()))
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=task.loss(), metrics=task.metrics())
    dataset = training_dataset_fn(task, train, preprocessor, global_batch_size=16, seed=0)(None)
    history = model.fit(dataset, epochs=4, steps_per_epoch=10, verbose=0)
    return model, data_dir, history.history


@pytest.mark.slow
def test_loss_falls(fine_tuned):
    _, _, history = fine_tuned
    losses = history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses
    assert history["start_logits_start_accuracy"][-1] > history["start_logits_start_accuracy"][0]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_predict_evaluate_write(version, fine_tuned, tokenizer, tmp_path):
    version_2 = version == "v2.0"
    model, data_dir, _ = fine_tuned
    task = make_task(version, data_dir)
    dev = task.read("dev")
    preprocessor = task.make_preprocessor(tokenizer)
    outputs, meta = predict_raw(task, model, dev, preprocessor, batch_size=8)
    num_windows = len(meta["example_index"])
    assert num_windows > len(dev)  # long paragraphs give several windows
    assert outputs["start_logits"].shape == (num_windows, 48)
    answers = task.postprocess(outputs, meta, dev)
    scores = task.evaluate(answers, dev)
    out_dir = tmp_path / "out"
    task.write_predictions(answers, dev, str(out_dir), "dev")
    predictions = validate_official_formats(out_dir, dev, version_2, n_best_size=5)
    dataset_json = json.loads((data_dir / f"dev-{version}.json").read_text("utf-8"))["data"]
    if version_2:
        reference = official.evaluate_v2_0(
            dataset_json, predictions, json.loads((out_dir / "null_odds.json").read_text())
        )
        for key in ("exact", "f1", "HasAns_f1", "NoAns_f1"):
            assert scores[key] == pytest.approx(reference[key], abs=1e-9)
        assert (out_dir / "predictions_best_threshold.json").exists()
    else:
        reference = official.evaluate_v1_1(dataset_json, predictions)
        assert scores == pytest.approx(reference, abs=1e-9)
    # Every answer is an exact substring of its context at its offsets.
    for answer, example in zip(answers, dev, strict=True):
        if answer.text:
            assert example.context[answer.start : answer.end] == answer.text
    if not version_2:
        return
    # The serving function (preprocessor + model + decoder in TF) answers the same.
    serve = tf.function(task.serving_outputs(model, preprocessor))
    served = serve(tf.constant([e.question for e in dev]), tf.constant([e.context for e in dev]))
    served_texts = [t.decode("utf-8") for t in served["answer_text"].numpy()]
    assert served_texts == [a.text for a in answers]
    np.testing.assert_allclose(
        served["answer_score"].numpy(), [a.best_score for a in answers], atol=1e-4
    )
