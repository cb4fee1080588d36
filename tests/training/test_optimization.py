"""optimization.py against independent numpy restatements of the update rules."""

import math

import keras
import numpy as np
import pytest

from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.training import optimization, schedules

SMALL = {
    "vocab_size": 50,
    "hidden_size": 16,
    "num_layers": 1,
    "num_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 16,
}


def _is_excluded(path, embeddings=False):
    # The BERT rule, restated on our paths: LayerNorm and bias variables are exempt.
    parts = path.split("/")
    excluded = any("layer_norm" in part for part in parts) or parts[-1].endswith("bias")
    if embeddings:
        excluded = excluded or parts[-1] in ("embeddings", "position_embeddings")
    return excluded


def _encoder_and_gradients(num_steps, seed=0):
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(**SMALL)
    rng = np.random.default_rng(seed)
    variables = encoder.trainable_variables
    for variable in variables:  # non-trivial weights so the decay and norms matter
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype("float32"))
    gradients = [
        [rng.normal(0.0, 1.0, v.shape).astype("float32") for v in variables]
        for _ in range(num_steps)
    ]
    return encoder, gradients


def _numpy_adamw(weights, gradients, lrs, decays, beta_1, beta_2, epsilon, wd):
    """AdamW (Loshchilov & Hutter): decoupled decay, bias-corrected moments.

    The bias correction is folded into the step size and epsilon is added to sqrt(v),
    as in Kingma & Ba's section 2 ("epsilon hat"), tf.compat.v1's AdamOptimizer and
    Keras: with epsilon=1e-6 and small gradients the textbook placement differs by more
    than float32 noise.
    """
    weights = [w.astype(np.float64) for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, (grads, lr) in enumerate(zip(gradients, lrs, strict=True), start=1):
        for i, g in enumerate(grads):
            if decays[i]:
                weights[i] = weights[i] - lr * wd * weights[i]
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            step_size = lr * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
            weights[i] = weights[i] - step_size * m[i] / (np.sqrt(v[i]) + epsilon)
    return weights


def _numpy_lamb(weights, gradients, lrs, decays, adapts, beta_1, beta_2, epsilon, wd):
    """LAMB as in You et al. 2019 / TF Addons: decay inside the trust-ratio'd update."""
    weights = [w.astype(np.float64) for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, (grads, lr) in enumerate(zip(gradients, lrs, strict=True), start=1):
        for i, g in enumerate(grads):
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            update = (m[i] / (1 - beta_1**t)) / (np.sqrt(v[i] / (1 - beta_2**t)) + epsilon)
            if decays[i]:
                update = update + wd * weights[i]
            ratio = 1.0
            if adapts[i]:
                w_norm, u_norm = np.linalg.norm(weights[i]), np.linalg.norm(update)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            weights[i] = weights[i] - lr * ratio * update
    return weights


@pytest.mark.parametrize("exclude_embeddings", [False, True])
def test_adamw_matches_numpy_and_skips_layer_norm_and_bias(exclude_embeddings):
    steps = 3
    encoder, gradients = _encoder_and_gradients(steps)
    variables = encoder.trainable_variables
    config = optimization.OptimizerConfig(
        learning_rate=0.05,
        warmup_steps=1,
        weight_decay=0.3,
        clip_norm=None,
        exclude_embeddings_from_weight_decay=exclude_embeddings,
    )
    optimizer = optimization.create_optimizer(config, num_train_steps=4)
    assert isinstance(optimizer, keras.optimizers.AdamW) and optimizer.epsilon == 1e-6
    start = [v.numpy() for v in variables]
    lrs = []
    for grads in gradients:
        lrs.append(float(optimizer.learning_rate))
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in grads], variables)
    # Linear warmup over 1 step, then linear decay to 0 at step 4.
    np.testing.assert_allclose(lrs, [0.0, 0.05, 0.05 * 2 / 3], rtol=1e-6)

    decays = [not _is_excluded(v.path, exclude_embeddings) for v in variables]
    assert 0 < sum(decays) < len(decays)
    expected = _numpy_adamw(start, gradients, lrs, decays, 0.9, 0.999, 1e-6, 0.3)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(
            variable.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=variable.path
        )


