"""Multiple choice: SWAG (`swag`) and any JSON-lines choice data (`multiple_choice`).

Each example has a context and N candidate choices; each candidate is packed with the
context as a pair `[CLS] context [SEP] choice [SEP]` (BERT's SWAG setup: sentence A
is the context, sentence B a possible continuation), `BertMultipleChoice` scores the
N pairs and a softmax across them picks one. Metric: accuracy.

Registers `multiple_choice` and `swag`. The pieces: `reader` (examples, the official
SWAG CSV and JSON lines), `preprocessor` (`MultipleChoicePreprocessor`), `task`
(`MultipleChoiceTask`: answers, state, predictions, serving), `swag` (`SwagTask`).

Each module's docstring has its example (`task.py`: the whole flow).
"""

from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_zoo.tasks.multiple_choice.reader import (
    SWAG_ENDINGS,
    SWAG_NUM_CHOICES,
    MultipleChoiceExample,
    read_choice_jsonl,
    read_swag_csv,
)
from keras_bert_zoo.tasks.multiple_choice.swag import SwagTask
from keras_bert_zoo.tasks.multiple_choice.task import (
    FEATURE_BATCH_SIZE,
    ChoiceAnswer,
    MultipleChoiceTask,
)

__all__ = [
    "FEATURE_BATCH_SIZE",
    "SWAG_ENDINGS",
    "SWAG_NUM_CHOICES",
    "ChoiceAnswer",
    "MultipleChoiceExample",
    "MultipleChoicePreprocessor",
    "MultipleChoiceTask",
    "SwagTask",
    "read_choice_jsonl",
    "read_swag_csv",
]
