"""GLUE and text_classification readers: the official layouts, tensorflow-datasets, the
real pang_lee file, and the errors on malformed input.

References: what the fixture writer put in each file; tensorflow-datasets' own GLUE
parser (`Glue._generate_examples`) on the same files; google-research/bert's
`MrpcProcessor` restated (tensorflow-datasets builds MRPC from the MSR originals);
a tensorflow-datasets GLUE prepared from the fixture files by tensorflow-datasets
itself; the raw bytes of pang_lee_polarity.cor.
"""

import csv
import hashlib
import importlib.util
import logging
import math
import os
import pathlib
import sys
from unittest import mock

import pytest

from keras_bert_zoo import tasks
from keras_bert_zoo.tasks.sentence import GLUE_TASK_NAMES, InputFileError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import sentence_fixtures as fixtures  # noqa: E402


@pytest.fixture(scope="module")
def glue_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_data")
    expected = fixtures.write_glue(str(root))
    return root, expected


def _task(name, root, **kwargs):
    return tasks.create_task(name, data_dir=str(root / fixtures.TASK_DIRECTORIES[name]), **kwargs)


def _all_splits(task):
    return [split for splits in task.split_names().values() for split in splits]


# === The official layouts ===


@pytest.mark.parametrize("name", GLUE_TASK_NAMES)
def test_glue_reader_returns_what_each_file_holds(name, glue_root):
    root, expected = glue_root
    task = _task(name, root)
    splits = _all_splits(task)
    assert set(splits) == set(expected[name].rows)
    for split in splits:
        examples = task.read(split)
        assert [(e.texts, e.label, e.index) for e in examples] == expected[name].rows[split]
        assert len({e.example_id for e in examples}) == len(examples)
        assert all(e.source.startswith(str(root)) for e in examples)


TFDS_FILES = {
    "glue/mnli": {
        "train": "train.tsv",
        "dev_matched": "dev_matched.tsv",
        "dev_mismatched": "dev_mismatched.tsv",
        "test_matched": "test_matched.tsv",
        "test_mismatched": "test_mismatched.tsv",
    }
}
TFDS_TEXT_KEYS = {
    "glue/cola": ("sentence",),
    "glue/sst2": ("sentence",),
    "glue/stsb": ("sentence1", "sentence2"),
    "glue/qqp": ("question1", "question2"),
    "glue/mnli": ("premise", "hypothesis"),
    "glue/qnli": ("question", "sentence"),
    "glue/rte": ("sentence1", "sentence2"),
    "glue/wnli": ("sentence1", "sentence2"),
}


