"""Plain sentences from MediaWiki wikitext: markup stripping and sentence splitting.

``wikitext_to_sentences(text)`` turns the wikitext of one article into its prose, one
sentence per string, in order. What is removed and what is kept:

* removed with their content: HTML comments, ``<ref>...</ref>`` and ``<ref .../>``
  (and the other tags whose content is not prose: math, chem, code blocks, galleries,
  timelines, scores, maps, references lists; see ``DROPPED_TAGS``), templates and
  parser functions ``{{...}}`` (nested to any depth), tables ``{| ... |}`` (nested,
  templates inside), file/image/media links with their captions, category links,
  interlanguage links ``[[de:...]]``, headings, horizontal rules, magic words
  (``__NOTOC__``), bare URLs;
* kept as text: the display text of internal links (``[[a|b]]`` -> ``b``,
  ``[[a]]`` -> ``a``, ``[[a (b)|]]`` -> ``a``, link trails ``[[bus]]es`` -> ``buses``),
  the label of external links (``[http://x.org label]`` -> ``label``), the text of
  list items and definition lists (markers ``* # : ;`` stripped), the content of
  formatting tags (``<small>``, ``<sub>``, ``<blockquote>``, ...), HTML entities
  decoded (``&nbsp;`` -> space).

Braces and brackets are matched with a stack, so nesting (a template inside a table
inside a template, a link inside a file caption) is handled in one linear pass. An
unclosed ``{{`` or ``[[`` is left as text rather than swallowing the rest of the
article.

Sentence splitting is rule based (``split_sentences``) and works for every script:

* ``.``, ``!`` or ``?`` (optionally followed by closing quotes or brackets) end a
  sentence when whitespace and then the start of a sentence follow: an upper-case or
  title-case letter of any script (Latin, Cyrillic, Greek, Armenian, ...), a digit, or
  a letter of a script without case (Arabic, Hebrew, Devanagari, CJK, ...), optionally
  after an opening quote or bracket (``"``, ``«``, ``„``, ``¿``, ``(``, ...); unless the
  word before the period is a known abbreviation (``Dr.``, ``e.g.``, ``St.``, month
  names, a few common ones of other languages: ``напр.``, ``ул.``, ``bzw.``, ...), a
  single letter (initials: ``J. R. R. Tolkien``, ``г.``) or a dotted acronym (``U.S.``,
  ``т.е.``);
* the sentence-final punctuation of scripts that have their own end a sentence
  whatever follows, without needing whitespace: CJK ``。！？｡``, the danda ``।`` and
  ``॥`` (Devanagari, Bengali, ...), Arabic ``؟`` and Urdu ``۔``, Ethiopic ``።`` and
  ``፧``, Myanmar ``။``, Khmer ``។``, Armenian ``։``.

Limits: an abbreviation missing from the list splits a sentence when a capital or a
caseless letter follows (``approx.``-like words not listed), a sentence ending in an
acronym or an initial before a capitalised word is not split (``... in the U.S. The
next ...``), sentences that begin in lower case are never split off, and scripts that
mark no sentence end at all (Thai, Lao) keep a paragraph as one sentence. For BERT's
next-sentence task these errors only shift segment boundaries; they never lose text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

__all__ = ["clean_wikitext", "split_sentences", "wikitext_to_sentences", "DROPPED_TAGS"]

# Tags whose content is not running prose: dropped with their content.
DROPPED_TAGS = (
    "ref",
    "references",
    "math",
    "chem",
    "ce",
    "score",
    "gallery",
    "timeline",
    "syntaxhighlight",
    "source",
    "pre",
    "graph",
    "mapframe",
    "maplink",
    "templatedata",
    "templatestyles",
    "imagemap",
    "hiero",
    "inputbox",
    "categorytree",
    "noinclude",
    "table",
)

# Link namespaces whose links are not prose (captions included).
_DROPPED_LINK_NAMESPACES = frozenset({"file", "image", "media", "category"})
# Interwiki prefixes whose link text IS prose ([[wikt:word|word]]).
_TEXT_INTERWIKI = frozenset(
    {"w", "wikt", "wiktionary", "wikipedia", "s", "q", "b", "n", "v", "voy", "d", "m", "c"}
)
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{2,8})*\Z")

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_DROPPED_TAG_PAIR = re.compile(
    r"<(" + "|".join(DROPPED_TAGS) + r")\b(?:[^>]*[^/>])?>.*?</\1\s*>", re.S | re.I
)
_DROPPED_TAG_SINGLE = re.compile(r"<(?:" + "|".join(DROPPED_TAGS) + r")\b[^>]*/>", re.I)
_NOWIKI = re.compile(r"<nowiki\s*>(.*?)</nowiki\s*>", re.S | re.I)
_HTML_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?/?>")
_EXTERNAL_LINK = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]*:)?//[^\s\]]+|mailto:[^\s\]]+")
# A URL's trailing punctuation belongs to the sentence.
_BARE_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>\]\[{}|]*[^\s<>\]\[{}|.,;:!?)'\"]")
_BOLD_ITALIC = re.compile(r"'{2,}")
_HEADING = re.compile(r"\s*(=+).*\1\s*\Z")
_LIST_MARKER = re.compile(r"\s*[*#:;]+\s*")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_EMPTY_PARENTHESES = re.compile(r"\(\s*[,;:]?\s*\)")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?)])")
_SPACES = re.compile(r"[ \t\u00a0\u2009\u200a\u202f]+")


def _matching_pairs(text: str, opening: str, closing: str) -> dict[int, int]:
    """Position of each matched `opening` character -> position of its `closing` one."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    pattern = re.compile(re.escape(opening) + "|" + re.escape(closing))
    for match in pattern.finditer(text):
        if match.group() == opening:
            stack.append(match.start())
        elif stack:
            pairs[stack.pop()] = match.start()
    return pairs


