"""The head-positions training path (`models/head_positions.py`, `call_at`,
`run_layers(output_positions=...)`, the loss function a job passes the `Trainer` by default).

Reference: the padded full model `model(x)` on the same batch (itself tested against the
numpy restatement of BERT in tests/layers), and `TransformerEncoderBlock.call` read at
the same positions.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.layers import TransformerEncoderBlock
from keras_bert_zoo.layers.token_layout import TokenLayout
from keras_bert_zoo.models import (
    BertClassifier,
    BertEncoder,
    BertPretrainer,
    BertTokenClassifier,
)
from keras_bert_zoo.models.head_positions import (
    head_position_outputs,
    head_positions_loss_fn,
    supports,
)
from keras_bert_zoo.models.sequence_packing import forward
from keras_bert_zoo.runners.loss_and_weights import model_loss_fn
from keras_bert_zoo.training import OptimizerConfig, Trainer, create_optimizer, default_loss_fn
from tests.models.conftest import SMALL, make_inputs, random_encoder, randomize_weights

SEQ_LEN = 12
# Varied real lengths: a full row, padding in the others, a row of [CLS] [SEP] only.
LENGTHS = [12, 9, 5, 2]
SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def head_batch(seed=0, predictions=5):
    """Padded inputs of `LENGTHS` real tokens and pretraining labels. The masked LM
    positions lie among each row's real tokens, repeat one position (column 1 = column
    0), and end with a padding prediction at position 0 of weight 0, as real data has."""
    rng = np.random.default_rng(seed)
    x = make_inputs(
        batch=len(LENGTHS),
        seq_len=SEQ_LEN,
        vocab_size=SMALL["vocab_size"],
        seed=seed,
        lengths=LENGTHS,
    )
    lengths = np.array(LENGTHS)
    positions = np.stack([np.sort(rng.integers(1, n, predictions)) for n in lengths])
    positions[:, 1] = positions[:, 0]
    positions[:, -1] = 0
    weights = np.ones((len(lengths), predictions), "float32")
    weights[:, -1] = 0.0
    x["masked_lm_positions"] = positions.astype("int32")
    y = {
        "masked_lm_ids": rng.integers(1, SMALL["vocab_size"], (len(lengths), predictions)),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.integers(0, 2, len(lengths)),
    }
    return x, y


def encoder_inputs_of(x):
    return {k: x[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}


def encoder(seed=0, dropout=0.1, **kwargs):
    """Small random encoder; heads built on it take its initializer_range (0.2, so a
    wrong mask or position moves the logits clearly, see tests/models/test_packed.py)."""
    return random_encoder(
        seed=seed,
        hidden_dropout=dropout,
        attention_dropout=dropout,
        initializer_range=0.2,
        **kwargs,
    )


def assert_outputs_close(got, want, atol=1e-5, rtol=1e-5):
    got, want = keras.tree.flatten(got), keras.tree.flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=atol, rtol=rtol)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_classifier_head_path_equals_full_model(num_layers):
    x = encoder_inputs_of(head_batch()[0])
    model = BertClassifier(encoder(seed=1, num_layers=num_layers), num_classes=3)
    randomize_weights(model.classification_head, seed=5)
    want = model(x, training=False)
    got = head_position_outputs(model, x, training=False)
    assert_outputs_close(got, want)
    # The check discriminates: the logits differ clearly between the rows.
    assert np.ptp(np.asarray(want), axis=0).max() > 0.1


@pytest.mark.parametrize("num_layers", [1, 2])
def test_pretrainer_head_path_equals_full_model(num_layers):
    x, _ = head_batch(seed=1)
    model = BertPretrainer(encoder(seed=2, num_layers=num_layers))
    want = model(x, training=False)
    got = head_position_outputs(model, x, training=False)
    assert set(got) == {"masked_lm_logits", "next_sentence_logits"}
    assert_outputs_close(got["masked_lm_logits"], want["masked_lm_logits"])
    assert_outputs_close(got["next_sentence_logits"], want["next_sentence_logits"])
    # The repeated positions give equal logits, and distinct positions do not.
    logits = np.asarray(got["masked_lm_logits"])
    np.testing.assert_allclose(logits[:, 0], logits[:, 1], atol=1e-5, rtol=1e-5)
    assert np.abs(logits[0, 0] - logits[0, -1]).max() > 0.1


def block_and_inputs(seed=0):
    rng = np.random.default_rng(seed)
    block = TransformerEncoderBlock(
        num_heads=4,
        intermediate_size=32,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        initializer_range=0.2,
    )
    hidden = rng.standard_normal((len(LENGTHS), SEQ_LEN, 16)).astype("float32")
    block.build(hidden.shape)
    randomize_weights(block, seed=seed)
    # Any position of each row, padding included, repeats and position 0.
    positions = rng.integers(0, SEQ_LEN, (len(LENGTHS), 6)).astype("int32")
    positions[:, 0] = 0
    positions[:, 2] = positions[:, 1]
    return block, hidden, positions


def gathered(values, positions):
    return np.take_along_axis(np.asarray(values), positions[:, :, None], axis=1)


def block_diagonal_mask():
    """`[batch, seq, seq]`: each row holds two segments that attend within themselves
    (as packed rows do), then padding that attends to nothing real."""
    mask = np.zeros((len(LENGTHS), SEQ_LEN, SEQ_LEN), "int32")
    for row, length in enumerate(LENGTHS):
        split = max(1, length // 2)
        mask[row, :split, :split] = 1
        mask[row, split:length, split:length] = 1
    return mask


@pytest.mark.parametrize("mask_rank", [2, 3])
def test_block_call_at_equals_call_gathered(mask_rank):
    block, hidden, positions = block_and_inputs(seed=mask_rank)
    if mask_rank == 2:
        mask = make_inputs(batch=len(LENGTHS), seq_len=SEQ_LEN, lengths=LENGTHS)["input_mask"]
    else:
        mask = block_diagonal_mask()
    want = gathered(block(hidden, mask, training=False), positions)
    got = block.call_at(hidden, positions, mask, training=False)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=1e-5)
    # The mask matters at these positions: without it the outputs move clearly.
    unmasked = gathered(block(hidden, None, training=False), positions)
    assert np.abs(unmasked - want).max() > 0.1
    # No mask at all is also supported.
    np.testing.assert_allclose(
        np.asarray(block.call_at(hidden, positions, None, training=False)),
        unmasked,
        atol=1e-5,
        rtol=1e-5,
    )


def compiled(model, loss=None, steps=4):
    config = OptimizerConfig(learning_rate=1e-3, warmup_steps=1)
    model.compile(optimizer=create_optimizer(config, steps), loss=loss)
    return model


def classifier_case(dropout=0.0, dtype=None, num_layers=2):
    x, _ = head_batch(seed=2)
    x = encoder_inputs_of(x)
    y = np.array([0, 2, 1, 2], "int32")
    model = BertClassifier(
        encoder(seed=3, dropout=dropout, dtype=dtype, num_layers=num_layers),
        num_classes=3,
        dropout=dropout,
    )
    return compiled(model, SCCE), x, y


def pretrainer_case(dropout=0.0, dtype=None, num_layers=2):
    x, y = head_batch(seed=3)
    model = BertPretrainer(encoder(seed=4, dropout=dropout, dtype=dtype, num_layers=num_layers))
    return compiled(model), x, y


CASES = {"classifier": classifier_case, "pretrainer": pretrainer_case}


def loss_and_gradients(model, loss_fn, x, y):
    with tf.GradientTape() as tape:
        loss, _ = loss_fn(model, x, y, None)
    gradients = tape.gradient(loss, model.trainable_variables)
    return loss, gradients


@pytest.mark.parametrize("task", sorted(CASES))
def test_head_positions_loss_fn_gradients_equal_default(task):
    model, x, y = CASES[task]()
    want_loss, want = loss_and_gradients(model, default_loss_fn, x, y)
    got_loss, got = loss_and_gradients(model, head_positions_loss_fn, x, y)
    np.testing.assert_allclose(float(got_loss), float(want_loss), rtol=1e-5)
    assert len(got) == len(want) == len(model.trainable_variables)
    for variable, g, w in zip(model.trainable_variables, got, want, strict=True):
        assert g is not None and w is not None, variable.path
        np.testing.assert_allclose(
            tf.convert_to_tensor(g).numpy(),
            tf.convert_to_tensor(w).numpy(),
            atol=1e-5,
            rtol=1e-5,
            err_msg=variable.path,
        )
    # The last block's variables get gradients that count, so a wrong position or mask
    # there shows; the key bias is the exception (softmax ignores a shift of all scores).
    last_block = model.encoder.transformer_layers[-1]
    for variable in last_block.trainable_variables:
        if variable is last_block.attention.key.bias:
            continue
        index = next(i for i, v in enumerate(model.trainable_variables) if v is variable)
        assert np.abs(tf.convert_to_tensor(want[index]).numpy()).max() > 1e-4, variable.path


def test_the_job_picks_head_positions_loss_fn_by_default(tmp_path):
    classifier = classifier_case(num_layers=1)[0]
    pretrainer = pretrainer_case(num_layers=1)[0]
    token_classifier = compiled(
        BertTokenClassifier(random_encoder(num_layers=1), num_classes=2), SCCE
    )

    def trainer(model, name, packed_sequences=False, **kwargs):
        # What a job passes the Trainer (`runners.runner.Job.loss_fn`) unless told another.
        kwargs.setdefault("loss_fn", model_loss_fn(model, packed=packed_sequences))
        return Trainer(model, model_dir=str(tmp_path / name), progress="none", **kwargs)

    assert supports(classifier) and supports(pretrainer) and not supports(token_classifier)
    assert trainer(classifier, "c").loss_fn is head_positions_loss_fn
    assert trainer(pretrainer, "p").loss_fn is head_positions_loss_fn
    assert trainer(token_classifier, "t").loss_fn is default_loss_fn

    def own_loss_fn(model, x, y, sample_weight):
        raise AssertionError("not called")

    assert trainer(classifier, "c2", loss_fn=own_loss_fn).loss_fn is own_loss_fn
    assert trainer(pretrainer, "p2", loss_fn=default_loss_fn).loss_fn is default_loss_fn
    assert trainer(token_classifier, "t2", loss_fn=own_loss_fn).loss_fn is own_loss_fn
    for model in (classifier, pretrainer):
        packed_trainer = trainer(model, f"packed_{model.name}", packed_sequences=True)
        assert packed_trainer.loss_fn is forward.packed_loss_fn
        with_own = trainer(model, f"own_{model.name}", packed_sequences=True, loss_fn=own_loss_fn)
        assert with_own.loss_fn is own_loss_fn


@pytest.mark.parametrize("task", sorted(CASES))
def test_head_path_under_mixed_bfloat16(task):
    """Both bfloat16 paths round differently, so neither is the other's reference: each
    is held to the float32 model with the same weights, and the head path may not stray
    further from it than bfloat16 rounding lets the full model stray."""
    keras.utils.set_random_seed(5)
    model, x, _ = CASES[task](dtype="mixed_bfloat16")
    reference, _, _ = CASES[task]()
    reference.set_weights(model.get_weights())
    assert model.encoder.transformer_layers[-1].compute_dtype == "bfloat16"
    exact = keras.tree.flatten(reference(x, training=False))
    want = keras.tree.flatten(model(x, training=False))
    got = keras.tree.flatten(head_position_outputs(model, x, training=False))
    assert len(got) == len(want) == len(exact)
    for g, w, e in zip(got, want, exact, strict=True):
        assert keras.backend.standardize_dtype(w.dtype) == "float32"
        assert keras.backend.standardize_dtype(g.dtype) == "float32"
        assert tuple(g.shape) == tuple(w.shape)
        g, w, e = np.asarray(g), np.asarray(w), np.asarray(e)
        assert np.all(np.isfinite(g))
        scale = np.abs(e).max()
        assert scale > 0.1
        full_model_error = np.abs(w - e).max()
        # bfloat16 keeps 8 significant bits; two random blocks and a head stray by up
        # to a few 2**-8 of the scale (measured: 0.5% to 2.6% over unseeded heads).
        assert full_model_error <= 0.05 * scale
        assert np.abs(g - e).max() <= 2 * full_model_error + 2.0**-8 * scale


def test_unsupported_model_and_conflicting_run_layers_arguments():
    x = encoder_inputs_of(head_batch()[0])
    token_classifier = BertTokenClassifier(random_encoder(num_layers=1), num_classes=2)
    with pytest.raises(TypeError, match="BertTokenClassifier"):
        head_position_outputs(token_classifier, x)
    with pytest.raises(TypeError, match="BertEncoder"):
        head_position_outputs(token_classifier.encoder, x)

    two_layers = BertEncoder(**SMALL)
    mask = x["input_mask"]
    flat = np.flatnonzero(mask.reshape(-1)).astype("int32")
    layout = TokenLayout(mask, flat)
    tokens = {k: v.reshape(-1)[flat][None] for k, v in x.items()}
    position_ids = np.nonzero(mask)[1].astype("int32")[None]
    with pytest.raises(ValueError, match="`layout` .*or `output_positions`, not both"):
        two_layers.run_layers(
            tokens["input_word_ids"],
            tokens["input_type_ids"],
            mask,
            layout=layout,
            position_ids=position_ids,
            output_positions=np.zeros((len(LENGTHS), 1), "int32"),
        )
