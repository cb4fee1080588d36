"""Reading delimited text files with errors that name the file and line.

The sentence tasks read GLUE's TSV files, user TSV/CSV and JSONL files and
fastText-style `__label__<name> <text>` lines through these functions, so every malformed input gets
the same kind of message: `path:line: what is wrong (what was expected)`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from collections.abc import Sequence

from absl import logging

from keras_bert_zoo.tasks._shared import decode_text
from keras_bert_zoo.utils.errors import UserError

FASTTEXT_LABEL_PREFIX = "__label__"


class InputFileError(UserError):
    """Malformed input: the message starts with `path:line:` where the problem is."""


def read_text(path: str, encoding: str = "utf-8", *, description: str = "input file") -> str:
    """The whole of `path` decoded with `encoding` (a leading byte order mark removed).

    Raises:
        FileNotFoundError: `path` does not exist (the message says what it should hold).
        InputFileError: the file is empty, or is not valid `encoding` (the message
            gives the line and byte offset of the first bad byte and the flag to pass).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (expected the {description})")
    with open(path, "rb") as f:
        data = f.read()
    if not data.strip():
        raise InputFileError(f"{path}: the file is empty (expected the {description})")
    return decode_text(data, path, encoding, InputFileError)


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """`(line_number, line)` for every non-blank line, numbered from 1.

    Lines end at `\\n` only (a trailing `\\r` is dropped): `str.splitlines` would also
    break at U+2028, form feeds and other separators that occur inside real sentences.
    """
    lines = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            lines.append((number, line))
    return lines


@dataclasses.dataclass(frozen=True)
class Table:
    """Rows of a delimited file.

    Attributes:
        path: the file.
        header: the column names of the first line, or None for a header-less file.
        rows: `(line_number, fields)` for every data row, in file order.
    """

    path: str
    header: tuple[str, ...] | None
    rows: list[tuple[int, tuple[str, ...]]]

    def column_index(
        self, column: str | int, *, required: bool = True, option: str | None = None
    ) -> int | None:
        """Position of `column`: a header name, or a 0-based position (an int, or digits
        that are not a column name).

        Args:
            column: the name or position.
            required: whether a missing column is an error (else None).
            option: the task option (and flag) that names the column, `label_column`:
                the message of a missing column says to pass it.

        Returns None for a missing optional column; a missing required column raises
        `InputFileError` listing the columns the file has (and the flag that names it).
        """
        # The flag to pass, which is what the user can change without editing the file.
        fix = f"; pass --{option} with the column's name" if option else ""
        if isinstance(column, int) or (self.header is None and str(column).isdigit()):
            index = int(column)
            width = len(self.header) if self.header else len(self.rows[0][1]) if self.rows else 0
            if index < width:
                return index
            if not required:
                return None
            raise InputFileError(
                f"{self.path}: column {index} does not exist (the rows have {width} "
                f"columns){fix.replace('name', 'number')}"
            )
        if self.header is not None and column in self.header:
            return self.header.index(column)
        if self.header is not None and str(column).isdigit() and int(column) < len(self.header):
            return int(column)
        if not required:
            return None
        if self.header is None:
            flag = f" (--{option}=0, 1, ...)" if option else ""
            raise InputFileError(
                f"{self.path}: the file has no header line, so column {column!r} must be "
                f"given as a 0-based column number{flag}"
            )
        raise InputFileError(
            f"{self.path}:1: the header has no column {column!r} (its columns are "
            f"{list(self.header)}){fix}"
        )


def _check_widths(
    path: str,
    rows: list[tuple[int, tuple[str, ...]]],
    width: int,
    names: Sequence[str] | None,
    skip_malformed: bool,
) -> list[tuple[int, tuple[str, ...]]]:
    kept, skipped = [], []
    for number, fields in rows:
        if len(fields) == width:
            kept.append((number, fields))
        elif skip_malformed:
            skipped.append(number)
        else:
            expected = f"{width} columns" + (f" ({', '.join(names)})" if names else "")
            raise InputFileError(
                f"{path}:{number}: expected {expected}, found {len(fields)} "
                f"(a tab or delimiter inside a text field, or a truncated row?)"
            )
    if skipped:
        shown = ", ".join(str(n) for n in skipped[:10]) + (", ..." if len(skipped) > 10 else "")
        logging.warning(
            "%s: skipped %d of %d rows with a number of columns other than %d (lines %s)",
            path,
            len(skipped),
            len(rows),
            width,
            shown,
        )
    return kept


