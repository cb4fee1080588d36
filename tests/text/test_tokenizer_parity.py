"""Token-for-token parity of BertTokenizer with google-research/bert's algorithm.

Reference: tests/text/reference_wordpiece.py, a pure-Python statement of the
original BasicTokenizer + WordpieceTokenizer. Text: every non-empty line of the
Wikipedia dump excerpt that gensim ships, plus a hostile set. Vocabularies: the
real uncased BERT vocab of all-MiniLM-L6-v2 and a cased one learned from the corpus.
"""

import random
import sys
import unicodedata

import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer, load_vocab
from keras_bert_zoo.text.tokenizer import (
    HUGGING_FACE_MAX_CHARS_PER_WORD,
    ORIGINAL_MAX_CHARS_PER_WORD,
    TOKENIZER_OPS,
)

# Lines per tokenizer call (rows are tokenized independently): 460,000 short lines
# take half the time in 65,536-line calls as in 4,096-line ones, and one call of them
# all takes gigabytes.
BATCH = 65_536

_TOKENIZERS = {}


def both_implementations(**kwargs):
    """The tokenizer on tensorflow-text's kernels and on core TF ops (`ops="core"`):
    every parity test holds for both, against the same reference tokens. Made once per
    setting for this file when the vocabulary is a file (a path)."""
    if not isinstance(kwargs.get("vocabulary"), str):
        return [BertTokenizer(**kwargs, ops=ops) for ops in TOKENIZER_OPS]
    key = tuple(sorted(kwargs.items()))
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = [BertTokenizer(**kwargs, ops=ops) for ops in TOKENIZER_OPS]
    return _TOKENIZERS[key]


def our_tokens(tokenizer, lines):
    vocab = tokenizer.get_vocabulary()
    out = []
    for i in range(0, len(lines), BATCH):
        ids = tokenizer.tokenize(tf.constant(lines[i : i + BATCH])).to_list()
        out.extend([vocab[j] for j in row] for row in ids)
    return out


# The reference's basic-tokenizer words of each whitespace token, per casing: they do
# not depend on the vocabulary, so every test of this file shares them.
_BASIC_WORDS = {True: {}, False: {}}


def reference_memo(lowercase):
    """A `memo` for `ref.tokenize` of one vocabulary (its word pieces start empty)."""
    return {("basic", lowercase): _BASIC_WORDS[lowercase]}


# tokenize_with_offsets of the same lines by the same tokenizer setting, shared by the
# tests of this file (`offsets_of`): {(casing, ops, segment name): [ids, starts, ends]}.
_OFFSETS = {}


def offsets_of(tokenizer, casing, segment, lines):
    """`tokenizer.tokenize_with_offsets(lines)` as three lists of rows, made once per
    (casing, ops, segment): `segment` names `lines`, the same lines wherever it is used."""
    key = (casing, tokenizer.ops, segment)
    if key not in _OFFSETS:
        rows = [[], [], []]
        for i in range(0, len(lines), BATCH):
            found = tokenizer.tokenize_with_offsets(tf.constant(lines[i : i + BATCH]))
            for out, tensor in zip(rows, found, strict=True):
                out.extend(tensor.to_list())
        _OFFSETS[key] = rows
    return _OFFSETS[key]


def reference_tokens(ref, lines, vocab, lowercase, memo=None):
    vocab = {token: index for index, token in enumerate(vocab)}
    memo = reference_memo(lowercase) if memo is None else memo
    return [ref.tokenize(line, vocab, lowercase, memo=memo) for line in lines]


@pytest.fixture(scope="module")
def wiki_reference(ref, wiki_lines, uncased_vocab_path, cased_vocab_path):
    """`wiki_reference(casing)`: the reference's tokens of every wiki line, computed once
    per casing for the tests of this file."""
    found = {}

    def tokens(casing):
        if casing not in found:
            path = uncased_vocab_path if casing == "uncased" else cased_vocab_path
            lowercase = casing == "uncased"
            found[casing] = reference_tokens(ref, wiki_lines, load_vocab(path), lowercase)
        return found[casing]

    return tokens


