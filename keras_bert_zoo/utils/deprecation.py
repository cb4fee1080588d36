"""Names that moved to another module keep working for one release, with a warning."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence


def moved_names(
    old_module: str,
    new_modules: Sequence[str],
    *,
    only: Sequence[str] | None = None,
    renamed: Mapping[str, tuple[str, str]] | None = None,
) -> Callable[[str], object]:
    """A module-level `__getattr__` that forwards the public names of `old_module` to
    the first of `new_modules` that has them, warning with a `DeprecationWarning`.

    The new modules are imported by name when a name is first asked for, so a module of
    a lower floor can alias names of a higher one without importing it.

    Args:
        old_module: the module's `__name__`, for the messages.
        new_modules: where the names live now, searched in order.
        only: the names that moved (default: any public name the new modules have).
        renamed: `{old name: (module, new name)}` for names that changed too.

    Example:

    ```python
    __getattr__ = moved_names(__name__, ["keras_bert_zoo.runners.finetuning"])
    ```
    """
    renamed = dict(renamed or {})

    def __getattr__(name: str):
        if not name.startswith("_") and (only is None or name in only or name in renamed):
            homes = [renamed[name]] if name in renamed else [(m, name) for m in new_modules]
            for module_name, new_name in homes:
                module = importlib.import_module(module_name)
                if hasattr(module, new_name):
                    warnings.warn(
                        f"{old_module}.{name} moved to {module_name}.{new_name}; the old name "
                        "will be removed in the next release",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    return getattr(module, new_name)
        raise AttributeError(f"module {old_module!r} has no attribute {name!r}")

    return __getattr__
