"""Evaluation and prediction under `multi_worker_mirrored` and `mirrored` give one
device's answers: `tools/run_finetuning.py` run as a user runs it.

Evaluation used to go through `model.predict_on_batch`, which Keras runs through the
model's strategy: every replica got the whole batch and the outputs were concatenated,
so two workers died after training with "20 model outputs for 10 features" (and
`mirrored` over two devices with twice the rows). Each run here is compared with one
device (this process, `run_finetuning` with `one_device`) on the same trained model:
the same metrics and prediction files (probabilities to 1e-6).

Training itself is not compared with a one-device run: the classifier head's dropout
(0.1, not a flag) draws per-replica masks, so the trained weights are not one device's;
`tests/training/test_distribute.py` compares the trajectories without dropout.

Every process runs under a timeout and is killed after it: a worker waiting on a
collective that its peer will never join cannot hang the suite.
"""

import importlib.util
import json
import os
import pathlib
import shutil
import sys
import textwrap

import child_process
import pytest

from keras_bert_zoo.runners import finetuning

HERE = pathlib.Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
BINARY = REPO_ROOT / "tools" / "run_finetuning.py"
sys.path.insert(0, str(HERE.parent / "tasks"))  # the fine-tuning fixtures
import finetuning_test_helpers as helpers  # noqa: E402


def _load_tool_test():
    spec = importlib.util.spec_from_file_location(
        "kbz_test_run_finetuning", REPO_ROOT / "tests" / "tools" / "test_run_finetuning.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool_test = _load_tool_test()

TIMEOUT = 240  # seconds per process; a CI run takes a fraction of it
TASK_OPTIONS = {"train_file": "reviews.tsv", "heldout_fraction": 0.25, "predict_file": "test.tsv"}
# 10 dev and 28 test sentences in batches of 4: the last batch is partial.
SETTINGS = {"max_seq_length": 16, "eval_batch_size": 4, "predict_batch_size": 4}


def _flags(data_dir, output_dir, **extra):
    values = {
        "task": "text_classification",
        "data_dir": data_dir,
        "output_dir": output_dir,
        **TASK_OPTIONS,
        **SETTINGS,
        "progress": "log",
        **extra,
    }
    return [f"--{name}={value}" for name, value in values.items()]


def _run_cluster(args, num_workers=2):
    """`tools/run_finetuning.py args` as a `num_workers` cluster on 127.0.0.1."""
    return child_process.run_together(
        [[sys.executable, str(BINARY), *args]] * num_workers,
        child_process.worker_environments(num_workers),
        TIMEOUT,
        cwd=REPO_ROOT,
    )


def _failure(codes, outputs):
    return f"return codes {codes}\n" + "\n=====\n".join(output[-4000:] for output in outputs)


def _one_device(output_dir, data_dir, mode):
    """`run_finetuning` on one device in this process."""
    return finetuning.run_finetuning(
        finetuning.FinetuningConfig(
            mode=mode,
            output_dir=str(output_dir),
            data_dir=str(data_dir),
            task_options=dict(TASK_OPTIONS),
            progress="none",
            **SETTINGS,
        )
    )


def _results(output_dir):
    return json.loads((output_dir / finetuning.EVAL_RESULTS_FILE).read_text())


def _prediction_files(output_dir):
    directory = output_dir / finetuning.PREDICTIONS_DIR
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _assert_close(got, want, where="predictions"):
    """Equal records, floats to 1e-6: the tools run the CPU kernels `utils.cpu_kernels`
    chose for the machine, this process TensorFlow's own, which round differently in
    the ninth digit."""
    if isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-6), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for key in want:
            _assert_close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for index, (got_item, want_item) in enumerate(zip(got, want, strict=True)):
            _assert_close(got_item, want_item, f"{where}[{index}]")
    else:
        assert got == want, where