@pytest.mark.slow
def test_memo_reference_is_the_plain_statement(ref, hostile, wiki_lines):
    """The reference's cached path (`memo`: one `str.translate` per line, words cached
    per whitespace token) gives the plain statement's words and pieces."""
    lines = (
        wiki_lines[:1000] + hostile.HOSTILE_LINES + ["x" + chr(cp) + "y" for cp in range(1, 0x3400)]
    )
    vocab = {"[UNK]": 0, "a": 1, "##b": 2, "the": 3, "x": 4, "##y": 5}
    for lowercase in (True, False):
        memo = {}
        assert [ref.basic_tokenize_memo(line, lowercase, memo) for line in lines] == [
            ref.basic_tokenize(line, lowercase) for line in lines
        ]
        memo = reference_memo(lowercase)
        assert [ref.tokenize(line, vocab, lowercase, memo=memo) for line in lines] == [
            ref.tokenize(line, vocab, lowercase) for line in lines
        ]


def report(name, lines, expected, got, got_label="ours"):
    mismatches = [(i, e, g) for i, (e, g) in enumerate(zip(expected, got, strict=True)) if e != g]
    tokens = sum(map(len, expected))
    msg = (
        f"{name}: {len(lines)} lines, {tokens} reference tokens, {len(mismatches)} mismatched lines"
    )
    print(msg, file=sys.stderr)
    for i, e, g in mismatches[:5]:
        k = next((j for j in range(min(len(e), len(g))) if e[j] != g[j]), min(len(e), len(g)))
        print(
            f"  line {i} {lines[i][:80]!r}: ref {e[k : k + 5]} {got_label} {g[k : k + 5]}",
            file=sys.stderr,
        )
    return mismatches, msg


@pytest.mark.slow
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_wiki_corpus_parity(
    casing, wiki_reference, wiki_lines, uncased_vocab_path, cased_vocab_path
):
    path = uncased_vocab_path if casing == "uncased" else cased_vocab_path
    lowercase = casing == "uncased"
    expected = wiki_reference(casing)
    assert len(wiki_lines) > 28000
    for tokenizer in both_implementations(vocabulary=path, lowercase=lowercase):
        if tokenizer.ops == "core":
            # Through tokenize_with_offsets (core's `tokenize` is its ids; the offsets are
            # compared with tensorflow-text's below): the core ops tokenize once.
            vocab = tokenizer.get_vocabulary()
            ids = offsets_of(tokenizer, casing, "wiki", wiki_lines)[0]
            got = [[vocab[j] for j in row] for row in ids]
        else:
            got = our_tokens(tokenizer, wiki_lines)
        mismatches, msg = report(f"wiki {casing} {tokenizer.ops}", wiki_lines, expected, got)
        assert not mismatches, msg


@pytest.mark.slow
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_hostile_parity(casing, ref, hostile, uncased_vocab_path, cased_vocab_path):
    hostile_lines, hostile_bytes = hostile.HOSTILE_LINES, hostile.HOSTILE_BYTES
    path = uncased_vocab_path if casing == "uncased" else cased_vocab_path
    lowercase = casing == "uncased"
    lines = hostile_lines + [b.decode("utf-8", "ignore") for b in hostile_bytes]
    expected = reference_tokens(ref, lines, load_vocab(path), lowercase)
    for tokenizer in both_implementations(vocabulary=path, lowercase=lowercase):
        vocab = tokenizer.get_vocabulary()
        # All at once (the batch holds an unassigned character: the all-regex path),
        # one by one (mostly the FastBertTokenizer path), and as raw bytes.
        batched = our_tokens(tokenizer, lines)
        single = [
            [vocab[i] for i in tokenizer.tokenize(tf.constant(line)).numpy()] for line in lines
        ]
        raw = our_tokens(tokenizer, hostile_lines + hostile_bytes)
        for name, got in (("batched", batched), ("single", single), ("bytes", raw)):
            mismatches, msg = report(
                f"hostile {casing} {tokenizer.ops} {name}", lines, expected, got
            )
            assert not mismatches, msg


