"""Dtype policies: float32 variables, half compute, float32 logits, float32 softmax/LayerNorm."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import BertSelfAttention, TransformerEncoderBlock
from keras_bert_zoo.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)

POLICIES = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}
# Loose: bfloat16 keeps 8 mantissa bits, float16 11.
TOLERANCE = {"mixed_bfloat16": 0.15, "mixed_float16": 0.02}


def _dtype(tensor):
    return keras.backend.standardize_dtype(tensor.dtype)


def _pair(small_kwargs, randomize, policy):
    """A float32 encoder and a `policy` encoder with the same weights."""
    kwargs = {**small_kwargs, "hidden_act": "gelu"}
    reference = BertEncoder(**kwargs)
    randomize(reference, seed=0)
    mixed = BertEncoder(**kwargs, dtype=policy)
    mixed.set_weights(reference.get_weights())
    return reference, mixed


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_encoder_policy(policy, small_kwargs, randomize, inputs_factory):
    reference, mixed = _pair(small_kwargs, randomize, policy)
    half = POLICIES[policy]
    assert all(_dtype(v) == "float32" for v in mixed.weights)
    assert mixed.dtype_policy.name == policy
    for layer in [mixed.embeddings, *mixed.transformer_layers, mixed.pooler_dense]:
        assert layer.compute_dtype == half, layer.name
        assert layer.variable_dtype == "float32"
    assert mixed.transformer_layers[0].attention.query.compute_dtype == half

    x = inputs_factory(batch=3, seq_len=12, lengths=[12, 8, 5])
    want = reference(x)
    got = mixed(x)
    assert _dtype(got["sequence_output"]) == half
    for key in ("sequence_output", "pooled_output"):
        g = np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(got[key], "float32")))
        w = np.asarray(want[key])
        assert np.all(np.isfinite(g))
        assert float(np.max(np.abs(g - w))) < TOLERANCE[policy], key
    # The tolerance still discriminates: float32 weights from another seed are far off.
    other = BertEncoder(**{**small_kwargs, "hidden_act": "gelu"})
    randomize(other, seed=1)
    off = np.max(
        np.abs(np.asarray(other(x)["sequence_output"]) - np.asarray(want["sequence_output"]))
    )
    assert off > 5 * TOLERANCE[policy]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_task_heads_return_float32(policy, small_kwargs, inputs_factory):
    def encoder():
        return BertEncoder(**small_kwargs, dtype=policy)

    x = inputs_factory(batch=2, seq_len=8, lengths=[8, 5])
    choice_x = {k: np.stack([v, v], axis=1) for k, v in x.items()}
    pre_x = dict(x, masked_lm_positions=np.array([[1, 2], [3, 0]], "int32"))
    cases = [
        (BertClassifier(encoder(), num_classes=3), x),
        (BertClassifier(encoder(), num_classes=1), x),
        (BertTokenClassifier(encoder(), num_classes=4), x),
        (BertSpanLabeler(encoder()), x),
        (BertMultipleChoice(encoder(), num_choices=2), choice_x),
        (BertPretrainer(encoder()), pre_x),
    ]
    for model, inputs in cases:
        assert all(_dtype(v) == "float32" for v in model.weights), model.name
        out = model(inputs)
        for tensor in out.values() if isinstance(out, dict) else [out]:
            assert _dtype(tensor) == "float32", model.name
            assert np.all(np.isfinite(keras.ops.convert_to_numpy(tensor)))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_attention_scores_and_softmax_in_float32(policy):
    """Scores beyond float16's range (65504) still give a finite, correct attention."""
    layer = BertSelfAttention(num_heads=2, head_size=8, dtype=policy)
    x = np.ones((1, 4, 16), "float32")
    layer(x)
    kernel = np.zeros((16, 2, 8), "float32")
    for i in range(8):
        kernel[i, :, i] = 300.0  # q = k = 300 per unit: scores ~ 8 * 300 * 300 / sqrt(8)
    layer.query.kernel.assign(kernel)
    layer.key.kernel.assign(kernel)
    value = np.random.default_rng(0).standard_normal((16, 2, 8)).astype("float32")
    layer.value.kernel.assign(value)
    out = keras.ops.convert_to_numpy(keras.ops.cast(layer(x, np.array([[1, 1, 1, 0]])), "float32"))
    assert np.all(np.isfinite(out))
    # All (real) keys are identical, so the attention is uniform: output = o(v(x)).
    reference = BertSelfAttention(num_heads=2, head_size=8)
    reference(x)
    reference.set_weights(layer.get_weights())
    want = keras.ops.convert_to_numpy(reference(x, np.array([[1, 1, 1, 0]])))
    assert float(np.max(np.abs(out - want))) < 0.05 * max(1.0, float(np.max(np.abs(want))))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_layer_norm_handles_large_activations(policy):
    """Residual streams near float16's limit: the LayerNorm moments must not overflow."""
    block = TransformerEncoderBlock(num_heads=2, intermediate_size=32, dtype=policy)
    x = 1000.0 * np.random.default_rng(1).standard_normal((2, 5, 16)).astype("float32")
    out = keras.ops.convert_to_numpy(keras.ops.cast(block(x), "float32"))
    assert np.all(np.isfinite(out))
    reference = TransformerEncoderBlock(num_heads=2, intermediate_size=32)
    reference(x)
    reference.set_weights(block.get_weights())
    want = keras.ops.convert_to_numpy(reference(x))
    assert float(np.max(np.abs(out - want))) < 0.1


