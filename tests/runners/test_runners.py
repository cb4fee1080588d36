"""The run skeleton (`runners/runner.py`) and the weight-source resolver
(`runners/sources.py`), on tiny models.

Both jobs go through the same parts of one `Runner`, in the same order; every kind of
`--init_checkpoint` resolves the same way for both jobs, including the `--output_dir`
of a fine-tuning run (which `--mode=predict` refused before the two jobs shared the
resolver) and of a pretraining run. References: the weights of the models written to
disk, compared array by array.
"""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

from keras_bert_zoo.checkpoints import CheckpointError
from keras_bert_zoo.pretraining import CreationConfig, create_pretraining_data
from keras_bert_zoo.runners import finetuning, pretraining, sources
from keras_bert_zoo.runners import runner as runner_module
from keras_bert_zoo.runners.runner import Runner

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402

GOOD = ["good", "great", "fun", "moving", "clever"]
BAD = ["bad", "awful", "boring", "dull", "clumsy"]
NEUTRAL = ["the", "film", "plot", "actor", "story", "was", "and", "a", "very", "."]
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(GOOD + BAD + NEUTRAL)

# The parts of the skeleton, in the order a run with periodic evaluation calls them.
PARTS = (
    "setup_strategy",
    "build_model",
    "compile",
    "build_trainer",
    "train",
    "evaluate_during_training",
    "write_eval_results",
    "final_evaluation",
    "write_eval_results",
)


class RecordingRunner(Runner):
    """A `Runner` that records which of its parts ran."""

    def __init__(self, job):
        super().__init__(job)
        self.calls = []

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if name in PARTS and callable(value):
            calls = super().__getattribute__("calls")

            def recorded(*args, **kwargs):
                calls.append(name)
                return value(*args, **kwargs)

            return recorded
        return value


