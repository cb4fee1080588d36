"""How every tool in tools/ ends on a mistake in its input: one line, no traceback.

Each tool calls `run(main)` instead of `absl.app.run(main)`. Flags, `--help` and
`--helpfull` behave as absl makes them; a mistake in the input ends the tool with

    <tool>: error: <the message as the library wrote it>

on stderr and exit status 1, instead of a traceback or absl's usage text: an exception
that is a *user error* (see `is_user_error`), an `app.UsageError` (a rule between flags:
absl printed the tool's whole usage before its reason) and a flag absl refuses while
parsing (an unknown flag, a value of the wrong type or outside its choices: absl's
`FATAL Flags parsing error` line). Anything else is a bug and keeps its traceback,
unchanged. Set KERAS_BERT_ZOO_TRACEBACK=1 to see the traceback of user errors too.

The library says what is wrong where it finds it (`path:line: ...`, `--flag=value:
...`), raising a `UserError` (`utils.errors`; or a subclass: `InputFileError`,
`CorpusError`, `CheckpointError`, ...) or a `FileNotFoundError`-like `OSError`; the
tools write nothing before their inputs are checked, so a user error leaves no output
behind. A plain `ValueError` is a bug, wherever it was raised: the class says which
errors are the user's, not where they were raised.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from keras_bert_zoo.utils import interrupts, process_exit, suggestions
from keras_bert_zoo.utils.errors import UserError

TRACEBACK_ENV = "KERAS_BERT_ZOO_TRACEBACK"

# OSErrors about a path the user gave (a missing file, a file where a directory is
# needed, ...); others (ConnectionError, BrokenPipeError, ...) are not about the input.
_PATH_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

_HELP_NOTE = (
    f"A mistake in the input ends with one line `<tool>: error: <message>` and exit "
    f"status 1; set {TRACEBACK_ENV}=1 to see its traceback."
)


def _innermost(traceback, skip: Callable[[Any], bool] = lambda frame: False):
    """The innermost traceback entry whose frame is not `skip`ped (else the outermost)."""
    entries = []
    while traceback is not None:
        entries.append(traceback)
        traceback = traceback.tb_next
    kept = [entry for entry in entries if not skip(entry.tb_frame)]
    return (kept or entries)[-1]


def _is_codec_frame(frame) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "codecs" or name.startswith("encodings.")


@functools.lru_cache(maxsize=1024)
def _is_under(filename: str, directories: tuple[str, ...]) -> bool:
    path = os.path.realpath(filename)
    return any(path.startswith(directory + os.sep) for directory in directories)


def is_user_error(error: BaseException, code_dirs: tuple[str, ...] = ()) -> bool:
    """Whether `error` is about the user's input, which the message says all about.

    That is a `UserError` (subclasses included: only our code raises them); a
    `FileNotFoundError`, `FileExistsError`, `NotADirectoryError`, `IsADirectoryError`
    or `PermissionError` naming a file, or raised by the keras_bert_zoo package or
    `code_dirs` (the tool's directory); a `UnicodeDecodeError` of a file our code read.
    Where an `OSError` or a decode error was raised is the innermost frame of its
    traceback (for a decode error, the innermost outside the codecs, which decode for
    the read that called them). Anything else (`TypeError`, `KeyError`, a plain
    `ValueError`, ours or one raised in TensorFlow, Keras or numpy, ...) is a bug.
    """
    if isinstance(error, UserError):
        return True
    if not isinstance(error, (*_PATH_ERRORS, UnicodeDecodeError)) or error.__traceback__ is None:
        return False
    if isinstance(error, _PATH_ERRORS) and error.filename is not None:
        return True
    # A text file's read decodes in the codecs module, called from the read.
    skip = _is_codec_frame if isinstance(error, UnicodeDecodeError) else (lambda frame: False)
    innermost = _innermost(error.__traceback__, skip=skip)
    return _is_under(innermost.tb_frame.f_code.co_filename, (_PACKAGE_DIR, *code_dirs))


def user_error_message(error: BaseException) -> str:
    """The message of a user error: the library's text, or `path: reason` for an
    `OSError` that the operating system raised about a path."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        paths = [os.fsdecode(error.filename)]
        if error.filename2 is not None:
            paths.append(os.fsdecode(error.filename2))
        return f"{' -> '.join(paths)}: {error.strerror}"
    return str(error) or type(error).__name__


def _traceback_requested() -> bool:
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _code_dirs(main: Callable) -> tuple[str, ...]:
    code = getattr(inspect.unwrap(main), "__code__", None)
    if code is None:
        return ()
    return (os.path.dirname(os.path.realpath(code.co_filename)),)


def quiet_libraries() -> None:
    """Our own log lines (progress, ETA, results) are what a tool's user reads:
    TensorFlow's and Keras' informational logs and warnings are shown only with
    `--verbosity=1` (absl's debug level) or more. TensorFlow's C++ logs are silenced by
    the tools before TensorFlow loads (`TF_CPP_MIN_LOG_LEVEL=3`, unless already set)."""
    import logging
    import warnings

    from absl import logging as absl_logging

    if absl_logging.get_verbosity() >= absl_logging.DEBUG:
        return
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    # TensorFlow also logs through absl directly (the checkpoint saver, signature
    # serialization): below ERROR, what its and Keras' files log is dropped.
    absl_logging.get_absl_handler().addFilter(_LibraryNoiseFilter())
    for module in ("keras", "tensorflow", "tf_keras", "absl"):
        warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")


class _LibraryNoiseFilter:
    """Drops log records below ERROR that TensorFlow's or Keras' own files wrote."""

    _LIBRARIES = tuple(f"{os.sep}{name}{os.sep}" for name in ("tensorflow", "keras", "tf_keras"))

    def filter(self, record) -> bool:
        import logging

        if record.levelno >= logging.ERROR:
            return True
        return not any(library in record.pathname for library in self._LIBRARIES)


def program_name() -> str:
    """The name a tool's error lines start with: its file's or console script's stem."""
    program = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0]
    return program or "tool"


