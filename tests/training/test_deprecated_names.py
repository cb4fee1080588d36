"""The training names that moved keep working for one release, with a `DeprecationWarning`
naming the new home (the README's API-changes table)."""

import importlib

import pytest
import tensorflow as tf
from absl import flags

from keras_bert_zoo.runners import runner
from keras_bert_zoo.training import optimization, options, reporting, schedules

MOVED = [
    ("keras_bert_zoo.training.flags", "TrainingOptions", options, "TrainingOptions"),
    ("keras_bert_zoo.training.flags", "DTYPE_POLICIES", options, "DTYPE_POLICIES"),
    ("keras_bert_zoo.training.flags", "TrainingFlags", options, "TrainingOptions"),
    ("keras_bert_zoo.training.trainer", "write_scalar", reporting, "write_scalar"),
    ("keras_bert_zoo.training.trainer", "write_text", reporting, "write_text"),
    ("keras_bert_zoo.training.trainer", "BAR_WIDTH", reporting, "BAR_WIDTH"),
    (
        "keras_bert_zoo.training.optimization",
        "WarmupPolynomialDecay",
        schedules,
        "WarmupPolynomialDecay",
    ),
]


@pytest.mark.parametrize(("old_module", "name", "new_module", "new_name"), MOVED)
def test_old_names_warn_and_are_the_new_objects(old_module, name, new_module, new_name):
    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning, match=f"{name} moved to {new_module.__name__}"):
        value = getattr(old, name)
    assert value is getattr(new_module, new_name)


def test_the_old_flag_functions_read_flags_as_before():
    from keras_bert_zoo.training import flags as training_flags

    values = flags.FlagValues()
    with pytest.warns(DeprecationWarning, match="utils.settings.define_flags"):
        define_flags = training_flags.define_flags
    define_flags(values, learning_rate=2e-5, warmup_proportion=0.1)
    with pytest.raises(ValueError, match="No shared training flag"):
        define_flags(values, learning_rat=1.0)
    values(["prog", "--output_dir=/tmp/run", "--optimizer=lamb", "--dtype_policy=mixed_bfloat16"])
    with pytest.warns(DeprecationWarning, match=r"TrainingOptions.optimizer_config\(\)"):
        config = training_flags.optimizer_config(values)
    assert config == optimization.OptimizerConfig(
        optimizer="lamb", learning_rate=2e-5, warmup_proportion=0.1
    )
    with pytest.warns(DeprecationWarning, match=r"TrainingOptions.trainer_settings\(\)"):
        assert training_flags.trainer_kwargs(values)["model_dir"] == "/tmp/run"
    with pytest.warns(DeprecationWarning, match="resolved_dtype_policy"):
        assert training_flags.dtype_policy(values) == "mixed_bfloat16"
    try:
        with pytest.warns(DeprecationWarning, match=r"TrainingOptions.setup\(\)"):
            strategy = training_flags.setup(values)
        assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    finally:
        import keras

        keras.config.set_dtype_policy("float32")
    with pytest.raises(AttributeError, match="no_such_name"):
        training_flags.no_such_name  # noqa: B018


def test_a_job_s_old_initializer_still_gives_the_initial_weights():
    class OldJob(runner.Job):
        prepare = build_model = record_run = dataset_fn = lambda self, *args, **kwargs: None

        def initializer(self):
            return "/checkpoints/uncased_L-2_H-128_A-2"

    job = OldJob(options.TrainingOptions(output_dir="/tmp/x"))
    with pytest.warns(DeprecationWarning, match=r"OldJob.initializer\(\) is Job.initial_weights"):
        initial_weights = job.initial_weights()
    assert callable(initial_weights)  # the checkpoint directory, read by the job's loader
