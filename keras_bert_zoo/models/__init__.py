"""Functional Keras models: the encoder and one model per task head."""

from keras_bert_zoo.models.classifier import BertClassifier
from keras_bert_zoo.models.encoder import BertEncoder, encoder_inputs
from keras_bert_zoo.models.head_model import EncoderHeadModel, HeadCheckpointNames
from keras_bert_zoo.models.multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.padding_free import PaddingFreeEncoder
from keras_bert_zoo.models.pretrainer import BertPretrainer, pretraining_losses
from keras_bert_zoo.models.sentence_embedder import BertSentenceEmbedder, BertTextGroupEmbedder
from keras_bert_zoo.models.span_labeler import BertSpanLabeler
from keras_bert_zoo.models.token_classifier import BertTokenClassifier

__all__ = [
    "BertClassifier",
    "BertEncoder",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSentenceEmbedder",
    "BertSpanLabeler",
    "BertTextGroupEmbedder",
    "BertTokenClassifier",
    "EncoderHeadModel",
    "HeadCheckpointNames",
    "PaddingFreeEncoder",
    "encoder_inputs",
    "pretraining_losses",
]
