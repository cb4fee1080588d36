"""Issue 47's first point, as the user met it: after a finished run, the same command
with `--learning_rate=3e-5` and the same `--output_dir` logged "Resuming at step N of
N", printed the old dev accuracy and exited 0. Now it is refused in one line naming the
setting (old -> new) and the two ways on, leaving the run as it was; with
`--overwrite_output_dir` it starts over there, from step 0, and records the new
settings. Each setting's classification is tested in-process
(tests/runners/test_run_fingerprint.py); here the refused rerun is a run of the tool as
a user runs it (its one line and exit status), the first run and the overwriting one
the tool's `main` in this process (what they leave, what they log).
"""

import json
import pathlib

import child_process
import pytest

HERE = pathlib.Path(__file__).resolve().parent
runner_test = child_process.import_by_path(
    "kbz_rerun_test_run_finetuning", HERE / "test_run_finetuning.py"
)
import finetuning_test_helpers as helpers  # noqa: E402  (tests/tasks, put on the path by it)

STEPS = 6


def _args(data_dir, checkpoint, output_dir, *extra):
    return [
        "--task=text_classification",
        f"--data_dir={data_dir}",
        "--train_file=reviews.tsv",
        "--heldout_fraction=0.25",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={output_dir}",
        "--max_seq_length=16",
        "--train_batch_size=8",
        f"--num_train_steps={STEPS}",
        "--learning_rate=5e-3",
        "--steps_per_loop=3",
        "--progress=log",
        *extra,
    ]


@pytest.mark.slow
def test_a_rerun_with_another_learning_rate_is_refused_and_overwrite_starts_over(
    tmp_path, run_tool_in_process, caplog
):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    runner_test._write_reviews(data_dir / "reviews.tsv", count=32)
    vocabulary = (
        runner_test.SPECIALS + runner_test.FILLERS + list(runner_test.KEYWORDS.values()) + ["."]
    )
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", vocabulary)
    output_dir = tmp_path / "run"
    args = _args(data_dir, checkpoint, output_dir)

    status, _, stderr = run_tool_in_process("run_finetuning", *args)
    assert status == 0, stderr[-3000:]
    checkpoints = sorted(p.name for p in (output_dir / "checkpoints").iterdir())
    results = (output_dir / "eval_results.json").read_text("utf-8")
    event_files = len(list(output_dir.rglob("events.out.tfevents.*")))

    status, output = runner_test._run([*args, "--learning_rate=3e-5"])
    assert status == 1, output[-3000:]
    assert "Resuming at step" not in output
    last = output.strip().splitlines()[-1]
    assert last.startswith("run_finetuning: error: "), output[-3000:]
    assert "Building the model" not in output  # refused before the model is built
    assert "holds a run with other settings: learning_rate 0.005 -> 3e-05." in last
    assert "Use another --output_dir, or --overwrite_output_dir" in last
    assert "Traceback" not in output
    # The run is as it was.
    assert sorted(p.name for p in (output_dir / "checkpoints").iterdir()) == checkpoints
    assert (output_dir / "eval_results.json").read_text("utf-8") == results

    caplog.clear()
    with caplog.at_level("INFO"):
        status, _, stderr = run_tool_in_process(
            "run_finetuning", *args, "--learning_rate=3e-5", "--overwrite_output_dir"
        )
    assert status == 0, stderr[-3000:]
    logged = caplog.text
    assert f"Starting at step 0 of {STEPS}" in logged and "Resuming at step" not in logged
    settings = json.loads((output_dir / "run_settings.json").read_text("utf-8"))["settings"]
    assert settings["learning_rate"] == 3e-5
    # The old run's summaries are gone (TensorBoard would draw two runs' curves in one).
    assert len(list(output_dir.rglob("events.out.tfevents.*"))) == event_files
    assert not [p.name for p in output_dir.iterdir() if p.name.startswith(".")]
