"""Text processing for BERT: WordPiece tokenization, segment packing, vocabularies."""

from keras_bert_zoo.text.packer import BertPacker
from keras_bert_zoo.text.preprocessor import BertPreprocessor
from keras_bert_zoo.text.tokenizer import BertTokenizer
from keras_bert_zoo.text.vocab import build_vocab, load_vocab, write_vocab

__all__ = [
    "BertPacker",
    "BertPreprocessor",
    "BertTokenizer",
    "build_vocab",
    "load_vocab",
    "write_vocab",
]
