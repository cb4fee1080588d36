"""Importing TensorFlow quietly when TensorFlow's C++ logs are turned off.

`TF_CPP_MIN_LOG_LEVEL=3` asks TensorFlow for no C++ log line, but its native libraries
print several as they load ("oneDNN custom operations are on", "Could not find cuda
drivers", absl's "All log messages before absl::InitializeLog()"), before the setting
is read. With that setting (the tools' default), the package's first import of
TensorFlow runs with the process's stderr captured; if the import fails, what was
captured is written out before the error, so nothing of a broken install is hidden.
"""

from __future__ import annotations

import os
import sys
import tempfile


def wants_quiet_import() -> bool:
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() == "3"


def import_tensorflow_quietly() -> None:
    """`import tensorflow, keras` with file descriptor 2 captured (see the module)."""
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import keras  # noqa: F401
            import tensorflow  # noqa: F401
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