def _sentence(rng, words):
    return " ".join(rng.choice(NEUTRAL, 3).tolist() + rng.choice(words, 2).tolist())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("runners")
    rng = np.random.default_rng(0)
    data_dir = root / "reviews"
    data_dir.mkdir()
    for name, count in (("train.tsv", 32), ("dev.tsv", 12)):
        rows = ["text\tlabel"]
        for i in range(count):
            positive = i % 2 == 0
            rows.append(
                f"{_sentence(rng, GOOD if positive else BAD)}\t{'pos' if positive else 'neg'}"
            )
        (data_dir / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    corpus = root / "corpus.txt"
    documents = ["\n".join(_sentence(rng, GOOD + BAD) for _ in range(4)) for _ in range(12)]
    corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", VOCABULARY)
    records = str(root / "heldout.tfrecord")
    create_pretraining_data(
        str(corpus),
        records,
        CreationConfig(
            vocab_file=os.path.join(checkpoint, "vocab.txt"),
            max_seq_length=32,
            max_predictions_per_seq=5,
            dupe_factor=1,
        ),
        num_workers=0,
        progress_interval=1e9,
    )
    return {"root": root, "data_dir": str(data_dir), "corpus": str(corpus),
            "checkpoint": checkpoint, "heldout": records}  # fmt: skip


def _finetuning_config(files, output_dir, **overrides):
    settings = dict(
        task="text_classification",
        data_dir=files["data_dir"],
        init_checkpoint=files["checkpoint"],
        output_dir=str(output_dir),
        max_seq_length=16,
        train_batch_size=8,
        num_train_steps=6,
        eval_every=3,
        task_options={"train_file": "train.tsv", "eval_file": "dev.tsv"},
        checkpoint_layouts=("huggingface",),
    )
    settings.update(overrides)
    return helpers.quick_config(**settings)


def _pretraining_config(files, output_dir, **overrides):
    settings = dict(
        input_mode="dynamic_text",
        input_file=files["corpus"],
        eval_input_file=files["heldout"],
        eval_steps=0,
        init_checkpoint=files["checkpoint"],
        output_dir=str(output_dir),
        max_seq_length=32,
        max_predictions_per_seq=5,
        train_batch_size=8,
        num_train_steps=6,
        eval_every=3,
        steps_per_loop=3,
        shuffle_buffer=16,
        checkpoint_layouts=("google",),
        progress="none",
    )
    settings.update(overrides)
    return pretraining.PretrainingConfig(**settings)


@pytest.fixture(scope="module")
def finetuned_run(files):
    runner = RecordingRunner(
        finetuning.FinetuningJob(_finetuning_config(files, files["root"] / "ft"))
    )
    return runner, runner.run()


@pytest.fixture(scope="module")
def pretrained_run(files):
    runner = RecordingRunner(
        pretraining.PretrainingJob(_pretraining_config(files, files["root"] / "pt"))
    )
    return runner, runner.run()


@pytest.mark.slow
def test_both_jobs_run_through_the_same_parts_of_one_skeleton(finetuned_run, pretrained_run):
    finetuning_calls = finetuned_run[0].calls
    pretraining_calls = pretrained_run[0].calls
    # Evaluations at steps 3 and 6; the final evaluation reuses the one at step 6.
    expected = list(PARTS[:5]) + list(PARTS[5:7]) * 2 + list(PARTS[7:])
    assert finetuning_calls == expected
    assert pretraining_calls == expected
    for _, result in (finetuned_run, pretrained_run):
        assert result.step == 6 and result.num_train_steps == 6
        assert [entry["step"] for entry in result.eval_history] == [3, 6]
        assert result.eval_results == result.eval_history[-1]["results"]
        assert result.exports and all(os.path.isdir(path) for path in result.exports.values())


def _encoder_weights(model):
    return [np.asarray(v.numpy()) for v in model.encoder.weights if "seed" not in v.path]


@pytest.mark.slow
def test_every_kind_of_init_checkpoint_resolves_for_both_jobs(files, finetuned_run, pretrained_run):
    fine_tuning_dir = finetuned_run[0].job.output_dir
    pretraining_dir = pretrained_run[0].job.output_dir
    newest = sorted(os.listdir(os.path.join(pretraining_dir, "checkpoints")))[-1]
    cases = {
        files["checkpoint"]: sources.CHECKPOINT,
        os.path.join(fine_tuning_dir, "finetuned"): sources.FINETUNED,
        fine_tuning_dir: sources.FINETUNED,
        os.path.join(fine_tuning_dir, "export_huggingface"): sources.CHECKPOINT,
        pretraining_dir: sources.PRETRAINING_RUN,
        os.path.join(pretraining_dir, "checkpoints", newest): sources.PRETRAINING_RUN,
        os.path.join(pretraining_dir, "export_google"): sources.CHECKPOINT,
        "bert_tiny_uncased": sources.PRESET,
    }
    for given, kind in cases.items():
        source = sources.resolve_weight_source(given)
        assert source.kind == kind, given
        assert source.bert_config.hidden_size == (128 if kind == sources.PRESET else 32), given
    assert sources.resolve_weight_source(fine_tuning_dir).path == os.path.join(
        fine_tuning_dir, "finetuned"
    )


def test_a_finetuning_run_dir_predicts_and_initializes_pretraining(files, finetuned_run, tmp_path):
    fine_tuning_dir = finetuned_run[0].job.output_dir
    predicted = finetuning.run_finetuning(
        _finetuning_config(
            files,
            tmp_path / "predict",
            mode="predict",
            task=None,
            init_checkpoint=fine_tuning_dir,
            task_options={"predict_file": "dev.tsv"},
        )
    )
    assert predicted.model_source == os.path.join(fine_tuning_dir, "finetuned")
    assert os.path.isfile(tmp_path / "predict" / "predictions" / "predictions_test.jsonl")

    # The same directory initializes pretraining: the fine-tuned encoder, fresh heads.
    trained_encoder = _encoder_weights(finetuned_run[1].model)
    job = pretraining.PretrainingJob(
        _pretraining_config(files, tmp_path / "pt", init_checkpoint=fine_tuning_dir)
    )
    job.check_inputs()
    job.prepare(strategy=None)
    model = job.build_model()
    job.initial_weights()(model)
    for before, after in zip(trained_encoder, _encoder_weights(model), strict=True):
        np.testing.assert_array_equal(before, after)


def test_what_fits_no_kind_is_one_error_listing_what_was_found(files, tmp_path):
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("x", encoding="utf-8")
    message = (
        r"--init_checkpoint=.*junk: none of a google-research/bert or Hugging Face .* "
        r"found \['notes\.txt'\]"
    )
    with pytest.raises(CheckpointError, match=message):
        finetuning.run_finetuning(
            _finetuning_config(files, tmp_path / "a", init_checkpoint=str(junk))
        )
    with pytest.raises(CheckpointError, match=message):
        pretraining.run_pretraining(
            _pretraining_config(files, tmp_path / "b", init_checkpoint=str(junk))
        )
    missing = (
        "no such file or directory, not the name of an installed checkpoint .* and not a preset"
    )
    with pytest.raises(FileNotFoundError, match=missing):
        sources.resolve_weight_source(str(tmp_path / "missing"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# What the job is asked to do in each mode, besides the runner's own parts.
JOB_PARTS = ("prepare", "load_for_inference", "evaluate", "predict", "export")


def _record_job_calls(job, calls):
    for name in JOB_PARTS:
        method = getattr(job, name)

        def recorded(*args, _name=name, _method=method, **kwargs):
            calls.append(f"job.{_name}")
            return _method(*args, **kwargs)

        setattr(job, name, recorded)
    return job


@pytest.mark.parametrize("mode", ["eval", "predict", "export"])
def test_eval_predict_and_export_go_through_the_skeleton(files, finetuned_run, tmp_path, mode):
    trained_runner, trained = finetuned_run
    job = finetuning.FinetuningJob(
        _finetuning_config(
            files,
            tmp_path / mode,
            mode=mode,
            task=None,
            init_checkpoint=trained_runner.job.output_dir,
            task_options={"predict_file": "dev.tsv"},
        )
    )
    runner = RecordingRunner(job)
    _record_job_calls(job, runner.calls)
    result = runner.run()
    expected = {
        "eval": ["job.load_for_inference", "job.evaluate", "write_eval_results"],
        # dev.tsv has labels: predict also scores and writes them (issue 47).
        "predict": ["job.load_for_inference", "job.predict", "write_eval_results"],
        "export": ["job.load_for_inference", "job.export"],
    }[mode]
    assert runner.calls == ["setup_strategy"] + expected
    assert result.mode == mode and result.step == 6
    assert result.model_source == os.path.join(trained_runner.job.output_dir, "finetuned")
    if mode == "eval":
        # The same model on the same split: the training run's final evaluation.
        assert result.eval_results == trained.eval_results
        assert result.eval_history[-1]["model"] == result.model_source
    if mode == "predict":
        lines = (tmp_path / mode / "predictions" / "predictions_test.jsonl").read_text()
        lines = lines.splitlines()
        assert len(lines) == 12
    if mode == "export":
        # Written from the loaded model: the trained weights, array by array.
        exported = sources.resolve_weight_source(result.exports["keras"]).load_finetuned()
        for before, after in zip(
            trained.model.get_weights(), exported.model.get_weights(), strict=True
        ):
            np.testing.assert_array_equal(before, after)
        assert os.path.isfile(os.path.join(result.exports["huggingface"], "config.json"))


@pytest.mark.slow
def test_an_eval_run_names_its_own_models_as_the_run_directory_does(files, finetuned_run, tmp_path):
    """`eval_results.json`'s `model` is `finetuned` or `best` for this run's own model,
    wherever the run lives; only a model from elsewhere is named by its path."""
    import json
    import shutil

    run_dir = tmp_path / "moved_run"
    shutil.copytree(finetuned_run[0].job.output_dir, run_dir)
    for use_best_model, expected in ((False, "finetuned"), (True, "best")):
        for init_checkpoint in (None, str(run_dir)):
            result = finetuning.run_finetuning(
                _finetuning_config(
                    files,
                    run_dir,
                    mode="eval",
                    task=None,
                    init_checkpoint=init_checkpoint,
                    use_best_model=use_best_model,
                )
            )
            written = json.loads((run_dir / "eval_results.json").read_text(encoding="utf-8"))
            assert written["model"] == expected, (use_best_model, init_checkpoint)
            assert written["history"][-1]["model"] == expected
            assert result.model_source == expected


def _tensorboard_scalars(directory):
    """`{tag: [(step, value)]}` as TensorBoard's scalars plugin reads them: the
    `tensorboard` package's own event reader, not ours."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import (
        EventAccumulator,
    )
    from tensorboard.util import tensor_util

    events = EventAccumulator(directory)
    events.Reload()
    # In step order, as TensorBoard draws them: each evaluation writes its own event
    # file, read in file-name order, where "...16277.10.v2" comes before "...16277.9.v2".
    return {
        tag: sorted(
            (e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)
        )
        for tag in events.PluginTagToContent("scalars")
    }


def test_tensorboard_reads_a_point_per_step_and_each_evaluation(finetuned_run):
    runner, result = finetuned_run
    train = _tensorboard_scalars(os.path.join(runner.job.output_dir, "train"))
    for tag, values in (
        ("loss", result.training.losses),
        ("learning_rate", result.training.learning_rates),
    ):
        assert [step for step, _ in train[tag]] == [1, 2, 3, 4, 5, 6], tag
        np.testing.assert_allclose([value for _, value in train[tag]], values, rtol=1e-6)
    evaluations = _tensorboard_scalars(os.path.join(runner.job.output_dir, "eval"))
    # The dev split's run (eval/) has the train run's tags: TensorBoard overlays them.
    assert {"accuracy", "loss"} <= set(train) & set(evaluations), (train, evaluations)
    assert [step for step, _ in evaluations["accuracy"]] == [3, 6]
    # What a training run's last line says (the `test` extra installs tensorboard).
    hint = runner_module.tensorboard_hint(runner.job.output_dir)
    assert hint == f"TensorBoard: tensorboard --logdir {runner.job.output_dir}"


def _tensorboard_texts(directory):
    """`{tag: [(step, markdown)]}` as TensorBoard's text plugin reads them."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import (
        EventAccumulator,
    )
    from tensorboard.util import tensor_util

    events = EventAccumulator(directory)
    events.Reload()
    return {  # in step order (see _tensorboard_scalars)
        tag: sorted(
            (e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode())
            for e in events.Tensors(tag)
        )
        for tag in events.PluginTagToContent("text")
    }


def test_classification_runs_record_their_confusion_matrix(finetuned_run):
    import sklearn.metrics

    runner, result = finetuned_run
    output_dir = pathlib.Path(runner.job.output_dir)
    record = json.loads((output_dir / "eval_results.json").read_text())
    confusion = record["confusion_matrices"]["dev"]
    predictions = [
        json.loads(line)
        for line in (output_dir / "predictions" / "predictions_dev.jsonl").read_text().splitlines()
    ]
    gold = [p["gold_label"] for p in predictions]
    predicted = [p["label"] for p in predictions]
    expected = sklearn.metrics.confusion_matrix(gold, predicted, labels=confusion["labels"])
    assert confusion["matrix"] == expected.tolist() and sum(map(sum, confusion["matrix"])) == 12
    texts = _tensorboard_texts(str(output_dir / "eval"))
    assert [step for step, _ in texts["confusion_matrix"]] == [3, 6]
    last = texts["confusion_matrix"][-1][1]
    for label, row in zip(confusion["labels"], confusion["matrix"], strict=True):
        assert f"| {label} | " + " | ".join(map(str, row)) + " |" in last


def test_dev_loss_per_class_scores_and_pr_curves_for_tensorboard(finetuned_run):
    """Issue 47, point 8: the dev loss, each class's precision, recall and F1, and its
    precision-recall curve, at each evaluation, as TensorBoard's plugins read them."""
    import sklearn.metrics
    from tensorboard.backend.event_processing.plugin_event_accumulator import (
        EventAccumulator,
    )
    from tensorboard.plugins.pr_curve import metadata
    from tensorboard.util import tensor_util

    runner, _ = finetuned_run
    output_dir = pathlib.Path(runner.job.output_dir)
    scalars = _tensorboard_scalars(str(output_dir / "eval"))
    records = [
        json.loads(line)
        for line in (output_dir / "predictions" / "predictions_dev.jsonl").read_text().splitlines()
    ]
    gold = [r["gold_label"] for r in records]
    # The last evaluation's values, against the answers it wrote (step 6).
    loss = -np.mean([np.log(r["probabilities"][r["gold_label"]]) for r in records])
    assert [step for step, _ in scalars["loss"]] == [3, 6]
    assert scalars["loss"][-1][1] == pytest.approx(loss, rel=1e-4)
    labels = ["neg", "pos"]
    precision, recall, f1, _ = sklearn.metrics.precision_recall_fscore_support(
        gold, [r["label"] for r in records], labels=labels, zero_division=0
    )
    for i, label in enumerate(labels):
        for kind, values in (("precision", precision), ("recall", recall), ("f1", f1)):
            assert scalars[f"{kind}/{label}"][-1] == (6, pytest.approx(values[i])), kind
    events = EventAccumulator(str(output_dir / "eval"))
    events.Reload()
    curves = events.PluginTagToContent(metadata.PLUGIN_NAME)
    assert sorted(curves) == ["pr_curve/neg", "pr_curve/pos"]
    last = events.Tensors("pr_curve/pos")[-1]
    data = tensor_util.make_ndarray(last.tensor_proto)
    assert last.step == 6 and data.shape == (
        6,
        metadata.parse_plugin_metadata(curves["pr_curve/pos"]).num_thresholds,
    )
    # At threshold 0 every example is called positive: recall 1, the positives counted.
    assert data[metadata.RECALL_INDEX, 0] == 1.0
    assert data[metadata.TRUE_POSITIVES_INDEX, 0] == gold.count("pos")


@pytest.mark.slow
def test_a_file_to_predict_is_predicted_after_training(files, tmp_path):
    """Issue 47, point 10: `--predict_file` in train_and_eval (it was ignored)."""
    options = {"train_file": "train.tsv", "eval_file": "dev.tsv", "predict_file": "dev.tsv"}
    config = _finetuning_config(
        files, tmp_path / "run", task_options=options, checkpoint_layouts=(), num_train_steps=1
    )
    result = finetuning.run_finetuning(config)
    (path,) = result.prediction_files["test"]
    assert path == str(tmp_path / "run" / "predictions" / "predictions_test.jsonl")
    assert len(pathlib.Path(path).read_text().splitlines()) == 12
