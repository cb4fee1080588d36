"""An export says what it does as it goes (issue 47, point 7: `export_saved_model`
printed nothing for its first 104 s): loading the model, tracing the signatures, the
model's answers for the checks, writing, loading back to verify; each long step also
logs every few seconds while it runs (tests/utils/test_stages.py)."""

import logging

import pytest

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.text import BertTokenizer


@pytest.fixture(scope="module")
def finetuned_dir(tmp_path_factory, helpers):
    root = tmp_path_factory.mktemp("finetuned_progress")
    data_dir = root / "data"
    data_dir.mkdir()
    rows = ["text\tlabel", "a good film\tpos", "a bad film\tneg"]
    (data_dir / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = tasks.create_task("text_classification", data_dir=str(data_dir), max_seq_length=16)
    task.read("train")
    vocabulary = helpers.sentence_fixtures.VOCABULARY
    model = helpers.randomize(task.build_model(helpers.tiny_encoder(len(vocabulary))), 21)
    tasks.save_finetuned(str(root / "run"), task, model, BertTokenizer(vocabulary))
    return str(root / "run")


def _lines(caplog):
    return [record.getMessage() for record in caplog.records]


def test_a_saved_model_export_logs_each_step_as_it_starts(tmp_path, finetuned_dir, caplog):
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo"):
        exported = serving.export(finetuned_dir, str(tmp_path / "exports"))
    lines = _lines(caplog)
    expected = [
        f"Loading {finetuned_dir} (task)",
        "Exporting task as SavedModel",
        "Tracing the signature serving_default",
        "Answering the warmup texts with the model, for the checks",
        f"Writing the SavedModel {exported.path} (tracing its signatures)",
        "Loading the export back to check its answers against the model's",
    ]
    found = [next((i for i, line in enumerate(lines) if line == want), None) for want in expected]
    assert None not in found and found == sorted(found), lines


def test_an_onnx_export_logs_its_conversion_and_check(tmp_path, finetuned_dir, caplog):
    pytest.importorskip("tf2onnx")
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo"):
        serving.export(finetuned_dir, str(tmp_path / "onnx"), format="onnx")
    lines = _lines(caplog)
    assert lines[0] == f"Loading {finetuned_dir} (task)", lines
    assert any(line.startswith("Converting text_classification") for line in lines), lines
    assert "Checking the ONNX model's answers against the model's" in lines, lines
