"""Deprecated aliases: the fine-tuning runner moved to `keras_bert_zoo.runners`.

`keras_bert_zoo.tasks.finetuning.X` still works for one release and warns: the job
(`run_finetuning`, `FinetuningConfig`, its flags and run-directory helpers) is now
`keras_bert_zoo.runners.finetuning`, the main job (`run_demo`, `demo_config`, ...)
`keras_bert_zoo.runners.demo`. See the README's API-changes table.

The names resolve lazily, by module name, so that `tasks/` never imports the floor
above it (`runners/` imports `tasks/`).
"""

import importlib
import warnings

_NEW_HOMES = ("keras_bert_zoo.runners.finetuning", "keras_bert_zoo.runners.demo")


def __getattr__(name: str):
    if not name.startswith("_"):
        for home in _NEW_HOMES:
            module = importlib.import_module(home)
            if hasattr(module, name):
                warnings.warn(
                    f"keras_bert_zoo.tasks.finetuning.{name} moved to {home}.{name}; the old "
                    "name will be removed in the next release",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
