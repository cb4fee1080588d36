"""PaddingFreeEncoder: real tokens only, same numbers as the padded encoder."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.layers import TokenLayout
from keras_bert_zoo.models import BertEncoder, PaddingFreeEncoder

TOL = 1e-5


def _holey_inputs(inputs_factory):
    """Rows of 16, 11, 5 and 1 real tokens, one with a hole in its mask."""
    x = inputs_factory(batch=4, seq_len=16, lengths=[16, 11, 5, 1], seed=2)
    x["input_mask"][1, 4] = 0
    return x


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_matches_numpy_reference_at_real_tokens(
    ref, encoder_factory, max_diff, small_kwargs, inputs_factory, activation
):
    encoder = encoder_factory(activation, seed=1)
    x = _holey_inputs(inputs_factory)
    out = PaddingFreeEncoder(encoder)(x)
    expected = ref.encoder(
        ref.encoder_weights(encoder),
        x["input_word_ids"],
        x["input_mask"],
        x["input_type_ids"],
        small_kwargs["num_heads"],
        activation,
    )
    real = x["input_mask"].astype(bool)
    assert (
        max_diff(np.asarray(out["sequence_output"])[real], expected["sequence_output"][real]) < TOL
    )
    assert max_diff(out["pooled_output"], expected["pooled_output"]) < TOL
    for got, want in zip(out["encoder_outputs"], expected["encoder_outputs"], strict=True):
        assert max_diff(np.asarray(got)[real], want[real]) < TOL
        assert np.all(np.asarray(got)[~real] == 0.0)


@pytest.mark.parametrize("jit_compile", [True, False])
@pytest.mark.parametrize("token_bucket", [1, 5, 64])
def test_matches_padded_encoder(
    encoder_factory, max_diff, small_kwargs, inputs_factory, jit_compile, token_bucket
):
    encoder = encoder_factory("gelu", seed=2)
    x = _holey_inputs(inputs_factory)
    padded = encoder(x, training=False)
    fast = PaddingFreeEncoder(encoder, token_bucket=token_bucket, jit_compile=jit_compile)
    out = fast(x)
    real = x["input_mask"].astype(bool)
    assert out["sequence_output"].shape == padded["sequence_output"].shape
    assert (
        max_diff(
            np.asarray(out["sequence_output"])[real], np.asarray(padded["sequence_output"])[real]
        )
        < TOL
    )
    assert max_diff(out["pooled_output"], padded["pooled_output"]) < TOL
    assert len(out["encoder_outputs"]) == small_kwargs["num_layers"]
    # Real tokens never see the padding, whatever ids sit there.
    y = {k: v.copy() for k, v in x.items()}
    y["input_word_ids"][~real] = 7
    y["input_type_ids"][~real] = 1
    assert max_diff(fast(y)["sequence_output"], out["sequence_output"]) < TOL
    # ...while a changed real token changes its sequence's pooled output: the test can fail.
    y["input_word_ids"][2, 3] = (y["input_word_ids"][2, 3] + 1) % small_kwargs["vocab_size"]
    assert max_diff(fast(y)["pooled_output"][2], out["pooled_output"][2]) > 1e-3


@pytest.mark.slow
def test_batches_of_other_shapes_and_counts_reuse_the_wrapper(
    encoder_factory, max_diff, small_kwargs, inputs_factory
):
    encoder = encoder_factory("gelu", seed=3, hidden_dropout=0.0, attention_dropout=0.0)
    fast = PaddingFreeEncoder(encoder, token_bucket=8)
    for batch, seq_len, lengths in [(2, 12, [12, 3]), (2, 12, [12, 4]), (3, 9, [2, 9, 5])]:
        x = inputs_factory(batch=batch, seq_len=seq_len, lengths=lengths, seed=batch)
        real = x["input_mask"].astype(bool)
        got = np.asarray(fast(x)["sequence_output"])[real]
        want = np.asarray(encoder(x, training=False)["sequence_output"])[real]
        assert max_diff(got, want) < TOL


@pytest.mark.slow
def test_predict_batches_numpy_inputs(encoder_factory, max_diff, small_kwargs, inputs_factory):
    encoder = encoder_factory("gelu", seed=4)
    x = inputs_factory(batch=5, seq_len=8, lengths=[8, 7, 3, 2, 5], seed=4)
    fast = PaddingFreeEncoder(encoder)
    predicted = fast.predict(x, batch_size=2, verbose=0)
    whole = fast(x)
    assert isinstance(predicted["sequence_output"], np.ndarray)
    assert predicted["sequence_output"].shape == (5, 8, small_kwargs["hidden_size"])
    assert max_diff(predicted["sequence_output"], whole["sequence_output"]) < TOL
    assert max_diff(predicted["encoder_outputs"][0], whole["encoder_outputs"][0]) < TOL


@pytest.mark.slow
def test_keras_file_and_export_archive_round_trip(
    encoder_factory, max_diff, inputs_factory, tmp_path
):
    """A Keras model: a .keras file restores it whole, and ExportArchive exports it."""
    encoder = encoder_factory("gelu", seed=6)
    fast = PaddingFreeEncoder(encoder, token_bucket=8)
    assert isinstance(fast, keras.Model)
    x = _holey_inputs(inputs_factory)
    expected = fast(x)
    path = str(tmp_path / "padding_free.keras")
    fast.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, PaddingFreeEncoder) and restored.token_bucket == 8
    assert max_diff(restored(x)["sequence_output"], expected["sequence_output"]) == 0.0

    archive = keras.export.ExportArchive()
    archive.track(fast)
    spec = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in x}

    def serve(inputs):
        outputs = fast(inputs)
        flat = {key: outputs[key] for key in ("sequence_output", "pooled_output")}
        flat.update({f"encoder_output_{i}": t for i, t in enumerate(outputs["encoder_outputs"])})
        return flat

    archive.add_endpoint("serve", serve, input_signature=[spec])
    archive.write_out(str(tmp_path / "export"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"](
        **{name: tf.constant(value) for name, value in x.items()}
    )
    assert max_diff(served["sequence_output"], expected["sequence_output"]) == 0.0
    assert max_diff(served["pooled_output"], expected["pooled_output"]) == 0.0
    assert max_diff(served["encoder_output_0"], expected["encoder_outputs"][0]) == 0.0


def test_empty_batch(encoder_factory, small_kwargs, inputs_factory):
    encoder = encoder_factory("gelu")
    x = {k: v[:0] for k, v in inputs_factory().items()}
    out = PaddingFreeEncoder(encoder)(x)
    assert out["sequence_output"].shape == (0, 10, small_kwargs["hidden_size"])
    assert out["pooled_output"].shape == (0, small_kwargs["hidden_size"])


@pytest.mark.slow
def test_mixed_bfloat16_error_is_that_of_the_padded_encoder(
    encoder_factory, max_diff, small_kwargs, inputs_factory
):
    encoder = encoder_factory("gelu", seed=5)
    x = _holey_inputs(inputs_factory)
    real = x["input_mask"].astype(bool)
    exact = np.asarray(encoder(x, training=False)["sequence_output"])[real]
    mixed = BertEncoder(**{**small_kwargs, "hidden_act": "gelu"}, dtype="mixed_bfloat16")
    mixed.set_weights(encoder.get_weights())
    out = PaddingFreeEncoder(mixed)(x)
    assert keras.backend.standardize_dtype(out["sequence_output"].dtype) == "bfloat16"
    padded_error = max_diff(np.asarray(mixed(x, training=False)["sequence_output"])[real], exact)
    free_error = max_diff(np.asarray(out["sequence_output"], np.float32)[real], exact)
    assert 0 < free_error <= 2 * padded_error + 1e-2


def test_bad_inputs_name_the_field(small_kwargs, inputs_factory):
    encoder = BertEncoder(**{**small_kwargs, "max_position_embeddings": 8})
    fast = PaddingFreeEncoder(encoder)
    x = inputs_factory(batch=2, seq_len=8, lengths=[8, 3])
    with pytest.raises(KeyError, match="input_type_ids"):
        fast({k: v for k, v in x.items() if k != "input_type_ids"})
    with pytest.raises(ValueError, match="input_mask"):
        fast({**x, "input_mask": x["input_mask"][:, :5]})
    with pytest.raises(ValueError, match="max_position_embeddings"):
        fast(inputs_factory(batch=1, seq_len=10, lengths=[10]))
    with pytest.raises(ValueError, match="token_bucket"):
        PaddingFreeEncoder(encoder, token_bucket=0)


def test_token_layout_round_trip():
    mask = np.array([[1, 1, 0], [1, 0, 1]], "int32")
    # Real positions 0, 1, 3, 5, then two fillers (= batch * seq_len).
    layout = TokenLayout(mask, np.array([0, 1, 3, 5, 6, 6], "int32"))
    tokens = np.arange(1, 7, dtype="float32").reshape(1, 6, 1) * 10
    padded = np.asarray(layout.to_padded(tokens))[..., 0]
    np.testing.assert_array_equal(padded, [[10, 20, 0], [30, 0, 40]])
    back = np.asarray(layout.to_tokens(padded[..., None]))[0, :, 0]
    # Fillers read the last position (finite; their results are dropped).
    np.testing.assert_array_equal(back, [10, 20, 30, 40, 40, 40])
    # Attention reads padding as a copy of some packed row instead of zeros.
    unmasked = np.asarray(layout.to_padded(tokens, zero_padding=False))[..., 0]
    np.testing.assert_array_equal(unmasked * mask, padded)
    assert set(unmasked[mask == 0]) <= set(tokens.ravel())


def test_padding_free_inference_routes_a_task_model_and_restores_it(
    ref, encoder_factory, max_diff, inputs_factory
):
    """Inside `padding_free_inference` a classifier built on the encoder answers through
    the real tokens only (its [CLS] logits equal the numpy reference's), eagerly and
    traced; training calls and batches without padding keep the padded graph; on exit
    nothing of it remains."""
    from keras_bert_zoo.models import BertClassifier
    from keras_bert_zoo.models.padding_free import padding_free_inference

    encoder = encoder_factory("gelu", seed=3, hidden_dropout=0.0, attention_dropout=0.0)
    model = BertClassifier(encoder, num_classes=3, dropout=0.0)
    x = _holey_inputs(inputs_factory)
    head = model.layers[-1].output_dense
    pooled = ref.encoder(
        ref.encoder_weights(encoder),
        x["input_word_ids"],
        x["input_mask"],
        x["input_type_ids"],
        encoder.num_heads,
        "gelu",
    )["pooled_output"]
    expected = pooled @ head.kernel.numpy() + head.bias.numpy()
    weights = [v.path for v in model.weights]
    calls = []
    with padding_free_inference(model):
        inner = encoder.inference_route
        assert inner is not None
        counting = encoder.route_inference(lambda inputs: calls.append(1) or inner(inputs))
        with counting:
            eager = model(x, training=False)
            traced = tf.function(lambda inputs: model(inputs, training=False))(x)
            trained = model(x, training=True)
            assert len(calls) == 2  # the inference calls, not the training one
            # A batch without padding runs the padded graph: nothing to gather.
            full = inputs_factory(batch=2, seq_len=8, lengths=[8, 8], seed=4)
            np.testing.assert_allclose(
                model(full, training=False), model(full, training=True), atol=TOL
            )
            assert len(calls) == 2
        assert encoder.inference_route is inner  # nested blocks restore the outer route
    assert encoder.inference_route is None
    assert [v.path for v in model.weights] == weights  # no wrapper tracked
    for got in (eager, traced, trained, model(x, training=False)):
        assert max_diff(got, expected) < TOL
