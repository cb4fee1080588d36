"""The distillation losses and students (`keras_bert_zoo.models.distillation`) against a
numpy restatement of their math and against the layers they read."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import SMALL, randomize_weights

from keras_bert_zoo.models import (
    BertClassifier,
    BertEncoder,
    BertMultipleChoice,
    BertSpanLabeler,
    BertTokenClassifier,
    distillation,
)

RNG = np.random.default_rng(0)


# === numpy restatement ===


def _log_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def _kl(teacher_logits, student_logits, axis=-1):
    p = _log_softmax(teacher_logits, axis)
    q = _log_softmax(student_logits, axis)
    return (np.exp(p) * (p - q)).sum(axis=axis)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _loss(kind, teacher, student, temperature, mask=None):
    return float(
        distillation.SoftTargetLoss(kind, temperature)(
            teacher, student, sample_weight=None if mask is None else mask.astype("float32")
        )
    )


@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_soft_classes_is_t_squared_kl_of_the_scaled_distributions(temperature):
    teacher = RNG.normal(size=(5, 3)).astype("float32") * 3
    student = RNG.normal(size=(5, 3)).astype("float32") * 3
    expected = temperature**2 * _kl(teacher / temperature, student / temperature).mean()
    np.testing.assert_allclose(_loss("classes", teacher, student, temperature), expected, rtol=1e-5)


def test_soft_labels_is_binary_kl_per_label():
    temperature = 2.0
    teacher = RNG.normal(size=(4, 5)).astype("float32") * 3
    student = RNG.normal(size=(4, 5)).astype("float32") * 3
    p, q = _sigmoid(teacher / temperature), _sigmoid(student / temperature)
    binary_kl = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    expected = temperature**2 * binary_kl.mean()
    np.testing.assert_allclose(_loss("labels", teacher, student, temperature), expected, rtol=1e-5)


def test_soft_score_is_squared_error_without_temperature():
    teacher = RNG.normal(size=(6, 1)).astype("float32")
    student = RNG.normal(size=(6, 1)).astype("float32")
    expected = ((teacher - student) ** 2).mean()
    np.testing.assert_allclose(_loss("score", teacher, student, 3.0), expected, rtol=1e-5)


def test_soft_positions_leave_padding_out_of_each_distribution():
    temperature = 2.0
    teacher = RNG.normal(size=(3, 7)).astype("float32") * 3
    student = RNG.normal(size=(3, 7)).astype("float32") * 3
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5], "int32")
    expected = (
        np.mean(
            [
                _kl(
                    teacher[row, : mask[row].sum()] / temperature,
                    student[row, : mask[row].sum()] / temperature,
                )
                for row in range(3)
            ]
        )
        * temperature**2
    )
    loss = distillation.SoftTargetLoss("positions", temperature)
    got = loss(
        distillation.mask_positions(teacher, mask), distillation.mask_positions(student, mask)
    )
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)
    # Whatever the padded logits hold, the loss is the same.
    noisy = np.where(mask == 1, student, 1e3).astype("float32")
    again = loss(
        distillation.mask_positions(teacher, mask), distillation.mask_positions(noisy, mask)
    )
    np.testing.assert_allclose(float(again), expected, rtol=1e-5)


def test_soft_token_classes_average_over_real_tokens_only():
    temperature = 3.0
    teacher = RNG.normal(size=(2, 6, 4)).astype("float32") * 3
    student = RNG.normal(size=(2, 6, 4)).astype("float32") * 3
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    per_token = _kl(teacher / temperature, student / temperature) * temperature**2
    expected = per_token[mask == 1].mean()
    np.testing.assert_allclose(
        _loss("token_classes", teacher, student, temperature, mask), expected, rtol=1e-5
    )


def test_hidden_state_and_attention_losses_average_over_real_tokens():
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "float32")
    teacher = RNG.normal(size=(2, 4, 8)).astype("float32")
    student = RNG.normal(size=(2, 4, 8)).astype("float32")
    expected = ((teacher - student) ** 2).mean(-1)[mask == 1].mean()
    got = distillation.HiddenStateLoss()(teacher, student, sample_weight=mask)
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)

    teacher_probs = _softmax_rows(RNG.normal(size=(2, 3, 4, 4)))
    student_probs = _softmax_rows(RNG.normal(size=(2, 3, 4, 4)))
    per_query = (teacher_probs * np.log(teacher_probs / student_probs)).sum(-1).mean(1)
    got = distillation.AttentionLoss()(
        teacher_probs.astype("float32"), student_probs.astype("float32"), sample_weight=mask
    )
    np.testing.assert_allclose(float(got), per_query[mask == 1].mean(), rtol=1e-5)


def _softmax_rows(x):
    return np.exp(_log_softmax(x))


# === What the losses read of the models ===


def _inputs(batch=2, length=8, choices=None, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch, length) if choices is None else (batch, choices, length)
    lengths = rng.integers(3, length + 1, size=shape[:-1])
    mask = (np.arange(length) < lengths[..., None]).astype("int32")
    return {
        "input_word_ids": (rng.integers(1, SMALL["vocab_size"], size=shape) * mask).astype("int32"),
        "input_mask": mask,
        "input_type_ids": np.zeros(shape, "int32"),
    }


def _encoder(num_layers=2, seed=0, **overrides):
    encoder = BertEncoder(**{**SMALL, "num_layers": num_layers, **overrides})
    encoder(_inputs())
    randomize_weights(encoder, seed=seed)
    return encoder


def test_attention_probabilities_are_the_ones_the_block_attends_with():
    encoder = _encoder()
    x = _inputs()
    block = encoder.transformer_layers[1]
    hidden = encoder(x)["encoder_outputs"][0]
    probabilities = distillation.attention_probabilities(block, hidden, x["input_mask"])
    # probabilities @ values, through the output projection, is the attention layer's output.
    attention = block.attention
    values = attention.value(hidden)
    context = tf.einsum("bnqk,bknh->bqnh", probabilities, values)
    np.testing.assert_allclose(
        attention.attention_output(context).numpy(),
        attention(hidden, x["input_mask"]).numpy(),
        atol=1e-5,
    )


def test_layer_subset_student_is_the_teachers_named_layers():
    teacher = BertClassifier(_encoder(num_layers=4), num_classes=3)
    randomize_weights(teacher, seed=1)
    student = distillation.layer_subset_student(
        teacher, [0, 3], lambda encoder: BertClassifier(encoder, num_classes=3)
    )
    assert len(student.encoder.transformer_layers) == 2
    teacher_weights = {w.path: w.numpy() for w in teacher.weights}
    renamed = {"transformer_layer_1": "transformer_layer_3"}  # student block 1 <- teacher 3
    for weight in student.weights:
        path = weight.path
        for student_name, teacher_name in renamed.items():
            path = path.replace(student_name, teacher_name)
        np.testing.assert_array_equal(weight.numpy(), teacher_weights[path], err_msg=path)


def test_layer_subset_student_refuses_blocks_the_teacher_lacks():
    teacher = BertClassifier(_encoder(num_layers=2), num_classes=2)
    with pytest.raises(ValueError, match="--student_layers=0,2: the teacher has blocks 0 to 1"):
        distillation.layer_subset_student(teacher, [0, 2], lambda e: BertClassifier(e, 2))


@pytest.mark.parametrize(
    "build, kind, choices",
    [
        (lambda e: BertClassifier(e, num_classes=3), "classes", None),
        (
            lambda e: BertSpanLabeler(e),
            {"start_logits": "positions", "end_logits": "positions"},
            None,
        ),
        (lambda e: BertTokenClassifier(e, num_classes=5), "token_classes", None),
        (lambda e: BertMultipleChoice(e, num_choices=3), "classes", 3),
    ],
    ids=["classifier", "span", "tagger", "multiple_choice"],
)
def test_full_student_with_soft_loss_at_t1_starts_with_zero_loss_and_gradient(build, kind, choices):
    teacher = build(_encoder(num_layers=2))
    randomize_weights(teacher, seed=2)
    student = distillation.layer_subset_student(teacher, [0, 1], build)
    distiller = distillation.TaskDistiller(
        teacher,
        student,
        kind,
        temperature=1.0,
        hard_label_weight=0.0,
        hidden_state_weight=1.0,
        attention_weight=1.0,
    )
    x = _inputs(choices=choices)
    with tf.GradientTape() as tape:
        # Inference mode: dropout would make the same weights answer differently.
        loss = distiller.compute_loss(x, None, distiller(x, training=False), training=False)
    gradients = tape.gradient(loss, distiller.trainable_variables)
    assert abs(float(loss)) < 1e-6
    largest = max(float(tf.reduce_max(tf.abs(g))) for g in gradients if g is not None)
    assert largest < 1e-5, largest
    # The teacher is not the distiller's: its weights are not trained nor checkpointed.
    teacher_ids = {id(v) for v in teacher.weights}
    assert not teacher_ids & {id(v) for v in distiller.weights}


@pytest.mark.slow
def test_distiller_projects_a_narrower_student_and_learns_the_teacher():
    """A student of another width, hidden states through the projection, fits the
    teacher's outputs on a fixed batch (the loss falls by half)."""
    keras.utils.set_random_seed(0)
    teacher = BertClassifier(_encoder(num_layers=2), num_classes=3)
    randomize_weights(teacher, seed=3)
    student = BertClassifier(
        _encoder(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32), num_classes=3
    )
    distiller = distillation.TaskDistiller(
        teacher,
        student,
        "classes",
        temperature=2.0,
        hard_label_weight=0.0,
        hidden_state_weight=1.0,
        layer_map=[(0, 1)],
    )
    assert distiller.projection is not None
    distiller.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = _inputs(batch=8)
    y = np.zeros(8, "int32")
    first = float(distiller.compute_loss(x, y, distiller(x, training=False), training=False))
    distiller.fit(x, y, epochs=40, batch_size=8, verbose=0)
    last = float(distiller.compute_loss(x, y, distiller(x, training=False), training=False))
    assert last < 0.5 * first, (first, last)


