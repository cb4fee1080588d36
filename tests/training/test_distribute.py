"""distribute.py and options.py; mirrored and multi-worker runs against one device."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import child_process
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from keras_bert_zoo.training import distribute, optimization
from keras_bert_zoo.training.options import TrainingOptions
from keras_bert_zoo.utils import settings

# Losses and weights of a strategy run against one device with the same global batch:
# the all-reduce sums in another order than one device's batch mean (observed: 1e-6 on
# the loss, 1.2e-7 on the weights after 6 steps).
LOSS_TOLERANCE = 1e-5
WEIGHT_TOLERANCE = 1e-5

COMMON = [
    "--model=pretrainer",
    "--dropout=0",  # replicas draw their own dropout masks: not one device's
    "--steps=6",
    "--steps_per_loop=3",
    "--checkpoint_every=3",
    "--batch=8",
    "--clip_norm=0.5",  # active: clipping a replica's gradient instead of the sum would show
]


# === Strategy construction ===


def test_unknown_and_unsupported_strategies_fail_fast(monkeypatch):
    with pytest.raises(distribute.StrategyError, match="Unknown --distribution_strategy='gpu'"):
        distribute.get_strategy("gpu")
    with pytest.raises(distribute.StrategyError, match="ParameterServerStrategy"):
        distribute.get_strategy("parameter_server")
    with pytest.raises(distribute.StrategyError, match="needs --tpu"):
        distribute.get_strategy("tpu")
    with pytest.raises(distribute.StrategyError, match="--num_gpus=2 but only 0 GPU"):
        distribute.get_strategy("mirrored", num_gpus=2)

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(distribute.StrategyError, match="needs the TF_CONFIG"):
        distribute.get_strategy("multi_worker_mirrored")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(distribute.StrategyError, match="TF_CONFIG is not valid JSON"):
        distribute.read_tf_config()
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker"}}),
    )
    with pytest.raises(distribute.StrategyError, match="parameter servers"):
        distribute.read_tf_config()
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}),
    )
    with pytest.raises(distribute.StrategyError, match="task index 1 is outside"):
        distribute.read_tf_config()


def test_one_device_strategy_and_batch_split():
    strategy = distribute.get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    assert strategy.extended.worker_devices[0].endswith("CPU:0")
    assert distribute.per_replica_batch_size(32, strategy) == 32
    assert distribute.is_chief(strategy) and distribute.num_workers(strategy) == 1
    context = distribute.input_context(strategy)
    assert (context.num_input_pipelines, context.input_pipeline_id) == (1, 0)
    with pytest.raises(ValueError, match="positive multiple of the number of replicas"):
        distribute.per_replica_batch_size(0, strategy)


def test_tpu_without_a_tpu_says_so():
    # The resolver finds no TPU on this machine; initialize_tpu_system fails, and the
    # strategy helper says which TPU and why instead of a bare NotFoundError. In a fresh
    # process, as a tool asks for its strategy first thing: in a long-lived test worker
    # (where one full garbage collection took up to 8 s) it took 77 s instead of 0.2 s.
    script = textwrap.dedent(
        """
        import tensorflow as tf
        from keras_bert_zoo.training import distribute
        try:
            distribute.get_strategy("tpu", tpu="local")
        except distribute.StrategyError as error:
            print("StrategyError:", error)
        print("usable:", float(tf.reduce_sum(tf.ones([3]))))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    output = completed.stdout
    assert "StrategyError: Could not reach or initialize the TPU --tpu='local'" in output
    assert "TPUs not found" in output
    assert "usable: 3.0" in output  # the process is still usable


# === Flags ===


def _options(flag_values) -> TrainingOptions:
    return TrainingOptions(**settings.flag_values_of(TrainingOptions, flag_values))


