"""`tools/run_finetuning.py` as a user runs it: the helpers that start it, kill it
and check what it leaves (used by test_run_finetuning_resume.py, whose runs are killed
twice and end bitwise as an uninterrupted run), and the README's two set-up commands.
The runner's logic is tested in-process in `tests/tasks/test_finetuning*.py`.
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

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FILLERS = "the a film movie plot actors story was is very quite and but it".split()
KEYWORDS = {"pos": "great", "neg": "awful"}
STEPS = 16


_environment = child_process.environment


def _run(args, kill_after_step=None, timeout=300, binary=BINARY):
    """Runs the binary (run_finetuning.py unless given); with `kill_after_step`, SIGKILLs
    it once it logged that step."""
    process = subprocess.Popen(
        [sys.executable, str(binary), *args],
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
