"""CoNLL-style column files: `TaggedSentence` and `read_column_file`.

One word per line with space- or tab-separated columns, blank lines between
sentences, `-DOCSTART-` lines between documents (counted, and written back with the
predictions). Malformed lines raise `ValueError` naming the file and line, and what
is missing.

Example:

```python
from keras_bert_zoo.tasks.tagging import read_column_file

sentences = read_column_file("conll2003/eng.train", "train")  # token POS chunk NER
sentences[0].words, sentences[0].tags  # ("EU", "rejects", ...), ("I-ORG", "O", ...)
```
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

from keras_bert_zoo.utils.errors import UserError

DOCUMENT_START = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a column file.

    Attributes:
        example_id: `"{split}-{index}"`.
        words: the words, as in the file.
        tags: one tag per word, or None for an unlabelled file.
        documents_before: `-DOCSTART-` lines between the previous sentence and this one
            (written back with the predictions).
        source: `"path:line"` of the sentence's first word (`"tfds:split[index]"` for
            tensorflow-datasets).
    """

    example_id: str
    words: tuple[str, ...]
    tags: tuple[str, ...] | None
    documents_before: int = 0
    source: str = ""


_BLANKS = re.compile(r"[ \t]+")


def _blank_fields(line: str) -> list[str]:
    """Columns split at runs of spaces and tabs (conlleval's separators), and nothing
    else: a word may hold a no-break or ideographic space, which `str.split()` cuts."""
    line = line.strip(" \t")
    return _BLANKS.split(line) if line else []


def split_blank_separated(text: str) -> list[str]:
    """The words of `text` separated by runs of spaces and tabs, as the columns of a
    line (a no-break or ideographic space stays inside its word).

    Args:
        text: one sentence, its words separated by blanks.
    """
    return _blank_fields(text)


def _fields(line: str, delimiter: str) -> list[str]:
    if delimiter == "tab":
        return [field.strip() for field in line.split("\t")]
    return _blank_fields(line)


def _is_document_start(line: str) -> bool:
    """A `-DOCSTART-` line, whatever separates its columns (allennlp's CoNLL-2003
    copy writes them with spaces among tab-separated words)."""
    fields = _blank_fields(line)
    return bool(fields) and fields[0] == DOCUMENT_START


def _detect_delimiter(lines: Sequence[tuple[int, str]]) -> tuple[str, int | None]:
    """`("tab", line)` when the tabs matter: the first word line holds a tab, and a
    line (the one returned) has as many tab-separated fields as it, but one holds a
    space or is empty (a word with spaces, an empty column), so only tabs separate
    columns. Otherwise `("space", None)`: any run of spaces and tabs, so each line
    may use either (as conlleval reads)."""
    word_lines = [(n, line) for n, line in lines if line.strip() and not _is_document_start(line)]
    if not word_lines or "\t" not in word_lines[0][1]:
        return "space", None
    count = len(_fields(word_lines[0][1], "tab"))
    for number, line in word_lines:
        if "\t" in line:
            fields = _fields(line, "tab")
            if len(fields) == count and fields != _blank_fields(line):
                return "tab", number
    return "space", None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _layout(count: int, word: int, tag: int | None) -> str:
    """The file's columns, e.g. `word ... tag` (`...`: the other columns)."""
    slots = ["..."] * count
    slots[word] = "word"
    if tag is not None:
        slots[tag] = "tag"
    return " ".join(s for i, s in enumerate(slots) if s != "..." or i == 0 or slots[i - 1] != "...")


def _column_count_error(
    path, number, line, fields, tabs_reason, expected_columns, word_column, tag_column
) -> ValueError:
    """The error for a line whose column count differs from the file's, naming what
    is missing: `path:58: the word 'EU' has no tag: 1 column where the file's lines
    have 4 (word ... tag, as on line 3)`."""
    count, first = expected_columns
    word = word_column % count
    tag = None if tag_column is None else tag_column % count
    columns = (
        f"{_plural(len(fields), 'column')} where the file's lines have {count} "
        f"({_layout(count, word, tag)}, as on line {first})"
    )
    shown = f": {line!r}"
    if len(fields) > count:
        problem = columns + ", a column too many"
    elif word >= len(fields):
        problem = "a column is missing: " + columns
    elif tag is not None and tag > word and len(fields) == word + 1:
        problem = f"the word {fields[word]!r} has no tag: " + columns
        if line.strip() == fields[word]:
            shown = ""  # the line is the word
    else:
        problem = f"the word {fields[word]!r} is missing a column: " + columns
    if tabs_reason and fields != _blank_fields(line):
        problem += f"; columns are split at tabs alone ({tabs_reason})"
    return UserError(f"{path}:{number}: {problem}{shown}")


