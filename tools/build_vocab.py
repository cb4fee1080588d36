"""Learns a BERT WordPiece vocab.txt from text files and MediaWiki dumps.

The input is read as tools/create_pretraining_data.py reads it, with the same readers:
text files (one sentence or paragraph a line) and MediaWiki XML dumps (articles only,
markup stripped, sentences split), bz2/gzip/xz-compressed or not, UTF-8 or UTF-16 with a
byte-order mark, all detected by content.

Usage: python tools/build_vocab.py --input_files='corpus/*.txt,enwiki-*.xml.bz2' \
    --output_vocab=vocab.txt --vocab_size=30522 [--lowercase|--nolowercase]

All logic lives in keras_bert_zoo.pretraining.vocabulary (reading) and
keras_bert_zoo.text.vocab (learning, writing); the file is written atomically.
"""

from keras_bert_zoo.utils import startup

# Before TensorFlow loads: the command line checked (keras_bert_zoo/utils/startup.py).
startup.start_tool(__file__)

from absl import app, flags  # noqa: E402

from keras_bert_zoo.pretraining import vocabulary  # noqa: E402
from keras_bert_zoo.text import vocab as vocab_lib  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_INPUT_FILES = flags.DEFINE_string(
    "input_files",
    None,
    "Comma-separated globs of text files and MediaWiki XML dumps (.xml, .xml.bz2), "
    "compressed or not: read as create_pretraining_data reads them.",
)
_OUTPUT_VOCAB = flags.DEFINE_string("output_vocab", None, "Path of the vocab.txt to write.")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", 30522, "Maximum vocabulary size, reserved tokens included."
)
_LOWERCASE = flags.DEFINE_bool(
    "lowercase",
    True,
    "Learn an uncased vocabulary (lower-case, strip accents: Той -> тои); --nolowercase "
    "keeps case and accents.",
)
_RESERVED = flags.DEFINE_list(
    "reserved_tokens", list(vocab_lib.DEFAULT_RESERVED_TOKENS), "Tokens placed first, in order."
)
flags.mark_flags_as_required(["input_files", "output_vocab"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    learned = vocabulary.learn_vocabulary(
        _INPUT_FILES.value,
        vocab_size=_VOCAB_SIZE.value,
        lowercase=_LOWERCASE.value,
        reserved_tokens=_RESERVED.value,
    )
    vocab_lib.write_vocab(_OUTPUT_VOCAB.value, learned.tokens)
    print(learned.summary(_OUTPUT_VOCAB.value))


def run():
    """The console script `keras-bert-zoo-build-vocab`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
