"""Bad checkpoints: every problem named in one error, and nothing half loaded."""

import json
import logging
import shutil
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from keras_bert_zoo.checkpoints import (
    CheckpointError,
    format_load_problems,
    from_pretrained,
    load_weights,
    plan_load,
    read_checkpoint_info,
    save_pretrained,
)
from keras_bert_zoo.config import BertConfig
from keras_bert_zoo.models import BertEncoder


@pytest.fixture(scope="module")
def saved(tmp_path_factory, helpers):
    """A random bert_tiny encoder saved in both layouts (the good checkpoints to break)."""
    source = helpers.randomize_weights(
        BertEncoder.from_bert_config(BertConfig.from_preset("bert_tiny")), seed=11
    )
    root = tmp_path_factory.mktemp("saved")
    save_pretrained(source, root / "hf", format="huggingface")
    save_pretrained(source, root / "google", format="google")
    return root


@pytest.fixture
def target(helpers):
    """The model a refused load must leave untouched."""
    return helpers.randomize_weights(
        BertEncoder.from_bert_config(BertConfig.from_preset("bert_tiny")), seed=12
    )


def _copy(saved, fmt, tmp_path):
    return shutil.copytree(saved / fmt, tmp_path / fmt)


def _edit_safetensors(directory, edit):
    path = directory / "model.safetensors"
    arrays = load_file(str(path))
    edit(arrays)
    save_file(arrays, str(path))
    return path


def _refused(target, directory, helpers, **kwargs):
    """Asserts the load raises, and that no variable changed; returns the message."""
    before = helpers.snapshot(target)
    with pytest.raises(CheckpointError) as error:
        load_weights(target, directory, **kwargs)
    after = helpers.snapshot(target)
    assert before.keys() == after.keys()
    for name in before:
        assert np.array_equal(before[name], after[name]), f"{name} changed by a refused load"
    return str(error.value)


def _google_tensors(directory):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(directory / "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _rewrite_google(directory, tensors):
    import tensorflow as tf

    for path in directory.glob("bert_model.ckpt.*"):
        path.unlink()
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=str(directory / "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )


def test_every_problem_is_listed_by_name(saved, tmp_path, target, helpers):
    """Wrong shape + missing + extra in one file: one error naming all three."""
    directory = _copy(saved, "hf", tmp_path)

    def edit(arrays):
        arrays["encoder.layer.1.intermediate.dense.bias"] = np.zeros(500, np.float32)
        del arrays["encoder.layer.0.attention.self.key.weight"]
        arrays["encoder.layer.0.attention.self.extra.weight"] = np.zeros((3, 4), np.float32)

    path = _edit_safetensors(directory, edit)
    message = _refused(target, directory, helpers)
    assert str(path) in message
    assert "encoder.layer.1.intermediate.dense.bias" in message
    assert "[500]" in message and "[512]" in message
    assert "encoder.layer.0.attention.self.key.weight" in message
    assert "transformer_layer_0/attention/key/kernel" in message
    assert "encoder.layer.0.attention.self.extra.weight [3, 4]" in message
    assert "No variable was changed" in message


def test_plan_gives_structured_problems_without_reading_a_tensor(
    saved, tmp_path, target, helpers, monkeypatch
):
    """The same three problems, from the pure plan: nothing read, nothing assigned."""
    directory = _copy(saved, "hf", tmp_path)

    def edit(arrays):
        arrays["encoder.layer.1.intermediate.dense.bias"] = np.zeros(500, np.float32)
        del arrays["encoder.layer.0.attention.self.key.weight"]
        arrays["encoder.layer.0.attention.self.extra.weight"] = np.zeros((3, 4), np.float32)

    _edit_safetensors(directory, edit)
    info = read_checkpoint_info(directory)
    source = info.open_tensors()
    monkeypatch.setattr(type(source), "read", lambda *_: pytest.fail("the plan read a tensor"))
    before = helpers.snapshot(target)
    plan = plan_load(target, info, source)
    assert [(m.name, m.row.name, m.shape) for m in plan.missing] == [
        (
            "encoder.layer.0.attention.self.key.weight",
            "transformer_layer_0/attention/key/kernel",
            (128, 128),
        )
    ]
    assert [(u.name, u.shape) for u in plan.unexpected] == [
        ("encoder.layer.0.attention.self.extra.weight", (3, 4))
    ]
    assert [(m.name, m.checkpoint_shape, m.expected_shape) for m in plan.mismatched] == [
        ("encoder.layer.1.intermediate.dense.bias", (500,), (512,))
    ]
    assert plan.config_mismatches == [] and plan.new_heads == []
    assert len(plan.assignments) == len(target.weights) - 2
    assert all(np.array_equal(before[k], v) for k, v in helpers.snapshot(target).items())
    text = format_load_problems(plan)
    assert text.splitlines()[0] == "  missing from the checkpoint (the model has them): 1"
    assert "  unexpected in the checkpoint (the model has no such weight): 1" in text
    assert "  shape mismatch: 1" in text


def test_wrong_shape_in_google_checkpoint(saved, tmp_path, target, helpers):
    directory = _copy(saved, "google", tmp_path)
    tensors = _google_tensors(directory)
    tensors["bert/encoder/layer_0/attention/output/dense/kernel"] = np.zeros((128, 64), np.float32)
    _rewrite_google(directory, tensors)
    message = _refused(target, directory, helpers)
    assert "bert/encoder/layer_0/attention/output/dense/kernel" in message
    assert "[128, 64]" in message and "[128, 128]" in message


@pytest.mark.slow
def test_missing_tensor_refused_then_allowed_partially(saved, tmp_path, target, helpers, caplog):
    directory = _copy(saved, "google", tmp_path)
    tensors = _google_tensors(directory)
    del tensors["bert/pooler/dense/bias"]
    _rewrite_google(directory, tensors)
    message = _refused(target, directory, helpers)
    assert "missing" in message and "bert/pooler/dense/bias" in message
    assert "allow_partial=True" in message

    pooler_bias = np.array(target.pooler_dense.bias.numpy())
    with caplog.at_level(logging.WARNING):
        report = load_weights(target, directory, allow_partial=True)
    assert report.missing == ["bert/pooler/dense/bias"]
    assert "bert/pooler/dense/bias" in caplog.text
    assert np.array_equal(target.pooler_dense.bias.numpy(), pooler_bias)
    assert np.array_equal(target.pooler_dense.kernel.numpy(), tensors["bert/pooler/dense/kernel"])


def test_extra_tensor_in_google_checkpoint(saved, tmp_path, target, helpers):
    directory = _copy(saved, "google", tmp_path)
    tensors = _google_tensors(directory)
    tensors["bert/encoder/layer_0/attention/self/rotary/kernel"] = np.ones((2, 2), np.float32)
    _rewrite_google(directory, tensors)
    message = _refused(target, directory, helpers)
    assert "unexpected" in message
    assert "bert/encoder/layer_0/attention/self/rotary/kernel [2, 2]" in message


def test_optimizer_slots_and_global_step_are_skipped(saved, tmp_path, target, helpers):
    directory = _copy(saved, "google", tmp_path)
    tensors = _google_tensors(directory)
    for name in list(tensors):
        tensors[name + "/adam_m"] = np.zeros_like(tensors[name])
        tensors[name + "/adam_v"] = np.zeros_like(tensors[name])
    tensors["global_step"] = np.array(7, np.int64)
    _rewrite_google(directory, tensors)
    report = load_weights(target, directory)
    assert "global_step" in report.skipped_bookkeeping
    assert "bert/pooler/dense/kernel/adam_v" in report.skipped_bookkeeping
    assert not report.unexpected
    assert np.array_equal(target.pooler_dense.kernel.numpy(), tensors["bert/pooler/dense/kernel"])


@pytest.mark.parametrize("fmt", ["hf", "google"])
def test_config_hidden_size_disagrees_with_weights(saved, tmp_path, fmt, helpers):
    directory = _copy(saved, fmt, tmp_path)
    config_name = "config.json" if fmt == "hf" else "bert_config.json"
    config = json.loads((directory / config_name).read_text())
    config.update(hidden_size=64, num_attention_heads=2)
    (directory / config_name).write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as error:
        from_pretrained(directory)
    message = str(error.value)
    assert str(directory / config_name) in message
    word = "embeddings.word_embeddings.weight" if fmt == "hf" else "bert/embeddings/word_embeddings"
    assert f"{word} (-> embeddings/word_embeddings/embeddings): checkpoint has [30522, 128]" in (
        message
    )
    assert "expects [30522, 64]" in message


def test_config_vocab_size_and_num_layers_disagree(saved, tmp_path):
    directory = _copy(saved, "hf", tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, vocab_size=1000)))
    with pytest.raises(CheckpointError, match=r"\[30522, 128\].*expects \[1000, 128\]"):
        from_pretrained(directory)

    (directory / "config.json").write_text(json.dumps(dict(config, num_hidden_layers=1)))
    with pytest.raises(CheckpointError) as error:
        from_pretrained(directory)
    message = str(error.value)
    assert "encoder.layer.1.output.dense.weight" in message  # unexpected: layer 1
    assert "2 layers" in message and "num_layers=1" in message
    assert str(directory / "config.json") in message


