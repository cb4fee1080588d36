"""Round trips of random bert_tiny models through both layouts, and the format variants."""

import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.checkpoints import (
    checkpoint_tensors,
    from_pretrained,
    load_weights,
    save_pretrained,
)
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.models import (
    BertClassifier,
    BertEncoder,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)

FORMATS = ("google", "huggingface")


def _tiny_config():
    return BertConfig.from_preset("bert_tiny")


@pytest.fixture(scope="module")
def tiny_encoder(helpers):
    return helpers.randomize_weights(BertEncoder.from_bert_config(_tiny_config()), seed=3)


@pytest.fixture(scope="module")
def tiny_pretrainer(helpers):
    encoder = BertEncoder.from_bert_config(_tiny_config())
    return helpers.randomize_weights(BertPretrainer(encoder), seed=4)


def _assert_same_weights(a, b):
    assert len(a.weights) == len(b.weights)
    for x, y in zip(a.weights, b.weights, strict=True):
        assert x.path == y.path
        assert np.array_equal(x.numpy(), y.numpy()), x.path


def _np_outputs(outputs):
    if isinstance(outputs, dict):
        return {k: _np_outputs(v) for k, v in outputs.items()}
    if isinstance(outputs, list | tuple):
        return [_np_outputs(v) for v in outputs]
    return np.asarray(outputs)