def test_traced_adamw_decays_at_each_steps_rate_from_one_evaluation_of_the_schedule():
    """In a traced step (as the training loop runs it) the decay uses the rate of the
    step being taken, and the schedule is evaluated once for the decay of every
    variable and once for the update, not once per decayed variable."""
    import tensorflow as tf

    evaluations = []

    class RisingRate(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            evaluations.append(step)
            return 0.01 * (tf.cast(step, tf.float32) + 1.0)

        def get_config(self):
            return {}

    steps = 2
    encoder, gradients = _encoder_and_gradients(steps, seed=3)
    variables = encoder.trainable_variables
    optimizer = optimization.AdamW(learning_rate=RisingRate(), weight_decay=0.2)
    optimizer.build(variables)
    start = [v.numpy() for v in variables]
    step = tf.function(lambda grads: optimizer.apply(grads, variables))
    for grads in gradients:
        step([tf.constant(g) for g in grads])
    decays = [not _is_excluded(v.path) for v in variables]
    assert sum(decays) > 2
    assert len(evaluations) == 2  # one trace: the decay's and the update's
    # The fused kernel's bias corrections (beta_1^t, beta_2^t) once per step, too.
    graph = step.get_concrete_function([tf.constant(g) for g in gradients[0]]).graph
    op_types = [op.type for op in graph.get_operations()]
    assert op_types.count("ResourceApplyAdam") == len(variables)
    assert op_types.count("Pow") == 2
    expected = _numpy_adamw(start, gradients, [0.01, 0.02], decays, 0.9, 0.999, 1e-6, 0.2)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(
            variable.numpy(), want, rtol=1e-5, atol=1e-6, err_msg=variable.path
        )


def test_lamb_matches_numpy_with_exclusions():
    steps = 3
    encoder, gradients = _encoder_and_gradients(steps, seed=1)
    variables = encoder.trainable_variables
    config = optimization.OptimizerConfig(
        optimizer="lamb", learning_rate=0.01, schedule="constant", weight_decay=0.2, clip_norm=None
    )
    optimizer = optimization.create_optimizer(config, num_train_steps=10)
    assert isinstance(optimizer, optimization.Lamb)
    start = [v.numpy() for v in variables]
    for grads in gradients:
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in grads], variables)
    excluded = [_is_excluded(v.path) for v in variables]
    decays = [not e for e in excluded]
    expected = _numpy_lamb(start, gradients, [0.01] * steps, decays, decays, 0.9, 0.999, 1e-6, 0.2)
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(
            variable.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=variable.path
        )

    # Keras' own Lamb adapts every variable (and decays outside the ratio): on a
    # LayerNorm gamma it lands elsewhere, which is why optimization.Lamb exists.
    encoder, gradients = _encoder_and_gradients(steps, seed=1)
    keras_lamb = keras.optimizers.Lamb(learning_rate=0.01, epsilon=1e-6)
    for grads in gradients:
        keras_lamb.apply(
            [keras.ops.convert_to_tensor(g) for g in grads], encoder.trainable_variables
        )
    gamma = next(i for i, v in enumerate(variables) if v.path.endswith("layer_norm/gamma"))
    assert not np.allclose(encoder.trainable_variables[gamma].numpy(), expected[gamma], rtol=1e-3)


def test_global_norm_clipping_matches_numpy():
    encoder, gradients = _encoder_and_gradients(1, seed=2)
    variables = encoder.trainable_variables
    start = [v.numpy() for v in variables]
    config = optimization.OptimizerConfig(
        optimizer="adamw", learning_rate=0.01, schedule="constant", weight_decay=0.0, clip_norm=1.0
    )
    optimizer = optimization.create_optimizer(config, num_train_steps=10)
    optimizer.apply([keras.ops.convert_to_tensor(g) for g in gradients[0]], variables)
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in gradients[0]))
    assert norm > 10  # clipping is active
    clipped = [[g / norm for g in gradients[0]]]
    # Adam is invariant to a common gradient scale only up to epsilon: with the clipped
    # gradient (norm 1, elements ~1e-2) epsilon matters, so this checks the clipping.
    expected = _numpy_adamw(start, clipped, [0.01], [False] * len(variables), 0.9, 0.999, 1e-6, 0.0)
    unclipped = _numpy_adamw(
        start, gradients, [0.01], [False] * len(variables), 0.9, 0.999, 1e-6, 0.0
    )
    assert max(np.max(np.abs(a - b)) for a, b in zip(expected, unclipped, strict=True)) > 1e-5
    for variable, want in zip(variables, expected, strict=True):
        np.testing.assert_allclose(
            variable.numpy(), want, rtol=1e-5, atol=5e-7, err_msg=variable.path
        )


def _closed_form(step, peak, total, warmup, end=0.0, power=1.0, from_zero=False):
    if step < warmup:
        return peak * step / warmup
    start, length = (0, total) if from_zero else (warmup, total - warmup)
    progress = min(max(step - start, 0), length) / length
    return (peak - end) * (1 - progress) ** power + end


