"""Every model saves/loads as .keras (safe_mode) and round-trips get_config/from_config."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)

VOCAB = 97


def _choice_inputs(inputs_factory):
    x = inputs_factory(batch=6, seq_len=8, lengths=[8, 6, 5, 7, 3, 8])
    return {k: v.reshape(2, 3, 8) for k, v in x.items()}


def _pretrainer_inputs(inputs_factory):
    x = inputs_factory(batch=3, seq_len=9, lengths=[9, 7, 5])
    x["masked_lm_positions"] = np.array([[1, 3, 0], [2, 4, 6], [1, 0, 0]], "int32")
    return x


def _encoder(small_kwargs, **kwargs):
    return BertEncoder(**{**small_kwargs, "hidden_act": "gelu", **kwargs})


MODELS = {
    "encoder": lambda kw: _encoder(kw),
    "pretrainer": lambda kw: BertPretrainer(_encoder(kw), name="pretrainer"),
    "classifier": lambda kw: BertClassifier(_encoder(kw), num_classes=3, dropout=0.2),
    "regressor": lambda kw: BertClassifier(_encoder(kw), num_classes=1, initializer_range=0.05),
    "span_labeler": lambda kw: BertSpanLabeler(_encoder(kw)),
    "token_classifier": lambda kw: BertTokenClassifier(_encoder(kw), num_classes=5),
    "multiple_choice": lambda kw: BertMultipleChoice(_encoder(kw), num_choices=3),
}
INPUTS = {
    "pretrainer": _pretrainer_inputs,
    "multiple_choice": _choice_inputs,
}
OUTPUT_SHAPES = {
    "classifier": (3, 3),
    "regressor": (3, 1),
    "token_classifier": (3, 10, 5),
    "multiple_choice": (2, 3),
}


def _inputs(name, inputs_factory):
    return INPUTS.get(name, lambda f: f(batch=3, seq_len=10, lengths=[10, 7, 4]))(inputs_factory)


def _flat(outputs):
    """Outputs as a flat, ordered list of numpy arrays."""
    if isinstance(outputs, dict):
        return [a for key in sorted(outputs) for a in _flat(outputs[key])]
    if isinstance(outputs, (list, tuple)):
        return [a for item in outputs for a in _flat(item)]
    return [np.asarray(keras.ops.convert_to_numpy(outputs))]


def _assert_same(a, b, atol=1e-6):
    a, b = _flat(a), _flat(b)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_save_and_load_keras_file(name, tmp_path, small_kwargs, inputs_factory, randomize):
    model = MODELS[name](small_kwargs)
    randomize(model, seed=1)
    x = _inputs(name, inputs_factory)
    before = model.predict(x, verbose=0)
    if name in OUTPUT_SHAPES:
        assert before.shape == OUTPUT_SHAPES[name]

    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.models.load_model(path, safe_mode=True)
    assert type(loaded) is type(model)
    assert loaded.get_config() == model.get_config()
    _assert_same(before, loaded.predict(x, verbose=0))
    assert len(loaded.weights) == len(model.weights)
    assert loaded.count_params() == model.count_params()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_config_round_trip(name, small_kwargs, inputs_factory, randomize):
    model = MODELS[name](small_kwargs)
    randomize(model, seed=2)
    x = _inputs(name, inputs_factory)
    config = model.get_config()
    clone = type(model).from_config(config)
    assert clone.get_config() == config
    clone.set_weights(model.get_weights())
    _assert_same(model(x, training=False), clone(x, training=False))


def test_encoder_config_carries_every_hyperparameter(small_kwargs):
    encoder = BertEncoder(
        **small_kwargs,
        hidden_act="relu",
        hidden_dropout=0.05,
        attention_dropout=0.02,
        initializer_range=0.03,
        layer_norm_epsilon=1e-7,
    )
    clone = BertEncoder.from_config(encoder.get_config())
    assert clone.bert_config == encoder.bert_config
    assert clone.bert_config.hidden_act == "relu"
    assert clone.transformer_layers[0].activation == "relu"
    assert clone.transformer_layers[0].layer_norm_epsilon == 1e-7


def test_pretrainer_decoder_stays_tied_after_loading(
    tmp_path, small_kwargs, inputs_factory, randomize
):
    model = BertPretrainer(_encoder(small_kwargs))
    randomize(model, seed=3)
    x = _pretrainer_inputs(inputs_factory)
    path = tmp_path / "pretrainer.keras"
    model.save(path)
    loaded = keras.models.load_model(path, safe_mode=True)

    # No duplicate variables: the decoder is the word-embedding table, not a copy.
    ids = [id(v) for v in loaded.weights]
    assert len(ids) == len(set(ids))
    tables = [v for v in loaded.weights if tuple(v.shape) == (VOCAB, small_kwargs["hidden_size"])]
    assert len(tables) == 1
    assert loaded.masked_lm_head.embedding_layer is loaded.encoder.embeddings.word_embeddings
    expected_params = model.encoder.count_params() + sum(
        int(np.prod(v.shape)) for v in model.weights if v.path.startswith("masked_lm_head/")
    )
    expected_params += sum(int(np.prod(v.shape)) for v in model.next_sentence_head.weights)
    assert loaded.count_params() == expected_params

    # Changing the embedding changes the MLM logits (the decoder reads the same variable).
    before = loaded(x)["masked_lm_logits"]
    table = loaded.encoder.embedding_table
    table.assign(table.numpy() * 1.5)
    after = loaded(x)["masked_lm_logits"]
    assert float(np.max(np.abs(np.asarray(before) - np.asarray(after)))) > 1e-2
    # ...and the loaded table equals the saved one.
    np.testing.assert_array_equal(
        table.numpy(), model.encoder.embedding_table.numpy() * np.float32(1.5)
    )


def test_loading_needs_no_unsafe_deserialization(tmp_path, small_kwargs):
    """safe_mode=True must succeed: no lambdas or pickled Python in the saved config."""
    model = BertMultipleChoice(_encoder(small_kwargs), num_choices=2)
    path = tmp_path / "mc.keras"
    model.save(path)
    loaded = keras.models.load_model(path, safe_mode=True)
    assert loaded.num_choices == 2


def test_untrained_encoder_and_the_deprecated_from_preset():
    from keras_bert_zoo.config import BertConfig

    encoder = BertEncoder.untrained("bert_tiny_uncased")
    assert encoder.bert_config == BertConfig.from_preset("bert_tiny_uncased")
    with pytest.warns(DeprecationWarning, match="untrained"):
        old = BertEncoder.from_preset("bert_tiny_uncased")
    assert old.bert_config == encoder.bert_config


def test_deprecated_encoder_task_base_still_serializes(small_kwargs, inputs_factory, tmp_path):
    """A task model written against the old base class keeps working for one release."""
    from keras_bert_zoo.layers import ClassificationHead
    from keras_bert_zoo.models import EncoderHeadModel
    from keras_bert_zoo.models._task import EncoderTask

    with pytest.warns(DeprecationWarning, match="EncoderHeadModel"):

        @keras.saving.register_keras_serializable(package="kbz_tests")
        class OldStyleScorer(EncoderTask):
            def __init__(self, encoder, **kwargs):
                self.encoder = encoder
                self.scorer = ClassificationHead(1, dropout=0.0, name="scorer")
                inputs = encoder.input
                super().__init__(
                    inputs=inputs, outputs=self.scorer(encoder(inputs)["pooled_output"]), **kwargs
                )

            def _task_config(self):
                return {}

    model = OldStyleScorer(_encoder(small_kwargs))
    assert isinstance(model, EncoderHeadModel)
    x = inputs_factory(batch=2, seq_len=6, lengths=[6, 3])
    path = str(tmp_path / "old_style.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(restored.predict(x, verbose=0), model.predict(x, verbose=0))
