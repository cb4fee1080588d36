"""A mistake in the flags ends a tool as any other mistake in the input (issue 47, point
11): one line, `<tool>: error: <why>`, exit status 1. A rule between flags (an
`app.UsageError`: `--raw_text` goes with `--format=litert`) printed the tool's whole usage
(80 lines for export_saved_model) before its reason; a value absl refuses while parsing
(`--quantize=int4`) printed absl's `FATAL Flags parsing error` and a help hint.

In-process, `utils.cli` on a toy tool's flags; in fresh processes, export_saved_model as
a user runs it."""

import concurrent.futures
import subprocess
import sys

import child_process
import pytest
from absl import app, flags

from keras_bert_zoo.utils import cli


@pytest.fixture
def toy_flags(monkeypatch):
    """A toy tool's flags, in a `FlagValues` of their own (absl's global FLAGS holds the
    tools' that other tests load), and its name."""
    values = flags.FlagValues()
    flags.DEFINE_enum("quantize", "none", ["none", "dynamic_int8"], "How.", flag_values=values)
    flags.DEFINE_bool("raw_text", False, "Raw text in.", flag_values=values)
    monkeypatch.setattr(flags, "FLAGS", values)
    monkeypatch.setattr(sys, "argv", ["tools/toy_tool.py"])
    return values


@pytest.mark.parametrize(
    "argument, message",
    [
        ("--quantize=int4", "flag --quantize=int4: value should be one of <none|dynamic_int8>"),
        (
            "--raw_text=perhaps",
            "flag --raw_text=perhaps: ('Non-boolean argument to boolean flag', 'perhaps')",
        ),
        ("--quantise=none", "Unknown command line flag 'quantise'. Did you mean: quantize ?"),
    ],
)
def test_a_flag_absl_refuses_is_one_line(toy_flags, capsys, argument, message):
    with pytest.raises(SystemExit) as ended:
        cli.parse_flags(["toy_tool", argument])
    assert ended.value.code == 1
    captured = capsys.readouterr()
    assert captured.err == f"toy_tool: error: {message}\n" and captured.out == ""


def test_a_rule_between_flags_is_one_line(toy_flags, capsys):
    def main(argv):
        raise app.UsageError("--raw_text goes with --format=litert (ONNX takes ids)")

    with pytest.raises(SystemExit) as ended:
        cli.wrap(main)(["toy_tool"])
    assert ended.value.code == 1
    assert capsys.readouterr().err == (
        "toy_tool: error: --raw_text goes with --format=litert (ONNX takes ids)\n"
    )


def _export_tool(*args):
    return subprocess.run(
        [sys.executable, "tools/export_saved_model.py", *args],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=child_process.REPO_ROOT,
        timeout=300,
    )


@pytest.mark.slow
def test_the_export_tool_ends_flag_mistakes_in_one_line(tmp_path):
    common = [f"--finetuned_dir={tmp_path / 'run'}", f"--output_dir={tmp_path / 'out'}"]
    cases = {
        "--raw_text goes with --format=litert (ONNX takes ids)": [
            "--format=onnx",
            "--raw_text",
            *common,
        ],
        "flag --quantize=int4: value should be one of <none|dynamic_int8|float16>": [
            "--format=litert",
            "--quantize=int4",
            *common,
        ],
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = {message: pool.submit(_export_tool, *args) for message, args in cases.items()}
    for message, run in runs.items():
        completed = run.result()
        lines = [line for line in completed.stderr.splitlines() if line.strip()]
        assert completed.returncode == 1, completed
        assert lines[-1] == f"export_saved_model: error: {message}", completed.stderr[-3000:]
        # Nothing of absl's usage text or parsing banner, nothing written.
        assert "USAGE" not in completed.stderr.upper() and "FATAL" not in completed.stderr
        assert "--format: <" not in completed.stderr and completed.stdout == ""
    assert not (tmp_path / "out").exists()
