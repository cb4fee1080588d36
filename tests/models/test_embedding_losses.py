"""The sentence embedding losses against their numpy restatements (values and, by finite
differences, gradients), Matryoshka's prefixes, GradCache against the uncached loss, and
the global batch of in-batch negatives under a MirroredStrategy of two CPU devices."""

import json
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import BertEncoder, gradient_cache
from keras_bert_zoo.models import embedding_losses as losses
from keras_bert_zoo.models.sentence_embedder import BertTextGroupEmbedder
from keras_bert_zoo.utils.errors import UserError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from child_process import environment  # noqa: E402

CHILD = pathlib.Path(__file__).resolve().parent / "_embedding_losses_mirrored_child.py"

# === The numpy restatements (float64, loops where the TF code vectorizes) ===


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _cross_entropy(logits, label):
    shifted = logits - logits.max()
    return -(shifted[label] - np.log(np.exp(shifted).sum()))


def np_mnrl(y, scale=20.0, symmetric=False, sample_weight=None):
    """sentence-transformers' MultipleNegativesRankingLoss (and its symmetric variant):
    row i's anchor against every row's positive, then every row's negatives."""
    y = np.asarray(y, np.float64)
    batch, texts = y.shape[:2]
    candidates = _unit(np.concatenate([y[:, k] for k in range(1, texts)]))
    anchors = _unit(y[:, 0])
    per_row = []
    for i in range(batch):
        forward = _cross_entropy(scale * candidates @ anchors[i], i)
        if symmetric:
            backward = _cross_entropy(scale * anchors @ _unit(y[i, 1]), i)
            forward = (forward + backward) / 2
        per_row.append(forward)
    weights = np.ones(batch) if sample_weight is None else np.asarray(sample_weight)
    return float(np.sum(np.array(per_row) * weights) / batch)


def _pair_cosines(y):
    y = np.asarray(y, np.float64)
    return np.array([_unit(row[0]) @ _unit(row[1]) for row in y])


def np_cosent(y, scores, scale=20.0):
    """log(1 + sum over pairs (i, j) with score_i < score_j of e^(scale (cos_i - cos_j)))."""
    cosines = _pair_cosines(y)
    terms = [0.0]
    for i in range(len(cosines)):
        for j in range(len(cosines)):
            if scores[i] < scores[j]:
                terms.append(scale * (cosines[i] - cosines[j]))
    terms = np.array(terms)
    return float(terms.max() + np.log(np.exp(terms - terms.max()).sum()))


def np_cosine_mse(y, scores):
    return float(np.mean((_pair_cosines(y) - np.asarray(scores, np.float64)) ** 2))


def _gradient(fn, y, step=1e-6):
    """Central finite differences of the float64 restatement `fn(y)`."""
    y = np.asarray(y, np.float64)
    gradient = np.zeros_like(y)
    for index in np.ndindex(y.shape):
        up, down = y.copy(), y.copy()
        up[index] += step
        down[index] -= step
        gradient[index] = (fn(up) - fn(down)) / (2 * step)
    return gradient


