"""Token-for-token parity of BertTokenizer with google-research/bert's algorithm.

Reference: tests/text/reference_wordpiece.py, a pure-Python statement of the
original BasicTokenizer + WordpieceTokenizer. Text: every non-empty line of the
Wikipedia dump excerpt that gensim ships, plus a hostile set. Vocabularies: the
real uncased BERT vocab of all-MiniLM-L6-v2 and a cased one learned from the corpus.
"""

import sys

import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer, load_vocab

BATCH = 4096


def our_tokens(tokenizer, lines):
    vocab = tokenizer.get_vocabulary()
    out = []
    for i in range(0, len(lines), BATCH):
        ids = tokenizer.tokenize(tf.constant(lines[i : i + BATCH])).to_list()
        out.extend([vocab[j] for j in row] for row in ids)
    return out


def reference_tokens(ref, lines, vocab, lowercase):
    vocab = {token: index for index, token in enumerate(vocab)}
    memo = {}
    return [ref.tokenize(line, vocab, lowercase, memo=memo) for line in lines]


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


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_wiki_corpus_parity(casing, ref, wiki_lines, uncased_vocab_path, cased_vocab_path):
    path = uncased_vocab_path if casing == "uncased" else cased_vocab_path
    lowercase = casing == "uncased"
    tokenizer = BertTokenizer(vocabulary=path, lowercase=lowercase)
    expected = reference_tokens(ref, wiki_lines, load_vocab(path), lowercase)
    mismatches, msg = report(
        f"wiki {casing}", wiki_lines, expected, our_tokens(tokenizer, wiki_lines)
    )
    assert len(wiki_lines) > 28000
    assert not mismatches, msg


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_hostile_parity(casing, ref, hostile, uncased_vocab_path, cased_vocab_path):
    hostile_lines, hostile_bytes = hostile.HOSTILE_LINES, hostile.HOSTILE_BYTES
    path = uncased_vocab_path if casing == "uncased" else cased_vocab_path
    lowercase = casing == "uncased"
    tokenizer = BertTokenizer(vocabulary=path, lowercase=lowercase)
    lines = hostile_lines + [b.decode("utf-8", "ignore") for b in hostile_bytes]
    expected = reference_tokens(ref, lines, load_vocab(path), lowercase)
    vocab = tokenizer.get_vocabulary()
    # All at once (the batch holds an unassigned character: the all-regex path),
    # one by one (mostly the FastBertTokenizer path), and as raw bytes.
    batched = our_tokens(tokenizer, lines)
    single = [[vocab[i] for i in tokenizer.tokenize(tf.constant(line)).numpy()] for line in lines]
    raw = our_tokens(tokenizer, hostile_lines + hostile_bytes)
    for name, got in (("batched", batched), ("single", single), ("bytes", raw)):
        mismatches, msg = report(f"hostile {casing} {name}", lines, expected, got)
        assert not mismatches, msg


def test_long_words_follow_character_count(ref, uncased_vocab_path):
    tokenizer = BertTokenizer(vocabulary=uncased_vocab_path, max_chars_per_token=10)
    vocab = {t: i for i, t in enumerate(tokenizer.get_vocabulary())}
    lines = ["abcdefghij abcdefghijk", "éééééééééé ééééééééééé", "unbelievable believable"]
    expected = [ref.tokenize(line, vocab, True, max_chars_per_token=10) for line in lines]
    assert expected[2][0] == "[UNK]" and expected[2][1] != "[UNK]"
    assert our_tokens(tokenizer, lines) == expected


def test_huggingface_cross_check(ref, hostile, wiki_lines, uncased_vocab_path):
    """Hugging Face `tokenizers` is a third opinion; it is not the specification."""
    import tokenizers

    hf = tokenizers.BertWordPieceTokenizer(uncased_vocab_path, lowercase=True)
    lines = wiki_lines + hostile.HOSTILE_LINES
    expected = reference_tokens(ref, lines, load_vocab(uncased_vocab_path), True)
    got = [e.tokens for e in hf.encode_batch(lines, add_special_tokens=False)]
    mismatches, msg = report("Hugging Face tokenizers vs reference", lines, expected, got, "hf")
    # Known differences are few (e.g. HF's own normalizer and whitespace rules).
    assert len(mismatches) <= 0.01 * len(lines), msg


def test_offsets_point_into_original_text(ref, hostile, wiki_lines, uncased_tokenizer):
    lines = wiki_lines[:3000] + hostile.HOSTILE_LINES
    ids, starts, ends = uncased_tokenizer.tokenize_with_offsets(tf.constant(lines))
    assert ids.to_list() == uncased_tokenizer.tokenize(tf.constant(lines)).to_list()
    vocab = uncased_tokenizer.get_vocabulary()
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


def test_offsets_cover_the_marks_accent_stripping_drops(
    ref, hostile, wiki_lines, uncased_tokenizer
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
    ids, starts, ends = uncased_tokenizer.tokenize_with_offsets(tf.constant(lines))
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
    ends_of = uncased_tokenizer.tokenize_with_offsets(tf.constant(["Cafe\u0301 au"]))[2]
    assert ends_of[0].numpy().tolist() == [6, 9]  # "Cafe" + U+0301 is 6 bytes
    print(f"{checked} tokens, {extended} ends moved past marks", file=sys.stderr)
    assert checked > 100000 and extended > 100, (checked, extended)


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_every_code_point_between_letters(casing, ref, uncased_vocab_path, cased_vocab_path):
    """Every code point as "x<c>y": its class (space, punctuation, CJK, control, mark),
    casing and decomposition must all match the reference."""
    lowercase = casing == "uncased"
    path = uncased_vocab_path if lowercase else cased_vocab_path
    tokenizer = BertTokenizer(vocabulary=path, lowercase=lowercase)
    points = [cp for cp in range(1, sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]
    lines = ["x" + chr(cp) + "y" for cp in points]
    expected = reference_tokens(ref, lines, tokenizer.get_vocabulary(), lowercase)
    got = our_tokens(tokenizer, lines)
    mismatches, msg = report(f"code points {casing}", lines, expected, got)
    assert not mismatches, msg