@pytest.mark.parametrize(
    "kwargs",
    [
        {"warmup": 10},
        {"warmup": 0},
        {"warmup": 10, "end": 1e-5, "power": 2.0},
        {"warmup": 10, "from_zero": True},
    ],
)
def test_warmup_polynomial_decay_values(kwargs):
    schedule = schedules.create_learning_rate_schedule(
        "linear",
        1e-4,
        100,
        warmup_steps=kwargs["warmup"],
        end_learning_rate=kwargs.get("end", 0.0),
        power=kwargs.get("power", 1.0),
        decay_from_step_zero=kwargs.get("from_zero", False),
    )
    for step in [0, 1, 5, 9, 10, 11, 55, 99, 100, 150]:
        want = _closed_form(step, 1e-4, 100, **kwargs)
        assert float(schedule(step)) == pytest.approx(want, rel=1e-5, abs=1e-12), step
    if kwargs == {"warmup": 10}:
        assert float(schedule(10)) == pytest.approx(1e-4)  # continuous at the warmup's end
        assert float(schedule(55)) == pytest.approx(5e-5)  # half way through the decay
    if kwargs.get("from_zero"):
        # google-research/bert: the decay runs under the warmup, so it resumes at 0.9 x peak.
        assert float(schedule(10)) == pytest.approx(9e-5)


def test_warmup_cosine_and_constant_values():
    cosine = schedules.create_learning_rate_schedule(
        "cosine", 2e-5, 110, warmup_steps=10, end_learning_rate=2e-6
    )
    for step in [0, 5, 10, 35, 60, 110, 200]:
        if step < 10:
            want = 2e-5 * step / 10
        else:
            progress = min(step - 10, 100) / 100
            want = 2e-6 + (2e-5 - 2e-6) * 0.5 * (1 + math.cos(math.pi * progress))
        assert float(cosine(step)) == pytest.approx(want, rel=1e-5, abs=1e-12), step
    constant = schedules.create_learning_rate_schedule("constant", 3e-5, 50, warmup_steps=5)
    assert [float(constant(s)) for s in (0, 1, 5, 30, 50, 80)] == pytest.approx(
        [0.0, 6e-6, 3e-5, 3e-5, 3e-5, 3e-5]
    )


def test_config_errors_and_loss_scale():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        optimization.OptimizerConfig(optimizer="sgd")
    with pytest.raises(ValueError, match="schedule must be one of"):
        optimization.OptimizerConfig(schedule="step")
    with pytest.raises(ValueError, match="warmup_steps must be in"):
        optimization.create_optimizer(optimization.OptimizerConfig(warmup_steps=20), 10)
    with pytest.raises(ValueError, match="Invalid exclusion pattern"):
        optimization.AdamW(weight_decay_exclusions=["("])
    config = optimization.OptimizerConfig(warmup_proportion=0.1, loss_scale=True)
    optimizer = optimization.create_optimizer(config, num_train_steps=200)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    assert optimizer.inner_optimizer.learning_rate is not None
    assert optimizer.inner_optimizer._learning_rate.warmup_steps == 20


def test_optimizers_and_schedule_serialize():
    schedule = schedules.WarmupPolynomialDecay(1e-4, 100, 10, 1e-6, 1.0, True)
    lamb = optimization.Lamb(learning_rate=schedule, weight_decay=0.02, global_clipnorm=1.0)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(lamb))
    assert isinstance(restored, optimization.Lamb)
    assert restored.weight_decay_rate == 0.02 and restored.global_clipnorm == 1.0
    assert restored.weight_decay_exclusions == optimization.DEFAULT_WEIGHT_DECAY_EXCLUSIONS
    assert float(restored.learning_rate) == pytest.approx(0.0)
    adamw = keras.optimizers.deserialize(
        keras.optimizers.serialize(optimization.AdamW(weight_decay_exclusions=["bias"]))
    )
    assert isinstance(adamw, optimization.AdamW) and adamw.weight_decay_exclusions == ("bias",)


def test_adamw_update_runs_as_the_fused_kernel_and_equals_keras_adam():
    # Our AdamW with no decay is Keras' Adam: the same numbers, through one
    # ResourceApplyAdam op per variable (the numpy tests above check the values with
    # decay).
    import tensorflow as tf

    rng = np.random.default_rng(5)
    start = [rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=(4,)).astype("float32")]
    grads = [[rng.normal(size=w.shape).astype("float32") for w in start] for _ in range(3)]
    ours = [keras.Variable(w) for w in start]
    theirs = [keras.Variable(w) for w in start]
    fused = optimization.AdamW(learning_rate=0.01, weight_decay=0.0, weight_decay_exclusions=())
    keras_adam = keras.optimizers.Adam(learning_rate=0.01, epsilon=1e-6)
    fused.build(ours)
    step = tf.function(lambda g: fused.apply(g, ours))
    for g in grads:
        step([tf.constant(v) for v in g])
        keras_adam.apply([tf.constant(v) for v in g], theirs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    graph = step.get_concrete_function([tf.constant(v) for v in grads[0]]).graph
    op_types = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():  # noqa: SLF001 (ops inside cond branches)
        op_types |= {node.op for node in function.definition.node_def}
    assert "ResourceApplyAdam" in op_types