def _tf_value_and_gradient(loss, y_true, y_pred, sample_weight=None):
    y_pred = tf.constant(y_pred, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(y_pred)
        value = loss(y_true, y_pred, sample_weight)
    return float(value), tape.gradient(value, y_pred).numpy()


RNG = np.random.default_rng(0)
TRIPLETS = RNG.standard_normal((6, 3, 8)).astype("float32")
# Queries with three hard negatives each.
WITH_NEGATIVES = RNG.standard_normal((5, 5, 8)).astype("float32")
PAIRS = RNG.standard_normal((7, 2, 8)).astype("float32")
SCORES = np.array([0.1, 0.9, 0.5, 0.5, 0.0, 0.3, 1.0], "float32")  # one tie


# === Values ===


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("y_pred", [PAIRS, TRIPLETS, WITH_NEGATIVES], ids=["2", "3", "5"])
def test_multiple_negatives_ranking_equals_numpy(y_pred, symmetric):
    loss = losses.MultipleNegativesRankingLoss(symmetric=symmetric)
    np.testing.assert_allclose(
        float(loss(None, y_pred)), np_mnrl(y_pred, symmetric=symmetric), rtol=1e-5
    )
    # y_true is ignored; a scale and sample weights.
    weights = np.linspace(0.5, 2.0, len(y_pred)).astype("float32")
    scaled = losses.MultipleNegativesRankingLoss(scale=7.0, symmetric=symmetric)
    np.testing.assert_allclose(
        float(scaled(np.zeros(len(y_pred)), y_pred, sample_weight=weights)),
        np_mnrl(y_pred, scale=7.0, symmetric=symmetric, sample_weight=weights),
        rtol=1e-5,
    )


def test_scored_pair_losses_equal_numpy():
    np.testing.assert_allclose(
        float(losses.CoSENTLoss()(SCORES, PAIRS)), np_cosent(PAIRS, SCORES), rtol=1e-5
    )
    np.testing.assert_allclose(
        float(losses.CoSENTLoss(scale=5.0)(SCORES[:, None], PAIRS)),
        np_cosent(PAIRS, SCORES, scale=5.0),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        float(losses.CosineSimilarityLoss()(SCORES, PAIRS)), np_cosine_mse(PAIRS, SCORES), rtol=1e-5
    )
    # Only the scores' order counts in CoSENT.
    np.testing.assert_allclose(
        float(losses.CoSENTLoss()(SCORES * 5 + 1, PAIRS)), np_cosent(PAIRS, SCORES), rtol=1e-5
    )


def test_gradients_equal_numpy_finite_differences():
    y = WITH_NEGATIVES[:4, :4, :5]
    value, gradient = _tf_value_and_gradient(
        losses.MultipleNegativesRankingLoss(symmetric=True), None, y
    )
    np.testing.assert_allclose(value, np_mnrl(y, symmetric=True), rtol=1e-5)
    np.testing.assert_allclose(
        gradient, _gradient(lambda v: np_mnrl(v, symmetric=True), y), rtol=2e-3, atol=2e-5
    )
    pairs, scores = PAIRS[:, :, :5], SCORES
    _, gradient = _tf_value_and_gradient(losses.CoSENTLoss(), scores, pairs)
    np.testing.assert_allclose(
        gradient, _gradient(lambda v: np_cosent(v, scores), pairs), rtol=2e-3, atol=2e-5
    )


# === Matryoshka ===


def test_matryoshka_is_the_weighted_sum_of_prefix_losses():
    loss = losses.MatryoshkaLoss(
        losses.MultipleNegativesRankingLoss(), dims=(8, 4, 2), weights=(1.0, 0.5, 3.0)
    )
    expected = sum(w * np_mnrl(WITH_NEGATIVES[..., :d]) for d, w in ((8, 1.0), (4, 0.5), (2, 3.0)))
    np.testing.assert_allclose(float(loss(None, WITH_NEGATIVES)), expected, rtol=1e-5)
    cosent = losses.MatryoshkaLoss(losses.CoSENTLoss(), dims=(8, 3))
    np.testing.assert_allclose(
        float(cosent(SCORES, PAIRS)),
        np_cosent(PAIRS, SCORES) + np_cosent(PAIRS[..., :3], SCORES),
        rtol=1e-5,
    )


def test_matryoshka_prefix_terms_read_only_their_prefix():
    inner = losses.MultipleNegativesRankingLoss()
    changed = TRIPLETS.copy()
    changed[..., 4:] = RNG.standard_normal(changed[..., 4:].shape)  # beyond the prefix
    prefix_term = losses.MatryoshkaLoss(inner, dims=(4,))
    assert float(prefix_term(None, changed)) == pytest.approx(float(prefix_term(None, TRIPLETS)))
    full_term = losses.MatryoshkaLoss(inner, dims=(8,))
    assert abs(float(full_term(None, changed)) - float(full_term(None, TRIPLETS))) > 1e-3
    # Nested: the sum moves by the full-width term's change alone.
    nested = losses.MatryoshkaLoss(inner, dims=(8, 4))
    np.testing.assert_allclose(
        float(nested(None, changed)) - float(nested(None, TRIPLETS)),
        float(full_term(None, changed)) - float(full_term(None, TRIPLETS)),
        rtol=1e-4,
    )
    # No gradient reaches the features beyond the widest prefix.
    _, gradient = _tf_value_and_gradient(losses.MatryoshkaLoss(inner, dims=(6, 3)), None, TRIPLETS)
    assert np.all(gradient[..., 6:] == 0) and np.any(gradient[..., :6] != 0)


# === Configuration and bad input ===


@pytest.mark.parametrize(
    "loss",
    [
        losses.MultipleNegativesRankingLoss(scale=10.0, symmetric=True),
        losses.CoSENTLoss(scale=15.0, gather_across_replicas=False),
        losses.CosineSimilarityLoss(),
        losses.MatryoshkaLoss(losses.CoSENTLoss(), dims=(8, 4), weights=(1.0, 0.25)),
    ],
    ids=lambda loss: type(loss).__name__,
)
def test_losses_round_trip_their_config(loss):
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert type(restored) is type(loss)
    assert restored.get_config() == loss.get_config()
    assert float(restored(SCORES, PAIRS)) == pytest.approx(float(loss(SCORES, PAIRS)))


def test_bad_arguments_are_user_errors():
    with pytest.raises(UserError, match="at most 8"):
        losses.MatryoshkaLoss(losses.CoSENTLoss(), dims=(16, 8))(SCORES, PAIRS)
    with pytest.raises(UserError, match="2 weights for 3 dims"):
        losses.MatryoshkaLoss(losses.CoSENTLoss(), dims=(8, 4, 2), weights=(1, 1))
    with pytest.raises(UserError, match="no sample_weight"):
        losses.CoSENTLoss()(SCORES, PAIRS, sample_weight=np.ones(7))
    with pytest.raises(UserError, match="at least 2 texts"):
        losses.MultipleNegativesRankingLoss()(None, PAIRS[:, :1])
    with pytest.raises(UserError, match="chunk_size"):
        gradient_cache.cached_loss_and_gradients(None, {}, loss=losses.CoSENTLoss(), chunk_size=0)


# === GradCache ===


SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}


