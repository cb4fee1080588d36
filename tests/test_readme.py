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