def test_options_build_the_optimizer_config_and_trainer_settings():
    values = flags.FlagValues()
    defaults = {"learning_rate": 2e-5, "warmup_proportion": 0.1}
    settings.define_flags(TrainingOptions, values, defaults=defaults)
    settings.define_flags(TrainingOptions, values)  # a second call is harmless
    values(
        [
            "prog",
            "--output_dir=/tmp/run",
            "--optimizer=lamb",
            "--lr_schedule=cosine",
            "--exclude_embeddings_from_weight_decay",
            "--clip_norm=0",
            "--gradient_accumulation_steps=4",
            "--distribution_strategy=mirrored",
            "--dtype_policy=mixed_bfloat16",
            "--jit_compile",
        ]
    )
    options = _options(values)
    config = options.optimizer_config()
    assert config == optimization.OptimizerConfig(
        optimizer="lamb",
        learning_rate=2e-5,
        schedule="cosine",
        warmup_proportion=0.1,
        exclude_embeddings_from_weight_decay=True,
        clip_norm=None,
    )
    assert config.resolved_warmup_steps(1000) == 100
    kwargs = options.trainer_settings()
    assert kwargs["model_dir"] == "/tmp/run" and kwargs["gradient_accumulation_steps"] == 4
    assert kwargs["jit_compile"] and kwargs["steps_per_loop"] == 100
    assert options.resolved_dtype_policy() == "mixed_bfloat16"
    with pytest.raises(flags.IllegalFlagValueError):
        values["distribution_strategy"].parse("parameter_server")
    # The same checks when the options are made in Python.
    with pytest.raises(ValueError, match="distribution_strategy must be one of"):
        dataclasses.replace(options, distribution_strategy="parameter_server")

    options = dataclasses.replace(options, mixed_precision=True)  # no GPU here: bf16
    assert options.resolved_dtype_policy() == "mixed_bfloat16"  # which contradicts nothing
    options = dataclasses.replace(options, dtype_policy="mixed_float16")
    with pytest.raises(ValueError, match="pass only one of them"):
        options.resolved_dtype_policy()
    with pytest.raises(ValueError, match="--output_dir is required"):
        dataclasses.replace(options, output_dir=None).trainer_settings()


def test_setup_builds_the_strategy_then_seeds_and_sets_the_policy():
    import keras

    options = TrainingOptions(dtype_policy="mixed_bfloat16", seed=3)
    try:
        strategy = options.setup()
        assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        first = float(tf.random.uniform([]))
        options.setup()
        assert float(tf.random.uniform([])) == first  # seeded
    finally:
        keras.config.set_dtype_policy("float32")


# === Trajectories under strategies ===


@pytest.fixture(scope="module")
def one_device_reference(tmp_path_factory, load_training_result):
    """The training child's run on one device, in this process (only the strategies of
    several devices or processes need a process of their own)."""
    import pathlib

    child = child_process.import_by_path(
        "kbz_training_child", pathlib.Path(__file__).with_name("_training_child.py")
    )
    directory = tmp_path_factory.mktemp("one_device")
    args = [*COMMON, f"--model_dir={directory / 'run'}", f"--out={directory / 'result.npz'}"]
    assert child.main(args) == 0
    return load_training_result(directory / "result.npz")


def _assert_same_trajectory(result, reference, first_step=0):
    losses, weights, _ = result
    reference_losses, reference_weights, _ = reference
    np.testing.assert_allclose(losses, reference_losses[first_step:], rtol=0, atol=LOSS_TOLERANCE)
    for got, want in zip(weights, reference_weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=WEIGHT_TOLERANCE)


@pytest.mark.slow
def test_mirrored_two_devices_with_accumulation_and_xla_matches_one_device(
    tmp_path, one_device_reference, run_training, load_training_result
):
    code, output = run_training(
        [
            *COMMON,
            "--strategy=mirrored",
            "--logical_cpus=2",
            "--accumulation=2",  # Keras' own accumulation fails under MirroredStrategy
            "--jit",
            f"--model_dir={tmp_path / 'run'}",
            f"--out={tmp_path / 'result.npz'}",
        ]
    )
    assert code == 0, output[-3000:]
    assert "DONE restored_step=None step=6 replicas=2" in output
    _assert_same_trajectory(load_training_result(tmp_path / "result.npz"), one_device_reference)


@pytest.mark.slow
def test_multi_worker_two_processes_match_one_device_and_resume(
    tmp_path, one_device_reference, run_worker_cluster, load_training_result
):
    args = [*COMMON, "--strategy=multi_worker_mirrored", f"--model_dir={tmp_path / 'run'}"]
    # Three steps, then the same command to six: every worker resumes its own input.
    codes, outputs = run_worker_cluster([*args, "--steps=3"])
    assert codes == [0, 0], "\n".join(o[-2000:] for o in outputs)
    codes, outputs = run_worker_cluster([*args, f"--out={tmp_path / 'result.npz'}"])
    assert codes == [0, 0], "\n".join(o[-2000:] for o in outputs)
    assert all("DONE restored_step=3 step=6 replicas=2" in output for output in outputs)
    assert os.path.isdir(tmp_path / "run" / "checkpoints" / "ckpt-00000006.worker-1")
    result = load_training_result(tmp_path / "result.npz")
    _assert_same_trajectory(result, one_device_reference, first_step=3)
