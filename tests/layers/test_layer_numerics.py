"""Layers against the float64 numpy reference in bert_numpy_reference.py."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import (
    BertEmbeddings,
    BertSelfAttention,
    ClassificationHead,
    MaskedLMHead,
    SpanHead,
    TransformerEncoderBlock,
    apply_activation,
)

TOL = 1e-5
HIDDEN, HEADS, INTER, VOCAB = 32, 4, 64, 50


def _hidden(batch=2, seq_len=7, seed=1, scale=1.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal((batch, seq_len, HIDDEN))).astype("float32")


def _mask(batch=2, seq_len=7):
    mask = np.ones((batch, seq_len), "int32")
    mask[1, 4:] = 0
    return mask


def _max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


# --- activations -------------------------------------------------------------------------


def test_gelu_exact_and_tanh_each_match_their_formula_and_differ(ref):
    x = np.linspace(-6, 6, 2001).astype("float32")
    exact = keras.ops.convert_to_numpy(apply_activation("gelu", x))
    approx = keras.ops.convert_to_numpy(apply_activation("gelu_approximate", x))
    assert _max_diff(exact, ref.gelu_exact(x)) < 1e-6
    assert _max_diff(approx, ref.gelu_tanh(x)) < 1e-6
    # The two forms are really different: swapping them breaks a 1e-5 parity test.
    gap = _max_diff(ref.gelu_exact(x), ref.gelu_tanh(x))
    assert 1e-4 < gap < 2e-3
    assert _max_diff(exact, approx) > 1e-4


def test_gelu_reference_values():
    # Hand-known values: Phi(1) = 0.841344746..., so GELU(1) = 0.841344746.
    from keras_bert_zoo.layers.activations import apply_activation as act

    assert float(act("gelu", np.float32(1.0))) == pytest.approx(0.8413447460685429, abs=1e-6)
    tanh_at_1 = 0.5 * (1 + np.tanh(np.sqrt(2 / np.pi) * (1 + 0.044715)))
    assert float(act("gelu_approximate", np.float32(1.0))) == pytest.approx(tanh_at_1, abs=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ["gelu", "gelu_approximate"])
def test_gelu_on_16_bit_inputs_is_the_rounded_exact_value(ref, name, dtype):
    # GELU of 16-bit inputs keeps their dtype and is the float64 value rounded once
    # (within half a unit in the last place, plus float32 noise); computed in the
    # 16-bit type itself, a dozen roundings put it several units off.
    import tensorflow as tf

    x16 = tf.cast(np.linspace(-6, 6, 4001), dtype)
    out = apply_activation(name, x16)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    x = tf.cast(x16, "float64").numpy()
    want = ref.gelu_exact(x) if name == "gelu" else ref.gelu_tanh(x)
    got = tf.cast(out, "float64").numpy()
    half_ulp = 2.0 ** -(8 if dtype == "bfloat16" else 11) * np.maximum(np.abs(want), 2.0**-14)
    assert np.all(np.abs(got - want) <= half_ulp * 1.01 + 1e-6)


@pytest.mark.parametrize("name", ["relu", "tanh", "linear"])
def test_other_activations(ref, name):
    x = np.linspace(-3, 3, 101).astype("float32")
    out = keras.ops.convert_to_numpy(apply_activation(name, x))
    assert _max_diff(out, ref.ACTIVATIONS[name](x)) < 1e-6


def test_unknown_activation_is_rejected():
    with pytest.raises(ValueError, match="swish"):
        apply_activation("swish", np.zeros(3, "float32"))
    with pytest.raises(ValueError, match="swish"):
        TransformerEncoderBlock(num_heads=2, intermediate_size=8, activation="swish")
    with pytest.raises(ValueError, match="swish"):
        MaskedLMHead(vocab_size=10, activation="swish")


# --- embeddings --------------------------------------------------------------------------


def test_embeddings_match_numpy(ref, randomize):
    layer = BertEmbeddings(VOCAB, HIDDEN, max_position_embeddings=16, type_vocab_size=3)
    rng = np.random.default_rng(0)
    word_ids = rng.integers(0, VOCAB, (2, 9)).astype("int32")
    type_ids = rng.integers(0, 3, (2, 9)).astype("int32")
    layer(word_ids, type_ids)
    randomize(layer, seed=3)
    out = layer(word_ids, type_ids, training=False)
    expected = ref.embeddings(ref.embeddings_weights(layer), word_ids, type_ids)
    assert out.shape == (2, 9, HIDDEN)
    assert _max_diff(out, expected) < TOL


def test_embeddings_positions_are_absolute(randomize):
    """The same token at different positions gets different vectors; position 0 row used."""
    layer = BertEmbeddings(VOCAB, HIDDEN, max_position_embeddings=16, dropout=0.0)
    ids = np.full((1, 4), 7, "int32")
    out = keras.ops.convert_to_numpy(layer(ids, np.zeros_like(ids)))
    randomize(layer, seed=4)
    out = keras.ops.convert_to_numpy(layer(ids, np.zeros_like(ids)))
    assert _max_diff(out[0, 0], out[0, 1]) > 1e-2
    # A prefix of a longer sequence embeds identically (positions start at 0).
    longer = keras.ops.convert_to_numpy(
        layer(np.full((1, 8), 7, "int32"), np.zeros((1, 8), "int32"))
    )
    assert _max_diff(out, longer[:, :4]) < 1e-6


def test_embeddings_dropout_only_in_training():
    layer = BertEmbeddings(VOCAB, HIDDEN, dropout=0.5)
    ids = np.ones((2, 6), "int32")
    a = layer(ids, np.zeros_like(ids), training=False)
    b = layer(ids, np.zeros_like(ids))
    c = layer(ids, np.zeros_like(ids), training=True)
    assert _max_diff(a, b) == 0.0
    assert _max_diff(a, c) > 0.0


# --- attention and encoder block -------------------------------------------------------


@pytest.mark.parametrize("mask_rank", [None, 2, 3])
@pytest.mark.parametrize("training", [False, True])
def test_self_attention_matches_numpy(ref, randomize, mask_rank, training):
    # training=False: the stacked projections and one transpose; True: the einsums
    # (no dropout configured, so both are deterministic).
    layer = BertSelfAttention(num_heads=HEADS, head_size=HIDDEN // HEADS)
    x = _hidden()
    if mask_rank is None:
        mask = None
    elif mask_rank == 2:
        mask = _mask()
    else:  # a causal mask on top of padding
        causal = np.tril(np.ones((7, 7), "int32"))
        mask = causal[None] * _mask()[:, None, :]
    layer(x, mask)
    randomize(layer, seed=5, scale=0.3)
    out = layer(x, mask, training=training)
    expected = ref.self_attention(ref.attention_weights(layer), x, mask, HEADS)
    assert _max_diff(out, expected) < TOL


@pytest.mark.slow
def test_self_attention_inference_applies_lora_and_keeps_quantized_layers(ref, randomize):
    layer = BertSelfAttention(num_heads=HEADS, head_size=HIDDEN // HEADS)
    x, mask = _hidden(), _mask()
    layer(x, mask)
    randomize(layer, seed=7, scale=0.3)
    plain = ref.attention_weights(layer)
    rng = np.random.default_rng(8)
    for short, projection in (("q", layer.query), ("v", layer.value)):
        projection.enable_lora(2)
        a = rng.standard_normal(projection.lora_kernel_a.shape).astype("float32")
        b = rng.standard_normal(projection.lora_kernel_b.shape).astype("float32")
        projection.lora_kernel_a.assign(a * 0.2)
        projection.lora_kernel_b.assign(b * 0.2)
        # W + (alpha / rank) A B, restated in numpy.
        delta = np.tensordot(a * 0.2, b * 0.2, axes=1) * projection.lora_alpha / 2
        plain[f"{short}_kernel"] = plain[f"{short}_kernel"] + delta.reshape(HIDDEN, -1)
    expected = ref.self_attention(plain, x, mask, HEADS)
    assert _max_diff(layer(x, mask, training=False), expected) < TOL

    # int8 projections answer through their own quantized layers, close to float.
    quantized = BertSelfAttention(num_heads=HEADS, head_size=HIDDEN // HEADS)
    quantized(x, mask)
    randomize(quantized, seed=7, scale=0.3)
    expected = ref.self_attention(ref.attention_weights(quantized), x, mask, HEADS)
    for projection in (quantized.query, quantized.key, quantized.value):
        projection.quantize("int8", type_check=False)  # a subclass of EinsumDense
    got = np.asarray(quantized(x, mask, training=False))
    assert 0.0 < _max_diff(got, expected) < 0.05 * np.abs(expected).max()


def test_self_attention_head_layout_is_google_column_blocks(ref, randomize):
    """Head i of the [H, heads, head] kernel is columns i*head:(i+1)*head of Google's [H, H].

    Zeroing all query columns of head 1 in Google's flattened layout must equal zeroing
    query.kernel[:, 1, :] in the layer.
    """
    layer = BertSelfAttention(num_heads=HEADS, head_size=HIDDEN // HEADS)
    x = _hidden()
    layer(x)
    randomize(layer, seed=6, scale=0.3)
    kernel = layer.query.kernel.numpy()
    kernel[:, 1, :] = 0.0
    layer.query.kernel.assign(kernel)
    w = ref.attention_weights(layer)
    head = HIDDEN // HEADS
    assert np.all(w["q_kernel"][:, head : 2 * head] == 0.0)
    assert np.count_nonzero(w["q_kernel"][:, :head]) > 0
    assert _max_diff(layer(x), ref.self_attention(w, x, None, HEADS)) < TOL


def test_fully_masked_row_is_finite():
    layer = BertSelfAttention(num_heads=2, head_size=4)
    x = np.random.default_rng(0).standard_normal((1, 3, 8)).astype("float32")
    out = keras.ops.convert_to_numpy(layer(x, np.zeros((1, 3), "int32")))
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("lora", [False, True])
def test_head_projections_equal_keras_einsum_dense(dtype, lora):
    # The 2-D matmul projections against Keras' own EinsumDense with the same weights.
    from keras_bert_zoo.layers.attention import _HeadsEinsumDense

    rng = np.random.default_rng(5)
    cases = [
        ("btd,dnh->btnh", (None, 2, 3), "nh", (2, 5, 6)),
        ("btnh,nhd->btd", (None, 6), "d", (2, 5, 2, 3)),
    ]
    for equation, output_shape, bias_axes, input_shape in cases:
        ours, theirs = (
            cls(equation, output_shape=output_shape, bias_axes=bias_axes, dtype=dtype)
            for cls in (_HeadsEinsumDense, keras.layers.EinsumDense)
        )
        for layer in (ours, theirs):
            layer.build(input_shape)
            if lora:
                layer.enable_lora(2)
        for mine, reference in zip(ours.weights, theirs.weights, strict=True):
            value = rng.standard_normal(reference.shape).astype("float32")
            mine.assign(value)
            reference.assign(value)
        x = rng.standard_normal(input_shape).astype("float32")
        got, want = (np.asarray(keras.ops.cast(layer(x), "float32")) for layer in (ours, theirs))
        assert got.shape == want.shape == input_shape[:2] + tuple(output_shape[1:])
        assert keras.ops.convert_to_tensor(ours(x)).dtype == theirs.compute_dtype
        np.testing.assert_allclose(got, want, rtol=0.02 if "bfloat16" in dtype else 1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate", "relu"])
def test_encoder_block_matches_numpy(ref, randomize, activation):
    block = TransformerEncoderBlock(
        num_heads=HEADS, intermediate_size=INTER, activation=activation, layer_norm_epsilon=1e-12
    )
    x, mask = _hidden(), _mask()
    block(x, mask)
    randomize(block, seed=7)
    out = block(x, mask, training=False)
    w = ref.block_weights(block)
    expected = ref.encoder_block(w, x, mask, HEADS, activation)
    assert _max_diff(out, expected) < TOL
    if activation.startswith("gelu"):
        # The other GELU is measurably different at this tolerance: the test discriminates.
        other = "gelu_approximate" if activation == "gelu" else "gelu"
        assert _max_diff(out, ref.encoder_block(w, x, mask, HEADS, other)) > 10 * TOL


def test_encoder_block_layer_norm_epsilon_is_used(ref, randomize):
    block = TransformerEncoderBlock(
        num_heads=HEADS, intermediate_size=INTER, layer_norm_epsilon=0.5
    )
    x = _hidden(scale=0.3)
    block(x)
    randomize(block, seed=8)
    w = ref.block_weights(block)
    out = block(x)
    assert _max_diff(out, ref.encoder_block(w, x, None, HEADS, "gelu_approximate", 0.5)) < TOL
    assert _max_diff(out, ref.encoder_block(w, x, None, HEADS, "gelu_approximate")) > 1e-3


def test_encoder_block_dropout_only_in_training():
    block = TransformerEncoderBlock(num_heads=2, intermediate_size=16, hidden_dropout=0.5)
    x = _hidden()[..., :8]
    a, b = block(x), block(x, training=False)
    assert _max_diff(a, b) == 0.0
    assert _max_diff(a, block(x, training=True)) > 0.0


def test_encoder_block_rejects_indivisible_hidden():
    block = TransformerEncoderBlock(num_heads=3, intermediate_size=8)
    with pytest.raises(ValueError, match="divisible"):
        block(np.zeros((1, 2, 8), "float32"))


# --- heads -------------------------------------------------------------------------------


def test_masked_lm_head_untied_matches_numpy(ref, randomize):
    head = MaskedLMHead(vocab_size=VOCAB, activation="gelu")
    x = _hidden(batch=2, seq_len=7)
    positions = np.array([[0, 3, 3], [6, 1, 0]], "int32")
    head(x, positions)
    randomize(head, seed=9)
    logits = head(x, positions)
    assert logits.shape == (2, 3, VOCAB)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    w = ref.masked_lm_weights(head)
    expected = ref.masked_lm_head(w, x, positions, head.decoder_kernel.numpy(), "gelu")
    assert _max_diff(logits, expected) < TOL


def test_masked_lm_head_only_computes_masked_positions(ref, randomize):
    """Logits at gathered position p equal the full-sequence projection at p."""
    embedding = keras.layers.Embedding(VOCAB, HIDDEN)
    embedding.build((None,))
    head = MaskedLMHead(vocab_size=VOCAB, embedding_layer=embedding)
    x = _hidden(batch=2, seq_len=7)
    positions = np.array([[5, 2], [0, 6]], "int32")
    head(x, positions)
    randomize(head, seed=10)
    randomize(embedding, seed=11)
    # The tied head owns no decoder kernel of its own: its only [V, H] variable is the
    # embedding table itself.
    assert not hasattr(head, "decoder_kernel")
    tables = [v for v in head.weights if tuple(v.shape) == (VOCAB, HIDDEN)]
    assert len(tables) == 1 and tables[0] is embedding.embeddings
    logits = keras.ops.convert_to_numpy(head(x, positions))
    assert logits.shape == (2, 2, VOCAB)
    w = ref.masked_lm_weights(head)
    table = embedding.embeddings.numpy()
    all_positions = np.tile(np.arange(7), (2, 1))
    full = ref.masked_lm_head(w, x, all_positions, table, "gelu_approximate")  # [B, S, V]
    for b in range(2):
        for p in range(2):
            assert _max_diff(logits[b, p], full[b, positions[b, p]]) < TOL
    # Tied: changing the embedding table changes the logits exactly as numpy says.
    embedding.embeddings.assign(table * 2.0)
    doubled = ref.masked_lm_head(w, x, positions, table * 2.0, "gelu_approximate")
    assert _max_diff(head(x, positions), doubled) < TOL


def test_classification_head_matches_numpy(randomize):
    head = ClassificationHead(num_classes=3, dropout=0.5)
    pooled = _hidden()[:, 0]
    head(pooled)
    randomize(head, seed=12)
    out = head(pooled)
    k, b = head.output_dense.kernel.numpy(), head.output_dense.bias.numpy()
    assert out.shape == (2, 3)
    assert _max_diff(out, pooled.astype(np.float64) @ k + b) < TOL
    assert _max_diff(out, head(pooled, training=True)) > 0.0  # dropout in training


def test_span_head_matches_numpy(randomize):
    head = SpanHead()
    x = _hidden()
    head(x)
    randomize(head, seed=13)
    start, end = head(x)
    logits = (
        x.astype(np.float64) @ head.output_dense.kernel.numpy() + head.output_dense.bias.numpy()
    )
    assert start.shape == end.shape == (2, 7)
    assert _max_diff(start, logits[..., 0]) < TOL
    assert _max_diff(end, logits[..., 1]) < TOL
