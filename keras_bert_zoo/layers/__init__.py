"""Keras layers of BERT: embeddings, attention, encoder block, heads and pooling."""

from keras_bert_zoo.layers.activations import ACTIVATION_NAMES, apply_activation
from keras_bert_zoo.layers.attention import BertSelfAttention
from keras_bert_zoo.layers.embeddings import BertEmbeddings
from keras_bert_zoo.layers.heads import ClassificationHead, MaskedLMHead, SpanHead
from keras_bert_zoo.layers.pooling import POOLING_MODES, SequencePooling
from keras_bert_zoo.layers.token_layout import TokenLayout
from keras_bert_zoo.layers.transformer import TransformerEncoderBlock

__all__ = [
    "ACTIVATION_NAMES",
    "BertEmbeddings",
    "BertSelfAttention",
    "ClassificationHead",
    "MaskedLMHead",
    "POOLING_MODES",
    "SequencePooling",
    "SpanHead",
    "TokenLayout",
    "TransformerEncoderBlock",
    "apply_activation",
]
