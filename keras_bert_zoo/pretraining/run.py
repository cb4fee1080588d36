"""Deprecated aliases: the pretraining runner moved to `keras_bert_zoo.runners.pretraining`.

`keras_bert_zoo.pretraining.run.X` (`run_pretraining`, `PretrainingConfig`, ...) still
works for one release and warns; `pretraining/` now holds data creation only. See the
API-changes table (docs/api-changes.md). The names resolve by module name, when asked for, so that
`pretraining/` never imports the floor above it.
"""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    ["keras_bert_zoo.runners.pretraining"],
    renamed={"is_run_dir": ("keras_bert_zoo.runners.sources", "is_pretraining_run_dir")},
)
