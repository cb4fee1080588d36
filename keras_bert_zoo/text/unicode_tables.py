"""The Unicode tables behind `BertTokenizer`, from Python's `unicodedata`.

google-research/bert classifies characters with the `unicodedata` of the Python that
runs it (3.11 here); TF's string ops follow a newer ICU. The tokenizer therefore gets
its character classes, as RE2 character classes, and the other per-character facts it
needs from here. All of them come from one pass over the 1.1M code points, made once per
process on first use (a few seconds).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import unicodedata

import numpy as np

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
_SURROGATES = range(0xD800, 0xE000)
_HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)  # NFD splits them; decomposition() says nothing


def is_dropped(codepoint: int, category: str) -> bool:
    """BERT's cleaning drops NUL, U+FFFD and control/format characters but tab, LF, CR."""
    return (
        codepoint in (0, 0xFFFD) or category in ("Cc", "Cf") and codepoint not in (0x09, 0x0A, 0x0D)
    )


def regex_class(codepoints) -> str:
    """An RE2 character class `[...]` matching exactly `codepoints`."""
    # numpy finds the runs: the unassigned code points alone are 830k (a Python loop
    # over them took 0.5 s of every process's start). Sorted and deduplicated by hand:
    # numpy 2.4's `np.unique` took 3 s on them.
    points = np.sort(np.fromiter(codepoints, dtype=np.int64))
    points = points[np.concatenate([[True], np.diff(points) != 0])] if points.size else points
    breaks = np.flatnonzero(np.diff(points) != 1)
    starts = points[np.concatenate([[0], breaks + 1])] if points.size else points
    ends = points[np.concatenate([breaks, [points.size - 1]])] if points.size else points
    parts = [
        f"\\x{{{low:X}}}" if low == high else f"\\x{{{low:X}}}-\\x{{{high:X}}}"
        for low, high in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    return "[" + "".join(parts) + "]"


@dataclasses.dataclass(frozen=True)
class UnicodeTables:
    """What the tokenizer needs to know about every code point.

    Attributes:
        classes: RE2 character classes by role: `control` (dropped by cleaning),
            `whitespace` (separates words), `split_keep` (punctuation and CJK, words of
            their own), `split_any` (both), `nonspacing` (Mn, stripped with accents),
            `exact_only` (unassigned code points and surrogates, which only the exact
            path handles as Python does).
        cased: the characters that `str.lower` changes or that are cased letters
            (what `lowercase_fixups` compares with TF's lower-casing).
        uncased_length_changes: `(code points, lengths)`: the code points whose
            normalized form (cleaned, lower-cased, NFD, marks stripped) has another
            UTF-8 length than they have, and that length.
        cased_length_changes: the same for cleaning alone (the dropped characters).
        whitespace_points, split_points, nonspacing_points: the code points of the
            `whitespace`, `split_keep` and `nonspacing` classes (for the tables of
            `core_wordpiece.py`).
    """

    classes: dict[str, str]
    cased: tuple[str, ...]
    uncased_length_changes: tuple[tuple[int, ...], tuple[int, ...]]
    cased_length_changes: tuple[tuple[int, ...], tuple[int, ...]]
    whitespace_points: tuple[int, ...]
    split_points: tuple[int, ...]
    nonspacing_points: tuple[int, ...]


@functools.lru_cache(maxsize=1)
def unicode_tables() -> UnicodeTables:
    """The tables, built in one pass over every code point (cached)."""
    control, whitespace, punctuation, nonspacing, unassigned, cased = [], [], [], [], [], []
    changed_points, changed_lengths = [], []
    for codepoint in range(sys.maxunicode + 1):
        if codepoint in _SURROGATES:  # they never occur in valid UTF-8
            continue
        char = chr(codepoint)
        category = unicodedata.category(char)
        if category == "Cn":
            # Three quarters of the code points are unassigned: none is cased, dropped,
            # whitespace, punctuation or decomposed, so they skip the checks below (the
            # pass took 2.7 s a process without this, 0.9 s with it).
            unassigned.append(codepoint)
            continue
        utf8_length = 1 + (codepoint >= 0x80) + (codepoint >= 0x800) + (codepoint >= 0x10000)
        lower = char.lower()
        if lower != char or category in ("Lu", "Lt", "Ll"):
            cased.append(char)
        if is_dropped(codepoint, category):
            control.append(codepoint)
            changed_points.append(codepoint)
            changed_lengths.append(0)
        else:
            # str.split() in the original also splits on U+2028/U+2029 (Zl/Zp).
            if category == "Zs" or char.isspace():
                whitespace.append(codepoint)
            if (
                lower != char
                or category == "Mn"
                or codepoint in _HANGUL_SYLLABLES
                or unicodedata.decomposition(char)
            ):
                normalized = "".join(
                    c
                    for c in unicodedata.normalize("NFD", lower)
                    if unicodedata.category(c) != "Mn"
                )
                length = len(normalized.encode("utf-8"))
                if length != utf8_length:
                    changed_points.append(codepoint)
                    changed_lengths.append(length)
        if (
            33 <= codepoint <= 47
            or 58 <= codepoint <= 64
            or 91 <= codepoint <= 96
            or 123 <= codepoint <= 126
            or category.startswith("P")
        ):
            punctuation.append(codepoint)
        if category == "Mn":
            nonspacing.append(codepoint)
    cjk = [codepoint for low, high in _CJK_RANGES for codepoint in range(low, high + 1)]
    return UnicodeTables(
        classes={
            "control": regex_class(control),
            "whitespace": regex_class(whitespace),
            "split_keep": regex_class(punctuation + cjk),
            "split_any": regex_class(whitespace + punctuation + cjk),
            "nonspacing": regex_class(nonspacing),
            # RE2 accepts the (invalid) UTF-8 encodings of surrogates as characters.
            "exact_only": regex_class(unassigned + list(_SURROGATES)),
        },
        cased=tuple(cased),
        uncased_length_changes=(tuple(changed_points), tuple(changed_lengths)),
        cased_length_changes=(tuple(control), (0,) * len(control)),
        whitespace_points=tuple(whitespace),
        split_points=tuple(punctuation + cjk),
        nonspacing_points=tuple(nonspacing),
    )


@dataclasses.dataclass(frozen=True)
class Decompositions:
    """Canonical decomposition facts for NFD in TF ops (`core_wordpiece.py`).

    Attributes:
        decompositions: `(code point, its NFD as code points)` for every code point
            whose NFD is not itself (Hangul syllables included).
        combining_classes: `(code point, canonical combining class)` for every
            code point of a class other than 0.
    """

    decompositions: tuple[tuple[int, tuple[int, ...]], ...]
    combining_classes: tuple[tuple[int, int], ...]


@functools.lru_cache(maxsize=1)
def decompositions() -> Decompositions:
    """The NFD tables, from `unicodedata` (cached)."""
    decomposed, combining_classes = [], []
    for codepoint in range(sys.maxunicode + 1):
        if codepoint in _SURROGATES:
            continue
        char = chr(codepoint)
        combining = unicodedata.combining(char)
        if combining:
            combining_classes.append((codepoint, combining))
        decomposition = unicodedata.decomposition(char)
        if (decomposition and not decomposition.startswith("<")) or (
            codepoint in _HANGUL_SYLLABLES
        ):
            nfd = unicodedata.normalize("NFD", char)
            if nfd != char:
                decomposed.append((codepoint, tuple(ord(c) for c in nfd)))
    return Decompositions(tuple(decomposed), tuple(combining_classes))


@functools.lru_cache(maxsize=1)
def lowercase_fixups() -> tuple[tuple[str, str], ...]:
    """(char, Python lower) pairs where `tf.strings.lower` disagrees with `str.lower`.

    TF's case tables lag Python 3.11's (Unicode 14 capitals such as U+2C2F are left
    unchanged by TF); each pair is re-mapped after `tf.strings.lower`.
    """
    import tensorflow as tf

    chars = list(unicode_tables().cased)
    with tf.init_scope():
        lowered = tf.strings.lower(tf.constant(chars), encoding="utf-8").numpy()
    return tuple(
        (char, char.lower())
        for char, low in zip(chars, lowered, strict=True)
        if low.decode("utf-8") != char.lower()
    )