def end_with_error(message: str, exit_status: int = 1) -> None:
    """Ends the tool with `<tool>: error: <message>` on one line of stderr."""
    sys.stdout.flush()
    one_line = "; ".join(line.strip() for line in str(message).splitlines() if line.strip())
    print(f"{program_name()}: error: {one_line}", file=sys.stderr)
    sys.exit(exit_status)


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing (`app.run`'s `flags_parser`), a flag it refuses (an unknown
    flag, a value of the wrong type or outside its choices) ending the tool in one line,
    `<tool>: error: flag --quantize=int4: value should be one of <none|...>`, as any other
    mistake in the input, instead of absl's `FATAL Flags parsing error` and help hint."""
    from absl import flags

    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        end_with_error(suggestions.with_suggestion(str(error)))


def wrap(main: Callable[[list[str]], Any]) -> Callable[[list[str]], Any]:
    """`main` for absl's `app.run`, ending a user error with one line and status 1."""
    from absl import app

    code_dirs = _code_dirs(main)

    @functools.wraps(main)
    def wrapped(argv):
        program = program_name()
        quiet_libraries()
        try:
            return main(argv)
        except app.UsageError as error:
            # A rule between flags (`--raw_text` goes with `--format=litert`): one line,
            # as a flag absl refuses, not the tool's whole usage before the reason.
            if _traceback_requested():
                raise
            end_with_error(str(error), error.exitcode)
        except interrupts.Interrupted as stopped:
            # Stopped on Ctrl-C or SIGTERM after saving: one line, the signal's status.
            sys.stdout.flush()
            print(f"{program}: {stopped}", file=sys.stderr)
            sys.exit(stopped.exit_status)
        except KeyboardInterrupt:
            if _traceback_requested():
                raise
            sys.stdout.flush()
            print(f"{program}: interrupted (SIGINT)", file=sys.stderr)
            sys.exit(128 + signal.SIGINT)
        except Exception as error:
            if _traceback_requested() or not is_user_error(error, code_dirs):
                raise
            sys.stdout.flush()
            print(f"{program}: error: {user_error_message(error)}", file=sys.stderr)
            sys.exit(1)

    return wrapped


def run(main: Callable[[list[str]], Any]) -> None:
    """`absl.app.run(main)` for a tool; see the module docstring."""
    from absl import app

    tool = sys.modules.get("__main__")
    source = sys.modules.get(getattr(inspect.unwrap(main), "__module__", None) or "")
    if tool is not None and not tool.__doc__ and source is not None:
        # A console script's __main__ is pip's wrapper: absl's --help reads this doc.
        tool.__doc__ = source.__doc__
    if tool is not None and tool.__doc__ and TRACEBACK_ENV not in tool.__doc__:
        tool.__doc__ = f"{tool.__doc__.rstrip()}\n\n{_HELP_NOTE}\n"
    try:
        app.run(wrap(main), flags_parser=parse_flags)
    except SystemExit as done:
        # The work is done (or refused): end now, not after the interpreter's teardown,
        # which can wait a minute for tf.data's threads (utils.process_exit).
        if done.code is None or isinstance(done.code, int):
            process_exit.exit_at_once(done.code or 0)
        raise


def refuse_arguments(argv: list[str]) -> None:
    """A tool that takes flags only: positional arguments are a usage error."""
    from absl import app

    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