def _predictions(output_dir, names=None):
    """The prediction files' records (`names` only, if given)."""
    return {
        name: [json.loads(line) for line in text.decode().splitlines()]
        for name, text in _prediction_files(output_dir).items()
        if names is None or name in names
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    data_dir = root / "data"
    data_dir.mkdir()
    tool_test._write_reviews(data_dir / "reviews.tsv")
    sentences = [
        f"{filler} {tool_test.KEYWORDS[('pos', 'neg')[i % 2]]} ."
        for i, filler in enumerate(tool_test.FILLERS * 2)
    ]
    (data_dir / "test.tsv").write_text("text\n" + "\n".join(sentences) + "\n", encoding="utf-8")
    vocabulary = tool_test.SPECIALS + tool_test.FILLERS + list(tool_test.KEYWORDS.values()) + ["."]
    checkpoint = helpers.write_tiny_checkpoint(root / "bert", vocabulary)
    return root, data_dir, checkpoint


@pytest.fixture(scope="module")
def multi_worker_run(data):
    """Two workers: `--mode=train_and_eval`, evaluating at step 8 and at the end (16)."""
    root, data_dir, checkpoint = data
    output_dir = root / "multi_worker"
    args = _flags(
        data_dir,
        output_dir,
        init_checkpoint=checkpoint,
        distribution_strategy="multi_worker_mirrored",
        mode="train_and_eval",
        train_batch_size=4,
        num_train_steps=16,
        learning_rate=1e-2,
        lr_schedule="constant",
        warmup_proportion=0,
        steps_per_loop=8,
        eval_every=8,
        export_best="false",
        checkpoint_layouts="google",
    )
    codes, outputs = _run_cluster(args)
    assert codes == [0, 0], _failure(codes, outputs)
    return output_dir, outputs


@pytest.mark.slow
def test_multi_worker_train_and_eval_evaluates_as_one_device(data, multi_worker_run, tmp_path):
    _, data_dir, _ = data
    output_dir, outputs = multi_worker_run
    results = _results(output_dir)
    assert results["step"] == 16
    assert [entry["step"] for entry in results["history"]] == [8, 16]
    # Both workers evaluated every dev sentence, once, and got the same metrics.
    for output in outputs:
        assert "eval (step 16): dev: accuracy" in output, output[-3000:]
    assert (
        outputs[0].split("eval_results.json (step 16):")[1].splitlines()[1]
        == (outputs[1].split("eval_results.json (step 16):")[1].splitlines()[1])
    )
    # Only the chief writes the run's files (no worker-1 copies, no temporaries left).
    assert "predictions_dev.jsonl" in outputs[0] and "predictions_dev" not in outputs[1]
    # The --predict_file given with the training run is predicted once it is trained.
    assert sorted(os.listdir(output_dir / finetuning.PREDICTIONS_DIR)) == [
        "predictions_dev.jsonl",
        "predictions_test.jsonl",
    ]
    assert not [p for p in output_dir.rglob(".*") if p.name.endswith(".tmp") or ".tmp-" in p.name]

    # The same trained model evaluated on one device: the same metrics and answers.
    one_device_dir = tmp_path / "one_device"
    shutil.copytree(output_dir, one_device_dir)
    shutil.rmtree(one_device_dir / finetuning.PREDICTIONS_DIR)
    one_device = _one_device(one_device_dir, data_dir, "eval")
    assert one_device.step == 16
    assert one_device.eval_results == results["results"]
    _assert_close(_predictions(one_device_dir), _predictions(output_dir, ["predictions_dev.jsonl"]))
    lines = _prediction_files(output_dir)["predictions_dev.jsonl"].decode().splitlines()
    assert len(lines) == 10


@pytest.mark.slow
def test_multi_worker_predict_matches_one_device(data, multi_worker_run, tmp_path):
    # `--mode=eval` on a loaded model is the evaluation above plus the loading here.
    _, data_dir, _ = data
    trained_dir, _ = multi_worker_run
    output_dir = tmp_path / "multi_worker"
    shutil.copytree(trained_dir, output_dir)
    shutil.rmtree(output_dir / finetuning.PREDICTIONS_DIR)
    one_device_dir = tmp_path / "one_device"
    shutil.copytree(output_dir, one_device_dir)

    args = _flags(
        data_dir, output_dir, distribution_strategy="multi_worker_mirrored", mode="predict"
    )
    codes, outputs = _run_cluster(args)
    assert codes == [0, 0], _failure(codes, outputs)
    _one_device(one_device_dir, data_dir, "predict")

    written = _prediction_files(output_dir)
    assert sorted(written) == ["predictions_test.jsonl"]
    _assert_close(_predictions(output_dir), _predictions(one_device_dir))
    assert len(written["predictions_test.jsonl"].decode().splitlines()) == 28


MIRRORED_CHILD = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf

    # Two logical CPU devices, before TensorFlow initializes them.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
    from keras_bert_zoo.runners import finetuning
    from keras_bert_zoo.training import distribute

    print("REPLICAS", distribute.get_strategy("mirrored").num_replicas_in_sync)
    settings = json.loads(sys.argv[1])
    for mode in ("eval", "predict"):
        finetuning.run_finetuning(
            finetuning.FinetuningConfig(
                mode=mode, distribution_strategy="mirrored", progress="none", **settings
            )
        )
    print("DONE")
    """
)


@pytest.mark.slow
def test_mirrored_over_two_devices_matches_one_device(data, multi_worker_run, tmp_path):
    _, data_dir, _ = data
    trained_dir, _ = multi_worker_run
    output_dir = tmp_path / "mirrored"
    shutil.copytree(trained_dir, output_dir)
    shutil.rmtree(output_dir / finetuning.PREDICTIONS_DIR)
    one_device_dir = tmp_path / "one_device"
    shutil.copytree(output_dir, one_device_dir)

    settings = {
        "output_dir": str(output_dir),
        "data_dir": str(data_dir),
        "task_options": TASK_OPTIONS,
        **SETTINGS,
    }
    codes, outputs = child_process.run_together(
        [[sys.executable, "-c", MIRRORED_CHILD, json.dumps(settings)]],
        [child_process.environment()],
        TIMEOUT,
        cwd=REPO_ROOT,
    )
    assert codes == [0], _failure(codes, outputs)
    assert "REPLICAS 2" in outputs[0] and "DONE" in outputs[0], outputs[0][-3000:]
    for mode in ("eval", "predict"):
        _one_device(one_device_dir, data_dir, mode)

    written = _prediction_files(output_dir)
    assert sorted(written) == ["predictions_dev.jsonl", "predictions_test.jsonl"]
    _assert_close(_predictions(output_dir), _predictions(one_device_dir))
    assert _results(output_dir)["results"] == _results(one_device_dir)["results"]
