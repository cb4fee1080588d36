"""Fixtures for every test directory."""

import contextlib
import importlib.util
import pathlib

import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"


@contextlib.contextmanager
def _loaded_tool(name):
    """`tools/<name>.py` imported in this process, its absl flags removed afterwards.

    The flags of every tool live in the one global `absl.flags.FLAGS`, and several tools
    share names (`max_seq_length`, `vocab_file`, ...): without the removal, the second
    tool a pytest process imports fails with a DuplicateFlagError.
    """
    from absl import flags

    before = set(flags.FLAGS)
    spec = importlib.util.spec_from_file_location(f"kbz_tools_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        flags.FLAGS.unparse_flags()
        for flag_name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, flag_name)


@pytest.fixture(scope="session")
def load_tool():
    """`with load_tool("convert_checkpoint") as module:` (see `_loaded_tool`)."""
    return _loaded_tool


@pytest.fixture
def packed_batch_keys(monkeypatch):
    """The input keys of every packed training step traced while the test runs.

    Wraps `models.packed.packed_loss_fn` (called at trace time), so a test can check
    that a run really trained on packed batches.
    """
    from keras_bert_zoo.models import packed

    keys = []
    packed_loss_fn = packed.packed_loss_fn

    def recording_loss_fn(model, x, y, sample_weight):
        keys.append(sorted(x))
        return packed_loss_fn(model, x, y, sample_weight)

    monkeypatch.setattr(packed, "packed_loss_fn", recording_loss_fn)
    return keys
