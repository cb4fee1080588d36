"""The README's Python usage example runs and prints what its comments say."""

import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def usage_block() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Usage", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the Usage section should hold one python block"
    return blocks[0]


def test_usage_example_runs_as_documented():
    code = usage_block()
    expected = re.findall(r"print\(.*\)[ \t]+# (.+)", code)
    assert len(expected) == 3
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
    """README "Serving": task name -> the `serving_default` inputs it lists."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Serving\n", 1)[1].split("\n## ", 1)[0]
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
    """The README's table of served inputs against the task contract (`text_fields`)
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