def read_delimited(
    path: str,
    *,
    encoding: str = "utf-8",
    delimiter: str = "\t",
    header: bool = True,
    num_columns: int | None = None,
    quoting: bool = False,
    skip_malformed: bool = False,
    description: str = "input file",
) -> Table:
    """Reads a TSV or CSV file, checking that every row has the same number of columns.

    Args:
        path: the file.
        encoding: its text encoding.
        delimiter: the field separator.
        header: whether the first non-blank line names the columns.
        num_columns: the expected width of a header-less file (default: the first
            row's); with a header, the header's width.
        quoting: read `"`-quoted fields (CSV rules, fields may span lines). GLUE's TSV
            files are read without quoting, as GLUE's own loaders do: their texts hold
            bare `"` characters.
        skip_malformed: drop rows of the wrong width with one logged count instead of
            raising (what the reference loaders do with QQP's broken rows).
        description: what the file should hold, for error messages.

    Raises:
        FileNotFoundError, InputFileError (empty file, bad encoding, a row of the wrong
        width, a header without data rows).
    """
    text = read_text(path, encoding, description=description)
    if quoting:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        rows = []
        try:
            for fields in reader:
                if any(field.strip() for field in fields):
                    rows.append((reader.line_num, tuple(fields)))
        except csv.Error as error:
            raise InputFileError(f"{path}:{reader.line_num}: {error}") from None
    else:
        rows = [(number, tuple(line.split(delimiter))) for number, line in numbered_lines(text)]
    if not rows:
        raise InputFileError(f"{path}: no rows (expected the {description})")
    names = None
    if header:
        (_, names), rows = rows[0], rows[1:]
        names = tuple(name.strip() for name in names)
        width = len(names)
    else:
        width = num_columns if num_columns is not None else len(rows[0][1])
    if not rows:
        raise InputFileError(f"{path}: no data rows after the header (expected the {description})")
    rows = _check_widths(path, rows, width, names, skip_malformed)
    return Table(path=path, header=names, rows=rows)


def _jsonl_field(value, path: str, number: int, key: str) -> str:
    """A JSONL record's value as a `Table` field: texts as written, numbers as JSON
    writes them, null as empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputFileError(
            f"{path}:{number}: key {key!r} holds {type(value).__name__} {value!r}, "
            "expected a text or a number"
        )
    return json.dumps(value)


def jsonl_records(
    path: str, *, encoding: str = "utf-8", description: str = "input file"
) -> list[tuple[int, dict]]:
    """`(line_number, record)` for every non-blank line of the JSON lines file `path`,
    each line one JSON object.

    Raises:
        FileNotFoundError, InputFileError (empty file, bad encoding, a line that is not
        JSON or not an object).
    """
    records = []
    for number, line in numbered_lines(read_text(path, encoding, description=description)):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputFileError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise InputFileError(
                f"{path}:{number}: a JSON {type(record).__name__}, expected an object "
                f"(one record a line: the {description})"
            )
        records.append((number, record))
    return records


def read_jsonl(path: str, *, encoding: str = "utf-8", description: str = "input file") -> Table:
    """Reads a JSON lines file (one object a line) as a `Table`: the first object's keys
    are the header, and every object must hold them all (other keys are not read).

    Values are texts (numbers in their JSON spelling, null as the empty text), so the
    file is read like a TSV with a header line.

    Raises:
        FileNotFoundError, InputFileError (empty file, bad encoding, a line that is not
        a JSON object, an object that lacks a key of the first, a list or object value).
    """
    header, rows = None, []
    for number, record in jsonl_records(path, encoding=encoding, description=description):
        if header is None:
            header = tuple(record)
        missing = [key for key in header if key not in record]
        if missing:
            raise InputFileError(
                f"{path}:{number}: no key {missing[0]!r} (every record holds the first "
                f"record's keys {list(header)})"
            )
        rows.append((number, tuple(_jsonl_field(record[key], path, number, key) for key in header)))
    return Table(path=path, header=header, rows=rows)


def read_fasttext(
    path: str, *, encoding: str = "utf-8", require_labels: bool = True, multi_label: bool = False
) -> list[tuple[int, str | tuple[str, ...] | None, str]]:
    """`(line_number, label, text)` for each line `__label__<name> <text>` of `path`.

    A line without the prefix has label None (allowed only with `require_labels`
    false, for texts to predict). With `multi_label` the line may open with several
    `__label__<name>` tags and `label` is the tuple of their names (fastText's
    multi-label format); without it, a line with several labels is an error, since
    single-label classification takes one label per text.
    """
    rows = []
    for number, line in numbered_lines(read_text(path, encoding, description="fastText file")):
        labels = []
        text = line.strip()
        while text.startswith(FASTTEXT_LABEL_PREFIX):
            token, _, text = text.partition(" ")
            label = token[len(FASTTEXT_LABEL_PREFIX) :]
            text = text.strip()
            if not label:
                raise InputFileError(f"{path}:{number}: empty label after {FASTTEXT_LABEL_PREFIX}")
            if label in labels:
                raise InputFileError(f"{path}:{number}: label {label!r} is given twice")
            labels.append(label)
            if not multi_label and text.startswith(FASTTEXT_LABEL_PREFIX):
                raise InputFileError(
                    f"{path}:{number}: several {FASTTEXT_LABEL_PREFIX} labels on one line; "
                    "text classification takes exactly one label per text "
                    "(pass --multi_label for several)"
                )
        if not labels and require_labels:
            raise InputFileError(
                f"{path}:{number}: the line does not start with {FASTTEXT_LABEL_PREFIX}<label>"
            )
        if not text:
            raise InputFileError(f"{path}:{number}: no text after the label")
        if not labels:
            label = None
        elif multi_label:
            label = tuple(labels)
        else:
            label = labels[0]
        rows.append((number, label, text))
    return rows
