"""compile / fit / evaluate / predict for every model, learning, and XLA parity."""

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

SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _encoder(small_kwargs, **kwargs):
    return BertEncoder(
        **{**small_kwargs, "hidden_dropout": 0.0, "attention_dropout": 0.0, **kwargs}
    )


def _small_encoder(small_kwargs):
    """One block: enough to exercise the Keras training API, cheaper to trace."""
    return _encoder(small_kwargs, num_layers=1)


def _sgd():
    # Graph tracing of Adam's per-variable updates dominates these tests' time on CPU.
    return keras.optimizers.SGD(0.01)


def _finite(values):
    return all(np.isfinite(v) for v in values)


def _token5_data(inputs_factory, n=64, seq_len=8, seed=0):
    """Label 1 iff token 5 occurs among the real tokens: learnable from the tokens alone."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, seq_len + 1, n)
    x = inputs_factory(batch=n, seq_len=seq_len, lengths=lengths, seed=seed)
    x["input_type_ids"][:] = 0
    ids = x["input_word_ids"]
    ids[ids == 5] = 6
    y = (np.arange(n) % 2).astype("int32")
    for row in np.flatnonzero(y):
        ids[row, rng.integers(1, lengths[row])] = 5
    ids[:, 0] = 2  # a [CLS]-like first token
    return x, y


@pytest.mark.slow
def test_classifier_learns_toy_task(small_kwargs, inputs_factory):
    keras.utils.set_random_seed(0)
    x, y = _token5_data(inputs_factory)
    model = BertClassifier(_encoder(small_kwargs), num_classes=2, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=SCCE, metrics=["accuracy"])
    before = model.evaluate(x, y, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=16, epochs=5, shuffle=False, verbose=0)  # 20 steps
    after = model.evaluate(x, y, verbose=0, return_dict=True)
    losses = history.history["loss"]
    assert len(losses) == 5 and _finite(losses)
    assert losses[-1] < losses[0]
    assert after["loss"] < 0.7 * before["loss"], (before, after)
    assert after["accuracy"] > 0.8
    logits = model.predict(x, verbose=0)
    assert logits.shape == (64, 2) and logits.dtype == np.float32
    assert np.mean(np.argmax(logits, -1) == y) == pytest.approx(after["accuracy"])


@pytest.mark.slow
def test_regressor_fit_evaluate_predict(small_kwargs, inputs_factory):
    model = BertClassifier(_small_encoder(small_kwargs), num_classes=1)
    model.compile(optimizer=_sgd(), loss="mse", metrics=["mae"])
    x = inputs_factory(batch=8, seq_len=6, lengths=[6, 5, 4, 6, 5, 4, 6, 3])
    y = np.linspace(0.0, 5.0, 8).astype("float32")[:, None]
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert _finite(history.history["loss"])
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    assert set(result) >= {"loss", "mae"}
    assert model.predict(x, verbose=0).shape == (8, 1)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")  # unused pooler
def test_span_labeler_fit_evaluate_predict(small_kwargs, inputs_factory):
    model = BertSpanLabeler(_small_encoder(small_kwargs))
    model.compile(optimizer=_sgd(), loss={"start_logits": SCCE, "end_logits": SCCE})
    x = inputs_factory(batch=4, seq_len=9, lengths=[9, 8, 7, 9])
    y = {"start_logits": np.array([1, 2, 3, 4]), "end_logits": np.array([2, 4, 5, 6])}
    history = model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert _finite(history.history["loss"])
    assert np.isfinite(model.evaluate(x, y, verbose=0, return_dict=True)["loss"])
    out = model.predict(x, verbose=0)
    assert out["start_logits"].shape == out["end_logits"].shape == (4, 9)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Gradients do not exist:UserWarning")  # unused pooler
def test_token_classifier_fit_with_padding_weights(small_kwargs, inputs_factory):
    model = BertTokenClassifier(_small_encoder(small_kwargs), num_classes=5)
    model.compile(optimizer=_sgd(), loss=SCCE, weighted_metrics=["accuracy"])
    x = inputs_factory(batch=4, seq_len=7, lengths=[7, 5, 3, 6])
    y = x["input_word_ids"] % 5
    weights = x["input_mask"].astype("float32")
    history = model.fit(x, y, sample_weight=weights, batch_size=2, epochs=1, verbose=0)
    assert _finite(history.history["loss"])
    result = model.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    assert 0.0 <= result["accuracy"] <= 1.0
    assert model.predict(x, verbose=0).shape == (4, 7, 5)


@pytest.mark.slow
def test_multiple_choice_fit_evaluate_predict(small_kwargs, inputs_factory):
    model = BertMultipleChoice(_small_encoder(small_kwargs), num_choices=3)
    model.compile(optimizer=_sgd(), loss=SCCE, metrics=["accuracy"])
    flat = inputs_factory(batch=12, seq_len=6, lengths=[6, 5, 4] * 4)
    x = {k: v.reshape(4, 3, 6) for k, v in flat.items()}
    y = np.array([0, 1, 2, 1])
    history = model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert _finite(history.history["loss"])
    assert "accuracy" in model.evaluate(x, y, verbose=0, return_dict=True)
    assert model.predict(x, verbose=0).shape == (4, 3)


def test_multiple_choice_scores_each_choice_independently(small_kwargs, inputs_factory):
    """Logit [b, c] is the score of choice c alone: permuting choices permutes logits."""
    model = BertMultipleChoice(_encoder(small_kwargs), num_choices=3)
    flat = inputs_factory(batch=6, seq_len=6, lengths=[6, 5, 4, 3, 6, 5])
    x = {k: v.reshape(2, 3, 6) for k, v in flat.items()}
    logits = np.asarray(model(x))
    order = [2, 0, 1]
    permuted = np.asarray(model({k: v[:, order] for k, v in x.items()}))
    np.testing.assert_allclose(permuted, logits[:, order], atol=1e-5)
    # Equal to the pooled score computed per choice through the encoder.
    pooled = model.encoder(flat)["pooled_output"]
    scores = np.asarray(model.choice_head(pooled)).reshape(2, 3)
    np.testing.assert_allclose(logits, scores, atol=1e-5)


@pytest.mark.slow
def test_encoder_compiles_and_fits_on_pooled_output(small_kwargs, inputs_factory):
    encoder = _small_encoder(small_kwargs)
    encoder.compile(optimizer=_sgd(), loss={"pooled_output": "mse"})
    x = inputs_factory(batch=4, seq_len=6, lengths=[6, 5, 4, 3])
    y = {"pooled_output": np.zeros((4, small_kwargs["hidden_size"]), "float32")}
    history = encoder.fit(x, y, epochs=2, verbose=0)
    assert _finite(history.history["loss"])
    assert history.history["loss"][1] < history.history["loss"][0]
    assert np.isfinite(encoder.evaluate(x, y, verbose=0, return_dict=True)["loss"])


# --- BertPretrainer's built-in objective --------------------------------------------------


def _pretraining_batch(inputs_factory, vocab):
    rng = np.random.default_rng(3)
    x = inputs_factory(batch=8, seq_len=10, vocab_size=vocab, lengths=[10, 9, 8, 7] * 2)
    x["masked_lm_positions"] = np.array([[1, 3, 5]] * 4 + [[2, 4, 0]] * 4, "int32")
    y = {
        "masked_lm_ids": rng.integers(1, vocab, (8, 3)).astype("int32"),
        "masked_lm_weights": np.array([[1, 1, 1]] * 4 + [[1, 1, 0]] * 4, "float32"),
        "next_sentence_labels": np.array([[0], [1]] * 4, "int32"),
    }
    return x, y


@pytest.mark.slow
def test_pretrainer_trains_on_original_objective(ref, small_kwargs, inputs_factory):
    model = BertPretrainer(_small_encoder(small_kwargs))
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    x, y = _pretraining_batch(inputs_factory, small_kwargs["vocab_size"])

    # evaluate's loss is the numpy re-derivation of run_pretraining.py's objective.
    result = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    out = model.predict(x, verbose=0)
    mlm, nsp = ref.pretraining_losses(
        out["masked_lm_logits"],
        y["masked_lm_ids"],
        y["masked_lm_weights"],
        out["next_sentence_logits"],
        y["next_sentence_labels"],
    )
    assert result["masked_lm_loss"] == pytest.approx(mlm, abs=1e-5)
    assert result["next_sentence_loss"] == pytest.approx(nsp, abs=1e-5)
    assert result["loss"] == pytest.approx(mlm + nsp, abs=1e-5)
    # Weighted accuracy: only weight-1 predictions count.
    hits = (np.argmax(out["masked_lm_logits"], -1) == y["masked_lm_ids"]) * y["masked_lm_weights"]
    assert result["masked_lm_accuracy"] == pytest.approx(
        hits.sum() / y["masked_lm_weights"].sum(), abs=1e-6
    )

    history = model.fit(x, y, batch_size=8, epochs=12, verbose=0)
    for key in (
        "loss",
        "masked_lm_loss",
        "next_sentence_loss",
        "masked_lm_accuracy",
        "next_sentence_accuracy",
    ):
        assert key in history.history and _finite(history.history[key]), key
    assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]
    np.testing.assert_allclose(
        history.history["loss"],
        np.add(history.history["masked_lm_loss"], history.history["next_sentence_loss"]),
        atol=1e-4,
    )


def test_pretrainer_with_explicit_loss_uses_it(small_kwargs, inputs_factory):
    model = BertPretrainer(_small_encoder(small_kwargs))
    model.compile(
        optimizer=_sgd(),
        loss={"masked_lm_logits": SCCE, "next_sentence_logits": SCCE},
    )
    x, y = _pretraining_batch(inputs_factory, small_kwargs["vocab_size"])
    targets = {
        "masked_lm_logits": y["masked_lm_ids"],
        "next_sentence_logits": y["next_sentence_labels"],
    }
    history = model.fit(x, targets, batch_size=4, epochs=1, verbose=0)
    assert _finite(history.history["loss"])
    assert "masked_lm_loss" not in history.history


# --- XLA --------------------------------------------------------------------------------


@pytest.mark.slow
def test_classifier_xla_fit_matches_eager(small_kwargs, inputs_factory):
    x, y = _token5_data(inputs_factory, n=16)
    models = {}
    for mode in ("eager", "xla"):
        keras.utils.set_random_seed(1)
        model = BertClassifier(_encoder(small_kwargs), num_classes=2, dropout=0.0)
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss=SCCE,
            run_eagerly=mode == "eager",
            jit_compile=mode == "xla",
        )
        models[mode] = model
    models["xla"].set_weights(models["eager"].get_weights())
    initial = models["eager"].get_weights()
    histories = {
        mode: model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history["loss"]
        for mode, model in models.items()
    }
    np.testing.assert_allclose(histories["xla"], histories["eager"], atol=1e-5)
    for a, b in zip(models["xla"].get_weights(), models["eager"].get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(
        models["xla"].predict(x, verbose=0), models["eager"].predict(x, verbose=0), atol=1e-5
    )
    # The weights really moved, so the comparison covers the update too.
    moved = [
        float(np.max(np.abs(a - b)))
        for a, b in zip(models["xla"].get_weights(), initial, strict=True)
    ]
    assert max(moved) > 1e-3
