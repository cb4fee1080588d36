"""The files of `sentence_embedding`: pairs, triplets and scored pairs from TSV, CSV and
JSONL with the user's column names, BEIR's retrieval files, the texts to embed, and one
line naming file and line for each kind of bad input.

The expected examples are the rows the tests wrote (kept in Python), never what the
reader returns elsewhere.
"""

import json
import pathlib
import sys

import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks.sentence.readers import InputFileError
from keras_bert_zoo.utils.errors import UserError

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sentence_embedding_fixtures as fixtures  # noqa: E402


def make_task(**options):
    return tasks.create_task("sentence_embedding", **options)


@pytest.mark.parametrize("file_format", ["tsv", "csv", "jsonl"])
def test_triplets_in_each_format_with_the_users_column_names(tmp_path, file_format):
    rows = fixtures.triplets(6)
    header = ["question", "answer", "negative_1"]
    if file_format == "jsonl":
        path = fixtures.write_jsonl(
            tmp_path / "train.jsonl", [dict(zip(header, row, strict=True)) for row in rows]
        )
    else:
        path = fixtures.write_table(
            tmp_path / f"train.{file_format}", header, rows, "," if file_format == "csv" else "\t"
        )
    task = make_task(train_file=path, anchor_column="question", positive_column="answer")
    examples = task.read("train")
    assert [example.texts for example in examples] == rows
    assert all(example.roles == ("query", "document", "document") for example in examples)
    assert {example.kind for example in examples} == {"pairs"}
    assert [example.source for example in examples][0].endswith(
        ":2" if file_format != "jsonl" else ":1"
    )
    assert task.training_data == "pairs"


def test_pairs_headerless_by_column_number(tmp_path):
    rows = [row[:2] for row in fixtures.triplets(5)]
    path = fixtures.write_table(tmp_path / "pairs.tsv", None, rows)
    task = make_task(train_file=path, has_header=False, anchor_column="0", positive_column="1")
    assert [example.texts for example in task.read("train")] == rows


def test_named_negative_columns_and_several_negatives(tmp_path):
    rows = [(*row, row[2] + " again") for row in fixtures.triplets(4)]
    path = fixtures.write_table(tmp_path / "t.tsv", ["anchor", "positive", "hard", "hard2"], rows)
    default = make_task(train_file=path).read("train")
    assert [example.texts for example in default] == [row[:2] for row in rows]
    named = make_task(train_file=path, negative_columns="hard2,hard").read("train")
    assert [example.texts for example in named] == [(r[0], r[1], r[3], r[2]) for r in rows]


def test_scored_pairs_are_mapped_from_the_score_range(tmp_path):
    rows = [("a cat", "the cat", 5.0), ("a dog", "a ship", 0.0), ("a car", "the car", 2.5)]
    path = fixtures.write_table(tmp_path / "sts.csv", ["s1", "s2", "gold"], rows, ",")
    task = make_task(
        eval_file=path,
        anchor_column="s1",
        positive_column="s2",
        score_column="gold",
        score_range="0,5",
    )
    examples = task.read("dev")
    assert [(e.texts, e.score) for e in examples] == [
        (("a cat", "the cat"), 1.0),
        (("a dog", "a ship"), 0.0),
        (("a car", "the car"), 0.5),
    ]
    assert task.primary_metric == "spearman"
    assert task.split_names() == {"train": (), "eval": ("dev",), "predict": ()}


def test_retrieval_files_in_beir_layout(tmp_path):
    files = fixtures.write_beir(tmp_path, count=4)
    task = make_task(**files)
    assert task.split_names()["eval"] == ("retrieval",)
    examples = task.read("retrieval")
    queries = [json.loads(line) for line in open(files["queries_file"], encoding="utf-8")]
    corpus = [json.loads(line) for line in open(files["corpus_file"], encoding="utf-8")]
    assert [e.text_id for e in examples] == [q["_id"] for q in queries] + [d["_id"] for d in corpus]
    assert [e.texts[0] for e in examples[:4]] == [q["text"] for q in queries]
    # The title joined before the text, an empty title left out.
    expected_documents = [
        (f"{d['title']} {d['text']}" if d["title"] else d["text"]) for d in corpus
    ]
    assert [e.texts[0] for e in examples[4:]] == expected_documents
    assert [e.relevant for e in examples[:4]] == [{f"d{i}": 1.0} for i in range(4)]
    assert task.primary_metric == "ndcg@10"


