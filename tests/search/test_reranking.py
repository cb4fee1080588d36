"""Re-ranking: the cross-encoder's scores are the fine-tuned pair model's softmax
probability of the relevant class, computed here by calling the Keras model directly
on the packed (query, document) pairs and a numpy softmax; the documents come back in
that order; `answer_queries` puts the re-ranked head before the rest."""

import shutil

import numpy as np
import pytest
import search_helpers
import tensorflow as tf

from keras_bert_zoo.search.answers import answer_queries
from keras_bert_zoo.search.index import CorpusIndex
from keras_bert_zoo.search.reranking import CrossEncoderReranker, RerankerError
from keras_bert_zoo.text import BertPreprocessor

QUERY = "the cat sat on the mat"
DOCUMENTS = [
    "a kitten slept on the sofa",
    "stock market fell",
    "the dog ran far away",
    "shares dropped news",
    "the cat sat",
    "guitar music played on the stage",
]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    root = tmp_path_factory.mktemp("reranker")
    task, model, tokenizer = search_helpers.save_pair_classifier(root, root / "pair_model")
    return str(root / "pair_model"), task, model, tokenizer


def _direct_probabilities(model, tokenizer, task, query, documents):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=task.max_seq_length)
    inputs = preprocessor((tf.constant([query] * len(documents)), tf.constant(documents)))
    logits = np.asarray(model(inputs, training=False), np.float64)
    exponentials = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exponentials / exponentials.sum(axis=1, keepdims=True)


@pytest.mark.slow
def test_scores_are_the_models_probability_of_the_label(classifier):
    path, task, model, tokenizer = classifier
    reranker = CrossEncoderReranker(path, batch_size=4)
    assert reranker.label == "1" and task.label_names == ("0", "1")
    probabilities = _direct_probabilities(model, tokenizer, task, QUERY, DOCUMENTS)
    scores = reranker.scores(QUERY, DOCUMENTS)
    np.testing.assert_allclose(scores, probabilities[:, 1], atol=1e-5)
    assert np.ptp(scores) > 1e-3  # scores that can order the documents
    order, ordered = reranker.rerank(QUERY, DOCUMENTS)
    np.testing.assert_array_equal(order, np.argsort(-probabilities[:, 1], kind="stable"))
    np.testing.assert_allclose(ordered, np.sort(probabilities[:, 1])[::-1], atol=1e-5)
    other = CrossEncoderReranker(path, label="0")
    np.testing.assert_allclose(other.scores(QUERY, DOCUMENTS), probabilities[:, 0], atol=1e-5)


def test_a_runs_output_dir_stands_for_its_model(classifier, tmp_path):
    path, task, model, tokenizer = classifier
    run = tmp_path / "run"  # a run's layout: its task.json beside finetuned/, the model
    shutil.copytree(path, run / "finetuned")
    shutil.copy(run / "finetuned" / "task.json", run / "task.json")
    probabilities = _direct_probabilities(model, tokenizer, task, QUERY, DOCUMENTS)
    scores = CrossEncoderReranker(str(run)).scores(QUERY, DOCUMENTS)
    np.testing.assert_allclose(scores, probabilities[:, 1], atol=1e-5)


def test_answer_queries_reranks_the_head_only(classifier):
    path, task, model, tokenizer = classifier
    reranker = CrossEncoderReranker(path)
    corpus = CorpusIndex(
        ids=[f"d{i}" for i in range(len(DOCUMENTS))],
        texts=DOCUMENTS,
        vectors=np.eye(len(DOCUMENTS), dtype=np.float32),
        manifest={},
    )
    positions = np.array([[5, 4, 3, 2, 1, 0]])
    cosines = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4]], np.float32)
    answers = answer_queries(
        corpus, [QUERY], cosines, positions, top_k=5, reranker=reranker, rerank_top_k=4
    )
    documents = answers[0]["documents"]
    assert len(documents) == 5
    head_texts = [DOCUMENTS[p] for p in positions[0, :4]]
    probabilities = _direct_probabilities(model, tokenizer, task, QUERY, head_texts)[:, 1]
    want_head = [f"d{positions[0, i]}" for i in np.argsort(-probabilities, kind="stable")]
    assert [d["id"] for d in documents[:4]] == want_head
    np.testing.assert_allclose(
        [d["rerank_score"] for d in documents[:4]], np.sort(probabilities)[::-1], atol=1e-5
    )
    # Each keeps its retrieval rank and cosine; the fifth is the retrieval's, unscored.
    for document in documents[:4]:
        rank = document["rank"]
        assert document["cosine"] == pytest.approx(float(cosines[0, rank - 1]))
    assert documents[4]["id"] == "d1" and "rerank_score" not in documents[4]
    plain = answer_queries(corpus, [QUERY], cosines, positions, top_k=3)
    assert [d["id"] for d in plain[0]["documents"]] == ["d5", "d4", "d3"]


