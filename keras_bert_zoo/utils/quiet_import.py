"""Importing TensorFlow quietly when TensorFlow's C++ logs are turned off.

`TF_CPP_MIN_LOG_LEVEL=3` asks TensorFlow for no C++ log line, but its native libraries
print several as they load ("oneDNN custom operations are on", "Could not find cuda
drivers", absl's "All log messages before absl::InitializeLog()"), before the setting
is read. With that setting (the tools' default), the package's first import of
TensorFlow runs with the process's stderr captured; if the import fails, what was
captured is written out before the error, so nothing of a broken install is hidden.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

# Modules that importing Keras loads for a feature no tool uses: keras.wrappers (the
# scikit-learn estimators) imports scikit-learn, and with it scipy.stats, whenever
# scikit-learn is installed. Measured: 0.8 s of each tool's start on a 2-core CPU
# (benchmarks/tool_start.py). A tool process imports TensorFlow without them.
UNUSED_BY_TOOLS = ("sklearn",)


@contextlib.contextmanager
def without_modules_tools_do_not_use():
    """Within: importing `UNUSED_BY_TOOLS` fails as if they were not installed (Keras
    then defines its scikit-learn wrappers without scikit-learn); after, they import
    as usual. For a tool's own process only (`startup.start_tool`)."""
    blocked = [name for name in UNUSED_BY_TOOLS if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # the import system's "not importable here"
    try:
        yield
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def wants_quiet_import() -> bool:
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() == "3"


def import_tensorflow_quietly() -> None:
    """`import tensorflow, keras` with file descriptor 2 captured (see the module)."""
    _import_tensorflow_capturing(show=False)


def import_tensorflow_logged_once() -> None:
    """`import tensorflow, keras`, its C++ start-up lines shown once: TensorFlow's two
    native libraries each print the same block as they load ("oneDNN custom operations
    are on", "Could not find cuda drivers", ...), so a tool whose user asked for the
    C++ logs (`TF_CPP_MIN_LOG_LEVEL` below 3) printed it twice. The lines are captured
    and written once each (the same message at another time is the same line)."""
    _import_tensorflow_capturing(show=True)


# glog's prefix: severity, date, time, thread id (the message follows).
_GLOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ")


def once_each(text: str) -> str:
    """`text` with every line whose message (after glog's prefix) came before dropped."""
    seen, kept = set(), []
    for line in text.splitlines(keepends=True):
        message = _GLOG_PREFIX.sub("", line).strip()
        if message and message in seen:
            continue
        seen.add(message)
        kept.append(line)
    return "".join(kept)


def _import_tensorflow_capturing(*, show: bool) -> None:
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    failed = False
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import keras  # noqa: F401
            import tensorflow  # noqa: F401
        except BaseException:
            failed = True
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if failed or show:
                captured.seek(0)
                text = captured.read().decode("utf-8", "replace")
                sys.stderr.write(once_each(text) if show else text)
                sys.stderr.flush()
