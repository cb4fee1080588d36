"""Capabilities a model class declares (`EncoderHeadModel`), read by the passes that may
stand in for its plain call: packed batches, head positions, padding-free inference.

References: the model's own padded call `model(x)`, and a model class written here that
the package knows nothing of, so that a pass can only have found out from its
declaration.
"""

import keras
import numpy as np
import pytest

from keras_bert_zoo.models import (
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSentenceEmbedder,
    BertSpanLabeler,
    BertTokenClassifier,
    EncoderHeadModel,
)
from keras_bert_zoo.models.head_model import head_models_with
from keras_bert_zoo.models.head_positions import head_position_outputs, supports
from keras_bert_zoo.models.padding_free import padding_free_inference
from keras_bert_zoo.models.sequence_packing import check_supported, pack_batch, packed_outputs
from tests.models.conftest import SMALL, make_inputs, random_encoder


class PooledScorer(EncoderHeadModel):
    """A head model of the test's own: one Dense over the pooled output, declared to be
    computable from the head positions and servable padding-free."""

    outputs_from_head_positions = True
    supports_padding_free_inference = True

    def __init__(self, encoder, **kwargs):
        self.encoder = encoder
        self.scorer = keras.layers.Dense(2, name="scorer")
        inputs = encoder.input
        super().__init__(
            inputs=inputs, outputs=self.scorer(encoder(inputs)["pooled_output"]), **kwargs
        )

    def outputs_at_head_positions(self, pooled_output, masked_lm_outputs=None, training=None):
        return self.scorer(pooled_output)

    def _head_config(self):
        return {}


class OptedOutClassifier(BertClassifier):
    """A `BertClassifier` whose class withdraws every capability."""

    outputs_from_head_positions = False
    supports_padding_free_inference = False


def _inputs():
    return make_inputs(batch=4, seq_len=9, vocab_size=SMALL["vocab_size"], lengths=[9, 6, 3, 2])


def _encoder(seed):
    return random_encoder(seed=seed, hidden_dropout=0.0, attention_dropout=0.0)


def _package_models_with(capability):
    return [cls for cls in head_models_with(capability) if cls.__module__.startswith("keras_")]


def test_the_package_models_declare_what_they_read():
    # Written out from what each head reads, not from the code.
    assert _package_models_with("outputs_from_head_positions") == [BertClassifier, BertPretrainer]
    assert _package_models_with("reads_masked_lm_positions") == [BertPretrainer]
    assert _package_models_with("supports_padding_free_inference") == [
        BertClassifier,
        BertMultipleChoice,
        BertSentenceEmbedder,  # masked pooling reads no padded position
    ]
    for cls in (BertSpanLabeler, BertTokenClassifier):
        assert not cls.outputs_from_head_positions
        assert not cls.supports_padding_free_inference
    assert EncoderHeadModel.outputs_from_head_positions is False


def test_a_declared_model_of_its_own_runs_every_fast_pass():
    x = _inputs()
    model = PooledScorer(_encoder(seed=1))
    want = np.asarray(model(x, training=False))
    assert np.ptp(want, axis=0).max() > 1e-3  # rows differ: a wrong row would show
    assert supports(model)
    np.testing.assert_allclose(head_position_outputs(model, x, training=False), want, atol=1e-5)
    packed = pack_batch(x, row_bucket=1)
    np.testing.assert_allclose(packed_outputs(model, packed, training=False), want, atol=2e-5)
    with padding_free_inference(model):
        np.testing.assert_allclose(model(x, training=False), want, atol=1e-5)
    assert PooledScorer in head_models_with("outputs_from_head_positions")


def test_withdrawing_a_capability_is_read_too():
    x = _inputs()
    model = OptedOutClassifier(_encoder(seed=2), num_classes=3)
    assert not supports(model)
    with pytest.raises(TypeError, match="OptedOutClassifier"):
        head_position_outputs(model, x)
    with pytest.raises(TypeError, match="train it with padded batches"):
        check_supported(model)
    assert OptedOutClassifier not in head_models_with("supports_padding_free_inference")
    # The parent keeps its own declaration.
    check_supported(BertClassifier(_encoder(seed=2), num_classes=3))
