"""`BertSentenceEmbedder` and `BertTextGroupEmbedder`: the installed all-MiniLM-L6-v2,
loaded as the embedding model its sentence-transformers files describe, gives
sentence-transformers' own vectors on real sentences; the group model embeds each text as
the single-text model does; both save and reload; padding-free inference and mixed
precision keep the vectors."""

import os
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.checkpoints import from_pretrained
from keras_bert_zoo.checkpoints.installed import INSTALLED_CHECKPOINTS
from keras_bert_zoo.checkpoints.naming import CheckpointError
from keras_bert_zoo.checkpoints.sentence_transformers import (
    SentenceTransformersSettings,
    read_sentence_transformers_settings,
)
from keras_bert_zoo.models import BertEncoder, BertSentenceEmbedder, BertTextGroupEmbedder
from keras_bert_zoo.models.padding_free import padding_free_inference
from keras_bert_zoo.text import BertPreprocessor, BertTokenizer

# sentence-transformers' vectors, within (the issue's bar).
TOLERANCE = 1e-5
SEQUENCE_LENGTH = 80  # the longest review is 65 WordPieces with [CLS] and [SEP]


def _review_sentences() -> list[str]:
    """The 200 movie-review sentences gensim ships (pang_lee_polarity.cor): real text
    no one here wrote."""
    import gensim

    path = pathlib.Path(gensim.__file__).parent / "test" / "test_data" / "pang_lee_polarity.cor"
    lines = path.read_text("latin-1").splitlines()
    return [line.split(" ", 1)[1].strip() for line in lines if line.strip()]


@pytest.fixture(scope="module")
def minilm_dir():
    return INSTALLED_CHECKPOINTS["all-MiniLM-L6-v2"].path()


@pytest.fixture(scope="module")
def minilm_embedder(minilm_dir):
    settings = read_sentence_transformers_settings(minilm_dir)
    return from_pretrained(minilm_dir, model=BertSentenceEmbedder, **settings.model_kwargs())


@pytest.fixture(scope="module")
def reviews(minilm_dir):
    sentences = _review_sentences()
    preprocessor = BertPreprocessor(
        BertTokenizer(os.path.join(minilm_dir, "vocab.txt")), sequence_length=SEQUENCE_LENGTH
    )
    inputs = {k: v.numpy() for k, v in preprocessor(tf.constant(sentences)).items()}
    return sentences, inputs


def test_minilm_settings_come_from_its_files(minilm_dir):
    settings = read_sentence_transformers_settings(minilm_dir)
    assert settings == SentenceTransformersSettings(
        pooling="mean", normalize=True, max_seq_length=256, lowercase=False
    )
    assert read_sentence_transformers_settings("all-MiniLM-L6-v2") == settings


@pytest.mark.slow
def test_minilm_equals_sentence_transformers(minilm_dir, minilm_embedder, reviews, monkeypatch):
    # The installed directory only: nothing downloaded (read when huggingface_hub is
    # first imported; the directory is local either way).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    sentences, inputs = reviews
    reference_model = SentenceTransformer(minilm_dir, device="cpu")
    # The same WordPieces (none cut: all fit in SEQUENCE_LENGTH).
    reference_ids = reference_model.tokenizer(sentences)["input_ids"]
    assert max(map(len, reference_ids)) < SEQUENCE_LENGTH
    for row, ids in zip(inputs["input_word_ids"], reference_ids, strict=True):
        assert row[: len(ids)].tolist() == ids
    expected = reference_model.encode(sentences, batch_size=50, normalize_embeddings=True)

    ours = minilm_embedder.predict(inputs, batch_size=50, verbose=0)
    assert ours.shape == expected.shape == (200, 384)
    difference = np.abs(ours - expected).max()
    print(f"MiniLM vs sentence-transformers: max |difference| {difference:.2g}")
    assert difference < TOLERANCE, difference
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_minilm_group_model_embeds_each_text_as_the_embedder(minilm_embedder, reviews):
    """The training model on the same encoder gives the same vectors, text by text, in
    [batch, texts, seq_len] rows (here review i with review 20 + i)."""
    _, inputs = reviews
    group = BertTextGroupEmbedder(minilm_embedder.encoder)
    pairs = {k: np.stack([v[:20], v[20:40]], axis=1) for k, v in inputs.items()}
    vectors = group.predict(pairs, verbose=0)
    single = minilm_embedder.predict({k: v[:40] for k, v in inputs.items()}, verbose=0)
    assert vectors.shape == (20, 2, 384)
    np.testing.assert_allclose(vectors[:, 0], single[:20], atol=1e-6)
    np.testing.assert_allclose(vectors[:, 1], single[20:], atol=1e-6)