def _at_line_start(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return not text[line_start:position].strip()


def _replace_outermost(
    text: str,
    opening: str,
    closing: str,
    replacement: Callable[[int, int, dict[int, int]], str | None],
) -> str:
    """`text` with matched `opening`...`closing` spans replaced, outermost first.

    `replacement(start, end, pairs)` gets a span's first and last positions and every
    matched pair (`_matching_pairs`); it returns the span's new text, or None to keep
    the brackets as they are and look inside them. A span inside a replaced one is
    gone with it.
    """
    if opening not in text:
        return text
    pairs = _matching_pairs(text, opening, closing)
    out = []
    position = 0
    for start in sorted(pairs):
        if start < position:
            continue  # inside a span already replaced
        end = pairs[start]
        new_text = replacement(start, end, pairs)
        if new_text is None:
            continue
        out.append(text[position:start])
        out.append(new_text)
        position = end + 1
    out.append(text[position:])
    return "".join(out)


def _remove_braces(text: str) -> str:
    """Drops templates `{{...}}` and tables `{|...|}` (a table opens at a line start)."""

    def template_or_table(start: int, end: int, pairs: dict[int, int]) -> str | None:
        following = text[start + 1 : start + 2]
        if following == "{" or (following == "|" and _at_line_start(text, start)):
            return ""
        return None

    return _replace_outermost(text, "{", "}", template_or_table)


def _pipe_trick(target: str) -> str:
    """`[[a (b)|]]` and `[[ns:a|]]` display as `a`."""
    target = re.sub(r"\s*\([^()]*\)\s*\Z", "", target)
    return target.split(":", 1)[-1] if ":" in target else target


def _link_text(inner: str) -> str:
    """Display text of an internal link `[[inner]]` ("" for non-prose links)."""
    target, pipe, display = inner.partition("|")
    target = target.strip()
    leading_colon = target.startswith(":")
    if leading_colon:
        target = target[1:].strip()
    if ":" in target:
        prefix = target.split(":", 1)[0].strip().lower()
        if prefix in _DROPPED_LINK_NAMESPACES and not leading_colon:
            return ""
        if (
            not leading_colon
            and not pipe
            and prefix not in _TEXT_INTERWIKI
            and _LANGUAGE_CODE.match(prefix)
        ):
            return ""  # interlanguage link
    if not pipe:
        return target.lstrip("#")
    if not display.strip():
        return _pipe_trick(target)
    return _replace_links(display)


def _replace_links(text: str) -> str:
    """Internal links -> their display text; external links -> their label."""

    def link_text(start: int, end: int, pairs: dict[int, int]) -> str | None:
        if text.startswith("[[", start) and pairs.get(start + 1) == end - 1:
            return _link_text(text[start + 2 : end - 1])
        url = _EXTERNAL_LINK.match(text, start + 1)
        if url is None:
            return None  # a literal bracket
        return _replace_links(text[url.end() : end].strip())

    return _replace_outermost(text, "[", "]", link_text)


def _clean_line(line: str) -> str:
    line = _LIST_MARKER.sub("", line, count=1) if line[:1] in "*#:;" else line
    line = _MAGIC_WORD.sub("", line)
    line = _BARE_URL.sub("", line)
    line = html.unescape(line)
    line = _SPACES.sub(" ", line)
    line = _EMPTY_PARENTHESES.sub("", line)
    line = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", line)
    return _SPACES.sub(" ", line).strip()


def clean_wikitext(text: str) -> list[str]:
    """Prose paragraphs of one article's wikitext (one per non-empty output line).

    Args:
        text: str. Wikitext as stored in a dump's ``<text>`` element (XML entities
            already decoded by the XML parser).

    Returns:
        list of str: paragraphs and list items, markup removed, in article order.

    Example:

    ```python
    clean_wikitext("'''Paris''' is the [[capital city|capital]] of [[France]].<ref>x</ref>")
    # ["Paris is the capital of France."]
    ```
    """
    text = _COMMENT.sub("", text)
    text = _NOWIKI.sub(lambda m: m.group(1).replace("[", "&#91;").replace("{", "&#123;"), text)
    text = _DROPPED_TAG_SINGLE.sub("", text)
    text = _DROPPED_TAG_PAIR.sub("", text)
    text = _remove_braces(text)
    text = _replace_links(text)
    text = _BOLD_ITALIC.sub("", text)
    text = _HTML_TAG.sub("", text)
    paragraphs = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith(("|", "!", "----")) or _HEADING.match(stripped):
            continue
        cleaned = _clean_line(stripped)
        if any(c.isalnum() for c in cleaned):
            paragraphs.append(cleaned)
    return paragraphs


# ------------------------------------------------------------------- sentence splitting

_ABBREVIATIONS = frozenset(
    """
    mr mrs ms dr prof sr jr st mt ft rev hon gen col lt capt sgt maj cmdr adm gov sen rep
    pres supt insp messrs mme mlle
    e.g i.e cf vs viz al approx ca c b d fl r op no nos vol vols pp p ch chap ed eds fig figs
    inc ltd co corp bros dept univ assn est
    jan feb mar apr jun jul aug sep sept oct nov dec
    u.s u.k u.n
    nr bzw vgl usw sra dra pág
    вж напр др гр ул бул пл св проф акад доц инж стр бел ок им кв млн млрд хил см пр
    """.split()
)
# Quotes and brackets that may open a sentence, and close one (“ closes in German and
# Bulgarian: „...“).
_OPENERS = "\"'\u201c\u2018\u201e\u201a\u00ab\u2039\u00bf\u00a1([\u300c\u300e\uff08\u300a\u3008"
_CLOSERS = "\"'\u201d\u2019\u201c\u00bb\u203a)]\u300d\u300f\uff09\u300b\u3009"
# A sentence ends at `.`, `!` or `?` (then optional closers) followed by whitespace and
# what may start a sentence (`_starts_sentence` decides on the letter or digit).
_SENTENCE_END = re.compile(
    rf"([.!?]+)([{re.escape(_CLOSERS)}]*)(\s+)(?=[{re.escape(_OPENERS)}]?(\w))"
)
# The sentence-final punctuation of scripts that have their own: a sentence ends after
# it (and its closers) whatever follows.
_SCRIPT_FULL_STOPS = (
    "\u3002\uff01\uff1f\uff61"  # CJK 。！？ and the half-width ｡
    "\u0964\u0965"  # danda । and double danda ॥ (Devanagari, Bengali, ...)
    "\u061f\u06d4"  # Arabic question mark ؟, Urdu full stop ۔
    "\u1362\u1367"  # Ethiopic full stop ። and question mark ፧
    "\u104b\u17d4\u0589"  # Myanmar ။, Khmer ។, Armenian full stop ։
)
_SCRIPT_SENTENCE_END = re.compile(rf"([{_SCRIPT_FULL_STOPS}]+[{re.escape(_CLOSERS)}]*)")
_WORD_BEFORE = re.compile(r"(\S+)\Z")
_DOTTED_ACRONYM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]\Z")


