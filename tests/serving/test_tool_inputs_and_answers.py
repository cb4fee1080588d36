"""What a user hands tools/export_saved_model.py and tools/saved_model_run.py and what
they print back (issue 47, point 9): a run's --output_dir as --finetuned_dir or
--pretrained_dir; request files in CSV, TSV and JSON lines; answers with the export's
label names, as text or one JSON object a row; the export's listing only on request."""

import ast
import json
import pathlib
import shutil

import child_process
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import serving
from keras_bert_zoo.checkpoints import save_pretrained
from keras_bert_zoo.models import BertPretrainer
from keras_bert_zoo.utils.errors import UserError

serving_helpers = child_process.import_by_path(
    "kbz_tests_serving_helpers", pathlib.Path(__file__).resolve().parent / "serving_helpers.py"
)

TEXTS = ["A good film, and funny.", 'a "bad" film']


_run = serving_helpers.run_tool_main


@pytest.fixture(scope="module")
def finetuning_run(tmp_path_factory):
    """A fine-tuning run's --output_dir as run_finetuning leaves it: task.json beside
    finetuned/ (the run's model)."""
    root = tmp_path_factory.mktemp("finetuning_run")
    run_dir = root / "run"
    task, model, tokenizer = serving_helpers.save_tiny_classifier(
        root, run_dir / "finetuned", seed=31
    )
    shutil.copy(run_dir / "finetuned" / "task.json", run_dir / "task.json")
    (run_dir / "checkpoints").mkdir()
    return str(run_dir), task, model, tokenizer


@pytest.mark.slow
def test_the_export_tool_takes_a_pretraining_run_directory(tmp_path, export_tool, helpers, capsys):
    """A pretraining run's --output_dir (bert_config.json, checkpoints/, the layouts it
    wrote at its end): its export_google/ exports; without a layout, one line saying how
    to write one."""
    vocabulary = helpers.sentence_fixtures.VOCABULARY
    model = helpers.randomize(BertPretrainer(helpers.tiny_encoder(len(vocabulary))), 32)
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(f"{token}\n" for token in vocabulary), encoding="utf-8")
    run_dir = tmp_path / "pretraining_run"
    (run_dir / "checkpoints").mkdir(parents=True)
    shutil.copy(vocab_file, run_dir / "vocab.txt")
    (run_dir / "bert_config.json").write_text(
        json.dumps(model.encoder.bert_config.to_google_dict()), encoding="utf-8"
    )
    with pytest.raises(
        UserError, match=r"pretraining run without a checkpoint layout .*--mode=export"
    ):
        _run(export_tool, f"--pretrained_dir={run_dir}", f"--export_base={tmp_path / 'none'}")
    save_pretrained(model, str(run_dir / "export_google"), vocab_file=str(vocab_file))
    _run(
        export_tool,
        f"--pretrained_dir={run_dir}",
        "--kind=masked_lm",
        f"--export_base={tmp_path / 'exports'}",
        "--model_name=mlm",
        "--max_seq_length=24",
    )
    assert "output fill_in_tokens" in capsys.readouterr().out
    served = serving.load_served_model(str(tmp_path / "exports" / "mlm" / "1"))
    assert served.answer(["the [MASK] sat on the mat"])[0]["mask_count"] == 1


@pytest.fixture(scope="module")
def exported(tmp_path_factory, finetuning_run, export_tool):
    """The run directory exported by the tool (--finetuned_dir=<the run's --output_dir>),
    and the Keras model's answers to TEXTS."""
    run_dir, task, model, tokenizer = finetuning_run
    base = tmp_path_factory.mktemp("exports")
    _run(export_tool, f"--finetuned_dir={run_dir}", f"--export_base={base}")
    path = base / "text_classification" / "1"
    assert (path / "saved_model.pb").is_file()
    expected = task.serving_outputs(model, task.make_preprocessor(tokenizer))(
        text=tf.constant(TEXTS)
    )
    return str(path), {key: value.numpy() for key, value in expected.items()}


@pytest.fixture(scope="module")
def request_files(tmp_path_factory):
    """The same two texts as CSV (a quoted comma, doubled quotes), TSV and JSON lines."""
    root = tmp_path_factory.mktemp("requests")
    (root / "requests.csv").write_text(
        'text\n"A good film, and funny."\n"a ""bad"" film"\n', encoding="utf-8"
    )
    (root / "requests.tsv").write_text("text\n" + "\n".join(TEXTS) + "\n", encoding="utf-8")
    (root / "requests.jsonl").write_text(
        "".join(json.dumps({"text": text}) + "\n" for text in TEXTS), encoding="utf-8"
    )
    (root / "bad.jsonl").write_text('{"text": "fine"}\n{"text": 3}\n', encoding="utf-8")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", ["requests.csv", "requests.tsv", "requests.jsonl"])
def test_request_files_answer_with_label_names(name, exported, request_files, run_tool, capsys):
    path, expected = exported
    _run(run_tool, f"--saved_model={path}", f"--input_file={request_files / name}")
    printed = capsys.readouterr().out
    # One header line, not the signatures' listing (--describe, --show_only print it).
    assert printed.splitlines()[0] == f"SavedModel: {path}"
    assert "signature serving_default" not in printed and "op manifest" not in printed
    assert "request: serving_default on 2 row(s)" in printed
    listed = [
        ast.literal_eval(line.split(": ", 1)[1])
        for line in printed.splitlines()
        if line.startswith("  probabilities: ")
    ]
    np.testing.assert_allclose(listed, expected["probabilities"], atol=1e-6)
    by_label = [line for line in printed.splitlines() if "probabilities by label:" in line]
    assert by_label == [
        f"  probabilities by label: neg {neg:.4f}  pos {pos:.4f}"
        for neg, pos in expected["probabilities"]
    ]


@pytest.mark.slow
def test_json_output_is_one_object_a_row_and_nothing_else(
    exported, request_files, run_tool, capsys
):
    path, expected = exported
    _run(
        run_tool,
        f"--saved_model={path}",
        f"--input_file={request_files / 'requests.csv'}",
        "--output=json",
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(TEXTS)
    for row, line in enumerate(lines):
        answer = json.loads(line)
        assert answer["label"] == expected["label"][row].decode()
        assert answer["label_id"] == int(expected["label_id"][row])
        assert list(answer["probabilities"]) == ["neg", "pos"]
        np.testing.assert_allclose(
            list(answer["probabilities"].values()), expected["probabilities"][row], atol=1e-6
        )


def test_describe_prints_the_listing_once_before_the_answers(exported, run_tool, capsys):
    path, _ = exported
    _run(run_tool, f"--saved_model={path}", "--describe", f"--input=text={TEXTS[0]}")
    printed = capsys.readouterr().out
    assert printed.count("signature serving_default") == 1
    assert printed.index("this process can run it") < printed.index("[0]")


def test_a_malformed_request_file_names_its_line(exported, request_files, run_tool):
    path, _ = exported
    with pytest.raises(UserError, match=r"bad.jsonl:2: expected an object of texts"):
        _run(run_tool, f"--saved_model={path}", f"--input_file={request_files / 'bad.jsonl'}")
