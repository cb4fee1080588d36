"""What an evaluation writes for TensorBoard and prints (issue 47, points 8 and 10): each
split's metrics under the training run's tags in its own run (`eval/`, `eval/test/`),
so the charts overlay train and eval; precision-recall curves in the format of the
tensorboard package's `pr_curve` summary, without that package; one evaluation at the
end, not one a step before it too; counts printed as integers."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training import reporting
from keras_bert_zoo.training.evaluation import Evaluation


def _events(directory):
    """`{tag: [(step, value, plugin name, plugin content)]}` of the event files directly
    in `directory`."""
    found = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data
                found.setdefault(value.tag, []).append(
                    (
                        event.step,
                        tf.make_ndarray(value.tensor),
                        plugin.plugin_name,
                        plugin.content,
                    )
                )
    return found


def test_a_periodic_evaluation_just_before_the_end_is_left_to_the_final_one():
    # Once per epoch at 62.5 steps per epoch, 3 epochs: 187 steps (eval_every 62).
    evaluation = Evaluation("/nonexistent", eval_fn=lambda model: {}, eval_every=62)
    due = [step for step in range(1, 188) if evaluation.due(step, 187)]
    assert due == [62, 124, 187]
    # Half an interval or more before the end: evaluated.
    assert Evaluation("/x", eval_fn=dict, eval_every=100).due(100, 150)
    assert Evaluation("/x", eval_fn=dict, eval_every=2).due(4, 6)


def test_split_metrics_go_to_their_split_s_run_under_the_training_tags(tmp_path):
    def eval_fn(model):
        return {"dev": {"accuracy": 0.75, "loss": 0.5}, "test": {"accuracy": 0.5, "loss": 0.7}}

    evaluation = Evaluation(str(tmp_path), eval_fn=eval_fn, best_metric="dev/accuracy")
    evaluation.export_fn = lambda model, directory: None
    writers = reporting.EvalSummaryWriters(str(tmp_path), active=True)
    evaluation.evaluate(None, 7, writers)
    writers.close()
    # Logged and ranked by "split/metric"; written as "accuracy" in eval/ (dev) and in
    # eval/test/, the tags of the train/ run.
    assert evaluation.history == [
        (7, {"dev/accuracy": 0.75, "dev/loss": 0.5, "test/accuracy": 0.5, "test/loss": 0.7})
    ]
    assert evaluation.best_step == 7 and evaluation.best_value == 0.75
    dev = _events(str(tmp_path / "eval"))
    test = _events(str(tmp_path / "eval" / "test"))
    assert sorted(dev) == sorted(test) == ["accuracy", "loss"]
    assert float(dev["accuracy"][0][1]) == 0.75 and dev["accuracy"][0][0] == 7
    assert float(test["loss"][0][1]) == pytest.approx(0.7)
    assert reporting.eval_summaries_dir("dev") == "eval"
    assert reporting.eval_summaries_dir(None) == "eval"
    assert reporting.eval_summaries_dir("test") == os.path.join("eval", "test")


def test_pr_curves_are_the_tensorboard_package_s_pr_curve_summary(tmp_path):
    from tensorboard.plugins.pr_curve import metadata
    from tensorboard.plugins.pr_curve import summary as pr_curve_summary

    rng = np.random.default_rng(0)
    labels = rng.random(200) < 0.3
    predictions = np.clip(labels * 0.4 + rng.random(200) * 0.6, 0, 1).astype(np.float32)
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        reporting.write_pr_curve("pr_curve/pos", labels, predictions, step=3)
    writer.close()
    ((step, tensor, plugin, content),) = _events(str(tmp_path))["pr_curve/pos"]
    theirs = pr_curve_summary.pb("pos", labels, predictions).value[0]
    assert step == 3 and plugin == metadata.PLUGIN_NAME == theirs.metadata.plugin_data.plugin_name
    np.testing.assert_allclose(tensor, tf.make_ndarray(theirs.tensor), rtol=1e-6)
    ours = metadata.parse_plugin_metadata(content)
    assert ours == metadata.parse_plugin_metadata(theirs.metadata.plugin_data.content)
    assert ours.num_thresholds == reporting.PR_CURVE_THRESHOLDS


def test_counts_print_as_integers():
    assert reporting.format_metric(111) == "111"
    assert reporting.format_metric(np.int64(760)) == "760"
    assert reporting.format_metric(0.86) == "0.8600"
    assert reporting.format_metric(1.0) == "1.0000"
    assert reporting.metric_value(np.float32(0.5)) == 0.5
    assert isinstance(reporting.metric_value(np.int32(3)), int)
