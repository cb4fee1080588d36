"""An independent pure-Python statement of google-research/bert's WordPiece tokenizer.

Written from the algorithm's definition in google-research/bert ``tokenization.py``
(``BasicTokenizer`` followed by ``WordpieceTokenizer``), used as the parity oracle
for ``keras_bert_zoo.text.BertTokenizer``. It deliberately shares no code with the
library under test.

Details that matter for parity and are easy to get wrong:

* Cleaning drops NUL, U+FFFD and characters of category Cc or Cf (tab, newline and
  carriage return excepted); the original checks exactly ``("Cc", "Cf")``, so
  private-use (Co), surrogate (Cs) and unassigned (Cn) characters are kept.
* "Whitespace" while cleaning is space, tab, newline, carriage return and Zs. The
  later splits use ``str.split()``, which also splits on U+2028/U+2029 and on the
  separators U+001C..U+001F, U+0085 (those last ones are already dropped as Cc).
* Lower-casing (``str.lower``), NFD and dropping Mn happen per whitespace token,
  after CJK ideographs got spaces around them and before punctuation splitting.
* A word longer than ``max_chars_per_token`` characters (code points) becomes
  ``[UNK]``, as does a word of which any part cannot be matched. The limit is the
  original's 200, stated here as a literal (``MAX_INPUT_CHARS_PER_WORD``), never
  read from the library under test (Hugging Face's port uses 100).
"""

from __future__ import annotations

import unicodedata

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


def is_whitespace(char: str) -> bool:
    if char in " \t\n\r":
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def clean_text(text: str) -> str:
    out = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or is_control(char):
            continue
        out.append(" " if is_whitespace(char) else char)
    return "".join(out)


def space_cjk(text: str) -> str:
    out = []
    for char in text:
        if is_cjk(ord(char)):
            out.extend((" ", char, " "))
        else:
            out.append(char)
    return "".join(out)


def strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def split_on_punctuation(text: str) -> list[str]:
    pieces: list[list[str]] = []
    start_new = True
    for char in text:
        if is_punctuation(char):
            pieces.append([char])
            start_new = True
        else:
            if start_new:
                pieces.append([])
            start_new = False
            pieces[-1].append(char)
    return ["".join(p) for p in pieces]


def basic_tokenize(text: str, lowercase: bool) -> list[str]:
    text = space_cjk(clean_text(text))
    words = []
    for token in text.strip().split():
        if lowercase:
            token = strip_accents(token.lower())
        words.extend(split_on_punctuation(token))
    return " ".join(words).strip().split()


class _CharacterMap(dict):
    """`str.translate` table of `clean_text` then `space_cjk`, one character at a time
    (both map each character on its own): dropped, a space, " c " or itself. Filled
    on first sight of each code point from the same predicates."""

    def __missing__(self, cp: int) -> str:
        char = chr(cp)
        if cp == 0 or cp == 0xFFFD or is_control(char):
            out = ""
        elif is_whitespace(char):
            out = " "
        elif is_cjk(cp):
            out = f" {char} "
        else:
            out = char
        self[cp] = out
        return out


_CHARACTER_MAP = _CharacterMap()


def basic_tokenize_memo(text: str, lowercase: bool, memo: dict) -> list[str]:
    """`basic_tokenize(text, lowercase)`, with the per-character steps done by one
    `str.translate` and each whitespace token's words cached in `memo`: the same
    statement, only faster (tests/text checks the two agree)."""
    words = []
    for token in text.translate(_CHARACTER_MAP).split():
        found = memo.get(token)
        if found is None:
            normal = strip_accents(token.lower()) if lowercase else token
            found = memo[token] = " ".join(split_on_punctuation(normal)).split()
        words.extend(found)
    return words


# google-research/bert tokenization.py, FullTokenizer.__init__:
#   self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
# with WordpieceTokenizer.__init__(self, vocab, unk_token="[UNK]",
#   max_input_chars_per_word=200).
MAX_INPUT_CHARS_PER_WORD = 200


def wordpiece_word(
    word: str, vocab, unk: str = "[UNK]", max_chars_per_token: int = MAX_INPUT_CHARS_PER_WORD
) -> list[str]:
    if len(word) > max_chars_per_token:
        return [unk]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        found = None
        while start < end:
            piece = word[start:end]
            if start > 0:
                piece = "##" + piece
            if piece in vocab:
                found = piece
                break
            end -= 1
        if found is None:
            return [unk]
        pieces.append(found)
        start = end
    return pieces


def tokenize(
    text: str,
    vocab,
    lowercase: bool,
    unk: str = "[UNK]",
    max_chars_per_token: int = MAX_INPUT_CHARS_PER_WORD,
    memo: dict | None = None,
) -> list[str]:
    """Word pieces of `text` as strings, exactly as the original FullTokenizer.

    `memo` (a dict) caches the pieces of each word across calls: it only saves time.
    """
    if memo is not None:
        # One cache per limit: a memo shared across limits must not mix them; the
        # basic tokenizer's words per casing.
        words = basic_tokenize_memo(text, lowercase, memo.setdefault(("basic", lowercase), {}))
        memo = memo.setdefault(("max_chars_per_token", max_chars_per_token), {})
    else:
        words = basic_tokenize(text, lowercase)
    out = []
    for word in words:
        for token in word.strip().split():
            if memo is None:
                out.extend(wordpiece_word(token, vocab, unk, max_chars_per_token))
                continue
            if token not in memo:
                memo[token] = wordpiece_word(token, vocab, unk, max_chars_per_token)
            out.extend(memo[token])
    return out


def load_vocab(path: str) -> dict[str, int]:
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.rstrip("\n").strip()] = index
    return vocab