def test_unlabelled_rows_do_not_reach_the_hard_label_loss():
    teacher = BertClassifier(_encoder(num_layers=1), num_classes=2)
    student = BertClassifier(_encoder(num_layers=1, seed=5), num_classes=2)
    distiller = distillation.TaskDistiller(teacher, student, "classes", soft_target_weight=0.0)
    distiller.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = _inputs(batch=4)
    logits = student(x, training=False).numpy()
    y = np.array([0, 1, 0, 1], "int32")
    weight = np.array([1, 1, 0, 0], "float32")
    got = float(distiller.compute_loss(x, y, distiller(x, training=False), weight, training=False))
    per_row = -_log_softmax(logits.astype("float64"))[np.arange(4), y]
    # Keras' default reduction: the weighted sum over the batch size.
    np.testing.assert_allclose(got, (per_row * weight).sum() / 4, rtol=1e-5)


def test_cached_teacher_outputs_replace_the_teacher_in_the_step():
    """Outputs under `x["teacher_outputs"]` (a span labeler's two heads) give the loss of
    the teacher in the step, and the teacher is not called."""
    build = BertSpanLabeler
    teacher = build(_encoder(num_layers=2))
    randomize_weights(teacher, seed=4)
    student = distillation.layer_subset_student(teacher, [1], build)
    kinds = {"start_logits": "positions", "end_logits": "positions"}
    live = distillation.TaskDistiller(teacher, student, kinds, hard_label_weight=0.0)
    x = _inputs()
    expected = float(live.compute_loss(x, None, live(x, training=False), training=False))

    class Untouchable(keras.Model):
        def call(self, inputs, training=None):
            raise AssertionError("the teacher ran although its outputs were given")

    cached = distillation.TaskDistiller(Untouchable(), student, kinds, hard_label_weight=0.0)
    outputs = {key: np.asarray(value) for key, value in teacher(x, training=False).items()}
    with_outputs = {**x, "teacher_outputs": outputs}
    got = float(
        cached.compute_loss(
            with_outputs, None, cached(with_outputs, training=False), training=False
        )
    )
    assert expected > 0
    np.testing.assert_allclose(got, expected, rtol=1e-6)
