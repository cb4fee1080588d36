"""Token tagging: CoNLL-2003 NER (`conll2003`) and any CoNLL-like column file
(`token_classification`).

Registers `token_classification` and `conll2003`. The pieces: `preprocessor`
(`split_words` and `TaggingPreprocessor`: words -> windows of WordPieces, each word
read in one window), `reader` (the CoNLL column files), `metrics` (conlleval's entity
F1 and the word accuracy of the progress bars), `spans` (words and entities from the
logits, in TF ops, for the exported model), `task` (`TokenClassificationTask`: the
settings, the tag set, the data and the state) with its concepts `options`, `features`
(labelled windows), `answers` (a tag per word), `prediction_file` (conlleval's input)
and `serving` (the exported answers), `conll2003` (`Conll2003Task`).

Each module's docstring has its example (`task.py`: the whole flow).
"""

from keras_bert_zoo.tasks.tagging import metrics
from keras_bert_zoo.tasks.tagging.conll2003 import CONLL2003_TAGS, Conll2003Task
from keras_bert_zoo.tasks.tagging.features import FEATURE_BATCH_SIZE
from keras_bert_zoo.tasks.tagging.metrics import IGNORED_LABEL, LabelledTokenAccuracy
from keras_bert_zoo.tasks.tagging.options import TAG_SCHEME_OPTION, WINDOW_STRIDE_OPTION
from keras_bert_zoo.tasks.tagging.preprocessor import TaggingPreprocessor, split_words
from keras_bert_zoo.tasks.tagging.reader import DOCUMENT_START, TaggedSentence, read_column_file
from keras_bert_zoo.tasks.tagging.spans import entity_spans, word_logits
from keras_bert_zoo.tasks.tagging.task import TokenClassificationTask

__all__ = [
    "CONLL2003_TAGS",
    "DOCUMENT_START",
    "FEATURE_BATCH_SIZE",
    "IGNORED_LABEL",
    "TAG_SCHEME_OPTION",
    "WINDOW_STRIDE_OPTION",
    "Conll2003Task",
    "LabelledTokenAccuracy",
    "TaggedSentence",
    "TaggingPreprocessor",
    "TokenClassificationTask",
    "entity_spans",
    "metrics",
    "read_column_file",
    "split_words",
    "word_logits",
]