def _read_lines(path: str, encoding: str) -> list[tuple[int, str]]:
    """`(line number, text)` pairs; undecodable bytes raise naming the line."""
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as e:
                raise UserError(
                    f"{path}:{number}: not valid {encoding} ({e.reason} at byte {e.start}); "
                    "pass --encoding with the file's encoding (for example --encoding=latin-1)"
                ) from e
            lines.append((number, text.rstrip("\r\n")))
    return lines


def read_column_file(
    path: str,
    split: str,
    *,
    word_column: int = 0,
    tag_column: int = -1,
    delimiter: str = "auto",
    encoding: str = "utf-8",
    allow_unlabelled: bool = False,
    known_tags: Sequence[str] | None = None,
    known_tags_source: str = "",
) -> list[TaggedSentence]:
    """Sentences of a CoNLL-style column file.

    One word per line with space- or tab-separated columns, blank lines between
    sentences, `-DOCSTART-` lines between documents (counted, not kept as words; seen
    whatever their separator). Every line must have as many columns as the file's first
    word line.

    Args:
        path: the file.
        split: split name, for the example ids.
        word_column: index of the word column (negative counts from the end).
        tag_column: index of the tag column.
        delimiter: `"space"` (any run of spaces or tabs, as conlleval: each line may
            use either), `"tab"` (exactly one tab, so words may hold spaces) or
            `"auto"`: tab when the first word line holds one and the tabs matter (a
            line with as many tab-separated fields has one holding a space, or an
            empty one), space otherwise, so a file of tab-separated words and
            space-separated `-DOCSTART-` lines reads as the same file with spaces.
        encoding: the file's text encoding.
        allow_unlabelled: a file whose lines hold one column is read as words without
            tags (a test file to tag); otherwise a tag column is required.
        known_tags: when given, every tag must be one of these.
        known_tags_source: where `known_tags` come from, for the error message.

    Raises:
        ValueError: naming the file and line, for a line with another number of
            columns (a word with no tag names the word: `eng.train:58: the word 'EU'
            has no tag: 1 column where the file's lines have 4 (word ... tag, as on
            line 3)`), a missing tag column or a tag outside `known_tags`.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    lines = _read_lines(path, encoding)
    if delimiter not in ("auto", "space", "tab"):
        raise UserError(f"delimiter must be 'auto', 'space' or 'tab', got {delimiter!r}")
    tabs_reason = "delimiter='tab'" if delimiter == "tab" else ""  # for the errors
    if delimiter == "auto":
        delimiter, tabs_line = _detect_delimiter(lines)
        if tabs_line is not None:
            tabs_reason = f"a field of line {tabs_line} holds a space or is empty"
    known = None if known_tags is None else frozenset(known_tags)
    sentences: list[TaggedSentence] = []
    expected_columns = None  # (count, line number that set it)
    labelled = True
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    documents_before = 0

    def close_sentence():
        nonlocal words, tags, documents_before
        if words:
            sentences.append(
                TaggedSentence(
                    example_id=f"{split}-{len(sentences)}",
                    words=tuple(words),
                    tags=tuple(tags) if labelled else None,
                    documents_before=documents_before,
                    source=f"{path}:{first_line}",
                )
            )
            words, tags, documents_before = [], [], 0

    for number, line in lines:
        if not line.strip():
            close_sentence()
            continue
        if _is_document_start(line):
            close_sentence()
            documents_before += 1
            continue
        fields = _fields(line, delimiter)
        if expected_columns is None:
            if len(fields) == 1 and allow_unlabelled:
                labelled = False
            elif len(fields) < 2:
                raise UserError(
                    f"{path}:{number}: expected a word and a tag column, found 1 column: {line!r}"
                )
            needed = 1
            if labelled:  # an unlabelled file holds the words alone
                needed = max(
                    word_column + 1 if word_column >= 0 else -word_column,
                    tag_column + 1 if tag_column >= 0 else -tag_column,
                )
            if len(fields) < needed:
                raise UserError(
                    f"{path}:{number}: {len(fields)} columns, but word_column={word_column} "
                    f"and tag_column={tag_column} need {needed}: {line!r}"
                )
            expected_columns = (len(fields), number)
        elif len(fields) != expected_columns[0]:
            raise _column_count_error(
                path,
                number,
                line,
                fields,
                tabs_reason,
                expected_columns,
                word_column if labelled else 0,
                tag_column if labelled else None,
            )
        if not words:
            first_line = number
        words.append(fields[word_column] if labelled else fields[0])
        if labelled:
            tag = fields[tag_column]
            if known is not None and tag not in known:
                raise UserError(
                    f"{path}:{number}: unknown tag {tag!r}; the tags are {sorted(known)}"
                    + (f" ({known_tags_source})" if known_tags_source else "")
                )
            tags.append(tag)
    close_sentence()
    return sentences