@pytest.mark.parametrize("name", sorted(TFDS_TEXT_KEYS))
def test_glue_reader_agrees_with_the_tensorflow_datasets_parser(name, glue_root, tmp_path):
    import tensorflow_datasets as tfds

    root, _ = glue_root
    task = _task(name, root)
    builder = tfds.builder(name, data_dir=str(tmp_path))
    files = TFDS_FILES.get(name, {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"})
    for split, filename in files.items():
        path = root / fixtures.TASK_DIRECTORIES[name] / filename
        tfds_split = split.split("_")[0]  # the builder's "dev"/"test" decide CoLA's header
        reference = [
            example for _, example in builder._generate_examples(str(path), split=tfds_split)
        ]
        ours = task.read(split)
        assert len(ours) == len(reference)
        for example, record in zip(ours, reference, strict=True):
            assert example.texts == tuple(record[key] for key in TFDS_TEXT_KEYS[name])
            label = record["label"]
            if split.startswith("test"):
                assert example.label is None
            elif name == "glue/stsb":
                assert example.label == pytest.approx(float(label))
            elif isinstance(label, str):
                assert example.label == label
            else:
                assert example.label == str(label)


def test_mrpc_reader_agrees_with_google_research_bert_processor(glue_root):
    # MrpcProcessor._create_examples: skip the header; text_a = line[3], text_b = line[4],
    # label = line[0] (the test set gets no label).
    root, _ = glue_root
    task = _task("glue/mrpc", root)
    for split in ("train", "dev", "test"):
        with open(root / "MRPC" / f"{split}.tsv", encoding="utf-8") as f:
            lines = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
        ours = task.read(split)
        assert [e.texts for e in ours] == [(line[3], line[4]) for line in lines]
        if split == "test":
            assert [e.label for e in ours] == [None] * len(lines)
            assert [e.index for e in ours] == [line[0] for line in lines]
        else:
            assert [e.label for e in ours] == [line[0] for line in lines]


def test_mrpc_test_file_with_the_quality_column_keeps_its_labels(tmp_path):
    # Some MRPC copies ship test.tsv in the train layout (labels, no index column).
    path = tmp_path / "test.tsv"
    path.write_text(
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t11\t12\tA man.\tA guy.\n"
        "0\t13\t14\tA dog.\tThe sea.\n",
        encoding="utf-8",
    )
    examples = tasks.create_task("glue/mrpc", data_dir=str(tmp_path)).read("test")
    assert [(e.texts, e.label, e.index) for e in examples] == [
        (("A man.", "A guy."), "1", "0"),
        (("A dog.", "The sea."), "0", "1"),
    ]


def test_qqp_skips_rows_with_missing_fields_and_logs_the_count(glue_root, caplog):
    root, expected = glue_root
    with caplog.at_level(logging.WARNING):
        examples = _task("glue/qqp", root).read("train")
    assert len(examples) == len(expected["glue/qqp"].rows["train"]) == fixtures.SIZES["train"]
    assert "skipped 1 of 13 rows" in caplog.text and "lines 7" in caplog.text


def test_mnli_finds_the_diagnostic_set_and_its_option(glue_root, tmp_path):
    root, expected = glue_root
    task = _task("glue/mnli", root)
    assert task.split_names() == {
        "train": ("train",),
        "eval": ("dev_matched", "dev_mismatched"),
        "predict": ("test_matched", "test_mismatched", "diagnostic"),
    }
    moved = tmp_path / "AX_copy.tsv"
    moved.write_bytes((root / "diagnostic" / "diagnostic.tsv").read_bytes())
    other = tasks.create_task("glue/mnli", data_dir=str(root / "MNLI"), diagnostic_file=str(moved))
    rows = [(e.texts, e.label, e.index) for e in other.read("diagnostic")]
    assert rows == expected["glue/mnli"].rows["diagnostic"]
    alone = tmp_path / "MNLI"
    alone.mkdir()
    lonely = tasks.create_task("glue/mnli", data_dir=str(alone))
    assert "diagnostic" not in lonely.split_names()["predict"]
    with pytest.raises(FileNotFoundError, match="diagnostic_file"):
        lonely.read("diagnostic")


def test_unknown_split_is_an_error(glue_root):
    root, _ = glue_root
    with pytest.raises(ValueError, match="no split 'dev'.*dev_matched"):
        _task("glue/mnli", root).read("dev")


# === tensorflow-datasets ===


@pytest.fixture(scope="module")
def prepared_tfds(glue_root, tmp_path_factory):
    """GLUE prepared by tensorflow-datasets itself from the fixture files (its
    downloads redirected to them: nothing leaves the machine)."""
    import tensorflow_datasets as tfds

    root, expected = glue_root
    data_dir = tmp_path_factory.mktemp("tfds")

    def local_copy(_, url):
        if isinstance(url, dict):
            return {key: local_copy(None, value) for key, value in url.items()}
        # glue/ax points at a single file; every other config at a zip of its directory.
        if "glue" not in url:
            return str(root / "diagnostic" / "diagnostic.tsv")
        return str(root)

    config = tfds.download.DownloadConfig(try_download_gcs=False)
    with (
        mock.patch.object(tfds.download.DownloadManager, "download_and_extract", local_copy),
        mock.patch.object(tfds.download.DownloadManager, "download", local_copy),
    ):
        for name in ("glue/cola", "glue/stsb", "glue/mnli", "glue/ax"):
            tfds.builder(name, data_dir=str(data_dir)).download_and_prepare(download_config=config)
    return data_dir, expected


@pytest.mark.parametrize("name", ["glue/cola", "glue/stsb", "glue/mnli"])
def test_reads_a_prepared_tensorflow_datasets_glue(name, prepared_tfds):
    data_dir, expected = prepared_tfds
    task = tasks.create_task(name, tfds_data_dir=str(data_dir))
    splits = _all_splits(task)
    assert set(splits) == set(expected[name].rows)
    for split in splits:
        rows = [(e.texts, e.label) for e in task.read(split)]
        assert rows == [(texts, label) for texts, label, _ in expected[name].rows[split]]


def test_unprepared_tensorflow_datasets_says_what_to_do(tmp_path):
    task = tasks.create_task("glue/rte", tfds_data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"no prepared 'glue/rte'.*--data_dir"):
        task.read("train")
    assert os.listdir(tmp_path) in ([], ["glue"])  # nothing was downloaded


# === Malformed GLUE input ===


def _rte(tmp_path, train_text, encoding="utf-8"):
    (tmp_path / "train.tsv").write_bytes(train_text.encode(encoding))
    return tasks.create_task("glue/rte", data_dir=str(tmp_path))


HEADER = "index\tsentence1\tsentence2\tlabel\n"


def test_row_with_the_wrong_number_of_columns_names_file_and_line(tmp_path):
    task = _rte(tmp_path, HEADER + "0\tA.\tB.\tentailment\n1\tA\tstray tab.\tB.\tentailment\n")
    path = tmp_path / "train.tsv"
    with pytest.raises(InputFileError, match=rf"{path}:3: expected 4 columns .* found 5"):
        task.read("train")


def test_label_outside_the_label_set_names_file_line_value_and_set(tmp_path):
    task = _rte(tmp_path, HEADER + "0\tA.\tB.\tentailment\n\n1\tA.\tB.\tcontradiction\n")
    path = tmp_path / "train.tsv"
    pattern = rf"{path}:4: label 'contradiction' is not one of \['entailment', 'not_entailment'\]"
    with pytest.raises(InputFileError, match=pattern):
        task.read("train")


def test_cola_header_less_row_of_the_wrong_width(tmp_path):
    (tmp_path / "train.tsv").write_text("gj04\t1\t\tGood.\ngj04\t0\tBad.\n", encoding="utf-8")
    task = tasks.create_task("glue/cola", data_dir=str(tmp_path))
    with pytest.raises(InputFileError, match=r"train.tsv:2: expected 4 columns, found 3"):
        task.read("train")


def test_stsb_score_that_is_not_a_number(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
    (tmp_path / "dev.tsv").write_text(
        f"{header}\tscore\n0\tg\tf\ty\t0\ts\ts\tA.\tB.\thigh\n", encoding="utf-8"
    )
    task = tasks.create_task("glue/stsb", data_dir=str(tmp_path))
    with pytest.raises(InputFileError, match=r"dev.tsv:2: the score 'high' is not a finite"):
        task.read("dev")


def test_empty_header_only_and_missing_files(tmp_path):
    task = _rte(tmp_path, "")
    with pytest.raises(InputFileError, match=r"train.tsv: the file is empty"):
        task.read("train")
    task = _rte(tmp_path, HEADER)
    with pytest.raises(InputFileError, match=r"train.tsv: no data rows after the header"):
        task.read("train")
    with pytest.raises(FileNotFoundError, match=r"dev.tsv: no such file .*RTE dev file"):
        task.read("dev")


def test_header_without_a_required_column(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\nGood.\t1\n", encoding="utf-8")
    task = tasks.create_task("glue/sst2", data_dir=str(tmp_path))
    with pytest.raises(InputFileError, match=r"train.tsv:1: the header has no column 'sentence'"):
        task.read("train")


def test_non_utf8_file_names_line_and_byte_offset_and_the_flag(tmp_path):
    text = HEADER + "0\tA.\tB.\tentailment\n1\tCafé.\tB.\tentailment\n"
    task = _rte(tmp_path, text, encoding="latin-1")
    offset = text.encode("latin-1").index(b"\xe9")
    with pytest.raises(
        InputFileError, match=rf"train.tsv:3: byte 0xe9 at byte offset {offset} .*--encoding"
    ):
        task.read("train")
    task = tasks.create_task("glue/rte", data_dir=str(tmp_path), encoding="latin-1")
    assert task.read("train")[1].texts == ("Café.", "B.")


# === text_classification on the real pang_lee file ===


def _gensim_test_data():
    spec = importlib.util.find_spec("gensim")
    if spec is None:
        pytest.fail("gensim is not installed (pip install -e '.[test]')")
    return os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data")


PANG_LEE = "pang_lee_polarity.cor"


def _pang_lee(**options):
    options.setdefault("encoding", "latin-1")
    return tasks.create_task(
        "text_classification", data_dir=_gensim_test_data(), train_file=PANG_LEE, **options
    )


def _pang_lee_reference():
    """(label, text) of each line, straight from the bytes."""
    with open(os.path.join(_gensim_test_data(), PANG_LEE), "rb") as f:
        lines = f.read().decode("latin-1").split("\n")
    rows = []
    for line in lines:
        if line.strip():
            label, text = line.split(" ", 1)
            rows.append((label.removeprefix("__label__"), text.strip()))
    return rows


def test_pang_lee_without_encoding_points_at_the_first_latin1_byte():
    with open(os.path.join(_gensim_test_data(), PANG_LEE), "rb") as f:
        data = f.read()
    offset = data.index(b"\x97")  # the file's first byte above 0x7f that is invalid UTF-8
    line = data.count(b"\n", 0, offset) + 1
    task = _pang_lee(encoding="utf-8")
    with pytest.raises(
        InputFileError,
        match=rf"{PANG_LEE}:{line}: byte 0x97 at byte offset {offset} is not valid utf-8; "
        r"pass --encoding",
    ):
        task.read("train")


def test_pang_lee_reads_200_labelled_sentences():
    task = _pang_lee()
    examples = task.read("train")
    reference = _pang_lee_reference()
    assert len(examples) == len(reference) == 200
    assert [(e.label, e.texts[0]) for e in examples] == reference
    assert task.label_names == ("neg", "pos")
    assert task.text_fields == ("text",)
    assert task.split_names() == {"train": ("train",), "eval": (), "predict": ()}
    assert task.state() == {"regression": False, "label_names": ["neg", "pos"]}


def test_pang_lee_heldout_split_is_stratified_deterministic_and_seeded():
    task = _pang_lee(heldout_fraction=0.25)
    train, dev = task.read("train"), task.read("dev")
    assert (len(train), len(dev)) == (150, 50)
    assert sorted(e.label for e in dev).count("pos") == 25
    train_indices = [int(e.index) for e in train]
    dev_indices = [int(e.index) for e in dev]
    assert train_indices == sorted(train_indices) and dev_indices == sorted(dev_indices)
    assert sorted(train_indices + dev_indices) == list(range(200))
    # The documented rule, restated: per label, the 25% of rows with the smallest
    # SHA-256 of "<seed>:<row>" (rounded half up), with the default seed 12345.
    reference = _pang_lee_reference()
    expected = set()
    for label in ("neg", "pos"):
        rows = [row for row, (name, _) in enumerate(reference) if name == label]
        rows.sort(key=lambda row: hashlib.sha256(f"12345:{row}".encode()).digest())
        expected.update(rows[: math.floor(0.25 * len(rows) + 0.5)])
    assert set(dev_indices) == expected
    again = _pang_lee(heldout_fraction=0.25)
    assert [e.index for e in again.read("dev")] == [e.index for e in dev]
    other_seed = _pang_lee(heldout_fraction=0.25, heldout_seed=7)
    assert {e.index for e in other_seed.read("dev")} != set(e.index for e in dev)
    assert task.split_names()["eval"] == ("dev",)


def test_text_classification_tsv_csv_pairs_and_label_sets(tmp_path):
    (tmp_path / "train.csv").write_text(
        'premise,hypothesis,verdict\n"A man, tall.",He is tall.,yes\n'
        '"Two ""quoted"" words",Nothing.,no\n',
        encoding="utf-8",
    )
    (tmp_path / "dev.tsv").write_text("x\tA.\tB.\tyes\nx\tC.\tD.\tmaybe\n", encoding="utf-8")
    (tmp_path / "test.tsv").write_text("x\tE.\tF.\n", encoding="utf-8")
    task = tasks.create_task(
        "text_classification",
        data_dir=str(tmp_path),
        text_column="premise",
        text_pair_column="hypothesis",
        label_column="verdict",
    )
    train = task.read("train")
    assert [(e.texts, e.label) for e in train] == [
        (("A man, tall.", "He is tall."), "yes"),
        (('Two "quoted" words', "Nothing."), "no"),
    ]
    assert task.label_names == ("no", "yes") and task.text_fields == ("text", "text_pair")
    by_number = tasks.create_task(
        "text_classification", data_dir=str(tmp_path), text_column="0", label_column="2"
    )
    assert [(e.texts, e.label) for e in by_number.read("train")] == [
        (("A man, tall.",), "yes"),
        (('Two "quoted" words',), "no"),
    ]
    # The dev file has no header: a second task reads it by column numbers.
    headerless = tasks.create_task(
        "text_classification",
        data_dir=str(tmp_path),
        train_file="dev.tsv",
        eval_file="dev.tsv",
        predict_file="test.tsv",
        has_header=False,
        text_column="1",
        text_pair_column="2",
        label_column="3",
        label_names="yes,no",
    )
    with pytest.raises(InputFileError, match=r"dev.tsv:2: label 'maybe' is not one of"):
        headerless.read("dev")
    test = headerless.read("test")
    assert [(e.texts, e.label) for e in test] == [(("E.", "F."), None)]
    numbered = tasks.create_task(
        "text_classification", data_dir=str(tmp_path), train_file="numbers.tsv"
    )
    (tmp_path / "numbers.tsv").write_text("text\tlabel\na\t10\nb\t9\nc\t-1\n", encoding="utf-8")
    assert numbered.label_names == ("-1", "9", "10")


def test_text_classification_regression_and_its_errors(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\na\t0.5\nb\t4\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path), regression=True)
    assert [e.label for e in task.read("train")] == [0.5, 4.0]
    assert task.is_regression and task.primary_metric == "spearman"
    assert task.state() == {"regression": True}
    (tmp_path / "train.tsv").write_text("text\tlabel\na\t0.5\nb\tfour\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path), regression=True)
    with pytest.raises(InputFileError, match=r"train.tsv:3: the label 'four' is not a finite"):
        task.read("train")
    (tmp_path / "one.txt").write_text("__label__a x\n__label__a y\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path), train_file="one.txt")
    with pytest.raises(ValueError, match="needs two labels or more"):
        task.read("train")
    (tmp_path / "multi.txt").write_text("__label__a __label__b x\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path), train_file="multi.txt")
    with pytest.raises(InputFileError, match=r"multi.txt:1: several __label__ labels"):
        task.read("train")
    with pytest.raises(ValueError, match="either eval_file or heldout_fraction"):
        tasks.create_task("text_classification", eval_file="x", heldout_fraction=0.1)


def test_text_classification_restores_its_label_set_without_training_data(tmp_path):
    (tmp_path / "test.txt").write_text("a plain sentence\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="--train_file"):
        task.label_names  # noqa: B018
    task.load_state({"regression": False, "label_names": ["neg", "pos"]})
    assert task.num_outputs == 2
    assert [(e.texts, e.label) for e in task.read("test")] == [(("a plain sentence",), None)]
    with pytest.raises(ValueError, match="differ from the saved model"):
        tasks.create_task("text_classification", label_names="a,b").load_state(
            {"regression": False, "label_names": ["neg", "pos"]}
        )


def test_every_sentence_option_is_a_flag_the_binaries_can_declare():
    options = tasks.all_task_options()  # raises when two tasks disagree on a default
    for name in ("train_file", "heldout_fraction", "heldout_seed", "label_names"):
        assert name in options
    assert options["heldout_seed"].default == 12345
    assert options["input_format"].choices == ("auto", "tsv", "csv", "jsonl", "fasttext")


def test_a_missing_column_names_the_flag_that_names_it(tmp_path):
    """A file whose columns are not the task's defaults: the message lists the file's
    columns and the flag to pass (issue 47: it listed the columns only)."""
    (tmp_path / "train.csv").write_text("review,category\nA fine film.,pos\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path), text_column="review")
    with pytest.raises(
        InputFileError,
        match=r"train.csv:1: the header has no column 'label' \(its columns are \['review', "
        r"'category'\]\); pass --label_column with the column's name$",
    ):
        task.read("train")
    task = tasks.create_task("text_classification", data_dir=str(tmp_path), label_column="category")
    with pytest.raises(InputFileError, match=r"no column 'text' .*; pass --text_column with"):
        task.read("train")
    task = tasks.create_task(
        "text_classification", data_dir=str(tmp_path), text_column="review", label_columns="a,b"
    )
    with pytest.raises(InputFileError, match=r"no column 'a' .*; pass --label_columns with"):
        task.read("train")
