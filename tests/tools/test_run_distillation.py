"""`tools/run_distillation.py` as a user runs it: a run SIGKILLed and rerun ends bitwise as
the uninterrupted run, and a mistake in the input is one line naming it."""

import concurrent.futures
import json
import pathlib
import random
import signal
import subprocess
import sys

import child_process
import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
runner_test = child_process.import_by_path(
    "kbz_distillation_test_run_finetuning", HERE / "test_run_finetuning.py"
)
job_test = child_process.import_by_path(
    "kbz_distillation_test_job", HERE.parent / "runners" / "test_distillation_job.py"
)
resume_test = child_process.import_by_path(
    "kbz_distillation_test_resume", HERE / "test_run_finetuning_resume.py"
)

STEPS = 12
BINARY = "tools/run_distillation.py"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A fine-tuned 2-block teacher, its data and an unlabelled transfer file."""
    root = tmp_path_factory.mktemp("distillation_tool")
    data_dir, checkpoint = job_test.fine_tune_teacher(
        root, train_batch_size=4, num_train_steps=8, mode="train"
    )
    rng = random.Random(3)
    words = job_test.FILLERS + list(job_test.KEYWORDS.values())
    lines = [" ".join(rng.choices(words, k=6)) for _ in range(9)]
    transfer = root / "unlabelled.txt"
    transfer.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root, data_dir, checkpoint, transfer


def _args(root, data_dir, transfer, output_dir):
    return [
        f"--teacher={root / 'teacher'}",
        f"--data_dir={data_dir}",
        f"--transfer_file={transfer}",
        f"--output_dir={output_dir}",
        "--student_layers=1",
        "--hidden_state_weight=0.5",
        "--train_batch_size=4",
        f"--num_train_steps={STEPS}",
        "--learning_rate=5e-3",
        "--lr_schedule=constant",
        "--warmup_proportion=0",
        "--steps_per_loop=1",
        "--checkpoint_every=3",
        "--eval_every=4",
        "--seed=7",
        "--progress=log",
    ]


def _checkpoint_state(output_dir):
    """Every variable of the final checkpoint by key, and its manifest."""
    import tensorflow as tf

    directory = output_dir / "checkpoints" / f"ckpt-{STEPS:08d}"
    reader = tf.train.load_checkpoint(str(directory / "state"))
    keys = sorted(k for k in reader.get_variable_to_shape_map() if "VARIABLE_VALUE" in k)
    metadata = json.loads((directory / "checkpoint.json").read_text(encoding="utf-8"))
    manifest = {k: metadata[k] for k in ("step", "model_variables", "optimizer_variables")}
    return {key: reader.get_tensor(key) for key in keys}, manifest


def _run(args, kill_after_step=None):
    return runner_test._run(args, kill_after_step=kill_after_step, binary=REPO_ROOT / BINARY)


@pytest.mark.slow
def test_killed_run_ends_bitwise_as_the_uninterrupted_run(teacher, tmp_path):
    from keras_bert_zoo.tasks import load_finetuned

    root, data_dir, _, transfer = teacher
    reference_dir, resumed_dir = tmp_path / "uninterrupted", tmp_path / "resumed"
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    uninterrupted = pool.submit(_run, _args(root, data_dir, transfer, reference_dir))
    pool.shutdown(wait=False)

    args = _args(root, data_dir, transfer, resumed_dir)
    code, output = _run(args, kill_after_step=7)
    assert code == -signal.SIGKILL, output[-3000:]
    code, output = _run(args)
    assert code == 0, output[-3000:]
    assert "Resuming at step 6 of 12" in output, output[-3000:]
    code, reference_output = uninterrupted.result()
    assert code == 0, reference_output[-3000:]
    assert "teacher (" in reference_output

    reference_state, reference_manifest = _checkpoint_state(reference_dir)
    resumed_state, resumed_manifest = _checkpoint_state(resumed_dir)
    assert resumed_manifest == reference_manifest
    # The projection-free student and the optimizer: no teacher weight is checkpointed.
    assert not any("teacher" in str(v) for v in reference_manifest["model_variables"])
    for key, value in reference_state.items():
        assert np.array_equal(value, resumed_state[key]), f"checkpoint {key} differs"
    reference_model = load_finetuned(str(reference_dir / "finetuned")).model
    resumed_model = load_finetuned(str(resumed_dir / "finetuned")).model
    resume_test._assert_same_weights(reference_model.weights, resumed_model.weights, "finetuned/")
    results = json.loads((resumed_dir / "eval_results.json").read_text(encoding="utf-8"))
    reference = json.loads((reference_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert results == reference
    assert [entry["step"] for entry in results["history"]] == [4, 8, 12]


def _run_tool(args):
    completed = subprocess.run(
        [sys.executable, BINARY, *args],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=REPO_ROOT,
        timeout=300,
    )
    return completed.returncode, completed.stderr


@pytest.mark.slow
def test_bad_input_is_one_line_naming_it_and_writes_nothing(teacher, tmp_path, run_tool_in_process):
    """The first case as a user runs the tool (a fresh process: its exit status and
    stderr); the others through the tool's `main` here, which prints the same line."""
    root, data_dir, checkpoint, _ = teacher
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("a fine film\nthe plot\tis awful\n", encoding="utf-8")
    common = [f"--data_dir={data_dir}", "--num_train_steps=2"]
    cases = {
        "not a fine-tuned teacher": (
            [f"--teacher={checkpoint}", *common],
            [f"--teacher={checkpoint}", "not a fine-tuned model"],
        ),
        "student layers out of range": (
            [f"--teacher={root / 'teacher'}", "--student_layers=0,3", *common],
            ["--student_layers=0,3", "from 0 to 1"],
        ),
        "transfer file in the wrong format": (
            [f"--teacher={root / 'teacher'}", f"--transfer_file={pairs}", *common],
            [f"{pairs}:2", "expected 1 tab-separated field"],
        ),
    }
    for index, (name, (args, expected)) in enumerate(cases.items()):
        args = [*args, f"--output_dir={tmp_path / name}"]
        if index == 0:
            code, stderr = _run_tool(args)
        else:
            code, _, stderr = run_tool_in_process("run_distillation", *args)
        assert code == 1, (name, stderr[-3000:])
        assert "Traceback" not in stderr, stderr[-3000:]
        last_line = [line for line in stderr.splitlines() if line.strip()][-1]
        assert last_line.startswith("run_distillation: error: "), stderr[-3000:]
        for string in expected:
            assert string in last_line, (name, last_line)
        assert not (tmp_path / name).exists(), name
