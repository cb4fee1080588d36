"""A disk that fills while a checkpoint is written (issue 47, point 9): the tool ends in
one line naming the checkpoint directory, the space a checkpoint needs and the whole
checkpoint it resumes from; the same command, rerun once there is room, resumes from it
(that a resumed run ends bitwise as an uninterrupted one: test_run_finetuning_resume.py).

The full disk is simulated in a fresh process running tools/run_finetuning.py as a user
does: `tf.train.Checkpoint.write` of the training state raises TensorFlow's
`ResourceExhaustedError` (what its file writer raises on ENOSPC) at the Nth checkpoint.
The rerun is the tool's `main` in the test's process. Python's own `OSError(ENOSPC)`
(the manifest's write) is tested in-process."""

import errno
import os
import pathlib
import subprocess
import sys

import child_process
import numpy as np
import pytest
import tensorflow as tf

HERE = pathlib.Path(__file__).resolve().parent
runner_test = child_process.import_by_path(
    "kbz_disk_full_test_run_finetuning", HERE / "test_run_finetuning.py"
)
import finetuning_test_helpers as helpers  # noqa: E402  (tests/tasks, put on the path by it)

STEPS = 6
CHECKPOINT_EVERY = 2
FAILING_CHECKPOINT = 2  # the second one (step 4): the first (step 2) is whole

# Runs the tool with the training state's writes failing at the Nth checkpoint.
FULL_DISK_WRAPPER = """
import os, runpy, sys
import tensorflow as tf

tool, fail_at = sys.argv[1], int(sys.argv[2])
write, written = tf.train.Checkpoint.write, []


def write_until_full(self, file_prefix, options=None):
    if os.path.basename(str(file_prefix)) == "state":
        written.append(file_prefix)
        if len(written) == fail_at:
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{file_prefix}.data-00000-of-00001.tempstate: No space left on device"
            )
    return write(self, file_prefix, options=options)


tf.train.Checkpoint.write = write_until_full
sys.argv = [tool, *sys.argv[3:]]
runpy.run_path(tool, run_name="__main__")
"""


def _args(data_dir, checkpoint, output_dir):
    return [
        "--task=text_classification",
        "--mode=train",
        f"--data_dir={data_dir}",
        "--train_file=reviews.tsv",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={output_dir}",
        "--max_seq_length=16",
        "--train_batch_size=4",
        f"--num_train_steps={STEPS}",
        "--learning_rate=5e-3",
        "--steps_per_loop=1",
        f"--checkpoint_every={CHECKPOINT_EVERY}",
        "--seed=7",
        "--progress=log",
    ]


def _run(command):
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=child_process.REPO_ROOT,
        timeout=600,
    )
    return completed.returncode, completed.stdout + completed.stderr, completed.stderr


@pytest.mark.slow
def test_a_full_disk_at_a_checkpoint_ends_in_one_line_and_the_rerun_resumes(
    tmp_path, run_tool_in_process, caplog
):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    runner_test._write_reviews(data_dir / "reviews.tsv", count=24)
    vocabulary = (
        runner_test.SPECIALS + runner_test.FILLERS + list(runner_test.KEYWORDS.values()) + ["."]
    )
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", vocabulary, layout="google")
    wrapper = tmp_path / "full_disk.py"
    wrapper.write_text(FULL_DISK_WRAPPER, encoding="utf-8")
    tool = "tools/run_finetuning.py"
    run_dir = tmp_path / "run"
    code, output, stderr = _run(
        [sys.executable, str(wrapper), tool, str(FAILING_CHECKPOINT)]
        + _args(data_dir, checkpoint, run_dir)
    )
    assert code == 1 and "Traceback" not in output, output[-3000:]
    whole = run_dir / "checkpoints" / "ckpt-00000002"
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"run_finetuning: error: No space left on the device of {run_dir / 'checkpoints'} "
        "writing the checkpoint of step 4 (a checkpoint needs about "
    ), output[-3000:]
    assert last.endswith(
        f"nothing is lost: {whole} (step 2) is whole and the same command resumes from it "
        "once there is room"
    ), last
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["ckpt-00000002"]  # no partial one

    # The same command once there is room: the tool's `main` here, resuming.
    with caplog.at_level("INFO"):
        code, _, stderr = run_tool_in_process(
            "run_finetuning", *_args(data_dir, checkpoint, run_dir)
        )
    assert code == 0, stderr[-3000:]
    assert f"Resuming at step 2 of {STEPS}" in caplog.text, caplog.text[-3000:]
    assert (run_dir / "finetuned" / "model.keras").is_file()


def test_an_os_error_enospc_in_the_manifest_is_the_same_one_line(tmp_path, monkeypatch):
    """Python's write of checkpoint.json failing with ENOSPC: the same error, the
    partial checkpoint removed, the whole one before it named."""
    from keras_bert_zoo.training import checkpointing

    variable = tf.Variable(np.zeros([1000], np.float32))
    manager = checkpointing.CheckpointManager(
        str(tmp_path / "checkpoints"),
        model_variables=[variable],
        optimizer_variables=[],
        trainer_variables={},
    )
    manager.save(1)
    needed = sum(manager.read_metadata(1)["files"].values())

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "checkpoint.json")

    monkeypatch.setattr(checkpointing, "write_json_atomically", full)
    with pytest.raises(checkpointing.CheckpointDiskFullError) as raised:
        manager.save(2)
    assert f"a checkpoint needs about {needed / 1e6:,.0f} MB" in str(raised.value)
    assert f"nothing is lost: {manager.path(1)} (step 1) is whole" in str(raised.value)
    assert manager.steps() == [1]
    assert not [name for name in os.listdir(manager.directory) if ".tmp-" in name]