def test_long_words_follow_character_count(ref, uncased_vocab_path):
    vocab = {t: i for i, t in enumerate(load_vocab(uncased_vocab_path))}
    lines = ["abcdefghij abcdefghijk", "éééééééééé ééééééééééé", "unbelievable believable"]
    expected = [ref.tokenize(line, vocab, True, max_chars_per_token=10) for line in lines]
    assert expected[2][0] == "[UNK]" and expected[2][1] != "[UNK]"
    for tokenizer in both_implementations(vocabulary=uncased_vocab_path, max_chars_per_token=10):
        assert our_tokens(tokenizer, lines) == expected, tokenizer.ops


# Every word length from 1 to 300 characters: around 100 (Hugging Face's limit) and
# 200 (the original's `max_input_chars_per_word`), and far past both.
LONG_WORD_LENGTHS = range(1, 301)
NAMED_LENGTHS = (100, 101, 150, 200, 201, 300)


def word_characters(ref, vocab, lowercase):
    """{UTF-8 length: characters c} with c and ##c in `vocab` that stay one character
    of a word through BERT's basic tokenizer (no punctuation, CJK, space, casing or
    accent change), so that any string of them splits into pieces."""
    by_bytes = {}
    for c in sorted(t for t in vocab if len(t) == 1 and "##" + t in vocab):
        if ref.basic_tokenize("x" + c + "x", lowercase) == ["x" + c + "x"]:
            by_bytes.setdefault(len(c.encode("utf-8")), []).append(c)
    return by_bytes


def long_words(ref, vocab, lowercase, seed=0):
    """{kind: [(length, word)]}: words of every length in LONG_WORD_LENGTHS.

    `pieces` concatenates real vocabulary entries (a word start, then ## pieces), so
    a word up to the limit splits into many pieces; `two_byte`, `three_byte` and
    `mixed` use multi-byte characters (the tf-text op limits bytes, the original
    characters); `unknown_char` puts one character the vocabulary lacks into a
    `pieces` word; `accented` and `decomposed` (NFD) change under lower-casing and
    accent stripping, `decomposed` by losing characters (the original counts them
    after stripping).
    """
    rng = random.Random(seed)
    chars = word_characters(ref, vocab, lowercase)
    ascii_letters = [c for c in chars[1] if c.isalpha()]
    # The basic tokenizer keeps these inside a word; the vocabulary has no piece of them.
    unknown = [
        c
        for c in ("\u2603", "\u02ac", "\U0001d49c", "\u0b95")
        if c not in vocab
        and "##" + c not in vocab
        and ref.basic_tokenize("x" + c + "x", lowercase) == ["x" + c + "x"]
    ]
    starts = [t for t in vocab if t.isascii() and t.isalpha()]
    continuations = [t for t in vocab if t.startswith("##") and t[2:].isascii() and t[2:].isalpha()]
    assert len(ascii_letters) >= 26 and len(chars[2]) >= 10 and len(chars[3]) >= 10, chars
    assert len(starts) > 1000 and len(continuations) > 500 and unknown
    accents = {"a": "\u00e0", "e": "\u00c9", "o": "\u00f6", "u": "\u00fb", "i": "\u00cf"}
    words = {}
    for length in LONG_WORD_LENGTHS:
        word = rng.choice(starts)
        while len(word) < length:
            word += rng.choice(continuations)[2:]
        word = word[:length]
        at = rng.randrange(length)
        accented = "".join(accents.get(c, c) for c in word)
        found = {
            "pieces": word,
            "two_byte": "".join(rng.choices(chars[2], k=length)),
            "three_byte": "".join(rng.choices(chars[3], k=length)),
            "mixed": "".join(rng.choices(ascii_letters + chars[2] + chars[3], k=length)),
            "unknown_char": word[:at] + rng.choice(unknown) + word[at + 1 :],
            "accented": accented,
            "decomposed": unicodedata.normalize("NFD", accented),
        }
        for kind, value in found.items():
            words.setdefault(kind, []).append((length, value))
    return words


