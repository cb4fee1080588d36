"""tools/export_saved_model.py and tools/saved_model_run.py, run in-process through
their absl flags on a fine-tuned directory and on a pretrained checkpoint, and
saved_model_run.py as a user runs it, on a request the export cannot take."""

import ast
import contextlib
import io
import os
import pathlib
import subprocess
import sys

import child_process
import numpy as np
import pytest
import tensorflow as tf
from absl import app

from keras_bert_zoo import serving
from keras_bert_zoo.checkpoints import save_pretrained
from keras_bert_zoo.models import BertPretrainer

serving_helpers = child_process.import_by_path(
    "kbz_tests_serving_helpers", pathlib.Path(__file__).resolve().parent / "serving_helpers.py"
)


_run = serving_helpers.run_tool_main


@pytest.fixture(scope="module")
def finetuned_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetuned")
    task, model, tokenizer = serving_helpers.save_tiny_classifier(root, root / "run", seed=21)
    return str(root / "run"), task, model, tokenizer


@pytest.fixture(scope="module")
def tool_exports(tmp_path_factory, finetuned_dir, export_tool):
    """`(base, [what each run printed])`: the export tool run twice on the fine-tuned
    directory, to one base: version 1 (core ops, a warmup file), version 2
    (tensorflow-text ops). The tests read these exports."""
    directory, _, _, _ = finetuned_dir
    root = tmp_path_factory.mktemp("tool_exports")
    base = root / "exports"
    warmup = root / "warmup.tsv"
    warmup.write_text("a good film\nbad\n\n", encoding="utf-8")
    printed = []
    for options in ([f"--warmup_file={warmup}"], ["--tokenizer_ops=tensorflow_text"]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            _run(export_tool, f"--finetuned_dir={directory}", f"--export_base={base}", *options)
        printed.append(out.getvalue())
    return base, printed


@pytest.mark.slow
def test_export_tool_then_run_tool_in_python_and_cpp(
    tool_exports, finetuned_dir, export_tool, run_tool, cpp_runner, capsys
):
    directory, task, model, tokenizer = finetuned_dir
    base, (printed, printed_second) = tool_exports
    assert f"exported version 1 to {base / 'text_classification' / '1'}" in printed
    assert "signature serve_examples (tensorflow/serving/classify)" in printed
    assert "tokenizer ops: core" in printed and "ops outside core TensorFlow: none" in printed
    assert "labels: neg, pos" in printed
    printed = printed_second
    assert "tokenizer ops: tensorflow_text" in printed
    assert "FastWordpieceTokenizeWithOffsets" in printed and "tensorflow-text 2." in printed
    assert serving.existing_versions(str(base / "text_classification")) == [1, 2]
    with pytest.raises(FileExistsError, match="1 already exists"):
        _run(export_tool, f"--finetuned_dir={directory}", f"--export_base={base}", "--version=1")
    capsys.readouterr()

    texts = ["a good film", "bad mess ! é"]
    expected = task.serving_outputs(model, task.make_preprocessor(tokenizer))(
        text=tf.constant(texts)
    )
    _run(
        run_tool,
        f"--saved_model={base / 'text_classification'}",
        *(f"--input=text={t}" for t in texts),
    )
    printed = capsys.readouterr().out
    assert f"SavedModel: {base / 'text_classification' / '2'}" in printed  # the highest
    for row, label in enumerate(expected["label"].numpy()):
        assert f"[{row}]" in printed
        assert f"label: {label.decode()!r}" in printed
    printed_probabilities = [
        ast.literal_eval(line.split(": ", 1)[1])
        for line in printed.splitlines()
        if line.startswith("  probabilities: ")
    ]
    np.testing.assert_allclose(printed_probabilities, expected["probabilities"], atol=1e-6)
    _run(
        run_tool,
        f"--saved_model={base / 'text_classification' / '1'}",
        f"--cpp_runner={cpp_runner}",
        *(f"--input=text={t}" for t in texts),
    )
    printed = capsys.readouterr().out
    assert "answered by the C++ loader" in printed
    for label in expected["label"].numpy():
        assert f"label: {label.decode()!r}" in printed
    _run(run_tool, f"--saved_model={base / 'text_classification'}", "--show_only")
    printed = capsys.readouterr().out
    assert "input  text" in printed and "this process can run it" in printed


@pytest.mark.slow
def test_export_tool_on_a_pretrained_checkpoint(tmp_path, export_tool, run_tool, helpers, capsys):
    vocabulary = helpers.sentence_fixtures.VOCABULARY
    model = helpers.randomize(BertPretrainer(helpers.tiny_encoder(len(vocabulary))), 22)
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(f"{token}\n" for token in vocabulary), encoding="utf-8")
    checkpoint = save_pretrained(model, str(tmp_path / "checkpoint"), vocab_file=str(vocab_file))
    base = tmp_path / "exports"
    _run(
        export_tool,
        f"--pretrained_dir={checkpoint}",
        "--kind=masked_lm",
        f"--export_base={base}",
        "--model_name=mlm",
        "--max_seq_length=24",
        "--top_k=2",
    )
    assert "output fill_in_tokens" in capsys.readouterr().out
    served = serving.load_served_model(str(base / "mlm" / "1"))
    answer = served.answer(["the [MASK] sat on the mat"])[0]
    assert answer["mask_count"] == 1 and len(answer["fill_in_tokens"][0]) == 2
    # The checkpoint's MLM head is the model's: the same best fill-in.
    word_ids = np.array(
        [
            [2]
            + [vocabulary.index(w) for w in "the".split()]
            + [4]
            + [vocabulary.index(w) for w in "sat on the mat".split()]
            + [3]
        ]
    )
    logits = model.predict(
        {
            "input_word_ids": word_ids,
            "input_mask": np.ones_like(word_ids),
            "input_type_ids": np.zeros_like(word_ids),
            "masked_lm_positions": np.array([[2]]),
        },
        verbose=0,
    )["masked_lm_logits"]
    assert answer["fill_in_tokens"][0][0] == vocabulary[int(np.argmax(logits[0, 0]))]

    _run(
        export_tool,
        f"--pretrained_dir={checkpoint}",
        "--kind=hub_encoder_pair",
        f"--output_dir={tmp_path / 'hub'}",
        "--max_seq_length=24",
    )
    assert sorted(os.listdir(tmp_path / "hub")) == ["encoder", "preprocessor"]
    encoder = tf.saved_model.load(str(tmp_path / "hub" / "encoder"))
    assert hasattr(encoder, "mlm")  # the checkpoint had its MLM head
    exported = capsys.readouterr().out
    assert exported.count("this process can run it") == 2
    assert "no assets.extra" not in exported  # both halves have their manifests

    # --show_only on the pair's directory: both halves, from their assets.extra/.
    _run(run_tool, f"--saved_model={tmp_path / 'hub'}", "--show_only")
    printed = capsys.readouterr().out
    preprocessor_dir, encoder_dir = tmp_path / "hub" / "preprocessor", tmp_path / "hub" / "encoder"
    assert f"TF Hub style pair: {tmp_path / 'hub'}" in printed
    assert printed.index(f"SavedModel: {preprocessor_dir}") < printed.index(
        f"SavedModel: {encoder_dir}"
    )
    assert "hub preprocessor  seq_length: 24  text fields: text  lowercase: True" in printed
    cls_id, mask_id = vocabulary.index("[CLS]"), vocabulary.index("[MASK]")
    assert f"start_of_sequence_id={cls_id}" in printed and f"mask_id={mask_id}" in printed
    assert "tokenizer ops: core" in printed and "ops outside core TensorFlow: none" in printed
    hidden = model.encoder.hidden_size
    assert f"hub encoder: BertPretrainer  mlm: True  layers: 1  hidden: {hidden}" in printed
    assert "precision: float32" in printed and "encoder runs on: padded batch" in printed
    assert printed.count("this process can run it") == 2
    assert "computed: the export has no" not in printed
    with pytest.raises(app.UsageError, match="TF Hub style pair"):
        _run(run_tool, f"--saved_model={tmp_path / 'hub'}", "--input=text=the cat")


@pytest.mark.slow
def test_run_tool_names_an_unknown_input_in_one_line(tool_exports):
    """A field the export does not take ends the tool as a user runs it with one line
    naming it and what the export takes: no description, no usage text."""
    base, _ = tool_exports
    path = str(base / "text_classification" / "1")
    completed = subprocess.run(
        [
            sys.executable,
            "tools/saved_model_run.py",
            f"--saved_model={path}",
            "--input=sentence=a good film",
        ],
        capture_output=True,
        text=True,
        env=child_process.environment(),
        cwd=child_process.REPO_ROOT,
        timeout=300,
    )
    assert completed.returncode == 1 and completed.stdout == "", completed
    assert completed.stderr.splitlines()[-1] == (
        f"saved_model_run: error: {path} (serving_default): unknown input "
        "'sentence'; the export takes: text"
    )
    assert "USAGE" not in completed.stderr.upper() and "Traceback" not in completed.stderr
    # In Python, the loaded export refuses the same request with the same words.
    with pytest.raises(ValueError, match=r"unknown input 'sentence'; the export takes: text$"):
        serving.load_served_model(path)(sentence=np.array([b"a good film"], object))
