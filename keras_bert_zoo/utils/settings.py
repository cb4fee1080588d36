"""Settings declared once: the fields of a job's config dataclass are its binary's flags.

A config field made with `setting(default, help=..., choices=..., lower_bound=...)`
carries its flag in the field's metadata. `define_flags(Config)` defines one absl flag
per such field: its kind from the field's type (`bool`, `int`, `float`, `str`, a
`tuple[str, ...]` with choices is a repeatable enum), its default from the class, its
help, choices and bounds from the metadata. `flag_values_of(Config, flags)` reads the
parsed values back as the config's keywords. So the dataclass is the one place a
setting is written: its flag, `--helpfull` and the README's flag lists come from it.

A subclass that only changes a default redeclares the field as a plain
`name: type = value`; the help is found on the base class that declared it with
`setting` (the dataclass's fields are searched along the MRO).

Each setting also says whether it changes what a run learns (`affects_result=True`: the
learning rate, the data, the seed, ...) or not (`False`: logging, checkpoint cadence,
evaluation files, ...). A rerun into the same output directory must agree with the
directory's run on every setting of the first kind (`result_settings`); a setting left
unclassified is found by `unclassified_settings` (a test keeps that list empty).

A renamed setting keeps its old flag name for one release: `setting(...,
old_names=("export_formats",))` defines `--export_formats` as an alias of the field's
flag; a command line that uses it gets one warning line saying it will be removed
(`utils.deprecation.REMOVAL`). A boolean setting that became values of another keeps
its switch the same way: `setting(..., old_switches={"packed_sequences": ("packed",
"padded")})` on `batching` makes `--packed_sequences` mean `--batching=packed` and
`--nopacked_sequences` `--batching=padded`, for one release.

Example:

```python
@dataclasses.dataclass
class Options:
    steps: int = setting(100, help="Optimizer steps.", lower_bound=1)
    mode: str = setting("train", help="What to run.", choices=("train", "eval"))


@dataclasses.dataclass
class LongerOptions(Options):
    steps: int = 1000  # same flag and help, another default


define_flags(LongerOptions, flags.FLAGS)
config = LongerOptions(**flag_values_of(LongerOptions, flags.FLAGS))
```
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from keras_bert_zoo.utils.deprecation import REMOVAL
from keras_bert_zoo.utils.errors import UserError

logger = logging.getLogger(__name__)

HELP = "help"
CHOICES = "choices"
LOWER_BOUND = "lower_bound"
IS_FLAG = "flag"
OLD_NAMES = "old_names"
OLD_SWITCHES = "old_switches"
AFFECTS_RESULT = "affects_result"

# The deprecated flag names a command line used and was warned about: once a process.
_warned_old_names: set[str] = set()


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    choices: Iterable[str] | None = None,
    lower_bound: float | None = None,
    flag: bool = True,
    default_factory: Any = dataclasses.MISSING,
    old_names: Iterable[str] = (),
    old_switches: Mapping[str, tuple[Any, Any]] | None = None,
    affects_result: bool | None = None,
) -> Any:
    """A dataclass field that declares its command-line flag.

    Args:
        default: the field's (and the flag's) default.
        help: the flag's help text.
        choices: the allowed values (an enum flag; repeatable for a tuple field).
        lower_bound: the smallest allowed value of a number flag.
        flag: False for a field that is a setting but no flag of its own (e.g. a
            dict gathered from other flags).
        default_factory: as `dataclasses.field`'s.
        old_names: the flag's deprecated names, aliases of it for one release.
        old_switches: `{deprecated boolean flag: (value given by --flag, value given by
            --noflag)}`: switches that set this flag, for one release.
        affects_result: whether a different value trains a different model (a rerun
            into the same output directory must then have the same value); False for
            what only shows, schedules or places the work. None: not classified yet.
    """
    metadata = {
        HELP: help,
        CHOICES: tuple(choices) if choices is not None else None,
        LOWER_BOUND: lower_bound,
        IS_FLAG: flag,
        OLD_NAMES: tuple(old_names),
        OLD_SWITCHES: dict(old_switches or {}),
        AFFECTS_RESULT: affects_result,
    }
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def field_metadata(config_class: type, name: str) -> Mapping[str, Any]:
    """The `setting` metadata of field `name`: the nearest class of the MRO that
    declared it with `setting` (a redeclared default keeps its base's help)."""
    for klass in config_class.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and HELP in field.metadata:
            return field.metadata
    return {}


def flag_names(config_class: type) -> list[str]:
    """The fields of `config_class` that are flags, in declaration order."""
    return [
        field.name
        for field in dataclasses.fields(config_class)
        if field_metadata(config_class, field.name).get(IS_FLAG, False)
    ]


def result_settings(config_class: type) -> list[str]:
    """The fields of `config_class` that change what a run learns
    (`setting(affects_result=True)`), in declaration order."""
    return [
        field.name
        for field in dataclasses.fields(config_class)
        if field_metadata(config_class, field.name).get(AFFECTS_RESULT) is True
    ]


def unclassified_settings(config_class: type) -> list[str]:
    """The fields of `config_class` that do not say whether they change what a run
    learns (`setting(affects_result=None)`, or no `setting` at all)."""
    return [
        field.name
        for field in dataclasses.fields(config_class)
        if field_metadata(config_class, field.name).get(AFFECTS_RESULT) not in (True, False)
    ]


def old_flag_names(config_class: type) -> dict[str, str]:
    """`{deprecated flag name: the flag it is an alias of}` of `config_class`'s flags
    (old names and old switches)."""
    return {
        old: name
        for name in flag_names(config_class)
        for old in (
            *field_metadata(config_class, name).get(OLD_NAMES, ()),
            *field_metadata(config_class, name).get(OLD_SWITCHES, {}),
        )
    }


def _old_switches(config_class: type) -> dict[str, tuple[str, tuple[Any, Any]]]:
    """`{deprecated switch: (the flag it sets, (its value, its --no value))}`."""
    return {
        old: (name, tuple(values))
        for name in flag_names(config_class)
        for old, values in field_metadata(config_class, name).get(OLD_SWITCHES, {}).items()
    }


def field_default(config_class: type, name: str) -> Any:
    field = config_class.__dataclass_fields__[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None if field.default is dataclasses.MISSING else field.default


def _flag_kind(annotation: Any, choices) -> str:
    """The absl `DEFINE_<kind>` of a field's type."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"A flag needs one type besides None, got {annotation}")
        annotation = kinds[0]
    origin = typing.get_origin(annotation)
    if origin in (tuple, list):
        return "multi_enum" if choices else "multi_string"
    if choices:
        return "enum"
    kinds = {bool: "bool", int: "integer", float: "float", str: "string"}
    if annotation not in kinds:
        raise TypeError(f"No flag kind for a field of type {annotation}")
    return kinds[annotation]


def define_once(flag_values, kind: str, name: str, default: Any, help_text: str, **kwargs):
    """`absl.flags.DEFINE_<kind>(name, ...)` in `flag_values`, unless a flag of that name
    is already defined there (a binary may define a shared flag first, and tests define
    the same flags twice)."""
    from absl import flags

    if name in flag_values:
        return
    getattr(flags, f"DEFINE_{kind}")(
        name=name, default=default, help=help_text, flag_values=flag_values, **kwargs
    )


def define_flags(
    config_class: type,
    flag_values=None,
    *,
    defaults: Mapping[str, Any] | None = None,
    exclude: Iterable[str] = (),
) -> None:
    """One flag per `setting` field of the dataclass `config_class` (see the module
    docstring), with the class's defaults (or `defaults[name]`); flags already defined
    are left as they are."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    hints = typing.get_type_hints(config_class)
    excluded = set(exclude)
    for name in flag_names(config_class):
        if name in excluded:
            continue
        metadata = field_metadata(config_class, name)
        choices = metadata.get(CHOICES)
        kind = _flag_kind(hints[name], choices)
        default = (defaults or {}).get(name, field_default(config_class, name))
        kwargs: dict[str, Any] = {}
        if kind in ("enum", "multi_enum"):
            kwargs["enum_values"] = list(choices)
        if metadata.get(LOWER_BOUND) is not None:
            kwargs["lower_bound"] = metadata[LOWER_BOUND]
        if kind.startswith("multi_") and default is not None:
            default = list(default)
        define_once(flag_values, kind, name, default, metadata[HELP], **kwargs)
        for old_name in metadata.get(OLD_NAMES, ()):
            _define_old_name(flag_values, old_name, name)
        for old_name, values in metadata.get(OLD_SWITCHES, {}).items():
            _define_old_switch(flag_values, old_name, name, values)


def _define_old_name(flag_values, old_name: str, name: str) -> None:
    """`--old_name` as an alias of `--name`: absl parses it into `name`'s flag."""
    from absl import flags

    if old_name in flag_values:
        return
    flags.DEFINE_alias(old_name, name, flag_values=flag_values)
    alias = flag_values[old_name]
    alias.help = f"Deprecated: the old name of --{name}, removed in {REMOVAL}. Alias for --{name}."


def _define_old_switch(flag_values, old_name: str, name: str, values) -> None:
    """`--old_name` / `--noold_name`: a boolean flag that sets `--name` to `values[0]` /
    `values[1]` (`flag_values_of` reads it)."""
    from absl import flags

    if old_name in flag_values:
        return
    on, off = values
    flags.DEFINE_bool(
        old_name,
        None,
        f"Deprecated: --{old_name} is --{name}={on} (--no{old_name}: --{name}={off}), "
        f"removed in {REMOVAL}.",
        flag_values=flag_values,
    )


def _switched_name(old_name: str, name: str, switch) -> str:
    if switch is None:
        return f"--{name}"
    on, off = switch[1]
    return f"--{name}={on} (--no{old_name}: --{name}={off})"


def _warn_of_old_names(config_class: type, flag_values) -> None:
    """One warning line per deprecated flag name the command line used."""
    switches = _old_switches(config_class)
    for old_name, name in old_flag_names(config_class).items():
        used = old_name in flag_values and flag_values[old_name].present
        if used and old_name not in _warned_old_names:
            _warned_old_names.add(old_name)
            logger.warning(
                "--%s is deprecated: it is %s now; the old name will be removed in %s",
                old_name,
                _switched_name(old_name, name, switches.get(old_name)),
                REMOVAL,
            )


def _apply_old_switches(config_class: type, flag_values, values: dict[str, Any]) -> None:
    """The values the deprecated switches given on the command line set (a switch and
    its flag given with other values is an error)."""
    for old_name, (name, (on, off)) in _old_switches(config_class).items():
        if old_name not in flag_values or not flag_values[old_name].present:
            continue
        value = on if flag_values[old_name].value else off
        given = name in flag_values and flag_values[name].present
        if given and flag_values[name].value != value:
            raise UserError(
                f"--{'' if value == on else 'no'}{old_name} means --{name}={value}, but "
                f"--{name}={flag_values[name].value} is given too; pass only --{name}"
            )
        values[name] = value


def flag_values_of(
    config_class: type, flag_values=None, *, given_only: bool = False
) -> dict[str, Any]:
    """`{field: value}` of `config_class`'s flags in parsed `flag_values` (with
    `given_only`, only those given on the command line). Repeatable flags come back as
    tuples, as the fields hold them."""
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    _warn_of_old_names(config_class, flag_values)
    values: dict[str, Any] = {}
    for name in flag_names(config_class):
        if name not in flag_values or (given_only and not flag_values[name].present):
            continue
        value = flag_values[name].value
        values[name] = tuple(value) if isinstance(value, list) else value
    _apply_old_switches(config_class, flag_values, values)
    return values


def define_value_flag(
    flag_values, name: str, default: Any, help_text: str, choices: Iterable[str] | None = None
) -> None:
    """A flag whose kind is read from its default's type (an enum with `choices`), for
    settings declared outside a dataclass (a task's options)."""
    if choices is not None:
        define_once(flag_values, "enum", name, default, help_text, enum_values=list(choices))
        return
    kinds = {bool: "bool", int: "integer", float: "float"}
    define_once(flag_values, kinds.get(type(default), "string"), name, default, help_text)


def check_values(config) -> None:
    """Refuses a value of a `setting` field outside its choices or below its bound, in a
    config made in Python as on the command line (where absl checks them); the message
    names the field."""
    for name in flag_names(type(config)):
        metadata, value = field_metadata(type(config), name), getattr(config, name)
        choices, lowest = metadata.get(CHOICES), metadata.get(LOWER_BOUND)
        values = value if isinstance(value, tuple | list) else (value,)
        if choices and any(isinstance(v, str) and v not in choices for v in values):
            raise UserError(f"{name} must be one of {choices}, got {value!r}")
        if lowest is not None and value is not None and value < lowest:
            raise UserError(f"{name} must be >= {lowest}, got {value}")