def test_hidden_act_disagreement_is_refused_even_when_partial(saved, tmp_path, target, helpers):
    directory = _copy(saved, "hf", tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, hidden_act="gelu")))
    message = _refused(target, directory, helpers, allow_partial=True)
    assert "hidden_act" in message and "'gelu_approximate'" in message


def test_truncated_safetensors_names_the_file(saved, tmp_path, target, helpers):
    directory = _copy(saved, "hf", tmp_path)
    path = directory / "model.safetensors"
    path.write_bytes(path.read_bytes()[:100_000])
    message = _refused(target, directory, helpers)
    assert str(path) in message and "safetensors" in message


def test_garbage_google_index_names_the_file(saved, tmp_path, target, helpers):
    directory = _copy(saved, "google", tmp_path)
    index = directory / "bert_model.ckpt.index"
    index.write_bytes(b"this is not a tensor bundle index" * 10)
    message = _refused(target, directory, helpers)
    assert str(index) in message


def test_truncated_google_data_names_the_file(saved, tmp_path, target, helpers):
    directory = _copy(saved, "google", tmp_path)
    data = directory / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    message = _refused(target, directory, helpers)
    assert str(data) in message


def test_bad_config_json_names_the_file(saved, tmp_path):
    directory = _copy(saved, "hf", tmp_path)
    (directory / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=str(directory / "config.json")):
        from_pretrained(directory)


def test_unrecognised_directory_lists_its_files(tmp_path):
    (tmp_path / "weights.h5").write_text("")
    with pytest.raises(CheckpointError, match=r"not a recognised BERT checkpoint.*weights\.h5"):
        from_pretrained(tmp_path)


def test_pytorch_bin_without_torch_says_what_to_do(saved, tmp_path, monkeypatch):
    directory = tmp_path / "bin"
    directory.mkdir()
    shutil.copy(saved / "hf" / "config.json", directory / "config.json")
    (directory / "pytorch_model.bin").write_bytes(b"\x00" * 10)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(CheckpointError) as error:
        from_pretrained(directory)
    message = str(error.value)
    assert "pytorch_model.bin" in message and "install torch" in message.lower()
    assert "safetensors" in message
