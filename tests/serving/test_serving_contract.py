"""The serving contract (`keras_bert_zoo.tasks.servable.Servable`): what the exporter reads
of a task is what the task declares, with defaults, never guessed from its answers.

A task that declares a TF Serving example API gets `serve_examples` (its answers
checked first); one that declares none gets none, even with a `probabilities` answer.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.models import BertClassifier
from keras_bert_zoo.serving import signatures
from keras_bert_zoo.tasks import saving
from keras_bert_zoo.tasks.servable import (
    CLASSIFY_API,
    PROBABILITIES_ANSWER,
    REGRESS_API,
    SCORE_ANSWER,
    SERVING_API_ANSWERS,
    Servable,
)
from keras_bert_zoo.text import BertPreprocessor

LABELS = ("neg", "neutral", "pos")


class ProbabilityServable(Servable):
    """A classifier head served with a `probabilities` answer (and `label_id`); what it
    declares is set per instance."""

    text_fields = ("text",)
    max_seq_length = 16

    def __init__(self, task_name, *, api=None, label_names=None, answer_key=PROBABILITIES_ANSWER):
        self.task_name = task_name
        self._api = api
        self._label_names = label_names
        self._answer_key = answer_key

    @property
    def label_names(self):
        return self._label_names

    @property
    def serving_api(self):
        return self._api

    def make_preprocessor(self, tokenizer):
        return BertPreprocessor(tokenizer, sequence_length=self.max_seq_length)

    def serving_outputs(self, model, preprocessor):
        key = self._answer_key

        def answer(text):
            logits = tf.cast(model(preprocessor(text), training=False), tf.float32)
            probabilities = tf.nn.softmax(logits, axis=-1)
            return {
                key: probabilities,
                "label_id": tf.argmax(probabilities, axis=-1, output_type=tf.int32),
            }

        return answer


class BareServable(Servable):
    """Only what `Servable` requires: everything else is its default."""

    task_name = "bare"
    text_fields = ("text",)
    max_seq_length = 8

    def make_preprocessor(self, tokenizer):
        return BertPreprocessor(tokenizer, sequence_length=self.max_seq_length)


@pytest.fixture(scope="module")
def classifier(helpers, small_tokenizer):
    encoder = helpers.tiny_encoder(small_tokenizer.vocabulary_size())
    return helpers.randomize(BertClassifier(encoder, num_classes=len(LABELS)), 11)


def _export(base, servable, model, tokenizer, **kwargs):
    return serving.export(
        serving.ModelSource(servable, model, tokenizer),
        base,
        model_name=servable.task_name,
        **kwargs,
    )


def _method_names(path):
    return {name: info["method_name"] for name, info in serving.signature_schema(path).items()}


# === Defaults ===


def test_servable_defaults(small_tokenizer):
    servable = BareServable()
    assert servable.label_names is None
    assert servable.serving_api is None
    assert servable.state() == {}
    assert servable.description(small_tokenizer) == {
        "task_name": "bare",
        "max_seq_length": 8,
        "text_fields": ["text"],
        "lowercase": True,
    }
    with pytest.raises(NotImplementedError):
        servable.serving_outputs(None, None)
    assert SERVING_API_ANSWERS == {CLASSIFY_API: PROBABILITIES_ANSWER, REGRESS_API: SCORE_ANSWER}


def test_what_the_tasks_and_servables_declare(small_tokenizer):
    mnli = tasks.create_task("glue/mnli")
    assert mnli.serving_api == "classify"
    assert mnli.label_names == ("contradiction", "entailment", "neutral")
    stsb = tasks.create_task("glue/stsb")
    assert (stsb.serving_api, stsb.label_names) == ("regress", None)
    squad = tasks.create_task("squad_v1.1")
    assert (squad.serving_api, squad.label_names) == (None, None)
    # A task's description is what task.json records (tasks.saving).
    assert mnli.description(small_tokenizer) == saving.task_description(mnli, small_tokenizer)
    for servable in (serving.EncoderServable(32), serving.MaskedLMServable(32, top_k=3)):
        assert isinstance(servable, Servable)
        assert (servable.serving_api, servable.label_names) == (None, None)
    assert serving.MaskedLMServable(32, top_k=3).description(small_tokenizer)["top_k"] == 3


# === The declared API, checked against the answers ===


def _spec(shape, dtype=tf.float32):
    return tf.TensorSpec(shape, dtype)


def test_check_serving_api_takes_only_what_is_declared():
    answers = {PROBABILITIES_ANSWER: _spec([None, 3]), SCORE_ANSWER: _spec([None])}
    # Nothing declared: no API, whatever the answers hold (a tagger with tags).
    assert signatures.check_serving_api("t", None, answers, LABELS) is None
    assert signatures.check_serving_api("t", "classify", answers, LABELS) == "classify"
    assert signatures.check_serving_api("t", "regress", answers, None) == "regress"
    # A dynamic class dimension is accepted.
    dynamic = {PROBABILITIES_ANSWER: _spec([None, None])}
    assert signatures.check_serving_api("t", "classify", dynamic, LABELS) == "classify"


@pytest.mark.parametrize(
    ("api", "answers", "label_names", "message"),
    [
        ("classify", {"label_id": _spec([None], tf.int32)}, LABELS, r"'probabilities'.*label_id"),
        ("classify", {PROBABILITIES_ANSWER: _spec([None, 2])}, LABELS, r"float32 \[None, 2\]"),
        ("classify", {PROBABILITIES_ANSWER: _spec([None])}, LABELS, r"\[batch, 3\]"),
        ("classify", {PROBABILITIES_ANSWER: _spec([None, 3], tf.int32)}, LABELS, "int32"),
        ("classify", {PROBABILITIES_ANSWER: _spec([None, 3])}, None, "no label_names"),
        ("regress", {"label": _spec([None], tf.string)}, None, r"'score'.*\['label'\]"),
        ("regress", {SCORE_ANSWER: _spec([None, 1])}, None, r"float32 \[None, 1\].*\[batch\]"),
        ("regress", {SCORE_ANSWER: _spec(None)}, None, "unknown rank"),
        ("predict", {SCORE_ANSWER: _spec([None])}, None, "must be 'classify', 'regress' or None"),
    ],
)
def test_check_serving_api_names_the_task_and_the_answer(api, answers, label_names, message):
    with pytest.raises(ValueError, match=message) as raised:
        signatures.check_serving_api("my_task", api, answers, label_names)
    assert "my_task" in str(raised.value)


# === Exports ===


@pytest.mark.slow
def test_a_declared_classify_api_gets_serve_examples(tmp_path, classifier, small_tokenizer):
    servable = ProbabilityServable("declared", api="classify", label_names=LABELS)
    exported = _export(str(tmp_path), servable, classifier, small_tokenizer)  # verified
    assert _method_names(exported.path) == {
        "serving_default": signatures.PREDICT_METHOD,
        "serve_ids": signatures.PREDICT_METHOD,
        "serve_examples": signatures.CLASSIFY_METHOD,
    }
    assert exported.description["label_names"] == list(LABELS)
    assert exported.description["task"] == servable.description(small_tokenizer)

    loaded = tf.saved_model.load(exported.path)
    texts = [b"the cat sat", b"a good film", b""]
    examples = [
        tf.train.Example(
            features=tf.train.Features(
                feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text]))}
            )
        ).SerializeToString()
        for text in texts
    ]
    classified = loaded.signatures["serve_examples"](inputs=tf.constant(examples))
    served = loaded.signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_array_equal(
        classified["classes"].numpy(), [[name.encode() for name in LABELS]] * len(texts)
    )
    np.testing.assert_allclose(
        classified["scores"].numpy(), served[PROBABILITIES_ANSWER].numpy(), atol=1e-6
    )


def test_probabilities_without_a_declared_api_get_no_serve_examples(
    tmp_path, classifier, small_tokenizer
):
    # Label names, a `probabilities` answer of the right shape, but no serving_api.
    servable = ProbabilityServable("undeclared", label_names=LABELS)
    exported = _export(str(tmp_path), servable, classifier, small_tokenizer, verify=False)
    assert set(_method_names(exported.path)) == {"serving_default", "serve_ids"}
    assert exported.description["label_names"] == list(LABELS)  # listed all the same


def test_a_declared_api_without_its_answer_fails_before_writing(
    tmp_path, classifier, small_tokenizer
):
    servable = ProbabilityServable(
        "mislabelled", api="classify", label_names=LABELS, answer_key="class_probabilities"
    )
    with pytest.raises(ValueError, match=r"mislabelled declares serving_api='classify'.*"):
        _export(str(tmp_path), servable, classifier, small_tokenizer)
    assert not os.path.exists(tmp_path / "mislabelled")


def test_only_a_servable_is_exported(tmp_path, classifier, small_tokenizer):
    class DuckTyped:
        task_name = "duck"
        text_fields = ("text",)

    with pytest.raises(TypeError, match="Servable.*DuckTyped"):
        serving.export(
            serving.ModelSource(DuckTyped(), classifier, small_tokenizer),
            str(tmp_path),
            model_name="duck",
        )
