"""Deprecated aliases: the pretraining runner moved to `keras_bert_zoo.runners.pretraining`.

`keras_bert_zoo.pretraining.run.X` (`run_pretraining`, `PretrainingConfig`, ...) still
works for one release and warns; `pretraining/` now holds data creation only. See the
README's API-changes table. The names resolve lazily, by module name, so that
`pretraining/` never imports the floor above it.
"""

import importlib
import warnings

_NEW_HOME = "keras_bert_zoo.runners.pretraining"
_RENAMED = {"is_run_dir": ("keras_bert_zoo.runners.sources", "is_pretraining_run_dir")}


def __getattr__(name: str):
    home, new_name = _RENAMED.get(name, (_NEW_HOME, name))
    if not name.startswith("_"):
        module = importlib.import_module(home)
        if hasattr(module, new_name):
            warnings.warn(
                f"keras_bert_zoo.pretraining.run.{name} moved to {home}.{new_name}; the old "
                "name will be removed in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(module, new_name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
