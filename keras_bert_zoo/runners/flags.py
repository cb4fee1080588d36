"""The flags every job's binary shares the shape of: one flag per config field, with
the job's default, and the `--export_formats` flag."""

from __future__ import annotations

from typing import Any

from keras_bert_zoo.runners.run_dir import EXPORT_FORMATS


def define_training_flags(flag_values, defaults) -> None:
    """The training core's flags (`training.flags`), with the defaults of the job's
    config `defaults`."""
    from keras_bert_zoo.training import flags as training_flags

    training_flags.define_flags(flag_values, **training_flags.flag_defaults(defaults))


def define_field_flag(flag_values, defaults, kind: str, name: str, help_text: str, **kwargs):
    """`DEFINE_<kind>(name, default=defaults.<name>, ...)` unless `name` is defined."""
    from absl import flags

    if name in flag_values:
        return
    getattr(flags, f"DEFINE_{kind}")(
        name=name,
        default=getattr(defaults, name),
        help=help_text,
        flag_values=flag_values,
        **kwargs,
    )


def define_export_formats_flag(flag_values, help_text: str) -> None:
    """`--export_formats`: the checkpoint layouts a run writes, repeatable."""
    from absl import flags

    if "export_formats" not in flag_values:
        flags.DEFINE_multi_enum(
            "export_formats",
            list(EXPORT_FORMATS),
            list(EXPORT_FORMATS),
            help_text + " Repeat the flag for several.",
            flag_values=flag_values,
        )


def field_values(flag_values, names) -> dict[str, Any]:
    """`{name: value}` of the flags `names`."""
    return {name: flag_values[name].value for name in names}
