"""Sentence and sentence-pair tasks: the nine GLUE tasks and `text_classification`.

Registered names: `glue/cola`, `glue/sst2`, `glue/mrpc`, `glue/stsb`, `glue/qqp`,
`glue/mnli` (with the diagnostic set AX), `glue/qnli`, `glue/rte`, `glue/wnli`,
`text_classification`.

The pieces: `task` (`SentenceTask`, what every sentence task shares) and its concepts
`examples`, `options` (long documents), `features`, `windows` (long documents cut into
windows), `answers`, `evaluation`, `metrics`, `multi_label`, `prediction_files` and
`serving`; the readers (`readers`, `scores`); the tasks: `glue` and
`text_classification` (with `text_classification_options`,
`text_classification_files` and `heldout`).
"""

from keras_bert_zoo.tasks.sentence import metrics
from keras_bert_zoo.tasks.sentence.answers import SentenceAnswer
from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.tasks.sentence.glue import GLUE_TASK_NAMES, GlueFileLayout, GlueTask
from keras_bert_zoo.tasks.sentence.readers import InputFileError
from keras_bert_zoo.tasks.sentence.task import SentenceTask
from keras_bert_zoo.tasks.sentence.text_classification import TextClassificationTask

__all__ = [
    "GLUE_TASK_NAMES",
    "GlueFileLayout",
    "GlueTask",
    "InputFileError",
    "SentenceAnswer",
    "SentenceExample",
    "SentenceTask",
    "TextClassificationTask",
    "metrics",
]
