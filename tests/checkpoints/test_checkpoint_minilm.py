"""Real weights: all-MiniLM-L6-v2 through both layouts, against an independent numpy BERT."""

import json
import logging

import numpy as np
import pytest

from keras_bert_zoo.checkpoints import (
    CheckpointError,
    from_pretrained,
    load_weights,
    read_checkpoint_info,
    save_pretrained,
)
from keras_bert_zoo.models import BertEncoder

# Largest absolute difference allowed from the numpy BERT and from transformers. Today's
# is about 2.6e-5 (float32 rounding); a LayerNorm epsilon of 1e-5 instead of BERT's
# 1e-12 moves the outputs by 1.15e-4, which 1e-4 only just caught.
TOLERANCE = 5e-5


def _run(encoder, inputs):
    outputs = encoder(inputs, training=False)
    return np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])


@pytest.fixture(scope="module")
def hf_encoder(minilm_dir):
    return from_pretrained(minilm_dir)


@pytest.fixture(scope="module")
def hf_outputs(hf_encoder, minilm_inputs):
    return _run(hf_encoder, minilm_inputs)


@pytest.fixture(scope="module")
def numpy_outputs(minilm_arrays, minilm_inputs, helpers):
    return helpers.numpy_bert(minilm_arrays, minilm_inputs, num_heads=12, num_layers=6)


def test_config_is_read_with_exact_gelu(minilm_dir, hf_encoder):
    info = read_checkpoint_info(minilm_dir)
    assert info.format == "huggingface"
    assert info.vocab_file.endswith("vocab.txt")
    config = hf_encoder.bert_config
    assert (config.num_layers, config.hidden_size, config.num_heads) == (6, 384, 12)
    assert config.intermediate_size == 1536
    assert config.hidden_act == "gelu"  # Hugging Face "gelu" = exact erf


def test_huggingface_minilm_matches_numpy(hf_outputs, numpy_outputs):
    sequence, pooled = hf_outputs
    ref_sequence, ref_pooled = numpy_outputs
    assert sequence.dtype == np.float32
    sequence_diff = np.abs(sequence - ref_sequence).max()
    pooled_diff = np.abs(pooled - ref_pooled).max()
    print(f"MiniLM vs numpy: sequence_output {sequence_diff:.3g}, pooled_output {pooled_diff:.3g}")
    assert sequence_diff < TOLERANCE, sequence_diff
    assert pooled_diff < TOLERANCE, pooled_diff


def test_huggingface_minilm_matches_transformers(minilm_dir, minilm_inputs, hf_outputs):
    import torch
    import transformers

    model = transformers.BertModel.from_pretrained(str(minilm_dir), local_files_only=True)
    model.eval()
    with torch.no_grad():
        result = model(
            input_ids=torch.tensor(minilm_inputs["input_word_ids"], dtype=torch.long),
            attention_mask=torch.tensor(minilm_inputs["input_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(minilm_inputs["input_type_ids"], dtype=torch.long),
        )
    sequence, pooled = hf_outputs
    # Hugging Face masks with finfo.min instead of -1e9: compare the real tokens.
    real = minilm_inputs["input_mask"].astype(bool)
    sequence_diff = np.abs(sequence - result.last_hidden_state.numpy())[real].max()
    pooled_diff = np.abs(pooled - result.pooler_output.numpy()).max()
    print(f"MiniLM vs transformers: sequence_output {sequence_diff:.3g}, pooled {pooled_diff:.3g}")
    assert sequence_diff < TOLERANCE, sequence_diff
    assert pooled_diff < TOLERANCE, pooled_diff


@pytest.mark.slow
def test_google_layout_fixture_loads_to_the_same_outputs(
    google_minilm_dir, minilm_inputs, hf_outputs, numpy_outputs
):
    info = read_checkpoint_info(google_minilm_dir)
    assert info.format == "google"
    encoder = BertEncoder.from_bert_config(info.config)
    report = load_weights(encoder, google_minilm_dir)
    # Optimizer slots and the step counter are skipped, not reported as unexpected.
    assert "global_step" in report.skipped_bookkeeping
    assert "bert/encoder/layer_0/attention/self/query/kernel/adam_m" in report.skipped_bookkeeping
    assert not report.unexpected and not report.missing
    sequence, pooled = _run(encoder, minilm_inputs)
    google_diff = max(np.abs(sequence - hf_outputs[0]).max(), np.abs(pooled - hf_outputs[1]).max())
    print(f"MiniLM Google-layout reload vs Hugging Face load: {google_diff:.3g}")
    assert google_diff == 0.0  # same float32 numbers, only renamed/reshaped
    numpy_diff = np.abs(sequence - numpy_outputs[0]).max()
    assert numpy_diff < TOLERANCE, numpy_diff


def test_google_gelu_means_tanh(tmp_path, google_minilm_dir):
    """google-research/bert's "gelu" is the tanh form: it must not load as exact erf."""
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        (tmp_path / name).symlink_to(google_minilm_dir / name)
    config = json.loads((google_minilm_dir / "bert_config.json").read_text())
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(config, hidden_act="gelu")))
    assert read_checkpoint_info(tmp_path).config.hidden_act == "gelu_approximate"
    assert read_checkpoint_info(google_minilm_dir).config.hidden_act == "gelu"


def test_minilm_save_and_reload_is_exact(
    tmp_path, minilm_dir, hf_encoder, minilm_inputs, hf_outputs
):
    """Real weights through our Hugging Face writer and back (tiny models cover Google)."""
    vocab = str(minilm_dir / "vocab.txt")
    save_pretrained(hf_encoder, tmp_path / "out", format="huggingface", vocab_file=vocab)
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == open(vocab, "rb").read()
    reloaded = from_pretrained(tmp_path / "out")
    sequence, pooled = _run(reloaded, minilm_inputs)
    assert np.array_equal(sequence, hf_outputs[0])
    assert np.array_equal(pooled, hf_outputs[1])


def _minilm_with_vocab(minilm_dir, directory, lines):
    """The real MiniLM directory (weights linked, not copied) with another vocab.txt."""
    directory.mkdir()
    for path in minilm_dir.iterdir():
        if path.name != "vocab.txt":
            (directory / path.name).symlink_to(path)
    (directory / "vocab.txt").write_text("".join(f"{line}\n" for line in lines), "utf-8")
    return directory


def test_vocab_longer_than_the_embedding_table_is_refused(minilm_dir, tmp_path):
    lines = (minilm_dir / "vocab.txt").read_text("utf-8").splitlines()
    assert len(lines) == 30522
    extra = [f"[EXTRA{i}]" for i in range(100)]
    directory = _minilm_with_vocab(minilm_dir, tmp_path / "longer", lines + extra)
    with pytest.raises(CheckpointError) as error:
        from_pretrained(directory)
    message = str(error.value)
    assert str(directory / "vocab.txt") in message
    assert "30622 tokens" in message and "30522 rows" in message


def test_vocab_shorter_than_the_embedding_table_loads_with_a_warning(
    minilm_dir, tmp_path, caplog, hf_outputs, minilm_inputs
):
    lines = (minilm_dir / "vocab.txt").read_text("utf-8").splitlines()
    directory = _minilm_with_vocab(minilm_dir, tmp_path / "shorter", lines[:500])
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.checkpoints.loader"):
        encoder = from_pretrained(directory)
    assert "has 500 tokens, fewer than the 30522 rows" in caplog.text
    assert str(directory / "vocab.txt") in caplog.text
    for ours, reference in zip(_run(encoder, minilm_inputs), hf_outputs, strict=True):
        np.testing.assert_array_equal(ours, reference)
