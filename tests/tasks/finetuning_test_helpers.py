"""Shared helpers of the fine-tuning runner tests (imported by path, no conftest)."""

import contextlib
import io
import os
import sys

import keras

from keras_bert_zoo.checkpoints import save_pretrained
from keras_bert_zoo.models import BertEncoder
from keras_bert_zoo.runners.finetuning import FinetuningConfig
from keras_bert_zoo.text.vocab import write_vocab

# One or two blocks learn a keyword in a few dozen steps; XLA stays off (its compile
# time would dominate runs this short).
TINY_ENCODER = dict(
    hidden_size=32,
    num_layers=1,
    num_heads=4,
    intermediate_size=64,
    max_position_embeddings=64,
    type_vocab_size=2,
)


def write_tiny_checkpoint(directory, vocabulary, layout="google", seed=0, **overrides):
    """A random tiny BERT with `vocabulary` as a checkpoint directory of `layout`: what
    `--init_checkpoint` reads for a real release, at test size."""
    directory = str(directory)
    os.makedirs(directory, exist_ok=True)
    vocab_file = os.path.join(directory, "vocab.source.txt")
    write_vocab(vocab_file, vocabulary)
    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(vocab_size=len(vocabulary), **{**TINY_ENCODER, **overrides})
    save_pretrained(encoder, directory, format=layout, vocab_file=vocab_file)
    os.remove(vocab_file)
    return directory


def quick_config(**settings) -> FinetuningConfig:
    """A runner configuration for a few dozen steps of a tiny model."""
    defaults = dict(
        learning_rate=5e-3,
        lr_schedule="constant",
        warmup_proportion=0.0,
        eval_every=0,
        steps_per_loop=8,
        progress="none",
        seed=0,
    )
    defaults.update(settings)
    return FinetuningConfig(**defaults)


def run_tool_as_user(tool, program: str, *args) -> tuple[int, str, str]:
    """`(exit status, stdout, stderr)` of a loaded tool (`load_tool`) run in this process
    as `cli.run` runs it for a user: its flags parsed by `cli.parse_flags`, its `main`
    wrapped by `cli.wrap` (a user error ends with one line `<program>: error:
    <message>` on stderr and status 1), `sys.argv[0]` set to `program` (what that line
    starts with). The same code as a fresh process runs, without its start-up."""
    from keras_bert_zoo.utils import cli

    flags = tool.flags.FLAGS
    argv, out, err = sys.argv[:], io.StringIO(), io.StringIO()
    status = 0
    try:
        sys.argv[:] = [program]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.parse_flags([program, *args])
                cli.wrap(tool.main)([program])
            except SystemExit as done:
                status = done.code
    finally:
        sys.argv[:] = argv
        flags.unparse_flags()
    return status, out.getvalue(), err.getvalue()