@pytest.mark.slow
def test_several_queries_rerank_in_one_call_each_by_its_own_pairs(classifier):
    path, task, model, tokenizer = classifier
    reranker = CrossEncoderReranker(path, batch_size=4)
    calls = []
    pair_scores = reranker.pair_scores
    reranker.pair_scores = lambda pairs: calls.append(len(pairs)) or pair_scores(pairs)
    corpus = CorpusIndex(
        ids=[f"d{i}" for i in range(len(DOCUMENTS))],
        texts=DOCUMENTS,
        vectors=np.eye(len(DOCUMENTS), dtype=np.float32),
        manifest={},
    )
    queries = [QUERY, "market news today", "music on a stage"]
    positions = np.array([[5, 4, 3, 2, 1, 0], [0, 1, 2, 3, 4, 5], [2, 5, 0, 4, 1, 3]])
    cosines = np.tile(np.linspace(0.9, 0.4, 6, dtype=np.float32), (3, 1))
    answers = answer_queries(
        corpus, queries, cosines, positions, top_k=4, reranker=reranker, rerank_top_k=3
    )
    assert calls == [9]  # the three queries' heads in one prediction pass
    for query, row, answer in zip(queries, positions, answers, strict=True):
        head = [DOCUMENTS[p] for p in row[:3]]
        probabilities = _direct_probabilities(model, tokenizer, task, query, head)[:, 1]
        want = [f"d{row[i]}" for i in np.argsort(-probabilities, kind="stable")]
        documents = answer["documents"]
        assert answer["query"] == query and len(documents) == 4
        assert [d["id"] for d in documents[:3]] == want
        np.testing.assert_allclose(
            [d["rerank_score"] for d in documents[:3]], np.sort(probabilities)[::-1], atol=1e-5
        )
        assert documents[3]["id"] == f"d{row[3]}" and "rerank_score" not in documents[3]


@pytest.mark.slow
def test_a_long_rescoring_logs_its_progress_and_keeps_the_scores(classifier, monkeypatch, caplog):
    from keras_bert_zoo.utils import progress

    path, task, model, tokenizer = classifier
    reranker = CrossEncoderReranker(path, batch_size=2)
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)  # a line after every batch
    with caplog.at_level("INFO", logger=progress.__name__):
        scores = reranker.scores(QUERY, DOCUMENTS)
    lines = [record.getMessage() for record in caplog.records]
    counted = [line for line in lines if " of 6 (query, document) pairs " in line]
    assert counted and all(line.startswith("re-scored ") and "ETA" in line for line in counted)
    assert lines[-1].startswith("re-scored 6 (query, document) pairs in ")
    probabilities = _direct_probabilities(model, tokenizer, task, QUERY, DOCUMENTS)
    np.testing.assert_allclose(scores, probabilities[:, 1], atol=1e-5)


def test_a_reranker_must_read_two_texts_and_have_the_label(classifier, tmp_path):
    path, *_ = classifier
    with pytest.raises(RerankerError, match=r"has no class 'yes' \(its classes: \['0', '1'\]\)"):
        CrossEncoderReranker(path, label="yes")
    from keras_bert_zoo import tasks
    from keras_bert_zoo.text import BertTokenizer

    task = tasks.create_task("sentence_embedding", max_seq_length=16)
    model = task.build_model(search_helpers.tiny_encoder(seed=2))
    tokenizer = BertTokenizer(search_helpers.VOCABULARY, lowercase=True)
    tasks.save_finetuned(str(tmp_path / "embedder"), task, model, tokenizer)
    with pytest.raises(RerankerError, match="a re-ranker reads two"):
        CrossEncoderReranker(str(tmp_path / "embedder"))
