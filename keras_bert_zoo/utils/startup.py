"""What a tool does before TensorFlow loads: its flags checked, its CPU kernels chosen.

Loading TensorFlow takes 10 to 20 s on a CPU, prints C++ start-up lines, and fixes
the kernels (`TF_ENABLE_ONEDNN_OPTS` is read then). So a tool run as a program, in
each of its three forms (`python tools/<tool>.py` in a clone, the console script
`keras-bert-zoo-<tool>`, `python -m keras_bert_zoo.tools.<tool>`), calls
`start_tool(__file__)` first, which:

1. sets `TF_CPP_MIN_LOG_LEVEL=3` unless the environment sets it (TensorFlow's C++
   logs: `TF_CPP_MIN_LOG_LEVEL=0` shows them);
2. checks the command line against the tool's recorded flags (`utils.tool_flags`): a
   misspelt flag or a bad value ends the tool at once in one line, `--help` and
   `--helpfull` answer without TensorFlow;
3. for a tool that runs a model, chooses the CPU kernels (`utils.cpu_kernels`: oneDNN,
   XLA; `--onednn`, `--jit_compile`) and sets `TF_ENABLE_ONEDNN_OPTS`;
4. imports TensorFlow with its C++ start-up lines captured (`utils.quiet_import`),
   without the modules Keras loads for features no tool uses (scikit-learn).

For this to run first, importing `keras_bert_zoo` in such a process does not import
TensorFlow (the package's `__init__` asks `starting_tool()`); in every other process
(a library user's, the tests') the package imports as it always did.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence

from keras_bert_zoo.utils import cpu_kernels, installation, quiet_import
from keras_bert_zoo.utils import extras as extras_lib
from keras_bert_zoo.utils.extras import ExtraNeed

CONSOLE_SCRIPT_PREFIX = "keras-bert-zoo-"
TOOLS_PACKAGE = "keras_bert_zoo.tools"
# Options of the Python interpreter that take the next argument as their value.
_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]*")

logger = logging.getLogger(__name__)

_started: set[str] = set()


def console_script(tool: str) -> str:
    """The console script of `tool` (setup.py's entry points)."""
    return CONSOLE_SCRIPT_PREFIX + tool.replace("_", "-")


def _tool_of_script(path: str) -> str | None:
    name = os.path.basename(path)
    for suffix in (".exe", "-script.py"):  # the forms of a Windows console script
        name = name.removesuffix(suffix)
    if name.startswith(CONSOLE_SCRIPT_PREFIX):
        tool = name[len(CONSOLE_SCRIPT_PREFIX) :].replace("-", "_")
        return tool if _TOOL_NAME.fullmatch(tool) else None
    stem, extension = os.path.splitext(name)
    # The real directory: a `tools` that is a link to a clone's (a working directory
    # beside the data) is that clone's tools.
    directory = os.path.dirname(os.path.realpath(path))
    # tools/<tool>.py of a clone, or keras_bert_zoo/tools/<tool>.py of an installed wheel.
    if (
        extension == ".py"
        and _TOOL_NAME.fullmatch(stem)
        and os.path.basename(directory) == "tools"
        and os.path.isfile(os.path.join(directory, "__init__.py"))
        and (
            os.path.isdir(os.path.join(os.path.dirname(directory), "keras_bert_zoo"))
            or os.path.basename(os.path.dirname(directory)) == "keras_bert_zoo"
        )
    ):
        return stem
    return None


def starting_tool(orig_argv: Sequence[str] | None = None) -> str | None:
    """The tool this process was started to run, from its command line as the
    interpreter received it (`sys.orig_argv`: what multiprocessing's workers and
    `python -m` leave alone), or None (a library user, the tests, a worker process).
    """
    argv = list(sys.orig_argv if orig_argv is None else orig_argv)[1:]
    index = 0
    while index < len(argv):
        argument = argv[index]
        if argument == "-m" or (argument.startswith("-m") and len(argument) > 2):
            module = argv[index + 1] if argument == "-m" and index + 1 < len(argv) else argument[2:]
            package, _, tool = module.rpartition(".")
            return tool if package == TOOLS_PACKAGE and _TOOL_NAME.fullmatch(tool) else None
        if argument == "-c" or argument.startswith("-c") or argument == "-":
            return None
        if argument in _OPTIONS_WITH_VALUE:
            index += 2
            continue
        if argument.startswith("-"):
            index += 1
            continue
        return _tool_of_script(argument)
    return None


def program_name(tool: str, orig_argv: Sequence[str] | None = None) -> str:
    """How the user called `tool`: `keras-bert-zoo-<tool>`, `python -m ...` or
    `python tools/<tool>.py` (what help and error lines name)."""
    argv = list(sys.orig_argv if orig_argv is None else orig_argv)
    if any(a == "-m" or a.startswith("-m" + TOOLS_PACKAGE) for a in argv[1:]):
        return f"python -m {TOOLS_PACKAGE}.{tool}"
    for argument in argv[1:]:
        if not argument.startswith("-"):
            if os.path.basename(argument).startswith(CONSOLE_SCRIPT_PREFIX):
                return console_script(tool)
            break
    return f"python tools/{tool}.py"


def usage_for(text: str, tool: str, program: str) -> str:
    """`text` (a docstring, a help) as the user who called `program` reads it: in a
    clone unchanged; from an installed wheel, `python tools/<t>.py` and `tools/<t>.py`
    name how the tools are called there (the console scripts, or `python -m`), and
    a path of the package's source (`keras_bert_zoo/runners/finetuning.py`) its module
    (`keras_bert_zoo.runners.finetuning`)."""
    if installation.from_source_tree():
        return text
    as_module = program.startswith("python -m ")

    def called(match):
        name = match.group(1)
        return f"python -m {TOOLS_PACKAGE}.{name}" if as_module else console_script(name)

    text = re.sub(r"python tools/([a-z][a-z0-9_]*)\.py", called, text)
    text = re.sub(r"(?<![\w/])tools/([a-z][a-z0-9_]*)\.py", called, text)
    return re.sub(
        r"(?<![\w/])keras_bert_zoo((?:/\w+)+)\.py",
        lambda m: "keras_bert_zoo" + m.group(1).replace("/", "."),
        text,
    )


def _docstring(tool_file: str) -> str:
    with open(tool_file, encoding="utf-8") as f:
        return ast.get_docstring(ast.parse(f.read()), clean=True) or ""


def _kernel_flags(arguments: Sequence[str]) -> tuple[str, bool | None]:
    """`--onednn` and `--jit_compile` / `--nojit_compile` read from the arguments
    themselves (the last of each wins, as in absl)."""
    onednn, jit_compile = "auto", None
    for index, argument in enumerate(arguments):
        name, equals, value = argument.lstrip("-").partition("=")
        if name == "onednn":
            if not equals and index + 1 < len(arguments):
                value = arguments[index + 1]
            onednn = value
        elif name in ("jit_compile", "nojit_compile"):
            on = value.lower() not in ("false", "f", "0") if equals else True
            jit_compile = on if name == "jit_compile" else False
    return onednn, jit_compile


def _error_name(program: str, tool: str) -> str:
    """The name error lines start with, as `utils.cli` writes it (argv[0]'s stem)."""
    return tool if program.startswith("python") else program


def start_tool(
    tool_file: str,
    *,
    kernels: bool = False,
    known_only: bool = False,
    check: Callable[[list[str]], str | None] | None = None,
    extras: Sequence[ExtraNeed] = (),
    import_tensorflow: bool = True,
) -> None:
    """The start of the tool `tool_file` when this process runs it (`starting_tool()`);
    nothing otherwise (a test importing the tool, a worker process). See the module.

    Args:
        tool_file: the tool's `__file__`.
        kernels: the tool runs models: choose the CPU kernels (`--onednn`,
            `--jit_compile`) and log the choice (`log_kernel_choice`).
        known_only: flags the tool does not know are left for another parser (Beam's
            pipeline options), not refused here.
        check: `check(argv)`: another mistake to report before TensorFlow loads (the
            message), or None.
        extras: the uses of the tool that need an optional extra
            (`utils.extras.ExtraNeed`): one that is not installed ends the tool at
            once, naming the extra and how to install it.
        import_tensorflow: import TensorFlow (quietly) at the end; a tool that starts
            worker processes first imports it itself, later.
    """
    tool = os.path.splitext(os.path.basename(tool_file))[0]
    if tool in _started or starting_tool() != tool:
        return
    _started.add(tool)
    from keras_bert_zoo.utils import tool_flags

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    program = program_name(tool)
    usage = usage_for(_docstring(tool_file), tool, program)
    from keras_bert_zoo.utils import cli

    if cli.TRACEBACK_ENV not in usage:  # the note `cli.run` adds to absl's usage
        usage = f"{usage}\n\n{cli._HELP_NOTE}"  # noqa: SLF001
    parsed = tool_flags.check_command_line(
        tool,
        _error_name(program, tool),
        os.path.dirname(os.path.abspath(tool_file)),
        sys.argv,
        usage,
        known_only=known_only,
    )
    if kernels:
        if parsed is not None:
            onednn = parsed["onednn"].value if "onednn" in parsed else "auto"
            jit_compile = parsed["jit_compile"].value if "jit_compile" in parsed else None
        else:  # not checked early (plugins extend the tool): the flags as written
            onednn, jit_compile = _kernel_flags(sys.argv[1:])
        if onednn not in cpu_kernels.ONEDNN_SETTINGS:
            onednn = "auto"  # the tool's own parse refuses it, once its flags are defined
        cpu_kernels.apply(cpu_kernels.choose(onednn=onednn, jit_compile=jit_compile))
    message = check(sys.argv[1:]) if check is not None else None
    message = message or extras_lib.check_arguments(extras, sys.argv[1:])
    if message:
        sys.stdout.flush()
        print(f"{_error_name(program, tool)}: error: {message}", file=sys.stderr)
        sys.exit(1)
    if import_tensorflow:
        with quiet_import.without_modules_tools_do_not_use():
            if quiet_import.wants_quiet_import():
                quiet_import.import_tensorflow_quietly()
            else:
                quiet_import.import_tensorflow_logged_once()


def define_onednn_flag():
    """`--onednn=auto|on|off`, for a tool that runs models (`start_tool(kernels=True)`
    reads it before TensorFlow loads)."""
    from absl import flags

    from keras_bert_zoo.utils import settings

    settings.define_once(
        flags.FLAGS,
        "enum",
        "onednn",
        "auto",
        "TensorFlow's oneDNN kernels: auto (chosen for the CPU's kind, as measured: "
        f"docs/speed.md; {cpu_kernels.ONEDNN_ENV} in the environment wins), on, off.",
        enum_values=list(cpu_kernels.ONEDNN_SETTINGS),
    )
    return flags.FlagHolder(flags.FLAGS, flags.FLAGS["onednn"])


def log_kernel_choice() -> None:
    """Logs the CPU kernels `start_tool` chose (two lines), checked against what
    TensorFlow runs (a process that imported TensorFlow before the choice keeps
    TensorFlow's)."""
    choice = cpu_kernels.chosen()
    if choice is None:
        return
    lines = choice.describe()
    try:
        from tensorflow.python.util import _pywrap_util_port

        running = bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):  # another TensorFlow build: nothing to compare
        running = choice.onednn
    if choice.onednn is not None and running != choice.onednn:
        lines += (
            f"\n  but TensorFlow runs oneDNN {'on' if running else 'off'}: it was imported "
            "before the choice"
        )
    for line in lines.splitlines():
        logger.info("%s", line)