@pytest.fixture(scope="module")
def group_model():
    model = BertTextGroupEmbedder(BertEncoder(**SMALL), embedding_dim=16)
    rng = np.random.default_rng(3)
    x = _texts(1, 1)
    model(x)
    for variable in model.weights:
        value = 0.3 * rng.standard_normal(variable.shape)
        variable.assign((value + ("gamma" in variable.path)).astype("float32"))
    return model


def _texts(batch, texts, seed=0, seq_len=7):
    rng = np.random.default_rng(seed)
    mask = (np.arange(seq_len) < rng.integers(2, seq_len + 1, (batch, texts, 1))).astype("int32")
    return {
        "input_word_ids": rng.integers(1, 97, (batch, texts, seq_len)).astype("int32") * mask,
        "input_mask": mask,
        "input_type_ids": np.zeros_like(mask),
    }


def _uncached(model, loss, x, y, training, chunks=None):
    """The loss and gradients of one recorded pass (over `chunks` row slices if given)."""
    with tf.GradientTape() as tape:
        if chunks is None:
            y_pred = model(x, training=training)
        else:
            rows = lambda a, b: tf.nest.map_structure(lambda t: t[a:b], x)  # noqa: E731
            y_pred = tf.concat([model(rows(a, b), training=training) for a, b in chunks], 0)
        value = loss(y, y_pred)
    return float(value), tape.gradient(value, model.trainable_variables)


def _assert_gradients_equal(actual, expected):
    # The encoder's pooler is not read: no gradient, in both.
    assert [a is None for a in actual] == [e is None for e in expected]
    pairs = [
        (tf.convert_to_tensor(a), tf.convert_to_tensor(e))
        for a, e in zip(actual, expected, strict=True)
        if e is not None
    ]
    largest = max(float(tf.reduce_max(tf.abs(e))) for _, e in pairs)
    for a, e in pairs:
        np.testing.assert_allclose(a.numpy(), e.numpy(), atol=2e-5 * largest, rtol=1e-4)


