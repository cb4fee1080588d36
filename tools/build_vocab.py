"""Learns a BERT WordPiece vocab.txt from UTF-8 text files (one sentence or paragraph a line).

Usage: python tools/build_vocab.py --input_files='corpus/*.txt' --output_vocab=vocab.txt \
    --vocab_size=30522 [--lowercase|--nolowercase]

All logic lives in keras_bert_zoo.text.vocab; the file is written atomically.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ logs: TF_CPP_MIN_LOG_LEVEL=0

from absl import app, flags  # noqa: E402

from keras_bert_zoo.text import vocab as vocab_lib  # noqa: E402
from keras_bert_zoo.utils import cli  # noqa: E402

_INPUT_FILES = flags.DEFINE_string(
    "input_files", None, "Glob of UTF-8 text files (several globs: comma-separated)."
)
_OUTPUT_VOCAB = flags.DEFINE_string("output_vocab", None, "Path of the vocab.txt to write.")
_VOCAB_SIZE = flags.DEFINE_integer(
    "vocab_size", 30522, "Maximum vocabulary size, reserved tokens included."
)
_LOWERCASE = flags.DEFINE_bool(
    "lowercase", True, "Learn an uncased vocabulary (lower-case, strip accents)."
)
_RESERVED = flags.DEFINE_list(
    "reserved_tokens", list(vocab_lib.DEFAULT_RESERVED_TOKENS), "Tokens placed first, in order."
)
flags.mark_flags_as_required(["input_files", "output_vocab"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    paths = vocab_lib.expand_globs(_INPUT_FILES.value)
    tokens = vocab_lib.build_vocab(
        vocab_lib.read_lines(paths),
        vocab_size=_VOCAB_SIZE.value,
        lowercase=_LOWERCASE.value,
        reserved_tokens=_RESERVED.value,
    )
    vocab_lib.write_vocab(_OUTPUT_VOCAB.value, tokens)
    print(f"Wrote {len(tokens)} tokens learned from {len(paths)} files to {_OUTPUT_VOCAB.value}")


def run():
    """The console script `keras-bert-zoo-build-vocab`, and this file."""
    cli.run(main)


if __name__ == "__main__":
    run()
