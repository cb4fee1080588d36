"""The files of a `sentence_embedding` task, read into `EmbeddingExample`s.

Training and evaluation files (TSV, CSV or JSONL; `input_format`, by extension when
`auto`; the columns named by the header line or by 0-based numbers with
`has_header=False`, read through `tasks.sentence.readers` as `text_classification`
reads its files) hold one of:

- pairs `(anchor, positive)` and triplets `(anchor, positive, negative[, ...])`: the
  `anchor_column`, `positive_column` and the hard negatives (`negative_columns`, by
  default every column whose name starts with "negative");
- scored pairs `(a, b, score)`: the same two text columns and a `score_column`, each
  score mapped from `score_range` to [0, 1].

Retrieval evaluation (the `retrieval` split, beside an `eval_file`'s `dev`) reads
BEIR's three files (`queries_file`, `corpus_file`, `qrels_file`): queries
`{"_id", "text"}`, a corpus `{"_id", "title", "text"}` (the
title, when not empty, joined before the text with a space, as sentence-transformers'
`InformationRetrievalEvaluator` is given BEIR corpora) and judgements `query-id
corpus-id score` (TSV with a header); each also as TSV/CSV with those columns. Only
the judged queries are evaluated.

The file to embed (`predict_file`): one text a line (`.txt`), or a TSV/CSV/JSONL with
a `text` column (else the `anchor_column`) and optional `_id` or `id` column.

Bad input is an `InputFileError` naming the file and line: a missing column (the
option to pass, and the file's columns), an empty text, a score that is not a number
or outside `score_range`, a JSONL line that is not an object or lacks a key, an id
given twice, a judgement that names a query or document the files lack.

Example:

```python
from keras_bert_zoo.tasks.sentence_embedding.reader import EmbeddingFiles

files = EmbeddingFiles("sentence_embedding", "data/", task.option_values, settings)
examples = files.examples("train")  # pairs.tsv's rows
```
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from keras_bert_zoo.tasks.sentence.readers import (
    InputFileError,
    Table,
    numbered_lines,
    read_delimited,
    read_jsonl,
    read_text,
)
from keras_bert_zoo.tasks.sentence.scores import parse_score
from keras_bert_zoo.tasks.sentence_embedding.options import DOCUMENT, QUERY, EmbeddingSettings
from keras_bert_zoo.utils.errors import UserError

# What a split's examples hold (`EmbeddingFiles.kind`).
PAIRS = "pairs"  # anchor, positive[, negatives]: in-batch negatives
SCORED_PAIRS = "scored_pairs"  # two texts and a score in [0, 1]
RETRIEVAL = "retrieval"  # queries and documents, with judgements
TEXTS = "texts"  # one text each, to embed

FILE_OPTIONS = {"train": "train_file", "dev": "eval_file", "test": "predict_file"}
# The evaluation split of the retrieval files (beside `dev`, the `eval_file`'s).
RETRIEVAL_SPLIT = "retrieval"
_DELIMITER_ALIASES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
_ID_COLUMNS = ("_id", "id")


@dataclasses.dataclass(frozen=True)
class EmbeddingExample:
    """One example of a sentence-embedding task: the texts embedded together.

    Attributes:
        example_id: unique within its split (`"train-17"`, a retrieval text's
            `"query-<id>"` / `"document-<id>"`).
        texts: the texts as read (no prompt): anchor, positive, negatives; a scored
            pair's two texts; or one text.
        roles: `"query"` or `"document"` per text (which prompt it takes): the anchor
            is a query, the others documents.
        kind: what the split holds (`PAIRS`, `SCORED_PAIRS`, `RETRIEVAL`, `TEXTS`).
        score: a scored pair's score in [0, 1], else None.
        text_id: a retrieval text's or predicted text's id, else None.
        relevant: a retrieval query's judgements `{document id: grade}`, else None.
        source: where it came from (`"path:line"`).
    """

    example_id: str
    texts: tuple[str, ...]
    roles: tuple[str, ...]
    kind: str
    score: float | None = None
    text_id: str | None = None
    relevant: Mapping[str, float] | None = None
    source: str = ""

    @property
    def has_gold(self) -> bool:
        """Whether the example can be scored (a text to embed cannot)."""
        return self.kind != TEXTS


def single_text_example(
    example_id: str, text: str, role: str, kind: str, text_id: str, source: str, **fields
) -> EmbeddingExample:
    """The example of one text (retrieval, or to embed) in `role` (`query` or
    `document`); `fields` the other `EmbeddingExample` fields (`relevant`)."""
    return EmbeddingExample(
        example_id=example_id,
        texts=(text,),
        roles=(role,),
        kind=kind,
        text_id=text_id,
        source=source,
        **fields,
    )


def _format_of(path: str, chosen: str = "auto") -> str:
    if chosen != "auto":
        return chosen
    extension = os.path.splitext(path)[1].lower()
    return {".csv": "csv", ".jsonl": "jsonl", ".txt": "txt"}.get(extension, "tsv")


@dataclasses.dataclass
class EmbeddingFiles:
    """Finds and reads the files of a `sentence_embedding` task.

    Attributes:
        task_name: for the messages.
        data_dir: the directory file options are relative to, or None.
        options: the task's option values.
        settings: what the options make of the task (`options.read_settings`).
        encoding: the files' text encoding.
    """

    task_name: str
    data_dir: str | None
    options: Mapping[str, Any]
    settings: EmbeddingSettings
    encoding: str = "utf-8"

    # === Where ===

    def resolve(self, given: str) -> str:
        """`given` relative to `data_dir` unless absolute."""
        if self.data_dir and not os.path.isabs(given):
            return os.path.join(self.data_dir, given)
        return given

    def has(self, split: str) -> bool:
        """Whether `split` (`train`, `dev`, `retrieval`, `test`) has files."""
        if split == RETRIEVAL_SPLIT:
            return self.settings.retrieval_files is not None
        return bool(self.options[FILE_OPTIONS[split]])

    def path(self, split: str) -> str:
        given = self.options[FILE_OPTIONS[split]]
        if not given:
            raise UserError(f"{self.task_name}: no {split} file: pass --{FILE_OPTIONS[split]}")
        return self.resolve(given)

    # === Reading ===

    def examples(self, split: str) -> list[EmbeddingExample]:
        """The examples of `split`: `train` and `dev` pairs or scored pairs,
        `retrieval` the retrieval files' queries and documents, `test` the texts to
        embed."""
        if split == RETRIEVAL_SPLIT:
            return self.retrieval_examples()
        if split == "test":
            return self.text_examples(self.path(split))
        return self.pair_examples(self.path(split), split)

    def _table(self, path: str, file_format: str, *, header: bool, description: str) -> Table:
        if file_format == "jsonl":
            return read_jsonl(path, encoding=self.encoding, description=description)
        if file_format not in ("tsv", "csv"):
            raise UserError(f"{path}: {self.task_name} reads tsv, csv or jsonl, not {file_format}")
        given = self.options["delimiter"]
        delimiter = "\t" if file_format == "tsv" else ","
        if given is not None:
            delimiter = _DELIMITER_ALIASES.get(given.lower(), given)
        return read_delimited(
            path,
            encoding=self.encoding,
            delimiter=delimiter,
            header=header,
            quoting=file_format == "csv",
            description=description,
        )

    def _data_table(self, path: str, description: str) -> Table:
        file_format = _format_of(path, self.options["input_format"])
        header = bool(self.options["has_header"]) or file_format == "jsonl"
        return self._table(path, file_format, header=header, description=description)

    def _negative_positions(self, table: Table) -> list[int]:
        given = self.settings.negative_columns
        if given is not None:
            return [table.column_index(c, option="negative_columns") for c in given]
        if table.header is None:
            return []
        return [i for i, name in enumerate(table.header) if name.lower().startswith("negative")]

    def kind(self, split: str) -> str:
        """What `split`'s files hold (`PAIRS`, `SCORED_PAIRS`, `RETRIEVAL`, `TEXTS`),
        from the options and the data file's columns (its first lines only)."""
        if split == "test":
            return TEXTS
        if split == RETRIEVAL_SPLIT:
            return RETRIEVAL
        return self.pair_examples(self.path(split), split, limit=1)[0].kind

    def pair_examples(self, path: str, split: str, *, limit: int | None = None):
        """The pairs, triplets or scored pairs of the data file `path`."""
        table = self._data_table(path, f"{self.task_name} file of pairs")
        options = self.options
        anchor = table.column_index(options["anchor_column"], option="anchor_column")
        positive = table.column_index(options["positive_column"], option="positive_column")
        score = table.column_index(options["score_column"], required=False)
        negatives = self._negative_positions(table)
        if score is not None and negatives:
            raise InputFileError(
                f"{path}:1: the file has a score column ({options['score_column']!r}) and hard "
                "negatives: scored pairs have two texts (pass --score_column of a column that "
                "does not exist to train on the triplets)"
            )
        columns = [("anchor_column", anchor), ("positive_column", positive)]
        columns += [("negative_columns", position) for position in negatives]
        names = [table.header[p] if table.header else str(p) for _, p in columns]
        kind = PAIRS if score is None else SCORED_PAIRS
        low, high = self.settings.score_low, self.settings.score_high
        examples = []
        for row, (line, fields) in enumerate(table.rows[:limit]):
            where = f"{path}:{line}"
            texts = []
            for (option, position), name in zip(columns, names, strict=True):
                text = fields[position]
                if not text.strip():
                    raise InputFileError(f"{where}: empty text in column {name!r} (--{option})")
                texts.append(text)
            value = None
            if score is not None:
                value = parse_score(fields[score], where, column="score")
                if not low <= value <= high:
                    raise InputFileError(
                        f"{where}: the score {value:g} is outside --score_range={low:g},{high:g}"
                    )
                value = (value - low) / (high - low)
            examples.append(
                EmbeddingExample(
                    example_id=f"{split}-{row}",
                    texts=tuple(texts),
                    roles=(QUERY,) + (DOCUMENT,) * (len(texts) - 1),
                    kind=kind,
                    score=value,
                    source=where,
                )
            )
        return examples

    def text_examples(self, path: str) -> list[EmbeddingExample]:
        """The texts of the file to embed: one a line (`.txt`), or a table's `text`
        (else `anchor_column`) column with its optional `_id`/`id` column."""
        role = self.options["predict_text_role"]
        file_format = _format_of(path, self.options["input_format"])
        if file_format == "txt":
            text = read_text(path, self.encoding, description="file of texts to embed")
            rows = [(line, None, value) for line, value in numbered_lines(text)]
        else:
            table = self._data_table(path, f"{self.task_name} file of texts to embed")
            column = "text" if table.header and "text" in table.header else None
            position = table.column_index(
                column or self.options["anchor_column"], option="anchor_column"
            )
            id_position = next(
                (
                    table.header.index(name)
                    for name in _ID_COLUMNS
                    if table.header and name in table.header
                ),
                None,
            )
            rows = [
                (line, None if id_position is None else fields[id_position], fields[position])
                for line, fields in table.rows
            ]
        examples = []
        for row, (line, text_id, value) in enumerate(rows):
            if not value.strip():
                raise InputFileError(f"{path}:{line}: empty text")
            text_id = text_id if text_id is not None else str(row)
            examples.append(
                single_text_example(f"test-{row}", value, role, TEXTS, text_id, f"{path}:{line}")
            )
        return examples

    # === Retrieval ===

    def _id_table(self, option: str, description: str, header: bool = True) -> Table:
        path = self.resolve(self.options[option])
        return self._table(path, _format_of(path), header=header, description=description)

    def _texts_by_id(self, option: str, description: str, *, titled: bool) -> dict:
        table = self._id_table(option, description)
        header = table.header or ()
        id_column = "id" if "id" in header and "_id" not in header else "_id"
        ids = table.column_index(id_column, option=option)
        text = table.column_index("text", option=option)
        title = table.column_index("title", required=False) if titled else None
        texts = {}
        for line, fields in table.rows:
            where = f"{table.path}:{line}"
            text_id = fields[ids].strip()
            if not text_id:
                raise InputFileError(f"{where}: empty _id")
            if text_id in texts:
                raise InputFileError(f"{where}: the _id {text_id!r} is given twice")
            value = fields[text].strip()
            if title is not None and fields[title].strip():
                value = f"{fields[title].strip()} {value}".strip()
            if not value:
                raise InputFileError(f"{where}: empty text (_id {text_id!r})")
            texts[text_id] = (value, where)
        return texts

    def retrieval_examples(self) -> list[EmbeddingExample]:
        """One example a judged query (its `relevant` documents) then one a document,
        in file order."""
        queries = self._texts_by_id("queries_file", "retrieval queries", titled=False)
        corpus = self._texts_by_id("corpus_file", "retrieval corpus", titled=True)
        table = self._id_table("qrels_file", "retrieval judgements (query-id corpus-id score)")
        query_column = table.column_index("query-id", option="qrels_file")
        document_column = table.column_index("corpus-id", option="qrels_file")
        grade_column = table.column_index("score", option="qrels_file")
        judgements: dict[str, dict[str, float]] = {}
        for line, fields in table.rows:
            where = f"{table.path}:{line}"
            query, document = fields[query_column].strip(), fields[document_column].strip()
            if query not in queries:
                raise InputFileError(f"{where}: query-id {query!r} is not in --queries_file")
            if document not in corpus:
                raise InputFileError(f"{where}: corpus-id {document!r} is not in --corpus_file")
            judgements.setdefault(query, {})[document] = parse_score(fields[grade_column], where)
        if not any(grade > 0 for judged in judgements.values() for grade in judged.values()):
            raise InputFileError(f"{table.path}: no judgement with a score above 0")
        examples = [
            single_text_example(
                f"query-{query}", text, QUERY, RETRIEVAL, query, where, relevant=judgements[query]
            )
            for query, (text, where) in queries.items()
            if query in judgements
        ]
        return examples + [
            single_text_example(f"document-{document}", text, DOCUMENT, RETRIEVAL, document, where)
            for document, (text, where) in corpus.items()
        ]
