"""BertTokenizer behaviour: outputs, offsets, casing checks, hostile bytes, config."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertPreprocessor, BertTokenizer, write_vocab
from keras_bert_zoo.text.tokenizer import (
    HUGGING_FACE_MAX_CHARS_PER_WORD,
    ORIGINAL_MAX_CHARS_PER_WORD,
)

SMALL_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "qu", "##ick", ".", "a", "##a", "中", "cafe", "!",
]  # fmt: skip


def ids_of(tokenizer, *tokens):
    return [tokenizer.token_to_id(t) for t in tokens]


@pytest.fixture(scope="module")
def small():
    return BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=True)


def test_tokenize_batch_scalar_and_empty(small):
    out = small(tf.constant(["The quick.", "", "  \t "]))
    assert isinstance(out, tf.RaggedTensor) and out.dtype == tf.int32
    assert out.to_list() == [ids_of(small, "the", "qu", "##ick", "."), [], []]
    assert small.tokenize(tf.constant("Café!")).numpy().tolist() == ids_of(small, "cafe", "!")
    assert small(tf.constant([], tf.string)).to_list() == []


def test_unknown_and_cjk(small):
    out = small(tf.constant(["thequick 中中x"])).to_list()[0]
    assert out == ids_of(small, "[UNK]", "中", "中", "[UNK]")


def test_offsets_are_bytes_of_the_original(small):
    text = "Thé  qUick\u200b.中!"
    ids, starts, ends = small.tokenize_with_offsets(tf.constant([text]))
    data = text.encode("utf-8")
    pieces = [
        data[s:e].decode("utf-8") for s, e in zip(starts[0].numpy(), ends[0].numpy(), strict=True)
    ]
    assert ids[0].numpy().tolist() == ids_of(small, "the", "qu", "##ick", ".", "中", "!")
    # The zero-width space is dropped and belongs to no token.
    assert pieces == ["Thé", "qU", "ick", ".", "中", "!"]
    assert starts.dtype == tf.int64 and ends.dtype == tf.int64


def test_offsets_with_invalid_utf8_and_long_words(small):
    data = b"\xffthe " + b"a" * 12 + b" aaa"
    tokenizer = BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=True, max_chars_per_token=10)
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([data]))
    assert ids[0].numpy().tolist() == ids_of(tokenizer, "the", "[UNK]", "a", "##a", "##a")
    spans = [data[s:e] for s, e in zip(starts[0].numpy(), ends[0].numpy(), strict=True)]
    assert spans == [b"the", b"a" * 12, b"a", b"a", b"a"]


def test_max_chars_per_token_counts_characters_not_bytes():
    tokenizer = BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=True, max_chars_per_token=3)
    got = tokenizer(tf.constant(["aaa aaaa", "áàâ áàâä"])).to_list()
    expected = ids_of(tokenizer, "a", "##a", "##a", "[UNK]")
    assert got == [expected, expected]
    with pytest.raises(ValueError, match="max_chars_per_token"):
        BertTokenizer(vocabulary=SMALL_VOCAB, max_chars_per_token=0)


def test_detokenize(small):
    ids = small(tf.constant(["The quick.", "cafe"]))
    assert small.detokenize(ids).numpy().tolist() == [b"the quick .", b"cafe"]
    assert small.detokenize(ids[0]).numpy() == b"the quick ."


def test_special_ids_and_lookup(small):
    assert (small.pad_token_id, small.unknown_token_id, small.cls_token_id) == (0, 1, 2)
    assert (small.sep_token_id, small.mask_token_id) == (3, 4)
    assert small.vocabulary_size() == len(SMALL_VOCAB)
    assert small.id_to_token(5) == "the"
    with pytest.raises(KeyError):
        small.token_to_id("absent")


@pytest.mark.slow
def test_casing_check_against_the_vocabulary(uncased_vocab_path, cased_vocab_path):
    with pytest.raises(ValueError, match="lowercase=True.*cased") as e:
        BertTokenizer(vocabulary=cased_vocab_path, lowercase=True)
    assert cased_vocab_path in str(e.value)
    with pytest.raises(ValueError, match="lowercase=False.*uncased") as e:
        BertTokenizer(vocabulary=uncased_vocab_path, lowercase=False)
    assert uncased_vocab_path in str(e.value)
    assert BertTokenizer(vocabulary=uncased_vocab_path).lowercase is True
    assert BertTokenizer(vocabulary=cased_vocab_path).lowercase is False
    forced = BertTokenizer(vocabulary=cased_vocab_path, lowercase=True, validate_case=False)
    assert forced.lowercase is True


def test_bad_vocabularies(tmp_path):
    with pytest.raises(ValueError, match="duplicate"):
        BertTokenizer(vocabulary=["[UNK]", "a", "a"])
    with pytest.raises(ValueError, match="unknown token"):
        BertTokenizer(vocabulary=["[PAD]", "a"])
    with pytest.raises(ValueError, match="has no vocabulary"):
        BertTokenizer()(tf.constant(["a"]))
    with pytest.raises(FileNotFoundError):
        BertTokenizer(vocabulary=str(tmp_path / "missing.txt"))


def test_rejects_non_strings_and_bad_ranks(small):
    with pytest.raises(TypeError, match="strings"):
        small(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"\[batch\]"):
        small(tf.constant([["a"]]))


def test_nul_and_invalid_utf8_give_defined_results(small):
    inputs = [b"\x00", b"the\x00quick", b"\xff\xfe\xfd", b"qu\xc3ick", b"\xed\xa0\x80the"]
    got = small(tf.constant(inputs)).to_list()
    assert got == [
        [],
        ids_of(small, "[UNK]"),  # "thequick": NUL is dropped, joining the words
        [],
        ids_of(small, "qu", "##ick"),
        ids_of(small, "the"),
    ]


def test_one_megabyte_lines(small):
    repeats = (1 << 20) // 11
    words = b"the quick. " * repeats
    no_space = b"a" * (1 << 20)
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, size=1 << 20, dtype=np.uint8).tobytes()
    out = small(tf.constant([words, no_space, noise]))
    ids, starts, ends = small.tokenize_with_offsets(tf.constant([words, no_space]))
    lengths = out.row_lengths().numpy()
    assert lengths[0] == 4 * repeats
    assert out[1].numpy().tolist() == [small.unknown_token_id]
    assert ends[1].numpy().tolist() == [1 << 20]
    assert lengths[2] > 0  # random bytes: a defined, finite result
    assert ids.to_list()[0] == out.to_list()[0]


def test_tf_data_and_tf_function(small):
    lines = ["The quick.", "cafe!", "中"]
    expected = small(tf.constant(lines)).to_list()
    per_example = tf.data.Dataset.from_tensor_slices(lines).map(small.tokenize)
    assert [x.tolist() for x in per_example.as_numpy_iterator()] == expected
    batched = tf.data.Dataset.from_tensor_slices(lines).batch(2).map(small)
    assert [row.tolist() for b in batched.as_numpy_iterator() for row in b] == expected
    fn = tf.function(small.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(lines)).to_list() == expected


def test_config_and_assets_round_trip(tmp_path, small):
    """The config holds the settings, the assets the vocabulary (as Keras saving does)."""
    path = write_vocab(str(tmp_path / "vocab.txt"), SMALL_VOCAB)
    from_file = BertTokenizer(vocabulary=path, lowercase=True, max_chars_per_token=50)
    text = tf.constant(["The quick. aaaa 中"])
    for index, layer in enumerate((small, from_file)):
        config = layer.get_config()
        assets = tmp_path / f"assets_{index}"
        assets.mkdir()
        layer.save_assets(str(assets))
        clone = BertTokenizer.from_config(config)
        restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        for copy in (clone, restored):
            copy.load_assets(str(assets))
            assert copy.get_config() == config
            assert copy(text).to_list() == layer(text).to_list()
    assert from_file.get_config()["vocabulary"] is None
    assert from_file.get_config()["max_chars_per_token"] == 50


def test_word_length_limit_defaults_to_the_original_and_configs_keep_theirs(tmp_path):
    """200 characters by default (google-research/bert); a config, or a .keras archive,
    written with another limit (100: Hugging Face's, or this library's old default)
    reloads with that limit."""
    text = tf.constant(["a" * 100, "a" * 101, "a" * 150, "a" * 200, "a" * 201])
    unk = [1]
    split = {n: [9] + [10] * (n - 1) for n in (100, 101, 150, 200)}
    want = {
        200: [split[100], split[101], split[150], split[200], unk],
        100: [split[100], unk, unk, unk, unk],
    }
    default = BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=True)
    assert default.max_chars_per_token == ORIGINAL_MAX_CHARS_PER_WORD == 200
    assert default.get_config()["max_chars_per_token"] == 200
    assert default(text).to_list() == want[200]
    # A config as the old default wrote it (every key, 100 stored explicitly).
    old_config = dict(default.get_config(), max_chars_per_token=100)
    old = BertTokenizer.from_config(old_config)
    old.load_assets(_assets_of(default, tmp_path / "assets"))
    assert old.max_chars_per_token == 100 and old.get_config() == old_config
    assert old(text).to_list() == want[100]
    for limit in (ORIGINAL_MAX_CHARS_PER_WORD, HUGGING_FACE_MAX_CHARS_PER_WORD):
        tokenizer = BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=True, max_chars_per_token=limit)
        inputs = keras.Input(shape=(), dtype="string")
        model = keras.Model(inputs, BertPreprocessor(tokenizer, sequence_length=8)(inputs))
        path = str(tmp_path / f"limit_{limit}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        restored = loaded.layers[1].tokenizer
        assert restored.max_chars_per_token == limit
        assert restored.get_config() == tokenizer.get_config()
        assert restored(text).to_list() == want[limit]


def _assets_of(tokenizer, directory):
    directory.mkdir()
    tokenizer.save_assets(str(directory))
    return str(directory)


def test_save_and_load_assets_round_trip(tmp_path):
    """The Keras saving hooks write vocab.txt and rebuild from it."""
    tokenizer = BertTokenizer(vocabulary=SMALL_VOCAB, lowercase=True)
    tokenizer.save_assets(str(tmp_path))
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").split() == SMALL_VOCAB
    loaded = BertTokenizer(vocabulary=["[UNK]", "x"], lowercase=True)
    loaded.load_assets(str(tmp_path))
    text = tf.constant(["The quick."])
    assert loaded(text).to_list() == tokenizer(text).to_list()
