"""BERT WordPiece tokenization as a Keras layer on tensorflow-text.

The layer reproduces google-research/bert's ``FullTokenizer`` (``BasicTokenizer``
then ``WordpieceTokenizer``) token for token. tensorflow-text's
``FastBertTokenizer`` alone does not:

* with ``lower_case_nfd_strip_accents`` its normaliser also applies compatibility
  decomposition and case folding (``ß`` -> ``ss``, ``…`` -> ``...``, ``½`` ->
  ``1⁄2``, final ``ς`` -> ``σ``, ``？`` -> ``?``): 98 of the 28,661 lines of the
  gensim Wikipedia excerpt come out differently;
* its ``max_bytes_per_word`` counts bytes where BERT counts characters;
* its character classes follow TF's ICU, a newer Unicode than the ``unicodedata``
  of Python 3.11 that the original relies on (43 code points, unassigned for
  Python, are punctuation for ICU); likewise ``tf.strings.lower`` misses 40
  Unicode 14 capitals that ``str.lower`` knows.

So the cleaning, lower-casing and accent stripping are done here with TF string ops
whose character classes come from Python's ``unicodedata`` (for printable ASCII, 87%
of Wikipedia lines, that is byte-wise lower-casing alone); then the end-to-end
``FastWordpieceTokenizer`` that ``FastBertTokenizer`` wraps splits and word-pieces
the normalised text. Per string, two rare cases leave that fast path: a string
holding invalid UTF-8 or a character whose handling differs between TF's Unicode
tables and Python's, and a string whose fast result holds an ``[UNK]`` (a word over
``max_chars_per_token`` bytes, which may still be short enough in characters, or a
word the vocabulary cannot match). Those take an all-regex split (classes from
``unicodedata``) into ``FastWordpieceTokenizer``; that exact path agrees with the
reference on every code point.

That is the ``ops="tensorflow_text"`` implementation, the layer's default.
``ops="core"`` runs the same algorithm in core TensorFlow ops only
(``core_wordpiece.py``): the same ids and offsets, slower on large batches, and a
SavedModel traced from it needs no tensorflow-text; exports use it by default.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import weakref

import keras
import tensorflow as tf
import tensorflow_text as tf_text
from keras.src.saving import serialization_lib

from keras_bert_zoo.text.core_wordpiece import utf8_lengths
from keras_bert_zoo.text.preprocessing_layer import PreprocessingLayer
from keras_bert_zoo.text.unicode_tables import lowercase_fixups, regex_class, unicode_tables
from keras_bert_zoo.text.vocab import VOCAB_FILENAME, load_vocab, vocab_text
from keras_bert_zoo.utils.atomic import write_text_atomically
from keras_bert_zoo.utils.errors import UserError

# Longest word (in characters, i.e. code points) that WordPiece splits; a longer one
# is [UNK]. google-research/bert's tokenization.py builds its tokenizer with
# `WordpieceTokenizer(max_input_chars_per_word=200)`: the default here, so that words
# of 101-200 characters come out as the original's pieces.
ORIGINAL_MAX_CHARS_PER_WORD = 200
# Hugging Face's port (`BertTokenizer`, `tokenizers`' `BertWordPieceTokenizer`) uses
# 100: pass `max_chars_per_token=HUGGING_FACE_MAX_CHARS_PER_WORD` to match it.
HUGGING_FACE_MAX_CHARS_PER_WORD = 100

# Implementations of the tokenizer (`BertTokenizer(ops=...)`, `--tokenizer_ops`): both are
# exactly google-research/bert's algorithm. "core" holds only core TensorFlow ops
# (core_wordpiece.py), so a SavedModel traced from it loads with no tensorflow-text;
# "tensorflow_text" runs the word-piece step (and NFD) in tensorflow-text's kernels.
CORE_OPS = "core"
TENSORFLOW_TEXT_OPS = "tensorflow_text"
TOKENIZER_OPS = (CORE_OPS, TENSORFLOW_TEXT_OPS)
# The layer's default: in a tf.data pipeline tensorflow-text's kernels tokenize about 15x
# faster than the core ops (batches of 512; benchmarks/tokenizer_throughput.py).
DEFAULT_TOKENIZER_OPS = TENSORFLOW_TEXT_OPS
# Exports default to the core ops: served raw-text throughput is the same within the
# noise (the model dominates; benchmarks/serving_latency.py), and the export then loads
# wherever TensorFlow does.
DEFAULT_EXPORT_TOKENIZER_OPS = CORE_OPS


def check_tokenizer_ops(ops: str) -> str:
    if ops not in TOKENIZER_OPS:
        raise UserError(f"tokenizer ops must be one of {', '.join(TOKENIZER_OPS)}; got {ops!r}")
    return ops


@contextlib.contextmanager
def tokenizer_ops(ops: str, *layers):
    """Within the block, every `BertTokenizer` among `layers` (or held by one of them
    as `.tokenizer`) runs on `ops`; each gets its own setting back afterwards.

    What an exporter traces inside the block holds that implementation's ops.
    """
    check_tokenizer_ops(ops)
    found = {}
    for layer in layers:
        for candidate in (layer, getattr(layer, "tokenizer", None)):
            if isinstance(candidate, BertTokenizer):
                found[id(candidate)] = candidate
    saved = {key: tokenizer.ops for key, tokenizer in found.items()}
    try:
        for tokenizer in found.values():
            tokenizer.ops = ops
        yield
    finally:
        for key, tokenizer in found.items():
            tokenizer.ops = saved[key]


# Offset-table value of a character that normalizes to nothing but is not cleaned
# away (a combining mark stripped with the accents): it belongs to the token before.
_DROPPED_MARK = -2


def vocab_casing(tokens) -> tuple[int, int]:
    """(tokens with a letter, tokens with an upper-case letter), specials excluded."""
    with_letter = with_upper = 0
    for token in tokens:
        if token.startswith("[") and token.endswith("]"):
            continue
        body = token[2:] if token.startswith("##") else token
        if any(c.lower() != c.upper() for c in body):
            with_letter += 1
            if any(c != c.lower() for c in body):
                with_upper += 1
    return with_letter, with_upper


def _looks_cased(with_letter: int, with_upper: int) -> bool:
    # More than a handful (and 1%) of the word entries hold a capital: a cased vocabulary.
    return with_upper > max(10, 0.01 * with_letter)


def infer_lowercase(tokens) -> bool:
    """True when the vocabulary looks uncased (almost no upper-case entries)."""
    return not _looks_cased(*vocab_casing(tokens))


def validate_casing(tokens, lowercase: bool, source: str) -> None:
    """Raises ValueError when `lowercase` contradicts the vocabulary's casing.

    The idea of google-research/bert's ``validate_case_matches_checkpoint``, judged
    from the vocabulary itself: an uncased tokenizer on a cased vocabulary never
    produces the upper-case entries, and a cased tokenizer on an uncased vocabulary
    maps every capitalised word to pieces or ``[UNK]``.
    """
    with_letter, with_upper = vocab_casing(tokens)
    if lowercase and _looks_cased(with_letter, with_upper):
        raise UserError(
            f"lowercase=True but the vocabulary {source} is cased ({with_upper} of "
            f"{with_letter} word entries contain upper-case letters). Use lowercase=False "
            "(or None to infer it) with a cased vocabulary."
        )
    if not lowercase and with_upper == 0 and with_letter >= 1000:
        raise UserError(
            f"lowercase=False but the vocabulary {source} is uncased (none of its "
            f"{with_letter} word entries contain upper-case letters). Use lowercase=True "
            "(or None to infer it) with an uncased vocabulary."
        )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenizer(PreprocessingLayer):
    """BERT WordPiece tokenizer: strings in, ragged word-piece ids out.

    Exactly google-research/bert's ``FullTokenizer``: invalid UTF-8 bytes, NUL,
    U+FFFD and control/format characters (Cc, Cf) are dropped; whitespace (Zs, tab,
    newline, carriage return, U+2028/U+2029) separates words; CJK ideographs and
    punctuation (ASCII symbols and Unicode P*) become words of their own; with
    ``lowercase`` the text is lower-cased, NFD-decomposed and stripped of
    non-spacing marks; each word is split greedily into the longest vocabulary
    pieces (``##`` marks a continuation), and a word longer than
    ``max_chars_per_token`` characters, or one that cannot be matched, is ``[UNK]``.

    The vocabulary travels with the layer, never as a path: a ``.keras`` archive
    stores it as the asset ``vocab.txt`` (``get_config`` holds ``vocabulary: None``,
    as keras-hub's tokenizers do; import ``keras_bert_zoo.text`` before
    ``keras.saving.load_model``), and a SavedModel of anything holding the layer
    (``tf.saved_model.save``, ``keras.export.ExportArchive``) carries
    ``assets/vocab.txt``, written from the tokens in memory, as ``vocab_file`` and
    ``vocab_table`` (token -> id). The SavedModel's graph itself reads no file.

    Args:
        vocabulary: str or list of str. Path of a ``vocab.txt`` (one token per
            line, id = line number) or the tokens. ``None`` leaves the layer
            without one until ``load_assets`` (what Keras loading does); reading
            a path while Keras deserializes in safe mode is refused.
        lowercase: bool or None. Lower-case and strip accents (uncased vocab).
            ``None`` infers it from the vocabulary. A value contradicting the
            vocabulary's casing raises ``ValueError`` naming the file.
        max_chars_per_token: int. Words of more characters (code points, not
            bytes) become ``[UNK]``. Defaults to ``ORIGINAL_MAX_CHARS_PER_WORD``
            (200), google-research/bert's ``max_input_chars_per_word``; use
            ``HUGGING_FACE_MAX_CHARS_PER_WORD`` (100) to match Hugging Face's
            tokenizers, which turn words of 101-200 characters into ``[UNK]``. A
            config stores the value, so a saved layer keeps the limit it had.
        unknown_token: str. Token for unmatchable words.
        suffix_indicator: str. Prefix of continuation pieces.
        validate_case: bool. Check `lowercase` against the vocabulary.
        ops: str. `"tensorflow_text"` (tensorflow-text's fast WordPiece kernels) or
            `"core"` (core TensorFlow ops only: a SavedModel of the layer loads
            where tensorflow-text is not installed). Both give the same ids and
            offsets; the attribute may be changed before a function is traced.
        **kwargs: Standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: string tensor of shape ``[batch]`` (or a scalar).

    Returns:
        int32 ``tf.RaggedTensor`` of shape ``[batch, (tokens)]``.

    Example:

    ```python
    import tensorflow as tf
    from keras_bert_zoo.text import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "qu", "##ick", "."]
    tokenizer = BertTokenizer(vocabulary=vocab, lowercase=True)
    tokenizer(tf.constant(["The quick."])).to_list()  # [[5, 6, 7, 8]]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(["Thé qUick."]))
    starts.to_list(), ends.to_list()  # [[0, 5, 7, 10]], [[4, 7, 10, 11]]
    tokenizer.detokenize(ids).numpy()  # [b"the quick ."]
    ```
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase: bool | None = None,
        max_chars_per_token: int = ORIGINAL_MAX_CHARS_PER_WORD,
        unknown_token: str = "[UNK]",
        suffix_indicator: str = "##",
        validate_case: bool = True,
        ops: str = DEFAULT_TOKENIZER_OPS,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.ops = check_tokenizer_ops(ops)
        if max_chars_per_token < 1:
            raise UserError(f"max_chars_per_token must be >= 1, got {max_chars_per_token}")
        self.max_chars_per_token = int(max_chars_per_token)
        self.unknown_token = unknown_token
        self.suffix_indicator = suffix_indicator
        self.validate_case = validate_case
        self.lowercase = lowercase
        self._tokens = None
        if vocabulary is not None:
            self._set_vocabulary(vocabulary, lowercase)

    # === Vocabulary ===

    def _set_vocabulary(self, vocabulary, lowercase):
        if isinstance(vocabulary, str | os.PathLike):
            path = os.fspath(vocabulary)
            if serialization_lib.in_safe_mode():
                raise UserError(
                    f"Refusing to read the vocabulary file {path!r} while deserializing in "
                    "safe mode: a config may name any file. A .keras archive carries its "
                    "vocabulary as an asset; if you trust this config, pass safe_mode=False "
                    "or call keras.config.enable_unsafe_deserialization()."
                )
            tokens = load_vocab(path)
            source = repr(path)
        else:
            tokens = [str(t) for t in vocabulary]
            source = f"(list of {len(tokens)} tokens)"
        if len(set(tokens)) != len(tokens):
            seen, dupes = set(), []
            for t in tokens:
                if t in seen:
                    dupes.append(t)
                seen.add(t)
            raise UserError(f"Vocabulary {source} has duplicate tokens: {dupes[:5]}")
        if self.unknown_token not in tokens:
            raise UserError(f"Vocabulary {source} lacks the unknown token {self.unknown_token!r}")
        if lowercase is None:
            lowercase = infer_lowercase(tokens)
        elif self.validate_case:
            validate_casing(tokens, bool(lowercase), source)
        self.lowercase = bool(lowercase)
        self._tokens = tokens
        self._token_to_id = {t: i for i, t in enumerate(tokens)}
        self._export_vocab = None  # made when a SavedModel is saved
        self._classes = unicode_tables().classes
        self._lower_fixups = lowercase_fixups() if self.lowercase else ()
        self._fast_path_pattern = "(?s)[^" + self._classes["exact_only"][1:]
        if self._lower_fixups:
            fixups = regex_class(ord(c) for c, _ in self._lower_fixups)
            self._fast_path_pattern = self._fast_path_pattern[:-1] + fixups[1:]
        self._fast_path_pattern += "*"
        # Word-piece step of the all-regex path (words split here).
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator=self.suffix_indicator,
            # Words over max_chars_per_token characters are replaced by [UNK] first,
            # so every word reaching here fits in 4 bytes per character.
            max_bytes_per_word=4 * self.max_chars_per_token,
            token_out_type=tf.int32,
            unknown_token=self.unknown_token,
            no_pretokenization=True,
            support_detokenization=True,
        )
        # Split + word-piece of the usual path, on text cleaned (and lower-cased) here.
        # FastBertTokenizer without normalization is this same end-to-end
        # FastWordpieceTokenizer behind a normalizer that only drops the control
        # characters already gone, so the layer calls it directly. It caps words at
        # max_chars_per_token BYTES: a word over it comes out as [UNK], and so does a
        # word the vocabulary cannot match; `_route` sends every string holding an
        # [UNK] to the exact path, which counts characters as the original does.
        self._fast_wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator=self.suffix_indicator,
            max_bytes_per_word=self.max_chars_per_token,
            token_out_type=tf.int32,
            unknown_token=self.unknown_token,
            no_pretokenization=False,
            support_detokenization=False,
        )
        # (Python lower-case, TF lower-case) code points where they disagree, sorted.
        fixups = sorted((ord(c), ord(low)) for c, low in self._lower_fixups)
        with tf.init_scope():
            self._fixup_from = tf.constant([c for c, _ in fixups] or [-1], tf.int32)
            self._fixup_to = tf.constant([low for _, low in fixups] or [-1], tf.int32)
        self._offset_table = None
        self._core = None

    def _core_wordpiece(self):
        """The core-ops tokenizer, made on first use (its tables take a few seconds)."""
        if self._core is None:
            from keras_bert_zoo.text.core_wordpiece import CoreWordpiece

            self._core = CoreWordpiece(
                self._tokens,
                lowercase=self.lowercase,
                max_chars_per_token=self.max_chars_per_token,
                unknown_token=self.unknown_token,
                suffix_indicator=self.suffix_indicator,
                control_pattern=self._classes["control"],
                lower_fixups=[(ord(c), ord(low)) for c, low in self._lower_fixups],
            )
        return self._core

    @property
    def has_vocabulary(self) -> bool:
        """False for a layer built from a config until `load_assets` gives it one."""
        return self._tokens is not None

    def _check_vocabulary(self):
        if self._tokens is None:
            raise UserError(
                f"BertTokenizer {self.name!r} has no vocabulary: pass `vocabulary` (a "
                "vocab.txt path or tokens), or load the layer with keras.saving.load_model "
                "(a .keras archive carries it as an asset)."
            )

    def get_vocabulary(self) -> list[str]:
        self._check_vocabulary()
        return list(self._tokens)

    def vocabulary_size(self) -> int:
        self._check_vocabulary()
        return len(self._tokens)

    def token_to_id(self, token: str) -> int:
        self._check_vocabulary()
        if token not in self._token_to_id:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return self._token_to_id[token]

    def id_to_token(self, token_id: int) -> str:
        self._check_vocabulary()
        return self._tokens[int(token_id)]

    def _special_id(self, token):
        self._check_vocabulary()
        return self._token_to_id.get(token)

    @property
    def pad_token_id(self):
        return self._special_id("[PAD]")

    @property
    def unknown_token_id(self):
        return self._special_id(self.unknown_token)

    @property
    def cls_token_id(self):
        return self._special_id("[CLS]")

    @property
    def sep_token_id(self):
        return self._special_id("[SEP]")

    @property
    def mask_token_id(self):
        return self._special_id("[MASK]")

    def packing_token_ids(self) -> tuple[int, int, int]:
        """`([CLS], [SEP], [PAD])` ids for the layers that pack inputs; `[PAD]` defaults to 0.

        Read when a packing layer first runs, not when it is built: a tokenizer loaded
        from a `.keras` archive or a config gets its vocabulary after its users are built.
        Raises `ValueError` naming a missing token.
        """
        for name, value in (("[CLS]", self.cls_token_id), ("[SEP]", self.sep_token_id)):
            if value is None:
                raise UserError(f"The tokenizer's vocabulary has no {name} token")
        pad_id = self.pad_token_id
        return self.cls_token_id, self.sep_token_id, 0 if pad_id is None else pad_id

    # === Layers ===

    def _normalize(self, text, exact: bool):
        """BERT's cleaning (and lower-casing + accent stripping) of a string tensor.

        `exact=False` assumes what `_fast_path_ok` checks: valid UTF-8 holding no
        character whose handling differs between TF's Unicode tables and Python's.
        """
        if exact:
            # Invalid bytes become U+FFFD, which cleaning drops, as the original's
            # decode(errors="ignore") would.
            text = tf.strings.unicode_transcode(
                text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
            )
        text = tf.strings.regex_replace(text, self._classes["control"], "")
        if not self.lowercase:
            return text
        text = tf.strings.lower(text, encoding="utf-8")
        if exact and self._lower_fixups:
            text = self._apply_lower_fixups(text)
        text = tf_text.normalize_utf8(text, "NFD")
        return tf.strings.regex_replace(text, self._classes["nonspacing"], "")

    def _apply_lower_fixups(self, text):
        """Re-maps the capitals `tf.strings.lower` leaves alone (all map 1:1)."""
        codepoints = tf.strings.unicode_decode(text, "UTF-8")
        flat = codepoints.flat_values
        index = tf.searchsorted(self._fixup_from, flat)
        index = tf.minimum(index, tf.size(self._fixup_from) - 1)
        hit = tf.equal(tf.gather(self._fixup_from, index), flat)
        flat = tf.where(hit, tf.gather(self._fixup_to, index), flat)
        return tf.strings.unicode_encode(codepoints.with_flat_values(flat), "UTF-8")

    def _fast_path_ok(self, inputs):
        """Per string: True when the fast path tokenizes it exactly.

        The exact path is for invalid UTF-8 (encoded surrogates included), characters
        unassigned in Python's Unicode tables (TF's newer ICU classifies some as
        punctuation and decomposes others) and the capitals `tf.strings.lower` misses.
        """
        return tf.strings.regex_full_match(inputs, self._fast_path_pattern)

    def _fast_path_text(self, inputs):
        """(text for the fast word-piece step, per-string bool: the fast path is exact).

        Printable ASCII (87% of Wikipedia lines) needs no cleaning, and lower-casing
        it is byte-wise, so only the other strings pay for the Unicode-wide checks
        and the ICU normalization (ICU's lower-casing alone costs as much as the
        whole ASCII lane).
        """
        printable_ascii = tf.strings.regex_full_match(inputs, "[\\t\\n\\r -~]*")
        others = tf.where(printable_ascii, "", inputs)
        ok = self._fast_path_ok(others)  # "" (ASCII) always passes
        normalized = self._normalize(tf.where(ok, others, ""), exact=False)
        ascii_text = tf.strings.lower(inputs) if self.lowercase else inputs
        return tf.where(printable_ascii, ascii_text, normalized), ok

    def _regex_words(self, normalized):
        """Ragged words, their byte starts/ends in `normalized`, and a too-long mask."""
        words, starts, ends = tf_text.regex_split_with_offsets(
            normalized,
            delim_regex_pattern=self._classes["split_any"],
            keep_delim_regex_pattern=self._classes["split_keep"],
        )
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > self.max_chars_per_token
        # The literal unknown token is itself a vocabulary entry, so the word-piece
        # step maps it to exactly one [UNK] id.
        words = tf.ragged.map_flat_values(
            lambda w, long: tf.where(long, self.unknown_token, w), words, too_long
        )
        return words, starts, ends, too_long

    def _split_words(self, normalized):
        """Ragged words of `normalized` (no offsets), long ones replaced by [UNK].

        Same split as `_regex_words`, with static regexes compiled once per graph:
        `regex_split_with_offsets` compiles its large pattern on every call, which
        halved tf.data throughput even when this path got no strings.
        """
        spaced = tf.strings.regex_replace(normalized, self._classes["split_keep"], " \\0 ")
        # Cleaning removed every other ASCII whitespace character, so splitting on
        # ASCII whitespace after this splits on exactly BERT's whitespace.
        spaced = tf.strings.regex_replace(spaced, self._classes["whitespace"], " ")
        words = tf.strings.split(spaced)
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > self.max_chars_per_token
        return tf.ragged.map_flat_values(
            lambda w, long: tf.where(long, self.unknown_token, w), words, too_long
        )

    @staticmethod
    def _merge_word_pieces(pieces):
        """`[batch, (words), (pieces)]` -> `[batch, (pieces)]`.

        Same as `merge_dims(-2, -1)` without its validation asserts, which become
        `If` ops in the traced function and cost more than the merge itself.
        """
        splits = tf.gather(pieces.values.row_splits, pieces.row_splits)
        return tf.RaggedTensor.from_row_splits(pieces.flat_values, splits, validate=False)

    @staticmethod
    def _merge_rows(fast_out, slow, slow_rows, exact_out):
        """Rows of `fast_out` where not `slow`, and `exact_out`'s rows (one per index
        of `slow_rows`, in order) where `slow`; lists of ragged tensors that share a
        row partition within each list.

        Works on row ranges: the only per-token ops are one `ragged.range` and one
        gather per tensor (`value_rowids()`-based masking cost several times more).
        """
        fast_splits = fast_out[0].row_splits
        exact_splits = exact_out[0].row_splits
        num_rows = tf.shape(slow, tf.int64)
        slow_index = slow_rows[:, tf.newaxis]
        exact_row = tf.scatter_nd(slow_index, tf.range(tf.size(slow_rows, tf.int64)), num_rows)
        exact_lengths = tf.scatter_nd(slow_index, exact_splits[1:] - exact_splits[:-1], num_rows)
        lengths = tf.where(slow, exact_lengths, fast_splits[1:] - fast_splits[:-1])
        # Where each row's values start in concat([fast values, exact values]).
        source_start = tf.where(
            slow, fast_splits[-1] + tf.gather(exact_splits, exact_row), fast_splits[:-1]
        )
        source = tf.ragged.range(source_start, source_start + lengths).flat_values
        splits = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(lengths)], axis=0)
        return [
            tf.RaggedTensor.from_row_splits(
                tf.gather(tf.concat([f.flat_values, e.flat_values], axis=0), source),
                splits,
                validate=False,
            )
            for f, e in zip(fast_out, exact_out, strict=True)
        ]

    def _has_unknown(self, ids):
        """Per row of ragged `ids`: holds the unknown token.

        Unknown tokens are rare, so their rows are found from their positions; a
        per-token reduction (`value_rowids()`, `cumsum`) costs several times more.
        """
        positions = tf.where(tf.equal(ids.flat_values, self.unknown_token_id))[:, 0]
        rows = tf.searchsorted(ids.row_splits, positions, side="right") - 1
        counts = tf.math.bincount(
            tf.cast(rows, tf.int32), minlength=ids.nrows(tf.int32), dtype=tf.int32
        )
        return counts > 0

    def _route(self, inputs, fast, exact):
        """Tokenizes each string on the cheapest path that is exact for it.

        Every string the fast path can take goes through it; the strings it cannot
        take and those whose fast result holds an [UNK] (a word over the length limit
        in bytes, or one the vocabulary cannot match: 0.6% of Wikipedia lines) are
        redone on the exact path. Both paths run on every batch: a tf.cond around the
        exact path measured slower inside tf.data, even when not taken.
        `fast(text)` and `exact(texts)` return lists of ragged tensors whose first is
        the ids.
        """
        text, ok = self._fast_path_text(inputs)
        fast_out = fast(text)
        slow = ~ok | self._has_unknown(fast_out[0])
        slow_rows = tf.where(slow)[:, 0]
        exact_out = exact(tf.gather(inputs, slow_rows))
        return self._merge_rows(fast_out, slow, slow_rows, exact_out)

    def _tokenize_ids(self, inputs):
        if self.ops == CORE_OPS:
            return self._core_wordpiece().tokenize(inputs)[0]

        def fast(normalized):
            return [self._fast_wordpiece.tokenize(normalized)]

        def exact(texts):
            words = self._split_words(self._normalize(texts, exact=True))
            return [self._merge_word_pieces(self._wordpiece.tokenize(words))]

        return self._route(inputs, fast, exact)[0]

    def _tokenize_normalized_offsets(self, inputs):
        """Ids with byte offsets into the normalized strings."""
        if self.ops == CORE_OPS:
            return list(self._core_wordpiece().tokenize(inputs))

        def fast(normalized):
            ids, starts, ends = self._fast_wordpiece.tokenize_with_offsets(normalized)
            return [ids, tf.cast(starts, tf.int64), tf.cast(ends, tf.int64)]

        def exact(texts):
            normalized = self._normalize(texts, exact=True)
            words, word_starts, word_ends, too_long = self._regex_words(normalized)
            ids, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(words)
            # Piece offsets within their word -> within the string; the [UNK]
            # stand-in for a long word spans the whole word.
            by_word = piece_starts.values  # [words, (pieces)]
            word_of_piece = by_word.value_rowids()
            long = tf.gather(too_long.flat_values, word_of_piece)
            word_start = tf.gather(word_starts.flat_values, word_of_piece)
            word_end = tf.gather(word_ends.flat_values, word_of_piece)
            flat_starts = tf.where(long, word_start, word_start + by_word.flat_values)
            flat_ends = tf.where(long, word_end, word_start + piece_ends.flat_values)
            return [
                self._merge_word_pieces(ids),
                tf.cast(
                    self._merge_word_pieces(piece_starts.with_flat_values(flat_starts)), tf.int64
                ),
                tf.cast(
                    self._merge_word_pieces(piece_starts.with_flat_values(flat_ends)), tf.int64
                ),
            ]

        return self._route(inputs, fast, exact)

    def _to_batch(self, inputs):
        self._check_vocabulary()
        inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise TypeError(f"BertTokenizer takes strings, got {inputs.dtype}")
        scalar = inputs.shape.rank == 0
        if scalar:
            inputs = inputs[tf.newaxis]
        elif inputs.shape.rank != 1:
            raise UserError(f"BertTokenizer takes a [batch] string tensor, got {inputs.shape}")
        return inputs, scalar

    def call(self, inputs):
        return self.tokenize(inputs)

    def tokenize(self, inputs):
        """int32 ragged ids `[batch, (tokens)]` (or `[(tokens)]` for a scalar)."""
        inputs, scalar = self._to_batch(inputs)
        ids = self._tokenize_ids(inputs)
        return ids[0] if scalar else ids

    def tokenize_with_offsets(self, inputs):
        """(ids, starts, ends): int32 ids and int64 byte offsets into the ORIGINAL strings.

        ``inputs[i][starts[i][j]:ends[i][j]]`` is the source text of token j: the
        whole word for ``[UNK]``, the characters a piece came from otherwise (an
        accented letter keeps its accent bytes; a dropped control character belongs
        to no token). With ``lowercase``, the combining marks (category Mn) that
        accent stripping drops belong to the token before them: a token's end covers
        the marks right after it, so "Cafe" + U+0301 ends after the accent.
        """
        inputs, scalar = self._to_batch(inputs)
        ids, norm_starts, norm_ends = self._tokenize_normalized_offsets(inputs)
        starts, ends = self._map_to_original(inputs, norm_starts, norm_ends)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def _normalized_lengths(self, codepoints):
        """(UTF-8 length of each character once normalized, is a dropped mark).

        A dropped mark is a character that normalizes to nothing without being one
        that cleaning drops: with `lowercase`, a combining mark (Mn) that accent
        stripping removes.
        """
        if self._offset_table is None:
            tables = unicode_tables()
            points, lengths = (
                tables.uncased_length_changes if self.lowercase else tables.cased_length_changes
            )
            cleaned = set(tables.cased_length_changes[0])
            lengths = [
                _DROPPED_MARK if length == 0 and point not in cleaned else length
                for point, length in zip(points, lengths, strict=True)
            ]
            with tf.init_scope():
                self._offset_table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(points, tf.int32), tf.constant(lengths, tf.int32)
                    ),
                    default_value=-1,
                )
        utf8_len = utf8_lengths(codepoints)
        special = self._offset_table.lookup(codepoints)
        dropped_mark = tf.equal(special, _DROPPED_MARK)
        lengths = tf.where(special >= 0, special, tf.where(dropped_mark, 0, utf8_len))
        return lengths, dropped_mark

    def _map_to_original(self, inputs, norm_starts, norm_ends):
        """Maps byte offsets in the normalized strings back to the original strings.

        Each original character normalizes on its own to a known number of bytes
        (cleaning, lower-casing and NFD act per character; Greek final sigma only
        swaps two 2-byte letters), so cumulative normalized lengths locate the source
        character of every normalized byte. A token's end then moves past the marks
        that accent stripping dropped right after it (they left no byte to locate).
        """
        codepoints, char_starts = tf.strings.unicode_decode_with_offsets(
            inputs, "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        # A character ends where the next begins (an invalid byte replaced by U+FFFD
        # stays one source byte long); a row's last character ends the string.
        flat_char_starts = tf.cast(char_starts.flat_values, tf.int64)
        char_rows = char_starts.value_rowids()
        string_len = tf.cast(tf.strings.length(inputs), tf.int64)
        is_last = tf.equal(
            tf.range(tf.size(flat_char_starts, out_type=tf.int64), dtype=tf.int64),
            tf.gather(char_starts.row_limits(), char_rows) - 1,
        )
        next_start = tf.concat([flat_char_starts[1:], tf.zeros([1], tf.int64)], axis=0)
        flat_char_ends = tf.where(is_last, tf.gather(string_len, char_rows), next_start)
        lengths, dropped_mark = self._normalized_lengths(codepoints.flat_values)
        lengths = tf.cast(lengths, tf.int64)
        # One sorted axis for the whole batch: row r's normalized bytes start at the
        # total normalized length of the rows before it.
        cum_end = tf.math.cumsum(lengths)
        row_char_start = codepoints.row_starts()
        row_char_limit = codepoints.row_limits()
        cum_before = tf.concat([[0], cum_end], axis=0)
        row_norm_start = tf.gather(cum_before, row_char_start)

        def source_char(positions):
            rows = positions.value_rowids()
            flat = tf.gather(row_norm_start, rows) + positions.flat_values
            index = tf.searchsorted(cum_end[tf.newaxis], flat[tf.newaxis], side="right")[0]
            index = tf.cast(index, tf.int64)
            # Guards against a Unicode-version disagreement shifting a row's total.
            index = tf.clip_by_value(
                index, tf.gather(row_char_start, rows), tf.gather(row_char_limit, rows) - 1
            )
            return index

        starts = tf.gather(flat_char_starts, source_char(norm_starts))
        last_char = source_char(norm_ends - 1)
        if self.lowercase:
            # The last character before the first one after `last_char` that is not a
            # dropped mark, within the row. (Cased text keeps its marks: no change.)
            kept = tf.where(~dropped_mark)[:, 0]
            next_kept = tf.searchsorted(kept[tf.newaxis], (last_char + 1)[tf.newaxis])[0]
            following = tf.gather(
                tf.concat([kept, tf.size(dropped_mark, out_type=tf.int64)[tf.newaxis]], 0),
                next_kept,
            )
            row_limit = tf.gather(row_char_limit, norm_ends.value_rowids())
            last_char = tf.minimum(following, row_limit) - 1
        ends = tf.gather(flat_char_ends, last_char)
        return norm_starts.with_flat_values(starts), norm_ends.with_flat_values(ends)

    def detokenize(self, ids):
        """Ids back to text: pieces joined, ``##`` continuations glued, words spaced."""
        ids = tf.convert_to_tensor(ids) if not isinstance(ids, tf.RaggedTensor) else ids
        scalar = ids.shape.rank == 1
        if scalar:
            ids = ids[tf.newaxis]
        if self.ops == CORE_OPS:
            core = self._core_wordpiece()
            text = core.detokenize(tf.gather(core.vocabulary, tf.cast(ids, tf.int32)))
        else:
            text = self._wordpiece.detokenize(tf.cast(ids, tf.int32))
        return text[0] if scalar else text

    def compute_output_spec(self, inputs):
        return keras.KerasTensor([None, None], dtype="int32", ragged=True)

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": None,  # an asset: see save_assets
                "lowercase": self.lowercase,
                "max_chars_per_token": self.max_chars_per_token,
                "unknown_token": self.unknown_token,
                "suffix_indicator": self.suffix_indicator,
                "validate_case": self.validate_case,
                "ops": self.ops,
            }
        )
        return config

    def save_assets(self, dir_path):
        self._check_vocabulary()
        write_text_atomically(os.path.join(dir_path, VOCAB_FILENAME), vocab_text(self._tokens))

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, VOCAB_FILENAME)
        self._set_vocabulary(load_vocab(path), self.lowercase)

    @tf.__internal__.tracking.no_automatic_dependency_tracking
    def _trackable_children(self, save_type="checkpoint", **kwargs):
        children = super()._trackable_children(save_type, **kwargs)
        if save_type == "savedmodel" and self._tokens is not None:
            if self._export_vocab is None:
                # A tuple: Keras would track a dict attribute as layer state.
                self._export_vocab = tuple(self._export_vocab_objects().items())
            children.update(self._export_vocab)
        return children

    def _export_vocab_objects(self):
        """`vocab_file` (the asset) and `vocab_table` (token -> id, read from it).

        tf.saved_model.save copies the asset into assets/ when it saves: writing the
        file from the tokens in memory keeps it equal to what the graph tokenizes
        with, whatever has become of the file the layer was built from. The table is
        what keras.export.ExportArchive keeps (it saves lookup tables, not layers),
        and through it the asset.
        """
        directory = tempfile.mkdtemp(prefix="keras_bert_zoo_vocab_")
        weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)
        path = os.path.join(directory, VOCAB_FILENAME)
        write_text_atomically(path, vocab_text(self._tokens))
        with tf.init_scope():
            asset = tf.saved_model.Asset(path)
            table = tf.lookup.StaticHashTable(
                tf.lookup.TextFileInitializer(
                    asset,
                    key_dtype=tf.string,
                    key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
                    value_dtype=tf.int64,
                    value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
                ),
                default_value=-1,
            )
        return {"vocab_file": asset, "vocab_table": table}
