"""Fine-tuning tasks: one package per task family (`sentence`, `question_answering`,
`tagging`, `multiple_choice`, `sentence_embedding`), each the only place that knows its
data, its head, its metric and its answers (see `task.py` for the contract). The
helpers they share live in `_shared.py`; no family imports another's, but
`sentence_embedding` reads its TSV/CSV/JSONL files and options through `sentence`'s
readers and file options (one reader, one meaning of `--input_format`).

Importing this package registers every task family, so `create_task("glue/mrpc")` and
`list_tasks()` see them all.
"""

# Each family's import registers its tasks.
from keras_bert_zoo.tasks import (  # noqa: F401
    multiple_choice,  # SWAG, multiple_choice
    question_answering,  # SQuAD v1.1/v2.0, extractive_qa
    sentence,  # GLUE, text_classification
    sentence_embedding,  # sentence_embedding (bi-encoders)
    tagging,  # CoNLL-2003 NER, token_classification
)
from keras_bert_zoo.tasks.datasets import batched_dataset, training_dataset_fn
from keras_bert_zoo.tasks.prediction import predict, predict_raw
from keras_bert_zoo.tasks.registry import (
    all_task_options,
    create_task,
    get_task_class,
    list_tasks,
    register_task,
)
from keras_bert_zoo.tasks.saving import (
    FinetunedModel,
    load_finetuned,
    read_task_description,
    save_finetuned,
    task_from_description,
)
from keras_bert_zoo.tasks.servable import Servable
from keras_bert_zoo.tasks.task import Task, TaskOption

__all__ = [
    "FinetunedModel",
    "Servable",
    "Task",
    "TaskOption",
    "all_task_options",
    "batched_dataset",
    "create_task",
    "get_task_class",
    "list_tasks",
    "load_finetuned",
    "predict",
    "predict_raw",
    "read_task_description",
    "register_task",
    "save_finetuned",
    "task_from_description",
    "training_dataset_fn",
]
