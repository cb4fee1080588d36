"""The TF Hub style pair records what it is, as the task exports do: each of its two
SavedModels holds `assets.extra/export.json` and `assets.extra/custom_ops.json`
(`tools/saved_model_run.py --show_only` printing them: tests/serving/test_tools.py).

References: the vocabulary written here (special token ids), the `bert_tiny` preset's
shape, the ops read back from each `saved_model.pb` (`ops.op_manifest`), the installed
TensorFlow and tensorflow-text versions.
"""

import json
import os

import keras
import pytest
import tensorflow as tf
import tensorflow_text

from keras_bert_zoo import serving
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.models import BertEncoder, BertPretrainer
from keras_bert_zoo.serving import ops
from keras_bert_zoo.text import BertTokenizer

# Special tokens away from their usual ids, so that a recorded id is this vocabulary's.
VOCABULARY = ["[PAD]", "the", "[UNK]", "quick", "[CLS]", "brown", "[SEP]", "fox", "[MASK]"]
VOCABULARY += ["jumps", "over", "lazy", "dog", "##s", ".", ","]
SEQ_LENGTH = 24


def _bert_tiny(dtype=None):
    config = BertConfig.from_preset("bert_tiny_uncased").replace(vocab_size=len(VOCABULARY))
    return BertEncoder.from_bert_config(config, dtype=dtype), config


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    vocab_file = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab_file.write_text("".join(f"{token}\n" for token in VOCABULARY), encoding="utf-8")
    return BertTokenizer(str(vocab_file), lowercase=True)


@pytest.fixture(scope="module")
def pair(tmp_path_factory, tokenizer):
    """A bert_tiny pretrainer's pair, with core-ops tokenization (the default)."""
    encoder, config = _bert_tiny()
    output_dir = tmp_path_factory.mktemp("hub") / "pair"
    paths = serving.export(
        serving.ModelSource(None, BertPretrainer(encoder), tokenizer, max_seq_length=SEQ_LENGTH),
        str(output_dir),
        format="hub_pair",
        verify=False,  # what the pair answers: test_hub_pair.py; here what it records
    ).paths
    return str(output_dir), paths, config


def _extra(directory, name):
    with open(os.path.join(directory, "assets.extra", name), encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.slow
def test_each_half_records_its_export_description_and_op_manifest(pair):
    output_dir, (preprocessor_dir, encoder_dir), config = pair
    assert serving.is_hub_pair(output_dir) and not serving.is_hub_pair(preprocessor_dir)

    preprocessor = _extra(preprocessor_dir, "export.json")
    assert preprocessor["kind"] == "hub_preprocessor"
    assert preprocessor["tokenizer_ops"] == "core"
    assert preprocessor["seq_length"] == SEQ_LENGTH and preprocessor["lowercase"] is True
    assert preprocessor["text_fields"] == ["text"]
    assert preprocessor["special_tokens"] == {
        "vocab_size": len(VOCABULARY),
        "start_of_sequence_id": VOCABULARY.index("[CLS]"),
        "end_of_segment_id": VOCABULARY.index("[SEP]"),
        "padding_id": VOCABULARY.index("[PAD]"),
        "mask_id": VOCABULARY.index("[MASK]"),
    }
    # What the saved preprocessor itself answers.
    loaded = tf.saved_model.load(preprocessor_dir)
    answered = {k: int(v) for k, v in loaded.tokenize.get_special_tokens_dict().items()}
    assert answered == preprocessor["special_tokens"]
    assert preprocessor["signatures"]["serving_default"]["inputs"] == {
        "text": {"dtype": "string", "shape": [-1]}
    }

    encoder = _extra(encoder_dir, "export.json")
    assert encoder["kind"] == "hub_encoder"
    assert encoder["model"] == "BertPretrainer" and encoder["mlm"] is True
    assert encoder["bert_config"]["num_layers"] == config.num_layers == 2
    assert encoder["bert_config"]["hidden_size"] == config.hidden_size == 128
    assert encoder["bert_config"]["vocab_size"] == len(VOCABULARY)
    assert encoder["precision"] == "float32" and encoder["padding_free"] is False
    assert set(encoder["signatures"]["serving_default"]["inputs"]) == {
        "input_word_ids",
        "input_mask",
        "input_type_ids",
    }

    for directory, description in ((preprocessor_dir, preprocessor), (encoder_dir, encoder)):
        manifest = _extra(directory, "custom_ops.json")
        assert manifest == ops.op_manifest(directory)  # read again from the graph
        assert manifest["custom_ops"] == [] and manifest["tensorflow_text_version"] is None
        assert description["tensorflow_version"] == tf.__version__
        assert description["tensorflow_text_version"] is None


@pytest.mark.slow
def test_tensorflow_text_ops_and_bfloat16_are_recorded(tmp_path, tokenizer):
    encoder, _ = _bert_tiny(dtype="mixed_bfloat16")
    preprocessor_dir, encoder_dir = serving.export(
        serving.ModelSource(None, encoder, tokenizer, max_seq_length=SEQ_LENGTH),
        str(tmp_path / "pair"),
        format="hub_pair",
        tokenizer_ops="tensorflow_text",
    ).paths
    preprocessor = _extra(preprocessor_dir, "export.json")
    manifest = _extra(preprocessor_dir, "custom_ops.json")
    assert preprocessor["tokenizer_ops"] == "tensorflow_text"
    assert preprocessor["tensorflow_text_version"] == tensorflow_text.__version__
    needed = {entry["op"] for entry in manifest["custom_ops"]}
    assert needed and needed <= ops.graph_op_names(preprocessor_dir)
    assert not any(hasattr(tf.raw_ops, op) for op in needed)
    encoder_description = _extra(encoder_dir, "export.json")
    assert encoder_description["model"] == "BertEncoder" and encoder_description["mlm"] is False
    assert encoder_description["precision"] == "bfloat16"
    assert keras.backend.standardize_dtype(encoder.compute_dtype) == "bfloat16"
