"""`tools/run_pretraining.py` on records written by the port of google-research/bert's
create_pretraining_data.py (benchmarks/, imported by path): the original's records train
with the tool's `main` (in this process), evaluate and export; a missing input, as a user
runs the tool, is one error naming it. The runner's logic is
tested in-process in tests/pretraining/test_run_pretraining.py.
"""

import importlib.util
import json
import pathlib
import subprocess
import sys

import child_process
import numpy as np
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = REPO_ROOT / "tools" / "run_pretraining.py"
PORT = REPO_ROOT / "benchmarks" / "_original_create_pretraining_data.py"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "the a cat dog sat ran on under mat log and then it was big small red blue".split()


def _port():
    spec = importlib.util.spec_from_file_location("kbz_tool_test_original_port", PORT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_environment = child_process.environment


def _run(args, timeout=400):
    completed = subprocess.run(
        [sys.executable, str(BINARY), *args],
        capture_output=True,
        text=True,
        env=_environment(),
        cwd=REPO_ROOT,
        timeout=timeout,
    )
    return completed.returncode, completed.stdout + completed.stderr


def _corpus(path, documents, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(documents):
            for _ in range(int(rng.integers(2, 7))):
                words = rng.choice(WORDS, size=int(rng.integers(3, 10)))
                f.write(" ".join(words).capitalize() + " .\n")
            f.write("\n")
    return str(path)


@pytest.mark.slow
def test_original_records_train_evaluate_and_export(tmp_path, run_tool_in_process):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(t + "\n" for t in SPECIALS + WORDS + ["."]), encoding="utf-8")
    port = _port()
    for name, documents, seed in (("train", 60, 0), ("heldout", 15, 1)):
        written = port.run(
            _corpus(tmp_path / f"{name}.txt", documents, seed),
            str(tmp_path / f"{name}.tfrecord"),
            str(vocab),
            max_seq_length=48,
            max_predictions_per_seq=8,
            dupe_factor=2,
        )
        assert written > 20
    config = {
        "vocab_size": len(SPECIALS) + len(WORDS) + 1,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 48,
        "type_vocab_size": 2,
    }
    (tmp_path / "bert_config.json").write_text(json.dumps(config), encoding="utf-8")
    output_dir = tmp_path / "out"
    # The tool's `main` in this process (a user error's fresh process: the test below).
    returncode, stdout, stderr = run_tool_in_process(
        "run_pretraining",
        *[
            f"--input_file={tmp_path / 'train.tfrecord'}",
            f"--eval_input_file={tmp_path / 'heldout.tfrecord'}",
            f"--bert_config_file={tmp_path / 'bert_config.json'}",
            f"--vocab_file={vocab}",
            f"--output_dir={output_dir}",
            "--num_train_steps=6",
            "--train_batch_size=8",
            "--steps_per_loop=3",
            "--learning_rate=1e-3",
            "--progress=log",
        ],
    )
    output = stdout + stderr
    assert returncode == 0, output
    assert "Trained to step 6" in output
    assert "masked_lm_accuracy" in output and "next_sentence_accuracy" in output
    results = json.loads((output_dir / "eval_results.json").read_text(encoding="utf-8"))
    assert results["step"] == 6 and results["results"]["sequences"] > 0
    # The lengths were read from the original's records.
    assert (
        json.loads((output_dir / "bert_config.json").read_text())["max_position_embeddings"] == 48
    )
    for layout, files in (
        ("export_google", ("bert_model.ckpt.index", "bert_config.json", "vocab.txt")),
        ("export_huggingface", ("model.safetensors", "config.json", "vocab.txt")),
    ):
        for name in files:
            assert (output_dir / layout / name).is_file(), (layout, name)
    hf_config = json.loads((output_dir / "export_huggingface" / "config.json").read_text())
    assert hf_config["architectures"] == ["BertForPreTraining"]


@pytest.mark.slow
def test_a_missing_input_is_named(tmp_path):
    returncode, output = _run(
        [
            f"--input_file={tmp_path / 'missing-*.tfrecord'}",
            "--preset=bert_tiny_uncased",
            f"--output_dir={tmp_path / 'out'}",
        ],
        timeout=200,
    )
    assert returncode != 0
    assert "missing-*.tfrecord" in output and "No files match" in output
    assert not (tmp_path / "out").exists()
