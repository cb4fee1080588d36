"""The README and the docs/ pages: the README is short and starts with the two set-up
commands; every Python example (the README's quick start, the Usage page's) runs in a
fresh process and prints what its comments say; the Serving page's table of inputs is
every task's; `mkdocs build --strict` builds the pages (tests/test_docs.py)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


README = REPO_ROOT / "README.md"
# The README's shape (issue 61): a page a person skims, the reference in docs/.
README_MAX_LINES = 150
SETUP_COMMANDS = (
    'python3 -m venv .venv && .venv/bin/pip install -e ".[demo]" && '
    ".venv/bin/python tools/run_finetuning.py",
    'python3 -m venv .venv && .venv/bin/pip install -U pip && .venv/bin/pip install -e ".[test]" '
    "&& .venv/bin/python -m pytest -q tests",
)


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def usage_block() -> str:
    blocks = python_blocks(REPO_ROOT / "docs" / "usage.md")
    runnable = [block for block in blocks if "print(" in block and "# (" in block]
    assert len(runnable) == 1, "the Usage page should hold one runnable example"
    return runnable[0]


def test_the_readme_is_short_and_starts_with_the_two_set_up_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    assert lines[0] == "# keras_bert_zoo" and lines[2] == "```bash", lines[:3]
    assert tuple(lines[3:5]) == SETUP_COMMANDS and lines[5] == "```"
    # Every page the README links to exists.
    for page in re.findall(r"\]\((docs/[\w-]+\.md)\)", README.read_text(encoding="utf-8")):
        assert (REPO_ROOT / page).is_file(), page


@pytest.mark.slow
def test_the_readme_python_quick_start_runs_as_documented():
    (code,) = python_blocks(README)
    _runs_as_its_comments_say(code, 1)


@pytest.mark.slow
def test_usage_example_runs_as_documented():
    _runs_as_its_comments_say(usage_block(), 3)


def _runs_as_its_comments_say(code: str, prints: int):
    expected = re.findall(r"print\(.*\)[ \t]+# (.+)", code)
    assert len(expected) == prints
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [line for line in result.stdout.splitlines() if line.strip()]
    assert printed == expected, (printed, expected)


def _serving_inputs_table() -> dict[str, list[str]]:
    """docs/serving.md: task name -> the `serving_default` inputs it lists."""
    page = (REPO_ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    section = page.split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not line.startswith("| `"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        inputs = re.findall(r"`([^`]+)`", cells[1])
        for name in names:
            table[name] = inputs
    return table


def test_serving_inputs_in_the_readme_are_each_tasks_text_fields(tmp_path):
    """The Serving page's table of served inputs against the task contract (`text_fields`)
    of every registered task."""
    from keras_bert_zoo import tasks

    table = _serving_inputs_table()
    registered = tasks.list_tasks()
    assert set(registered) <= set(table), sorted(set(registered) - set(table))
    for name in registered:
        if name == "multiple_choice":
            # Its fields follow its data's number of choices: three here.
            rows = [{"context": "c", "choices": ["a", "b", "c"], "label": 0}] * 2
            (tmp_path / "train.jsonl").write_text(
                "\n".join(__import__("json").dumps(row) for row in rows) + "\n"
            )
            task = tasks.create_task(name, data_dir=str(tmp_path))
            task.read("train")
            assert task.text_fields == ("context", "ending0", "ending1", "ending2")
            assert table[name][:2] == ["context", "ending0"], table[name]
            continue
        assert list(tasks.create_task(name).text_fields) == table[name], name
