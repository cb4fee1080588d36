"""Deprecated: the shared training settings are `training.options.TrainingOptions`.

One settings idiom: a dataclass whose fields are the flags (`utils.settings` defines
them in the binaries), with the methods that read them. What this module held keeps
working for one release, with a `DeprecationWarning`:

- `TrainingOptions`, `DTYPE_POLICIES`: in `training.options`;
- `TrainingFlags`: `TrainingOptions` (`output_dir` is its field, `init_checkpoint` each
  job's config's);
- `define_flags(flag_values, **defaults)`: `utils.settings.define_flags(TrainingOptions,
  flag_values, defaults=defaults)`;
- `setup(values)`: `options.setup()`; `dtype_policy(values, strategy)`:
  `options.resolved_dtype_policy(strategy)`; `optimizer_config(values)`:
  `options.optimizer_config()`; `trainer_kwargs(values)`: `options.trainer_settings()`.

The old functions read parsed absl flags or any config with the fields (absl's
`FLAGS` when given nothing, as before); `trainer_kwargs` no longer has
`packed_sequences` (packing is the job's: `runners.runner.Job.loss_fn`).
"""

from __future__ import annotations

import dataclasses
import warnings

from keras_bert_zoo.training import options as _options
from keras_bert_zoo.utils import settings
from keras_bert_zoo.utils.deprecation import REMOVAL, moved_names

_OPTIONS = "keras_bert_zoo.training.options"
_moved = moved_names(
    __name__,
    [_OPTIONS],
    only=("TrainingOptions", "DTYPE_POLICIES"),
    renamed={"TrainingFlags": (_OPTIONS, "TrainingOptions")},
)


def _options_of(values):
    """`values` (a `TrainingOptions`, parsed absl flags, any object with the fields, or
    None for absl's `FLAGS`) as a `TrainingOptions`."""
    if isinstance(values, _options.TrainingOptions):
        return values
    if values is None:
        return _options.TrainingOptions(**settings.flag_values_of(_options.TrainingOptions))
    names = [field.name for field in dataclasses.fields(_options.TrainingOptions)]
    return _options.TrainingOptions(**{name: getattr(values, name) for name in names})


def _define_flags(flag_values=None, **defaults) -> None:
    unknown = set(defaults) - set(settings.flag_names(_options.TrainingOptions))
    if unknown:
        raise ValueError(f"No shared training flag(s) named {sorted(unknown)}")
    settings.define_flags(_options.TrainingOptions, flag_values, defaults=defaults)


def _setup(flag_values=None):
    return _options_of(flag_values).setup()


def _dtype_policy(flag_values=None, strategy=None) -> str:
    return _options_of(flag_values).resolved_dtype_policy(strategy)


def _optimizer_config(flag_values=None):
    return _options_of(flag_values).optimizer_config()


def _trainer_kwargs(flag_values=None) -> dict:
    return _options_of(flag_values).trainer_settings()


# The old functions, and what each one is now.
_FUNCTIONS = {
    "define_flags": (_define_flags, "utils.settings.define_flags(TrainingOptions, ...)"),
    "setup": (_setup, "TrainingOptions.setup()"),
    "dtype_policy": (_dtype_policy, "TrainingOptions.resolved_dtype_policy(strategy)"),
    "optimizer_config": (_optimizer_config, "TrainingOptions.optimizer_config()"),
    "trainer_kwargs": (_trainer_kwargs, "TrainingOptions.trainer_settings()"),
}


def __getattr__(name: str):
    if name in _FUNCTIONS:
        function, new = _FUNCTIONS[name]
        warnings.warn(
            f"{__name__}.{name} is {new}; the old name will be removed in {REMOVAL}",
            DeprecationWarning,
            stacklevel=2,
        )
        return function
    return _moved(name)
