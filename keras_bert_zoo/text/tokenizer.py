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
whose character classes come from Python's ``unicodedata``; then
``FastBertTokenizer`` (cased, no normalisation of its own) splits and word-pieces
the normalised text. Per string, two rare cases leave that fast path: a string that
may hold a word over ``max_chars_per_token`` characters has such words turned into
``[UNK]`` from its pieces' lengths, and a string holding invalid UTF-8 or a
character whose handling differs between TF's Unicode tables and Python's takes an
all-regex split (classes from ``unicodedata``) into ``FastWordpieceTokenizer``; that
exact path agrees with the reference on every code point.
"""

from __future__ import annotations

import functools
import os
import sys
import unicodedata

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.text.vocab import load_vocab

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# CJK Unified Ideographs blocks exactly as google-research/bert's `_is_chinese_char`
# (Hangul, Hiragana and Katakana are deliberately absent there).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _regex_class(codepoints) -> str:
    """An RE2 character class `[...]` matching exactly `codepoints`."""
    points = sorted(set(codepoints))
    parts = []
    i = 0
    while i < len(points):
        j = i
        while j + 1 < len(points) and points[j + 1] == points[j] + 1:
            j += 1
        if i == j:
            parts.append(f"\\x{{{points[i]:X}}}")
        else:
            parts.append(f"\\x{{{points[i]:X}}}-\\x{{{points[j]:X}}}")
        i = j + 1
    return "[" + "".join(parts) + "]"


@functools.lru_cache(maxsize=1)
def _character_classes() -> dict[str, str]:
    """Regex classes for BERT's character predicates, from Python's unicodedata."""
    control, whitespace, punctuation, nonspacing, unassigned = [], [], [], [], []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in valid UTF-8
            continue
        char = chr(cp)
        category = unicodedata.category(char)
        is_ws = char in " \t\n\r" or category == "Zs"
        if cp == 0 or cp == 0xFFFD or (category in ("Cc", "Cf") and char not in "\t\n\r"):
            control.append(cp)
        # str.split() in the original also splits on U+2028/U+2029 (Zl/Zp).
        elif is_ws or char.isspace():
            whitespace.append(cp)
        if (
            33 <= cp <= 47
            or 58 <= cp <= 64
            or 91 <= cp <= 96
            or 123 <= cp <= 126
            or category.startswith("P")
        ):
            punctuation.append(cp)
        if category == "Mn":
            nonspacing.append(cp)
        elif category == "Cn":
            unassigned.append(cp)
    cjk = [cp for lo, hi in _CJK_RANGES for cp in range(lo, hi + 1)]
    return {
        "control": _regex_class(control),
        "whitespace": _regex_class(whitespace),
        "split_keep": _regex_class(punctuation + cjk),
        "split_any": _regex_class(whitespace + punctuation + cjk),
        "nonspacing": _regex_class(nonspacing),
        # Surrogates: RE2 accepts their (invalid) UTF-8 encodings as characters.
        "exact_only": _regex_class(unassigned + list(range(0xD800, 0xE000))),
    }


@functools.lru_cache(maxsize=1)
def _lowercase_fixups() -> tuple[tuple[str, str], ...]:
    """(char, Python lower) pairs where `tf.strings.lower` disagrees with `str.lower`.

    TF's case tables lag Python 3.11's (Unicode 14 capitals such as U+2C2F are left
    unchanged by TF); each pair is re-mapped after `tf.strings.lower`.
    """
    chars = [
        chr(cp)
        for cp in range(1, sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF
        and (chr(cp).lower() != chr(cp) or unicodedata.category(chr(cp)) in ("Lu", "Lt", "Ll"))
    ]
    with tf.init_scope():
        lowered = tf.strings.lower(tf.constant(chars), encoding="utf-8").numpy()
    return tuple(
        (char, char.lower())
        for char, low in zip(chars, lowered, strict=True)
        if low.decode("utf-8") != char.lower()
    )


@functools.lru_cache(maxsize=2)
def _normalized_length_exceptions(lowercase: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Code points whose normalized UTF-8 length differs from their own, and that length.

    Normalization is per character (cleaning drops a character, lower-casing and NFD
    replace it), so these lengths locate every normalized byte's source character.
    """
    points, lengths = [], []
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        category = unicodedata.category(char)
        if cp == 0 or cp == 0xFFFD or (category in ("Cc", "Cf") and char not in "\t\n\r"):
            normalized = ""
        elif lowercase:
            normalized = "".join(
                c
                for c in unicodedata.normalize("NFD", char.lower())
                if unicodedata.category(c) != "Mn"
            )
        else:
            normalized = char
        size = len(normalized.encode("utf-8"))
        if size != len(char.encode("utf-8")):
            points.append(cp)
            lengths.append(size)
    return tuple(points), tuple(lengths)


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