def long_word_lines(words):
    """Each word alone, then inside a sentence (other words and punctuation around)."""
    flat = [word for pairs in words.values() for _, word in pairs]
    return flat + [f"The {word}, and (so) {word[::-1]} end." for word in flat]


@pytest.mark.slow
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_words_of_1_to_300_characters_follow_the_original(
    casing, ref, uncased_vocab_path, cased_vocab_path
):
    """The original splits words of up to 200 characters (`max_input_chars_per_word
    =200` in google-research/bert's tokenization.py), counted in characters: a
    200-character word of 2-, 3- or mixed-byte characters splits, a 201-character one
    is [UNK]. The oracle's limit is its own literal 200, not the library's."""
    assert ref.MAX_INPUT_CHARS_PER_WORD == 200
    lowercase = casing == "uncased"
    path = uncased_vocab_path if lowercase else cased_vocab_path
    vocab = load_vocab(path)
    index = {token: i for i, token in enumerate(vocab)}
    words = long_words(ref, index, lowercase)
    assert set(NAMED_LENGTHS) <= set(LONG_WORD_LENGTHS)
    lines = long_word_lines(words)
    memo = reference_memo(lowercase)
    expected = reference_tokens(ref, lines, vocab, lowercase, memo)

    # The oracle splits what it should: a word of vocabulary characters is many pieces
    # up to 200 characters (after accent stripping) and [UNK] past them.
    for kind in ("pieces", "two_byte", "three_byte", "mixed") + (
        ("accented", "decomposed") if lowercase else ()
    ):
        for length, word in words[kind]:
            pieces = ref.tokenize(word, index, lowercase, memo=memo)
            if length <= 200:
                assert "[UNK]" not in pieces and len(pieces) >= length / 12, (kind, length)
            else:
                assert pieces == ["[UNK]"], (kind, length)
    for length in (200, 201):
        for kind in ("two_byte", "three_byte"):
            word = dict(words[kind])[length]
            assert len(word) == length and len(word.encode("utf-8")) > 2 * length - 1
            pieces = ref.tokenize(word, index, lowercase, memo=memo)
            assert (pieces == ["[UNK]"]) == (length == 201), (kind, length)
    assert all(
        ref.tokenize(w, index, lowercase, memo=memo) == ["[UNK]"] for _, w in words["unknown_char"]
    )

    for tokenizer in both_implementations(vocabulary=path, lowercase=lowercase):
        assert tokenizer.max_chars_per_token == ORIGINAL_MAX_CHARS_PER_WORD == 200
        check_long_words(tokenizer, casing, words, lines, expected)


