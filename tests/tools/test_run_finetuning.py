"""`tools/run_finetuning.py` as a user runs it: a training run SIGKILLed in the middle
leaves only whole files in `--output_dir`, and the same command run again resumes from
the newest checkpoint and finishes. The runner's logic is tested in-process in
`tests/tasks/test_finetuning*.py`; this is the one test of the binary itself.
"""

import json
import pathlib
import random
import re
import signal
import subprocess
import sys

import child_process

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = REPO_ROOT / "tools" / "run_finetuning.py"
sys.path.insert(0, str(REPO_ROOT / "tests" / "tasks"))
import finetuning_test_helpers as helpers  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLERS = "the a film movie plot actors story was is very quite and but it".split()
KEYWORDS = {"pos": "great", "neg": "awful"}
STEPS = 16


_environment = child_process.environment


def _run(args, kill_after_step=None, timeout=300):
    """Runs the binary; with `kill_after_step`, SIGKILLs it once it logged that step."""
    process = subprocess.Popen(
        [sys.executable, str(BINARY), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_environment(),
        cwd=REPO_ROOT,
    )
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if kill_after_step is not None and re.search(rf"\bstep {kill_after_step}/", line):
                process.send_signal(signal.SIGKILL)
                break
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, "".join(lines)


def _write_reviews(path, count=40, seed=0):
    rng = random.Random(seed)
    lines = ["text\tlabel"]
    for index in range(count):
        label = ("pos", "neg")[index % 2]
        words = rng.choices(FILLERS, k=rng.randint(3, 7))
        words.insert(rng.randint(0, len(words)), KEYWORDS[label])
        lines.append(f"{' '.join(words)} .\t{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _assert_whole(output_dir: pathlib.Path):
    """Every entry without a temporary (dot) name is complete and readable."""
    from keras_bert_zoo.tasks import load_finetuned

    json.loads((output_dir / "task.json").read_text(encoding="utf-8"))
    for path in output_dir.rglob("*.json"):
        if not any(part.startswith(".") for part in path.relative_to(output_dir).parts):
            json.loads(path.read_text(encoding="utf-8"))
    for checkpoint in (output_dir / "checkpoints").glob("ckpt-*"):
        assert (checkpoint / "checkpoint.json").is_file(), checkpoint
    for name in ("best", "finetuned"):
        if (output_dir / name).exists():
            load_finetuned(str(output_dir / name))


def test_killed_run_leaves_whole_files_and_the_same_command_resumes(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    _write_reviews(data_dir / "reviews.tsv")
    vocabulary = SPECIALS + FILLERS + list(KEYWORDS.values()) + ["."]
    checkpoint = helpers.write_tiny_checkpoint(tmp_path / "bert", vocabulary, layout="google")
    output_dir = tmp_path / "run"
    args = [
        "--task=text_classification",
        f"--data_dir={data_dir}",
        "--train_file=reviews.tsv",
        "--heldout_fraction=0.25",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={output_dir}",
        "--max_seq_length=16",
        "--train_batch_size=4",
        f"--num_train_steps={STEPS}",
        "--learning_rate=5e-3",
        "--lr_schedule=constant",
        "--warmup_proportion=0",
        "--steps_per_loop=1",
        "--checkpoint_every=2",
        "--keep_checkpoints=2",
        "--eval_every=4",
        "--progress=log",
    ]
    code, output = _run(args, kill_after_step=9)
    assert code == -signal.SIGKILL, output[-3000:]
    _assert_whole(output_dir)
    assert (output_dir / "checkpoints").is_dir() and (output_dir / "best").is_dir()
    killed_history = json.loads((output_dir / "eval_results.json").read_text())["history"]
    assert [entry["step"] for entry in killed_history][:2] == [4, 8]

    code, output = _run(args)
    assert code == 0, output[-3000:]
    resumed = re.search(r"Resuming at step (\d+) of 16", output)
    assert resumed and int(resumed.group(1)) >= 8, output[-3000:]
    assert "eval_results.json (step 16):" in output
    _assert_whole(output_dir)
    results = json.loads((output_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert results["step"] == STEPS and results["model"] == "final"
    assert [entry["step"] for entry in results["history"]] == [4, 8, 12, 16]
    assert 0.0 <= results["results"]["dev"]["accuracy"] <= 1.0
    records = (output_dir / "predictions" / "predictions_dev.jsonl").read_text().splitlines()
    assert len(records) == 10  # a quarter of each label held out
    for name in ("finetuned", "export_google", "export_huggingface"):
        assert (output_dir / name / "task.json").is_file(), name
    leftovers = [p for p in output_dir.rglob(".*")]
    assert not leftovers, leftovers


def test_readme_first_command_is_the_main_job_and_second_the_tests():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, flags=re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert commands == [
        'python3 -m venv .venv && .venv/bin/pip install -e ".[demo]" && '
        ".venv/bin/python tools/run_finetuning.py",
        "python3 -m venv .venv && .venv/bin/pip install -U pip && "
        '.venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest -q tests',
    ]