@pytest.mark.parametrize(
    "make_loss, texts, chunk_size",
    [
        (lambda: losses.MultipleNegativesRankingLoss(symmetric=True), 4, 4),
        (
            lambda: losses.MatryoshkaLoss(
                losses.MultipleNegativesRankingLoss(), dims=(16, 8), weights=(1, 2)
            ),
            3,
            1,
        ),
        (lambda: losses.CoSENTLoss(), 2, 5),
    ],
    ids=["mnrl_symmetric_negatives", "matryoshka_chunks_of_one", "cosent_one_chunk_filled"],
)
def test_cached_equals_uncached_on_a_batch_that_fits(group_model, make_loss, texts, chunk_size):
    """Inference mode (no dropout): the same loss and weight gradients, to float
    rounding, for a last chunk that is shorter (6 rows in chunks of 4) or alone."""
    loss = make_loss()
    x, y = _texts(6, texts, seed=texts), np.linspace(0, 1, 6)[::-1].astype("float32")
    value, gradients, y_pred = gradient_cache.cached_loss_and_gradients(
        group_model, x, y, loss=loss, chunk_size=chunk_size, training=False
    )
    expected, expected_gradients = _uncached(group_model, loss, x, y, training=False)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    _assert_gradients_equal(gradients, expected_gradients)
    np.testing.assert_allclose(y_pred, group_model(x, training=False), atol=1e-6)


def test_cached_replays_each_chunks_dropout(group_model):
    """Training mode: each chunk is embedded twice (without, then with gradients) under
    the same dropout masks, so the result equals one recorded pass over the same chunks
    with the seeds it started from; a pass with other masks differs."""
    loss = losses.MultipleNegativesRankingLoss()
    x = _texts(6, 3, seed=5)
    seeds = gradient_cache._seed_states(group_model)  # noqa: SLF001
    assert seeds, "the model's dropout layers have seed generators"
    start = [s.numpy() for s in seeds]

    value, gradients, _ = gradient_cache.cached_loss_and_gradients(
        group_model, x, loss=loss, chunk_size=4, training=True
    )
    for state, saved in zip(seeds, start, strict=True):
        state.assign(saved)
    expected, expected_gradients = _uncached(
        group_model, loss, x, None, training=True, chunks=[(0, 4), (4, 6)]
    )
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    _assert_gradients_equal(gradients, expected_gradients)
    other_masks, _ = _uncached(group_model, loss, x, None, training=True, chunks=[(0, 4), (4, 6)])
    assert abs(other_masks - expected) > 1e-4


def test_cached_compiles_with_xla():
    """Fixed-shape chunks (the last one filled with repeated rows whose gradient is
    zero): the function compiles with XLA, as the training step's forward pass does.
    A small Dense model (the encoder's own XLA programs are the step's tests) with a
    dropout layer, whose seed the function saves and restores in the program."""
    inputs = keras.Input((None, 5))
    hidden = keras.layers.Dropout(0.1)(keras.layers.Dense(8, activation="tanh")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(6)(hidden))
    x = np.random.default_rng(7).standard_normal((6, 3, 5)).astype("float32")
    loss = losses.MatryoshkaLoss(losses.MultipleNegativesRankingLoss(), dims=(6, 3))
    compiled = tf.function(
        lambda x: gradient_cache.cached_loss_and_gradients(
            model, x, loss=loss, chunk_size=4, training=False
        )[:2],
        jit_compile=True,
    )
    value, gradients = compiled(x)
    expected, expected_gradients = _uncached(model, loss, x, None, training=False)
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)
    _assert_gradients_equal(gradients, expected_gradients)


# === The global batch across replicas ===


@pytest.mark.slow
def test_in_batch_negatives_span_replicas_under_mirrored():
    """Two logical CPU devices (a fresh process: devices are fixed when TensorFlow
    starts), a global batch of 8, 4 a replica: the replicas' summed loss and gradients
    (the training step's all-reduce) equal the one-device loss and gradients on the
    global batch, for hard negatives with the symmetric term, CoSENT, and GradCache of
    Matryoshka; each replica's half alone gives another loss."""
    completed = subprocess.run(
        [sys.executable, str(CHILD)],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    assert results.pop("num_replicas") == 2
    assert sorted(results) == ["cached_matryoshka_mnrl", "cosent", "mnrl_symmetric_hard_negatives"]
    for name, result in results.items():
        assert result["loss"] == pytest.approx(result["one_device_loss"], rel=1e-5), name
        assert result["max_gradient_difference"] <= 2e-5 * result["max_gradient"], name
        assert abs(result["halves_alone_loss"] - result["one_device_loss"]) > 0.05, name
