"""How this copy of the package was installed: from a clone, or from a wheel.

Messages that tell a user what to install or run depend on it: in a clone (an editable
install, or the repository on the path) `pip install -e ".[demo]"` installs an extra;
from a wheel there is no setup.py in the current directory, and the same extra is
`pip install "keras_bert_zoo[demo]"`.
"""

from __future__ import annotations

import functools
import os

DISTRIBUTION = "keras_bert_zoo"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.cache
def from_source_tree() -> bool:
    """Whether the package runs from a source tree (its directory sits beside the
    repository's setup.py and tools/), not from an installed wheel."""
    root = os.path.dirname(_PACKAGE_DIR)
    return os.path.isfile(os.path.join(root, "setup.py")) and os.path.isdir(
        os.path.join(root, "tools")
    )


def install_extra_command(extra: str) -> str:
    """The command that installs one of the package's extras (`demo`, `onnx`, ...)."""
    if from_source_tree():
        return f'pip install -e ".[{extra}]"'
    return f'pip install "{DISTRIBUTION}[{extra}]"'