def _assert_bitwise_equal(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_bitwise_equal(a[key], b[key])
    elif isinstance(a, list):
        for x, y in zip(a, b, strict=True):
            _assert_bitwise_equal(x, y)
    else:
        assert np.array_equal(a, b), np.abs(a - b).max()


@pytest.mark.parametrize("fmt", FORMATS)
def test_encoder_round_trip_is_exact(tmp_path, fmt, tiny_encoder, helpers):
    save_pretrained(tiny_encoder, tmp_path, format=fmt)
    reloaded = from_pretrained(tmp_path)
    assert reloaded.bert_config == tiny_encoder.bert_config
    _assert_same_weights(tiny_encoder, reloaded)
    inputs = helpers.tiny_inputs()
    _assert_bitwise_equal(_np_outputs(tiny_encoder(inputs)), _np_outputs(reloaded(inputs)))


@pytest.mark.parametrize("fmt", FORMATS)
def test_pretrainer_round_trip_is_exact(tmp_path, fmt, tiny_pretrainer, helpers):
    save_pretrained(tiny_pretrainer, tmp_path, format=fmt)
    reloaded = from_pretrained(tmp_path, model="pretrainer")
    assert isinstance(reloaded, BertPretrainer)
    _assert_same_weights(tiny_pretrainer, reloaded)
    inputs = helpers.tiny_inputs(with_positions=True)
    expected, actual = _np_outputs(tiny_pretrainer(inputs)), _np_outputs(reloaded(inputs))
    assert expected["masked_lm_logits"].shape == (3, 3, 30522)
    _assert_bitwise_equal(expected, actual)


def test_google_writer_uses_the_tf1_names_and_shapes(tmp_path, tiny_pretrainer):
    save_pretrained(tiny_pretrainer, tmp_path, format="google")
    assert sorted(os.listdir(tmp_path)) == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    shapes = tf.train.load_checkpoint(str(tmp_path / "bert_model.ckpt"))
    shapes = shapes.get_variable_to_shape_map()
    assert shapes["bert/embeddings/word_embeddings"] == [30522, 128]
    assert shapes["bert/embeddings/LayerNorm/gamma"] == [128]
    assert shapes["bert/encoder/layer_1/attention/self/query/kernel"] == [128, 128]
    assert shapes["bert/encoder/layer_1/attention/output/dense/kernel"] == [128, 128]
    assert shapes["bert/encoder/layer_0/intermediate/dense/kernel"] == [128, 512]
    assert shapes["bert/encoder/layer_0/output/dense/kernel"] == [512, 128]
    assert shapes["cls/predictions/output_bias"] == [30522]
    assert shapes["cls/seq_relationship/output_weights"] == [2, 128]
    assert len(shapes) == 5 + 2 * 16 + 2 + 5 + 2
    config = json.loads((tmp_path / "bert_config.json").read_text())
    assert config["hidden_act"] == "gelu"  # bert_tiny is the tanh GELU, Google's "gelu"
    assert config["num_hidden_layers"] == 2


def test_google_tensors_equal_the_independent_mapping(tiny_pretrainer, helpers):
    """Our Google names/layouts = the documented HF->TF1 mapping applied to our HF output."""
    hf = checkpoint_tensors(tiny_pretrainer, "huggingface")
    google = checkpoint_tensors(tiny_pretrainer, "google")
    assert all(name.startswith(("bert.", "cls.")) for name in hf)
    mapped = {}
    for name, array in hf.items():
        tf1, transpose = helpers.hf_to_google_name(name)
        mapped[tf1] = array.T if transpose else array
    assert mapped.keys() == google.keys()
    for name, array in google.items():
        assert np.array_equal(mapped[name], array), name


@pytest.mark.slow
def test_huggingface_pretrainer_matches_transformers(tmp_path, tiny_pretrainer, helpers):
    import torch
    import transformers

    save_pretrained(tiny_pretrainer, tmp_path, format="huggingface")
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [
        "BertForPreTraining"
    ]
    model = transformers.BertForPreTraining.from_pretrained(str(tmp_path), local_files_only=True)
    model.eval()
    inputs = helpers.tiny_inputs(with_positions=True)
    with torch.no_grad():
        result = model(
            input_ids=torch.tensor(inputs["input_word_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["input_type_ids"], dtype=torch.long),
        )
    ours = _np_outputs(tiny_pretrainer(inputs))
    positions = inputs["masked_lm_positions"]
    theirs_mlm = np.take_along_axis(result.prediction_logits.numpy(), positions[:, :, None], axis=1)
    assert np.abs(ours["masked_lm_logits"] - theirs_mlm).max() < 1e-3
    assert (
        np.abs(ours["next_sentence_logits"] - result.seq_relationship_logits.numpy()).max() < 1e-4
    )


@pytest.mark.parametrize(
    ("task", "kwargs", "fmt"),
    [
        (BertClassifier, {"num_classes": 3}, "google"),
        (BertSpanLabeler, {}, "huggingface"),
        (BertTokenClassifier, {"num_classes": 5}, "huggingface"),
    ],
)
def test_task_model_round_trip_is_exact(tmp_path, task, kwargs, fmt, helpers):
    model = helpers.randomize_weights(
        task(BertEncoder.from_bert_config(_tiny_config()), **kwargs), seed=5
    )
    save_pretrained(model, tmp_path, format=fmt)
    reloaded = from_pretrained(tmp_path, model=task, **kwargs)
    _assert_same_weights(model, reloaded)
    inputs = helpers.tiny_inputs()
    _assert_bitwise_equal(
        _np_outputs(model(inputs, training=False)), _np_outputs(reloaded(inputs, training=False))
    )


def test_encoder_from_pretraining_checkpoint_ignores_heads(tmp_path, tiny_pretrainer, caplog):
    save_pretrained(tiny_pretrainer, tmp_path, format="google")
    encoder = BertEncoder.from_bert_config(_tiny_config())
    report = load_weights(encoder, tmp_path)
    assert "cls/seq_relationship/output_weights" in report.unused_heads
    assert not report.unexpected
    _assert_same_weights(tiny_pretrainer.encoder, encoder)


def test_classifier_from_encoder_checkpoint_gets_a_new_head(tmp_path, tiny_encoder, caplog):
    save_pretrained(tiny_encoder, tmp_path, format="huggingface")
    with caplog.at_level(logging.WARNING):
        classifier = from_pretrained(tmp_path, model=BertClassifier, num_classes=4)
    assert "classification_head" in caplog.text
    _assert_same_weights(tiny_encoder, classifier.encoder)


def test_pretrainer_from_headless_checkpoint_is_refused(tmp_path, tiny_encoder):
    save_pretrained(tiny_encoder, tmp_path, format="google")
    with pytest.raises(ValueError, match=r"cls/predictions/output_bias") as error:
        from_pretrained(tmp_path, model="pretrainer")
    assert "cls/seq_relationship/output_weights" in str(error.value)


def test_name_overrides_for_fine_tuned_google_heads(tmp_path, helpers):
    model = helpers.randomize_weights(
        BertClassifier(BertEncoder.from_bert_config(_tiny_config()), num_classes=2), seed=6
    )
    overrides = {
        "classification_head/output_dense/kernel": "mnli/output_weights",
        "classification_head/output_dense/bias": "mnli/output_bias",
    }
    save_pretrained(model, tmp_path, format="google", name_overrides=overrides)
    names = tf.train.load_checkpoint(str(tmp_path / "bert_model.ckpt")).get_variable_to_shape_map()
    assert names["mnli/output_weights"] == [2, 128]
    reloaded = from_pretrained(
        tmp_path, model=BertClassifier, num_classes=2, name_overrides=overrides
    )
    _assert_same_weights(model, reloaded)


def _hf_pretrainer_arrays(model):
    return {name: np.array(array) for name, array in checkpoint_tensors(model, "hf").items()}


def _write_hf(directory, arrays, config):
    from safetensors.numpy import save_file

    directory.mkdir(exist_ok=True)
    save_file(arrays, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(config.to_hf_dict()))
    return directory


def test_huggingface_name_variants(tmp_path, tiny_pretrainer, helpers):
    """No `bert.` prefix, old gamma/beta LayerNorm names, position_ids, tied decoder copies."""
    arrays = {}
    for name, array in _hf_pretrainer_arrays(tiny_pretrainer).items():
        name = name.removeprefix("bert.")
        if name.startswith("encoder.layer.1.") and "LayerNorm" in name:
            name = name.replace(".weight", ".gamma").replace(".bias", ".beta")
        arrays[name] = array
    arrays["embeddings.position_ids"] = np.arange(512, dtype=np.int64)[None]
    arrays["cls.predictions.decoder.weight"] = arrays["embeddings.word_embeddings.weight"]
    arrays["cls.predictions.decoder.bias"] = arrays["cls.predictions.bias"]
    directory = _write_hf(tmp_path / "variants", arrays, tiny_pretrainer.encoder.bert_config)
    reloaded = from_pretrained(directory, model="pretrainer")
    _assert_same_weights(tiny_pretrainer, reloaded)

    # An untied decoder cannot be represented: refused, naming the tensor.
    arrays["cls.predictions.decoder.weight"] = arrays["cls.predictions.decoder.weight"] + 1.0
    directory = _write_hf(tmp_path / "untied", arrays, tiny_pretrainer.encoder.bert_config)
    with pytest.raises(ValueError, match=r"cls\.predictions\.decoder\.weight"):
        from_pretrained(directory, model="pretrainer")


def test_pytorch_bin_and_bfloat16_safetensors(tmp_path, tiny_encoder, helpers):
    import torch
    from safetensors.torch import save_file

    arrays = _hf_pretrainer_arrays(tiny_encoder)
    config = tiny_encoder.bert_config
    (tmp_path / "bin").mkdir()
    torch.save(
        {name: torch.from_numpy(array) for name, array in arrays.items()},
        str(tmp_path / "bin" / "pytorch_model.bin"),
    )
    (tmp_path / "bin" / "config.json").write_text(json.dumps(config.to_hf_dict()))
    _assert_same_weights(tiny_encoder, from_pretrained(tmp_path / "bin"))

    (tmp_path / "bf16").mkdir()
    save_file(
        {name: torch.from_numpy(array).to(torch.bfloat16) for name, array in arrays.items()},
        str(tmp_path / "bf16" / "model.safetensors"),
    )
    (tmp_path / "bf16" / "config.json").write_text(json.dumps(config.to_hf_dict()))
    reloaded = from_pretrained(tmp_path / "bf16")
    for a, b in zip(tiny_encoder.weights, reloaded.weights, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-2, atol=1e-2)


def test_google_prefix_path_and_mixed_precision(tmp_path, tiny_encoder, helpers):
    save_pretrained(tiny_encoder, tmp_path / "release", format="google")
    encoder = from_pretrained(tmp_path / "release" / "bert_model.ckpt", dtype="mixed_bfloat16")
    assert encoder.dtype_policy.name == "mixed_bfloat16"
    _assert_same_weights(tiny_encoder, encoder)  # variables stay float32


def test_failed_save_leaves_nothing_behind(tmp_path, tiny_encoder):
    with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
        save_pretrained(
            tiny_encoder,
            tmp_path / "out",
            format="google",
            vocab_file=tmp_path / "no_such_vocab.txt",
        )
    assert os.listdir(tmp_path) == []

    # Saving over an existing directory replaces the files, keeps the others.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "README").write_text("keep me")
    (tmp_path / "out" / "model.safetensors").write_text("stale")
    save_pretrained(tiny_encoder, tmp_path / "out", format="huggingface")
    assert sorted(os.listdir(tmp_path / "out")) == ["README", "config.json", "model.safetensors"]
    assert sorted(os.listdir(tmp_path)) == ["out"]
    _assert_same_weights(tiny_encoder, from_pretrained(tmp_path / "out"))