# === Small random models ===

SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}


def _inputs(batch, seq_len=9, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, seq_len + 1, batch)
    lengths[0] = seq_len
    mask = (np.arange(seq_len)[None] < lengths[:, None]).astype("int32")
    return {
        "input_word_ids": rng.integers(1, 97, (batch, seq_len)).astype("int32") * mask,
        "input_mask": mask,
        "input_type_ids": np.zeros_like(mask),
    }


def _randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        value = 0.2 * rng.standard_normal(variable.shape) + ("gamma" in variable.path)
        variable.assign(value.astype("float32"))
    return model


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"pooling": "max", "embedding_dim": 8}, {"pooling": "cls", "normalize": False}],
    ids=["mean_normalized", "max_projected", "cls_raw"],
)
def test_embedder_equals_numpy_pooling_of_the_encoder(kwargs):
    model = _randomized(BertSentenceEmbedder(BertEncoder(**SMALL), **kwargs))
    x = _inputs(5)
    tokens = model.encoder(x)["sequence_output"].numpy().astype(np.float64)
    mask = x["input_mask"].astype(bool)
    pooling = kwargs.get("pooling", "mean")
    pooled = np.stack(
        [
            {"mean": t[m].mean(0), "max": t[m].max(0), "cls": t[0]}[pooling]
            for t, m in zip(tokens, mask, strict=True)
        ]
    )
    if "embedding_dim" in kwargs:
        kernel, bias = (w.numpy() for w in model.projection.weights)
        pooled = pooled @ kernel + bias
    if kwargs.get("normalize", True):
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    vectors = model(x)
    assert model.output_names == ["embedding"] and vectors.dtype == tf.float32
    assert vectors.shape == (5, model.output_dim)
    np.testing.assert_allclose(vectors, pooled, rtol=1e-5, atol=1e-6)


def test_group_model_folds_texts_into_one_encoder_call(tmp_path):
    group = _randomized(BertTextGroupEmbedder(BertEncoder(**SMALL), embedding_dim=12))
    # The group model shares every weight with its embedder (no copy).
    assert {id(v) for v in group.weights} == {id(v) for v in group.embedder.weights}
    flat = _inputs(12, seed=1)
    for texts in (1, 3):
        rows = {k: v.reshape(12 // texts, texts, -1) for k, v in flat.items()}
        np.testing.assert_allclose(
            group(rows).numpy().reshape(12, -1), group.embedder(flat), atol=1e-6
        )
    # Saved and reloaded (.keras), both answer the same.
    for model, x in (
        (group, {k: v.reshape(4, 3, -1) for k, v in flat.items()}),
        (group.embedder, flat),
    ):
        path = str(tmp_path / f"{model.name}.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
        assert type(restored) is type(model)
        assert restored.get_config() == model.get_config()
        np.testing.assert_array_equal(restored(x), model(x))


def test_padding_free_inference_keeps_the_vectors():
    """The export's padding-free encoder leaves zeros at padding, which no pooling
    reads: the class declares `supports_padding_free_inference`."""
    assert BertSentenceEmbedder.supports_padding_free_inference
    for pooling in ("mean", "max"):
        model = _randomized(BertSentenceEmbedder(BertEncoder(**SMALL), pooling=pooling))
        x = _inputs(6, seed=2)
        padded = model(x, training=False)
        with padding_free_inference(model):
            fast = model(x, training=False)
        np.testing.assert_allclose(fast, padded, atol=2e-6)


def test_mixed_precision_vectors_are_float32():
    model = BertSentenceEmbedder(BertEncoder(**SMALL, dtype="mixed_bfloat16"), embedding_dim=8)
    vectors = model(_inputs(3))
    assert vectors.dtype == tf.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_unsupported_sentence_transformers_modules(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(
        '[{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},'
        ' {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]'
    )
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    with pytest.raises(CheckpointError, match="'sentence_transformers.models.Dense' is not supp"):
        read_sentence_transformers_settings(tmp_path)
    (tmp_path / "modules.json").write_text(
        '[{"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    assert read_sentence_transformers_settings(tmp_path) == SentenceTransformersSettings(
        "cls", normalize=False
    )
    (tmp_path / "1_Pooling" / "config.json").write_text(
        '{"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true}'
    )
    with pytest.raises(CheckpointError, match="supported is exactly one of"):
        read_sentence_transformers_settings(tmp_path)
    (tmp_path / "modules.json").unlink()
    assert read_sentence_transformers_settings(tmp_path) is None
