"""Packed batches (`models/sequence_packing/`, and a job's `--packed_sequences`: the
`Trainer` with the packed loss function and packing transform the job passes).

References: the padded models on the same batch (themselves tested against the numpy
restatement of BERT in tests/layers), and a plain-Python first-fit-decreasing packer.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import BertClassifier, BertPretrainer, BertTokenClassifier
from keras_bert_zoo.models.pretrainer import pretraining_losses
from keras_bert_zoo.models.sequence_packing import pack_batch, packed_outputs
from keras_bert_zoo.runners.loss_and_weights import model_loss_fn, packing_transform
from keras_bert_zoo.training import OptimizerConfig, Trainer, create_optimizer
from tests.models.conftest import SMALL, random_encoder

SEQ_LEN = 24
SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def short_batch(batch=11, seq_len=SEQ_LEN, seed=0, predictions=5):
    """Examples of 2..seq_len real tokens, segment B in their second half, masked LM
    positions among their real tokens (with a padding prediction of weight 0 at 0)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, seq_len + 1, batch)
    lengths[0] = seq_len
    mask = (np.arange(seq_len)[None, :] < lengths[:, None]).astype("int32")
    ids = rng.integers(1, SMALL["vocab_size"], (batch, seq_len)).astype("int32") * mask
    type_ids = ((np.arange(seq_len)[None, :] >= lengths[:, None] // 2) * mask).astype("int32")
    positions = np.stack(
        [np.sort(rng.choice(np.arange(1, max(n, 2)), predictions)) for n in lengths]
    ).astype("int32")
    positions = np.minimum(positions, lengths[:, None] - 1)
    weights = np.ones((batch, predictions), "float32")
    positions[-1, -1], weights[-1, -1] = 0, 0.0  # a padding prediction, as in real data
    x = {
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": type_ids,
        "masked_lm_positions": positions,
    }
    y = {
        "masked_lm_ids": rng.integers(1, SMALL["vocab_size"], (batch, predictions)),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, batch),
    }
    return x, y


def first_fit_decreasing(lengths, capacity):
    rows = []  # remaining space
    for length in sorted(lengths, reverse=True):
        for index, remaining in enumerate(rows):
            if remaining >= length:
                rows[index] -= length
                break
        else:
            rows.append(capacity - length)
    return len(rows)


@pytest.mark.parametrize("micro_batches", [1, 2])
def test_pack_batch_moves_every_real_token_and_nothing_else(micro_batches):
    x, _ = short_batch(batch=12)
    packed = {
        k: v.numpy() for k, v in pack_batch(x, row_bucket=1, micro_batches=micro_batches).items()
    }
    mask = x["input_mask"]
    part = len(mask) // micro_batches
    rows_per_part = packed["input_word_ids"].shape[0] // micro_batches
    assert rows_per_part == max(
        first_fit_decreasing(mask[m * part : (m + 1) * part].sum(1), SEQ_LEN)
        for m in range(micro_batches)
    )
    assert rows_per_part < part  # the point: fewer rows than examples
    for m in range(micro_batches):
        rows = slice(m * rows_per_part, (m + 1) * rows_per_part)
        flat = {k: packed[k][rows].reshape(-1) for k in packed if packed[k].ndim == 2}
        for local in range(part):
            example = m * part + local
            length = mask[example].sum()
            # sequence_ids number the examples 1.. within their part.
            where = np.flatnonzero(flat["sequence_ids"] == local + 1)
            assert len(where) == length
            assert where[0] == packed["first_token_index"][example]
            np.testing.assert_array_equal(np.diff(where), 1)  # contiguous, one row
            assert where[0] // SEQ_LEN == where[-1] // SEQ_LEN
            np.testing.assert_array_equal(
                flat["input_word_ids"][where], x["input_word_ids"][example, :length]
            )
            np.testing.assert_array_equal(
                flat["input_type_ids"][where], x["input_type_ids"][example, :length]
            )
            np.testing.assert_array_equal(flat["position_ids"][where], np.arange(length))
            np.testing.assert_array_equal(
                packed["masked_lm_positions"][example],
                where[0] + x["masked_lm_positions"][example],
            )
        assert (flat["sequence_ids"] > 0).sum() == mask[m * part : (m + 1) * part].sum()
    # Row count rounded up to the bucket, never past the batch.
    assert pack_batch(x, row_bucket=5)["input_word_ids"].shape[0] % 5 == 0
    assert pack_batch(x, row_bucket=64)["input_word_ids"].shape[0] == 64


def test_pack_batch_rejects_examples_without_a_first_token():
    x, _ = short_batch()
    x["input_mask"] = x["input_mask"].copy()
    x["input_mask"][3, 0] = 0
    with pytest.raises(tf.errors.InvalidArgumentError, match="must start with a real token"):
        pack_batch(x)
    with pytest.raises(KeyError, match="input_mask"):
        pack_batch({"input_word_ids": x["input_word_ids"]})


def no_dropout_encoder(seed):
    return random_encoder(seed=seed, hidden_dropout=0.0, attention_dropout=0.0)


def gradients_of(model, loss_of):
    with tf.GradientTape() as tape:
        loss = loss_of()
    return loss, tape.gradient(loss, model.trainable_variables)


def assert_gradients_close(got, want):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(
            tf.convert_to_tensor(g).numpy(), tf.convert_to_tensor(w).numpy(), atol=2e-5, rtol=1e-3
        )


def test_packed_classifier_equals_padded_logits_loss_and_gradients():
    x, _ = short_batch()
    labels = np.arange(len(x["input_mask"])) % 3
    model = BertClassifier(no_dropout_encoder(seed=1), num_classes=3, dropout=0.0)
    inputs = {k: x[k] for k in model.input}
    packed = pack_batch(x, row_bucket=1)
    assert packed["input_word_ids"].shape[0] < len(labels)
    np.testing.assert_allclose(
        packed_outputs(model, packed, training=False), model(inputs), atol=2e-5, rtol=1e-4
    )
    want_loss, want = gradients_of(model, lambda: SCCE(labels, model(inputs, training=True)))
    got_loss, got = gradients_of(
        model, lambda: SCCE(labels, packed_outputs(model, packed, training=True))
    )
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
    assert_gradients_close(got, want)


def test_packed_pretrainer_equals_padded_losses_and_gradients():
    x, y = short_batch(seed=1)
    model = BertPretrainer(no_dropout_encoder(seed=2))
    packed = pack_batch(x, row_bucket=1)
    want_outputs, got_outputs = model(x), packed_outputs(model, packed, training=False)
    # Only real predictions (weight 1) are comparable: a padding one reads another token.
    real = y["masked_lm_weights"] > 0
    np.testing.assert_allclose(
        got_outputs["masked_lm_logits"].numpy()[real],
        want_outputs["masked_lm_logits"].numpy()[real],
        atol=2e-5,
        rtol=1e-4,
    )
    np.testing.assert_allclose(
        got_outputs["next_sentence_logits"], want_outputs["next_sentence_logits"], atol=2e-5
    )

    def total(outputs):
        masked_lm, next_sentence = pretraining_losses(y, outputs)
        return masked_lm + next_sentence

    want_loss, want = gradients_of(model, lambda: total(model(x, training=True)))
    got_loss, got = gradients_of(model, lambda: total(packed_outputs(model, packed, True)))
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
    assert_gradients_close(got, want)
    with pytest.raises(TypeError, match="BertTokenClassifier"):
        packed_outputs(BertTokenClassifier(random_encoder(), num_classes=2), packed)


def dataset_fn_of(x, y, batch):
    def dataset_fn(context):
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(48, seed=4)
        return dataset.repeat().batch(batch, drop_remainder=True)

    return dataset_fn


def compiled(model, loss=None, steps=6):
    config = OptimizerConfig(learning_rate=3e-3, warmup_steps=1)
    model.compile(optimizer=create_optimizer(config, steps), loss=loss)
    return model


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "options", "packed_options"),
    [
        # The classifier's packed loss under accumulation, XLA for the packed run only
        # (one compilation: 4 rows per micro-batch of 4); the pretrainer's in a graph, one
        # micro-batch a step. (A third case, the classifier in a graph without
        # accumulation, ran only code of these two.)
        ("classifier", {"gradient_accumulation_steps": 2}, {"jit_compile": True}),
        ("pretrainer", {}, {}),
    ],
    ids=["classifier-accumulation-xla", "pretrainer"],
)
def test_trainer_with_packed_sequences_follows_the_padded_loss_trajectory(
    tmp_path, task, options, packed_options, packed_batch_keys
):
    x, y = short_batch(batch=48, seed=2)
    traced_keys = {}
    if task == "classifier":
        x = {k: v for k, v in x.items() if k != "masked_lm_positions"}
        y = (np.arange(48) % 2).astype("int32")
    results = {}
    for packed in (False, True):
        keras.utils.set_random_seed(0)
        encoder = no_dropout_encoder(seed=3)
        if task == "classifier":
            model = compiled(BertClassifier(encoder, num_classes=2, dropout=0.0), SCCE)
        else:
            model = compiled(BertPretrainer(encoder))
        trainer = Trainer(
            model,
            model_dir=str(tmp_path / str(packed)),
            progress="none",
            steps_per_loop=3,
            checkpoint_every=0,
            # What a job passes with --packed_sequences, or without it.
            loss_fn=model_loss_fn(model, packed=packed),
            dataset_transform=(
                packing_transform(options.get("gradient_accumulation_steps", 1)) if packed else None
            ),
            **options,
            **(packed_options if packed else {}),
        )
        results[packed] = trainer.train(dataset_fn_of(x, y, batch=8), 6)
        traced_keys[packed] = list(packed_batch_keys)
        packed_batch_keys.clear()
    # The packed run trained through the packed step, on packed batches; the padded
    # run did not (equal trajectories alone would not tell the two apart).
    assert not traced_keys[False], traced_keys[False]
    assert traced_keys[True], "the packed Trainer never traced packed_loss_fn"
    assert all(
        {"sequence_ids", "position_ids", "first_token_index"} <= set(keys)
        for keys in traced_keys[True]
    ), traced_keys[True]
    padded, packed = results[False], results[True]
    assert len(packed.losses) == 6
    np.testing.assert_allclose(packed.losses, padded.losses, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(packed.gradient_norms, padded.gradient_norms, rtol=2e-3)


def test_packed_sequences_are_refused_for_per_position_models():
    model = compiled(BertTokenClassifier(random_encoder(), num_classes=2), SCCE)
    with pytest.raises(TypeError, match="train it with padded batches"):
        model_loss_fn(model, packed=True)
