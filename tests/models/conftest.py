"""Fixtures for the model tests: small configs, inputs, and the numpy reference."""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

_REFERENCE_NAME = "kbz_tests_bert_numpy_reference"

# bert_tiny-like but small enough for 2 CPU cores.
SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
}


def load_numpy_reference():
    if _REFERENCE_NAME not in sys.modules:
        path = pathlib.Path(__file__).resolve().parent.parent / "layers" / "bert_numpy_reference.py"
        spec = importlib.util.spec_from_file_location(_REFERENCE_NAME, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_REFERENCE_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[_REFERENCE_NAME]


def randomize_weights(model, seed=0, scale=0.2):
    """Overwrites every variable with non-trivial random values (see tests/layers)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        shape = tuple(variable.shape)
        if "gamma" in variable.path:
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        else:
            value = scale * rng.standard_normal(shape)
        variable.assign(value.astype(variable.dtype))


def make_inputs(batch=3, seq_len=10, vocab_size=97, seed=0, lengths=None, leading=None):
    """Random encoder inputs; `lengths` gives each row's number of real tokens."""
    rng = np.random.default_rng(seed)
    if lengths is None:
        lengths = [seq_len - 2 * i for i in range(batch)]
    word_ids = rng.integers(1, vocab_size, size=(batch, seq_len)).astype("int32")
    mask = np.zeros((batch, seq_len), "int32")
    type_ids = np.zeros((batch, seq_len), "int32")
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        word_ids[row, length:] = 0
        type_ids[row, length // 2 : length] = 1
    return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}


def max_abs_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def random_encoder(activation="gelu_approximate", seed=0, **kwargs):
    """A small `BertEncoder` with random non-trivial weights."""
    from keras_bert_zoo.models import BertEncoder

    encoder = BertEncoder(**{**SMALL, "hidden_act": activation, **kwargs})
    randomize_weights(encoder, seed=seed)
    return encoder


@pytest.fixture(scope="session")
def max_diff():
    return max_abs_diff


@pytest.fixture(scope="session")
def encoder_factory():
    return random_encoder


@pytest.fixture(scope="session")
def ref():
    return load_numpy_reference()


@pytest.fixture(scope="session")
def randomize():
    return randomize_weights


@pytest.fixture(scope="session")
def small_kwargs():
    return dict(SMALL)


@pytest.fixture(scope="session")
def inputs_factory():
    return make_inputs