def check_long_words(tokenizer, casing, words, lines, expected):
    """`lines`: `long_word_lines(words)` of the casing's own `long_words`."""
    # Batched (one routing decision per line), each named length alone, and through
    # tokenize_with_offsets.
    batched = our_tokens(tokenizer, lines)
    mismatches, msg = report(f"long words {casing}", lines, expected, batched)
    assert not mismatches, msg
    id_to_token = tokenizer.get_vocabulary()
    named = [
        i
        for kind_words in [words[k] for k in words]
        for i in [lines.index(w) for length, w in kind_words if length in NAMED_LENGTHS]
    ]
    for i in named:
        single = tokenizer.tokenize(tf.constant(lines[i])).numpy().tolist()
        assert [id_to_token[j] for j in single] == expected[i], (casing, i, len(lines[i]))
    ids, starts, ends = offsets_of(tokenizer, casing, f"long_words_{casing}", lines)
    mismatches, msg = report(
        f"long words {casing} with offsets",
        lines,
        expected,
        [[id_to_token[j] for j in row] for row in ids],
    )
    assert not mismatches, msg
    # A word past the limit is one [UNK] spanning the whole word.
    for length, word in words["pieces"][199:]:
        line = lines.index(word)
        assert (ids[line] == [tokenizer.unknown_token_id]) == (length > 200)
        if length > 200:
            assert (starts[line], ends[line]) == ([0], [len(word)])


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_hugging_face_limit_is_an_option(casing, ref, uncased_vocab_path, cased_vocab_path):
    """`max_chars_per_token=HUGGING_FACE_MAX_CHARS_PER_WORD` (100) gives Hugging
    Face's port: the oracle at 100, and Hugging Face `tokenizers` itself."""
    import tokenizers

    assert HUGGING_FACE_MAX_CHARS_PER_WORD == 100
    lowercase = casing == "uncased"
    path = uncased_vocab_path if lowercase else cased_vocab_path
    vocab = load_vocab(path)
    index = {token: i for i, token in enumerate(vocab)}
    words = long_words(ref, index, lowercase, seed=1)
    lines = [word for _, word in words["pieces"] + words["two_byte"]]
    memo = reference_memo(lowercase)
    expected = [
        ref.tokenize(line, index, lowercase, max_chars_per_token=100, memo=memo) for line in lines
    ]
    for tokenizer in both_implementations(
        vocabulary=path, lowercase=lowercase, max_chars_per_token=HUGGING_FACE_MAX_CHARS_PER_WORD
    ):
        mismatches, msg = report(
            f"long words {casing} {tokenizer.ops} at 100",
            lines,
            expected,
            our_tokens(tokenizer, lines),
        )
        assert not mismatches, msg
    assert [e == ["[UNK]"] for e in expected] == [len(line) > 100 for line in lines]
    hf = tokenizers.BertWordPieceTokenizer(
        path, lowercase=lowercase, strip_accents=lowercase, clean_text=True
    )
    got = [e.tokens for e in hf.encode_batch(lines, add_special_tokens=False)]
    mismatches, msg = report(f"long words {casing}: hf", lines, expected, got, "hf")
    assert not mismatches, msg


@pytest.mark.parametrize("lowercase", [True, False])
def test_four_byte_characters_at_the_limit(ref, lowercase):
    """200 four-byte characters are 800 bytes, exactly the tf-text op's
    `max_bytes_per_word` (4 * max_chars_per_token): split; 201 are [UNK]."""
    vocab = ["[PAD]", "[UNK]", "a", "##a", "\U0001f600", "##\U0001f600", "##\U0001d49c"]
    index = {token: i for i, token in enumerate(vocab)}
    lines = []
    for length in (1, 50, 51, 99, 100, 101, 150, 199, 200, 201, 300):
        lines.append("\U0001f600" * length)
        lines.append("a" + "\U0001d49c" * (length - 1))
        lines.append("\U0001f600" + "a" * (length - 1))
    expected = [ref.tokenize(line, index, lowercase) for line in lines]
    assert [e == ["[UNK]"] for e in expected] == [len(line) > 200 for line in lines]
    for tokenizer in both_implementations(vocabulary=vocab, lowercase=lowercase):
        assert our_tokens(tokenizer, lines) == expected
        single = [tokenizer.tokenize(tf.constant(line)).numpy().tolist() for line in lines]
        assert [[vocab[i] for i in row] for row in single] == expected


@pytest.mark.slow
def test_huggingface_cross_check(ref, hostile, wiki_lines, wiki_reference, uncased_vocab_path):
    """Hugging Face `tokenizers` is a third opinion; it is not the specification."""
    import tokenizers

    hf = tokenizers.BertWordPieceTokenizer(uncased_vocab_path, lowercase=True)
    lines = wiki_lines + hostile.HOSTILE_LINES
    expected = wiki_reference("uncased") + reference_tokens(
        ref, hostile.HOSTILE_LINES, load_vocab(uncased_vocab_path), True
    )
    got = [e.tokens for e in hf.encode_batch(lines, add_special_tokens=False)]
    mismatches, msg = report("Hugging Face tokenizers vs reference", lines, expected, got, "hf")
    # Known differences are few (e.g. HF's own normalizer and whitespace rules).
    assert len(mismatches) <= 0.01 * len(lines), msg