def _starts_sentence(character: str) -> bool:
    """An upper-case or title-case letter of any script, a digit, or a letter of a script
    without case (neither upper nor lower case: Arabic, Devanagari, CJK, ...)."""
    if character.isdigit() or character.isupper() or character.istitle():
        return True
    return character.isalpha() and not character.islower()


def _is_abbreviation(word: str) -> bool:
    word = word.lstrip(_OPENERS)
    if len(word) == 1 and word.isalpha():
        return True  # an initial
    if _DOTTED_ACRONYM.match(word):
        return True
    return word.lower() in _ABBREVIATIONS


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (see the module docstring for the rules and limits).

    Example:

    ```python
    split_sentences("Dr. Smith arrived at 5 p.m. on Monday. He left. J. R. R. Tolkien wrote.")
    # ["Dr. Smith arrived at 5 p.m. on Monday.", "He left.", "J. R. R. Tolkien wrote."]
    split_sentences("Той поправя календара. В него има корекции.")
    # ["Той поправя календара.", "В него има корекции."]
    ```
    """
    pieces = []
    for part in _SCRIPT_SENTENCE_END.split(paragraph):
        if _SCRIPT_SENTENCE_END.fullmatch(part) and pieces:
            pieces[-1] += part
        else:
            pieces.append(part)
    sentences = []
    for piece in pieces:
        start = 0
        for match in _SENTENCE_END.finditer(piece):
            if not _starts_sentence(match.group(4)):
                continue
            if match.group(1) == ".":
                before = _WORD_BEFORE.search(piece, 0, match.start(1))
                if before is not None and _is_abbreviation(before.group(1)):
                    continue
            end = match.end(2)
            sentences.append(piece[start:end].strip())
            start = match.end(3)
        sentences.append(piece[start:].strip())
    return [s for s in sentences if s and any(c.isalnum() for c in s)]


def wikitext_to_sentences(text: str) -> list[str]:
    """One article's prose as sentences: ``clean_wikitext`` then ``split_sentences``."""
    return [s for paragraph in clean_wikitext(text) for s in split_sentences(paragraph)]
