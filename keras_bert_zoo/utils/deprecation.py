"""Names that moved or were renamed keep working for one release, with a warning.

Every deprecated name of this release (a moved module-level name, `moved_names`; a
renamed config field, `RenamedFields`; a renamed flag, `utils.settings.setting(...,
old_names=...)`) is removed in the next one: `REMOVAL` says which and when, in every
warning.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

# This release is setup.py's 0.1.0; its deprecated names go in the next one.
REMOVAL_RELEASE = "0.2.0"
REMOVAL_DATE = "2027-06-01"
REMOVAL = f"the next release ({REMOVAL_RELEASE}, {REMOVAL_DATE})"


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
                        f"will be removed in {REMOVAL}",
                        DeprecationWarning,
                        stacklevel=2,
                    )
                    return getattr(module, new_name)
        raise AttributeError(f"module {old_module!r} has no attribute {name!r}")

    return __getattr__


@dataclasses.dataclass(frozen=True)
class SwitchedField:
    """A boolean field that became two values of another (`RenamedFields`): `old=True`
    is `field=on`, `old=False` is `field=off`, and `config.old` reads `field == on`."""

    field: str
    on: Any
    off: Any


class RenamedFields(type):
    """The metaclass of a dataclass some of whose fields were renamed: `Config(old=...)`
    and `config.old` keep working for one release, with a `DeprecationWarning`.

    The class lists `RENAMED_FIELDS = {old name: new name}` (or `{old name:
    SwitchedField(...)}` for a boolean that became values of another field), merged
    with its bases'; the old names are no fields (`dataclasses.fields`, `replace`,
    `asdict` know only the new ones), so only a caller that writes an old name is
    warned.

    Example:

    ```python
    @dataclasses.dataclass
    class Options(metaclass=RenamedFields):
        RENAMED_FIELDS: ClassVar = {"export_formats": "checkpoint_layouts"}
        checkpoint_layouts: tuple[str, ...] = ()


    Options(export_formats=("google",)).checkpoint_layouts  # ("google",), and a warning
    ```
    """

    RENAMED_FIELDS: ClassVar[Mapping[str, str]] = {}

    def __new__(mcs, name, bases, namespace, **kwargs):
        own = dict(namespace.get("RENAMED_FIELDS", {}))
        inherited = {}
        for base in reversed(bases):
            inherited.update(getattr(base, "RENAMED_FIELDS", {}))
        namespace["RENAMED_FIELDS"] = {**inherited, **own}
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        for old, new in own.items():
            if isinstance(new, SwitchedField):
                setattr(cls, old, _switched_attribute(old, new))
            else:
                setattr(cls, old, _renamed_attribute(old, new))
        return cls

    def __call__(cls, *args: Any, **kwargs: Any):
        for old, new in cls.RENAMED_FIELDS.items():
            if old in kwargs:
                field = new.field if isinstance(new, SwitchedField) else new
                if field in kwargs:
                    raise TypeError(f"{cls.__name__}() got both {old}= and its new name {field}=")
                value = kwargs.pop(old)
                if isinstance(new, SwitchedField):
                    _warn_switched(cls.__name__, old, new, stacklevel=3)
                    value = new.on if value else new.off
                else:
                    _warn_renamed(cls.__name__, old, new, stacklevel=3)
                kwargs[field] = value
        return super().__call__(*args, **kwargs)


def _warn_renamed(owner: str, old: str, new: str, stacklevel: int) -> None:
    warnings.warn(
        f"{owner}.{old} is {new} now; the old name will be removed in {REMOVAL}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def _warn_switched(owner: str, old: str, new: SwitchedField, stacklevel: int) -> None:
    warnings.warn(
        f"{owner}.{old} is {new.field} now ({old}=True: {new.field}={new.on!r}, False: "
        f"{new.off!r}); the old name will be removed in {REMOVAL}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def _switched_attribute(old: str, new: SwitchedField) -> property:
    """`obj.old` reads `obj.field == on` and writes `on` or `off`, warning."""

    def get(self):
        _warn_switched(type(self).__name__, old, new, stacklevel=3)
        return getattr(self, new.field) == new.on

    def set_(self, value):
        _warn_switched(type(self).__name__, old, new, stacklevel=3)
        setattr(self, new.field, new.on if value else new.off)

    return property(get, set_, doc=f"Deprecated: `{new.field} == {new.on!r}`.")


def _renamed_attribute(old: str, new: str) -> property:
    """`obj.old` reads and writes `obj.new`, warning."""

    def get(self):
        _warn_renamed(type(self).__name__, old, new, stacklevel=3)
        return getattr(self, new)

    def set_(self, value):
        _warn_renamed(type(self).__name__, old, new, stacklevel=3)
        setattr(self, new, value)

    return property(get, set_, doc=f"Deprecated: the old name of `{new}`.")
