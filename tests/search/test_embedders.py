"""Texts -> vectors from the three forms of a model: the installed all-MiniLM-L6-v2
against sentence-transformers' own `encode` on real sentences; a tiny checkpoint, its
SavedModel export and a fine-tuned directory each against a numpy restatement (the
encoder on each text's real tokens alone, mean-pooled, normalised); the prompts each
form records; a directory that is none of them refused in one line."""

import pathlib
import shutil

import numpy as np
import pytest
import search_helpers

from keras_bert_zoo import serving, tasks
from keras_bert_zoo.models import BertSentenceEmbedder
from keras_bert_zoo.search import embedders
from keras_bert_zoo.serving.servables import SentenceEmbeddingServable
from keras_bert_zoo.text import BertTokenizer

TEXTS = [
    "the cat sat on the mat",
    "a dog ran far away from the river bank and the money bank",
    "stock market fell",
    "kitten",
    "shares dropped news",
    "the guitar music played on the stage",
] * 3
QUERY_PROMPT, DOCUMENT_PROMPT = "query : ", "passage : "


def _review_sentences(count):
    import gensim

    path = pathlib.Path(gensim.__file__).parent / "test" / "test_data" / "pang_lee_polarity.cor"
    lines = path.read_text("latin-1").splitlines()
    return [line.split(" ", 1)[1].strip() for line in lines if line.strip()][:count]


@pytest.mark.slow
def test_minilm_equals_sentence_transformers(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from keras_bert_zoo.checkpoints.installed import INSTALLED_CHECKPOINTS

    sentences = _review_sentences(60)
    embedder = embedders.open_embedder("all-MiniLM-L6-v2", batch_size=16)
    assert embedder.kind == embedders.SENTENCE_TRANSFORMERS
    assert embedder.source == "all-MiniLM-L6-v2" and embedder.query_prompt is None
    got = embedder.embed(sentences)
    reference = SentenceTransformer(INSTALLED_CHECKPOINTS["all-MiniLM-L6-v2"].path(), device="cpu")
    want = reference.encode(sentences, batch_size=16, normalize_embeddings=True)
    assert got.dtype == np.float32 and got.shape == (60, 384)
    difference = np.abs(got - want).max()
    print(f"MiniLM through open_embedder vs sentence-transformers: {difference:.2g}")
    assert difference < 1e-5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return search_helpers.write_checkpoint(tmp_path_factory.mktemp("search") / "tiny")


@pytest.mark.slow
def test_checkpoint_directory_embeds_as_the_numpy_restatement(checkpoint):
    path, encoder = checkpoint
    embedder = embedders.open_embedder(path, batch_size=4, max_seq_length=16)
    assert embedder.kind == embedders.SENTENCE_TRANSFORMERS
    got = embedder.embed(TEXTS)
    want = search_helpers.mean_pooled_unit_vectors(encoder, TEXTS)
    np.testing.assert_allclose(got, want, atol=2e-5)
    prompted = embedder.embed(TEXTS[:3], prompt=QUERY_PROMPT)
    want = search_helpers.mean_pooled_unit_vectors(encoder, [QUERY_PROMPT + t for t in TEXTS[:3]])
    np.testing.assert_allclose(prompted, want, atol=2e-5)
    assert np.abs(prompted - got[:3]).max() > 1e-3  # the prompt reached the model


@pytest.mark.slow
def test_saved_model_export_embeds_and_records_its_prompts(checkpoint, tmp_path):
    path, encoder = checkpoint
    servable = SentenceEmbeddingServable(
        16, query_prompt=QUERY_PROMPT, document_prompt=DOCUMENT_PROMPT
    )
    tokenizer = BertTokenizer(search_helpers.VOCABULARY, lowercase=True)
    serving.export(
        serving.ModelSource(servable, BertSentenceEmbedder(encoder), tokenizer),
        str(tmp_path),
        model_name="tiny",
        verify=False,  # its answers are compared with numpy below
    )
    # The model directory (its newest version), as TF Serving is given it.
    embedder = embedders.open_embedder(str(tmp_path / "tiny"), batch_size=4)
    assert embedder.kind == embedders.SAVED_MODEL
    assert (embedder.query_prompt, embedder.document_prompt) == (QUERY_PROMPT, DOCUMENT_PROMPT)
    got = embedder.embed(TEXTS[:7], prompt=embedder.document_prompt)
    want = search_helpers.mean_pooled_unit_vectors(
        encoder, [DOCUMENT_PROMPT + t for t in TEXTS[:7]]
    )
    np.testing.assert_allclose(got, want, atol=2e-5)


@pytest.mark.slow
def test_finetuned_directory_embeds_with_its_embedder_and_prompts(tmp_path):
    task = tasks.create_task(
        "sentence_embedding",
        max_seq_length=16,
        query_prompt=QUERY_PROMPT,
        document_prompt=DOCUMENT_PROMPT,
    )
    encoder = search_helpers.tiny_encoder(seed=11)
    model = task.build_model(encoder)
    # A run's layout: its task.json beside finetuned/, the model.
    finetuned = tmp_path / "finetuned"
    tasks.save_finetuned(
        str(finetuned), task, model, BertTokenizer(search_helpers.VOCABULARY, lowercase=True)
    )
    shutil.copy(finetuned / "task.json", tmp_path / "task.json")
    embedder = embedders.open_embedder(str(finetuned), batch_size=4)
    assert embedder.kind == embedders.FINETUNED
    assert (embedder.query_prompt, embedder.document_prompt) == (QUERY_PROMPT, DOCUMENT_PROMPT)
    got = embedder.embed(TEXTS, prompt=embedder.query_prompt)
    want = search_helpers.mean_pooled_unit_vectors(encoder, [QUERY_PROMPT + t for t in TEXTS])
    np.testing.assert_allclose(got, want, atol=2e-5)
    # The run's --output_dir stands for its model.
    from_run = embedders.open_embedder(str(tmp_path), batch_size=4)
    np.testing.assert_allclose(from_run.embed(TEXTS, prompt=QUERY_PROMPT), want, atol=2e-5)


def test_what_is_no_embedding_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="--model=.*absent: no such directory"):
        embedders.open_embedder(str(tmp_path / "absent"))
    with pytest.raises(embedders.EmbedderError, match="no saved_model.pb, task.json or vocab"):
        embedders.open_embedder(str(tmp_path))
    classifier_dir = tmp_path / "classifier"
    search_helpers.save_pair_classifier(tmp_path, classifier_dir)
    with pytest.raises(embedders.EmbedderError, match="not an embedding model"):
        embedders.open_embedder(str(classifier_dir))
