"""Deprecated aliases: the fine-tuning runner moved to `keras_bert_zoo.runners`.

`keras_bert_zoo.tasks.finetuning.X` still works for one release and warns: the job
(`run_finetuning`, `FinetuningConfig`, its flags and run-directory helpers) is now
`keras_bert_zoo.runners.finetuning`, the main job (`run_demo`, `demo_config`, ...)
`keras_bert_zoo.runners.demo`. See the API-changes table (docs/api-changes.md). The names resolve
by module name, when asked for, so that `tasks/` never imports the floor above it.
"""

from keras_bert_zoo.utils.deprecation import moved_names

__getattr__ = moved_names(
    __name__, ["keras_bert_zoo.runners.finetuning", "keras_bert_zoo.runners.demo"]
)
