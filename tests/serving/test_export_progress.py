"""An export says what it does as it goes (issue 47, point 7: `export_saved_model`
printed nothing for its first 104 s): loading the model, tracing the signatures, the
model's answers for the checks, writing, loading back to verify; each long step also
logs every few seconds while it runs (tests/utils/test_stages.py)."""

import logging
import pathlib

import child_process
import pytest

from keras_bert_zoo import serving

serving_helpers = child_process.import_by_path(
    "kbz_tests_serving_helpers", pathlib.Path(__file__).resolve().parent / "serving_helpers.py"
)


@pytest.fixture(scope="module")
def finetuned_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetuned_progress")
    serving_helpers.save_tiny_classifier(root, root / "run", seed=21, lowercase=None)
    return str(root / "run")


def _lines(caplog):
    return [record.getMessage() for record in caplog.records]


@pytest.mark.slow
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


@pytest.mark.slow
def test_an_onnx_export_logs_its_conversion_and_check(tmp_path, finetuned_dir, caplog):
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo"):
        serving.export(finetuned_dir, str(tmp_path / "onnx"), format="onnx")
    lines = _lines(caplog)
    assert lines[0] == f"Loading {finetuned_dir} (task)", lines
    assert any(line.startswith("Converting text_classification") for line in lines), lines
    assert "Checking the ONNX model's answers against the model's" in lines, lines
