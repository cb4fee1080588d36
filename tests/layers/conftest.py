"""Fixtures for the layer tests: the numpy reference and weight randomization."""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

_REFERENCE_NAME = "kbz_tests_bert_numpy_reference"


def load_numpy_reference():
    """Imports tests/layers/bert_numpy_reference.py once, under a unique module name."""
    if _REFERENCE_NAME not in sys.modules:
        path = pathlib.Path(__file__).resolve().parent / "bert_numpy_reference.py"
        spec = importlib.util.spec_from_file_location(_REFERENCE_NAME, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_REFERENCE_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[_REFERENCE_NAME]


def randomize_weights(layer, seed=0, scale=0.2):
    """Overwrites every variable with non-trivial random values.

    The default init (stddev 0.02, zero biases, unit LayerNorm) would let a wrong bias or
    LayerNorm wiring go unnoticed; this makes every parameter matter.
    """
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        shape = tuple(variable.shape)
        if "gamma" in variable.path:
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        else:
            value = scale * rng.standard_normal(shape)
        variable.assign(value.astype(variable.dtype))


@pytest.fixture(scope="session")
def ref():
    return load_numpy_reference()


@pytest.fixture(scope="session")
def randomize():
    return randomize_weights
