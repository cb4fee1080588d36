"""The files of a `text_classification` task: where each split's file is, its format,
and its rows as `SentenceExample`s.

Formats (`input_format`, chosen from the file extension when `auto`): `tsv` / `csv`
columns (named by the header line, or 0-based numbers with `has_header=False`) or
`jsonl` records (the keys as columns), a
label column or one 0/1 column per label (`label_columns`); `fasttext` lines
(`__label__<name> <text>`), any other extension.

Example:

```python
from keras_bert_zoo.tasks.sentence.text_classification_files import TextClassificationFiles
from keras_bert_zoo.tasks.sentence.text_classification_options import read_settings

files = TextClassificationFiles(
    "text_classification", "data/", task.option_values, read_settings(task.option_values)
)
examples = files.examples("train")  # the rows of data/train.tsv (or .csv, .txt)
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from keras_bert_zoo.tasks.sentence.examples import SentenceExample
from keras_bert_zoo.tasks.sentence.readers import (
    InputFileError,
    read_delimited,
    read_fasttext,
    read_jsonl,
)
from keras_bert_zoo.tasks.sentence.scores import parse_score
from keras_bert_zoo.tasks.sentence.text_classification_options import (
    FILE_OPTIONS,
    TextClassificationSettings,
)
from keras_bert_zoo.utils.errors import UserError

_DELIMITER_ALIASES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}


class TextClassificationFiles:
    """Finds and reads the split files of a `text_classification` task.

    Args:
        task_name: for the messages.
        data_dir: the directory file options are relative to, or None.
        options: the task's option values (files, columns, format, delimiter, label
            separator).
        settings: what the options make of the task (`read_settings`).
        encoding: the files' text encoding.
    """

    def __init__(
        self,
        task_name: str,
        data_dir: str | None,
        options: Mapping[str, Any],
        settings: TextClassificationSettings,
        *,
        encoding: str = "utf-8",
    ):
        self.task_name = task_name
        self.data_dir = data_dir
        self.options = options
        self.settings = settings
        self.encoding = encoding

    def find(self, split: str) -> str | None:
        """The file of `split` (`train`, `dev`, `test`): its option, relative to
        `data_dir` unless absolute, else `<split>.tsv`, `.csv` or `.txt` in `data_dir`,
        else None."""
        given = self.options[FILE_OPTIONS[split]]
        if given:
            if self.data_dir and not os.path.isabs(given):
                return os.path.join(self.data_dir, given)
            return given
        if self.data_dir:
            for extension in (".tsv", ".csv", ".txt"):
                candidate = os.path.join(self.data_dir, split + extension)
                if os.path.isfile(candidate):
                    return candidate
        return None

    def path(self, split: str) -> str:
        """`find(split)`, or a `FileNotFoundError` that says which option to pass."""
        path = self.find(split)
        if path is None:
            option = FILE_OPTIONS[split]
            raise FileNotFoundError(
                f"{self.task_name}: no {split} file: pass --{option} (or put {split}.tsv, "
                f"{split}.csv or {split}.txt in --data_dir={self.data_dir})"
            )
        return path

    def examples(self, split: str) -> list[SentenceExample]:
        """Every row of the split's file as a `SentenceExample` (`{split}-{row}`); the
        `test` file's labels are optional, the others' required."""
        path = self.path(split)
        labelled = split != "test"
        file_format = self._format(path)
        if file_format == "fasttext":
            if self.options["text_pair_column"]:
                raise UserError(
                    f"{path}: fastText lines hold one text; text_pair_column needs TSV or CSV"
                )
            rows = [
                (number, label, (text,))
                for number, label, text in read_fasttext(
                    path,
                    encoding=self.encoding,
                    require_labels=labelled,
                    multi_label=self.settings.multi_label,
                )
            ]
        else:
            rows = self._table_rows(path, file_format, labelled)
        examples = []
        for row_number, (line, label, texts) in enumerate(rows):
            where = f"{path}:{line}"
            if label is not None and not isinstance(label, str):  # already parsed
                parsed = tuple(label)
            else:
                parsed = None if label is None else self._parse_label(label, where)
            examples.append(
                SentenceExample(
                    example_id=f"{split}-{row_number}",
                    texts=texts,
                    label=parsed,
                    index=str(row_number),
                    source=where,
                )
            )
        return examples

    def _format(self, path: str) -> str:
        chosen = self.options["input_format"]
        if chosen != "auto":
            return chosen
        extension = os.path.splitext(path)[1].lower()
        return {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl"}.get(extension, "fasttext")

    def _delimiter(self, file_format: str) -> str:
        given = self.options["delimiter"]
        if given is None:
            return "\t" if file_format == "tsv" else ","
        return _DELIMITER_ALIASES.get(given.lower(), given)

    def _parse_label(self, value: str, where: str) -> str | float | tuple[str, ...]:
        value = value.strip()
        if self.settings.multi_label:
            separator = self.options["label_separator"]
            labels = tuple(label.strip() for label in value.split(separator))
            if not value or not all(labels):
                raise InputFileError(
                    f"{where}: empty label in {value!r} (labels separated by {separator!r})"
                )
            if len(set(labels)) != len(labels):
                raise InputFileError(f"{where}: a label is given twice in {value!r}")
            return labels
        if self.settings.regression:
            return parse_score(value, where, column="label")
        if not value:
            raise InputFileError(f"{where}: empty label")
        return value

    def _table_rows(self, path: str, file_format: str, labelled: bool):
        """`(line, label or None, texts)` of a TSV, CSV or JSONL file."""
        options = self.options
        description = f"{self.task_name} {file_format.upper()} file"
        if file_format == "jsonl":
            table = read_jsonl(path, encoding=self.encoding, description=description)
        else:
            table = read_delimited(
                path,
                encoding=self.encoding,
                delimiter=self._delimiter(file_format),
                header=bool(options["has_header"]),
                quoting=file_format == "csv",
                description=description,
            )
        columns = {"text_column": options["text_column"]}
        if options["text_pair_column"]:
            columns["text_pair_column"] = options["text_pair_column"]
        text_positions = [
            table.column_index(column, option=option) for option, column in columns.items()
        ]
        if self.settings.label_columns is not None:
            return self._label_column_rows(table, text_positions, labelled)
        label_position = table.column_index(
            options["label_column"], required=labelled, option="label_column"
        )
        return [
            (
                line,
                None if label_position is None else fields[label_position],
                tuple(fields[position] for position in text_positions),
            )
            for line, fields in table.rows
        ]

    def _label_column_rows(self, table, text_positions, labelled: bool):
        """Rows of a file with one 0/1 column per label (`label_columns`)."""
        label_columns = self.settings.label_columns
        positions = [
            table.column_index(column, required=labelled, option="label_columns")
            for column in label_columns
        ]
        present = [position is not None for position in positions]
        if any(present) and not all(present):
            missing = [c for c, p in zip(label_columns, present, strict=True) if not p]
            raise InputFileError(
                f"{table.path}:1: the label column(s) {missing} are missing (its columns are "
                f"{list(table.header or ())}); pass --label_columns with the columns' names"
            )
        rows = []
        for line, fields in table.rows:
            texts = tuple(fields[position] for position in text_positions)
            if not all(present):
                rows.append((line, None, texts))
                continue
            labels = []
            for column, position in zip(label_columns, positions, strict=True):
                value = fields[position].strip()
                if value not in ("0", "1"):
                    raise InputFileError(
                        f"{table.path}:{line}: column {column!r} holds {value!r}, not 0 or 1"
                    )
                if value == "1":
                    labels.append(column)
            rows.append((line, tuple(labels), texts))
        return rows
