"""WordPiece vocabularies: reading, atomic writing, and learning from a corpus."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from keras_bert_zoo.utils.atomic import write_text_atomically
from keras_bert_zoo.utils.errors import UserError

DEFAULT_RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
VOCAB_FILENAME = "vocab.txt"


def load_vocab(path: str) -> list[str]:
    """Tokens of a ``vocab.txt``, id = line number.

    Each line is stripped of surrounding whitespace, as google-research/bert's
    ``load_vocab`` does.

    Args:
        path: str. File with one token per line (UTF-8).

    Returns:
        list of str.

    Example:

    ```python
    from keras_bert_zoo.text import load_vocab, write_vocab

    write_vocab("/tmp/vocab.txt", ["[PAD]", "[UNK]", "hello"])
    load_vocab("/tmp/vocab.txt")  # ["[PAD]", "[UNK]", "hello"]
    ```
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            tokens = [line.strip() for line in f.read().split("\n")]
    except UnicodeDecodeError as e:
        raise UserError(f"Vocabulary {path!r} is not valid UTF-8: {e}") from e
    if tokens and tokens[-1] == "":
        tokens.pop()  # the final newline ends the last line; it starts no token
    if not tokens:
        raise UserError(f"Vocabulary {path!r} is empty")
    return tokens


def write_vocab(path: str, tokens: Iterable[str]) -> str:
    """Writes `tokens` one per line, atomically (see `keras_bert_zoo.utils.atomic`).

    Args:
        path: str. Destination ``vocab.txt``; a missing directory is created.
        tokens: iterable of str. No token may be empty, contain whitespace or
            repeat: such a file would not read back to the same ids.

    Returns:
        The path written.
    """
    path = os.fspath(path)
    tokens = list(tokens)
    seen = set()
    for index, token in enumerate(tokens):
        if not isinstance(token, str) or not token or token.split() != [token]:
            raise UserError(f"Token {index} ({token!r}) is empty or contains whitespace")
        if token in seen:
            raise UserError(f"Token {index} ({token!r}) is a duplicate")
        seen.add(token)
    write_text_atomically(path, vocab_text(tokens))
    return path


def vocab_text(tokens: Iterable[str]) -> str:
    """The content of a ``vocab.txt`` holding `tokens`, one per line (id = line number)."""
    return "".join(token + "\n" for token in tokens)


def build_vocab(
    lines_or_dataset,
    vocab_size: int,
    lowercase: bool,
    reserved_tokens: Sequence[str] = DEFAULT_RESERVED_TOKENS,
    batch_size: int = 1024,
    learn_params: dict | None = None,
) -> list[str]:
    """Learns a BERT WordPiece vocabulary from text.

    Words come from tensorflow-text's BERT basic tokenizer and pieces from
    ``tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset``. Learned
    tokens that could never be a whole word of ours (empty, or holding whitespace)
    are dropped, so ``write_vocab`` always accepts the result.

    Args:
        lines_or_dataset: iterable of str, or a ``tf.data.Dataset`` of scalar or
            ``[batch]`` strings.
        vocab_size: int. Upper bound on the vocabulary size, reserved tokens
            included.
        lowercase: bool. Learn an uncased vocabulary (lower-case, strip accents).
        reserved_tokens: sequence of str. Tokens placed first, in this order.
        batch_size: int. Lines per tokenization batch when given lines.
        learn_params: dict. Extra arguments of ``wordpiece_tokenizer_learner_lib.learn``
            (e.g. ``upper_thresh``, ``lower_thresh``, ``num_iterations``,
            ``max_input_tokens``, ``max_token_length``, ``max_unique_chars``).

    Returns:
        list of str: reserved tokens, then single characters and ``##`` pieces.

    Example:

    ```python
    from keras_bert_zoo.text import build_vocab

    vocab = build_vocab(["the cat sat", "the dog sat"], vocab_size=50, lowercase=True)
    vocab[:5]  # ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ```
    """
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

    reserved = list(reserved_tokens)
    if vocab_size <= len(reserved):
        raise UserError(f"vocab_size {vocab_size} leaves no room beyond {len(reserved)} reserved")
    if isinstance(lines_or_dataset, tf.data.Dataset):
        dataset = lines_or_dataset
        if dataset.element_spec.dtype != tf.string:
            raise TypeError(f"Dataset must hold strings, got {dataset.element_spec}")
        if dataset.element_spec.shape.rank == 0:
            dataset = dataset.batch(batch_size)
    else:
        if isinstance(lines_or_dataset, str | bytes):
            raise TypeError("Pass an iterable of lines, not a single string")
        lines = [
            line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
            for line in lines_or_dataset
        ]
        dataset = tf.data.Dataset.from_tensor_slices(tf.constant(lines, tf.string))
        dataset = dataset.batch(batch_size)
    vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=reserved,
        bert_tokenizer_params={"lower_case": bool(lowercase)},
        learn_params=dict(learn_params or {}),
    )
    out, seen = [], set()
    for token in vocab:
        if token and token.split() == [token] and token not in seen:
            out.append(token)
            seen.add(token)
    return out[:vocab_size]


def read_lines(paths: Sequence[str]) -> Iterable[str]:
    """Non-empty lines of UTF-8 text files (undecodable bytes dropped), lazily."""
    for path in paths:
        with open(path, encoding="utf-8", errors="ignore") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.strip():
                    yield line


def expand_globs(patterns: str) -> list[str]:
    """Sorted files matching comma-separated glob `patterns`; ValueError if none."""
    import glob

    paths = sorted({p for pattern in patterns.split(",") if pattern for p in glob.glob(pattern)})
    paths = [p for p in paths if os.path.isfile(p)]
    if not paths:
        raise UserError(f"No file matches {patterns!r}")
    return paths
