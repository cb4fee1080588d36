"""Deprecated: the task contract moved to modules of one concept each (`_HOMES`):
`tasks.task` (the contract), `tasks.servable` (its serving half), `tasks.distillation`
(its distillation half), `tasks.registry`, `tasks.datasets` (the tf.data glue) and
`tasks.prediction` (the prediction engine).

The old names keep working for one release, with a `DeprecationWarning`; the package
itself imports the new modules.
"""

from keras_bert_zoo.utils.deprecation import moved_names

_HOMES = {
    "keras_bert_zoo.tasks.task": ("Task", "TaskOption", "TASK_DESCRIPTION_FORMAT_VERSION"),
    "keras_bert_zoo.tasks.servable": (
        "Servable",
        "ServingApi",
        "CLASSIFY_API",
        "REGRESS_API",
        "PROBABILITIES_ANSWER",
        "SCORE_ANSWER",
        "SERVING_API_ANSWERS",
    ),
    "keras_bert_zoo.tasks.distillation": (
        "SoftTargetKind",
        "SOFT_CLASSES",
        "SOFT_LABELS",
        "SOFT_SCORE",
        "SOFT_POSITIONS",
        "SOFT_TOKEN_CLASSES",
        "SOFT_TARGET_KINDS",
        "TRANSFER_EXAMPLE_ID",
    ),
    "keras_bert_zoo.tasks.registry": (
        "register_task",
        "list_tasks",
        "get_task_class",
        "create_task",
        "all_task_options",
    ),
    "keras_bert_zoo.tasks.datasets": ("batched_dataset", "training_dataset_fn"),
    "keras_bert_zoo.tasks.prediction": ("outputs_by_batch", "predict_raw", "predict"),
}
__getattr__ = moved_names(
    __name__,
    [],
    renamed={name: (home, name) for home, names in _HOMES.items() for name in names},
)
