"""BertEncoder / BertPretrainer against the float64 numpy reference; padding; XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import BertEncoder, BertPretrainer, pretraining_losses

TOL = 1e-5


def _max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def _encoder(small_kwargs, randomize, activation="gelu_approximate", seed=0, **kwargs):
    encoder = BertEncoder(**{**small_kwargs, "hidden_act": activation, **kwargs})
    randomize(encoder, seed=seed)
    return encoder


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_encoder_matches_numpy(ref, randomize, small_kwargs, inputs_factory, activation):
    encoder = _encoder(small_kwargs, randomize, activation)
    x = inputs_factory(batch=3, seq_len=12, lengths=[12, 9, 4])
    out = encoder(x, training=False)
    w = ref.encoder_weights(encoder)
    expected = ref.encoder(
        w,
        x["input_word_ids"],
        x["input_mask"],
        x["input_type_ids"],
        small_kwargs["num_heads"],
        activation,
    )
    mask = x["input_mask"].astype(bool)
    # Every position (padded ones included: they are computed, just never attended to).
    assert _max_diff(out["sequence_output"], expected["sequence_output"]) < TOL
    assert _max_diff(out["pooled_output"], expected["pooled_output"]) < TOL
    assert len(out["encoder_outputs"]) == small_kwargs["num_layers"]
    for got, want in zip(out["encoder_outputs"], expected["encoder_outputs"], strict=True):
        assert _max_diff(np.asarray(got)[mask], want[mask]) < TOL
    # The other GELU's numpy model is far outside the tolerance: the parity is meaningful.
    other = "gelu" if activation == "gelu_approximate" else "gelu_approximate"
    wrong = ref.encoder(w, x["input_word_ids"], x["input_mask"], x["input_type_ids"], 4, other)[
        "sequence_output"
    ]
    assert _max_diff(out["sequence_output"], wrong) > 10 * TOL


def test_encoder_predict_matches_call(randomize, small_kwargs, inputs_factory):
    encoder = _encoder(small_kwargs, randomize)
    x = inputs_factory()
    called = encoder(x, training=False)
    predicted = encoder.predict(x, verbose=0)
    assert set(predicted) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert _max_diff(called["sequence_output"], predicted["sequence_output"]) < TOL
    assert _max_diff(called["pooled_output"], predicted["pooled_output"]) < TOL


def test_encoder_dropout_is_inactive_at_inference(randomize, small_kwargs, inputs_factory):
    encoder = _encoder(small_kwargs, randomize, hidden_dropout=0.3, attention_dropout=0.3)
    x = inputs_factory()
    a = encoder(x)["sequence_output"]
    b = encoder(x, training=False)["sequence_output"]
    c = encoder(x, training=True)["sequence_output"]
    assert _max_diff(a, b) == 0.0
    assert _max_diff(a, c) > 1e-3


# --- padding is invisible -----------------------------------------------------------------


def _padded(tokens, types, pad):
    n = len(tokens)
    return {
        "input_word_ids": np.array([list(tokens) + [0] * pad], "int32"),
        "input_mask": np.array([[1] * n + [0] * pad], "int32"),
        "input_type_ids": np.array([list(types) + [0] * pad], "int32"),
    }


def test_padding_is_invisible(randomize, small_kwargs):
    encoder = _encoder(small_kwargs, randomize, "gelu", seed=3)
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, small_kwargs["vocab_size"], 9)
    types = [0] * 5 + [1] * 4
    outputs = {pad: encoder(_padded(tokens, types, pad)) for pad in (0, 3, 20)}
    base = outputs[0]
    for pad in (3, 20):
        out = outputs[pad]
        assert out["sequence_output"].shape == (1, 9 + pad, small_kwargs["hidden_size"])
        assert _max_diff(out["sequence_output"][:, :9], base["sequence_output"]) < TOL
        assert _max_diff(out["pooled_output"], base["pooled_output"]) < TOL
        for got, want in zip(out["encoder_outputs"], base["encoder_outputs"], strict=True):
            assert _max_diff(np.asarray(got)[:, :9], want) < TOL

    # Whatever sits in padded positions (token and segment ids) changes nothing.
    x = _padded(tokens, types, 6)
    y = {k: v.copy() for k, v in x.items()}
    y["input_word_ids"][0, 9:] = rng.integers(1, small_kwargs["vocab_size"], 6)
    y["input_type_ids"][0, 9:] = 1
    a, b = encoder(x), encoder(y)
    assert _max_diff(a["sequence_output"][:, :9], b["sequence_output"][:, :9]) < TOL
    assert _max_diff(a["pooled_output"], b["pooled_output"]) < TOL
    # ...whereas changing a real token does change the outputs (the test can fail).
    z = {k: v.copy() for k, v in x.items()}
    z["input_word_ids"][0, 4] = (z["input_word_ids"][0, 4] % (small_kwargs["vocab_size"] - 1)) + 1
    assert _max_diff(a["pooled_output"], encoder(z)["pooled_output"]) > 1e-3


def test_padding_is_invisible_within_a_batch(randomize, small_kwargs, inputs_factory):
    """A row's outputs do not depend on the other rows or on the batch's padded length."""
    encoder = _encoder(small_kwargs, randomize, seed=4)
    x = inputs_factory(batch=3, seq_len=16, lengths=[16, 7, 3])
    batched = encoder(x)
    for row, length in enumerate([16, 7, 3]):
        single = encoder({k: v[row : row + 1, :length] for k, v in x.items()})
        got = batched["sequence_output"][row : row + 1, :length]
        assert _max_diff(got, single["sequence_output"]) < TOL
        assert _max_diff(batched["pooled_output"][row : row + 1], single["pooled_output"]) < TOL


# --- pretraining head and losses -----------------------------------------------------------


def _pretrainer_data(inputs_factory, vocab, seed=0):
    rng = np.random.default_rng(seed)
    x = inputs_factory(batch=3, seq_len=10, vocab_size=vocab, seed=seed, lengths=[10, 8, 6])
    x["masked_lm_positions"] = np.array([[1, 4, 7, 0], [2, 5, 0, 0], [3, 1, 4, 0]], "int32")
    y = {
        "masked_lm_ids": rng.integers(1, vocab, (3, 4)).astype("int32"),
        "masked_lm_weights": np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 0]], "float32"),
        "next_sentence_labels": np.array([[0], [1], [1]], "int32"),
    }
    return x, y


def test_pretrainer_matches_numpy(ref, randomize, small_kwargs, inputs_factory):
    encoder = BertEncoder(**{**small_kwargs, "hidden_act": "gelu"})
    model = BertPretrainer(encoder)
    randomize(model, seed=6)
    vocab = small_kwargs["vocab_size"]
    x, y = _pretrainer_data(inputs_factory, vocab)
    out = model(x, training=False)
    assert out["masked_lm_logits"].shape == (3, 4, vocab)
    assert out["next_sentence_logits"].shape == (3, 2)

    w = ref.encoder_weights(encoder)
    enc = ref.encoder(w, x["input_word_ids"], x["input_mask"], x["input_type_ids"], 4, "gelu")
    table = w["embeddings"]["word"]  # the tied decoder weight
    mlm = ref.masked_lm_head(
        ref.masked_lm_weights(model.masked_lm_head),
        enc["sequence_output"],
        x["masked_lm_positions"],
        table,
        "gelu",
    )
    head = model.next_sentence_head.output_dense
    nsp = enc["pooled_output"] @ head.kernel.numpy() + head.bias.numpy()
    assert _max_diff(out["masked_lm_logits"], mlm) < TOL
    assert _max_diff(out["next_sentence_logits"], nsp) < TOL

    # Only masked positions are computed: logits at each position equal numpy's
    # full-sequence projection at that position.
    all_positions = np.tile(np.arange(10), (3, 1))
    full = ref.masked_lm_head(
        ref.masked_lm_weights(model.masked_lm_head),
        enc["sequence_output"],
        all_positions,
        table,
        "gelu",
    )
    logits = np.asarray(out["masked_lm_logits"])
    for b in range(3):
        for p, position in enumerate(x["masked_lm_positions"][b]):
            assert _max_diff(logits[b, p], full[b, position]) < TOL

    # The losses, against run_pretraining.py's formulas.
    mlm_loss, nsp_loss = pretraining_losses(y, out)
    want_mlm, want_nsp = ref.pretraining_losses(
        mlm, y["masked_lm_ids"], y["masked_lm_weights"], nsp, y["next_sentence_labels"]
    )
    assert float(mlm_loss) == pytest.approx(want_mlm, abs=TOL)
    assert float(nsp_loss) == pytest.approx(want_nsp, abs=TOL)


def test_pretraining_losses_match_numpy(ref):
    rng = np.random.default_rng(7)
    mlm_logits = rng.standard_normal((2, 5, 11)).astype("float32") * 3
    nsp_logits = rng.standard_normal((2, 2)).astype("float32") * 3
    labels = {
        "masked_lm_ids": rng.integers(0, 11, (2, 5)),
        "masked_lm_weights": np.array([[1, 1, 0.5, 0, 0], [1, 0, 0, 0, 0]], "float32"),
        "next_sentence_labels": np.array([1, 0]),
    }
    preds = {"masked_lm_logits": mlm_logits, "next_sentence_logits": nsp_logits}
    mlm, nsp = pretraining_losses(labels, preds)
    want_mlm, want_nsp = ref.pretraining_losses(
        mlm_logits,
        labels["masked_lm_ids"],
        labels["masked_lm_weights"],
        nsp_logits,
        labels["next_sentence_labels"],
    )
    assert float(mlm) == pytest.approx(want_mlm, abs=1e-5)
    assert float(nsp) == pytest.approx(want_nsp, abs=1e-5)
    # Weight 0 predictions are ignored whatever their label.
    changed = dict(labels, masked_lm_ids=labels["masked_lm_ids"].copy())
    changed["masked_lm_ids"][:, 3:] = (changed["masked_lm_ids"][:, 3:] + 1) % 11
    assert float(pretraining_losses(changed, preds)[0]) == pytest.approx(float(mlm), abs=1e-6)
    # No predictions at all: the 1e-5 in the denominator makes the masked-LM loss 0.
    empty = dict(labels, masked_lm_weights=np.zeros((2, 5), "float32"))
    assert float(pretraining_losses(empty, preds)[0]) == 0.0


# --- XLA ----------------------------------------------------------------------------------


def test_encoder_under_xla_matches_eager(randomize, small_kwargs, inputs_factory):
    encoder = _encoder(small_kwargs, randomize, "gelu", seed=8)
    x = inputs_factory(batch=3, seq_len=12, lengths=[12, 5, 8])
    eager = encoder(x, training=False)

    @tf.function(jit_compile=True)
    def run(inputs):
        return encoder(inputs, training=False)

    compiled = run({k: tf.constant(v) for k, v in x.items()})
    assert _max_diff(compiled["sequence_output"], eager["sequence_output"]) < TOL
    assert _max_diff(compiled["pooled_output"], eager["pooled_output"]) < TOL
    # And a second padded length (retrace) stays correct.
    x2 = inputs_factory(batch=2, seq_len=7, lengths=[7, 3], seed=1)
    again = run({k: tf.constant(v) for k, v in x2.items()})
    assert _max_diff(again["pooled_output"], encoder(x2)["pooled_output"]) < TOL


def test_keras_ops_are_backend_tensors(randomize, small_kwargs, inputs_factory):
    encoder = _encoder(small_kwargs, randomize)
    out = encoder(inputs_factory())
    assert keras.backend.standardize_dtype(out["sequence_output"].dtype) == "float32"


def test_sequence_longer_than_position_table_is_an_error(small_kwargs, inputs_factory):
    encoder = BertEncoder(**{**small_kwargs, "max_position_embeddings": 8})
    with pytest.raises(Exception, match="(?i)shape|dimension"):
        encoder(inputs_factory(batch=1, seq_len=10, lengths=[10]))
    # Exactly the table length is fine.
    assert encoder(inputs_factory(batch=1, seq_len=8, lengths=[8]))["sequence_output"].shape[1] == 8


def test_encoder_rejects_bad_arguments(small_kwargs):
    with pytest.raises(ValueError, match="divisible"):
        BertEncoder(**{**small_kwargs, "num_heads": 5})
    with pytest.raises(ValueError, match="swish"):
        BertEncoder(**small_kwargs, hidden_act="swish")
