"""Corpus, queries and pairs files: BEIR's JSONL (title joined before the text, other
keys ignored), TSV, CSV and plain lines, and one-line errors naming file and line."""

import pytest

from keras_bert_zoo.search.corpus import read_corpus
from keras_bert_zoo.tasks.sentence.readers import InputFileError


def test_beir_jsonl(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        '{"_id": "d1", "title": "Guitar", "text": "A man plays.", "metadata": {"x": 1}}\n'
        "\n"
        '{"_id": 7, "text": "No title here."}\n'
        '{"_id": "d3", "title": "Only a title", "text": ""}\n'
    )
    corpus = read_corpus(str(path))
    assert corpus.ids == ("d1", "7", "d3")
    assert corpus.texts == ("Guitar A man plays.", "No title here.", "Only a title")


def test_tsv_csv_and_lines(tmp_path):
    tsv = tmp_path / "docs.tsv"
    tsv.write_text("doc\tbody\nx\tfirst text\ny\tsecond text\n")
    corpus = read_corpus(str(tsv), id_column="doc", text_column="body")
    assert corpus.ids == ("x", "y") and corpus.texts == ("first text", "second text")
    csv_file = tmp_path / "docs.csv"
    csv_file.write_text('id,text\n1,"a, quoted\ntext"\n2,plain\n')
    assert read_corpus(str(csv_file)).texts == ("a, quoted\ntext", "plain")
    no_ids = tmp_path / "no_ids.tsv"
    no_ids.write_text("text\nalpha\nbeta\n")
    assert read_corpus(str(no_ids)).ids == ("0", "1")
    lines = tmp_path / "queries.txt"
    lines.write_text("first query\n\n  second query \n")
    corpus = read_corpus(str(lines))
    assert corpus.ids == ("0", "1") and corpus.texts == ("first query", "second query")


@pytest.mark.parametrize(
    "name, content, kwargs, message",
    [
        (
            "c.jsonl",
            '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n',
            {},
            r"c.jsonl:2: id 'a' again \(first at line 1\)",
        ),
        ("c.jsonl", '{"_id": "a", "text": "x"}\nnot json\n', {}, r"c.jsonl:2: not JSON"),
        ("c.jsonl", '{"_id": "a", "body": "x"}\n', {}, r"c.jsonl:1: no key 'text'"),
        ("c.jsonl", '{"_id": "a", "text": ["x"]}\n', {}, r"c.jsonl:1: key 'text' holds list"),
        ("c.tsv", "id\ttext\na\t \n", {}, r"c.tsv:2: the corpus row has an empty text"),
        (
            "c.tsv",
            "id\ttext\na\tb\n",
            {"id_column": "doc_id"},
            r"c.tsv:1: the header has no column 'doc_id'",
        ),
        ("c.tsv", "id\ttext\na\tb\tc\n", {}, r"c.tsv:2: expected 2 columns"),
        ("c.xml", "<doc/>", {}, r"c.xml: cannot tell the layout from the extension '.xml'"),
        ("c.txt", "\n\n", {}, r"c.txt: the file is empty"),
    ],
)
def test_errors_name_file_and_line(tmp_path, name, content, kwargs, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputFileError, match=message):
        read_corpus(str(path), **kwargs)


def test_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_corpus(str(tmp_path / "absent.jsonl"))