def infer_lowercase(tokens) -> bool:
    """True when the vocabulary looks uncased (almost no upper-case entries)."""
    with_letter, with_upper = vocab_casing(tokens)
    return with_upper <= max(10, 0.01 * with_letter)


def validate_casing(tokens, lowercase: bool, source: str) -> None:
    """Raises ValueError when `lowercase` contradicts the vocabulary's casing.

    The idea of google-research/bert's ``validate_case_matches_checkpoint``, judged
    from the vocabulary itself: an uncased tokenizer on a cased vocabulary never
    produces the upper-case entries, and a cased tokenizer on an uncased vocabulary
    maps every capitalised word to pieces or ``[UNK]``.
    """
    with_letter, with_upper = vocab_casing(tokens)
    looks_cased = with_upper > max(10, 0.01 * with_letter)
    if lowercase and looks_cased:
        raise ValueError(
            f"lowercase=True but the vocabulary {source} is cased ({with_upper} of "
            f"{with_letter} word entries contain upper-case letters). Use lowercase=False "
            "(or None to infer it) with a cased vocabulary."
        )
    if not lowercase and with_upper == 0 and with_letter >= 1000:
        raise ValueError(
            f"lowercase=False but the vocabulary {source} is uncased (none of its "
            f"{with_letter} word entries contain upper-case letters). Use lowercase=True "
            "(or None to infer it) with an uncased vocabulary."
        )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenizer(keras.layers.Layer):
    """BERT WordPiece tokenizer: strings in, ragged word-piece ids out.

    Exactly google-research/bert's ``FullTokenizer``: invalid UTF-8 bytes, NUL,
    U+FFFD and control/format characters (Cc, Cf) are dropped; whitespace (Zs, tab,
    newline, carriage return, U+2028/U+2029) separates words; CJK ideographs and
    punctuation (ASCII symbols and Unicode P*) become words of their own; with
    ``lowercase`` the text is lower-cased, NFD-decomposed and stripped of
    non-spacing marks; each word is split greedily into the longest vocabulary
    pieces (``##`` marks a continuation), and a word longer than
    ``max_chars_per_token`` characters, or one that cannot be matched, is ``[UNK]``.

    Args:
        vocabulary: str or list of str. Path of a ``vocab.txt`` (one token per
            line, id = line number; tracked as a SavedModel asset) or the tokens.
        lowercase: bool or None. Lower-case and strip accents (uncased vocab).
            ``None`` infers it from the vocabulary. A value contradicting the
            vocabulary's casing raises ``ValueError`` naming the file.
        max_chars_per_token: int. Longer words become ``[UNK]`` (BERT: 100).
        unknown_token: str. Token for unmatchable words.
        suffix_indicator: str. Prefix of continuation pieces.
        validate_case: bool. Check `lowercase` against the vocabulary.
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
        max_chars_per_token: int = 100,
        unknown_token: str = "[UNK]",
        suffix_indicator: str = "##",
        validate_case: bool = True,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Strings pass through Keras untouched; ids are not floats to autocast.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        if vocabulary is None:
            raise ValueError("BertTokenizer needs a vocabulary (a vocab.txt path or tokens).")
        if max_chars_per_token < 1:
            raise ValueError(f"max_chars_per_token must be >= 1, got {max_chars_per_token}")
        self.max_chars_per_token = int(max_chars_per_token)
        self.unknown_token = unknown_token
        self.suffix_indicator = suffix_indicator
        self.validate_case = validate_case
        self._set_vocabulary(vocabulary, lowercase)
        # No weights: nothing for build() to create.
        self.built = True

    # === Vocabulary ===

    def _set_vocabulary(self, vocabulary, lowercase):
        if isinstance(vocabulary, str | os.PathLike):
            self.vocabulary_path = os.fspath(vocabulary)
            tokens = load_vocab(self.vocabulary_path)
            source = repr(self.vocabulary_path)
            # Tracked so that tf.saved_model.save copies vocab.txt into assets/.
            self.vocab_asset = tf.saved_model.Asset(self.vocabulary_path)
        else:
            self.vocabulary_path = None
            tokens = [str(t) for t in vocabulary]
            source = f"(list of {len(tokens)} tokens)"
            self.vocab_asset = None
        if len(set(tokens)) != len(tokens):
            seen, dupes = set(), []
            for t in tokens:
                if t in seen:
                    dupes.append(t)
                seen.add(t)
            raise ValueError(f"Vocabulary {source} has duplicate tokens: {dupes[:5]}")
        if self.unknown_token not in tokens:
            raise ValueError(f"Vocabulary {source} lacks the unknown token {self.unknown_token!r}")
        if lowercase is None:
            lowercase = infer_lowercase(tokens)
        elif self.validate_case:
            validate_casing(tokens, bool(lowercase), source)
        self.lowercase = bool(lowercase)
        self._tokens = tokens
        self._token_to_id = {t: i for i, t in enumerate(tokens)}
        self._classes = _character_classes()
        self._lower_fixups = _lowercase_fixups() if self.lowercase else ()
        self._fast_path_pattern = "(?s)[^" + self._classes["exact_only"][1:]
        if self._lower_fixups:
            fixups = _regex_class(ord(c) for c, _ in self._lower_fixups)
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
        # Split + word-piece of the usual path, on text normalized here.
        self._fast_bert = tf_text.FastBertTokenizer(
            vocab=tokens,
            suffix_indicator=self.suffix_indicator,
            max_bytes_per_word=4 * self.max_chars_per_token,
            token_out_type=tf.int32,
            unknown_token=self.unknown_token,
            lower_case_nfd_strip_accents=False,
        )
        # Characters per piece ("##" excluded), to find words over the limit.
        suffix = self.suffix_indicator
        self._piece_chars = [
            0 if t == self.unknown_token else len(t[len(suffix) :] if t.startswith(suffix) else t)
            for t in tokens
        ]
        self._piece_starts_word = [not t.startswith(suffix) for t in tokens]
        # Built once, eagerly: traced functions capture them instead of embedding
        # 30k-element constants in every graph.
        with tf.init_scope():
            self._piece_table = tf.constant(
                [
                    2 * c + int(w)
                    for c, w in zip(self._piece_chars, self._piece_starts_word, strict=True)
                ],
                tf.int32,
            )
        self._offset_table = None

    def get_vocabulary(self) -> list[str]:
        return list(self._tokens)

    def vocabulary_size(self) -> int:
        return len(self._tokens)

    def token_to_id(self, token: str) -> int:
        if token not in self._token_to_id:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return self._token_to_id[token]

    def id_to_token(self, token_id: int) -> str:
        return self._tokens[int(token_id)]

    def _special_id(self, token):
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
        if exact:
            for char, lower in self._lower_fixups:
                text = tf.strings.regex_replace(text, f"\\x{{{ord(char):X}}}", lower)
        text = tf_text.normalize_utf8(text, "NFD")
        return tf.strings.regex_replace(text, self._classes["nonspacing"], "")

    def _fast_path_ok(self, inputs):
        """Per string: True when the fast path tokenizes it exactly.

        The exact path is for invalid UTF-8 (encoded surrogates included), characters
        unassigned in Python's Unicode tables (TF's newer ICU classifies some as
        punctuation and decomposes others) and the capitals `tf.strings.lower` misses.
        """
        return tf.strings.regex_full_match(inputs, self._fast_path_pattern)

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

    def _collapse_long_words(self, ids, starts=None, ends=None):
        """Turns each word over the character limit into one [UNK] (ids `[batch, (pieces)]`).

        A piece without the suffix indicator starts a word; a matched word's
        characters are its pieces' characters; a word that did not match is one
        [UNK] already, long or not.
        """
        flat = ids.flat_values
        table = tf.gather(self._piece_table, flat)
        starts_word = tf.cast(table % 2, tf.bool)
        word = tf.cumsum(tf.cast(starts_word, tf.int32)) - 1
        num_words = tf.reduce_sum(tf.cast(starts_word, tf.int32))
        chars = table // 2
        word_chars = tf.math.unsorted_segment_sum(chars, word, num_words)
        long = tf.gather(word_chars > self.max_chars_per_token, word)
        keep = ~long | starts_word
        # Re-masking by hand (flat values + row lengths) is much cheaper than
        # tf.ragged.boolean_mask; the common case keeps every piece.
        row_lengths = tf.math.unsorted_segment_sum(
            tf.cast(keep, tf.int64), ids.value_rowids(), ids.nrows()
        )

        def masked(values):
            return tf.RaggedTensor.from_row_lengths(
                tf.boolean_mask(values, keep), row_lengths, validate=False
            )

        unk = tf.constant(self.unknown_token_id, flat.dtype)
        out = [masked(tf.where(long, unk, flat))]
        if starts is not None:
            word_end = tf.math.unsorted_segment_max(ends.flat_values, word, num_words)
            out.append(masked(starts.flat_values))
            out.append(masked(tf.where(long, tf.gather(word_end, word), ends.flat_values)))
        return out

    @staticmethod
    def _stitch(parts):
        """Concatenates row groups [(row indices, [tensors...])] back into row order."""
        rows = tf.concat([r for r, _ in parts], axis=0)
        order = tf.argsort(rows)
        return [
            tf.gather(tf.concat(list(group), axis=0), order)
            for group in zip(*[t for _, t in parts], strict=True)
        ]

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

    def _maybe_long(self, normalized):
        """Per string: may hold a word over max_chars_per_token characters.

        A necessary condition, cheap to test: a run that long without ASCII
        whitespace or ASCII punctuation (RE2 caps counted repeats at 1000).
        """
        run = min(self.max_chars_per_token + 1, 1000)
        pattern = f"(?s).*[^\\t\\n\\r !-/:-@\\[-`{{-~]{{{run}}}.*"
        return tf.strings.regex_full_match(normalized, pattern)

    @staticmethod
    def _spread(rows, num_rows, tensors):
        """Ragged results of the strings at sorted `rows` as rows of a `num_rows` batch.

        The other rows are empty; the values keep their order (rows are sorted).
        """
        out = []
        for t in tensors:
            lengths = tf.scatter_nd(rows[:, tf.newaxis], t.row_lengths(), [num_rows])
            out.append(tf.RaggedTensor.from_row_lengths(t.flat_values, lengths, validate=False))
        return out

    def _route(self, inputs, fast, collapse, exact):
        """Tokenizes each string on the cheapest path that is exact for it.

        Three row groups: the fast path alone (nearly every string), the fast path
        with over-long words collapsed (strings that may hold one), and the exact
        path (strings the fast path cannot do exactly). Every group runs on every
        batch, each row being empty in all groups but its own, and the rows are
        joined by concatenation: a tf.cond around the rare paths measured slower
        inside tf.data, even when not taken. `fast(normalized)` -> tensors,
        `collapse(tensors)` -> tensors with long words as [UNK], `exact(texts)` ->
        tensors.
        """
        num_rows = tf.shape(inputs, out_type=tf.int64)[0]
        ok = self._fast_path_ok(inputs)
        normalized = self._normalize(tf.where(ok, inputs, ""), exact=False)
        maybe_long = self._maybe_long(normalized)
        plain = fast(tf.where(maybe_long, "", normalized))
        long_rows = tf.where(maybe_long)[:, 0]
        long_out = collapse(fast(tf.gather(normalized, long_rows)))
        other_rows = tf.where(~ok)[:, 0]
        exact_out = exact(tf.gather(inputs, other_rows))
        groups = zip(
            plain,
            self._spread(long_rows, num_rows, long_out),
            self._spread(other_rows, num_rows, exact_out),
            strict=True,
        )
        return [tf.concat(list(group), axis=1) for group in groups]

    def _tokenize_ids(self, inputs):
        def fast(normalized):
            return [self._fast_bert.tokenize(normalized)]

        def collapse(tensors):
            return self._collapse_long_words(*tensors)

        def exact(texts):
            words = self._split_words(self._normalize(texts, exact=True))
            return [self._wordpiece.tokenize(words).merge_dims(-2, -1)]

        return self._route(inputs, fast, collapse, exact)[0]

    def _tokenize_normalized_offsets(self, inputs):
        """Ids with byte offsets into the normalized strings."""

        def fast(normalized):
            ids, starts, ends = self._fast_bert.tokenize_with_offsets(normalized)
            return [ids, tf.cast(starts, tf.int64), tf.cast(ends, tf.int64)]

        def collapse(tensors):
            return self._collapse_long_words(*tensors)

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
                ids.merge_dims(-2, -1),
                tf.cast(piece_starts.with_flat_values(flat_starts).merge_dims(-2, -1), tf.int64),
                tf.cast(piece_starts.with_flat_values(flat_ends).merge_dims(-2, -1), tf.int64),
            ]

        return self._route(inputs, fast, collapse, exact)

    def _to_batch(self, inputs):
        inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise TypeError(f"BertTokenizer takes strings, got {inputs.dtype}")
        scalar = inputs.shape.rank == 0
        if scalar:
            inputs = inputs[tf.newaxis]
        elif inputs.shape.rank != 1:
            raise ValueError(f"BertTokenizer takes a [batch] string tensor, got {inputs.shape}")
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
        to no token).
        """
        inputs, scalar = self._to_batch(inputs)
        ids, norm_starts, norm_ends = self._tokenize_normalized_offsets(inputs)
        starts, ends = self._map_to_original(inputs, norm_starts, norm_ends)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def _normalized_lengths(self, codepoints):
        if self._offset_table is None:
            points, lengths = _normalized_length_exceptions(self.lowercase)
            with tf.init_scope():
                self._offset_table = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(points, tf.int32), tf.constant(lengths, tf.int32)
                    ),
                    default_value=-1,
                )
        utf8_len = (
            1
            + tf.cast(codepoints >= 0x80, tf.int32)
            + tf.cast(codepoints >= 0x800, tf.int32)
            + tf.cast(codepoints >= 0x10000, tf.int32)
        )
        special = self._offset_table.lookup(codepoints)
        return tf.where(special >= 0, special, utf8_len)

    def _map_to_original(self, inputs, norm_starts, norm_ends):
        """Maps byte offsets in the normalized strings back to the original strings.

        Each original character normalizes on its own to a known number of bytes
        (cleaning, lower-casing and NFD act per character; Greek final sigma only
        swaps two 2-byte letters), so cumulative normalized lengths locate the source
        character of every normalized byte.
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
        lengths = tf.cast(self._normalized_lengths(codepoints.flat_values), tf.int64)
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
        ends = tf.gather(flat_char_ends, source_char(norm_ends - 1))
        return norm_starts.with_flat_values(starts), norm_ends.with_flat_values(ends)

    def detokenize(self, ids):
        """Ids back to text: pieces joined, ``##`` continuations glued, words spaced."""
        ids = tf.convert_to_tensor(ids) if not isinstance(ids, tf.RaggedTensor) else ids
        scalar = ids.shape.rank == 1
        if scalar:
            ids = ids[tf.newaxis]
        text = self._wordpiece.detokenize(tf.cast(ids, tf.int32))
        return text[0] if scalar else text

    def compute_output_spec(self, inputs):
        return keras.KerasTensor([None, None], dtype="int32", ragged=True)

    # === Config ===

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": self.vocabulary_path or list(self._tokens),
                "lowercase": self.lowercase,
                "max_chars_per_token": self.max_chars_per_token,
                "unknown_token": self.unknown_token,
                "suffix_indicator": self.suffix_indicator,
                "validate_case": self.validate_case,
            }
        )
        return config

    def save_assets(self, dir_path):
        from keras_bert_zoo.text.vocab import write_vocab

        write_vocab(os.path.join(dir_path, "vocab.txt"), self._tokens)

    def load_assets(self, dir_path):
        path = os.path.join(dir_path, "vocab.txt")
        self._set_vocabulary(load_vocab(path), self.lowercase)
