"""tools/convert_checkpoint.py, run in-process through its absl flags."""

import numpy as np
import pytest

from keras_bert_zoo.checkpoints import from_pretrained, save_pretrained
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.models import BertEncoder, BertPretrainer


@pytest.fixture(scope="module")
def tool(load_tool):
    with load_tool("convert_checkpoint") as module:
        yield module


def _run(tool, *args):
    flags = tool.flags.FLAGS
    try:
        flags(["convert_checkpoint", *args])
        tool.main(["convert_checkpoint"])
    finally:
        flags.unparse_flags()


def test_convert_google_to_huggingface_and_back_with_heads(tmp_path, tool, helpers):
    model = helpers.randomize_weights(
        BertPretrainer(BertEncoder.from_bert_config(BertConfig.from_preset("bert_tiny"))), seed=8
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"tok{i}\n" for i in range(30522)))
    save_pretrained(model, tmp_path / "google", format="google", vocab_file=vocab)

    _run(
        tool,
        f"--input={tmp_path / 'google'}",
        f"--output={tmp_path / 'hf'}",
        "--output_format=huggingface",
        "--include_heads",
    )
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == vocab.read_bytes()
    _run(
        tool,
        f"--input={tmp_path / 'hf'}",
        f"--output={tmp_path / 'google2'}",
        "--output_format=google",
        "--include_heads",
    )
    reloaded = from_pretrained(tmp_path / "google2", model="pretrainer")
    inputs = helpers.tiny_inputs(with_positions=True)
    expected, actual = model(inputs), reloaded(inputs)
    for key in ("masked_lm_logits", "next_sentence_logits"):
        assert np.array_equal(np.asarray(expected[key]), np.asarray(actual[key]))

    # Without --include_heads only the encoder is written.
    _run(
        tool,
        f"--input={tmp_path / 'google'}",
        f"--output={tmp_path / 'enc'}",
        "--output_format=huggingface",
    )
    with pytest.raises(ValueError, match="cls.predictions.bias"):
        from_pretrained(tmp_path / "enc", model="pretrainer")
