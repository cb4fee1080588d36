"""The task heads the runner exports, in both checkpoint layouts.

Every task model (sequence classifier, span labeler, token classifier, multiple choice)
saves to the google-research/bert and Hugging Face layouts and reloads with the same
weights and outputs; the Hugging Face directory loads in `transformers`' class that its
`config.json` names, whose logits (PyTorch, an independent implementation) equal ours.
"""

import json

import numpy as np
import pytest

from keras_bert_zoo.checkpoints import from_pretrained, save_pretrained
from keras_bert_zoo.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
)

VOCAB_SIZE = 97
ENCODER = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    intermediate_size=64,
    max_position_embeddings=32,
)

HEADS = {
    "classifier": (BertClassifier, {"num_classes": 3}, "BertForSequenceClassification"),
    "span_labeler": (BertSpanLabeler, {}, "BertForQuestionAnswering"),
    "token_classifier": (BertTokenClassifier, {"num_classes": 5}, "BertForTokenClassification"),
    "multiple_choice": (BertMultipleChoice, {"num_choices": 3}, "BertForMultipleChoice"),
}


def _randomized(model, seed):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        scale = 1.0 if variable.path.endswith("gamma") else 0.0
        variable.assign((scale + 0.2 * rng.standard_normal(shape)).astype("float32"))
    return model


def _inputs(kind, seed=0):
    rng = np.random.default_rng(seed)
    shape = (2, 3, 10) if kind == "multiple_choice" else (3, 10)
    ids = rng.integers(5, VOCAB_SIZE, size=shape).astype("int32")
    mask = np.ones_like(ids)
    mask[..., 7:] = 0
    mask[0, ..., 5:] = 0
    ids[mask == 0] = 0
    types = np.zeros_like(ids)
    types[..., 3:5] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _as_numpy(outputs):
    if isinstance(outputs, dict):
        return {key: np.asarray(value) for key, value in outputs.items()}
    return np.asarray(outputs)


@pytest.fixture(scope="module")
def models():
    built = {}
    for seed, (kind, (cls, kwargs, _)) in enumerate(HEADS.items()):
        built[kind] = _randomized(cls(BertEncoder(**ENCODER), **kwargs), seed)
    return built


@pytest.mark.parametrize("kind", list(HEADS))
@pytest.mark.parametrize("layout", ["google", "huggingface"])
def test_task_heads_save_and_reload_in_both_layouts(kind, layout, models, tmp_path):
    cls, kwargs, _ = HEADS[kind]
    model = models[kind]
    save_pretrained(model, tmp_path, format=layout)
    reloaded = from_pretrained(tmp_path, model=cls, **kwargs)
    assert len(reloaded.weights) == len(model.weights)
    for ours, theirs in zip(model.weights, reloaded.weights, strict=True):
        assert ours.path == theirs.path
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)
    inputs = _inputs(kind)
    expected = _as_numpy(model(inputs, training=False))
    got = _as_numpy(reloaded(inputs, training=False))
    if isinstance(expected, dict):
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key])
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", list(HEADS))
def test_transformers_loads_the_huggingface_export_of_each_head(kind, models, tmp_path):
    import torch
    import transformers

    _, _, architecture = HEADS[kind]
    model = models[kind]
    save_pretrained(model, tmp_path, format="huggingface")
    config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == [architecture]
    theirs = getattr(transformers, architecture).from_pretrained(
        str(tmp_path), local_files_only=True
    )
    theirs.eval()
    inputs = _inputs(kind)
    with torch.no_grad():
        output = theirs(
            input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long),
        )
    ours = _as_numpy(model(inputs, training=False))
    if kind == "span_labeler":
        np.testing.assert_allclose(ours["start_logits"], output.start_logits.numpy(), atol=1e-4)
        np.testing.assert_allclose(ours["end_logits"], output.end_logits.numpy(), atol=1e-4)
        return
    logits = output.logits.numpy()
    assert ours.shape == logits.shape
    mask = inputs["input_mask"].astype(bool)
    if kind == "token_classifier":
        # Padded positions carry no meaning (and are masked in the loss).
        ours, logits = ours[mask], logits[mask]
    np.testing.assert_allclose(ours, logits, atol=1e-4)
