"""Reading the texts a search indexes or mines: a corpus, queries, training pairs.

Three layouts, chosen by the file's extension (or `file_format`):

- JSON lines, BEIR's `corpus.jsonl`: one object a line, `{"_id": ..., "title": ...,
  "text": ...}`; the title is optional, and a document's text is `title + " " + text`
  when it has one (what BEIR's and sentence-transformers' evaluators embed). Other keys
  (`metadata`) are not read.
- TSV (`.tsv`, `.txt` with tabs) and CSV (`.csv`, quoted fields) with a header line
  naming the columns.
- A plain text file (`.txt` or `--file_format=lines`): one text a line, its id its
  position from 0 (blank lines skipped).

Every row's columns are read through `read_rows`, so a missing column, an empty text
or a repeated id is one line naming the file and line.

Example:

```python
from keras_bert_zoo.search.corpus import read_corpus

corpus = read_corpus("beir/scifact/corpus.jsonl")
corpus.ids[0], corpus.texts[0]
```
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from keras_bert_zoo.tasks.sentence.readers import (
    InputFileError,
    jsonl_records,
    numbered_lines,
    read_delimited,
    read_text,
)

FILE_FORMATS = ("auto", "jsonl", "tsv", "csv", "lines")
_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv", ".csv": "csv", ".txt": "lines"}


class CorpusFileError(InputFileError):
    """A corpus, queries or pairs file that is not what it must be (`path:line: ...`)."""


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Texts with their ids, in file order.

    Attributes:
        ids: str ids, unique.
        texts: the texts (a BEIR document's title and text joined by a space).
        path: the file they were read from.
    """

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    path: str = ""

    def __len__(self) -> int:
        return len(self.texts)


def file_format_of(path: str, chosen: str = "auto") -> str:
    """`chosen`, or the layout `path`'s extension names (`jsonl`, `tsv`, `csv`,
    `lines`)."""
    if chosen not in FILE_FORMATS:
        raise CorpusFileError(f"{path}: file format {chosen!r}; expected one of {FILE_FORMATS}")
    if chosen != "auto":
        return chosen
    extension = os.path.splitext(path)[1].lower()
    if extension not in _EXTENSIONS:
        raise CorpusFileError(
            f"{path}: cannot tell the layout from the extension {extension or '(none)'!r}; "
            f"name the file .jsonl, .tsv, .csv or .txt, or pass the format flag"
        )
    return _EXTENSIONS[extension]


def _jsonl_rows(path: str, columns: Sequence[str], optional: Sequence[str]):
    # The one reader of JSON lines; BEIR's records hold more keys (`metadata` objects)
    # than a corpus reads, so the columns are picked here rather than by `read_jsonl`.
    for number, record in jsonl_records(path, description="JSON lines file"):
        row = {}
        for column in (*columns, *optional):
            value = record.get(column)
            if value is None:
                if column in optional:
                    continue
                raise CorpusFileError(
                    f"{path}:{number}: no key {column!r} (the record's keys: {sorted(record)})"
                )
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise CorpusFileError(
                    f"{path}:{number}: key {column!r} holds {type(value).__name__}, expected a text"
                )
            row[column] = str(value)
        yield number, row


def _delimited_rows(path: str, file_format: str, columns: Sequence[str], optional: Sequence[str]):
    table = read_delimited(
        path,
        delimiter="," if file_format == "csv" else "\t",
        quoting=file_format == "csv",
        description=f"{file_format.upper()} file with a header line",
    )
    positions = {column: table.column_index(column) for column in columns}
    for column in optional:
        position = table.column_index(column, required=False)
        if position is not None:
            positions[column] = position
    for number, fields in table.rows:
        yield number, {column: fields[position] for column, position in positions.items()}


def read_rows(
    path: str,
    columns: Sequence[str],
    *,
    optional: Sequence[str] = (),
    file_format: str = "auto",
) -> list[tuple[int, dict[str, str]]]:
    """`(line number, {column: text})` for every row of a JSONL, TSV or CSV file.

    Args:
        path: the file.
        columns: the columns (JSON keys, header names) every row must hold.
        optional: columns read when present.
        file_format: `auto` (by extension), `jsonl`, `tsv` or `csv`.

    Raises:
        FileNotFoundError, CorpusFileError: the file is missing, empty or malformed, or
            lacks a column (the message names the file and line).
    """
    file_format = file_format_of(path, file_format)
    if file_format == "lines":
        raise CorpusFileError(f"{path}: a plain text file has no columns {list(columns)}")
    if file_format == "jsonl":
        return list(_jsonl_rows(path, columns, optional))
    return list(_delimited_rows(path, file_format, columns, optional))


def read_corpus(
    path: str,
    *,
    file_format: str = "auto",
    id_column: str | None = None,
    text_column: str = "text",
    title_column: str | None = "title",
    description: str = "corpus",
) -> Corpus:
    """The texts of a corpus (or queries) file and their ids (see the module docstring).

    Args:
        path: the file.
        file_format: `auto`, `jsonl`, `tsv`, `csv` or `lines`.
        id_column: the id's column, required when given; None: `_id` (BEIR's) in a
            JSONL file, `id` in a TSV/CSV, each numbering the rows from 0 when absent.
        text_column: the text's column.
        title_column: an optional title column, joined before the text; None: none.
        description: what the file holds, for the messages.

    Raises:
        FileNotFoundError, CorpusFileError: a missing or malformed file, a row without
            a text, an id given twice, no rows.
    """
    file_format = file_format_of(path, file_format)
    ids, texts, seen = [], [], {}
    required = [text_column] if id_column is None else [text_column, id_column]
    if id_column is None:
        id_column = "_id" if file_format == "jsonl" else "id"
    if file_format == "lines":
        lines = numbered_lines(read_text(path, description=description))
        rows = [
            (number, {id_column: str(index), text_column: line.strip()})
            for index, (number, line) in enumerate(lines)
        ]
    else:
        optional = [c for c in (id_column, title_column) if c not in (None, *required)]
        rows = read_rows(path, required, optional=optional, file_format=file_format)
    for index, (number, row) in enumerate(rows):
        text = row[text_column].strip()
        title = row.get(title_column, "").strip() if title_column else ""
        text = f"{title} {text}" if title and text else title or text
        if not text:
            raise CorpusFileError(f"{path}:{number}: the {description} row has an empty text")
        identifier = row.get(id_column, str(index)).strip()
        if not identifier:
            raise CorpusFileError(f"{path}:{number}: the {description} row has an empty id")
        if identifier in seen:
            raise CorpusFileError(
                f"{path}:{number}: id {identifier!r} again (first at line {seen[identifier]})"
            )
        seen[identifier] = number
        ids.append(identifier)
        texts.append(text)
    if not texts:
        raise CorpusFileError(f"{path}: no rows (expected the {description})")
    return Corpus(tuple(ids), tuple(texts), path)
