"""Trainer in one process: accumulation, NaN stop, corrupt checkpoints, mixed
precision, evaluation and best export, summaries, initial weights, input_state='skip'."""

import glob
import json
import logging
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.checkpoints import load_weights, save_pretrained
from keras_bert_zoo.models import BertClassifier, BertEncoder
from keras_bert_zoo.training import (
    CheckpointMismatchError,
    NonFiniteLossError,
    OptimizerConfig,
    Trainer,
    create_optimizer,
    load_checkpoint_weights,
)

TINY = {
    "vocab_size": 61,
    "hidden_size": 16,
    "num_layers": 1,
    "num_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 32,
}
SEQ_LEN = 12
SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def token5_data(n=64, seed=0):
    """Label 1 iff token 5 occurs: learnable from the tokens alone."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, SEQ_LEN + 1, n)
    mask = (np.arange(SEQ_LEN)[None, :] < lengths[:, None]).astype("int32")
    ids = rng.integers(6, TINY["vocab_size"], (n, SEQ_LEN)).astype("int32")
    labels = (np.arange(n) % 2).astype("int32")
    for row in np.flatnonzero(labels):
        ids[row, rng.integers(1, lengths[row])] = 5
    ids[:, 0] = 2
    x = {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": 0 * mask}
    return x, labels


def dataset_fn_of(x, y, batch, shuffle=True, seed=3):
    def dataset_fn(context):
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).cache()
        if shuffle:
            dataset = dataset.shuffle(len(y), seed=seed)
        return dataset.repeat().batch(
            context.get_per_replica_batch_size(batch), drop_remainder=True
        )

    return dataset_fn


def build(
    num_classes=2,
    dropout=0.0,
    dtype=None,
    loss=SCCE,
    config=None,
    steps=10,
    seed=0,
    encoder_kw=None,
    **model_kw,
):
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(
        **{**TINY, **(encoder_kw or {})},
        hidden_dropout=dropout,
        attention_dropout=dropout,
        dtype=dtype,
    )
    model = BertClassifier(encoder, num_classes=num_classes, dropout=dropout, **model_kw)
    config = config or OptimizerConfig(learning_rate=3e-3, warmup_steps=1)
    model.compile(optimizer=create_optimizer(config, steps), loss=loss, metrics=["accuracy"])
    return model


def trainer(model, model_dir, **kwargs):
    kwargs.setdefault("progress", "log")
    kwargs.setdefault("steps_per_loop", 2)
    kwargs.setdefault("checkpoint_every", 2)
    return Trainer(model, model_dir=str(model_dir), **kwargs)


def weights_of(model):
    return [keras.ops.convert_to_numpy(v) for v in model.variables]


@pytest.mark.slow
def test_accumulation_over_four_micro_batches_equals_one_batch_of_four_times(tmp_path):
    x, y = token5_data()
    results = {}
    for accumulation in (1, 4):
        model = build(steps=3)
        run = trainer(model, tmp_path / str(accumulation), gradient_accumulation_steps=accumulation)
        result = run.train(dataset_fn_of(x, y, batch=16), 3)
        results[accumulation] = (result, weights_of(model), model.optimizer.iterations.numpy())
    (one, one_weights, one_iterations), (four, four_weights, four_iterations) = (
        results[1],
        results[4],
    )
    # One optimizer step (and schedule step) per global batch of 16, not per micro-batch.
    assert one_iterations == four_iterations == 3
    np.testing.assert_allclose(four.learning_rates, one.learning_rates)
    np.testing.assert_allclose(four.losses, one.losses, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(four.gradient_norms, one.gradient_norms, rtol=1e-5)
    for got, want in zip(four_weights, one_weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"per-replica batch \(16\) is not divisible"):
        trainer(build(), tmp_path / "bad", gradient_accumulation_steps=3).train(
            dataset_fn_of(x, y, batch=16), 1
        )


@pytest.mark.slow
def test_nan_loss_stops_at_its_step_and_keeps_the_last_checkpoint(tmp_path):
    x, _ = token5_data(n=20)
    y = np.linspace(0.0, 1.0, 20).astype("float32")[:, None]
    y[9] = np.nan  # in the third batch of 4: step 3
    model = build(num_classes=1, loss="mse")
    run = trainer(model, tmp_path, steps_per_loop=2, checkpoint_every=2)
    checkpoints = tmp_path / "checkpoints"
    with pytest.raises(NonFiniteLossError) as error:
        run.train(dataset_fn_of(x, y, batch=4, shuffle=False), 6)
    message = str(error.value)
    assert "The loss is nan at step 3" in message, message
    assert str(checkpoints / "ckpt-00000002") in message
    assert sorted(os.listdir(checkpoints)) == ["ckpt-00000002"]
    metadata = json.loads((checkpoints / "ckpt-00000002" / "checkpoint.json").read_text())
    assert metadata["step"] == 2
    # What is on disk is the good state: a fresh model restores it and its weights are finite.
    restored = build(num_classes=1, loss="mse")
    assert load_checkpoint_weights(restored, tmp_path) == 2
    assert all(np.all(np.isfinite(w)) for w in weights_of(restored))


@pytest.mark.slow
def test_truncated_newest_checkpoint_falls_back_to_the_previous(tmp_path, caplog):
    x, y = token5_data()
    model = build(dropout=0.1)
    first = trainer(model, tmp_path).train(dataset_fn_of(x, y, batch=8), 4)
    checkpoints = tmp_path / "checkpoints"
    assert sorted(os.listdir(checkpoints)) == ["ckpt-00000002", "ckpt-00000004"]
    (data_file,) = glob.glob(str(checkpoints / "ckpt-00000004" / "state.data-*"))
    with open(data_file, "r+b") as f:
        f.truncate(os.path.getsize(data_file) // 2)
    stale = checkpoints / ".ckpt-00000006.tmp-killed"  # what a kill during a write leaves
    stale.mkdir()

    caplog.set_level(logging.INFO, logger="keras_bert_zoo.training")
    resumed_model = build(dropout=0.1, seed=1)  # other initial weights: all must be restored
    second = trainer(resumed_model, tmp_path).train(dataset_fn_of(x, y, batch=8), 4)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        str(checkpoints / "ckpt-00000004") in w and "bytes" in w and "previous checkpoint" in w
        for w in warnings
    ), warnings
    assert second.restored_step == 2
    # Steps 3-4 again, from step 2's weights, dropout RNG and input position: identical.
    np.testing.assert_array_equal(second.losses, first.losses[2:])
    for got, want in zip(weights_of(resumed_model), weights_of(model), strict=True):
        np.testing.assert_array_equal(got, want)
    assert not stale.exists()
    assert sorted(os.listdir(checkpoints)) == ["ckpt-00000002", "ckpt-00000004"]

    with pytest.raises(CheckpointMismatchError, match="model variable .* classification_head"):
        trainer(build(num_classes=3, dropout=0.1), tmp_path).train(dataset_fn_of(x, y, batch=8), 6)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_and_reloads_in_float32(tmp_path, policy):
    x, y = token5_data(n=16)  # one batch, fitted: the loss falls within a dozen steps
    config = OptimizerConfig(
        learning_rate=3e-3,
        warmup_steps=1,
        schedule="constant",
        loss_scale=(policy == "mixed_float16"),
    )
    wide_init = {"initializer_range": 0.2}  # BERT's 0.02 starts too flat for 12 steps
    model = build(dtype=policy, config=config, steps=12, encoder_kw=wide_init)
    result = trainer(model, tmp_path, steps_per_loop=4, checkpoint_every=12).train(
        dataset_fn_of(x, y, batch=16), 12
    )
    assert np.all(np.isfinite(result.losses))
    assert result.losses[-3:].mean() < result.losses[:3].mean() - 0.05, result.losses
    if policy == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert result.history[-1]["loss_scale"] > 1.0

    float32_model = build(seed=5, encoder_kw=wide_init)
    assert float32_model.dtype_policy.name == "float32"
    assert load_checkpoint_weights(float32_model, tmp_path) == 12
    for got, want in zip(weights_of(float32_model), weights_of(model), strict=True):
        np.testing.assert_array_equal(got, want)
    logits_mixed = keras.ops.convert_to_numpy(model(x, training=False)).astype(np.float32)
    logits_float32 = keras.ops.convert_to_numpy(float32_model(x, training=False))
    assert logits_float32.dtype == np.float32
    np.testing.assert_allclose(logits_float32, logits_mixed, atol=0.1)


def _scalars(directory):
    values = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = tf.make_ndarray(value.tensor)
                values.setdefault(value.tag, []).append((event.step, float(number)))
    return values


class _RecordStart(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.embeddings = keras.ops.convert_to_numpy(self.model.encoder.embedding_table)
        self.batch_logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.batch_logs.append((batch, dict(logs)))


@pytest.mark.slow
def test_evaluation_best_export_summaries_and_initial_weights(tmp_path):
    x, y = token5_data()
    pretrained = BertEncoder(**TINY)
    save_pretrained(pretrained, str(tmp_path / "pretrained"), format="huggingface")
    scores = iter([0.5, 0.8, 0.7, 0.75])
    evaluations = []

    def eval_fn(model):
        evaluations.append(int(model.optimizer.iterations.numpy()))
        return {"accuracy": next(scores), "loss": 1.0}

    record = _RecordStart()
    model = build(steps=8)
    result = trainer(model, tmp_path / "run", checkpoint_every=2).train(
        dataset_fn_of(x, y, batch=8),
        6,
        eval_fn=eval_fn,
        eval_every=2,
        best_metric="accuracy",
        initial_weights=lambda model: load_weights(model, str(tmp_path / "pretrained")),
        callbacks=[record],
    )
    # The initial weights (the job's function) loaded the encoder before the first step.
    np.testing.assert_array_equal(
        record.embeddings, keras.ops.convert_to_numpy(pretrained.embedding_table)
    )
    assert [step for step, _ in record.batch_logs] == [2, 4, 6]
    assert evaluations == [2, 4, 6]
    assert [step for step, _ in result.eval_history] == [2, 4, 6]
    assert (result.best_step, result.best_value) == (4, 0.8)
    best = json.loads((tmp_path / "run" / "best" / "metrics.json").read_text())
    assert best["step"] == 4 and best["metric"] == "accuracy" and best["value"] == 0.8
    exported = keras.models.load_model(tmp_path / "run" / "best" / "model.keras")
    assert isinstance(exported, BertClassifier)

    train_scalars = _scalars(str(tmp_path / "run" / "train"))
    for tag in ("sequences_per_second", "accuracy"):
        assert [step for step, _ in train_scalars[tag]] == [2, 4, 6], tag
    # The loss, learning rate and gradient norm of every step, at its step.
    for tag, values in (
        ("loss", result.losses),
        ("learning_rate", result.learning_rates),
        ("gradient_norm", result.gradient_norms),
    ):
        assert [step for step, _ in train_scalars[tag]] == [1, 2, 3, 4, 5, 6], tag
        np.testing.assert_allclose([v for _, v in train_scalars[tag]], values, rtol=1e-6)
    eval_scalars = _scalars(str(tmp_path / "run" / "eval"))["accuracy"]
    assert [step for step, _ in eval_scalars] == [2, 4, 6]
    np.testing.assert_allclose([value for _, value in eval_scalars], [0.5, 0.8, 0.7], rtol=1e-6)

    # Rerun to 8: resumes (no initial weights), keeps the best unless beaten.
    calls = []
    resumed = trainer(build(steps=8), tmp_path / "run").train(
        dataset_fn_of(x, y, batch=8),
        8,
        eval_fn=eval_fn,
        eval_every=2,
        best_metric="accuracy",
        initial_weights=calls.append,
    )
    assert resumed.restored_step == 6 and calls == []
    assert (resumed.best_step, resumed.best_value) == (4, 0.8)
    assert json.loads((tmp_path / "run" / "best" / "metrics.json").read_text())["step"] == 4


@pytest.mark.slow
def test_skip_input_state_with_xla_resumes_bitwise(tmp_path):
    """input_state='skip' (a cache()d fine-tuning set) with XLA and accumulation."""
    x, y = token5_data()
    options = dict(jit_compile=True, gradient_accumulation_steps=2, checkpoint_every=3)

    def run(model_dir, scramble=False):
        # The same command each time: the same seed (it also seeds the shuffle).
        model = build(dropout=0.1, steps=5)
        if scramble:  # other weights, so that the resume has to restore every one
            rng = np.random.default_rng(9)
            for variable in model.trainable_variables:
                variable.assign(rng.normal(size=variable.shape).astype("float32"))
        result = trainer(model, model_dir, **options).train(
            dataset_fn_of(x, y, batch=8), 5, input_state="skip"
        )
        return result, weights_of(model)

    reference, reference_weights = run(tmp_path / "reference")
    # A run killed between steps 3 and 5 has what the reference had at step 3.
    shutil.copytree(tmp_path / "reference", tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "checkpoints" / "ckpt-00000005")
    resumed, resumed_weights = run(tmp_path / "resumed", scramble=True)
    assert resumed.restored_step == 3
    np.testing.assert_array_equal(resumed.losses, reference.losses[3:])
    for got, want in zip(resumed_weights, reference_weights, strict=True):
        np.testing.assert_array_equal(got, want)


def test_configuration_errors_are_clear(tmp_path):
    x, y = token5_data()
    uncompiled = BertClassifier(BertEncoder(**TINY), num_classes=2)
    with pytest.raises(ValueError, match="Compile .* with an optimizer"):
        Trainer(uncompiled, model_dir=str(tmp_path))
    model = BertClassifier(BertEncoder(**TINY), num_classes=2)
    model.compile(optimizer=keras.optimizers.Adam(gradient_accumulation_steps=2), loss=SCCE)
    with pytest.raises(ValueError, match="pass it to the Trainer instead"):
        Trainer(model, model_dir=str(tmp_path))
    half = BertClassifier(BertEncoder(**TINY, dtype="mixed_float16"), num_classes=2)
    half.compile(optimizer=keras.optimizers.Adam(), loss=SCCE)
    with pytest.raises(ValueError, match="float16 but its optimizer is not a"):
        Trainer(half, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="input_state must be one of"):
        trainer(build(), tmp_path).train(dataset_fn_of(x, y, batch=8), 2, input_state="seek")
    with pytest.raises(ValueError, match="best_metric needs an eval_fn"):
        trainer(build(), tmp_path).train(dataset_fn_of(x, y, batch=8), 2, best_metric="f1")


@pytest.mark.slow
def test_initial_weights_from_a_loaded_model_and_the_deprecated_keyword(tmp_path):
    x, y = token5_data()
    source = build(seed=7)
    record = _RecordStart()
    trainer(build(), tmp_path / "model").train(
        dataset_fn_of(x, y, batch=8), 2, initial_weights=source, callbacks=[record]
    )
    # A loaded model's weights were copied before the first step.
    np.testing.assert_array_equal(
        record.embeddings, keras.ops.convert_to_numpy(source.encoder.embedding_table)
    )
    calls = []
    with pytest.warns(DeprecationWarning, match=r"train\(initial_weights=\)"):
        trainer(build(), tmp_path / "old").train(
            dataset_fn_of(x, y, batch=8), 2, init_checkpoint=calls.append
        )
    assert len(calls) == 1
    # A directory is the job's to read: the message says how.
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="load_weights"):
        trainer(build(), tmp_path / "path").train(
            dataset_fn_of(x, y, batch=8), 2, init_checkpoint=str(tmp_path / "pretrained")
        )


class _TokenTask:
    """A minimal task on the contract of keras_bert_zoo.tasks.task (already tokenized
    rows, per-example weights), to run `tasks.training_dataset_fn` through the Trainer."""

    @staticmethod
    def create():
        from keras_bert_zoo.tasks import task

        class TokenTask(task.Task):
            def read(self, split):
                return []

            def make_preprocessor(self, tokenizer):
                return None

            def features(self, examples, preprocessor, *, training):
                x, y = examples
                weights = np.where(y == 1, 2.0, 1.0).astype("float32")
                return tf.data.Dataset.from_tensor_slices(
                    {**x, "label": y, "sample_weight": weights, "example_index": np.arange(len(y))}
                )

            def build_model(self, encoder):
                return BertClassifier(encoder, num_classes=2, dropout=0.0)

            def loss(self):
                return SCCE

            def metrics(self):
                return ["accuracy"]

            def postprocess(self, outputs, meta, examples):
                return list(np.argmax(outputs, -1))

            def evaluate(self, answers, examples):
                return {"accuracy": float(np.mean(np.asarray(answers) == examples[1]))}

            def write_predictions(self, answers, examples, output_dir, split):
                return []

        return TokenTask("token_task")


@pytest.mark.slow
def test_task_contract_datasets_train_with_sample_weights(tmp_path):
    from keras_bert_zoo import tasks

    task = _TokenTask.create()
    examples = token5_data()
    keras.utils.set_random_seed(0)
    model = task.build_model(BertEncoder(**TINY))
    model.compile(
        optimizer=create_optimizer(OptimizerConfig(learning_rate=1e-3), 4),
        loss=task.loss(),
        metrics=task.metrics(),
    )
    dataset_fn = tasks.training_dataset_fn(task, examples, None, 8, seed=1)
    result = trainer(model, tmp_path).train(
        dataset_fn,
        4,
        input_state="skip",
        eval_fn=lambda m: task.evaluate(tasks.predict(task, m, examples, None), examples),
        best_metric=task.primary_metric,
    )
    assert len(result.losses) == 4 and np.all(np.isfinite(result.losses))
    assert result.history[-1]["sequences_per_second"] > 0
    assert 0.0 <= result.eval_history[-1][1]["accuracy"] <= 1.0
    assert os.path.exists(tmp_path / "best" / "model.keras")