@pytest.mark.slow
def test_offsets_point_into_original_text(ref, hostile, wiki_lines, uncased_tokenizer_of_each_ops):
    lines = wiki_lines[:3000] + hostile.HOSTILE_LINES
    ids, starts, ends = uncased_tokenizer_of_each_ops.tokenize_with_offsets(tf.constant(lines))
    assert ids.to_list() == uncased_tokenizer_of_each_ops.tokenize(tf.constant(lines)).to_list()
    vocab = uncased_tokenizer_of_each_ops.get_vocabulary()
    checked = 0
    for line, row, row_starts, row_ends in zip(
        lines, ids.to_list(), starts.to_list(), ends.to_list(), strict=True
    ):
        data = line.encode("utf-8")
        previous_start = 0
        for token_id, start, end in zip(row, row_starts, row_ends, strict=True):
            assert 0 <= start < end <= len(data)
            # Two pieces may share a source character (a Hangul syllable decomposes
            # into several jamo), so starts only never decrease.
            assert start >= previous_start
            source = ref.strip_accents(ref.clean_text(data[start:end].decode("utf-8")).lower())
            piece = vocab[token_id].removeprefix("##")
            # A lone capital sigma lower-cases to σ; in its word it was a final ς.
            source, piece = source.replace("ς", "σ"), piece.replace("ς", "σ")
            if vocab[token_id] != "[UNK]":
                assert piece in source, (line, vocab[token_id], data[start:end])
            previous_start = start
            checked += 1
    assert checked > 100000


@pytest.mark.slow
def test_offsets_cover_the_marks_accent_stripping_drops(
    ref, hostile, wiki_lines, uncased_tokenizer_of_each_ops
):
    """An uncased token's end covers the combining marks right after it, and only those.

    Restated per character with `unicodedata`: a character's normalized form is
    `strip_accents(lower(c))`; a dropped mark is one that cleaning keeps but that
    normalizes to nothing. The token's last contributing character is the last one
    with a non-empty form; after it come dropped marks only, and none follows the end.
    Lines: real Wikipedia text (also NFD-decomposed, so every accent is a mark),
    the hostile set and decomposed "Cafe\u0301" cases.
    """
    import unicodedata

    def cleaned_away(char):
        return ord(char) in (0, 0xFFFD) or ref.is_control(char)

    def normalized(char):
        return "" if cleaned_away(char) else ref.strip_accents(char.lower())

    def dropped_mark(char):
        return not cleaned_away(char) and not normalized(char)

    accented = [line for line in wiki_lines[:6000] if not line.isascii()]
    lines = (
        wiki_lines[:1000]
        + [unicodedata.normalize("NFD", line) for line in accented]
        + hostile.HOSTILE_LINES
        + ["Cafe\u0301", "Cafe\u0301 au lait", "e\u0301\u0302cole!\u0301", "x\u200b\u0301 y"]
    )
    ids, starts, ends = uncased_tokenizer_of_each_ops.tokenize_with_offsets(tf.constant(lines))
    extended = checked = 0
    for line, row_starts, row_ends in zip(lines, starts.to_list(), ends.to_list(), strict=True):
        data = line.encode("utf-8")
        for start, end in zip(row_starts, row_ends, strict=True):
            first = len(data[:start].decode("utf-8"))
            stop = len(data[:end].decode("utf-8"))
            contributing = [k for k in range(first, stop) if normalized(line[k])]
            assert contributing, (line, line[first:stop])
            last = contributing[-1]
            assert all(dropped_mark(c) for c in line[last + 1 : stop]), (line, line[first:stop])
            assert stop == len(line) or not dropped_mark(line[stop]), (line, line[first:stop])
            extended += stop > last + 1
            checked += 1
    ends_of = uncased_tokenizer_of_each_ops.tokenize_with_offsets(tf.constant(["Cafe\u0301 au"]))[2]
    assert ends_of[0].numpy().tolist() == [6, 9]  # "Cafe" + U+0301 is 6 bytes
    print(f"{checked} tokens, {extended} ends moved past marks", file=sys.stderr)
    assert checked > 100000 and extended > 100, (checked, extended)


