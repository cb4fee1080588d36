"""A tool's start, before TensorFlow loads (issue 47, point 10; issue 45's kernels).

Every tool checks its command line against `tools/flag_definitions.json` before it
imports TensorFlow (`keras_bert_zoo.utils.startup`, `utils.tool_flags`): a misspelt
flag, a bad value or a missing required flag ends it with one line and status 1, and
`--help` / `--helpfull` answer with status 0, listing the tool's flags and absl's
standard ones only. The tests run the tools with a `tensorflow` (and `keras`) package
first on the path that fails to import: an answer without that failure was given
without TensorFlow, whatever the machine's speed. The file itself is kept equal to the
tools' own flag definitions, and a tool that runs models logs its CPU kernels first.
"""

import concurrent.futures
import os
import pathlib
import subprocess
import sys
import time

import child_process
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
from tools import TOOLS  # noqa: E402

NO_TENSORFLOW = "this start imported TensorFlow"
# Flags of the modules TensorFlow imports, which --helpfull listed before (absl's test
# flags, the TPU client's and tensor tracer's, pfor's).
FOREIGN_FLAGS = ("test_tmpdir", "test_random_seed", "hbm_oom_exit", "tt_check_filter")
FOREIGN_MODULES = ("absl.testing", "tensorflow.python")


@pytest.fixture(scope="module")
def without_tensorflow(tmp_path_factory):
    """An environment whose `import tensorflow` / `import keras` fail, loudly."""
    root = tmp_path_factory.mktemp("no_tensorflow")
    for package in ("tensorflow", "keras"):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text(
            f"raise ImportError({NO_TENSORFLOW!r})\n", encoding="utf-8"
        )
    env = child_process.environment()
    env["PYTHONPATH"] = os.pathsep.join([str(root), env["PYTHONPATH"]])
    env.pop("TF_CPP_MIN_LOG_LEVEL")
    return env


def _tool(name, *args, env):
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return done, time.perf_counter() - start


def _all(commands, env):
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda command: _tool(*command, env=env), commands))


@pytest.mark.slow
def test_a_misspelt_flag_ends_every_tool_before_tensorflow_loads(without_tensorflow):
    # create_pretraining_data leaves the flags it does not know to Beam: a bad value.
    commands = [
        (tool, "--max_seq_length=abc")
        if tool == "create_pretraining_data"
        else (tool, "--no_such_flag=1")
        for tool in TOOLS
    ]
    answers = _all(commands, without_tensorflow)
    for (tool, argument), (done, seconds) in zip(commands, answers, strict=True):
        print(f"{tool} {argument}: {seconds:.2f} s")
        assert done.returncode == 1, (tool, done.stderr[-2000:])
        assert NO_TENSORFLOW not in done.stderr, (tool, done.stderr[-2000:])
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{tool}: error: "), (tool, lines)
        assert argument.split("=")[0].lstrip("-") in lines[0], (tool, lines)
        assert done.stdout == ""


def test_bad_values_and_missing_required_flags_are_one_line(without_tensorflow):
    commands = [
        ("run_finetuning", "--mode=trian"),
        ("run_finetuning", "--train_batch_size=0"),
        ("run_finetuning", "--onednn=maybe"),
        ("run_finetuning", "--task=glue/mrcp"),
        ("convert_checkpoint", "--input=ckpt"),
    ]
    expected = (
        "value should be one of <train|train_and_eval|eval|predict|export>",
        "--train_batch_size=0",
        "value should be one of <auto|on|off>",
        "--task=glue/mrcp: no such task",
        "--output must have a value other than None",
    )
    answers = _all(commands, without_tensorflow)
    for command, (done, _), text in zip(commands, answers, expected, strict=True):
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, (command, done.stderr[-2000:])
        assert lines[0].startswith(f"{command[0]}: error: ") and text in lines[0], lines


