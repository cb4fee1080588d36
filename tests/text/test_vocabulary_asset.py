"""The vocabulary travels with the tokenizer: .keras archives and SavedModels reload in a
fresh process after the source vocab.txt is deleted, and give the same ids."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertPreprocessor, BertTokenizer, load_vocab

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve résumé, 中文 and a longer tail of words.",
    "",
]
KEYS = ("input_word_ids", "input_mask", "input_type_ids")

# Loads the three exports written by the test, in a process that never saw the vocab
# file, and prints their outputs as JSON.
_RELOAD_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import keras
    import tensorflow as tf
    import keras_bert_zoo.text  # registers the layers
    keras_path, saved_model_path, archive_path = sys.argv[1:4]
    texts = tf.constant(json.loads(sys.argv[4]))
    keys = ("input_word_ids", "input_mask", "input_type_ids")
    model = keras.saving.load_model(keras_path)  # safe_mode=True
    from_keras = model(texts)
    saved = tf.saved_model.load(saved_model_path)
    from_saved = saved.signatures["serving_default"](texts=texts)
    archive = tf.saved_model.load(archive_path)
    from_archive = archive.serve(texts)
    print(json.dumps({
        "keras": {k: from_keras[k].numpy().tolist() for k in keys},
        "saved_model": {k: from_saved[k].numpy().tolist() for k in keys},
        "archive": {k: from_archive[k].numpy().tolist() for k in keys},
        "vocab_file": saved.preprocessor.tokenizer.vocab_file.asset_path.numpy().decode(),
    }))
    """
)


@pytest.fixture
def own_vocab(uncased_vocab_path, tmp_path):
    """A copy of the real uncased vocabulary that the test may delete."""
    path = tmp_path / "source" / "vocab.txt"
    path.parent.mkdir()
    shutil.copyfile(uncased_vocab_path, path)
    return str(path)


@pytest.mark.slow
def test_exports_reload_in_a_fresh_process_after_the_vocab_is_deleted(own_vocab, tmp_path):
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary=own_vocab), sequence_length=24)
    tokens = load_vocab(own_vocab)
    expected = {k: v.numpy().tolist() for k, v in preprocessor(tf.constant(TEXTS)).items()}
    assert [sum(row) for row in expected["input_mask"]][0] > 10  # real text, not padding

    # A .keras archive: the vocabulary is an asset, the config names no file.
    text = keras.Input(shape=(), dtype="string", name="text")
    model = keras.Model(text, preprocessor(text))
    keras_path = str(tmp_path / "preprocessor.keras")
    model.save(keras_path)
    with zipfile.ZipFile(keras_path) as archive:
        config = json.loads(archive.read("config.json"))
        asset_names = [n for n in archive.namelist() if n.endswith("vocab.txt")]
        assert len(asset_names) == 1
        assert archive.read(asset_names[0]).decode("utf-8").splitlines() == tokens
    assert own_vocab not in json.dumps(config)
    tokenizer_config = config["config"]["layers"][1]["config"]["tokenizer"]["config"]
    assert tokenizer_config["vocabulary"] is None

    # tf.saved_model.save of an object holding the layer.
    module = tf.Module()
    module.preprocessor = preprocessor
    module.serve = tf.function(
        lambda texts: preprocessor(texts), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    saved_model_path = str(tmp_path / "saved_model")
    tf.saved_model.save(module, saved_model_path, signatures={"serving_default": module.serve})

    # keras.export.ExportArchive of the Keras model.
    export = keras.export.ExportArchive()
    export.track(model)
    export.add_endpoint(
        "serve", lambda texts: model(texts), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    archive_path = str(tmp_path / "archive")
    export.write_out(archive_path, verbose=False)
    for path in (saved_model_path, archive_path):
        assert load_vocab(os.path.join(path, "assets", "vocab.txt")) == tokens

    shutil.rmtree(os.path.dirname(own_vocab))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _RELOAD_SCRIPT,
            keras_path,
            saved_model_path,
            archive_path,
            json.dumps(TEXTS),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reloaded = json.loads(result.stdout.strip().splitlines()[-1])
    for name in ("keras", "saved_model", "archive"):
        assert reloaded[name] == expected, name
    assert reloaded["vocab_file"] == os.path.join(saved_model_path, "assets", "vocab.txt")


def test_config_holds_no_vocabulary_and_assets_restore_it(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "qu", "##ick", "."]
    tokenizer = BertTokenizer(vocabulary=tokens, lowercase=True, max_chars_per_token=50)
    config = tokenizer.get_config()
    assert config["vocabulary"] is None and config["lowercase"] is True
    clone = BertTokenizer.from_config(config)
    assert not clone.has_vocabulary
    with pytest.raises(ValueError, match="has no vocabulary"):
        clone(tf.constant(["the quick."]))
    with pytest.raises(ValueError, match="has no vocabulary"):
        clone.token_to_id("the")
    tokenizer.save_assets(str(tmp_path))
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines() == tokens
    clone.load_assets(str(tmp_path))
    assert clone.get_config() == config
    text = tf.constant(["The quick.", "quick the"])
    assert clone(text).to_list() == tokenizer(text).to_list()
    # The preprocessor built from a vocabulary-less tokenizer takes the special ids
    # once the vocabulary arrives.
    preprocessor = BertPreprocessor(BertTokenizer.from_config(config), sequence_length=8)
    preprocessor.tokenizer.load_assets(str(tmp_path))
    packed = preprocessor(tf.constant(["The quick."]))["input_word_ids"].numpy().tolist()
    assert packed == [[2, 4, 5, 6, 7, 3, 0, 0]]


def test_a_config_naming_a_vocab_file_is_refused_in_safe_mode(own_vocab):
    config = {
        "module": "keras_bert_zoo.text.tokenizer",
        "class_name": "BertTokenizer",
        "config": {"vocabulary": own_vocab, "lowercase": True},
        "registered_name": "keras_bert_zoo>BertTokenizer",
    }
    # Keras re-raises the layer's ValueError as a TypeError that quotes it.
    with pytest.raises((TypeError, ValueError), match="Refusing to read the vocabulary") as error:
        keras.saving.deserialize_keras_object(config)
    assert own_vocab in str(error.value)
    tokenizer = keras.saving.deserialize_keras_object(config, safe_mode=False)
    assert tokenizer.vocabulary_size() == len(load_vocab(own_vocab))
    # Outside deserialization a path is what the user asked for.
    np.testing.assert_array_equal(
        BertTokenizer(own_vocab)(tf.constant(["hello"])).to_list(),
        tokenizer(tf.constant(["hello"])).to_list(),
    )