@pytest.mark.slow
def test_mixed_float16_training_step_with_loss_scale_optimizer(small_kwargs, inputs_factory):
    model = BertClassifier(
        BertEncoder(**{**small_kwargs, "num_layers": 1}, dtype="mixed_float16"),
        num_classes=2,
        dropout=0.0,
    )
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3))
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    x = inputs_factory(batch=8, seq_len=8, lengths=[8, 7, 6, 5, 8, 7, 6, 5])
    y = np.array([0, 1] * 4)
    before = [v.numpy().copy() for v in model.trainable_weights]
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    losses = history.history["loss"]
    assert all(np.isfinite(losses))
    after = [v.numpy() for v in model.trainable_weights]
    assert all(_dtype(v) == "float32" for v in model.trainable_weights)
    changed = sum(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    assert changed == len(before)  # every variable received a (finite, unscaled) update
    assert all(np.all(np.isfinite(a)) for a in after)
    assert float(model.optimizer.dynamic_scale.numpy()) > 1.0


@pytest.mark.slow
def test_mixed_bfloat16_training_step(small_kwargs, inputs_factory):
    model = BertPretrainer(BertEncoder(**{**small_kwargs, "num_layers": 1}, dtype="mixed_bfloat16"))
    model.compile(optimizer=keras.optimizers.SGD(0.01))
    x = inputs_factory(batch=4, seq_len=8, lengths=[8, 7, 6, 5])
    x["masked_lm_positions"] = np.array([[1, 2]] * 4, "int32")
    y = {
        "masked_lm_ids": np.array([[3, 4]] * 4, "int32"),
        "masked_lm_weights": np.ones((4, 2), "float32"),
        "next_sentence_labels": np.array([0, 1, 0, 1], "int32"),
    }
    history = model.fit(x, y, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_policy_survives_save_and_config(policy, tmp_path, small_kwargs, inputs_factory):
    model = BertClassifier(BertEncoder(**small_kwargs, dtype=policy), num_classes=2)
    assert BertEncoder.from_config(model.encoder.get_config()).dtype_policy.name == policy
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path, safe_mode=True)
    assert loaded.encoder.dtype_policy.name == policy
    assert loaded.encoder.transformer_layers[0].compute_dtype == POLICIES[policy]
    assert loaded.classification_head.dtype_policy.name == policy
    x = inputs_factory(batch=2, seq_len=6, lengths=[6, 4])
    np.testing.assert_array_equal(model.predict(x, verbose=0), loaded.predict(x, verbose=0))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_pretrainer_policy_close_to_float32(policy, small_kwargs, randomize, inputs_factory):
    reference = BertPretrainer(BertEncoder(**small_kwargs))
    randomize(reference, seed=2, scale=0.1)
    mixed = BertPretrainer(BertEncoder(**small_kwargs, dtype=policy))
    mixed.set_weights(reference.get_weights())
    assert mixed.masked_lm_head.compute_dtype == POLICIES[policy]
    x = inputs_factory(batch=2, seq_len=8, lengths=[8, 6])
    x["masked_lm_positions"] = np.array([[1, 3, 5], [0, 2, 4]], "int32")
    want, got = reference(x), mixed(x)
    for key in ("masked_lm_logits", "next_sentence_logits"):
        assert _dtype(got[key]) == "float32"
        diff = np.max(np.abs(np.asarray(got[key]) - np.asarray(want[key])))
        scale = max(1.0, float(np.max(np.abs(np.asarray(want[key])))))
        assert diff < 2 * TOLERANCE[policy] * scale, (key, diff)