def test_help_and_helpfull_list_our_flags_and_absls_with_status_0(without_tensorflow):
    commands = [
        ("run_finetuning", "--helpfull"),
        ("export_saved_model", "--helpfull"),
        ("build_vocab", "--helpfull"),
        ("run_finetuning", "--help"),
    ]
    answers = _all(commands, without_tensorflow)
    for (tool, flag), (done, _) in zip(commands, answers, strict=True):
        assert done.returncode == 0, (tool, flag, done.stderr[-2000:])
        text = done.stdout
        first_line = (REPO_ROOT / "tools" / f"{tool}.py").read_text().split("\n")[0].strip('"r')
        assert first_line in text, text[:500]
        assert "KERAS_BERT_ZOO_TRACEBACK" in text  # the note utils.cli adds to the usage
        for foreign in FOREIGN_FLAGS + FOREIGN_MODULES:
            assert foreign not in text, (tool, flag, foreign)
        if flag == "--helpfull":
            assert "--verbosity" in text and "--flagfile" in text
    helpfull, _ = answers[0]
    for ours in ("--train_batch_size", "--onednn", "--jit_compile", "--label_column"):
        assert ours in helpfull.stdout
    short, _ = answers[3]
    assert "--train_batch_size" in short.stdout and "--verbosity" not in short.stdout
    assert "Try --helpfull" in short.stdout


@pytest.mark.slow
def test_the_flag_definitions_are_the_tools_own():
    """`tools/flag_definitions.json` is what the tools define (one process imports them
    all: TensorFlow included)."""
    env = child_process.environment()
    done = subprocess.run(
        [sys.executable, "-m", "keras_bert_zoo.utils.tool_flags", "--check", "tools"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, (
        "tools/flag_definitions.json differs from the tools' flags: run "
        "`python -m keras_bert_zoo.utils.tool_flags --write tools`\n" + done.stdout + done.stderr
    )


@pytest.mark.slow
def test_the_cpu_kernels_are_logged_first_and_applied(tmp_path):
    """A tool that runs models logs its kernels before anything else, and TensorFlow runs
    what was chosen (`--onednn=off` as much as the default)."""
    env = child_process.environment()
    env.pop("TF_CPP_MIN_LOG_LEVEL")
    missing = tmp_path / "no_model"
    commands = [
        ("extract_features", f"--model_dir={missing}"),
        ("extract_features", f"--model_dir={missing}", "--onednn=off", "--nojit_compile"),
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(lambda command: _tool(*command, env=env)[0], commands))
    for command, done in zip(commands, answers, strict=True):
        assert done.returncode == 1, (command, done.stderr[-2000:])
        lines = done.stderr.strip().splitlines()
        assert "CPU kernels" in lines[0], lines
        assert "but TensorFlow runs" not in done.stderr, lines
        assert lines[-1].startswith("extract_features: error: "), lines
    assert "oneDNN off" in answers[1].stderr and "--onednn=off" in answers[1].stderr
    assert "no XLA" in answers[1].stderr and "--nojit_compile" in answers[1].stderr


@pytest.mark.slow
def test_tensorflows_start_up_lines_once_and_the_error_line_ends_the_output(tmp_path):
    """With TensorFlow's C++ logs asked for (`TF_CPP_MIN_LOG_LEVEL=0`) a tool shows
    their start-up block once (TensorFlow's two native libraries each print it), imports
    TensorFlow without scikit-learn (`quiet_import.UNUSED_BY_TOOLS`: -X importtime
    lists every module), and its one error line ends the output with a newline."""
    env = child_process.environment()
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(REPO_ROOT / "tools" / "extract_features.py"),
            f"--model_dir={tmp_path / 'no_model'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    imported = {
        line.rpartition("|")[2].strip() for line in lines if line.startswith("import time:")
    }
    assert "tensorflow" in imported and "keras" in imported
    # (A refused import is listed too, by its top name only: scikit-learn's modules.)
    assert not [name for name in imported if name.startswith("sklearn.")]
    logged = [
        line.split("] ", 1)[1]
        for line in lines
        if line[:1] in "IWEF" and line[1:5].isdigit() and "] " in line
    ]
    assert logged and len(logged) == len(set(logged)), logged
    assert done.stderr.endswith("\n") and lines[-1].startswith("extract_features: error: ")