def test_texts_to_embed(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("first text\n\nsecond text\n", encoding="utf-8")
    task = make_task(predict_file=str(path))
    examples = task.read("test")
    assert [(e.texts, e.source) for e in examples] == [
        (("first text",), f"{path}:1"),
        (("second text",), f"{path}:3"),
    ]
    assert examples[0].roles == ("document",)
    table = fixtures.write_jsonl(tmp_path / "t.jsonl", [{"id": "a7", "text": "hello"}])
    (example,) = make_task(predict_file=table, predict_text_role="query").read("test")
    assert (example.text_id, example.texts, example.roles) == ("a7", ("hello",), ("query",))


# === Bad input: one line naming file and line ===


def _error(task, split="train") -> str:
    with pytest.raises((InputFileError, UserError)) as caught:
        task.read(split)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_wrong_columns_name_the_flag_and_the_files_columns(tmp_path):
    path = fixtures.write_table(
        tmp_path / "p.tsv", ["query", "doc"], [r[:2] for r in fixtures.triplets(3)]
    )
    message = _error(make_task(train_file=path))
    assert message.startswith(f"{path}:1:")
    assert "'anchor'" in message and "['query', 'doc']" in message and "--anchor_column" in message
    message = _error(make_task(train_file=path, anchor_column="query"))
    assert "'positive'" in message and "--positive_column" in message


def test_empty_text_names_file_line_and_column(tmp_path):
    path = fixtures.write_table(
        tmp_path / "p.tsv", ["anchor", "positive"], [("a cat", "the cat"), ("a dog", " ")]
    )
    assert _error(make_task(train_file=path)) == (
        f"{path}:3: empty text in column 'positive' (--positive_column)"
    )


def test_score_out_of_range_names_file_and_line(tmp_path):
    path = fixtures.write_table(
        tmp_path / "s.tsv", ["anchor", "positive", "score"], [("a", "b", "0.5"), ("c", "d", "4")]
    )
    assert _error(make_task(train_file=path)) == (
        f"{path}:3: the score 4 is outside --score_range=0,1"
    )
    bad = fixtures.write_table(
        tmp_path / "n.tsv", ["anchor", "positive", "score"], [("a", "b", "x")]
    )
    assert _error(make_task(train_file=bad)).startswith(f"{bad}:2: the score 'x' is not a finite")


def test_jsonl_line_not_an_object_or_lacking_a_key(tmp_path):
    path = fixtures.write_jsonl(tmp_path / "a.jsonl", [{"anchor": "a", "positive": "b"}, "[1, 2]"])
    assert _error(make_task(train_file=path)).startswith(
        f"{path}:2: a JSON list, expected an object"
    )
    path = fixtures.write_jsonl(
        tmp_path / "b.jsonl", [{"anchor": "a", "positive": "b"}, {"anchor": "c"}]
    )
    assert _error(make_task(train_file=path)).startswith(f"{path}:2: no key 'positive'")
    path = fixtures.write_jsonl(tmp_path / "c.jsonl", ['{"anchor": "a", '])
    assert _error(make_task(train_file=path)).startswith(f"{path}:1: not JSON")


def test_judgement_of_a_document_the_corpus_lacks(tmp_path):
    files = fixtures.write_beir(tmp_path, count=3)
    with open(files["qrels_file"], "a", encoding="utf-8") as f:
        f.write("q1\tmissing-doc\t1\n")
    assert _error(make_task(**files), "retrieval") == (
        f"{files['qrels_file']}:5: corpus-id 'missing-doc' is not in --corpus_file"
    )


def test_repeated_id_and_incomplete_retrieval_options(tmp_path):
    files = fixtures.write_beir(tmp_path, count=3)
    with open(files["corpus_file"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "d0", "title": "", "text": "again"}) + "\n")
    assert _error(make_task(**files), "retrieval").endswith("the _id 'd0' is given twice")
    with pytest.raises(UserError, match="pass --qrels_file too"):
        make_task(queries_file=files["queries_file"], corpus_file=files["corpus_file"])
    # Beside an eval_file, a second evaluation split; the first picks the best model.
    sts = fixtures.write_table(
        tmp_path / "sts.tsv", ["anchor", "positive", "score"], [("a", "b", 1)]
    )
    both = make_task(eval_file=sts, **files)
    assert both.split_names()["eval"] == ("dev", "retrieval")
    assert both.primary_metric == "spearman"


def test_bad_options(tmp_path):
    with pytest.raises(UserError, match="score_range"):
        make_task(score_range="5,0")
    with pytest.raises(UserError, match="matryoshka_dims"):
        make_task(matryoshka_dims="64,x")
    with pytest.raises(UserError, match="pooling"):
        make_task(pooling="sum")
    with pytest.raises(UserError, match="fasttext"):
        make_task(input_format="fasttext")


def test_text_classification_reads_jsonl_through_the_same_reader(tmp_path):
    path = fixtures.write_jsonl(
        tmp_path / "train.jsonl",
        [{"text": "a good film", "label": "pos"}, {"text": "bad", "label": "neg"}],
    )
    task = tasks.create_task("text_classification", train_file=path)
    assert [(e.texts, e.label) for e in task.read("train")] == [
        (("a good film",), "pos"),
        (("bad",), "neg"),
    ]