# Planes 4 to 13: no code point of them is assigned (Unicode 16 included).
UNASSIGNED_PLANES = (0x40000, 0xE0000)


@pytest.mark.slow
@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_every_code_point_between_letters(casing, ref, uncased_vocab_path, cased_vocab_path):
    """Every code point as "x<c>y": its class (space, punctuation, CJK, control, mark),
    casing and decomposition must all match the reference. Every one of planes 0-3 and
    14-16; of planes 4-13, which no Unicode version assigns (each point there is alike:
    unassigned, neither space, control, punctuation nor CJK), every 256th, plane ends
    included: they were 59% of the points and of this test's time."""
    lowercase = casing == "uncased"
    path = uncased_vocab_path if lowercase else cased_vocab_path
    points = [
        cp
        for cp in range(1, sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF
        and (not UNASSIGNED_PLANES[0] <= cp < UNASSIGNED_PLANES[1] or cp % 256 in (0, 255))
    ]
    assert all(
        unicodedata.category(chr(cp)) == "Cn" for cp in range(*UNASSIGNED_PLANES)
    )  # the premise, in this Python's Unicode
    lines = ["x" + chr(cp) + "y" for cp in points]
    expected = reference_tokens(ref, lines, load_vocab(path), lowercase)
    for tokenizer in both_implementations(vocabulary=path, lowercase=lowercase):
        got = our_tokens(tokenizer, lines)
        mismatches, msg = report(f"code points {casing} {tokenizer.ops}", lines, expected, got)
        assert not mismatches, msg


@pytest.mark.slow
def test_core_offsets_equal_tensorflow_text_offsets(
    ref, hostile, wiki_lines, uncased_vocab_path, cased_vocab_path
):
    """`ops="core"` returns the same ids, starts and ends as the tensorflow-text path,
    both casings: real text, its NFD form, the hostile set, long and unknown words.
    (The core offsets of the Wikipedia lines and of the uncased long words are those the
    tests above computed, `offsets_of`.)"""
    index = {token: i for i, token in enumerate(load_vocab(uncased_vocab_path))}
    words = long_words(ref, index, True)  # the uncased test's long words
    accented_rows = [i for i, line in enumerate(wiki_lines) if not line.isascii()][:3000]
    accented = [wiki_lines[i] for i in accented_rows]
    wiki_rows = list(range(3000)) + accented_rows
    rest = (
        [unicodedata.normalize("NFD", line) for line in accented]
        + hostile.HOSTILE_LINES
        + long_word_lines(words)
    )
    lines = [wiki_lines[i] for i in wiki_rows] + rest
    invalid = [line.encode("utf-8") + b"\xff\x00x" for line in lines[:50]]
    inputs = tf.constant(lines + invalid)
    for path, casing in ((uncased_vocab_path, "uncased"), (cased_vocab_path, "cased")):
        lowercase = casing == "uncased"
        text_ops, core_ops = both_implementations(vocabulary=path, lowercase=lowercase)
        want = [tensor.to_list() for tensor in text_ops.tokenize_with_offsets(inputs)]
        wiki = offsets_of(core_ops, casing, "wiki", wiki_lines)
        long_lines = long_word_lines(words)
        long = offsets_of(core_ops, casing, "long_words_uncased", long_lines)
        others = core_ops.tokenize_with_offsets(tf.constant(rest[: -len(long_lines)] + invalid))
        others = [tensor.to_list() for tensor in others]
        split = len(rest) - len(long_lines)
        got = [
            [found[i] for i in wiki_rows] + other[:split] + long_rows + other[split:]
            for found, long_rows, other in zip(wiki, long, others, strict=True)
        ]
        for name, w, g in zip(("ids", "starts", "ends"), want, got, strict=True):
            assert len(w) == len(g) == len(lines) + len(invalid), name
            bad = [i for i in range(len(w)) if w[i] != g[i]]
            assert not bad, (lowercase, name, len(bad), lines[bad[0]][:80] if bad else None)


def test_core_ops_reorder_combining_marks_as_nfd(ref):
    """Canonical reordering: combining characters that are not Mn (so survive accent
    stripping) come out in NFD's order, whatever order they came in."""
    marks = ["\U0001d16d", "\U0001d165", "\u302e", "\u1b44", "\u0301", "\U0001d16e"]
    vocab = ["[PAD]", "[UNK]", "x", "##x", "a"] + marks + ["##" + m for m in marks]
    index = {token: i for i, token in enumerate(vocab)}
    lines = [
        "x" + "".join(order)
        for order in (
            marks,
            marks[::-1],
            ["\U0001d16d", "\u0301", "\U0001d165", "x", "\U0001d16e", "\U0001d165"],
            ["\U0001d15f", "\U0001d16d", "\U0001d165"],  # decomposes to 1d158 1d165
            ["\u302e", "\u1b44", " \u302e\u1b44"],
        )
    ]
    expected = [ref.tokenize(line, index, True) for line in lines]
    assert any(unicodedata.normalize("NFD", line) != line for line in lines)
    for tokenizer in both_implementations(vocabulary=vocab, lowercase=True, validate_case=False):
        assert our_tokens(tokenizer, lines) == expected, tokenizer.ops


@pytest.mark.slow
def test_bad_input_same_through_both_implementations(ref, uncased_vocab_path):
    """Invalid UTF-8, NUL bytes, 200,000-character strings and empty batches: both
    implementations give the reference's tokens (bytes decoded as the original does,
    dropping what is invalid) and the same offsets, without crashing."""
    vocab = load_vocab(uncased_vocab_path)
    index = {token: i for i, token in enumerate(vocab)}
    inputs = [
        b"\xff\xfe\xfd",
        b"caf\xc3 au \xe2\x82 lait\xed\xa0\x80!",
        b"a\x00b c\x00\x00 d",
        b"",
        b"\x00",
        ("x" * 200_000).encode(),
        ("word, " * 33_334).encode(),
        ("\u00e9" * 199_999 + " ok").encode(),
    ]
    expected = [ref.tokenize(raw.decode("utf-8", "ignore"), index, True) for raw in inputs]
    assert expected[5] == ["[UNK]"] and len(expected[6]) == 66_668
    results = []
    for tokenizer in both_implementations(vocabulary=uncased_vocab_path, lowercase=True):
        assert our_tokens(tokenizer, inputs) == expected, tokenizer.ops
        results.append([t.to_list() for t in tokenizer.tokenize_with_offsets(tf.constant(inputs))])
        for empty in (tf.constant([], tf.string), tf.zeros([0], tf.string)):
            assert tokenizer.tokenize(empty).shape.as_list()[0] == 0
            ids, starts, ends = tokenizer.tokenize_with_offsets(empty)
            assert ids.to_list() == starts.to_list() == ends.to_list() == []
        assert tokenizer.tokenize(tf.constant("")).numpy().tolist() == []
    assert results[0] == results[1]


def test_the_implementation_is_part_of_the_config(uncased_vocab_path):
    from keras_bert_zoo.text.tokenizer import tokenizer_ops

    tokenizer = BertTokenizer(vocabulary=uncased_vocab_path, ops="core")
    assert tokenizer.get_config()["ops"] == "core"
    restored = BertTokenizer.from_config(tokenizer.get_config())
    assert restored.ops == "core"
    with pytest.raises(ValueError, match="core, tensorflow_text"):
        BertTokenizer(vocabulary=uncased_vocab_path, ops="icu")
    with tokenizer_ops("tensorflow_text", tokenizer):
        assert tokenizer.ops == "tensorflow_text"
    assert tokenizer.ops == "core"
    # A core detokenization glues continuations as tensorflow-text's does.
    text_ops = BertTokenizer(vocabulary=uncased_vocab_path)
    ids = text_ops(tf.constant(["The unbelievable quick fox.", ""]))
    assert tokenizer.detokenize(ids).numpy().tolist() == text_ops.detokenize(ids).numpy().tolist()
